"""Adagrad: per-coordinate learning rates from the sum of squared gradients."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim._functional import bump_step, decayed_grad
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _check_nonnegative, _step_tensor, _to_scalar

__all__ = ["Adagrad", "adagrad"]


class Adagrad(Optimizer):
    r"""Adagrad, as ``torch.optim.Adagrad``.

    .. math::
        \tilde\gamma = \frac{\gamma}{1 + (t-1)\eta}, \quad s_t = s_{t-1} + g_t^2, \quad
        \theta_t = \theta_{t-1} - \tilde\gamma\,\frac{g_t}{\sqrt{s_t} + \epsilon}

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate (float or 1-element tensor). Default: 1e-2.
        lr_decay: learning-rate decay :math:`\eta`. Default: 0.
        weight_decay: L2 penalty. Default: 0.
        initial_accumulator_value: initial value of the sums :math:`s_0`. Default: 0.
        eps: term added to the denominator. Default: 1e-10.
        foreach: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.
        fused: None/True: one fused kernel per parameter where possible; False: tensor operators.

    State per parameter (created at construction, as torch does): ``step`` and ``sum``.
    """

    _group_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("fused", None))

    def __init__(self, params, lr: float | Tensor = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None):
        _check_lr(lr)
        _check_nonnegative(lr_decay=lr_decay, weight_decay=weight_decay,
                           initial_accumulator_value=initial_accumulator_value, eps=eps)
        _check_flags(differentiable)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = _step_tensor()
                state["sum"] = fl.full_like(p, group["initial_accumulator_value"])

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, sums, steps = self._gather(group, ("sum", "step"))
        adagrad(params, grads, sums, steps, lr=group["lr"], weight_decay=group["weight_decay"],
                lr_decay=group["lr_decay"], eps=group["eps"], maximize=group["maximize"], fused=group["fused"])


def adagrad(params: list[Tensor], grads: list[Tensor], state_sums: list[Tensor], state_steps: list[Tensor], *,
            lr: float | Tensor, weight_decay: float, lr_decay: float, eps: float, maximize: bool,
            fused: bool | None = None) -> None:
    """The update of :class:`Adagrad` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        ssum = state_sums[i]
        step = bump_step(state_steps[i])
        clr = lr / (1 + (step - 1) * lr_decay)
        dt = K.fused_dtype(p) if fused is not False else None
        if dt is not None:
            if K.launch(K.kernels().adagrad, p, g, (ssum,), K.pack(dt, weight_decay, eps, -clr), maximize):
                continue
        grad = decayed_grad(p, g, maximize, weight_decay)
        ssum.addcmul_(grad, grad, value=1)
        std = ssum.sqrt().add_(eps)
        p.addcdiv_(grad, std, value=-clr)
    K.flush()  # the CUDA parameters, updated together (Note [Multi-tensor CUDA updates])
