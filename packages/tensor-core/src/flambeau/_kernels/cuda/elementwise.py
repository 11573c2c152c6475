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
        (wrap-around results are the same once stored), float16 in float32 (stored back as float16);
        a dtype outside the operator's kinds raises torch's ``"<op>_cuda" not implemented for '<Type>'``.

The copy kernel of ``flambeau._kernels.cuda.core`` is the unary template over the identity
(:func:`unary_into`), which is not an operator: it lives in ``_TABLES["unary"]`` only.

Operators with scalar parameters or a third operand (Note [Ternary template]) are scalar
functions of :data:`NARY` run by one strided ternary template (:func:`nary`); their launchers,
at the end of the module, follow the calling conventions of ``flambeau._ops.elementwise``.

Note [Ternary template]
    One strided template serves every operator that is not a plain unary or binary one: three
    operands, each a device array (broadcast, strided) or a scalar, and a tuple ``p`` of three
    scalar parameters, all in the compute dtype; it stores ``f(x, y, z, p)``. A scalar function
    of arity 1 (``f(x, p)``: leaky_relu's slope, clamp's bounds, round's scale) or 2
    (``f(x, y, p)``: the ``*_backward`` operators, prelu, isclose) is wrapped to that shape
    (:func:`nary_device`), so an operator is a small scalar function and a table entry. float16
    operands compute in float32 where an operator allows it (``half``); the store casts back.

Note [Device helpers]
    A device function can only call device functions, so scalar functions that share a helper
    (``_silu`` calls ``sigmoid``, ``_frac`` calls ``trunc``) call it through a module global
    named ``_d_<helper>``, None until :func:`bind_helpers` sets it to the jitted helper (each
    device function builder binds the helpers into its scalar function's module first). The
    templates address their operands through one such helper, ``_d_offsets`` (``_index_math.offsets4``,
    with ``narrow`` tested once per launch: Note [Narrow index math] there); NVVM inlines them.
    Scalar functions write float constants as ``c(v)`` with ``c = type(x)``: a bare float literal is
    float64 in numba and would turn float32 arithmetic into float64.
"""

from __future__ import annotations

import cmath
import functools
import math

import numpy as np

from flambeau import _dtype as _fdt
from flambeau._dtype import np_name, scalar_name
from flambeau._kernels.cuda._index_math import offsets4
from flambeau._kernels.cuda._launch import (
    GROUP,
    NARROW,
    be,
    bind_numba_cuda,
    broadcast_strides,
    coalesce,
    is_array,
    jit,
    launch_1d,
    launch_keyed,
    stream,
)
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

__all__ = ["BINARY", "UNARY", "NARY", "BOOL_OUT", "KINDS", "INT_VARIANTS", "BOOL_VARIANTS", "COMPLEX_VARIANTS",
           "REAL_OUT", "dtypes_for",
           "binary_kernel", "unary_kernel", "binary_launcher", "unary_launcher", "unary_into", "compute_dtype",
           "bind_helpers", "nary_device", "nary_kernel", "nary_python", "nary", "nary_ptx_cases", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)
# device helpers once bound (Note [Device helpers])
_d_sigmoid = _d_trunc = _d_rint = _d_maximum = _d_minimum = _d_offsets = None


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


def _pow_int(x, y):
    """Integer ``x ** y`` as torch's (the CPU kernel's): a negative exponent gives 1 for 1, +-1 for -1 and 0
    otherwise (numba's own integer power has no answer there); else by squaring, wrapping as integers do."""
    if y < 0:
        if x == 1:
            return x
        if x == -1:
            return x if y & 1 else -x
        return x - x
    r = x - x + 1
    b = x
    e = y
    while e:
        if e & 1:
            r = r * b
        b = b * b
        e >>= 1
    return r


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
    one = type(x)(1)  # constants of x's type keep float32 math in float32 (a float literal is float64)
    if x >= 0:
        return one / (one + math.exp(-x))
    e = math.exp(x)
    return e / (one + e)


def _relu(x):
    if x > 0 or x != x:
        return x
    return 0


def _silu(x):
    return x * _d_sigmoid(x)


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


def _not(x):
    return not x


def _false(x):
    return False


def _true(x):
    return True


def _is_negative(x):
    return x < 0


def _float_power(x, y):
    return x ** y


def _lshift(x, y):
    if y < 0 or y > 63:  # torch: shifting out every bit gives 0
        return x - x
    return x << y


def _rshift(x, y):
    if y < 0 or y > 63:  # the sign bit fills every bit
        return x >> 63
    return x >> y


# Rounding: NaN, infinities and |x| >= 2**52 are integers already; the others go through int64 (exact in x's
# type: the result has no more significant bits than x), and copysign restores the sign of zero results
# (ceil(-0.5) is -0.0, as in numpy).
def _floor(x):
    c = type(x)
    if not abs(x) < c(4503599627370496.0):
        return x
    return math.copysign(c(math.floor(x)), x)


def _ceil(x):
    c = type(x)
    if not abs(x) < c(4503599627370496.0):
        return x
    return math.copysign(c(math.ceil(x)), x)


def _trunc(x):
    c = type(x)
    if not abs(x) < c(4503599627370496.0):
        return x
    return math.copysign(c(int(x)), x)


def _rint(x):
    """Round half to even (numpy's rint): below 2**(p-1), p the precision of x's type, adding and
    subtracting 2**(p-1) leaves the integer IEEE rounding chose (float32: p = 24, float64: p = 53)."""
    c = type(x)
    m = c(8388608.0) if c(16777217.0) == c(16777216.0) else c(4503599627370496.0)  # float32 or float64
    a = abs(x)
    if not a < m:
        return x
    return math.copysign((a + m) - m, x)


def _frac(x):
    return x - _d_trunc(x)


def _erfinv(y):
    if not -1.0 < y < 1.0:
        if y == 1.0:
            return math.inf
        if y == -1.0:
            return -math.inf
        return math.nan
    # Winitzki's closed form (a = 0.147, relative error 2e-3) refined by two Halley steps on erf
    # (cubic convergence): f = erf(x) - y, f' = d, f'' = -2 x d give x -= f / (d + x f).
    c = type(y)
    w = math.log((c(1) - y) * (c(1) + y))
    t = c(4.330746750799873) + c(0.5) * w  # 2 / (pi a) + w / 2
    x = math.copysign(math.sqrt(math.sqrt(t * t - w / c(0.147)) - t), y)
    for _ in range(2):
        e = math.erf(x) - y
        x -= e / (c(1.1283791670955126) * math.exp(-x * x) + x * e)
    return x


# --- scalar functions of the ternary template (Note [Ternary template]): f(x, p), f(x, y, p), f(x, y, z, p)
def _round(x, p):
    # numpy's round: scale by p[0] = 10 ** |decimals| (multiply for decimals >= 0: p[1] == 1)
    if p[1]:
        return _d_rint(x * p[0]) / p[0]
    return _d_rint(x / p[0]) * p[0]


# Scalar functions write their constants as ``c(v)`` with ``c = type(x)``: float32 math stays in float32.
def _gelu(x, p):
    c = type(x)
    return x * (c(0.5) + c(0.5) * math.erf(x * c(0.7071067811865476)))


def _gelu_tanh(x, p):
    c = type(x)
    return c(0.5) * x * (c(1) + math.tanh(c(0.7978845608028654) * (x + c(0.044715) * x * x * x)))


def _softplus(x, p):
    # p = (beta, threshold)
    z = x * p[0]
    if z > p[1]:
        return x
    return math.log1p(math.exp(z)) / p[0]


def _logit(x, p):
    # p = (eps, whether eps was given)
    one = type(x)(1)
    if p[1]:
        if x < p[0]:
            x = p[0]
        elif x > one - p[0]:
            x = one - p[0]
    return math.log(x / (one - x))


def _nan_to_num(x, p):
    # p = (nan, posinf, neginf) replacements
    if x != x:
        return p[0]
    if x == math.inf:
        return p[1]
    if x == -math.inf:
        return p[2]
    return x


def _clamp(x, lo, hi, p):
    # p = (whether min is given, whether max is given); NaN bounds propagate (numpy's maximum/minimum)
    if p[0]:
        x = _d_maximum(x, lo)
    if p[1]:
        x = _d_minimum(x, hi)
    return x


def _where(c, x, y, p):
    return x if c else y


def _lerp(x, e, w, p):
    # torch's formula: exact at both ends
    d = e - x
    if abs(w) < 0.5:
        return x + w * d
    return e - d * (type(x)(1) - w)


def _addcmul(x, y, z, p):
    return x + y * z * p[0]


def _addcdiv(x, y, z, p):
    return x + y / z * p[0]


def _isclose(x, y, p):
    # p = (rtol, atol, equal_nan)
    if x == y:
        return True
    if x != x or y != y:
        return p[2] != 0 and x != x and y != y
    err = abs(x - y)
    return err != math.inf and err <= p[1] + abs(p[0] * y)



# --- complex versions (cmath; numba compiles it for CUDA): Note [Complex on CUDA] ---------------------
def _c_exp(x):
    return cmath.exp(x)


def _c_exp2(x):
    c = type(x)
    return cmath.exp(x * c(0.6931471805599453))


def _c_expm1(x):
    return cmath.exp(x) - 1


def _c_log(x):
    return cmath.log(x)


def _c_log2(x):
    c = type(x)
    return cmath.log(x) * c(1.4426950408889634)


def _c_log10(x):
    return cmath.log10(x)


def _c_log1p(x):
    return cmath.log(x + 1)


def _c_sqrt(x):
    return cmath.sqrt(x)


def _c_rsqrt(x):
    return 1 / cmath.sqrt(x)


def _c_sin(x):
    return cmath.sin(x)


def _c_cos(x):
    return cmath.cos(x)


def _c_tan(x):
    return cmath.tan(x)


def _c_asin(x):
    return cmath.asin(x)


def _c_acos(x):
    return cmath.acos(x)


def _c_atan(x):
    return cmath.atan(x)


def _c_sinh(x):
    return cmath.sinh(x)


def _c_cosh(x):
    return cmath.cosh(x)


def _c_tanh(x):
    return cmath.tanh(x)


def _c_asinh(x):
    return cmath.asinh(x)


def _c_acosh(x):
    return cmath.acosh(x)


def _c_atanh(x):
    return cmath.atanh(x)


def _c_sigmoid(x):
    return 1 / (1 + cmath.exp(-x))


def _c_reciprocal(x):
    return 1 / x


def _c_sgn(x):
    return x if x == 0 else x / abs(x)


def _c_isnan(x):
    return x.real != x.real or x.imag != x.imag


def _c_isinf(x):
    return math.isinf(x.real) or math.isinf(x.imag)


def _c_isfinite(x):
    return math.isfinite(x.real) and math.isfinite(x.imag)


# operator -> (scalar function, dtype kinds the kernel supports: "f" float, "i" int, "b" bool). Each
# name registers as that operator's CUDA kernel; aliases (``true_divide``, ``negative``) dispatch to
# their operator's kernel and need no entry.
BINARY = {
    "add": (_add, "fibc"), "sub": (_sub, "fic"), "mul": (_mul, "fibc"), "div": (_div, "fc"), "pow": (_pow, "fic"),
    "maximum": (_maximum, "fib"), "minimum": (_minimum, "fib"), "fmax": (_fmax, "fib"), "fmin": (_fmin, "fib"),
    "eq": (_eq, "fibc"), "ne": (_ne, "fibc"), "lt": (_lt, "fib"), "le": (_le, "fib"), "gt": (_gt, "fib"),
    "ge": (_ge, "fib"), "logical_and": (_logical_and, "fibc"), "logical_or": (_logical_or, "fibc"),
    "logical_xor": (_logical_xor, "fibc"), "bitwise_and": (_bitwise_and, "ib"),
    "bitwise_or": (_bitwise_or, "ib"), "bitwise_xor": (_bitwise_xor, "ib"), "atan2": (_atan2, "f"),
    "hypot": (_hypot, "f"), "copysign": (_copysign, "f"),
    "logaddexp": (_logaddexp, "f"), "logaddexp2": (_logaddexp2, "f"), "xlogy": (_xlogy, "f"),
    "floor_divide": (_floor_divide, "fi"), "remainder": (_remainder, "fi"), "fmod": (_fmod, "fi"),
    "float_power": (_float_power, "f"), "bitwise_left_shift": (_lshift, "i"), "bitwise_right_shift": (_rshift, "i"),
}

UNARY = {
    "neg": (_neg, "fic"), "abs": (_abs, "fic"), "exp": (_exp, "fc"), "exp2": (_exp2, "fc"),
    "expm1": (_expm1, "fc"), "log": (_log, "fc"), "log2": (_log2, "fc"),
    "log10": (_log10, "fc"), "log1p": (_log1p, "fc"), "sqrt": (_sqrt, "fc"), "rsqrt": (_rsqrt, "fc"),
    "sin": (_sin, "fc"), "cos": (_cos, "fc"), "tan": (_tan, "fc"), "asin": (_asin, "fc"), "acos": (_acos, "fc"),
    "atan": (_atan, "fc"), "sinh": (_sinh, "fc"), "cosh": (_cosh, "fc"), "tanh": (_tanh, "fc"),
    "sigmoid": (_sigmoid, "fc"), "relu": (_relu, "fi"), "silu": (_silu, "f"), "erf": (_erf, "f"),
    "erfc": (_erfc, "f"), "reciprocal": (_reciprocal, "fc"), "square": (_square, "fic"),
    "sign": (_sign, "fib"), "sgn": (_sign, "fibc"), "logical_not": (_logical_not, "fibc"),
    "bitwise_not": (_bitwise_not, "ib"), "isnan": (_isnan, "fibc"), "isinf": (_isinf, "fibc"),
    "isfinite": (_isfinite, "fibc"), "acosh": (_acosh, "fc"), "asinh": (_asinh, "fc"), "atanh": (_atanh, "fc"),
    "deg2rad": (_deg2rad, "f"), "rad2deg": (_rad2deg, "f"), "signbit": (_signbit, "fib"),
    "isposinf": (_isposinf, "fib"), "isneginf": (_isneginf, "fib"), "positive": (_identity, "fic"),
    "erfinv": (_erfinv, "f"), "floor": (_floor, "fi"), "ceil": (_ceil, "fi"), "trunc": (_trunc, "fi"),
    "frac": (_frac, "f"),
}

# The scalar functions of the templates: the operators', plus the copy kernel's identity (any dtype).
_TABLES = {"binary": BINARY, "unary": {**UNARY, "identity": (_identity, "fibc")}}

# Integer and bool versions of functions whose float version does not suit them.
INT_VARIANTS = {"fmod": _fmod_int, "floor": _identity, "ceil": _identity, "trunc": _identity,
                "signbit": _is_negative, "pow": _pow_int}
BOOL_VARIANTS = {"bitwise_not": _not, "signbit": _false, "isnan": _false, "isinf": _false, "isposinf": _false,
                 "isneginf": _false, "isfinite": _true}
# Complex versions of functions whose float version does not suit complex numbers (Note [Complex on CUDA]).
COMPLEX_VARIANTS = {
    "exp": _c_exp, "exp2": _c_exp2, "expm1": _c_expm1, "log": _c_log, "log2": _c_log2, "log10": _c_log10,
    "log1p": _c_log1p, "sqrt": _c_sqrt, "rsqrt": _c_rsqrt, "sin": _c_sin, "cos": _c_cos, "tan": _c_tan,
    "asin": _c_asin, "acos": _c_acos, "atan": _c_atan, "sinh": _c_sinh, "cosh": _c_cosh, "tanh": _c_tanh,
    "asinh": _c_asinh, "acosh": _c_acosh, "atanh": _c_atanh, "sigmoid": _c_sigmoid, "reciprocal": _c_reciprocal,
    "sgn": _c_sgn, "isnan": _c_isnan, "isinf": _c_isinf, "isfinite": _c_isfinite,
}
# Ops whose result is real for a complex compute dtype (abs of complex64 is float32).
REAL_OUT = {"abs"}

# Helpers other scalar functions call (Note [Device helpers]).
_HELPERS = {"_d_sigmoid": _sigmoid, "_d_trunc": _trunc, "_d_rint": _rint, "_d_maximum": _maximum,
            "_d_minimum": _minimum, "_d_offsets": offsets4}

# Operators of the ternary template (Note [Ternary template]): label -> (scalar function, arity, kinds,
# float16 computes in float32). The launchers at the end of the module pick the label.
NARY = {
    "round": (_round, 1, "f", True), "gelu": (_gelu, 1, "f", True), "gelu_tanh": (_gelu_tanh, 1, "f", True),
    "softplus": (_softplus, 1, "f", True), "logit": (_logit, 1, "f", True),
    "nan_to_num": (_nan_to_num, 1, "f", True), "clamp": (_clamp, 3, "fib", True), "where": (_where, 3, "fib", True),
    "lerp": (_lerp, 3, "f", True), "addcmul": (_addcmul, 3, "fi", True), "addcdiv": (_addcdiv, 3, "f", True),
    "isclose": (_isclose, 2, "f", True),
}

# Compute dtypes of the elementwise kernels per kind (8/16-bit integers compute in int64).
# Complex numbers ("c"): the arithmetic, eq/ne, the logical ops and the math of COMPLEX_VARIANTS.
KINDS = {"f": ("float32", "float64"), "i": ("int32", "int64"), "b": ("bool",), "c": ("complex64", "complex128")}

# Ops whose result is bool whatever the compute dtype.
BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
            "isnan", "isinf", "isfinite", "signbit", "isposinf", "isneginf", "isclose"}


def dtypes_for(kinds: str) -> tuple:
    """numpy dtype names of the compute dtypes ``kinds`` covers."""
    return tuple(n for k in kinds for n in KINDS[k])


# --- device functions and templates (numba.cuda, built on first launch) ---------------------------
@functools.cache
def _helper(name: str):
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_HELPERS[name])  # helpers call no helpers


def bind_helpers(namespace: dict) -> None:
    """Set the ``_d_<helper>`` globals of a kernel module to the jitted helpers (Note [Device helpers])."""
    for name in _HELPERS:
        if namespace.get(name, 0) is None:
            namespace[name] = _helper(name)


@functools.cache
def device(fn):
    """``fn`` as a device function, its module's helpers bound first."""
    bind_numba_cuda(globals())
    bind_helpers(fn.__globals__)
    return cuda.jit(device=True)(fn)


def _device_fn(table: str, name: str, kind: str = "f"):
    """The device function of ``name`` in ``_TABLES[table]``; ``kind`` is the compute dtype's numpy kind."""
    fn = _TABLES[table][name][0]
    if kind in "iu" and name in INT_VARIANTS:
        fn = INT_VARIANTS[name]
    elif kind == "b" and name in BOOL_VARIANTS:
        fn = BOOL_VARIANTS[name]
    elif kind == "c" and name in COMPLEX_VARIANTS:
        fn = COMPLEX_VARIANTS[name]
    return device(fn)


# Note [Grouped loads]
#     A thread of a grid-stride loop that loads one element, computes and stores it has one load in flight
#     at a time, and the compiler cannot hoist the next iteration's load above this one's store (the output
#     may alias an input). An H100 keeps about 270,000 threads resident, so one 4-byte load each is about a
#     megabyte in flight: with ~0.7 us of memory latency, 1.5 TB/s of its 3.35 (``x * 2`` on 16M float32:
#     85 us against torch's 49, whose kernels load vectors of four). So the kernels take ``GROUP`` elements
#     per thread, ``i, i + step, ...``, loaded into registers before any is computed and stored (coalesced:
#     neighbouring threads read neighbouring elements), and the launchers size the grid for it
#     (``launch_1d(n, GROUP)``, from ``GROUPED_FROM`` elements on: below, one element a thread does not
#     outnumber the threads a GPU keeps resident, and as many loads are in flight); the last elements loop
#     one at a time. Results are the same (each element is computed alone).


def _binary_py(f, ct):
    """The Python function of the strided binary kernel over device function ``f``, computing in ``ct``."""
    bind_numba_cuda(globals())
    bind_helpers(globals())
    def binary(out, ost, a, ast, sa, use_sa, b, bst, sb, use_sb, shape, n):
        i = cuda.grid(1)
        narrow = n < NARROW
        step = cuda.gridsize(1)
        while i + 3 * step < n:  # Note [Grouped loads]
            o0, a0, b0, _ = _d_offsets(i, shape, narrow, ost, ast, bst, bst)
            o1, a1, b1, _ = _d_offsets(i + step, shape, narrow, ost, ast, bst, bst)
            o2, a2, b2, _ = _d_offsets(i + 2 * step, shape, narrow, ost, ast, bst, bst)
            o3, a3, b3, _ = _d_offsets(i + 3 * step, shape, narrow, ost, ast, bst, bst)
            x0 = sa if use_sa else ct(a[a0])
            x1 = sa if use_sa else ct(a[a1])
            x2 = sa if use_sa else ct(a[a2])
            x3 = sa if use_sa else ct(a[a3])
            y0 = sb if use_sb else ct(b[b0])
            y1 = sb if use_sb else ct(b[b1])
            y2 = sb if use_sb else ct(b[b2])
            y3 = sb if use_sb else ct(b[b3])
            out[o0] = f(x0, y0)
            out[o1] = f(x1, y1)
            out[o2] = f(x2, y2)
            out[o3] = f(x3, y3)
            i += 4 * step
        while i < n:
            oo, oa, ob, _ = _d_offsets(i, shape, narrow, ost, ast, bst, bst)
            x = sa if use_sa else ct(a[oa])
            y = sb if use_sb else ct(b[ob])
            out[oo] = f(x, y)
            i += step

    return binary


def _unary_py(f, ct):
    """The Python function of the strided unary kernel over device function ``f``, computing in ``ct``."""
    bind_numba_cuda(globals())
    bind_helpers(globals())
    def unary(out, ost, a, ast, shape, n):
        i = cuda.grid(1)
        narrow = n < NARROW
        step = cuda.gridsize(1)
        while i + 3 * step < n:  # Note [Grouped loads]
            o0, a0, _, _ = _d_offsets(i, shape, narrow, ost, ast, ast, ast)
            o1, a1, _, _ = _d_offsets(i + step, shape, narrow, ost, ast, ast, ast)
            o2, a2, _, _ = _d_offsets(i + 2 * step, shape, narrow, ost, ast, ast, ast)
            o3, a3, _, _ = _d_offsets(i + 3 * step, shape, narrow, ost, ast, ast, ast)
            x0 = ct(a[a0])
            x1 = ct(a[a1])
            x2 = ct(a[a2])
            x3 = ct(a[a3])
            out[o0] = f(x0)
            out[o1] = f(x1)
            out[o2] = f(x2)
            out[o3] = f(x3)
            i += 4 * step
        while i < n:
            oo, oa, _, _ = _d_offsets(i, shape, narrow, ost, ast, ast, ast)
            out[oo] = f(ct(a[oa]))
            i += step

    return unary


def _nary_py(f, ct):
    """The Python function of the strided ternary kernel over device function ``f(x, y, z, p)``, computing
    in ``ct`` (Note [Ternary template]); an operand is an array, or the scalar beside it when its flag is set."""
    bind_numba_cuda(globals())
    bind_helpers(globals())
    def nary(out, ost, a, ast, sa, use_sa, b, bst, sb, use_sb, c, cst, sc, use_sc, p, shape, n):
        i = cuda.grid(1)
        narrow = n < NARROW
        step = cuda.gridsize(1)
        while i + 3 * step < n:  # Note [Grouped loads]
            o0, a0, b0, c0 = _d_offsets(i, shape, narrow, ost, ast, bst, cst)
            o1, a1, b1, c1 = _d_offsets(i + step, shape, narrow, ost, ast, bst, cst)
            o2, a2, b2, c2 = _d_offsets(i + 2 * step, shape, narrow, ost, ast, bst, cst)
            o3, a3, b3, c3 = _d_offsets(i + 3 * step, shape, narrow, ost, ast, bst, cst)
            x0 = sa if use_sa else ct(a[a0])
            x1 = sa if use_sa else ct(a[a1])
            x2 = sa if use_sa else ct(a[a2])
            x3 = sa if use_sa else ct(a[a3])
            y0 = sb if use_sb else ct(b[b0])
            y1 = sb if use_sb else ct(b[b1])
            y2 = sb if use_sb else ct(b[b2])
            y3 = sb if use_sb else ct(b[b3])
            z0 = sc if use_sc else ct(c[c0])
            z1 = sc if use_sc else ct(c[c1])
            z2 = sc if use_sc else ct(c[c2])
            z3 = sc if use_sc else ct(c[c3])
            out[o0] = f(x0, y0, z0, p)
            out[o1] = f(x1, y1, z1, p)
            out[o2] = f(x2, y2, z2, p)
            out[o3] = f(x3, y3, z3, p)
            i += 4 * step
        while i < n:
            oo, oa, ob, oc = _d_offsets(i, shape, narrow, ost, ast, bst, cst)
            x = sa if use_sa else ct(a[oa])
            y = sb if use_sb else ct(b[ob])
            z = sc if use_sc else ct(c[oc])
            out[oo] = f(x, y, z, p)
            i += step

    return nary


@functools.cache
def nary_device(fn, arity: int):
    """The device function ``g(x, y, z, p)`` of scalar function ``fn`` of ``arity`` operands."""
    bind_numba_cuda(globals())
    f = device(fn)
    if arity == 3:
        return f
    if arity == 2:
        def binary_p(x, y, z, p):
            return f(x, y, p)

        return cuda.jit(device=True)(binary_p)

    def unary_p(x, y, z, p):
        return f(x, p)

    return cuda.jit(device=True)(unary_p)


def nary_python(fn, arity: int, compute: str):
    """The Python function of the strided ternary kernel of scalar function ``fn`` computing in numpy
    dtype ``compute``: what :func:`nary_kernel` compiles (and the PTX test compiles for a signature)."""
    return _nary_py(nary_device(fn, arity), np.dtype(compute).type)


@functools.cache
def nary_kernel(fn, arity: int, compute: str):
    """The strided ternary kernel of scalar function ``fn`` computing in numpy dtype ``compute`` (cached)."""
    bind_numba_cuda(globals())
    return jit(nary_python(fn, arity, compute))


@functools.cache
def binary_kernel(name: str, compute: str):
    """The strided binary kernel of operator ``name`` computing in numpy dtype ``compute`` (cached)."""
    bind_numba_cuda(globals())
    dt = np.dtype(compute)
    return jit(_binary_py(_device_fn("binary", name, dt.kind), dt.type))


@functools.cache
def unary_kernel(name: str, compute: str):
    """The strided unary kernel of ``name`` (an operator or ``"identity"``) computing in ``compute`` (cached)."""
    bind_numba_cuda(globals())
    dt = np.dtype(compute)
    return jit(_unary_py(_device_fn("unary", name, dt.kind), dt.type))


# --- launchers ------------------------------------------------------------------------------------
_WIDE = np.dtype(np.int64)

# Note [Contiguous launches]
#     Most elementwise calls of a training step have C-contiguous operands of the result's shape (or
#     scalars). The launchers then skip the strided set-up (broadcast strides, coalescing, flat views from
#     strides): the kernel runs 1-d over ``n`` elements with unit strides (a scalar's: 0), which is what
#     coalescing would have made of it, so the kernel, its key and its results are the same.
_UNIT, _NONE = (1,), (0,)


@functools.lru_cache(maxsize=4096)
def _strided_geometry(shape: tuple, out_geometry: tuple, geometries: tuple) -> tuple:
    """``(kshape, out strides, *operand strides)`` of a strided launch over ``shape``, from each array's ``(shape,
    byte strides, item size)`` (None for a scalar operand).

    Note [Strided launch geometry]: these depend only on the operands' shapes, strides and item sizes, and a
    training step repeats the same few dozen of them every step (a bias broadcast over a batch, a transposed
    view): worked out once per geometry, about a third of such a launch's host time."""
    zeros = (0,) * len(shape)
    return coalesce(shape, broadcast_strides(*out_geometry, shape),
                    *(zeros if g is None else broadcast_strides(*g, shape) for g in geometries))


def _flat_operands(backend, out, shape: tuple, operands: tuple, is_arr) -> tuple:
    """``(kshape, fo, ost, [(flat, strides), ...])``: the launch geometry of ``out[...] = f(*operands)`` over
    ``shape``, the flat views of ``out`` and of each operand with their element strides. A scalar operand
    (``is_arr`` false) gets the first array operand's view (``out``'s without one; never read) and zero
    strides. Note [Contiguous launches]; otherwise broadcast strides, coalesced. The views are launch
    arguments (``flat_arg``: on a GPU no device-array object is made for them)."""
    fo = backend.contiguous_flat(out)
    if fo is not None:
        flats = []
        ref = None
        for x, a in zip(operands, is_arr):
            if not a:
                flats.append(None)
                continue
            f = backend.contiguous_flat(x) if x.shape == shape else None
            if f is None:
                break
            flats.append(f)
            if ref is None:
                ref = f
        else:
            if ref is None:
                ref = fo
            return (out.size,), fo, _UNIT, [(ref, _NONE) if f is None else (f, _UNIT) for f in flats]
    kshape, ost, *strides = _strided_geometry(
        shape, (out.shape, out.strides, out.dtype.itemsize),
        tuple([(x.shape, x.strides, x.dtype.itemsize) if a else None for x, a in zip(operands, is_arr)]))
    if fo is None:
        fo = backend.flat_arg(out)
    flats = [backend.flat_arg(x) if a else None for x, a in zip(operands, is_arr)]
    ref = next((f for f in flats if f is not None), fo)
    return kshape, fo, ost, [(ref if f is None else f, st) for f, st in zip(flats, strides)]


_HALF, _F32 = np.dtype(np.float16), np.dtype(np.float32)


_CHECKED: dict = {}  # (kinds, half, dtype as given) -> compute dtype; a refused dtype raises every time


def _kind_check(name: str, compute, kinds: str, half: bool = False) -> np.dtype:
    """The dtype the kernel computes in for numpy dtype (or scalar type) ``compute``: ``compute``, or int64
    for 8/16-bit integers (wrap-around results are the same once stored), float32 for float16 where
    ``half``; RuntimeError like torch's if the op does not support it. Worked out once per (kinds, half,
    dtype): launchers ask on every call."""
    key = (kinds, half, compute)
    k = _CHECKED.get(key)
    if k is None:
        k = _CHECKED[key] = _compute_of(name, np.dtype(compute), kinds, half)
    return k


def _compute_of(name: str, compute: np.dtype, kinds: str, half: bool) -> np.dtype:
    k = _WIDE if compute.kind in "iu" and compute.itemsize < 4 else compute
    if half and k == _HALF and "f" in kinds:
        return _F32
    if np_name(k) not in dtypes_for(kinds):
        raise RuntimeError(f'"{name}_cuda" not implemented for \'{scalar_name(compute)}\'')
    return k


def compute_dtype(label: str, dtype, name: str | None = None, table: dict | None = None) -> np.dtype:
    """The compute dtype of entry ``label`` of ``table`` (default :data:`NARY`) for flambeau or numpy dtype
    ``dtype`` (errors name operator ``name``, default ``label``)."""
    _, _, kinds, half = (NARY if table is None else table)[label]
    return _kind_check(name or label, getattr(dtype, "np", dtype), kinds, half)


def binary_launcher(name: str):
    """The CUDA kernel of binary elementwise op ``name`` (convention of the module docstring)."""
    kinds = BINARY[name][1]
    bool_out = name in BOOL_OUT
    kernels: dict = {}  # compute dtype -> (kernel dtype, kernel): the checks and the lookup once per dtype

    def launch(a, b, dtype, out=None):
        compute = dtype.np
        entry = kernels.get(compute)
        if entry is None:
            kdt = _kind_check(name, compute, kinds, half=True)
            entry = kernels[compute] = kdt.type, binary_kernel(name, kdt.name)
        cast, k = entry
        aa, ba = is_array(a), is_array(b)
        shape = broadcast_shapes(a.shape if aa else (), b.shape if ba else ())
        backend = be()
        if out is None:
            out = backend.empty(shape, np.bool_ if bool_out else compute)
        n = out.size
        if n == 0:
            return out
        kshape, fo, ost, ((fa, ast), (fb, bst)) = _flat_operands(backend, out, shape, (a, b), (aa, ba))
        launch_keyed(k, (*launch_1d(n, GROUP), stream()), (fo.dtype, fa.dtype, fb.dtype, len(kshape)),
                     fo, ost, fa, ast, cast(0) if aa else cast(a), not aa, fb, bst, cast(0) if ba else cast(b), not ba,
                     kshape, n)
        return out

    return launch


def _result_dtype(name: str, compute: np.dtype) -> np.dtype:
    """The dtype of a non-bool result of unary op ``name`` in ``compute``: real for :data:`REAL_OUT` of complex."""
    return _fdt.real_np(compute) if compute.kind == "c" and name in REAL_OUT else compute


def unary_launcher(name: str):
    """The CUDA kernel of unary elementwise op ``name``."""
    kinds = UNARY[name][1]
    bool_out = name in BOOL_OUT
    checked: dict = {}  # compute dtype -> (kernel dtype, result dtype), checked once per dtype

    def launch(a, dtype, out=None):
        compute = dtype.np
        entry = checked.get(compute)
        if entry is None:
            kdt = _kind_check(name, compute, kinds, half=True)
            entry = checked[compute] = kdt, np.bool_ if bool_out else _result_dtype(name, np.dtype(compute))
        if out is None:
            out = be().empty(a.shape, entry[1])
        unary_into(name, entry[0], out, a)
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
    k = unary_kernel(name, np_name(compute))
    kshape, fo, ost, ((fa, ast),) = _flat_operands(backend, out, shape, (a,), (True,))
    launch_keyed(k, (*launch_1d(n, GROUP), stream()), (fo.dtype, fa.dtype, len(kshape)), fo, ost, fa, ast, kshape, n)


def nary(fn, arity: int, compute: np.dtype, operands: tuple, params: tuple = (), out_dtype=None, out=None):
    """``out[...] = fn(*operands, p)`` by the ternary template (Note [Ternary template]), on the current stream.

    ``operands``: ``arity`` device arrays (broadcast together, strided) or scalars; ``params``: up to
    three scalars; all cast to ``compute``. The result is a new array of the broadcast shape and
    ``out_dtype`` (default ``compute``), or ``out`` (which the operands broadcast to) when given.
    """
    backend = be()
    operands = (*operands, *_PADDING[arity])
    is_arr = [is_array(x) for x in operands]
    if out is None:
        shape = broadcast_shapes(*[x.shape for x, a in zip(operands, is_arr) if a])
        out = backend.empty(shape, compute if out_dtype is None else out_dtype)
    shape = tuple(out.shape)
    n = out.size
    if n == 0:
        return out
    ct = compute.type
    zero = ct(0)
    kshape, fo, ost, views = _flat_operands(backend, out, shape, operands, is_arr)
    args = []
    for x, a, (f, st) in zip(operands, is_arr, views):
        args += (f, st, zero, False) if a else (f, st, ct(x), True)
    p = (*[ct(v) for v in params], *_ZEROS[compute][len(params):]) if params else _ZEROS[compute]
    k = nary_kernel(fn, arity, np_name(compute))
    key = (fo.dtype, args[0].dtype, args[4].dtype, args[8].dtype, len(kshape))
    launch_keyed(k, (*launch_1d(n, GROUP), stream()), key, fo, ost, *args, p, kshape, n)
    return out


_PADDING = [(0,) * (3 - k) for k in range(4)]  # the unused operands after k given ones


class _Zeros(dict):
    """compute dtype -> three zeros of it: the parameters of a call that passes none."""

    def __missing__(self, compute):
        zeros = self[compute] = (compute.type(0),) * 3
        return zeros


_ZEROS = _Zeros()


# --- registration: every name of the tables (Note [One kernel table]) ------------------------------
for _name in BINARY:
    kernel(_name, "cuda")(binary_launcher(_name))
for _name in UNARY:
    kernel(_name, "cuda")(unary_launcher(_name))
del _name


# --- operators of the ternary template (conventions of flambeau._ops.elementwise) ---------------------
def _run(label: str, dtype, operands: tuple, params: tuple = (), out=None, name: str | None = None):
    """Operator ``label`` of :data:`NARY` in flambeau dtype ``dtype`` (its storage dtype for the result)."""
    fn, arity, _, _ = NARY[label]
    compute = compute_dtype(label, dtype, name)
    return nary(fn, arity, compute, operands, params, np.dtype(dtype.np), out)


def _copy(a, dtype, out=None):
    """``a`` cast to ``dtype`` (a new array, or written into ``out``): the integer cases of rounding."""
    if out is None:
        out = be().empty(a.shape, dtype.np)
    unary_into("identity", np.dtype(dtype.np), out, a)
    return out


@kernel("round", "cuda")
def _k_round(a, dtype, *params, out=None):
    decimals = params[0] if params else 0
    if not dtype.is_floating_point:
        return _copy(a, dtype, out)
    return _run("round", dtype, (a,), (10.0 ** abs(decimals), decimals >= 0), out)


@kernel("gelu", "cuda")
def _k_gelu(a, dtype, approximate, out=None):
    return _run("gelu_tanh" if approximate == "tanh" else "gelu", dtype, (a,), (), out, "gelu")


@kernel("softplus", "cuda")
def _k_softplus(a, dtype, *params, out=None):
    return _run("softplus", dtype, (a,), params, out)


@kernel("logit", "cuda")
def _k_logit(a, dtype, *params, out=None):
    eps = params[0] if params else None
    return _run("logit", dtype, (a,), (0.0 if eps is None else eps, eps is not None), out)


@kernel("nan_to_num", "cuda")
def _k_nan_to_num(a, dtype, nan, posinf, neginf, out=None):
    if not dtype.is_floating_point:
        return _copy(a, dtype, out)
    return _run("nan_to_num", dtype, (a,), (nan, posinf, neginf), out)  # the front filled the infinities


@kernel("clamp", "cuda")
def _k_clamp(a, lo, hi, dtype, out=None):
    return _run("clamp", dtype, (a, 0 if lo is None else lo, 0 if hi is None else hi),
                (lo is not None, hi is not None), out)


@kernel("where", "cuda")
def _k_where(cond, a, b, dtype):
    return _run("where", dtype, (cond, a, b))


@kernel("lerp", "cuda")
def _k_lerp(a, e, w, dtype, out=None):
    return _run("lerp", dtype, (a, e, w), (), out)


@kernel("addcmul", "cuda")
def _k_addcmul(a, t1, t2, value, dtype, out=None):
    return _run("addcmul", dtype, (a, t1, t2), (value,), out)


@kernel("addcdiv", "cuda")
def _k_addcdiv(a, t1, t2, value, dtype, out=None):
    return _run("addcdiv", dtype, (a, t1, t2), (value,), out)


@kernel("isclose", "cuda")
def _k_isclose(a, b, rtol, atol, equal_nan):
    dt = np.dtype(a.dtype)
    if dt.kind == "b":
        return binary_launcher("eq")(a, b, _fdt.bool)
    compute = compute_dtype("isclose", dt if dt.kind == "f" else np.float64)
    return nary(_isclose, 2, compute, (a, b), (rtol, atol, equal_nan), np.bool_)


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
            half = ("float16",) if "f" in kinds and name != "identity" else ()
            for dn in dtypes_for(kinds) + half:
                storage = np.dtype(dn)
                dt = _kind_check(name, storage, kinds, half=True)  # float16 operands compute in float32
                t = from_dtype(dt)
                arr = types.Array(from_dtype(storage), 1, "C")
                outt = types.Array(types.boolean if name in BOOL_OUT else
                                   from_dtype(_result_dtype(name, storage)), 1, "C")
                py = template(_device_fn(table, name, dt.kind), dt.type)
                if table == "binary":
                    sig = (outt, idx, arr, idx, t, types.boolean, arr, idx, t, types.boolean, idx, types.int64)
                else:
                    sig = (outt, idx, arr, idx, idx, types.int64)
                cases.append((f"{table}:{name}:{dn}", py, sig))
    return cases + nary_ptx_cases(NARY, ndim)


def nary_ptx_cases(table: dict, ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the ternary template for every entry of ``table``
    (label -> (function, arity, kinds, half)) and storage dtype it is launched with: operands and
    result in the storage dtype (where's condition bool, predicates' result bool), scalars and
    parameters in the compute dtype."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    cases = []
    barr = types.Array(types.boolean, 1, "C")
    for label, (fn, arity, kinds, half) in table.items():
        for dn in dtypes_for(kinds) + (("float16",) if half and "f" in kinds else ()):
            storage = np.dtype(dn)
            compute = _kind_check(label, storage, kinds, half)
            arr = types.Array(from_dtype(storage), 1, "C")
            sig = nary_signature(barr if label in BOOL_OUT else arr, arr, from_dtype(compute), ndim,
                                 first=barr if label == "where" else None)
            cases.append((f"nary:{label}:{dn}", nary_python(fn, arity, compute), sig))
    return cases


def nary_signature(out, operand, t, ndim: int, first=None) -> tuple:
    """The argument types of the ternary template (Note [Ternary template]), for PTX tests: numba array
    types ``out`` of the result and ``operand`` of the operands (``first`` of the first one where it
    differs: ``where``'s condition), numba type ``t`` of scalars and parameters, ``ndim``-d indices."""
    from numba import types

    idx = types.UniTuple(types.int64, ndim)
    ops = []
    for j in range(3):
        ops += [first if j == 0 and first is not None else operand, idx, t, types.boolean]
    return (out, idx, *ops, types.UniTuple(t, 3), idx, types.int64)
