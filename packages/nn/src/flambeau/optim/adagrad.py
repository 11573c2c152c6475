"""Adagrad: per-coordinate learning rates from the sum of squared gradients."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim.optimizer import Optimizer, _bump_step, _check_flags, _check_lr, _step_tensor, _to_scalar

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

    def __init__(self, params, lr: float | Tensor = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None):
        _check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
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

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)

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
                params, grads, sums, steps = [], [], [], []
                for p in group["params"]:
                    if p.grad is not None:
                        state = self.state[p]
                        params.append(p)
                        grads.append(p.grad)
                        sums.append(state["sum"])
                        steps.append(state["step"])
                adagrad(params, grads, sums, steps, lr=group["lr"], weight_decay=group["weight_decay"],
                        lr_decay=group["lr_decay"], eps=group["eps"], maximize=group["maximize"],
                        fused=group["fused"])
        return loss


def adagrad(params: list[Tensor], grads: list[Tensor], state_sums: list[Tensor], state_steps: list[Tensor], *,
            lr: float | Tensor, weight_decay: float, lr_decay: float, eps: float, maximize: bool,
            fused: bool | None = None) -> None:
    """The update of :class:`Adagrad` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        ssum = state_sums[i]
        step = _bump_step(state_steps[i])
        clr = lr / (1 + (step - 1) * lr_decay)
        if fused is not False and K.fusable(p, ssum):
            pd = K.flat(p)
            K.run(K.kernels().adagrad, pd.size, pd, K.flat_grad(g), K.flat(ssum),
                  K.pack(pd.dtype, weight_decay, eps, -clr), maximize)
            p._storage._version += 1
            ssum._storage._version += 1
            continue
        grad = -g if maximize else g
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        ssum.addcmul_(grad, grad, value=1)
        std = ssum.sqrt().add_(eps)
        p.addcdiv_(grad, std, value=-clr)
