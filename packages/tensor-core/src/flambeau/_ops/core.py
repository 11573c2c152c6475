"""Copies and conversions: ``to`` (dtype and device), ``clone``, ``contiguous``, ``copy_``, ``fill_``.

Kernel convention:
    to_copy: ``kernel(array, np_dtype, src_device, dst_device, non_blocking) -> array`` registered
        under the *destination* device type for moves and the source type otherwise.
    clone / contiguous: ``kernel(array) -> array`` (C-contiguous copy).
    copy_: ``kernel(dst_array, src_array_or_scalar)``; ``src`` is already on dst's device.
    fill_: ``kernel(dst_array, value)``.
"""

from __future__ import annotations

import numpy as np

from flambeau._backends import backend
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


def _cpu_to_copy(arr, np_dtype, src, dst, non_blocking):
    if dst.type == "cpu":
        if src.type == "cpu":
            return arr.astype(np_dtype, order="K", copy=True)
        host = backend(src.type).to_numpy(arr)
        return host if host.dtype == np_dtype else host.astype(np_dtype)
    raise NotImplementedError(f"no copy kernel from {src} to {dst}")


TO_COPY = declare("to_copy(Tensor input, *, ScalarType dtype, Device device, bool non_blocking=False) -> Tensor",
                  method=False, function=False, category="conversion", kernels={"cpu": _cpu_to_copy})


@TO_COPY.front
def to_copy(input: Tensor, *, dtype, device, non_blocking: bool = False) -> Tensor:
    """A copy of ``input`` with ``dtype`` on ``device`` (what ``Tensor.to`` runs when it must copy)."""
    src = input._device
    kernel = TO_COPY.kernel(device.type if device.type != "cpu" else src.type)
    out = _wrap(kernel(input._data, dtype.np, src, device, non_blocking), device)
    if input._requires_grad and grad_state.enabled:
        record(TO_COPY, (input,), {"dtype": dtype, "device": device}, out)
    return out


def _cpu_clone(arr):
    return np.array(arr, order="C", copy=True)


CLONE = declare("clone(Tensor input) -> Tensor", category="conversion", kernels={"cpu": _cpu_clone})


@CLONE.front
def clone(input: Tensor, *, memory_format=None) -> Tensor:
    """A copy of ``input`` with its own storage (C-contiguous), recorded by autograd."""
    check_tensor(input, "input", "clone")
    out = _wrap(CLONE.kernel(input._device.type)(input._data), input._device)
    if input._requires_grad and grad_state.enabled:
        record(CLONE, (input,), {}, out)
    return out


CONTIGUOUS = declare("contiguous(Tensor input) -> Tensor", function=False, category="conversion",
                     kernels={"cpu": _cpu_clone})


@CONTIGUOUS.front
def contiguous(input: Tensor, memory_format=None) -> Tensor:
    """``input`` itself if it is C-contiguous, else a C-contiguous copy."""
    if input.is_contiguous():
        return input
    out = _wrap(CONTIGUOUS.kernel(input._device.type)(input._data), input._device)
    if input._requires_grad and grad_state.enabled:
        record(CONTIGUOUS, (input,), {}, out)
    return out


def _cpu_copy(dst, src):
    np.copyto(dst, src, casting="unsafe")


COPY = declare("copy_(Tensor self, Tensor src, bool non_blocking=False) -> Tensor", function=False,
               category="conversion", kernels={"cpu": _cpu_copy})


@COPY.front
def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcastable, any dtype and device) into ``self`` in place and return self."""
    from flambeau._ops._common import broadcast_shapes

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


def _cpu_fill(dst, value):
    dst.fill(value)


FILL = declare("fill_(Tensor self, Scalar value) -> Tensor", function=False, category="conversion",
               kernels={"cpu": _cpu_fill})


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


ZERO = declare("zero_(Tensor self) -> Tensor", function=False, category="conversion",
               kernels={"cpu": lambda dst: dst.fill(0)})


@ZERO.front
def zero_(self: Tensor) -> Tensor:
    """Fill ``self`` with zeros in place."""
    if inplace_needs_engine(self):
        return inplace_by_engine(ZERO, (self,), {})
    ZERO.kernel(self._device.type)(self._data)
    self._storage._version += 1
    return self

