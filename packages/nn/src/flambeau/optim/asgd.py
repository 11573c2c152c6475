"""ASGD: averaged stochastic gradient descent."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim._functional import bump_step, decayed_grad
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _check_nonnegative, _step_tensor, _to_scalar

__all__ = ["ASGD", "asgd"]


class ASGD(Optimizer):
    r"""Averaged SGD, as ``torch.optim.ASGD``.

    .. math::
        \theta_t = \theta_{t-1}(1 - \lambda\eta_t) - \eta_t g_t, \quad
        \bar\theta_t = \bar\theta_{t-1} + \mu_t(\theta_t - \bar\theta_{t-1}), \quad
        \eta_{t+1} = \frac{\gamma}{(1 + \lambda\gamma t)^\alpha}, \quad \mu_{t+1} = \frac{1}{\max(1, t - t_0)}

    The average :math:`\bar\theta` is kept in the state as ``ax``.

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate :math:`\gamma` (float or 1-element tensor). Default: 1e-2.
        lambd: decay term :math:`\lambda`. Default: 1e-4.
        alpha: power of the eta update. Default: 0.75.
        t0: step at which averaging starts. Default: 1e6.
        weight_decay: L2 penalty. Default: 0.
        foreach, capturable: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.

    State per parameter: ``step``, ``eta``, ``mu`` (0-dim float32 tensors) and ``ax``. The update
    runs as flambeau tensor operators (no fused kernel).
    """

    _group_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False))

    def __init__(self, params, lr: float | Tensor = 1e-2, lambd: float = 1e-4, alpha: float = 0.75, t0: float = 1e6,
                 weight_decay: float = 0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        _check_lr(lr)
        _check_nonnegative(weight_decay=weight_decay)
        _check_flags(differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, mus, axs, etas, steps = self._gather(group, ("mu", "ax", "eta", "step"), _init_state)
        asgd(params, grads, axs, mus, etas, steps, lambd=group["lambd"], lr=group["lr"], t0=group["t0"],
             alpha=group["alpha"], weight_decay=group["weight_decay"], maximize=group["maximize"])


def _init_state(state, p, group):
    state["step"] = _step_tensor()
    state["eta"] = _step_tensor().add_(_to_scalar(group["lr"]))
    state["mu"] = _step_tensor().add_(1)
    state["ax"] = fl.zeros_like(p)


def asgd(params: list[Tensor], grads: list[Tensor], axs: list[Tensor], mus: list[Tensor], etas: list[Tensor],
         state_steps: list[Tensor], *, lambd: float, lr: float | Tensor, t0: float, alpha: float, weight_decay: float,
         maximize: bool) -> None:
    """The update of :class:`ASGD` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for p, g, ax, mu, eta, step_t in zip(params, grads, axs, mus, etas, state_steps):
        step = bump_step(step_t)
        grad = decayed_grad(p, g, maximize, weight_decay)
        eta_value = eta.item()
        p.mul_(1 - lambd * eta_value)
        p.add_(grad, alpha=-eta_value)
        mu_value = mu.item()
        if mu_value != 1:
            ax.add_(p.sub(ax).mul_(mu_value))
        else:
            ax.copy_(p)
        eta.fill_(lr / ((1 + lambd * lr * step) ** alpha))
        mu.fill_(1 / max(1, step - t0))
