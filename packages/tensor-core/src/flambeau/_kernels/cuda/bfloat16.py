"""bfloat16 on CUDA: kernels read its 16-bit patterns, and compute in float32.

Note [bfloat16 on CUDA]
    numba types no kernel argument of ``ml_dtypes.bfloat16``, so no kernel of flambeau is ever
    launched with a bfloat16 array. Kernels that only move data read a bfloat16 device array as
    ``uint16`` bits (:func:`flambeau._backends.cuda.reinterpret`, no copy): copies, fills and casts
    (``flambeau._kernels.cuda.core``). Two strided integer kernels convert: :func:`widen` (bits
    ``<< 16`` are the float32 of the same value, exactly) and :func:`narrow` (float32 bits rounded to
    the nearest even bfloat16, NaN kept quiet, as ml_dtypes and torch round). Every other kernel runs
    through :func:`via_float32` (Note [bfloat16 through float32] in ``flambeau._kernels._low_precision``):
    float32 arithmetic and accumulation, rounded once per operator. The conversion kernels are
    integer kernels, so they also run under numba's simulator, where the test suite checks that no
    launch ever receives a bfloat16 array.
"""

from __future__ import annotations

import numpy as np

from flambeau._kernels._low_precision import BF16, WRITTEN, Conversions
from flambeau._kernels._low_precision import via_float32 as _via_float32
from flambeau._kernels.cuda._launch import be, is_array
from flambeau._kernels.cuda.elementwise import nary, nary_python, nary_signature

__all__ = ["BF16", "CONVERSIONS", "widen", "narrow", "via_float32", "ptx_cases"]

_F32 = np.dtype(np.float32)
_U16, _U32 = np.dtype(np.uint16), np.dtype(np.uint32)


# --- the two scalar functions (uint32 in, bit patterns out) -------------------------------------------
def _widen_bits(x, p):
    return x << 16  # the bfloat16's bits are the top half of its float32's


def _narrow_bits(x, p):
    if (x & 0x7FFFFFFF) > 0x7F800000:  # NaN: keep sign and payload's top bits, make it quiet
        return (x >> 16) | 0x40
    return (x + 0x7FFF + ((x >> 16) & 1)) >> 16  # round to nearest, ties to even


def widen(x):
    """A new C-contiguous float32 device array holding bfloat16 device array ``x``'s values (exact)."""
    backend = be()
    out = backend.empty(tuple(x.shape), _F32)
    nary(_widen_bits, 1, _U32, (backend.reinterpret(x, _U16),), out=backend.reinterpret(out, _U32))
    return out


def narrow(x, out=None):
    """float32 device array ``x`` rounded to bfloat16: a new array, or written into bfloat16 ``out``
    (any strides; ``x`` broadcasts to it)."""
    backend = be()
    if out is None:
        out = backend.empty(tuple(x.shape), BF16)
    nary(_narrow_bits, 1, _U32, (backend.reinterpret(x, _U32),), out=backend.reinterpret(out, _U16))
    return out


# --- every other kernel: through float32 (Note [bfloat16 through float32]) ---------------------------
def _views(r, arrays) -> bool:
    return False  # CUDA kernels answer with new arrays; view operators make their views in the fronts


CONVERSIONS = Conversions(is_array, widen, narrow, _views)


def via_float32(fn, writes: tuple = WRITTEN):
    """:func:`flambeau._kernels._low_precision.via_float32` for CUDA kernel ``fn``."""
    return _via_float32(fn, CONVERSIONS, writes)


def ptx_cases(ndim: int = 1) -> list:
    """``(label, python_function, signature)`` of the two conversion kernels as launched: uint16 bits
    to uint32 and back, through the ternary template computing in uint32."""
    from numba import types

    t = types.uint32
    u16, u32 = types.Array(types.uint16, 1, "C"), types.Array(types.uint32, 1, "C")
    return [("bfloat16:widen", nary_python(_widen_bits, 1, "uint32"), nary_signature(u32, u16, t, ndim)),
            ("bfloat16:narrow", nary_python(_narrow_bits, 1, "uint32"), nary_signature(u16, u32, t, ndim))]
