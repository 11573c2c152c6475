"""Adadelta: steps scaled by running averages of squared gradients and squared updates."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim.optimizer import Optimizer, _bump_step, _check_flags, _check_lr, _step_tensor, _to_scalar

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

    def __init__(self, params, lr: float | Tensor = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None):
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_flags(differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, capturable=capturable,
                        foreach=foreach, differentiable=differentiable)
        self._fused = fused
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("_fused", None)
        for group in self.param_groups:
            for key, value in (("foreach", None), ("maximize", False), ("differentiable", False),
                               ("capturable", False)):
                group.setdefault(key, value)

    def step(self, closure=None):
        """Perform one optimization step.

        Args:
            closure: optional callable that re-evaluates the model and returns the loss.

        Returns:
            The closure's loss, or None.
        """
        loss = None
        if closure is not None:
            with fl.enable_grad():
                loss = closure()
        with fl.no_grad():
            for group in self.param_groups:
                params, grads, square_avgs, acc_deltas, steps = [], [], [], [], []
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    params.append(p)
                    grads.append(p.grad)
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _step_tensor()
                        state["square_avg"] = fl.zeros_like(p)
                        state["acc_delta"] = fl.zeros_like(p)
                    square_avgs.append(state["square_avg"])
                    acc_deltas.append(state["acc_delta"])
                    steps.append(state["step"])
                adadelta(params, grads, square_avgs, acc_deltas, steps, lr=group["lr"], rho=group["rho"],
                         eps=group["eps"], weight_decay=group["weight_decay"], maximize=group["maximize"],
                         fused=self._fused)
        return loss


def adadelta(params: list[Tensor], grads: list[Tensor], square_avgs: list[Tensor], acc_deltas: list[Tensor],
             state_steps: list[Tensor], *, lr: float | Tensor, rho: float, eps: float, weight_decay: float,
             maximize: bool, fused: bool | None = None) -> None:
    """The update of :class:`Adadelta` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        sq, acc = square_avgs[i], acc_deltas[i]
        _bump_step(state_steps[i])
        if fused is not False and K.fusable(p, sq, acc):
            pd = K.flat(p)
            K.run(K.kernels().adadelta, pd.size, pd, K.flat_grad(g), K.flat(sq), K.flat(acc),
                  K.pack(pd.dtype, weight_decay, rho, 1 - rho, eps, -lr), maximize)
            for t in (p, sq, acc):
                t._storage._version += 1
            continue
        grad = -g if maximize else g
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        sq.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = sq.add(eps).sqrt_()
        delta = acc.add(eps).sqrt_()
        delta.div_(std).mul_(grad)
        acc.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)
