"""CUDA kernels of the elementwise operators: one strided template per arity over a scalar function.

Each operator of :data:`BINARY` / :data:`UNARY` (all declared in ``flambeau._ops.elementwise``)
has a scalar Python function here; it becomes a ``numba.cuda.jit(device=True)`` device function,
and the binary or unary kernel template closes over it and the compute dtype
(:func:`binary_kernel`, :func:`unary_kernel`, built and cached on first launch). The tables are
the explicit list of what registers: the loops at the end register :func:`binary_launcher` /
:func:`unary_launcher` for each name with ``kernel(name, "cuda")`` (Note [One kernel table]), so
only operators with a plain elementwise signature belong in them.

Conventions (the CPU kernels' of the same operators; arrays are numba device arrays):
    binary: ``kernel(a, b, dtype, out=None) -> array`` (``a``/``b`` device arrays or scalars,
        broadcast, strided); unary: ``kernel(a, dtype, out=None) -> array``. ``dtype`` is the
        compute dtype; predicates (:data:`BOOL_OUT`) give bool. 8/16-bit integers compute in int64
        (wrap-around results are the same once stored); a dtype outside the operator's kinds raises
        torch's ``"<op>_cuda" not implemented for '<Type>'``.

The copy kernel of ``flambeau._kernels.cuda.core`` is the unary template over the identity
(:func:`unary_into`), which is not an operator: it lives in ``_TABLES["unary"]`` only.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import scalar_name
from flambeau._kernels.cuda._launch import CACHE, be, bind_numba_cuda, is_array, launch_1d, stream, strides_for
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

__all__ = ["BINARY", "UNARY", "BOOL_OUT", "KINDS", "INT_VARIANTS", "dtypes_for", "binary_kernel", "unary_kernel",
           "binary_launcher", "unary_launcher", "unary_into", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)


# --- scalar functions --------------------------------------------------------------------------
def _add(x, y):
    return x + y


def _sub(x, y):
    return x - y


def _mul(x, y):
    return x * y


def _div(x, y):
    return x / y


def _pow(x, y):
    return x ** y


def _maximum(x, y):
    if x != x:
        return x
    if y != y:
        return y
    return x if x > y else y


def _minimum(x, y):
    if x != x:
        return x
    if y != y:
        return y
    return x if x < y else y


def _fmax(x, y):
    if x != x:
        return y
    if y != y:
        return x
    return x if x > y else y


def _fmin(x, y):
    if x != x:
        return y
    if y != y:
        return x
    return x if x < y else y


def _eq(x, y):
    return x == y


def _ne(x, y):
    return x != y


def _lt(x, y):
    return x < y


def _le(x, y):
    return x <= y


def _gt(x, y):
    return x > y


def _ge(x, y):
    return x >= y


def _logical_and(x, y):
    return (x != 0) and (y != 0)


def _logical_or(x, y):
    return (x != 0) or (y != 0)


def _logical_xor(x, y):
    return (x != 0) != (y != 0)


def _bitwise_and(x, y):
    return x & y


def _bitwise_or(x, y):
    return x | y


def _bitwise_xor(x, y):
    return x ^ y


def _floor_divide(x, y):
    return x // y


def _remainder(x, y):
    return x % y


def _fmod(x, y):
    return math.fmod(x, y)


def _fmod_int(x, y):
    # C's truncated remainder (the sign of x) from Python's floored one, exact for integers
    if y == 0:
        return y
    r = x % y
    if r != 0 and ((r < 0) != (x < 0)):
        r -= y
    return r


def _atan2(x, y):
    return math.atan2(x, y)


def _hypot(x, y):
    return math.hypot(x, y)


def _copysign(x, y):
    return math.copysign(x, y)


def _logaddexp(x, y):
    if x == y:
        return x + 0.6931471805599453
    if x > y:
        return x + math.log1p(math.exp(y - x))
    return y + math.log1p(math.exp(x - y))


def _logaddexp2(x, y):
    if x == y:
        return x + 1.0
    if x > y:
        return x + math.log1p(2.0 ** (y - x)) * 1.4426950408889634
    return y + math.log1p(2.0 ** (x - y)) * 1.4426950408889634


def _xlogy(x, y):
    if y != y:
        return y
    if x == 0:
        return x - x
    if y == 0:
        return -math.inf if x > 0 else math.inf
    if y < 0:
        return math.nan
    return x * math.log(y)


def _neg(x):
    return -x


def _abs(x):
    return abs(x)


def _exp(x):
    return math.exp(x)


def _exp2(x):
    return 2.0 ** x


def _expm1(x):
    return math.expm1(x)


def _log(x):
    if x == 0:
        return -math.inf
    if x < 0:
        return math.nan
    return math.log(x)


def _log2(x):
    if x == 0:
        return -math.inf
    if x < 0:
        return math.nan
    return math.log2(x)


def _log10(x):
    if x == 0:
        return -math.inf
    if x < 0:
        return math.nan
    return math.log10(x)


def _log1p(x):
    if x == -1:
        return -math.inf
    if x < -1:
        return math.nan
    return math.log1p(x)


def _sqrt(x):
    if x < 0:
        return math.nan
    return math.sqrt(x)


def _rsqrt(x):
    if x < 0:
        return math.nan
    if x == 0:
        return math.inf
    return 1.0 / math.sqrt(x)


def _acosh(x):
    return math.acosh(x) if x >= 1 else math.nan


def _asinh(x):
    return math.asinh(x)


def _atanh(x):
    if x == 1:
        return math.inf
    if x == -1:
        return -math.inf
    return math.atanh(x) if -1 < x < 1 else math.nan


def _deg2rad(x):
    return x * 0.017453292519943295


def _rad2deg(x):
    return x * 57.29577951308232


def _signbit(x):
    return math.copysign(1.0, x) < 0


def _isposinf(x):
    return x == math.inf


def _isneginf(x):
    return x == -math.inf


def _sin(x):
    return math.sin(x)


def _cos(x):
    return math.cos(x)


def _tan(x):
    return math.tan(x)


def _asin(x):
    return math.asin(x) if -1 <= x <= 1 else math.nan


def _acos(x):
    return math.acos(x) if -1 <= x <= 1 else math.nan


def _atan(x):
    return math.atan(x)


def _sinh(x):
    return math.sinh(x)


def _cosh(x):
    return math.cosh(x)


def _tanh(x):
    return math.tanh(x)


def _sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _relu(x):
    if x > 0 or x != x:
        return x
    return 0


def _silu(x):
    return x * _sigmoid(x)


def _erf(x):
    return math.erf(x)


def _erfc(x):
    return math.erfc(x)


def _reciprocal(x):
    return 1.0 / x if x != 0 else math.copysign(math.inf, x)


def _square(x):
    return x * x


def _sign(x):
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


def _logical_not(x):
    return x == 0


def _bitwise_not(x):
    return ~x


def _isnan(x):
    return x != x


def _isinf(x):
    return x == math.inf or x == -math.inf


def _isfinite(x):
    return x == x and x != math.inf and x != -math.inf


def _identity(x):
    return x



# operator -> (scalar function, dtype kinds the kernel supports: "f" float, "i" int, "b" bool). Each
# name registers as that operator's CUDA kernel; aliases (``true_divide``, ``negative``) dispatch to
# their operator's kernel and need no entry.
BINARY = {
    "add": (_add, "fib"), "sub": (_sub, "fi"), "mul": (_mul, "fib"), "div": (_div, "f"), "pow": (_pow, "fi"),
    "maximum": (_maximum, "fi"), "minimum": (_minimum, "fi"), "fmax": (_fmax, "fi"), "fmin": (_fmin, "fi"),
    "eq": (_eq, "fib"), "ne": (_ne, "fib"), "lt": (_lt, "fib"), "le": (_le, "fib"), "gt": (_gt, "fib"),
    "ge": (_ge, "fib"), "logical_and": (_logical_and, "fib"), "logical_or": (_logical_or, "fib"),
    "logical_xor": (_logical_xor, "fib"), "bitwise_and": (_bitwise_and, "ib"),
    "bitwise_or": (_bitwise_or, "ib"), "bitwise_xor": (_bitwise_xor, "ib"), "atan2": (_atan2, "f"),
    "hypot": (_hypot, "f"), "copysign": (_copysign, "f"),
    "logaddexp": (_logaddexp, "f"), "logaddexp2": (_logaddexp2, "f"), "xlogy": (_xlogy, "f"),
    "floor_divide": (_floor_divide, "fi"), "remainder": (_remainder, "fi"), "fmod": (_fmod, "fi"),
}

UNARY = {
    "neg": (_neg, "fi"), "abs": (_abs, "fi"), "exp": (_exp, "f"), "exp2": (_exp2, "f"),
    "expm1": (_expm1, "f"), "log": (_log, "f"), "log2": (_log2, "f"),
    "log10": (_log10, "f"), "log1p": (_log1p, "f"), "sqrt": (_sqrt, "f"), "rsqrt": (_rsqrt, "f"),
    "sin": (_sin, "f"), "cos": (_cos, "f"), "tan": (_tan, "f"), "asin": (_asin, "f"), "acos": (_acos, "f"),
    "atan": (_atan, "f"), "sinh": (_sinh, "f"), "cosh": (_cosh, "f"), "tanh": (_tanh, "f"),
    "sigmoid": (_sigmoid, "f"), "relu": (_relu, "fi"), "silu": (_silu, "f"), "erf": (_erf, "f"),
    "erfc": (_erfc, "f"), "reciprocal": (_reciprocal, "f"), "square": (_square, "fi"),
    "sign": (_sign, "fi"), "logical_not": (_logical_not, "fib"), "bitwise_not": (_bitwise_not, "i"),
    "isnan": (_isnan, "fi"), "isinf": (_isinf, "fi"), "isfinite": (_isfinite, "fi"),
    "acosh": (_acosh, "f"), "asinh": (_asinh, "f"), "atanh": (_atanh, "f"), "deg2rad": (_deg2rad, "f"),
    "rad2deg": (_rad2deg, "f"), "signbit": (_signbit, "fi"), "isposinf": (_isposinf, "fi"),
    "isneginf": (_isneginf, "fi"), "positive": (_identity, "fi"),
}

# The scalar functions of the templates: the operators', plus the copy kernel's identity (any dtype).
_TABLES = {"binary": BINARY, "unary": {**UNARY, "identity": (_identity, "fib")}}

# Integer versions of functions whose float version does not suit integers.
INT_VARIANTS = {"fmod": _fmod_int}

# Compute dtypes of the elementwise kernels per kind (8/16-bit integers compute in int64).
KINDS = {"f": ("float32", "float64"), "i": ("int32", "int64"), "b": ("bool",)}

# Ops whose result is bool whatever the compute dtype.
BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
            "isnan", "isinf", "isfinite", "signbit", "isposinf", "isneginf"}


def dtypes_for(kinds: str) -> tuple:
    """numpy dtype names of the compute dtypes ``kinds`` covers."""
    return tuple(n for k in kinds for n in KINDS[k])


# --- device functions and templates (numba.cuda, built on first launch) ---------------------------
@functools.cache
def _device_fn(table: str, name: str, kind: str = "f"):
    """The device function of ``name`` in ``_TABLES[table]``; ``kind`` is the compute dtype's numpy kind."""
    bind_numba_cuda(globals())
    fn = _TABLES[table][name][0]
    if kind in "iu" and name in INT_VARIANTS:
        fn = INT_VARIANTS[name]
    if fn in (_silu,):
        sig = cuda.jit(device=True)(_sigmoid)

        def silu(x):
            return x * sig(x)

        return cuda.jit(device=True)(silu)
    return cuda.jit(device=True)(fn)


def _binary_py(f, ct):
    """The Python function of the strided binary kernel over device function ``f``, computing in ``ct``."""
    bind_numba_cuda(globals())
    def binary(out, ost, a, ast, sa, use_sa, b, bst, sb, use_sb, shape, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        nd = len(shape)
        while i < n:
            r = i
            oo = 0
            oa = 0
            ob = 0
            for d in range(nd - 1, -1, -1):
                ext = shape[d]
                c = r % ext
                r = r // ext
                oo += c * ost[d]
                oa += c * ast[d]
                ob += c * bst[d]
            x = sa if use_sa else ct(a[oa])
            y = sb if use_sb else ct(b[ob])
            out[oo] = f(x, y)
            i += step

    return binary


def _unary_py(f, ct):
    """The Python function of the strided unary kernel over device function ``f``, computing in ``ct``."""
    bind_numba_cuda(globals())
    def unary(out, ost, a, ast, shape, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        nd = len(shape)
        while i < n:
            r = i
            oo = 0
            oa = 0
            for d in range(nd - 1, -1, -1):
                ext = shape[d]
                c = r % ext
                r = r // ext
                oo += c * ost[d]
                oa += c * ast[d]
            out[oo] = f(ct(a[oa]))
            i += step

    return unary


@functools.cache
def binary_kernel(name: str, compute: str):
    """The strided binary kernel of operator ``name`` computing in numpy dtype ``compute`` (cached)."""
    bind_numba_cuda(globals())
    dt = np.dtype(compute)
    return cuda.jit(cache=CACHE)(_binary_py(_device_fn("binary", name, dt.kind), dt.type))


@functools.cache
def unary_kernel(name: str, compute: str):
    """The strided unary kernel of ``name`` (an operator or ``"identity"``) computing in ``compute`` (cached)."""
    bind_numba_cuda(globals())
    dt = np.dtype(compute)
    return cuda.jit(cache=CACHE)(_unary_py(_device_fn("unary", name, dt.kind), dt.type))


# --- launchers ------------------------------------------------------------------------------------
_WIDE = np.dtype(np.int64)


def _kind_check(name: str, compute: np.dtype, kinds: str) -> np.dtype:
    """The dtype the kernel computes in: ``compute``, or int64 for 8/16-bit integers (wrap-around
    results are the same once stored); RuntimeError like torch's if the op does not support it."""
    k = _WIDE if compute.kind in "iu" and compute.itemsize < 4 else compute
    if k.name not in dtypes_for(kinds):
        raise RuntimeError(f'"{name}_cuda" not implemented for \'{scalar_name(compute)}\'')
    return k


def binary_launcher(name: str):
    """The CUDA kernel of binary elementwise op ``name`` (convention of the module docstring)."""
    kinds = BINARY[name][1]
    bool_out = name in BOOL_OUT

    def launch(a, b, dtype, out=None):
        compute = np.dtype(dtype.np)
        kdt = _kind_check(name, compute, kinds)
        aa, ba = is_array(a), is_array(b)
        shape = broadcast_shapes(a.shape if aa else (), b.shape if ba else ())
        backend = be()
        if out is None:
            out = backend.empty(shape, np.bool_ if bool_out else compute)
        n = out.size
        if n == 0:
            return out
        cast = kdt.type
        ref = a if aa else b
        zeros = (0,) * max(len(shape), 1)
        fa, sa_ = (backend.flat_view(a), strides_for(a, shape)) if aa else (backend.flat_view(ref), zeros)
        fb, sb_ = (backend.flat_view(b), strides_for(b, shape)) if ba else (backend.flat_view(ref), zeros)
        sva = cast(0) if aa else cast(a)
        svb = cast(0) if ba else cast(b)
        kshape = shape if shape else (1,)
        k = binary_kernel(name, kdt.name)
        grid, block = launch_1d(n)
        k[grid, block, stream()](backend.flat_view(out), strides_for(out, shape), fa, sa_, sva, not aa,
                                 fb, sb_, svb, not ba, kshape, n)
        return out

    return launch


def unary_launcher(name: str):
    """The CUDA kernel of unary elementwise op ``name``."""
    kinds = UNARY[name][1]
    bool_out = name in BOOL_OUT

    def launch(a, dtype, out=None):
        compute = np.dtype(dtype.np)
        kdt = _kind_check(name, compute, kinds)
        if out is None:
            out = be().empty(a.shape, np.bool_ if bool_out else compute)
        unary_into(name, kdt, out, a)
        return out

    return launch


def unary_into(name: str, compute: np.dtype, out, a) -> None:
    """``out[...] = f(a)`` for ``name``'s scalar function ``f`` computing in ``compute`` (``a``
    broadcastable to ``out``; no dtype check: the launchers and the copy kernel do theirs)."""
    n = out.size
    if n == 0:
        return
    shape = tuple(out.shape)
    backend = be()
    k = unary_kernel(name, compute.name)
    grid, block = launch_1d(n)
    k[grid, block, stream()](backend.flat_view(out), strides_for(out, shape), backend.flat_view(a),
                             strides_for(a, shape), shape if shape else (1,), n)


# --- registration: every name of the tables (Note [One kernel table]) ------------------------------
for _name in BINARY:
    kernel(_name, "cuda")(binary_launcher(_name))
for _name in UNARY:
    kernel(_name, "cuda")(unary_launcher(_name))
del _name


# --- concrete signatures (PTX test) ---------------------------------------------------------------
def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the binary and unary kernels for every scalar
    function and compute dtype it supports (PTX compilation); bool output for predicates."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    idx = types.UniTuple(types.int64, ndim)
    cases = []
    for table, template in (("binary", _binary_py), ("unary", _unary_py)):
        for name, (_, kinds) in _TABLES[table].items():
            for dn in dtypes_for(kinds):
                dt = np.dtype(dn)
                t = from_dtype(dt)
                arr = types.Array(t, 1, "C")
                outt = types.Array(types.boolean if name in BOOL_OUT else t, 1, "C")
                py = template(_device_fn(table, name, dt.kind), dt.type)
                if table == "binary":
                    sig = (outt, idx, arr, idx, t, types.boolean, arr, idx, t, types.boolean, idx, types.int64)
                else:
                    sig = (outt, idx, arr, idx, idx, types.int64)
                cases.append((f"{table}:{name}:{dn}", py, sig))
    return cases
