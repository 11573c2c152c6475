"""CUDA kernels of the numeric family (Note [numba.cuda bound on first use] in ``_launch``).

nextafter: ``kernel(a, b) -> array`` as on the CPU (``flambeau._kernels.cpu.numeric``), by the strided
ternary template of ``elementwise`` with libdevice's ``nextafter`` for float32 and float64, and on the
bit patterns for bfloat16 (its step is not float32's, so it cannot go through float32); float16
raises torch's "not implemented".
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._kernels._low_precision import BF16, takes_bfloat16
from flambeau._kernels.cuda._launch import be, bind_numba_cuda
from flambeau._kernels.cuda.elementwise import compute_dtype, nary, nary_ptx_cases, nary_python, nary_signature
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

cuda = None
_U16, _U32 = np.dtype(np.uint16), np.dtype(np.uint32)


@functools.cache
def _nextafter_p():
    bind_numba_cuda(globals())

    def nextafter_p(x, y, p):
        return math.nextafter(x, y)

    return nextafter_p


def _nextafter_bfloat16_bits(x, y, p):
    """The bfloat16 after ``x`` towards ``y``, all three as bit patterns (in uint32): ordered by the
    key 0x8000 +- magnitude (no negative numbers: the simulator computes in uint32 too), the bit
    patterns are ordered as the values, and one step of the magnitude is one ulp."""
    ax = x & 0x7FFF
    ay = y & 0x7FFF
    if ax > 0x7F80 or ay > 0x7F80:  # NaN in, NaN out
        return 0x7FC0
    kx = 0x8000 - ax if x & 0x8000 else 0x8000 + ax
    ky = 0x8000 - ay if y & 0x8000 else 0x8000 + ay
    if kx == ky:
        return y
    if ax == 0:  # from either zero: the smallest subnormal of y's sign
        return (y & 0x8000) | 1
    if (kx < ky) == (kx > 0x8000):  # away from zero
        return x + 1
    return x - 1


def _table() -> dict:
    """label -> (scalar function, arity, kinds, float16 computes in float32), as ``elementwise.NARY``."""
    return {"nextafter": (_nextafter_p(), 2, "f", False)}


@kernel("nextafter", "cuda")
@takes_bfloat16  # on its bits: float32's spacing is not bfloat16's
def _k_nextafter(a, b):
    storage = np.dtype(a.dtype)
    if storage == BF16:
        backend = be()
        out = backend.empty(broadcast_shapes(tuple(a.shape), tuple(b.shape)), BF16)
        bits = [backend.reinterpret(x, _U16) for x in (a, b)]
        nary(_nextafter_bfloat16_bits, 2, _U32, tuple(bits), out=backend.reinterpret(out, _U16))
        return out
    compute = compute_dtype("nextafter", storage, table={"nextafter": (None, 2, "f", False)})
    return nary(_nextafter_p(), 2, compute, (a, b), (), storage)


def ptx_cases(ndim: int = 2) -> list:
    """(label, python function, signature) for every kernel template x dtype this family launches."""
    from numba import types

    u16 = types.Array(types.uint16, 1, "C")
    bits = nary_signature(u16, u16, types.uint32, ndim)
    return nary_ptx_cases(_table(), ndim) + [
        ("nary:nextafter:bfloat16", nary_python(_nextafter_bfloat16_bits, 2, "uint32"), bits)]
