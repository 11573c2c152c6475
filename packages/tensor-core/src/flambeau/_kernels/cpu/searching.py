"""CPU kernels of the searching family (calling convention: ``flambeau._ops.searching``'s docstring).

One numba loop, compiled on first use per dtype: a binary search per value with torch's
comparisons, so NaN and repeated boundaries land where torch puts them (numpy's ``searchsorted``
orders NaN as the largest value instead).
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._ops._registry import kernel

__all__ = ["searchsorted"]


@functools.cache
def _search_kernel():
    import numba

    @numba.njit(cache=True, nogil=True)
    def search(bd, vals, sorter, use_sorter, right, out):
        B, M = bd.shape
        K = vals.shape[1]
        for b in range(B):
            for k in range(K):
                v = vals[b, k]
                lo = 0
                hi = M
                while lo < hi:
                    mid = lo + ((hi - lo) >> 1)
                    mv = bd[b, sorter[b, mid]] if use_sorter else bd[b, mid]
                    # torch's lower/upper bound: move right unless ``mv >= v`` (``mv > v``); a NaN v moves right
                    if not (mv > v if right else mv >= v):
                        lo = mid + 1
                    else:
                        hi = mid
                out[b, k] = lo
        return 0

    return search


@kernel("searchsorted", "cpu")
def searchsorted(boundaries, values, right, sorter, out_dtype):
    out = np.empty(values.shape, out_dtype)
    if sorter is not None and sorter.size:
        lo, hi = sorter.min(), sorter.max()
        if lo < 0 or hi >= boundaries.shape[1]:
            raise RuntimeError("flambeau.searchsorted(): sorter index out of range")
    order = sorter if sorter is not None else np.zeros((1, 1), np.int64)
    bd, vals = boundaries, values
    if bd.dtype == np.float16:  # numba has no float16 arithmetic: compare in float32 (exact)
        bd, vals = bd.astype(np.float32), vals.astype(np.float32)
    _search_kernel()(bd, vals, order, sorter is not None, bool(right), out)
    return out
