"""Helpers shared by operator front functions: the autograd call, devices, dims, errors."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from flambeau import _dtype as dt
from flambeau._device import CPU
from flambeau._grad_mode import _engine
from flambeau._grad_mode import state as grad_state
from flambeau._size import broadcast_error, broadcast_shapes, normalize_shape
from flambeau._tensor import Tensor, _wrap, _wrap_dim

__all__ = ["record", "record_if_needed", "inplace_needs_engine", "inplace_by_engine", "common_device",
           "wrap_dim", "dims_arg", "broadcast_error", "Tensor", "_wrap", "grad_state", "check_tensor",
           "broadcast_shapes", "normalize_shape", "storage_view", "wrap_optional"]

wrap_dim = _wrap_dim


def storage_view(input: Tensor, shape: tuple, strides: tuple, offset: int, dtype) -> Tensor:
    """A view tensor of ``dtype`` over ``input``'s storage bytes (``shape``, element ``strides`` and
    ``offset`` counted in ``dtype``'s elements), on any device; not recorded for autograd."""
    from flambeau._backends import backend

    arr = backend(input._device.type).as_strided(input._storage._buffer, shape, strides, offset, dtype.np)
    out = _wrap(arr, input._device, input._storage, dtype)
    out._base = input if input._base is None else input._base
    return out


def record(op, inputs: tuple, attrs: dict, outputs) -> None:
    """Hand an executed operator to the autograd engine (caller checked grad mode and inputs)."""
    engine = _engine[0]
    if engine is not None:
        engine.record(op, inputs, attrs, outputs)


def record_if_needed(op, inputs: tuple, attrs: dict, outputs) -> None:
    """Record ``op`` if grad mode is on and any tensor among ``inputs`` requires grad.

    ``inputs`` may hold non-tensors and (nested one level) sequences of tensors (``cat``).
    """
    if not grad_state.enabled or _engine[0] is None:
        return
    for x in inputs:
        if isinstance(x, Tensor):
            if x._requires_grad:
                break
        elif isinstance(x, (list, tuple)) and any(isinstance(t, Tensor) and t._requires_grad for t in x):
            break
    else:
        return
    _engine[0].record(op, inputs, attrs, outputs)


def inplace_needs_engine(self: Tensor, *others) -> bool:
    """Whether in-place operator on ``self`` with ``others`` must be handed to the autograd engine.

    See Note [In-place operators under autograd] in flambeau-autograd: the engine then runs the
    operator itself, so that it can keep the old value and check leaves before anything changes.
    """
    if not grad_state.enabled or _engine[0] is None:
        return False
    if self._requires_grad:
        return True
    for x in others:
        if isinstance(x, Tensor) and x._requires_grad:
            return True
    return False


def inplace_by_engine(op, inputs: tuple, attrs: dict):
    """Run in-place ``op`` through the autograd engine (after :func:`inplace_needs_engine` said so)."""
    return _engine[0].apply_inplace(op, inputs, attrs)


def wrap_optional(results, device) -> tuple:
    """A kernel's results as tensors on ``device``, None kept (the backward operators' gradients not asked for)."""
    return tuple(None if r is None else _wrap(r, device) for r in results)


def output_mask_of(output_mask, opname: str) -> tuple:
    """A backward operator's ``output_mask`` as a tuple of 3 bools (which of the input, weight and bias gradients
    to make), else RuntimeError naming the operator."""
    mask = tuple(bool(m) for m in output_mask)
    if len(mask) != 3:
        raise RuntimeError(f"{opname}(): expected output_mask of 3 booleans, got {list(output_mask)}")
    return mask


def check_tensor(x, argname: str, opname: str) -> Tensor:
    """``x`` if it is a Tensor, else TypeError naming the operator, argument and given type."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{opname}(): argument '{argname}' must be Tensor, not {type(x).__name__}")
    return x


def common_device(*tensors):
    """The device all tensor arguments share; 0-dim CPU tensors may join any device, as in torch."""
    found = None
    for t in tensors:
        if t.__class__ is not Tensor and not isinstance(t, Tensor):
            continue
        d = t._device
        if found is None or found is d:
            found = d
        elif d is CPU and t._data.ndim == 0:
            continue
        elif found is CPU and _only_scalar_cpu(tensors, found):
            found = d
        else:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {found} and {d}!"
            )
    return CPU if found is None else found


def same_device(first: Tensor, *others):
    """``first``'s device, which every tensor of ``others`` (None skipped) must share: no 0-dim CPU tensor joins
    another device here, as :func:`common_device` lets it, where a kernel reads the tensor's memory (indices)."""
    d = first._device
    for t in others:
        if t is not None and t._device is not d:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {d} and {t._device}!"
            )
    return d


def _only_scalar_cpu(tensors, cpu) -> bool:
    return all(t._data.ndim == 0 for t in tensors if isinstance(t, Tensor) and t._device is cpu)


def dims_arg(dim, ndim: int, argname: str = "dim") -> tuple:
    """Normalise ``dim`` (None, an int, or a tuple/list of ints) to a sorted tuple of dims.

    None means every dimension. A repeated dim raises RuntimeError.
    """
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = tuple(_wrap_dim(d, ndim) for d in dim)
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"dim {dims} appears multiple times in the list of dims")
        return tuple(sorted(dims))
    return (_wrap_dim(dim, ndim),)




def as_array_operand(x, device):
    """A tensor's backend array, or a Python/numpy scalar unchanged (for kernels)."""
    return x._data if isinstance(x, Tensor) else x


def to_np_dtype(d) -> np.dtype:
    return dt.to_dtype(d).np


def return_type(name: str, fields, doc: str | None = None) -> type:
    """The namedtuple class ``flambeau.return_types.<name>`` of a multi-output operator (torch's
    ``torch.return_types``), printed as torch prints them: one field per line."""
    cls = namedtuple(name, fields)
    cls.__module__ = "flambeau.return_types"
    cls.__repr__ = _return_type_repr
    if doc is not None:
        cls.__doc__ = doc
    return cls


def _return_type_repr(self) -> str:
    fields = ",\n".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
    return f"flambeau.return_types.{type(self).__name__}(\n{fields})"
