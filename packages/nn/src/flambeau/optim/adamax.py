"""Adamax: Adam with the infinity norm in place of the second moment."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim._functional import bump_step, decayed_grad
from flambeau.optim.adam import _check_betas, _lerp_args
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _step_tensor, _to_scalar

__all__ = ["Adamax", "adamax"]


class Adamax(Optimizer):
    r"""Adamax, as ``torch.optim.Adamax``.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t,\quad u_t = \max(\beta_2 u_{t-1}, |g_t| + \epsilon),\quad
        \theta_t = \theta_{t-1} - \frac{\gamma}{1-\beta_1^t}\,\frac{m_t}{u_t}

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate (float or 1-element tensor). Default: 2e-3.
        betas: coefficients of the running average of the gradient and of the infinity norm.
        eps: term added to the absolute gradient. Default: 1e-8.
        weight_decay: L2 penalty. Default: 0.
        foreach, capturable: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.
        fused: None/True: one fused kernel per parameter where possible; False: tensor operators.

    State per parameter: ``step``, ``exp_avg`` and ``exp_inf``.
    """

    _group_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False))

    def __init__(self, params, lr: float | Tensor = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False, fused: bool | None = None):
        _check_lr(lr)
        betas = _check_betas(betas, eps, weight_decay)
        _check_flags(differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        self._fused = fused
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, exp_avgs, exp_infs, steps = self._gather(group, ("exp_avg", "exp_inf", "step"), _init_state)
        beta1, beta2 = group["betas"]
        adamax(params, grads, exp_avgs, exp_infs, steps, eps=group["eps"], beta1=beta1, beta2=beta2,
               lr=group["lr"], weight_decay=group["weight_decay"], maximize=group["maximize"], fused=self._fused)


def _init_state(state, p, group):
    state["step"] = _step_tensor()
    state["exp_avg"] = fl.zeros_like(p)
    state["exp_inf"] = fl.zeros_like(p)


def adamax(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_infs: list[Tensor],
           state_steps: list[Tensor], *, eps: float, beta1: float, beta2: float, lr: float | Tensor,
           weight_decay: float, maximize: bool, fused: bool | None = None) -> None:
    """The update of :class:`Adamax` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        m, u = exp_avgs[i], exp_infs[i]
        step = bump_step(state_steps[i])
        clr = lr / (1 - beta1**step)
        dt = K.fused_dtype(p) if fused is not False else None
        if dt is not None:
            w1, omw1, small = _lerp_args(dt, 1 - beta1)
            if K.launch(K.kernels().adamax, p, g, (m, u), K.pack(dt, weight_decay, w1, omw1, beta2, eps, -clr),
                        maximize, small):
                continue
        grad = decayed_grad(p, g, maximize, weight_decay)
        m.lerp_(grad, 1 - beta1)
        u.copy_(fl.maximum(u.mul_(beta2), grad.abs().add_(eps)))
        p.addcdiv_(m, u, value=-clr)
    K.flush()  # the CUDA parameters, updated together (Note [Multi-tensor CUDA updates])
