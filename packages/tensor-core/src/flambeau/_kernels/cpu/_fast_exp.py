"""A vectorised, multi-threaded ``exp`` for large float32 arrays (Note [Vectorised expf]).

numpy's float32 ``exp`` has no SIMD path on CPUs without AVX-512, and LLVM (numba, without Intel
SVML) turns ``np.exp`` into one libm call per element. Cephes' ``expf`` is branch-free arithmetic
that LLVM vectorises: ``x = k ln2 + r`` with ``|r| <= ln2 / 2`` (ln 2 split in two constants for
exactness), ``e^r`` by a degree-6 polynomial, then a scale by ``2^k``. The scale is applied as two
factors ``2^(k // 2)`` and ``2^(k - k // 2)``, each a normal float32 built from its exponent bits, so
that overflow gives inf, underflow gives 0 and subnormal results are rounded by the multiplication
as they should be. Accurate to about 1 ulp; NaN stays NaN.

``expf_helpers()`` gives the range reduction and polynomial as inline numba helpers, shared by the
fused float32 kernels of softmax, cross-entropy, attention and the LSTM/GRU cells. A kernel reaches
them as globals of its own module (set by its builder before it compiles), never as closure cells:
numba keys its disk cache on closure cells, and a dispatcher there hashes differently in every
process. Being inlined, they are compiled into each caller's cached code: after editing them, clear
the callers' numba caches (numba checks only the caller's own source file).
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["exp_f32", "expf_helpers"]

_expf_poly = None  # numba helper, set by expf_helpers()


@functools.cache
def expf_helpers():
    """``(expf_poly, expf_flush)``, numba helpers inlined into their callers (``inline="always"``,
    so they take the caller's fastmath flags), over float32 scalars:

    ``expf_poly(v) -> (y, k)``: ``e^v = y 2^k``, ``k = floor(v log2 e + 1/2)`` (a float32) and ``y``
    Cephes' polynomial of the reduced argument; the caller clamps ``v`` and builds ``2^k``.
    ``expf_flush(v) -> (y, bits)``: ``e^v = y * bits.view(float32)`` with ``bits`` the int32 pattern of
    ``2^k``; both ``0`` and ``2^0`` below float32's normal range (``v < -87.33``, so e^v flushes to 0).
    For ``v <= 0`` (softmax rows after subtracting the maximum)."""
    global _expf_poly
    import numba

    @numba.njit(inline="always")
    def expf_poly(v):
        k = np.floor(v * np.float32(1.44269504088896341) + np.float32(0.5))
        r = v - k * np.float32(0.693359375) - k * np.float32(-2.12194440e-4)
        y = (((((np.float32(1.9875691500e-4) * r + np.float32(1.3981999507e-3)) * r
                + np.float32(8.3334519073e-3)) * r + np.float32(4.1665795894e-2)) * r
              + np.float32(1.6666665459e-1)) * r + np.float32(5.0000001201e-1)) * r * r + r + np.float32(1.0)
        return y, k

    _expf_poly = expf_poly

    @numba.njit(inline="always")
    def expf_flush(v):
        y, k = _expf_poly(v)
        normal = v >= np.float32(-87.33)
        bits = ((np.int32(k) if normal else np.int32(0)) + np.int32(127)) << np.int32(23)
        return (y if normal else np.float32(0.0)), bits

    return expf_poly, expf_flush


@functools.cache
def _kernel():
    import numba

    expf_helpers()  # sets the module global _expf_poly

    # Each chunk works on local slices: indexing the whole arrays with offsets keeps LLVM from
    # vectorising the loops (measured: 3x slower).
    @numba.njit(parallel=True, cache=True, fastmath={"contract"})
    def expf(x, out):
        n = x.shape[0]
        for c in numba.prange((n + 4095) // 4096):
            lo = c * 4096
            hi = lo + 4096 if lo + 4096 < n else n
            xs, os_ = x[lo:hi], out[lo:hi]
            m = hi - lo
            bits1 = np.empty(m, np.int32)
            bits2 = np.empty(m, np.int32)
            for j in range(m):
                # exp underflows to 0 below -104 and overflows above 89: clamp so k stays in int range
                v = min(max(xs[j], np.float32(-104.0)), np.float32(89.0))
                y, k = _expf_poly(v)
                ki = np.int32(k)
                k1 = ki >> np.int32(1)
                os_[j] = y
                bits1[j] = (k1 + np.int32(127)) << np.int32(23)
                bits2[j] = (ki - k1 + np.int32(127)) << np.int32(23)
            s1 = bits1.view(np.float32)
            s2 = bits2.view(np.float32)
            for j in range(m):
                v = xs[j]
                e = os_[j] * s1[j] * s2[j]
                os_[j] = v if v != v else e  # NaN in, NaN out

    return expf


def exp_f32(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``exp`` of C-contiguous float32 ``a`` (into ``out`` when given, same layout)."""
    if out is None:
        out = np.empty(a.shape, np.float32)
    _kernel()(a.reshape(-1), out.reshape(-1))
    return out
