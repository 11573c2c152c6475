"""``Parameter``: a tensor that a :class:`~flambeau.nn.Module` registers as one of its parameters.

A :class:`Parameter` is a :class:`flambeau.Tensor` subclass (``isinstance(p, flambeau.Tensor)``
holds) sharing the storage of the tensor it wraps. Assigning one as a module attribute registers
it in the module's ``parameters()``. Operators on a parameter return plain tensors; the parameter
itself is an autograd leaf that requires grad unless told otherwise.

:class:`Buffer` marks a tensor to be registered as a buffer when assigned as a module attribute
(``torch.nn.Buffer``); it is a plain tensor once registered.

:class:`UninitializedParameter` and :class:`UninitializedBuffer` are the placeholders of lazy
modules (``nn.LazyLinear`` ...): they hold no data and no shape until ``materialize(shape)`` turns
them, in place, into a :class:`Parameter` / a plain tensor (the same object, so an optimizer built
before the first forward still holds it).
"""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau import Tensor

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]

_subclass = Tensor._make_subclass  # an instance of a Tensor subclass sharing a tensor's memory, a leaf


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
        return _subclass(cls, data, requires_grad)

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
        b = _subclass(cls, data)
        b._requires_grad = data._requires_grad and data.grad_fn is None
        b.persistent = persistent
        return b

    def _plain(self) -> Tensor:
        """The plain tensor stored in the module (same storage)."""
        t = _subclass(Tensor, self)
        t._requires_grad = self._requires_grad
        return t


class UninitializedTensorMixin:
    """What the uninitialized placeholders share: ``materialize`` and the errors of shape access."""

    __slots__ = ()
    cls_to_become: type

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the tensor data of ``shape`` (uninitialized values) and make it a ``cls_to_become``, in place.

        Args:
            shape: the shape of the data.
            device: defaults to the placeholder's device.
            dtype: defaults to the placeholder's dtype.
        """
        device = self.data.device if device is None else device
        dtype = self.data.dtype if dtype is None else dtype
        self.data = fl.empty(shape, device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually "
                           "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
                           "initialized one. Call `forward` to initialize the parameters before accessing their "
                           "attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize "
                           "the parameters before calling `module.share_memory()`.")

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (self.__class__, (self.requires_grad,))

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.data.device, self.data.dtype)
        return memo[id(self)]


def is_lazy(param) -> bool:
    """Whether ``param`` is an :class:`UninitializedParameter` or an :class:`UninitializedBuffer`."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet (the weights of a lazy module before its first forward).

    It holds no data: only ``dtype``, ``device`` and ``requires_grad`` are meaningful, it can be
    moved and cast (``module.to(...)``), and :meth:`materialize` turns it into a :class:`Parameter` in
    place. Reading ``shape`` raises; flambeau has no hook to stop operators from receiving it, so an
    operator given one sees an empty tensor (torch raises ValueError there).

    Args:
        requires_grad: whether the materialized parameter requires gradient.
        device: the device of the materialized parameter.
        dtype: the dtype of the materialized parameter.
    """

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        return Parameter.__new__(cls, fl.empty(0, device=device, dtype=dtype), requires_grad)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (the running statistics of a lazy batch norm).

    Like :class:`UninitializedParameter`, but :meth:`materialize` turns it into a plain tensor.

    Args:
        requires_grad: whether the materialized buffer requires gradient.
        device: the device of the materialized buffer.
        dtype: the dtype of the materialized buffer.
    """

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        return _subclass(cls, fl.empty(0, device=device, dtype=dtype), requires_grad)


def _rebuild_parameter(arr, device_str, requires_grad):
    t = fl.from_numpy(arr)
    if device_str != "cpu":
        t = t.to(device_str)
    return Parameter(t, requires_grad)
