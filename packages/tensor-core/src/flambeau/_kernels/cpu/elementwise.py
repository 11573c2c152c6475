"""CPU kernels of the elementwise operators of ``flambeau._ops.elementwise``, whose docstring gives
their calling conventions.

Most are numpy ufuncs made into kernels by ``_elementwise`` (:func:`binary_kernel`,
:func:`unary_kernel`: the compute dtype, threads for large operands, quiet floating-point errors);
the others are small numpy expressions, numba ufuncs for erf/erfc/erfinv (compiled on first use),
the vectorised float32 exp of ``_fast_exp`` and the fused gelu and silu of ``activation`` (Note
[Fused activations]). Each registers with ``kernel(<operator>, "cpu")``, in the order of the
declarations. Integer division by zero raises ``RuntimeError("ZeroDivisionError")`` as torch does
on CPU.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau import _dtype as dt
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._kernels.cpu._elementwise import binary_kernel, unary_kernel, via_compute, wrap_scalar
from flambeau._kernels.cpu._fast_exp import exp_f32
from flambeau._kernels.cpu.activation import fusable, fused_activation
from flambeau._ops._registry import kernel
from flambeau._parallel import PARALLEL_MIN_ELEMENTS

__all__ = ["add_kernel", "sub_kernel"]

_bool = dt.bool
_BF16 = dt.bfloat16.np


# --- arithmetic ----------------------------------------------------------------------------------
# add's and sub's kernels are also the fast path of their fronts when alpha != 1
add_kernel = kernel("add", "cpu")(binary_kernel(np.add))
sub_kernel = kernel("sub", "cpu")(binary_kernel(np.subtract))
kernel("mul", "cpu")(binary_kernel(np.multiply))
kernel("div", "cpu")(binary_kernel(np.true_divide))


def _nonzero_divisor(b) -> bool:
    return bool(b.all()) if isinstance(b, np.ndarray) else b != 0


def _int_div_checked(k):
    """Wrap a division-like kernel with torch's integer division-by-zero error."""

    def checked(a, b, dtype, out=None):
        if not dtype.is_floating_point and not _nonzero_divisor(b):
            raise RuntimeError("ZeroDivisionError")
        return k(a, b, dtype, out)

    return checked


kernel("floor_divide", "cpu")(_int_div_checked(binary_kernel(np.floor_divide)))
kernel("remainder", "cpu")(_int_div_checked(binary_kernel(np.remainder)))
kernel("fmod", "cpu")(_int_div_checked(binary_kernel(np.fmod)))


@kernel("pow", "cpu")
def _cpu_pow(a, b, dtype, out=None):
    npdt = dtype.np
    if dtype is _bool:  # bool tensor ** Python bool
        r = a.copy() if b else np.ones(a.shape, np.bool_)
        if out is not None:
            np.copyto(out, r)
            return out
        return r
    with np.errstate(all="ignore"):
        if dtype._category >= 2:  # floating and complex
            return _pow_float(a, b, dtype, out)
        if not isinstance(b, np.ndarray):
            if b < 0:
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            return _pow_float(a, b, dtype, out)  # same ufunc call; the name is historical
        if b.dtype != npdt:
            b = b.astype(npdt)  # torch casts the exponent to the result dtype first (uint8 wraps)
        neg = b < 0
        if not neg.any():
            return _pow_float(a, b, dtype, out)
        # torch: 1 ** -n == 1, (-1) ** -n == +-1, anything else ** -n == 0 (truncated).
        r = np.power(a, np.where(neg, 0, b), dtype=npdt, casting="unsafe")
        r = np.where(neg, np.where(np.equal(a, 1), 1, np.where(np.equal(a, -1), 1 - 2 * (b & 1), 0)), r)
        r = r.astype(npdt, copy=False)
        if out is not None:
            np.copyto(out, r, casting="unsafe")
            return out
        return r


_pow_float = binary_kernel(np.power)
kernel("float_power", "cpu")(binary_kernel(np.power))


# --- unary arithmetic ----------------------------------------------------------------------------
def _sign_kernel(a, dtype, out=None):
    # (a > 0) - (a < 0) gives 0 for NaN, as torch does (np.sign gives NaN)
    r = a.copy() if a.dtype == np.bool_ else (a > 0).astype(a.dtype) - (a < 0).astype(a.dtype)
    if out is not None:
        np.copyto(out, r, casting="unsafe")
        return out
    return np.asarray(r)


kernel("neg", "cpu")(unary_kernel(np.negative))
kernel("abs", "cpu")(unary_kernel(np.abs))
kernel("reciprocal", "cpu")(unary_kernel(np.reciprocal))
kernel("sign", "cpu")(_sign_kernel)


@kernel("sgn", "cpu")
def _sgn_kernel(a, dtype, out=None):
    if a.dtype.kind != "c":
        return _sign_kernel(a, dtype, out)
    m = np.abs(a)
    with np.errstate(all="ignore"):
        r = np.where(m == 0, 0, a / m).astype(a.dtype, copy=False)  # z / |z|, 0 at 0 (torch)
    if out is not None:
        np.copyto(out, r)
        return out
    return r


# --- unary math ----------------------------------------------------------------------------------
def _expr_kernel(f, keep_int: bool = False):
    """A unary kernel computing numpy expression ``f(a)`` in ``dtype`` (float16 and bfloat16 through
    float32: Note [Compute dtype] in ``flambeau._dtype``).

    ``keep_int``: integer and bool inputs are returned as a copy (floor, ceil, trunc ...).
    """

    def expr(a, dtype, *params, out=None):
        npdt = dtype.np
        if keep_int and not dtype.is_floating_point:
            r = a.copy()
        else:
            x = a.astype(dtype.compute.np, copy=False)
            with np.errstate(all="ignore"):
                r = np.asarray(f(x, *params)).astype(npdt, copy=False)
        if out is not None:
            np.copyto(out, r, casting="unsafe")
            return out
        return r

    return takes_bfloat16(expr)


@functools.cache
def _numba_special():
    """erf, erfc and erfinv as numba ufuncs (compiled on first use, cached on disk)."""
    from numba import vectorize

    sigs = ["float32(float32)", "float64(float64)"]

    @vectorize(sigs, cache=True)
    def erf(x):
        return math.erf(x)

    @vectorize(sigs, cache=True)
    def erfc(x):
        return math.erfc(x)

    @vectorize(sigs, cache=True)
    def erfinv(y):
        # Giles' single-precision approximation refined by two Newton steps on erf.
        if y != y or y < -1.0 or y > 1.0:
            return math.nan
        if y == 1.0:
            return math.inf
        if y == -1.0:
            return -math.inf
        w = -math.log((1.0 - y) * (1.0 + y))
        if w < 5.0:
            w = w - 2.5
            p = 2.81022636e-08
            p = 3.43273939e-07 + p * w
            p = -3.5233877e-06 + p * w
            p = -4.39150654e-06 + p * w
            p = 0.00021858087 + p * w
            p = -0.00125372503 + p * w
            p = -0.00417768164 + p * w
            p = 0.246640727 + p * w
            p = 1.50140941 + p * w
        else:
            w = math.sqrt(w) - 3.0
            p = -0.000200214257
            p = 0.000100950558 + p * w
            p = 0.00134934322 + p * w
            p = -0.00367342844 + p * w
            p = 0.00573950773 + p * w
            p = -0.0076224613 + p * w
            p = 0.00943887047 + p * w
            p = 1.00167406 + p * w
            p = 2.83297682 + p * w
        x = p * y
        for _ in range(2):
            x = x - (math.erf(x) - y) / (1.1283791670955126 * math.exp(-x * x))
        return x

    return {"erf": erf, "erfc": erfc, "erfinv": erfinv}


def _special(name):
    return lambda x: _numba_special()[name](x)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


_FLOAT_MATH = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2,
    "log10": np.log10, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "tanh": np.tanh, "deg2rad": np.deg2rad, "rad2deg": np.rad2deg,
}


def _exp_kernel(default):
    """exp: large contiguous float32 arrays go to the vectorised kernel of ``_fast_exp``."""
    f32 = np.dtype(np.float32)

    def exp(a, dtype, out=None):
        if (a.size >= PARALLEL_MIN_ELEMENTS and a.dtype is f32 and dtype.np is f32 and a.flags.c_contiguous
                and (out is None or (out.dtype is f32 and out.flags.c_contiguous and out.shape == a.shape))):
            return exp_f32(a, out)
        return default(a, dtype, out)

    return takes_bfloat16(exp)


for _name, _ufunc in _FLOAT_MATH.items():
    _k = unary_kernel(_ufunc)
    kernel(_name, "cpu")(_exp_kernel(_k) if _name == "exp" else _k)
for _name, _f in {"rsqrt": lambda x: 1 / np.sqrt(x), "sigmoid": _sigmoid, "erf": _special("erf"),
                  "erfc": _special("erfc"), "erfinv": _special("erfinv")}.items():
    kernel(_name, "cpu")(_expr_kernel(_f))
del _name, _ufunc, _k, _f


# --- rounding --------------------------------------------------------------------------------------
kernel("floor", "cpu")(_expr_kernel(np.floor, keep_int=True))
kernel("ceil", "cpu")(_expr_kernel(np.ceil, keep_int=True))
kernel("trunc", "cpu")(_expr_kernel(np.trunc, keep_int=True))
kernel("frac", "cpu")(_expr_kernel(lambda x: x - np.trunc(x)))
kernel("round", "cpu")(_expr_kernel(lambda x, decimals: np.round(x, decimals), keep_int=True))


# --- activations -------------------------------------------------------------------------------------
@kernel("relu", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _relu_kernel(a, dtype, out=None):
    if fusable(a, out):  # one parallel pass: np.maximum ran at a seventh of torch's speed
        return fused_activation("hardtanh", a, None, a.dtype, out, params=(0.0, math.inf))
    return np.maximum(a, a.dtype.type(0), out=out)


@kernel("silu", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _silu_kernel(a, dtype, out=None):
    return fused_activation("silu", a, None, dtype.np, out)


@kernel("gelu", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _gelu_kernel(a, dtype, approximate, out=None):
    return fused_activation("gelu_tanh" if approximate == "tanh" else "gelu", a, None, dtype.np, out)


kernel("softplus", "cpu")(_expr_kernel(lambda x, beta, thr: np.where(
    x * beta > thr, x, np.log1p(np.exp(x * beta)) / beta)))


def _logit(x, eps):
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


kernel("logit", "cpu")(_expr_kernel(_logit))


# --- floating-point classification and cleanup ---------------------------------------------------------
def _as_ieee(a: np.ndarray) -> np.ndarray:
    """bfloat16 (ml_dtypes: numpy kind 'V', which numpy's float predicates do not see) widened to float32,
    exactly; other arrays as they are."""
    return a.astype(np.float32) if a.dtype == _BF16 else a


def _classify(f, int_value: bool):
    def classify(a, dtype, out=None):
        a = _as_ieee(a)
        if a.dtype.kind in "fc":  # complex: a part is NaN / infinite (torch)
            return f(a)
        return np.full(a.shape, int_value, dtype=np.bool_)

    return takes_bfloat16(classify)


for _name, _f, _v in (("isnan", np.isnan, False), ("isinf", np.isinf, False), ("isposinf", np.isposinf, False),
                      ("isneginf", np.isneginf, False), ("isfinite", np.isfinite, True)):
    kernel(_name, "cpu")(_classify(_f, _v))
del _name, _f, _v


@kernel("signbit", "cpu")
def _signbit(a, dtype, out=None):
    a = _as_ieee(a)
    if a.dtype.kind == "f":
        return np.signbit(a)
    return np.less(a, 0) if a.dtype.kind == "i" else np.zeros(a.shape, np.bool_)


@kernel("nan_to_num", "cpu")
@takes_bfloat16
def _nan_to_num_kernel(a, dtype, nan, posinf, neginf, out=None):
    if a.dtype == _BF16:  # in float32 (the front passes bfloat16's own largest values for the infinities)
        r = np.nan_to_num(a.astype(np.float32), nan=nan, posinf=posinf, neginf=neginf).astype(a.dtype)
    elif a.dtype.kind not in "fc":
        r = a.copy()
    else:
        r = np.nan_to_num(a, copy=True, nan=nan, posinf=posinf, neginf=neginf)
    if out is not None:
        np.copyto(out, r, casting="unsafe")
        return out
    return r


# --- binary math -------------------------------------------------------------------------------------
@kernel("xlogy", "cpu")
def _xlogy(a, b, dtype, out=None):
    npdt = dtype.np
    with np.errstate(all="ignore"):
        x, y = np.asarray(a, dtype=npdt), np.asarray(b, dtype=npdt)
        r = np.where((x == 0) & ~np.isnan(y), npdt.type(0), x * np.log(y)).astype(npdt, copy=False)
    if out is not None:
        np.copyto(out, r, casting="unsafe")
        return out
    return r


kernel("atan2", "cpu")(binary_kernel(np.arctan2))
kernel("hypot", "cpu")(binary_kernel(np.hypot))
kernel("logaddexp", "cpu")(binary_kernel(np.logaddexp))
kernel("logaddexp2", "cpu")(binary_kernel(np.logaddexp2))
kernel("copysign", "cpu")(binary_kernel(np.copysign))
kernel("maximum", "cpu")(binary_kernel(np.maximum))
kernel("minimum", "cpu")(binary_kernel(np.minimum))
kernel("fmax", "cpu")(binary_kernel(np.fmax))
kernel("fmin", "cpu")(binary_kernel(np.fmin))


# --- clamp, where, lerp, addcmul, addcdiv ---------------------------------------------------------------
@kernel("clamp", "cpu")
@takes_bfloat16
def _cpu_clamp(a, lo, hi, dtype, out=None):
    npdt = dtype.np
    if npdt is _BF16:
        return via_compute(_cpu_clamp, (a, lo, hi), dtype, out)
    try:
        if lo is not None:
            a = np.maximum(a, lo, dtype=npdt, casting="unsafe")
        if hi is not None:
            a = np.minimum(a, hi, dtype=npdt, casting="unsafe")
    except OverflowError:
        return _cpu_clamp(a, wrap_scalar(lo, npdt), wrap_scalar(hi, npdt), dtype, out)
    if out is not None:
        np.copyto(out, a, casting="unsafe")
        return out
    return np.asarray(a)


@kernel("where", "cpu")
@takes_bfloat16  # moves values, no arithmetic (hot in masking: the float32 route's scan cost 0.7 us a call)
def _cpu_where(cond, a, b, dtype):
    npdt = dtype.np
    try:
        return np.asarray(np.where(cond, a, b)).astype(npdt, copy=False)
    except OverflowError:
        return _cpu_where(cond, wrap_scalar(a, npdt), wrap_scalar(b, npdt), dtype)


@kernel("lerp", "cpu")
def _cpu_lerp(a, e, w, dtype, out=None):
    with np.errstate(all="ignore"):
        diff = np.subtract(e, a, dtype=dtype.np, casting="unsafe")
        # torch's formula: exact at both ends (weight 0 gives start, weight 1 gives end).
        r = np.where(np.abs(w) < 0.5, a + w * diff, e - diff * (1 - np.asarray(w))).astype(dtype.np, copy=False)
    if out is not None:
        np.copyto(out, r, casting="unsafe")
        return out
    return r


def _addc_kernel(ufunc):
    def addc(a, t1, t2, value, dtype, out=None):
        npdt = dtype.np
        if npdt is _BF16:
            return via_compute(addc, (a, t1, t2, value), dtype, out)
        with np.errstate(all="ignore"):
            r = ufunc(t1, t2, dtype=npdt, casting="unsafe")
            if not (value.__class__ is int and value == 1):
                r = np.multiply(r, wrap_scalar(value, npdt), dtype=npdt)
            r = np.add(a, r, dtype=npdt, casting="unsafe")
        if out is not None:
            np.copyto(out, r, casting="unsafe")
            return out
        return np.asarray(r)

    return takes_bfloat16(addc)


kernel("addcmul", "cpu")(_addc_kernel(np.multiply))
kernel("addcdiv", "cpu")(_addc_kernel(np.true_divide))


# --- comparisons -----------------------------------------------------------------------------------------
for _name, _ufunc in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
                      "ge": np.greater_equal}.items():
    kernel(_name, "cpu")(binary_kernel(_ufunc, bool_out=True))


@kernel("isclose", "cpu")
@takes_bfloat16
def _cpu_isclose(a, b, rtol, atol, equal_nan):
    if a.dtype == np.bool_:
        return np.equal(a, b)
    with np.errstate(all="ignore"):
        close = np.equal(a, b)
        inexact = a.dtype.kind in "fc" and a.dtype != _BF16  # numpy's own floating and complex loops
        if equal_nan and (inexact or a.dtype == _BF16):
            close |= np.isnan(a) & np.isnan(b)
        x, y = (a, b) if inexact else (a.astype(np.float64), b.astype(np.float64))
        err = np.abs(x - y)
        close |= np.isfinite(err) & (err <= atol + np.abs(rtol * y))
    return close


# --- logical and bitwise -----------------------------------------------------------------------------------
for _name, _ufunc in {"logical_and": np.logical_and, "logical_or": np.logical_or,
                      "logical_xor": np.logical_xor}.items():
    kernel(_name, "cpu")(binary_kernel(_ufunc, bool_out=True))
kernel("logical_not", "cpu")(unary_kernel(np.logical_not, bool_out=True))
for _name, _ufunc in {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
                      "bitwise_left_shift": np.left_shift, "bitwise_right_shift": np.right_shift}.items():
    kernel(_name, "cpu")(binary_kernel(_ufunc))
kernel("bitwise_not", "cpu")(unary_kernel(np.invert))
del _name, _ufunc
