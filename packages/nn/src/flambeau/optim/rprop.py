"""Rprop: resilient backpropagation, per-element step sizes adapted from the signs of the gradient."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim._functional import bump_step
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _step_tensor, _to_scalar

__all__ = ["Rprop", "rprop"]


class Rprop(Optimizer):
    r"""Rprop, as ``torch.optim.Rprop``.

    Each element keeps a step size :math:`\eta`: multiplied by ``etas[1]`` when the gradient kept
    its sign, by ``etas[0]`` when it flipped (and that step is skipped), clamped to
    ``step_sizes``; the parameter moves by :math:`-\eta\,\mathrm{sign}(g)`.

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: initial step size (float or 1-element tensor). Default: 1e-2.
        etas: (decrease, increase) factors, with ``0 < etas[0] < 1 < etas[1]``. Default: (0.5, 1.2).
        step_sizes: (minimum, maximum) step size. Default: (1e-6, 50).
        capturable, foreach: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.

    State per parameter: ``step``, ``prev`` (the previous gradient) and ``step_size``. The update
    runs as flambeau tensor operators (no fused kernel).
    """

    _group_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False))

    def __init__(self, params, lr: float | Tensor = 1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _check_flags(differentiable)
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, prevs, step_sizes, steps = self._gather(group, ("prev", "step_size", "step"), _init_state)
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        rprop(params, grads, prevs, step_sizes, steps, step_size_min=step_size_min, step_size_max=step_size_max,
              etaminus=etaminus, etaplus=etaplus, maximize=group["maximize"])


def _init_state(state, p, group):
    state["step"] = _step_tensor()
    state["prev"] = fl.zeros_like(p)
    state["step_size"] = fl.full_like(p.grad, _to_scalar(group["lr"]))


def rprop(params: list[Tensor], grads: list[Tensor], prevs: list[Tensor], step_sizes: list[Tensor],
          state_steps: list[Tensor], *, step_size_min: float, step_size_max: float, etaminus: float, etaplus: float,
          maximize: bool) -> None:
    """The update of :class:`Rprop` on lists of parameters and their state (see the class for the arguments)."""
    for p, g, prev, step_size, step_t in zip(params, grads, prevs, step_sizes, state_steps):
        bump_step(step_t)
        grad = -g if maximize else g
        sign = grad.mul(prev).sign()
        flipped = sign < 0
        factor = fl.where(sign > 0, fl.full_like(sign, etaplus), fl.where(flipped, fl.full_like(sign, etaminus),
                                                                            fl.ones_like(sign)))
        step_size.mul_(factor).clamp_(step_size_min, step_size_max)
        grad = fl.where(flipped, fl.zeros_like(grad), grad)
        p.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)
