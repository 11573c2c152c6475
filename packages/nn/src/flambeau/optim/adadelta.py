"""Adadelta: steps scaled by running averages of squared gradients and squared updates."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim._functional import bump_step, decayed_grad
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _check_nonnegative, _step_tensor, _to_scalar

__all__ = ["Adadelta", "adadelta"]


class Adadelta(Optimizer):
    r"""Adadelta, as ``torch.optim.Adadelta``.

    .. math::
        v_t = \rho v_{t-1} + (1-\rho) g_t^2,\quad
        \Delta_t = \frac{\sqrt{u_{t-1} + \epsilon}}{\sqrt{v_t + \epsilon}}\, g_t,\quad
        u_t = \rho u_{t-1} + (1-\rho)\Delta_t^2,\quad \theta_t = \theta_{t-1} - \gamma\Delta_t

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: coefficient scaling the delta (float or 1-element tensor). Default: 1.0.
        rho: coefficient of the running averages. Default: 0.9.
        eps: term added inside the square roots. Default: 1e-6.
        weight_decay: L2 penalty. Default: 0.
        foreach, capturable: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.
        fused: None/True: one fused kernel per parameter where possible; False: tensor operators.

    State per parameter: ``step``, ``square_avg`` and ``acc_delta``.
    """

    _group_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False))

    def __init__(self, params, lr: float | Tensor = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None):
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _check_nonnegative(eps=eps, weight_decay=weight_decay)
        _check_flags(differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, capturable=capturable,
                        foreach=foreach, differentiable=differentiable)
        self._fused = fused
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, square_avgs, acc_deltas, steps = self._gather(group, ("square_avg", "acc_delta", "step"),
                                                                     _init_state)
        adadelta(params, grads, square_avgs, acc_deltas, steps, lr=group["lr"], rho=group["rho"], eps=group["eps"],
                 weight_decay=group["weight_decay"], maximize=group["maximize"], fused=self._fused)


def _init_state(state, p, group):
    state["step"] = _step_tensor()
    state["square_avg"] = fl.zeros_like(p)
    state["acc_delta"] = fl.zeros_like(p)


def adadelta(params: list[Tensor], grads: list[Tensor], square_avgs: list[Tensor], acc_deltas: list[Tensor],
             state_steps: list[Tensor], *, lr: float | Tensor, rho: float, eps: float, weight_decay: float,
             maximize: bool, fused: bool | None = None) -> None:
    """The update of :class:`Adadelta` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        sq, acc = square_avgs[i], acc_deltas[i]
        bump_step(state_steps[i])
        dt = K.fused_dtype(p) if fused is not False else None
        if dt is not None:
            if K.launch(K.kernels().adadelta, p, g, (sq, acc), K.pack(dt, weight_decay, rho, 1 - rho, eps, -lr),
                        maximize):
                continue
        grad = decayed_grad(p, g, maximize, weight_decay)
        sq.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = sq.add(eps).sqrt_()
        delta = acc.add(eps).sqrt_()
        delta.div_(std).mul_(grad)
        acc.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)
    K.flush()  # the CUDA parameters, updated together (Note [Multi-tensor CUDA updates])
