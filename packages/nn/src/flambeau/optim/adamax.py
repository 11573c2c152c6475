"""Adamax: Adam with the infinity norm in place of the second moment."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim.adam import _check_betas, _lerp_args
from flambeau.optim.optimizer import Optimizer, _bump_step, _check_flags, _check_lr, _step_tensor, _to_scalar

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
                params, grads, exp_avgs, exp_infs, steps = [], [], [], [], []
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    params.append(p)
                    grads.append(p.grad)
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _step_tensor()
                        state["exp_avg"] = fl.zeros_like(p)
                        state["exp_inf"] = fl.zeros_like(p)
                    exp_avgs.append(state["exp_avg"])
                    exp_infs.append(state["exp_inf"])
                    steps.append(state["step"])
                beta1, beta2 = group["betas"]
                adamax(params, grads, exp_avgs, exp_infs, steps, eps=group["eps"], beta1=beta1, beta2=beta2,
                       lr=group["lr"], weight_decay=group["weight_decay"], maximize=group["maximize"],
                       fused=self._fused)
        return loss


def adamax(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_infs: list[Tensor],
           state_steps: list[Tensor], *, eps: float, beta1: float, beta2: float, lr: float | Tensor,
           weight_decay: float, maximize: bool, fused: bool | None = None) -> None:
    """The update of :class:`Adamax` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        m, u = exp_avgs[i], exp_infs[i]
        step = _bump_step(state_steps[i])
        clr = lr / (1 - beta1**step)
        if fused is not False and K.fusable(p, m, u):
            pd = K.flat(p)
            w1, omw1, small = _lerp_args(pd.dtype, 1 - beta1)
            K.run(K.kernels().adamax, pd.size, pd, K.flat_grad(g), K.flat(m), K.flat(u),
                  K.pack(pd.dtype, weight_decay, w1, omw1, beta2, eps, -clr), maximize, small)
            for t in (p, m, u):
                t._storage._version += 1
            continue
        grad = -g if maximize else g
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        m.lerp_(grad, 1 - beta1)
        u.copy_(fl.maximum(u.mul_(beta2), grad.abs().add_(eps)))
        p.addcdiv_(m, u, value=-clr)
