"""Copies and conversions: ``to`` (dtype and device), ``clone``, ``contiguous``, ``copy_``, ``fill_``.

CPU kernels: ``flambeau._kernels.cpu.core``. Kernel convention:
    to_copy: ``kernel(array, np_dtype, src_device, dst_device, non_blocking) -> array`` registered
        under the *destination* device type for moves and the source type otherwise.
    clone / contiguous: ``kernel(array) -> array`` (C-contiguous copy).
    copy_: ``kernel(dst_array, src_array_or_scalar)``; ``src`` is already on dst's device.
    fill_: ``kernel(dst_array, value)``.
"""

from __future__ import annotations

import numpy as np

from flambeau import _dtype as dt
from flambeau._device import CPU, to_device
from flambeau._memory_format import (
    as_format,
    channels_order,
    check_format,
    contiguous_format,
    inverse_order,
    preserve_format,
    suggest_memory_format,
)
from flambeau._ops._common import (
    Tensor,
    _wrap,
    check_tensor,
    grad_state,
    inplace_by_engine,
    inplace_needs_engine,
    record,
)
from flambeau._ops._registry import declare

__all__ = ["to_copy", "clone", "contiguous", "copy_", "fill_", "zero_"]


TO_COPY = declare("to_copy(Tensor input, *, ScalarType dtype, Device device, bool non_blocking=False) -> Tensor",
                  method=False, function=False, category="conversion")


@TO_COPY.front
def to_copy(input: Tensor, *, dtype, device, non_blocking: bool = False) -> Tensor:
    """A copy of ``input`` with ``dtype`` on ``device`` (what ``Tensor.to`` runs when it must copy)."""
    src = input._device
    kernel = TO_COPY.kernel(device.type if device.type != "cpu" else src.type)
    out = _wrap(kernel(input._data, dtype.np, src, device, non_blocking), device)
    if input._requires_grad and grad_state.enabled:
        record(TO_COPY, (input,), {"dtype": dtype, "device": device}, out)
    return out


def to(self: Tensor, *args, dtype=None, device=None, non_blocking: bool = False, copy: bool = False,
       memory_format=None) -> Tensor:
    """Convert dtype and/or move device: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``.

    Returns self when nothing changes and ``copy`` is False. ``memory_format`` is the layout of the result
    (Note [Memory formats are strides] in ``flambeau._memory_format``): ``preserve_format`` (the default)
    keeps a channels-last input channels-last when a copy is made.
    """
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = dtype or a.dtype, device or a._device
        elif isinstance(a, (dt.dtype, type)) or (isinstance(a, np.dtype)):
            dtype = a
        elif isinstance(a, (str, int, type(CPU))) and not isinstance(a, bool):
            if isinstance(a, str) and a in dt._ALIASES and a not in ("cpu", "cuda"):
                dtype = a
            else:
                device = a
        else:
            raise TypeError(f"to() received an invalid argument {a!r}: expected a dtype, a device or a Tensor")
    new_dtype = self.dtype if dtype is None else dt.to_dtype(dtype)
    new_device = self._device if device is None else to_device(device)
    if new_dtype is self.dtype and new_device is self._device and not copy:
        out = self
    else:
        out = to_copy(self, dtype=new_dtype, device=new_device, non_blocking=non_blocking)
    if memory_format is None or memory_format is preserve_format:
        if out is self or self._data.ndim < 4:
            return out
        memory_format = suggest_memory_format(self)
        if memory_format is contiguous_format:
            return out
    check_format(memory_format)
    return as_format(out, memory_format, contiguous)


# ``Tensor.to`` is to_copy's front (Note [Tensor methods from the layers above] in _tensor.py)
TO_COPY.dunders["to"] = to


CLONE = declare("clone(Tensor input) -> Tensor", category="conversion")


@CLONE.front
def clone(input: Tensor, *, memory_format=None) -> Tensor:
    """A copy of ``input`` with its own storage, recorded by autograd. ``memory_format``: its layout (Note [Memory
    formats are strides] in ``flambeau._memory_format``): ``preserve_format`` (the default) keeps a channels-last
    input channels-last and makes every other copy C-contiguous (torch keeps any dense layout's strides);
    ``contiguous_format``, ``channels_last`` or ``channels_last_3d`` lay the copy out so."""
    check_tensor(input, "input", "clone")
    if memory_format is None or memory_format is preserve_format:
        memory_format = suggest_memory_format(input) if input._data.ndim in (4, 5) else contiguous_format
    if memory_format is not contiguous_format:
        check_format(memory_format)
        order = channels_order(input, memory_format)
        if order is not None:  # a C-contiguous copy of the permuted view, viewed back: the format's strides
            return clone(input.permute(*order)).permute(*inverse_order(order))
    out = _wrap(CLONE.kernel(input._device.type)(input._data), input._device)
    if input._requires_grad and grad_state.enabled:
        record(CLONE, (input,), {}, out)
    return out


CONTIGUOUS = declare("contiguous(Tensor input) -> Tensor", function=False, category="conversion")


@CONTIGUOUS.front
def contiguous(input: Tensor, memory_format=None) -> Tensor:
    """``input`` itself if it is C-contiguous, else a C-contiguous copy."""
    if input.is_contiguous():
        return input
    out = _wrap(CONTIGUOUS.kernel(input._device.type)(input._data), input._device)
    if input._requires_grad and grad_state.enabled:
        record(CONTIGUOUS, (input,), {}, out)
    return out


COPY = declare("copy_(Tensor self, Tensor src, bool non_blocking=False) -> Tensor", function=False,
               category="conversion")


@COPY.front
def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcastable, any dtype and device) into ``self`` in place and return self."""
    from flambeau._ops._common import broadcast_shapes
    from flambeau._ops._registry import refuse_internal_overlap

    refuse_internal_overlap(self)  # Note [In-place writes into shared elements]
    if inplace_needs_engine(self, src):
        return inplace_by_engine(COPY, (self, src), {"non_blocking": non_blocking})
    if isinstance(src, Tensor):
        if broadcast_shapes(self._data.shape, src._data.shape) != tuple(self._data.shape):
            raise RuntimeError(
                f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                f"{list(broadcast_shapes(self._data.shape, src._data.shape))}"
            )
        data = src._data
        if src._device is not self._device:
            data = to_copy(src.detach(), dtype=src.dtype, device=self._device, non_blocking=non_blocking)._data
    else:
        data = src
    COPY.kernel(self._device.type)(self._data, data)
    self._storage._version += 1
    return self


FILL = declare("fill_(Tensor self, Scalar value) -> Tensor", category="conversion")  # (torch.fill_ too)


@FILL.front
def fill_(self: Tensor, value) -> Tensor:
    """Fill ``self`` with ``value`` (a number or a one-element tensor) in place."""
    if inplace_needs_engine(self, value):
        return inplace_by_engine(FILL, (self, value), {})
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} "
                               "dimensions.")
        v = value.item()
    else:
        v = value
    FILL.kernel(self._device.type)(self._data, v)
    self._storage._version += 1
    return self


ZERO = declare("zero_(Tensor self) -> Tensor", category="conversion")  # (torch.zero_ too)


@ZERO.front
def zero_(self: Tensor) -> Tensor:
    """Fill ``self`` with zeros in place."""
    if inplace_needs_engine(self):
        return inplace_by_engine(ZERO, (self,), {})
    ZERO.kernel(self._device.type)(self._data)
    self._storage._version += 1
    return self

