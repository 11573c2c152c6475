"""The CPU backend: storages are numpy arrays; views are numpy arrays over them."""

from __future__ import annotations

import sys

import numpy as np

ndarray = np.ndarray


def empty(shape: tuple, np_dtype) -> np.ndarray:
    """An uninitialised C-contiguous array."""
    return np.empty(shape, np_dtype)


def data_ptr(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def storage_data_ptr(buffer: np.ndarray) -> int:
    # The lowest address the buffer spans (strides of our buffers are never negative).
    return buffer.__array_interface__["data"][0]


def as_strided(buffer: np.ndarray, shape: tuple, strides: tuple, offset: int, np_dtype=None) -> np.ndarray:
    """A view of ``buffer`` with ``shape``, element ``strides`` and element ``offset``, its elements of
    ``np_dtype`` (default: the buffer's; another one views the same bytes, as ``Tensor.view(dtype)``).

    ``buffer`` is a storage's owner array; bounds are checked by the caller.
    """
    dtype = buffer.dtype if np_dtype is None else np.dtype(np_dtype)
    item = dtype.itemsize
    # Storage buffers are always one contiguous block (C or F order, or flat), so ravel('K') is a
    # view in memory order.
    return np.ndarray(shape, dtype, buffer=buffer.ravel(order="K"), offset=offset * item,
                      strides=tuple(s * item for s in strides))


def flat_buffer_of(arr: np.ndarray) -> np.ndarray:
    """A contiguous array spanning exactly the memory ``arr`` views, to serve as its storage.

    ``arr`` must have non-negative strides. Contiguous arrays are their own buffer.
    """
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        return arr
    item = arr.dtype.itemsize
    extent = 1 + sum((n - 1) * (s // item) for n, s in zip(arr.shape, arr.strides)) if arr.size else 0
    return np.lib.stride_tricks.as_strided(arr, (extent,), (item,))


def owns_memory_alone(data) -> bool:
    """Whether no array but ``data`` can reach its memory (so a gradient may become ``.grad`` without a copy).

    A kernel's result is often a reshaped view of the array it computed (a GEMM's output seen as
    a convolution's weight shape): its owner is then a plain array that only ``data`` refers to
    (references: ``data.base``, the local and getrefcount's argument). ``data`` itself must be one
    tensor's alone (references: the tensor's, its storage's, the argument and getrefcount's): a kernel
    that returns one array for two results gives two tensors over it, which must not both become
    ``.grad`` of different leaves.
    """
    if data.__class__ is not np.ndarray or sys.getrefcount(data) > 4:
        return False
    owner = data.base
    return owner is None or (owner.__class__ is np.ndarray and owner.base is None and sys.getrefcount(owner) == 3)


def to_numpy(arr: np.ndarray) -> np.ndarray:
    return arr


def from_numpy(arr: np.ndarray, device=None) -> np.ndarray:
    return arr


def copy_(dst: np.ndarray, src) -> None:
    """Copy ``src`` (an array of any device, broadcastable) into ``dst``."""
    np.copyto(dst, src, casting="unsafe")


def synchronize(device=None) -> None:
    """CPU work is synchronous: nothing to wait for."""
