"""Helpers of the functional forms of the optimizers (``adam()``, ``sgd()`` ...): the step counter and the
gradient that the tensor-operator updates start from."""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau import Tensor


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
