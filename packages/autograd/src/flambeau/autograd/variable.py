"""``Variable``: the pre-0.4 wrapper of tensors, kept as torch keeps it for old programs.

Since torch 0.4 every tensor records autograd history itself; ``Variable(t, requires_grad=...)``
returns a tensor sharing ``t``'s data, with no history and the ``requires_grad`` asked for, and every
tensor is an instance of ``Variable``.
"""

from __future__ import annotations

import warnings

import flambeau as fl
from flambeau import Tensor

__all__ = ["Variable", "VariableMeta"]


class VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)``: ``data.detach()`` (same storage, no
    history) with ``requires_grad`` set, as ``torch.autograd.Variable``; an empty float tensor without
    ``data``; ``volatile`` was removed (it warns, as torch)."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with flambeau.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            data = fl.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out
