"""Tensor methods of torch's older API that build on the factories: ``new``, ``new_empty_strided``, the Python
callable maps ``apply_``/``map_``/``map2_`` (CPU only, as torch's), ``module_load`` and ``record_stream``.

Bound onto :class:`~flambeau.Tensor` on import (Note [Tensor methods from the layers above]).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from flambeau._factories import empty, empty_strided, tensor
from flambeau._size import Size
from flambeau._tensor import Tensor

__all__: list[str] = []


def new(self: Tensor, *args, device=None) -> Tensor:
    """Legacy constructor of this tensor's dtype and device: ``x.new(2, 3)`` (uninitialised), ``x.new([1, 2])``
    (data, as :meth:`new_tensor`), ``x.new(size)`` for a :class:`flambeau.Size`, ``x.new()`` (empty)."""
    dev = self.device if device is None else device
    if len(args) == 1 and not isinstance(args[0], (int, Size)) and not isinstance(args[0], np.integer):
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not self.dtype:
                raise TypeError(f"expected {self.type()} (got {data.type()})")
            return data
        return tensor(data, dtype=self.dtype, device=dev)
    size = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else args
    return empty(*size, dtype=self.dtype, device=dev) if size else empty(0, dtype=self.dtype, device=dev)


def new_empty_strided(self: Tensor, size, stride, *, dtype=None, device=None, requires_grad: bool = False,
                      layout=None, pin_memory: bool = False) -> Tensor:
    """``empty_strided(size, stride)`` of this tensor's dtype and device unless given."""
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         device=self.device if device is None else device, requires_grad=requires_grad)


def resize(self: Tensor, *sizes) -> Tensor:
    """Deprecated (warns): this tensor's elements in shape ``sizes`` (same element count), a view of a
    contiguous copy recorded by autograd, as torch's non-inplace ``resize``."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _resize(self, sizes)


def resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """Deprecated (warns): :func:`resize` to ``tensor``'s shape."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _resize(self, tuple(tensor.shape))


def _resize(self: Tensor, sizes) -> Tensor:
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
    n = math.prod(shape)
    if n != self.numel():
        raise RuntimeError(f"requested resize to {'x'.join(map(str, shape))} ({n} elements in total), but the given "
                           f"tensor has a size of {'x'.join(map(str, self.shape))} ({self.numel()} elements). "
                           "autograd's resize can only change the shape of a given tensor, while preserving the "
                           "number of elements. ")
    return self.contiguous().view(shape)


def _check_map(self: Tensor, method: str) -> None:
    if self._device.type != "cpu":
        raise TypeError(f"{method} is only implemented on CPU tensors")
    if self.requires_grad:
        raise RuntimeError(f"Can't call {method}() on Variable that requires grad. Use var.detach().{method}() "
                           "instead.")


def _store(self: Tensor, values) -> Tensor:
    self._data[...] = values
    self._storage._version += 1
    return self


def apply_(self: Tensor, callable) -> Tensor:
    """Replace each element ``x`` by ``callable(x)`` (a Python number function), in place. Slow: CPU only."""
    _check_map(self, "apply_")
    values = [callable(x) for x in self._data.reshape(-1).tolist()]
    return _store(self, np.array(values).astype(self.dtype.np).reshape(self._data.shape))


def map_(self: Tensor, tensor: Tensor, callable) -> Tensor:
    """``self[i] = callable(self[i], tensor[i])`` for every element (``tensor`` broadcast to self). CPU only."""
    return _map(self, (tensor,), callable, "map_")


def map2_(self: Tensor, x: Tensor, y: Tensor, callable) -> Tensor:
    """``self[i] = callable(self[i], x[i], y[i])`` for every element (``x``, ``y`` broadcast to self). CPU only."""
    return _map(self, (x, y), callable, "map2_")


def _map(self: Tensor, others, callable, method: str) -> Tensor:
    _check_map(self, method)
    columns = [self._data.reshape(-1).tolist()]
    for other in others:
        if not isinstance(other, Tensor):
            raise TypeError(f"{method}(): expected a Tensor, got {type(other).__name__}")
        if other.dtype is not self.dtype:
            raise TypeError(f"{method}(): expected a tensor of dtype {self.dtype}, got {other.dtype}")
        try:
            spread = np.broadcast_to(other.numpy(force=True), self._data.shape)
        except ValueError:
            raise RuntimeError(f"The expanded size of the tensor ({self._data.shape[-1] if self.ndim else 1}) must "
                               f"match the existing size ({other.shape[-1] if other.ndim else 1}) at non-singleton "
                               f"dimension {self.ndim - 1}.  Target sizes: {list(self.shape)}.  Tensor sizes: "
                               f"{list(other.shape)}") from None
        columns.append(spread.reshape(-1).tolist())
    values = [callable(*row) for row in zip(*columns)]
    return _store(self, np.array(values).astype(self.dtype.np).reshape(self._data.shape))


def module_load(self: Tensor, other: Tensor, assign: bool = False) -> Tensor:
    """How ``Module.load_state_dict`` loads ``other`` into this parameter's tensor: ``other.detach()`` with
    ``assign=True``, else ``self.copy_(other).detach()`` (as torch's)."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


def record_stream(self: Tensor, stream) -> None:
    """Mark this CUDA tensor as used by ``stream`` (``flambeau.cuda.record_stream``): its memory is not reused
    until the work queued there so far is done."""
    from flambeau import cuda

    if self._device.type != "cuda":
        raise RuntimeError(f"record_stream(): expected a CUDA tensor, got a tensor on {self._device}")
    cuda.record_stream(self, stream)


for _name, _method in {"resize": resize, "resize_as": resize_as, "new": new, "new_empty_strided": new_empty_strided,
                       "apply_": apply_, "map_": map_, "map2_": map2_, "module_load": module_load,
                       "record_stream": record_stream}.items():
    setattr(Tensor, _name, _method)
del _name, _method
