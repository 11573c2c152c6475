"""Helpers of the functional forms of the optimizers (``adam()``, ``sgd()`` ...): the step counter, the
gradient that the tensor-operator updates start from, and the check that a gradient fits its parameter."""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau import Tensor


def check_grad(p: Tensor, g: Tensor, name: str = "grad") -> None:
    """Raise a RuntimeError, naming both, unless gradient ``g`` has the shape, dtype and device of ``p``.

    Note [Gradient checks]
        The fused kernels index a gradient by its parameter's flat index (Note [Fused optimizer
        kernels]), so a gradient of another shape would be read past its end: the parameter would
        fill with garbage, or the process crash. A stale gradient is easy to get: ``.grad``'s setter
        checks an assigned gradient, but replacing ``p.data`` after ``backward`` (or ``p.grad.data``)
        changes one side only. So :meth:`Optimizer._gather` checks every gradient before a group's
        update touches anything (parameters and state stay unchanged when it raises), and
        :func:`flambeau.optim._kernels.launch` checks again what each kernel indexes, for the
        functional forms called directly. The checks compare a few attributes: nothing is allocated.

    Args:
        p: the parameter.
        g: its gradient.
        name: how the message names the gradient (``"Adam.step(): param_groups[0]['params'][3].grad"``).
    """
    if g._data.shape != p._data.shape:
        what = f"the wrong shape: expected {list(p.shape)} (the parameter's shape), got {list(g.shape)}"
    elif g.dtype is not p.dtype:
        what = f"the wrong dtype: expected {p.dtype} (the parameter's dtype), got {g.dtype}"
    elif g._device is not p._device:
        what = f"the wrong device: expected {p._device} (the parameter's device), got {g._device}"
    else:
        return
    raise RuntimeError(f"{name} has {what}. A gradient must have its parameter's shape, dtype and device; if the "
                       "parameter's .data was replaced after its .grad was set, reset the gradient (zero_grad()) "
                       "before the next step.")


def bump_step(step_t: Tensor) -> float:
    """``step_t += 1`` in the counter's dtype; returns the new value as a Python float."""
    a = step_t._data
    if a.__class__ is not np.ndarray or a.ndim != 0:
        with fl.no_grad():
            step_t.add_(1)
        return step_t.item()
    a[()] = a + 1
    step_t._storage._version += 1
    return float(a)


def decayed_grad(p: Tensor, g: Tensor, maximize: bool, weight_decay: float, decoupled_lr: float | None = None):
    """The gradient of the tensor-operator updates: ``g`` negated for ``maximize``, plus ``weight_decay * p``
    (L2 penalty) or, given ``decoupled_lr``, with ``p`` scaled by ``1 - decoupled_lr * weight_decay`` in place
    instead (AdamW's decoupled decay)."""
    grad = -g if maximize else g
    if weight_decay != 0:
        if decoupled_lr is not None:
            p.mul_(1 - decoupled_lr * weight_decay)
        else:
            grad = grad.add(p, alpha=weight_decay)
    return grad
