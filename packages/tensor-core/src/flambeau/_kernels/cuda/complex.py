"""CUDA kernels of the complex family (Note [numba.cuda bound on first use] in ``_launch``).

Note [Complex on CUDA]
    Complex device arrays are numba's complex64/complex128 arrays. The elementwise templates take
    them for the arithmetic, eq/ne, the logical operators and the math of ``COMPLEX_VARIANTS``
    (cmath, which numba compiles for CUDA; ``abs`` gives the real dtype); the views of the family
    (``real``, ``imag``, ``view_as_real``, ``view_as_complex``) reinterpret the storage's bytes, as on
    the CPU. This module adds ``angle``, ``conj_physical``, ``complex`` and ``polar`` (the CPU
    kernels' conventions, ``flambeau._kernels.cpu.complex``), each a scalar function of the ternary
    template. numba's simulator runs cmath as Python's, which raises where numpy returns inf or NaN
    (``log(0)``, ``atan(1j)``): the simulator tier tests finite values away from those points.
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from flambeau._dtype import real_np
from flambeau._kernels.cuda.core import contiguous
from flambeau._kernels.cuda.elementwise import nary, nary_ptx_cases
from flambeau._ops._registry import kernel

cuda = None


def _phase(x, p):
    return cmath.phase(x)


def _sign_angle(x, p):
    # torch: pi for negative reals, 0 otherwise, NaN kept
    c = type(x)
    if x < 0:
        return c(math.pi)
    return x if x != x else c(0)


def _conj(x, p):
    return x.conjugate()


def _from_parts(x, y, p):
    return complex(x, y)


def _from_polar(r, t, p):
    return complex(r * math.cos(t), r * math.sin(t))


@kernel("angle", "cuda")
def _k_angle(a, out_dtype):
    out = np.dtype(out_dtype.np)
    src = np.dtype(a.dtype)
    if src.kind == "c":
        return nary(_phase, 1, src, (a,), (), out)
    return nary(_sign_angle, 1, np.dtype(out_dtype.compute.np), (a,), (), out)


@kernel("conj_physical", "cuda")
def conj_physical(a):
    src = np.dtype(a.dtype)
    return nary(_conj, 1, src, (a,)) if src.kind == "c" else contiguous(a)


@kernel("complex", "cuda")
def _k_complex(real, imag, complex_dtype):
    return nary(_from_parts, 2, real_np(complex_dtype.compute.np), (real, imag), (), np.dtype(complex_dtype.np))


@kernel("polar", "cuda")
def _k_polar(abs_, angle, complex_dtype):
    return nary(_from_polar, 2, real_np(complex_dtype.compute.np), (abs_, angle), (), np.dtype(complex_dtype.np))


def ptx_cases(ndim: int = 2) -> list:
    """(label, python function, signature) for every kernel template x dtype this family launches."""
    from numba import types

    from flambeau._kernels.cuda.elementwise import nary_python, nary_signature

    cases = nary_ptx_cases({"conj": (_conj, 1, "c", False)}, ndim)
    for real, cplx in (("float32", "complex64"), ("float64", "complex128")):
        r, c = types.Array(getattr(types, real), 1, "C"), types.Array(getattr(types, cplx), 1, "C")
        tr, tc = getattr(types, real), getattr(types, cplx)
        cases += [(f"angle:{cplx}", nary_python(_phase, 1, cplx), nary_signature(r, c, tc, ndim)),
                  (f"angle:{real}", nary_python(_sign_angle, 1, real), nary_signature(r, r, tr, ndim)),
                  (f"complex:{real}", nary_python(_from_parts, 2, real), nary_signature(c, r, tr, ndim)),
                  (f"polar:{real}", nary_python(_from_polar, 2, real), nary_signature(c, r, tr, ndim))]
    cases.append(("angle:int64", nary_python(_sign_angle, 1, "float32"),
                  nary_signature(types.Array(types.float32, 1, "C"), types.Array(types.int64, 1, "C"),
                                 types.float32, ndim)))
    return cases
