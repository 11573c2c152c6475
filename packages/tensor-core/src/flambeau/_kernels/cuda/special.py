"""CUDA kernels of the special functions (Note [numba.cuda bound on first use] in ``_launch``).

The scalar formulas are the CPU kernels' own (Note [One formula, two devices] in
``flambeau._kernels.cpu.special``), compiled as device functions and run by the strided ternary
template of ``elementwise`` (Note [Ternary template]): a formula ``f(x)`` becomes ``g(x, p)``, a
formula ``f(x, y)`` becomes ``g(x, y, p)``, and polygamma's order rides in ``p[0]``. Conventions
are the CPU kernels' (the module docstring of ``flambeau._kernels.cpu.special``); the formulas
compute in float64 whatever the storage dtype.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._kernels.cpu.special import FORMULAS, jitable
from flambeau._kernels.cuda._launch import bind_numba_cuda
from flambeau._kernels.cuda.elementwise import compute_dtype, nary, nary_ptx_cases
from flambeau._ops._registry import kernel

cuda = None


@functools.cache
def _formula(name: str):
    """``g(x, p)`` / ``g(x, y, p)`` calling the device function of operator ``name``'s formula."""
    bind_numba_cuda(globals())
    jitable()
    fn, arity = FORMULAS[name]
    f = cuda.jit(device=True)(fn)
    if name == "polygamma":
        def polygamma_p(x, p):
            return f(x, p[0])

        return polygamma_p
    if arity == 2:
        def binary_p(x, y, p):
            return f(x, y)

        return binary_p

    def unary_p(x, p):
        return f(x)

    return unary_p


def _arity(name: str) -> int:
    return 1 if name == "polygamma" else FORMULAS[name][1]


def _table() -> dict:
    """label -> (scalar function, arity, kinds, float16 computes in float32), as ``elementwise.NARY``."""
    return {name: (_formula(name), _arity(name), "f", True) for name in FORMULAS}


def _run(name: str, dtype, operands: tuple, params: tuple = (), out=None):
    compute = compute_dtype(name, dtype, table={name: (None, _arity(name), "f", True)})
    return nary(_formula(name), _arity(name), compute, operands, params, np.dtype(dtype.np), out)


def _unary_launcher(name: str):
    def launch(a, dtype, out=None):
        return _run(name, dtype, (a,), (), out)

    return launch


def _binary_launcher(name: str):
    def launch(a, b, dtype, out=None):
        return _run(name, dtype, (a, b), (), out)

    return launch


for _name, (_, _n) in FORMULAS.items():
    if _name != "polygamma":
        kernel(_name, "cuda")((_unary_launcher if _n == 1 else _binary_launcher)(_name))
del _name, _n


@kernel("polygamma", "cuda")
def _k_polygamma(a, dtype, n, out=None):
    return _run("polygamma", dtype, (a,), (n,), out)


def ptx_cases(ndim: int = 2) -> list:
    """(label, python function, signature) for every kernel template x dtype this family launches."""
    return nary_ptx_cases(_table(), ndim)
