"""CUDA kernels of the searching family (calling convention: ``flambeau._ops.searching``'s docstring;
Note [numba.cuda bound on first use] in ``_launch``).

One thread per value runs the binary search of the CPU kernel (``flambeau._kernels.cpu.searching``)
over its row of boundaries, through ``sorter`` when given. A sorter entry outside ``[0, M)`` is not
followed: it is recorded in the error flag (Note [Device-side index checks] in ``indexing``), and the
next host synchronisation raises.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._kernels.cuda._launch import ERR_INDEX, be, bind_numba_cuda, error_flag, jit, launch_1d, stream
from flambeau._ops._registry import kernel

__all__ = ["searchsorted", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

# The value dtypes the kernel is compiled for (the front promotes both operands to one of them).
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")


def _search_py():
    bind_numba_cuda(globals())

    def search(bd, vals, sorter, use_sorter, right, out, M, K, n, err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            b = i // K
            v = vals[i]
            lo = 0
            hi = M
            while lo < hi:
                mid = lo + ((hi - lo) >> 1)
                j = mid
                if use_sorter:
                    j = sorter[b * M + mid]
                    if j < 0 or j >= M:
                        err[0] = ERR_INDEX
                        err[1] = j
                        err[2] = M
                        j = mid
                mv = bd[b * M + j]
                if not (mv > v if right else mv >= v):  # torch's lower/upper bound (a NaN v moves right)
                    lo = mid + 1
                else:
                    hi = mid
            out[i] = lo
            i += step

    return search


@functools.cache
def _search_kernel():
    bind_numba_cuda(globals())
    return jit(_search_py())


@kernel("searchsorted", "cuda")
def searchsorted(boundaries, values, right, sorter, out_dtype):
    backend = be()
    B, M = boundaries.shape
    K = values.shape[1]
    out = backend.empty((B, K), np.dtype(out_dtype))
    n = B * K
    order = sorter if sorter is not None else backend.empty((1, 1), np.int64)
    grid, block = launch_1d(n)
    _search_kernel()[grid, block, stream()](
        backend.flat_view(boundaries), backend.flat_view(values), backend.flat_view(order), sorter is not None,
        bool(right), backend.flat_view(out), M, K, n, error_flag())
    return out


def ptx_cases() -> list:
    """``(label, python function, signature)`` of the search kernel per value dtype and result dtype."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    def arr(t):
        return types.Array(t, 1, "C")

    cases = []
    for name in DTYPES:
        t = from_dtype(np.dtype(name))
        for out in (types.int32, types.int64):
            cases.append((f"searchsorted:{name}:{out}", _search_py(),
                          (arr(t), arr(t), arr(types.int64), types.boolean, types.boolean, arr(out), types.int64,
                           types.int64, types.int64, arr(types.int64))))
    return cases
