"""Scalar functions of the CUDA elementwise kernels, per operator name (pure Python; no numba import).

``BINARY`` / ``UNARY`` map an operator name to ``(scalar function, kinds)``: the function becomes a
``numba.cuda.jit(device=True)`` device function in :mod:`flambeau.cuda._kernels`; ``kinds`` says
which compute dtypes it supports (``f`` float32/float64, ``i`` int32/int64, ``b`` bool).
"""

from __future__ import annotations

import math

__all__ = ["BINARY", "UNARY", "KINDS", "INT_VARIANTS", "dtypes_for"]


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


# name -> (scalar function, dtype kinds the kernel supports: "f" float, "i" int, "b" bool)
BINARY = {
    "add": (_add, "fib"), "sub": (_sub, "fi"), "mul": (_mul, "fib"), "div": (_div, "f"),
    "true_divide": (_div, "f"), "pow": (_pow, "fi"), "maximum": (_maximum, "fi"),
    "minimum": (_minimum, "fi"), "fmax": (_fmax, "fi"), "fmin": (_fmin, "fi"),
    "eq": (_eq, "fib"), "ne": (_ne, "fib"), "lt": (_lt, "fib"), "le": (_le, "fib"), "gt": (_gt, "fib"),
    "ge": (_ge, "fib"), "logical_and": (_logical_and, "fib"), "logical_or": (_logical_or, "fib"),
    "logical_xor": (_logical_xor, "fib"), "bitwise_and": (_bitwise_and, "ib"),
    "bitwise_or": (_bitwise_or, "ib"), "bitwise_xor": (_bitwise_xor, "ib"), "atan2": (_atan2, "f"),
    "hypot": (_hypot, "f"), "copysign": (_copysign, "f"),
    "logaddexp": (_logaddexp, "f"), "logaddexp2": (_logaddexp2, "f"), "xlogy": (_xlogy, "f"),
    "floor_divide": (_floor_divide, "fi"), "remainder": (_remainder, "fi"), "fmod": (_fmod, "fi"),
}

UNARY = {
    "neg": (_neg, "fi"), "negative": (_neg, "fi"), "abs": (_abs, "fi"), "exp": (_exp, "f"),
    "exp2": (_exp2, "f"), "expm1": (_expm1, "f"), "log": (_log, "f"), "log2": (_log2, "f"),
    "log10": (_log10, "f"), "log1p": (_log1p, "f"), "sqrt": (_sqrt, "f"), "rsqrt": (_rsqrt, "f"),
    "sin": (_sin, "f"), "cos": (_cos, "f"), "tan": (_tan, "f"), "asin": (_asin, "f"), "acos": (_acos, "f"),
    "atan": (_atan, "f"), "sinh": (_sinh, "f"), "cosh": (_cosh, "f"), "tanh": (_tanh, "f"),
    "sigmoid": (_sigmoid, "f"), "relu": (_relu, "fi"), "silu": (_silu, "f"), "erf": (_erf, "f"),
    "erfc": (_erfc, "f"), "reciprocal": (_reciprocal, "f"), "square": (_square, "fi"),
    "sign": (_sign, "fi"), "logical_not": (_logical_not, "fib"), "bitwise_not": (_bitwise_not, "i"),
    "isnan": (_isnan, "fi"), "isinf": (_isinf, "fi"), "isfinite": (_isfinite, "fi"),
    "acosh": (_acosh, "f"), "asinh": (_asinh, "f"), "atanh": (_atanh, "f"), "deg2rad": (_deg2rad, "f"),
    "rad2deg": (_rad2deg, "f"), "signbit": (_signbit, "fi"), "isposinf": (_isposinf, "fi"),
    "isneginf": (_isneginf, "fi"), "positive": (_identity, "fi"), "identity": (_identity, "fib"),
}

# Compute dtypes of the elementwise kernels (8/16-bit integers compute in int64, see cuda_kernels).
# Integer versions of functions whose float version does not suit integers.
INT_VARIANTS = {"fmod": _fmod_int}

KINDS = {"f": ("float32", "float64"), "i": ("int32", "int64"), "b": ("bool",)}


def dtypes_for(kinds: str) -> tuple:
    """numpy dtype names of the compute dtypes ``kinds`` covers."""
    return tuple(n for k in kinds for n in KINDS[k])


