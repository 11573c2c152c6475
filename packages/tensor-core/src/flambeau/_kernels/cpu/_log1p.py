"""``log1p`` of ``u`` in ``[0, 1]`` for the fused numba kernels (log_sigmoid, binary cross-entropy with logits),
where ``u = exp(-|x|)``; numba is imported when the helpers are first asked for.

Note [log1p by its atanh series]: numpy's float32 ``log1p`` has no SIMD loop and LLVM turns ``math.log1p``
into one libm call per element. ``log(1 + u) = 2 atanh(s)`` with ``s = u / (2 + u)`` in ``[0, 1/3]``, and
atanh's odd series ``s + s^3/3 + s^5/5 + ...`` is arithmetic that LLVM vectorises: to ``s^13`` in float32 and
``s^31`` in float64 its remainder is below an ulp.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["log1p_unit_helpers"]


@functools.cache
def log1p_unit_helpers():
    """``(log1p_unit32, log1p_unit64)``, numba helpers inlined into their callers (``inline="always"``); a
    caller reaches them as globals of its own module, not closure cells (see ``_fast_exp``)."""
    import numba

    f32 = np.float32

    @numba.njit(inline="always")
    def log1p_unit32(u):
        s = u / (f32(2) + u)
        z = s * s
        p = f32(1 / 13)
        p = p * z + f32(1 / 11)
        p = p * z + f32(1 / 9)
        p = p * z + f32(1 / 7)
        p = p * z + f32(1 / 5)
        p = p * z + f32(1 / 3)
        p = p * z + f32(1)
        return f32(2) * s * p

    @numba.njit(inline="always")
    def log1p_unit64(u):
        s = u / (2.0 + u)
        z = s * s
        p = 1.0 / 31.0
        for k in range(29, 0, -2):
            p = p * z + 1.0 / k
        return 2.0 * s * p

    return log1p_unit32, log1p_unit64
