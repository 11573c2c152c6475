"""CUDA kernels of the numeric family (Note [numba.cuda bound on first use] in ``_launch``).

nextafter: ``kernel(a, b) -> array`` as on the CPU (``flambeau._kernels.cpu.numeric``), by the strided
ternary template of ``elementwise`` with libdevice's ``nextafter``; float32 and float64 only (a
float16 or bfloat16 step cannot be computed in float32: they raise torch's "not implemented").
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._kernels.cuda._launch import bind_numba_cuda
from flambeau._kernels.cuda.elementwise import compute_dtype, nary, nary_ptx_cases
from flambeau._ops._registry import kernel

cuda = None


@functools.cache
def _nextafter_p():
    bind_numba_cuda(globals())

    def nextafter_p(x, y, p):
        return math.nextafter(x, y)

    return nextafter_p


def _table() -> dict:
    """label -> (scalar function, arity, kinds, float16 computes in float32), as ``elementwise.NARY``."""
    return {"nextafter": (_nextafter_p(), 2, "f", False)}


@kernel("nextafter", "cuda")
def _k_nextafter(a, b):
    storage = np.dtype(a.dtype)
    compute = compute_dtype("nextafter", storage, table={"nextafter": (None, 2, "f", False)})
    return nary(_nextafter_p(), 2, compute, (a, b), (), storage)


def ptx_cases(ndim: int = 2) -> list:
    """(label, python function, signature) for every kernel template x dtype this family launches."""
    return nary_ptx_cases(_table(), ndim)
