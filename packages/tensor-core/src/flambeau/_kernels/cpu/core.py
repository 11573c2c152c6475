"""CPU kernels of the copies and conversions of ``flambeau._ops.core`` (whose docstring gives the
calling conventions): ``to_copy``, ``clone``, ``contiguous``, ``copy_``, ``fill_``, ``zero_``.

Complex values converted to a real dtype keep their real parts, silently (torch warns once; the
autograd engine converts the complex gradients of real inputs this way, where torch warns nothing).
"""

from __future__ import annotations

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


@kernel("clone", "cpu")
@kernel("contiguous", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def _cpu_clone(arr):
    return np.array(arr, order="C", copy=True)


@kernel("copy_", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def copy_kernel(dst, src):
    """``dst[...] = src`` with casting; also the CPU kernel of the in-place random methods
    (``normal_`` ...), whose fronts draw the values on the host."""
    np.copyto(dst, _real_part(src, dst.dtype) if src.__class__ is np.ndarray else src, casting="unsafe")


@kernel("fill_", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def _cpu_fill(dst, value):
    dst.fill(value)


@kernel("zero_", "cpu")
@takes_bfloat16  # numpy casts and copies bfloat16 itself
def _cpu_zero(dst):
    dst.fill(0)
