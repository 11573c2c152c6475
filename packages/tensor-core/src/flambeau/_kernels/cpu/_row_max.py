"""``row_max(xr)``, the largest element of a 1-d float array, for the fused row kernels of softmax and
attention (Note [Row maxima in eight lanes]); numba is imported when it is first asked for.

Note [Row maxima in eight lanes]: a running maximum, "v if v > m or v != v else m", is one long dependency
chain with a branch, about 0.7 ns per element (a 4096x1000 float32 softmax spent 2.9 of its 3.5 ms
there). Eight running maxima are independent chains, about 0.07 ns per element. NaN is not tracked: a
kernel whose exponentials would hide it (the vectorised expf takes NaN to 0) checks for NaN in its
exponential pass, which reads every element anyway.
"""

from __future__ import annotations

import functools

__all__ = ["row_max_helper"]


@functools.cache
def row_max_helper():
    """The numba helper ``row_max(xr)``, inlined into its callers (``inline="always"``); a caller reaches it
    as a global of its own module, not a closure cell (see ``_fast_exp``)."""
    import numba

    @numba.njit(inline="always")
    def row_max(xr):
        n = xr.shape[0]
        m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = xr[0]
        k = 0
        while k + 8 <= n:
            m0, m1, m2, m3 = max(m0, xr[k]), max(m1, xr[k + 1]), max(m2, xr[k + 2]), max(m3, xr[k + 3])
            m4, m5, m6, m7 = max(m4, xr[k + 4]), max(m5, xr[k + 5]), max(m6, xr[k + 6]), max(m7, xr[k + 7])
            k += 8
        m = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
        while k < n:
            m = max(m, xr[k])
            k += 1
        return m

    return row_max
