"""``Parameter``: a tensor that a :class:`~flambeau.nn.Module` registers as one of its parameters.

A :class:`Parameter` is a :class:`flambeau.Tensor` subclass (``isinstance(p, flambeau.Tensor)``
holds) sharing the storage of the tensor it wraps. Assigning one as a module attribute registers
it in the module's ``parameters()``. Operators on a parameter return plain tensors; the parameter
itself is an autograd leaf that requires grad unless told otherwise.

:class:`Buffer` marks a tensor to be registered as a buffer when assigned as a module attribute
(``torch.nn.Buffer``); it is a plain tensor once registered.
"""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau import Tensor

__all__ = ["Parameter", "Buffer"]

_new = object.__new__


def _share_fields(dst: Tensor, src: Tensor) -> None:
    dst._data = src._data
    dst._storage = src._storage
    dst._device = src._device
    dst.dtype = src.dtype
    dst._requires_grad = False
    dst._grad = None
    dst.grad_fn = None
    dst._base = None
    dst._autograd_meta = None


class Parameter(Tensor):
    """A tensor registered as a module parameter when assigned as a :class:`~flambeau.nn.Module` attribute.

    Args:
        data: the tensor to wrap (its storage is shared, not copied). Defaults to an empty
            float tensor.
        requires_grad: whether the parameter requires gradient (default True). Only floating
            tensors can require gradient.

    The parameter is always a leaf of the autograd graph, even when ``data`` was computed by
    recorded operations (its history is not kept).
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = fl.empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): argument 'data' must be a Tensor, not {type(data).__name__}")
        p = _new(cls)
        _share_fields(p, data)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __repr__(self) -> str:
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.data.clone(), self.requires_grad)
        if self._grad is not None:
            result._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (np.array(self.numpy(force=True)), str(self._device), self.requires_grad))


class Buffer(Tensor):
    """A marker: a tensor assigned as a module attribute inside ``Buffer(...)`` is registered as a buffer.

    Args:
        data: the tensor to wrap (its storage is shared). Defaults to an empty float tensor.
        persistent: whether the buffer is part of the module's ``state_dict`` (default True).
    """

    __slots__ = ("persistent",)

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            data = fl.empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): argument 'data' must be a Tensor, not {type(data).__name__}")
        b = _new(cls)
        _share_fields(b, data)
        b._requires_grad = data._requires_grad and data.grad_fn is None
        b.persistent = persistent
        return b

    def _plain(self) -> Tensor:
        """The plain tensor stored in the module (same storage)."""
        t = _new(Tensor)
        _share_fields(t, self)
        t._requires_grad = self._requires_grad
        return t


def _rebuild_parameter(arr, device_str, requires_grad):
    t = fl.from_numpy(arr)
    if device_str != "cpu":
        t = t.to(device_str)
    return Parameter(t, requires_grad)
