"""Elementwise operators: arithmetic, math, activations, comparisons, logical and bitwise operators.

Most are declared once through the factories of ``_elementwise_base`` (the signature, a dtype
rule, the dunders); operators with extra arguments (``clamp``, ``where``, ``lerp``, ``addcmul`` ...)
have hand-written fronts following the same pattern. The CPU kernels (numpy ufuncs or small numpy
expressions, mostly) live in ``flambeau._kernels.cpu.elementwise``; CUDA kernels are registered for
the same names by ``flambeau._kernels.cuda.elementwise``.

Kernel conventions (every device; arrays in, array out):
    binary ops:        ``kernel(a, b, dtype, out=None)`` (see ``_elementwise_base``).
    unary ops:         ``kernel(a, dtype, out=None)``; ops with parameters take them after
                       ``dtype``: ``round(a, dtype, decimals)``, ``softplus(a, dtype, beta, threshold)``,
                       ``gelu(a, dtype, approximate)``, ``logit(a, dtype, eps)``,
                       ``nan_to_num(a, dtype, nan, posinf, neginf)``.
    clamp:             ``kernel(a, min, max, dtype, out=None)``; ``min``/``max`` arrays, scalars or None.
    where:             ``kernel(condition, a, b, dtype)``.
    lerp:              ``kernel(a, end, weight, dtype, out=None)``.
    addcmul/addcdiv:   ``kernel(a, t1, t2, value, dtype, out=None)``.
    isclose:           ``kernel(a, b, rtol, atol, equal_nan) -> bool array``.
``dtype`` is the flambeau dtype to compute and return in; ``a``/``b``... may be Python scalars.

Composite operators (``add``/``sub`` with ``alpha``, ``rsub``, ``div`` with a rounding mode,
``square``, ``positive``, ``clamp_min``/``clamp_max``, ``allclose``, ``equal``) are built from the
primitives above and are recorded by autograd through them; they are declared ``composite=True``
(differentiable, with no derivative of their own); ``allclose``/``equal`` return Python bools.

Integer division by zero (``//``, ``%``, ``fmod``, ``div(rounding_mode=...)``) raises
``RuntimeError("ZeroDivisionError")`` as torch does on CPU.
"""

from __future__ import annotations

import numpy as np

from flambeau import _dtype as dt
from flambeau._device import CPU as _CPU
from flambeau._info import finfo
from flambeau._kernels.cpu.elementwise import add_kernel as _cpu_add
from flambeau._kernels.cpu.elementwise import sub_kernel as _cpu_sub
from flambeau._ops._common import (
    Tensor,
    _wrap,
    broadcast_shapes,
    common_device,
    grad_state,
    inplace_by_engine,
    inplace_needs_engine,
    record,
    record_if_needed,
)
from flambeau._ops._elementwise_base import (
    binary_op,
    binary_samples,
    check_inplace_cast,
    not_implemented_for,
    type_name,
    unary_op,
    unary_samples,
)
from flambeau._ops._registry import OPS, declare
from flambeau._ops._samples import ALL, FLOAT, FLOAT_INT, SampleInput, make_tensor

_bool = dt.bool


def _arr(x):
    return x._data if isinstance(x, Tensor) else x


def _is_int_scalar(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_float_scalar(x) -> bool:
    return isinstance(x, (float, np.floating))


# --- arithmetic ----------------------------------------------------------------------------------
def _no_bool_sub(input, other):
    a_bool = getattr(input, "dtype", None) is _bool or isinstance(input, (bool, np.bool_))
    b_bool = getattr(other, "dtype", None) is _bool or isinstance(other, (bool, np.bool_))
    if a_bool and b_bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if a_bool or b_bool:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


ADD = binary_op("add(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor",
                dunders=("__add__", "__iadd__"), rdunders=("__radd__",), category="arithmetic", complex_ok=True)
SUB = binary_op("sub(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor",
                dunders=("__sub__", "__isub__"), rdunders=("__rsub__",), category="arithmetic",
                check_operands=_no_bool_sub, aliases=("subtract",), complex_ok=True)
MUL = binary_op("mul(Tensor input, Tensor other) -> Tensor",
                dunders=("__mul__", "__imul__"), rdunders=("__rmul__",), category="arithmetic",
                aliases=("multiply",), complex_ok=True)
DIV = binary_op("div(Tensor input, Tensor other, *, str? rounding_mode=None) -> Tensor",
                rule="float", dunders=("__truediv__", "__itruediv__"),
                rdunders=("__rtruediv__",), category="arithmetic", aliases=("divide", "true_divide"),
                complex_ok=True)


def _check_alpha(d, alpha, argname="alpha"):
    if isinstance(alpha, (bool, np.bool_)):
        if d is not _bool:
            raise RuntimeError(f"Boolean {argname} only supported for Boolean results.")
    elif not d.is_floating_point and _is_float_scalar(alpha):
        raise RuntimeError(f"For integral input tensors, argument {argname} must not be a floating point number.")


def _scaled(input, other, alpha):
    """``alpha * other`` computed in the dtype of ``input op other`` (torch scales after promotion)."""
    d = dt.result_type(input, other)
    _check_alpha(d, alpha)
    if not isinstance(other, Tensor):
        return other * alpha if d is not _bool else bool(other) and bool(alpha)
    if d is _bool:  # bool results: alpha only decides whether other counts
        return other if alpha else False
    if other.dtype is not d:
        other = other.to(d)
    return mul(other, alpha)


def _alpha_front(op, fast, fast_, cpu_kernel, sign: str):
    """``op(input, other, *, alpha=1)`` = ``input {sign} alpha * other``; alpha == 1 is the fast front.

    ``cpu_kernel``: ``op``'s CPU kernel, called directly on the common path.
    """

    def front(input, other, *, alpha=1):
        if alpha.__class__ is int and alpha == 1:
            return fast(input, other)
        if (input.__class__ is Tensor and other.__class__ is Tensor and input.dtype is other.dtype
                and input.dtype.is_floating_point and input._device is _CPU and other._device is _CPU
                and input._data.shape == other._data.shape):
            # The common case in one pass of Python: float tensors of one shape and dtype on the CPU.
            d = input.dtype
            _check_alpha(d, alpha)
            out = _wrap(cpu_kernel(input._data, np.multiply(other._data, alpha, dtype=d.np), d), _CPU, None, d)
            if grad_state.enabled and (input._requires_grad or other._requires_grad):
                record(op, (input, other), {"alpha": alpha}, out)
            return out
        if op is SUB:
            _no_bool_sub(input, other)
        return fast(input, _scaled(input, other, alpha))

    def front_(self, other, *, alpha=1):
        if alpha.__class__ is int and alpha == 1:
            return fast_(self, other)
        if op is SUB:
            _no_bool_sub(self, other)
        return fast_(self, _scaled(self, other, alpha))

    front.__doc__ = (f"``input {sign} alpha * other`` elementwise, with broadcasting and type promotion.\n\n"
                     "``input`` and ``other`` are tensors or numbers (at least one a tensor); ``alpha`` is a "
                     "number, which must not be a float for integer results. Returns a tensor of the broadcast "
                     "shape and promoted dtype.")
    front_.__doc__ = f"In-place version of :func:`flambeau.{op.name}`; returns ``self``."
    op.front(front)
    op.inplace(front_)
    return front


add = _alpha_front(ADD, ADD.fn, ADD.inplace_fn, _cpu_add, "+")
sub = _alpha_front(SUB, SUB.fn, SUB.inplace_fn, _cpu_sub, "-")
mul = MUL.fn

RSUB = declare("rsub(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor", method=False,
               composite=True, category="arithmetic")


@RSUB.front
def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input`` (``sub`` with its operands swapped); same shapes and dtypes as :func:`sub`."""
    return sub(other, input, alpha=alpha)


FLOOR_DIVIDE = binary_op("floor_divide(Tensor input, Tensor other) -> Tensor",
                         dunders=("__floordiv__", "__ifloordiv__"), rdunders=("__rfloordiv__",),
                         category="arithmetic", allowed=not_implemented_for("div_floor_cpu", "bool"),
                         differentiable=False)
REMAINDER = binary_op("remainder(Tensor input, Tensor other) -> Tensor", dunders=("__mod__", "__imod__"),
                      rdunders=("__rmod__",), category="arithmetic",
                      allowed=not_implemented_for("remainder_cpu", "bool"))
FMOD = binary_op("fmod(Tensor input, Tensor other) -> Tensor", category="arithmetic",
                 allowed=not_implemented_for("fmod_cpu", "bool"))
floor_divide, remainder, fmod = FLOOR_DIVIDE.fn, REMAINDER.fn, FMOD.fn
_true_div, _true_div_ = DIV.fn, DIV.inplace_fn


def _rounded_div(input, other, rounding_mode):
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        if dt.result_type(input, other).is_floating_point:
            return trunc(_true_div(input, other))
        # Exact for integers: input - fmod(input, other) is a multiple of other.
        r = fmod(input, other)
        return floor_divide(add(input, neg(r)) if isinstance(input, Tensor) else input - r, other)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                       f"'{rounding_mode}'")


@DIV.front
def div(input, other, *, rounding_mode=None) -> Tensor:
    """``input / other`` elementwise, with broadcasting and type promotion.

    ``rounding_mode=None`` is true division (integer inputs give the default float dtype);
    ``'trunc'`` rounds towards zero and ``'floor'`` towards minus infinity, keeping integer dtypes
    (integer division by zero raises ``RuntimeError: ZeroDivisionError``).
    """
    if rounding_mode is None:
        return _true_div(input, other)
    return _rounded_div(input, other, rounding_mode)


@DIV.inplace
def div_(self, other, *, rounding_mode=None) -> Tensor:
    """In-place version of :func:`flambeau.div`; returns ``self``."""
    if rounding_mode is None:
        return _true_div_(self, other)
    result = _rounded_div(self, other, rounding_mode)
    check_inplace_cast(result.dtype, self.dtype)
    return self.copy_(result)


def _pow_check(input, other):
    # bool ** bool is only defined for a tensor base and a Python bool exponent, as in torch
    if (getattr(input, "dtype", None) is _bool or isinstance(input, (bool, np.bool_))) and (
            getattr(other, "dtype", None) is _bool or (isinstance(other, (bool, np.bool_))
                                                        and not isinstance(input, Tensor))):
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    # an integer tensor to a negative Python integer: refused before any kernel runs, on every device, as torch
    if (isinstance(input, Tensor) and input.dtype._category < 2 and input.dtype is not _bool
            and isinstance(other, (int, np.integer)) and not isinstance(other, (bool, np.bool_)) and other < 0):
        raise RuntimeError("Integers to negative integer powers are not allowed.")


POW = binary_op("pow(Tensor input, Tensor exponent) -> Tensor", dunders=("__pow__", "__ipow__"),
                rdunders=("__rpow__",), category="arithmetic", check_operands=_pow_check, complex_ok=True)
FLOAT_POWER = binary_op("float_power(Tensor input, Tensor exponent) -> Tensor", rule="double",
                        category="arithmetic")
pow = POW.fn  # noqa: A001 - torch's name
float_power = FLOAT_POWER.fn
_float_power_ = FLOAT_POWER.inplace_fn


@FLOAT_POWER.inplace
def float_power_(self, exponent) -> Tensor:
    """In-place version of :func:`flambeau.float_power`; ``self`` must be float64."""
    if isinstance(self, Tensor) and self.dtype is not dt.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {type_name(self.dtype)} but the "
                           "operation's result requires dtype Double")
    return _float_power_(self, exponent)


# --- unary arithmetic ----------------------------------------------------------------------------
def _no_bool_neg(d):
    if d is _bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _sign_check(d):
    if d._category == 3:
        raise NotImplementedError("Unlike NumPy, flambeau.sign is not intended to support complex numbers. "
                                  "Please use flambeau.sgn instead.")


NEG = unary_op("neg(Tensor input) -> Tensor", dunders=("__neg__",), allowed=_no_bool_neg,
               category="arithmetic", aliases=("negative",), complex_ok=True)
# abs of complex64/complex128 is float32/float64: the kernel returns the real array, _wrap takes its dtype
ABS = unary_op("abs(Tensor input) -> Tensor", dunders=("__abs__",), category="arithmetic",
               allowed=not_implemented_for("abs_cpu", "bool"), aliases=("absolute",), complex_ok=True)
RECIPROCAL = unary_op("reciprocal(Tensor input) -> Tensor", rule="float", category="arithmetic", complex_ok=True)
SIGN = unary_op("sign(Tensor input) -> Tensor", category="arithmetic", allowed=_sign_check)
# sgn(z) = z / |z| (0 at 0) for complex z, sign(x) for real x
SGN = unary_op("sgn(Tensor input) -> Tensor", category="arithmetic", differentiable=False, complex_ok=True)
neg, abs, reciprocal, sign, sgn = NEG.fn, ABS.fn, RECIPROCAL.fn, SIGN.fn, SGN.fn  # noqa: A001
_abs_ = ABS.inplace_fn


@ABS.inplace
def abs_(self) -> Tensor:
    """In-place version of :func:`flambeau.abs`; not for complex tensors (their abs is real), as in torch."""
    if isinstance(self, Tensor) and self.dtype.is_complex:
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    return _abs_(self)

SQUARE = declare("square(Tensor input) -> Tensor", composite=True, category="arithmetic")


@SQUARE.front
def square(input) -> Tensor:
    """``input ** 2`` elementwise (bool inputs give int64, as in torch); same shape as ``input``."""
    return pow(input, 2)


@SQUARE.inplace
def square_(self) -> Tensor:
    """In-place version of :func:`flambeau.square`; returns ``self``."""
    return self.pow_(2)


POSITIVE = declare("positive(Tensor input) -> Tensor", composite=True, category="arithmetic")


@POSITIVE.front
def positive(input) -> Tensor:
    """``input`` itself (``+input``); bool tensors are rejected as in torch."""
    if not isinstance(input, Tensor):
        raise TypeError(f"positive(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.dtype is _bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


POSITIVE.dunders["__pos__"] = positive


# --- unary math ----------------------------------------------------------------------------------
_FLOAT_MATH = ("exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "sin", "cos", "tan", "asin", "acos",
               "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "tanh", "deg2rad", "rad2deg")
_ALIASES = {"asin": ("arcsin",), "acos": ("arccos",), "atan": ("arctan",), "asinh": ("arcsinh",),
            "acosh": ("arccosh",), "atanh": ("arctanh",)}
_REAL_MATH = ("deg2rad", "rad2deg", "erf", "erfc", "erfinv")  # the others compute complex numbers too
for _name in _FLOAT_MATH:
    globals()[_name] = unary_op(f"{_name}(Tensor input) -> Tensor", rule="float", category="math",
                                aliases=_ALIASES.get(_name, ()), complex_ok=_name not in _REAL_MATH).fn
for _name in ("rsqrt", "sigmoid", "erf", "erfc", "erfinv"):
    globals()[_name] = unary_op(f"{_name}(Tensor input) -> Tensor", rule="float", category="math",
                                complex_ok=_name not in _REAL_MATH).fn
del _name


# --- rounding --------------------------------------------------------------------------------------
FLOOR = unary_op("floor(Tensor input) -> Tensor", category="rounding",
                 allowed=not_implemented_for("floor", "bool"))
CEIL = unary_op("ceil(Tensor input) -> Tensor", category="rounding",
                allowed=not_implemented_for("ceil", "bool"))
TRUNC = unary_op("trunc(Tensor input) -> Tensor", category="rounding",
                 allowed=not_implemented_for("trunc_vml_cpu", "bool"), aliases=("fix",))
FRAC = unary_op("frac(Tensor input) -> Tensor", category="rounding",
                allowed=not_implemented_for("frac_cpu", "integral"))
floor, ceil, trunc, frac = FLOOR.fn, CEIL.fn, TRUNC.fn, FRAC.fn

ROUND = declare("round(Tensor input, *, int decimals=0) -> Tensor", category="rounding")


def _check_tensor_arg(x, opname, argname="input", pos=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{opname}(): argument '{argname}' (position {pos}) must be Tensor, not {type(x).__name__}")


def _unary_with(op, input, d, params, attrs, inplace: bool):
    """Run a parametrised unary kernel out of place or into ``input`` and call the autograd seam."""
    dev = input._device
    k = op.kernel(dev.type)
    if inplace:
        check_inplace_cast(d, input.dtype)
        if inplace_needs_engine(input):
            return inplace_by_engine(op, (input,), {"inplace": True, **attrs})
        k(input._data, d, *params, out=input._data)
        input._storage._version += 1
        return input
    out = _wrap(k(input._data, d, *params), dev)
    if input._requires_grad and grad_state.enabled:
        record(op, (input,), attrs, out)
    return out


def _round_dtype(input, decimals):
    _check_tensor_arg(input, "round")
    d = input.dtype
    if d is _bool or (decimals != 0 and not d.is_floating_point):
        raise NotImplementedError(f"\"round{'_vml' if decimals == 0 else ''}_cpu\" not implemented for "
                                  f"'{type_name(d)}'")
    return d


@ROUND.front
def round(input, *, decimals: int = 0) -> Tensor:  # noqa: A001 - torch's name
    """Round half to even, to ``decimals`` decimal places; same shape and dtype as ``input``
    (integer tensors are returned unchanged as a copy)."""
    return _unary_with(ROUND, input, _round_dtype(input, decimals), (decimals,), {"decimals": decimals}, False)


@ROUND.inplace
def round_(self, *, decimals: int = 0) -> Tensor:
    """In-place version of :func:`flambeau.round`; returns ``self``."""
    return _unary_with(ROUND, self, _round_dtype(self, decimals), (decimals,), {"decimals": decimals}, True)


# --- activations -------------------------------------------------------------------------------------
def _relu_check(d):
    if d is _bool:
        raise RuntimeError("Boolean inputs not supported for relu")


RELU = unary_op("relu(Tensor input) -> Tensor", allowed=_relu_check, category="activation")
SILU = unary_op("silu(Tensor input) -> Tensor", category="activation",
                allowed=not_implemented_for("silu_cpu", "integral"), method=False, inplace=False)
relu, silu = RELU.fn, SILU.fn


def _float_only(opname, input, kname):
    _check_tensor_arg(input, opname)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{kname}" not implemented for \'{type_name(input.dtype)}\'')
    return input.dtype


# gelu's and silu's CPU kernels are fused in numba (Note [Fused activations] in _kernels/cpu/activation.py)
GELU = declare("gelu(Tensor input, *, str approximate='none') -> Tensor", method=False, category="activation")


@GELU.front
def gelu(input, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit ``x * Phi(x)`` (``approximate='tanh'``: the tanh approximation).

    ``input``: a floating-point tensor of any shape; the result has its shape and dtype.
    """
    d = _float_only("gelu", input, "GeluKernelImpl")
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return _unary_with(GELU, input, d, (approximate,), {"approximate": approximate}, False)


SOFTPLUS = declare("softplus(Tensor input, Scalar beta=1, Scalar threshold=20) -> Tensor", method=False,
                   category="activation")


@SOFTPLUS.front
def softplus(input, beta=1.0, threshold=20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``.

    ``input``: a floating-point tensor of any shape; the result has its shape and dtype.
    """
    d = _float_only("softplus", input, "softplus_cpu")
    return _unary_with(SOFTPLUS, input, d, (beta, threshold), {"beta": beta, "threshold": threshold}, False)


LOGIT = declare("logit(Tensor input, float? eps=None) -> Tensor", category="math")


@LOGIT.front
def logit(input, eps=None) -> Tensor:
    """``log(x / (1 - x))``, with ``x`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given.

    Integer and bool inputs give the default float dtype; same shape as ``input``.
    """
    _check_tensor_arg(input, "logit")
    d = input.dtype if input.dtype.is_floating_point else dt.get_default_dtype()
    return _unary_with(LOGIT, input, d, (eps,), {"eps": eps}, False)


@LOGIT.inplace
def logit_(self, eps=None) -> Tensor:
    """In-place version of :func:`flambeau.logit`; returns ``self``."""
    _check_tensor_arg(self, "logit_")
    d = self.dtype if self.dtype.is_floating_point else dt.get_default_dtype()
    return _unary_with(LOGIT, self, d, (eps,), {"eps": eps}, True)


# --- floating-point classification and cleanup ---------------------------------------------------------
for _name in ("isnan", "isinf", "isposinf", "isneginf", "isfinite"):
    globals()[_name] = unary_op(f"{_name}(Tensor input) -> Tensor", bool_out=True, inplace=False,
                                category="comparison", complex_ok=_name in ("isnan", "isinf", "isfinite")).fn
del _name
signbit = unary_op("signbit(Tensor input) -> Tensor", bool_out=True, inplace=False, category="comparison").fn

NAN_TO_NUM = declare("nan_to_num(Tensor input, float? nan=0.0, float? posinf=None, float? neginf=None) -> Tensor",
                     category="math")


def _nan_to_num(input, nan, posinf, neginf, inplace):
    _check_tensor_arg(input, "nan_to_num")
    attrs = {"nan": nan, "posinf": posinf, "neginf": neginf}
    if input.dtype.is_floating_point and (posinf is None or neginf is None):
        info = finfo(input.dtype)  # the defaults are the input dtype's, whatever a kernel computes in
        posinf = info.max if posinf is None else posinf
        neginf = info.min if neginf is None else neginf
    return _unary_with(NAN_TO_NUM, input, input.dtype, (0.0 if nan is None else nan, posinf, neginf), attrs,
                       inplace)


@NAN_TO_NUM.front
def nan_to_num(input, nan=0.0, posinf=None, neginf=None) -> Tensor:
    """Replace NaN by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (defaults: 0 and the largest
    and lowest finite values of the dtype); same shape and dtype as ``input``."""
    return _nan_to_num(input, nan, posinf, neginf, False)


@NAN_TO_NUM.inplace
def nan_to_num_(self, nan=0.0, posinf=None, neginf=None) -> Tensor:
    """In-place version of :func:`flambeau.nan_to_num`; returns ``self``."""
    return _nan_to_num(self, nan, posinf, neginf, True)


# --- binary math -------------------------------------------------------------------------------------
ATAN2 = binary_op("atan2(Tensor input, Tensor other) -> Tensor", rule="float",
                  category="math", aliases=("arctan2",))
HYPOT = binary_op("hypot(Tensor input, Tensor other) -> Tensor", category="math",
                  allowed=not_implemented_for("hypot_cpu", "integral"))
LOGADDEXP = binary_op("logaddexp(Tensor input, Tensor other) -> Tensor",
                      category="math", allowed=not_implemented_for("logaddexp_cpu", "integral"), inplace=False)
LOGADDEXP2 = binary_op("logaddexp2(Tensor input, Tensor other) -> Tensor",
                       category="math", allowed=not_implemented_for("logaddexp2_cpu", "integral"), inplace=False)
XLOGY = binary_op("xlogy(Tensor input, Tensor other) -> Tensor", rule="float", category="math")
COPYSIGN = binary_op("copysign(Tensor input, Tensor other) -> Tensor", rule="float",
                     category="math")
MAXIMUM = binary_op("maximum(Tensor input, Tensor other) -> Tensor", inplace=False,
                    category="math")
MINIMUM = binary_op("minimum(Tensor input, Tensor other) -> Tensor", inplace=False,
                    category="math")
FMAX = binary_op("fmax(Tensor input, Tensor other) -> Tensor", inplace=False, category="math")
FMIN = binary_op("fmin(Tensor input, Tensor other) -> Tensor", inplace=False, category="math")
atan2, hypot, xlogy, copysign = ATAN2.fn, HYPOT.fn, XLOGY.fn, COPYSIGN.fn
logaddexp, logaddexp2 = LOGADDEXP.fn, LOGADDEXP2.fn
maximum, minimum, fmax, fmin = MAXIMUM.fn, MINIMUM.fn, FMAX.fn, FMIN.fn


# --- clamp -------------------------------------------------------------------------------------------
CLAMP = declare("clamp(Tensor input, Scalar? min=None, Scalar? max=None) -> Tensor", category="math",
                aliases=("clip",))


def _clamp(opname, input, min, max, inplace):
    _check_tensor_arg(input, opname)
    if min is None and max is None:
        raise RuntimeError(f"{opname}: At least one of 'min' or 'max' must not be None")
    bounds = [x for x in (min, max) if x is not None]
    try:
        d = dt.result_type(input, *bounds)
    except TypeError:
        bad = next(x for x in bounds if not isinstance(x, Tensor))
        raise TypeError(f"{opname}(): 'min' and 'max' must be numbers or Tensors, not {type(bad).__name__}") from None
    if d.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    if d is _bool and (len(bounds) == 2 or not isinstance(bounds[0], Tensor)):
        kname = "clamp" if len(bounds) == 2 else "clamp_min" if max is None else "clamp_max"
        kind = "" if all(isinstance(x, Tensor) for x in bounds) else "_scalar"
        raise NotImplementedError(f"\"{kname}{kind}_cpu\" not implemented for 'Bool'")
    dev = common_device(input, *bounds)
    k = CLAMP.kernel(dev.type)
    shape = input._data.shape
    if any(isinstance(x, Tensor) for x in bounds):
        shape = broadcast_shapes(shape, *(x._data.shape for x in bounds if isinstance(x, Tensor)))
    if inplace:
        check_inplace_cast(d, input.dtype)
        if shape != input._data.shape:
            raise RuntimeError(f"output with shape {list(input._data.shape)} doesn't match the broadcast "
                               f"shape {list(shape)}")
        if inplace_needs_engine(input, min, max):
            return inplace_by_engine(CLAMP, (input, min, max), {"inplace": True})
        k(input._data, _arr(min), _arr(max), d, out=input._data)
        input._storage._version += 1
        return input
    out = _wrap(k(input._data, _arr(min), _arr(max), d), dev)
    record_if_needed(CLAMP, (input, min, max), {}, out)
    return out


@CLAMP.front
def clamp(input, min=None, max=None) -> Tensor:  # noqa: A002 - torch's names
    """Clamp every element into ``[min, max]``; ``min``/``max`` are numbers, broadcastable tensors or None
    (not both). The result has the broadcast shape and the promoted dtype of all operands."""
    return _clamp("clamp", input, min, max, False)


@CLAMP.inplace
def clamp_(self, min=None, max=None) -> Tensor:  # noqa: A002
    """In-place version of :func:`flambeau.clamp`; returns ``self``."""
    return _clamp("clamp", self, min, max, True)


CLAMP_MIN = declare("clamp_min(Tensor input, Scalar min) -> Tensor", category="math", composite=True)
CLAMP_MAX = declare("clamp_max(Tensor input, Scalar max) -> Tensor", category="math", composite=True)


@CLAMP_MIN.front
def clamp_min(input, min) -> Tensor:  # noqa: A002
    """``clamp(input, min=min)``."""
    return _clamp("clamp_min", input, min, None, False)


@CLAMP_MIN.inplace
def clamp_min_(self, min) -> Tensor:  # noqa: A002
    """In-place version of :func:`flambeau.clamp_min`; returns ``self``."""
    return _clamp("clamp_min", self, min, None, True)


@CLAMP_MAX.front
def clamp_max(input, max) -> Tensor:  # noqa: A002
    """``clamp(input, max=max)``."""
    return _clamp("clamp_max", input, None, max, False)


@CLAMP_MAX.inplace
def clamp_max_(self, max) -> Tensor:  # noqa: A002
    """In-place version of :func:`flambeau.clamp_max`; returns ``self``."""
    return _clamp("clamp_max", self, None, max, True)


# --- where, lerp, addcmul, addcdiv ------------------------------------------------------------------------
WHERE = declare("where(Tensor condition, Tensor input, Tensor other) -> Tensor", category="indexing",
                method=False)


@WHERE.front
def where(condition, input=None, other=None) -> Tensor:
    """Elements of ``input`` where ``condition`` is True, else of ``other``.

    ``condition`` is a bool tensor; ``input``/``other`` are tensors or numbers; all three broadcast.
    The result has the broadcast shape and the promoted dtype of ``input`` and ``other``.
    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.
    """
    if input is None and other is None:
        if "nonzero" not in OPS:
            raise NotImplementedError("where(condition) needs the nonzero operator, which is not available")
        return OPS["nonzero"].fn(condition, as_tuple=True)
    _check_tensor_arg(condition, "where", "condition")
    if condition.dtype is not _bool:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{type_name(condition.dtype)}")
    try:
        d = dt.result_type(input, other)
    except TypeError:
        bad, arg = (other, "other") if isinstance(input, Tensor) or input is not None else (input, "input")
        raise TypeError(f"where(): argument '{arg}' must be Tensor or a number, not {type(bad).__name__}") from None
    shapes = [x._data.shape for x in (condition, input, other) if isinstance(x, Tensor)]
    broadcast_shapes(*shapes)  # torch's error for incompatible shapes
    dev = common_device(condition, input, other)
    out = _wrap(WHERE.kernel(dev.type)(condition._data, _arr(input), _arr(other), d), dev)
    record_if_needed(WHERE, (condition, input, other), {}, out)
    return out


def _tensor_where(self, condition, other) -> Tensor:
    """``Tensor.where(condition, other)``: ``flambeau.where(condition, self, other)``."""
    return where(condition, self, other)


WHERE.dunders["where"] = _tensor_where


LERP = declare("lerp(Tensor input, Tensor end, Tensor weight) -> Tensor", category="math")


def _lerp(input, end, weight, inplace):
    _check_tensor_arg(input, "lerp")
    _check_tensor_arg(end, "lerp", "end", 2)
    d = input.dtype
    kname = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
    if not d.is_floating_point:
        raise NotImplementedError(f'"{kname}" not implemented for \'{type_name(d)}\'')
    for arg, x in (("end", end), ("weight", weight)):
        if isinstance(x, Tensor) and x.dtype is not d:
            raise RuntimeError(f"expected dtype {d.name.replace('float32', 'float').replace('float64', 'double')} "
                               f"for `{arg}` but got dtype "
                               f"{x.dtype.name.replace('float32', 'float').replace('float64', 'double')}")
    if not isinstance(weight, Tensor) and not isinstance(weight, (int, float, np.number)):
        raise TypeError(f"lerp(): argument 'weight' must be Tensor or a number, not {type(weight).__name__}")
    shape = broadcast_shapes(*(x._data.shape for x in (input, end, weight) if isinstance(x, Tensor)))
    dev = common_device(input, end, weight)
    k = LERP.kernel(dev.type)
    if inplace:
        if shape != input._data.shape:
            raise RuntimeError(f"output with shape {list(input._data.shape)} doesn't match the broadcast "
                               f"shape {list(shape)}")
        if inplace_needs_engine(input, end, weight):
            return inplace_by_engine(LERP, (input, end, weight), {"inplace": True})
        k(input._data, end._data, _arr(weight), d, out=input._data)
        input._storage._version += 1
        return input
    out = _wrap(k(input._data, end._data, _arr(weight), d), dev)
    record_if_needed(LERP, (input, end, weight), {}, out)
    return out


@LERP.front
def lerp(input, end, weight) -> Tensor:
    """``input + weight * (end - input)``; ``input`` and ``end`` are floating tensors of one dtype,
    ``weight`` a number or a tensor of that dtype; all broadcast. Returns the broadcast shape."""
    return _lerp(input, end, weight, False)


@LERP.inplace
def lerp_(self, end, weight) -> Tensor:
    """In-place version of :func:`flambeau.lerp`; returns ``self``."""
    return _lerp(self, end, weight, True)


ADDCMUL = declare("addcmul(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
                  category="math")
ADDCDIV = declare("addcdiv(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
                  category="math")


def _addc(op, input, tensor1, tensor2, value, inplace):
    name = op.name
    for pos, (arg, x) in enumerate((("input", input), ("tensor1", tensor1), ("tensor2", tensor2)), 1):
        _check_tensor_arg(x, name, arg, pos)
    d = dt.result_type(input, tensor1, tensor2)
    exact = d.is_floating_point or d.is_complex
    if op is ADDCDIV and not exact:
        raise RuntimeError(
            "Integer division with addcdiv is not supported: addcdiv performs a true division of tensor1 "
            "and tensor2. The historic addcdiv behavior can be implemented "
            "as (input + value * flambeau.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs.")
    if d is _bool:
        raise NotImplementedError(f"\"{name}_cpu_out\" not implemented for 'Bool'")
    if not exact:
        value = int(value)  # torch truncates the value for integer results (not for complex ones)
    shape = broadcast_shapes(input._data.shape, tensor1._data.shape, tensor2._data.shape)
    dev = common_device(input, tensor1, tensor2)
    k = op.kernel(dev.type)
    attrs = {"value": value}
    if inplace:
        check_inplace_cast(d, input.dtype)
        if shape != input._data.shape:
            raise RuntimeError(f"output with shape {list(input._data.shape)} doesn't match the broadcast "
                               f"shape {list(shape)}")
        if inplace_needs_engine(input, tensor1, tensor2):
            return inplace_by_engine(op, (input, tensor1, tensor2), {"inplace": True, **attrs})
        k(input._data, tensor1._data, tensor2._data, value, d, out=input._data)
        input._storage._version += 1
        return input
    out = _wrap(k(input._data, tensor1._data, tensor2._data, value, d), dev)
    record_if_needed(op, (input, tensor1, tensor2), attrs, out)
    return out


@ADDCMUL.front
def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 * tensor2`` with broadcasting and type promotion of the three tensors."""
    return _addc(ADDCMUL, input, tensor1, tensor2, value, False)


@ADDCMUL.inplace
def addcmul_(self, tensor1, tensor2, *, value=1) -> Tensor:
    """In-place version of :func:`flambeau.addcmul`; returns ``self``."""
    return _addc(ADDCMUL, self, tensor1, tensor2, value, True)


@ADDCDIV.front
def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:
    """``input + value * tensor1 / tensor2`` with broadcasting; floating-point results only."""
    return _addc(ADDCDIV, input, tensor1, tensor2, value, False)


@ADDCDIV.inplace
def addcdiv_(self, tensor1, tensor2, *, value=1) -> Tensor:
    """In-place version of :func:`flambeau.addcdiv`; returns ``self``."""
    return _addc(ADDCDIV, self, tensor1, tensor2, value, True)


# --- comparisons -----------------------------------------------------------------------------------------
def _cmp(signature, dunder, aliases=()):
    # complex numbers are not ordered: only eq and ne take them (as torch)
    return binary_op(signature, bool_out=True, dunders=(dunder,), category="comparison", aliases=aliases,
                     complex_ok=signature[:2] in ("eq", "ne")).fn


eq = _cmp("eq(Tensor input, Tensor other) -> Tensor", "__eq__")
ne = _cmp("ne(Tensor input, Tensor other) -> Tensor", "__ne__", ("not_equal",))
lt = _cmp("lt(Tensor input, Tensor other) -> Tensor", "__lt__", ("less",))
le = _cmp("le(Tensor input, Tensor other) -> Tensor", "__le__", ("less_equal",))
gt = _cmp("gt(Tensor input, Tensor other) -> Tensor", "__gt__", ("greater",))
ge = _cmp("ge(Tensor input, Tensor other) -> Tensor", "__ge__", ("greater_equal",))


ISCLOSE = declare("isclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) "
                  "-> Tensor", differentiable=False, category="comparison")


@ISCLOSE.front
def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise (or equal); tensors of one dtype that
    broadcast. Returns a bool tensor of the broadcast shape."""
    _check_tensor_arg(input, "isclose")
    _check_tensor_arg(other, "isclose", "other", 2)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{type_name(input.dtype)} did not match {type_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    broadcast_shapes(input._data.shape, other._data.shape)
    dev = common_device(input, other)
    r = ISCLOSE.kernel(dev.type)(input._data, other._data, rtol, atol, equal_nan)
    return _wrap(np.asarray(r) if isinstance(r, np.generic) else r, dev)  # numpy gives 0-dim results as scalars


ALLCLOSE = declare("allclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) "
                   "-> bool", differentiable=False, category="comparison")


@ALLCLOSE.front
def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Python bool: whether :func:`isclose` holds for every element."""
    return bool(isclose(input, other, rtol, atol, equal_nan).numpy(force=True).all())


EQUAL = declare("equal(Tensor input, Tensor other) -> bool", differentiable=False, category="comparison")


@EQUAL.front
def equal(input, other) -> bool:
    """Python bool: True if both tensors have the same shape and the same values (NaN never equal)."""
    _check_tensor_arg(input, "equal")
    _check_tensor_arg(other, "equal", "other", 2)
    if input._data.shape != other._data.shape:
        return False
    return bool(np.array_equal(input.numpy(force=True), other.numpy(force=True)))


# --- logical and bitwise -----------------------------------------------------------------------------------
def _logical(signature):
    return binary_op(signature, bool_out=True, category="logical", complex_ok=True).fn


logical_and = _logical("logical_and(Tensor input, Tensor other) -> Tensor")
logical_or = _logical("logical_or(Tensor input, Tensor other) -> Tensor")
logical_xor = _logical("logical_xor(Tensor input, Tensor other) -> Tensor")
logical_not = unary_op("logical_not(Tensor input) -> Tensor", bool_out=True, category="logical", complex_ok=True).fn


def _bitwise(name, sym, kname=None, no_bool=False):
    kname = kname or f"{name}_cpu"
    reject = (lambda d: d.is_floating_point or d is _bool) if no_bool else "float"
    return binary_op(f"{name}(Tensor input, Tensor other) -> Tensor", category="logical",
                     differentiable=False, allowed=not_implemented_for(kname, reject),
                     dunders=(f"__{sym}__", f"__i{sym}__"), rdunders=(f"__r{sym}__",)).fn


bitwise_and = _bitwise("bitwise_and", "and")
bitwise_or = _bitwise("bitwise_or", "or")
bitwise_xor = _bitwise("bitwise_xor", "xor")
bitwise_left_shift = _bitwise("bitwise_left_shift", "lshift", "lshift_cpu", no_bool=True)
bitwise_right_shift = _bitwise("bitwise_right_shift", "rshift", "rshift_cpu", no_bool=True)

BITWISE_NOT = unary_op("bitwise_not(Tensor input) -> Tensor", category="logical",
                       differentiable=False, allowed=not_implemented_for("bitwise_not_cpu", "float"))
bitwise_not = BITWISE_NOT.fn


def _invert(self) -> Tensor:
    """``~self``: bitwise not of an integer or bool tensor."""
    if self.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return bitwise_not(self)


BITWISE_NOT.dunders["__invert__"] = _invert


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
# The factories gave every unary and binary operator default samples; here: domains, and the
# operators declared without a factory.
for _name, _lo, _hi in (("log", 0.1, 5), ("log2", 0.1, 5), ("log10", 0.1, 5), ("sqrt", 0.1, 5), ("rsqrt", 0.1, 5),
                        ("log1p", -0.9, 5), ("asin", -0.9, 0.9), ("acos", -0.9, 0.9), ("atanh", -0.9, 0.9),
                        ("erfinv", -0.9, 0.9), ("acosh", 1.1, 5)):
    OPS[_name].samples(unary_samples(_lo, _hi))
# torch takes no Python number as ``other`` for these
for _name in ("atan2", "hypot", "logaddexp", "logaddexp2", "maximum", "minimum", "fmax", "fmin",
              "logical_and", "logical_or", "logical_xor"):
    OPS[_name].samples(binary_samples(scalar=False))
POW.samples(binary_samples(0.5, 3, 0, 3))
FLOAT_POWER.samples(binary_samples(0.5, 3, 0, 3))
XLOGY.samples(binary_samples(other_low=0.1, other_high=5))
for _name in ("bitwise_left_shift", "bitwise_right_shift"):
    OPS[_name].samples(binary_samples(0, 100, 0, 5))
del _name, _lo, _hi


def _mk(device, dtype, requires_grad, **kw):
    return lambda shape, **more: make_tensor(shape, device=device, dtype=dtype, requires_grad=requires_grad,
                                             **kw, **more)


@ADD.samples(dtypes=FLOAT_INT)
def _add_samples(device, dtype, requires_grad):
    yield from binary_samples()(device, dtype, requires_grad)
    mk = _mk(device, dtype, requires_grad)
    yield SampleInput(mk((3, 4)), mk((4,)), alpha=2).named("alpha")


SUB.samples(_add_samples, dtypes=FLOAT_INT)
RSUB.samples(_add_samples, dtypes=FLOAT_INT)


@DIV.samples(dtypes=FLOAT_INT, xfail={
    "grad:floor": "div(rounding_mode='floor') of a tensor requiring grad does not require grad (torch: zero gradient)"})
def _div_samples(device, dtype, requires_grad):
    yield from binary_samples()(device, dtype, requires_grad)
    mk = _mk(device, dtype, requires_grad)
    for mode in ("trunc", "floor"):
        yield SampleInput(mk((3, 4)), mk((3, 4), exclude_zero=True), rounding_mode=mode).named(mode)


SQUARE.samples(unary_samples(), dtypes=FLOAT_INT)
POSITIVE.samples(unary_samples(), dtypes=FLOAT_INT)


@ROUND.samples(dtypes=FLOAT)
def _round_samples(device, dtype, requires_grad):
    yield from unary_samples()(device, dtype, requires_grad)
    yield SampleInput(_mk(device, dtype, requires_grad)((3, 4)), decimals=2).named("decimals")


@GELU.samples(dtypes=FLOAT, ref="nn.functional.gelu")
def _gelu_samples(device, dtype, requires_grad):
    yield from unary_samples()(device, dtype, requires_grad)
    yield SampleInput(_mk(device, dtype, requires_grad)((3, 4)), approximate="tanh").named("tanh")


@SOFTPLUS.samples(dtypes=FLOAT, ref="nn.functional.softplus")
def _softplus_samples(device, dtype, requires_grad):
    yield from unary_samples()(device, dtype, requires_grad)
    yield SampleInput(_mk(device, dtype, requires_grad)((3, 4)), 2.0, 3.0).named("beta threshold")


@LOGIT.samples(dtypes=FLOAT)
def _logit_samples(device, dtype, requires_grad):
    yield from unary_samples(0.05, 0.95)(device, dtype, requires_grad)
    x = _mk(device, dtype, False, low=0.2, high=0.8)((3, 4))
    x[0, 0], x[1, 1] = 0.03, 0.96  # clamped by eps
    yield SampleInput(x.requires_grad_(requires_grad), 0.1).named("eps")


@NAN_TO_NUM.samples(dtypes=FLOAT)
def _nan_to_num_samples(device, dtype, requires_grad):
    import flambeau as fl

    x = fl.tensor([[float("nan"), float("inf"), -float("inf"), 1.5]], dtype=dtype, device=device)
    yield SampleInput(x)
    yield SampleInput(x, 2.0, 100.0, -100.0).named("values")


@CLAMP.samples(dtypes=FLOAT_INT)
def _clamp_samples(device, dtype, requires_grad):
    mk = _mk(device, dtype, requires_grad)
    yield SampleInput(mk((3, 4)), -1, 2).named("both")
    yield SampleInput(mk((3, 4)), min=-1).named("min")
    yield SampleInput(mk((3, 4)), max=2).named("max")
    yield SampleInput(mk((3, 4)), mk((3, 4)), mk((4,), low=6, high=8)).named("tensor bounds")


@CLAMP_MIN.samples(dtypes=FLOAT_INT)
def _clamp_min_samples(device, dtype, requires_grad):
    yield SampleInput(_mk(device, dtype, requires_grad)((3, 4)), 1)


CLAMP_MAX.samples(_clamp_min_samples, dtypes=FLOAT_INT)


@WHERE.samples(dtypes=ALL)
def _where_samples(device, dtype, requires_grad):
    import flambeau as fl

    mk = _mk(device, dtype, requires_grad)
    cond = make_tensor((3, 4), device=device, dtype=fl.bool)
    yield SampleInput(cond, mk((3, 4)), mk((3, 4)))
    yield SampleInput(cond, mk((4,)), mk((3, 1))).named("broadcast")


@LERP.samples(dtypes=FLOAT)
def _lerp_samples(device, dtype, requires_grad):
    mk = _mk(device, dtype, requires_grad)
    yield SampleInput(mk((3, 4)), mk((3, 4)), 0.3).named("scalar weight")
    yield SampleInput(mk((3, 4)), mk((4,)), mk((3, 4), low=0, high=1)).named("tensor weight")


@ADDCMUL.samples(dtypes=FLOAT)
def _addcmul_samples(device, dtype, requires_grad):
    mk = _mk(device, dtype, requires_grad)
    yield SampleInput(mk((3, 4)), mk((3, 4)), mk((4,)))
    yield SampleInput(mk((3, 4)), mk((3, 1)), mk((4,), exclude_zero=True), value=0.5).named("value")


ADDCDIV.samples(_addcmul_samples, dtypes=FLOAT)


@ISCLOSE.samples(dtypes=FLOAT_INT)
def _isclose_samples(device, dtype, requires_grad):
    mk = _mk(device, dtype, False)
    a = mk((3, 4))
    yield SampleInput(a, a.clone())
    yield SampleInput(a, mk((3, 4))).named("different")
    if dtype.is_floating_point:
        yield SampleInput(a, a + 1e-3, rtol=0.0, atol=1e-2).named("tolerances")


ALLCLOSE.samples(_isclose_samples, dtypes=FLOAT_INT)


@EQUAL.samples(dtypes=ALL)
def _equal_samples(device, dtype, requires_grad):
    a = make_tensor((3, 4), device=device, dtype=dtype)
    yield SampleInput(a, a.clone()).named("equal")
    yield SampleInput(a, make_tensor((3, 4), device=device, dtype=dtype)).named("different")
    yield SampleInput(a, make_tensor((4,), device=device, dtype=dtype)).named("shapes")
