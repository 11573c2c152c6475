"""CPU kernels of the copies and conversions of ``flambeau._ops.core`` (whose docstring gives the
calling conventions): ``to_copy``, ``clone``, ``contiguous``, ``copy_``, ``fill_``, ``zero_``.

Complex values converted to a real dtype keep their real parts, silently (torch warns once; the
autograd engine converts the complex gradients of real inputs this way, where torch warns nothing).
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._backends import backend
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel


def _real_part(arr, np_dtype):
    """``arr``'s real parts when complex ``arr`` goes to a real dtype (numpy would warn), else ``arr``."""
    return arr.real if arr.dtype.kind == "c" and np.dtype(np_dtype).kind != "c" else arr


@kernel("to_copy", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def _cpu_to_copy(arr, np_dtype, src, dst, non_blocking):
    arr = _real_part(arr, np_dtype) if src.type == "cpu" else arr
    if dst.type == "cpu":
        if src.type == "cpu":
            return arr.astype(np_dtype, order="K", copy=True)
        host = backend(src.type).to_numpy(arr)
        return host if host.dtype == np_dtype else host.astype(np_dtype)
    raise NotImplementedError(f"no copy kernel from {src} to {dst}")


# Note [Parallel copies]: numpy copies on one thread, at about a third of what two threads reach on
# data in cache (a 6 MiB clone: 0.27 ms, torch's 0.07-0.09 ms). Large C-contiguous copies between
# arrays of one dtype and shape move their bytes in blocks over numba's threads instead: clone and
# contiguous, and copy_ (autograd's in-place route keeps a clone of the old value).
_PARALLEL_COPY_MIN_BYTES = 1 << 20
_COPY_BLOCK = 1 << 16  # bytes per block


@functools.cache
def _numba_copy():
    import numba

    @numba.njit(parallel=True, cache=True)
    def copy_bytes(src, dst):
        n = src.shape[0]
        for b in numba.prange((n + _COPY_BLOCK - 1) // _COPY_BLOCK):
            lo = b * _COPY_BLOCK
            hi = min(lo + _COPY_BLOCK, n)
            dst[lo:hi] = src[lo:hi]

    return copy_bytes


def _parallel_copy_fits(dst, src) -> bool:
    return (src.__class__ is np.ndarray and dst.nbytes >= _PARALLEL_COPY_MIN_BYTES and dst.dtype == src.dtype
            and dst.shape == src.shape and dst.flags.c_contiguous and src.flags.c_contiguous
            and not np.may_share_memory(dst, src))


def _copy_bytes(dst, src) -> None:
    _numba_copy()(src.reshape(-1).view(np.uint8), dst.reshape(-1).view(np.uint8))


@kernel("clone", "cpu")
@kernel("contiguous", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def _cpu_clone(arr):
    if arr.nbytes >= _PARALLEL_COPY_MIN_BYTES and arr.flags.c_contiguous:  # Note [Parallel copies]
        out = np.empty(arr.shape, arr.dtype)
        _copy_bytes(out, arr)
        return out
    return np.array(arr, order="C", copy=True)


@kernel("copy_", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def copy_kernel(dst, src):
    """``dst[...] = src`` with casting; also the CPU kernel of the in-place random methods
    (``normal_`` ...), whose fronts draw the values on the host."""
    if _parallel_copy_fits(dst, src):  # Note [Parallel copies]
        _copy_bytes(dst, src)
        return
    np.copyto(dst, _real_part(src, dst.dtype) if src.__class__ is np.ndarray else src, casting="unsafe")


@kernel("fill_", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def _cpu_fill(dst, value):
    dst.fill(value)


@kernel("zero_", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def _cpu_zero(dst):
    dst.fill(0)
