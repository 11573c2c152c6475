"""CUDA kernels of the activation operators of ``flambeau._ops.activation``, whose docstring gives their
calling conventions.

Each operator is a scalar function of :data:`ACTIVATIONS` run by the ternary template of
``flambeau._kernels.cuda.elementwise`` (Note [Ternary template] there): one launch per call, forward
and backward alike (the ``*_backward`` kernels compute ``grad * f'(x)`` in the same pass that reads
``x``). Scalar arguments (slopes, bounds, thresholds) are the template's parameters ``p``, cast to
the compute dtype as the CPU kernels cast them to the input's. float16 computes in float32.
"""

from __future__ import annotations

import math

from flambeau._kernels.cpu.activation import SELU_ALPHA, SELU_SCALE
from flambeau._kernels.cuda.elementwise import compute_dtype, nary, nary_ptx_cases
from flambeau._ops._registry import kernel

__all__ = ["ACTIVATIONS", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)
_d_sigmoid = None  # a device helper once bound (Note [Device helpers] in elementwise)

_K = 0.7978845608028654  # sqrt(2 / pi): gelu's tanh form is 0.5 x (1 + tanh(_K (x + _C x^3)))
_C = 0.044715
_INV_SQRT_2PI = 0.3989422804014327


# --- forward: f(x, p) ------------------------------------------------------------------------------
def _leaky_relu(x, p):
    return x if x > 0 else x * p[0]


def _elu(x, p):
    # p = (alpha, scale, input_scale); NaN stays NaN
    return (x if x > 0 else p[0] * math.expm1(x * p[2])) * p[1]


def _hardtanh(x, p):
    if x < p[0]:
        return p[0]
    if x > p[1]:
        return p[1]
    return x


def _mish(x, p):
    # tanh(softplus x) = n / (n + 2) with n = e^x (e^x + 2); e^x clamped where t is 1 anyway
    c = type(x)
    e = math.exp(min(x, c(20)))
    n = e * (e + c(2))
    return x * (n / (n + c(2)))


def _hardswish(x, p):
    c = type(x)
    y = x + c(3)  # relu6(x + 3), NaN kept
    if y < 0:
        y = c(0)
    elif y > 6:
        y = c(6)
    return x * y / c(6)


def _hardsigmoid(x, p):
    c = type(x)
    y = x + c(3)
    if y < 0:
        return c(0)
    if y > 6:
        return c(1)
    return y / c(6)


def _log_sigmoid(x, p):
    return min(x, type(x)(0)) - math.log1p(math.exp(-abs(x)))


def _threshold(x, p):  # (NaN is kept, as torch: it is not <= the threshold)
    return p[1] if x <= p[0] else x


def _hardshrink(x, p):
    return type(x)(0) if -p[0] <= x <= p[0] else x


def _softshrink(x, p):
    if x > p[0]:
        return x - p[0]
    if x < -p[0]:
        return x + p[0]
    return x * type(x)(0)  # NaN stays NaN


def _prelu(x, w, p):
    return x if x > 0 else w * x


# --- backward: f(g, x, p) = g * f'(x); constants of x's type, as in elementwise -----------------------
def _hardtanh_backward(g, x, p):
    return g if p[0] < x < p[1] else type(g)(0)


def _gelu_backward(g, x, p):
    c = type(x)
    cdf = c(0.5) + c(0.5) * math.erf(x * c(0.7071067811865476))
    return g * (cdf + x * c(_INV_SQRT_2PI) * math.exp(c(-0.5) * x * x))


def _gelu_tanh_backward(g, x, p):
    c = type(x)
    t = math.tanh(c(_K) * (x + c(_C) * x * x * x))
    return g * (c(0.5) * (c(1) + t) + c(0.5) * x * (c(1) - t * t) * c(_K) * (c(1) + c(3 * _C) * x * x))


def _silu_backward(g, x, p):
    one = type(x)(1)
    s = _d_sigmoid(x)
    return g * (s * (one + x * (one - s)))


def _mish_backward(g, x, p):
    # t + x sigmoid(x) (1 - t^2), 1 - t^2 = 4 (n + 1) / (n + 2)^2; the second term vanishes above 20
    c = type(x)
    e = math.exp(min(x, c(20)))
    n = e * (e + c(2))
    d = c(1) / (n + c(2))
    dt = c(4) * (n + c(1)) * d * d if x <= 20 else c(0)
    return g * (n * d + x * (e / (c(1) + e)) * dt)


def _hardswish_backward(g, x, p):
    # torch's subgradients: 0 up to -3, (2x + 3) / 6 inside, 1 from 3; NaN stays
    c = type(x)
    if x <= -3:
        return g * c(0)
    if x >= 3:
        return g
    return g * (x / c(3) + c(0.5))


def _hardsigmoid_backward(g, x, p):
    return g / type(g)(6) if -3 < x < 3 else type(g)(0)


def _leaky_relu_backward(g, x, p):
    return g if x > 0 else g * p[0]


def _elu_backward(g, x, p):
    # p = (alpha, scale, input_scale); NaN takes the positive branch, as torch
    if x <= 0:
        return g * p[2] * p[0] * p[1] * math.exp(x * p[2])
    return g * p[1]


def _elu_result_backward(g, y, p):
    # from elu's result y: y + alpha scale = alpha scale exp(input_scale x) where y <= 0
    if y <= 0:
        return g * p[2] * (y + p[0] * p[1])
    return g * p[1]


# label -> (scalar function, arity, dtype kinds, float16 computes in float32): the format of
# elementwise.NARY (where gelu's forward forms are: gelu is an elementwise operator).
ACTIVATIONS = {name: (fn, arity, "f", True) for name, fn, arity in (
    ("leaky_relu", _leaky_relu, 1), ("elu", _elu, 1), ("hardtanh", _hardtanh, 1), ("mish", _mish, 1),
    ("hardswish", _hardswish, 1), ("hardsigmoid", _hardsigmoid, 1), ("log_sigmoid", _log_sigmoid, 1),
    ("threshold", _threshold, 1), ("hardshrink", _hardshrink, 1), ("softshrink", _softshrink, 1),
    ("prelu", _prelu, 2), ("hardtanh_backward", _hardtanh_backward, 2), ("gelu_backward", _gelu_backward, 2),
    ("gelu_tanh_backward", _gelu_tanh_backward, 2), ("silu_backward", _silu_backward, 2),
    ("mish_backward", _mish_backward, 2), ("hardswish_backward", _hardswish_backward, 2),
    ("hardsigmoid_backward", _hardsigmoid_backward, 2), ("leaky_relu_backward", _leaky_relu_backward, 2),
    ("elu_backward", _elu_backward, 2), ("elu_result_backward", _elu_result_backward, 2))}


def _act(label: str, operands: tuple, params: tuple = (), out=None, name: str | None = None):
    """Activation ``label`` of :data:`ACTIVATIONS` over device arrays ``operands`` in one launch; the
    result has the dtype of the first (the input, or the gradient of the ``*_backward`` kernels)."""
    fn, arity, _, _ = ACTIVATIONS[label]
    dtype = operands[0].dtype
    return nary(fn, arity, compute_dtype(label, dtype, name, ACTIVATIONS), operands, params, dtype, out)


# --- kernels (conventions of flambeau._ops.activation) ---------------------------------------------------
@kernel("leaky_relu", "cuda")
def _k_leaky_relu(a, negative_slope, out=None):
    return _act("leaky_relu", (a,), (negative_slope,), out)


@kernel("elu", "cuda")
def _k_elu(a, alpha, scale, input_scale, out=None):
    return _act("elu", (a,), (alpha, scale, input_scale), out)


@kernel("selu", "cuda")
def _k_selu(a, out=None):
    return _act("elu", (a,), (SELU_ALPHA, SELU_SCALE, 1.0), out, "selu")


@kernel("celu", "cuda")
def _k_celu(a, alpha, out=None):
    return _act("elu", (a,), (alpha, 1.0, 1.0 / alpha), out, "celu")


@kernel("hardtanh", "cuda")
def _k_hardtanh(a, min_val, max_val, out=None):
    return _act("hardtanh", (a,), (min_val, max_val), out)


@kernel("threshold", "cuda")
def _k_threshold(a, threshold, value, out=None):
    return _act("threshold", (a,), (threshold, value), out)


@kernel("hardshrink", "cuda")
def _k_hardshrink(a, lambd, out=None):
    return _act("hardshrink", (a,), (lambd,), out)


@kernel("softshrink", "cuda")
def _k_softshrink(a, lambd, out=None):
    return _act("softshrink", (a,), (lambd,), out)


def _plain(label: str):
    """The kernel ``kernel(a, out=None)`` of parameterless activation ``label``."""

    def plain(a, out=None):
        return _act(label, (a,), (), out)

    return plain


for _name in ("mish", "hardswish", "hardsigmoid", "log_sigmoid"):
    kernel(_name, "cuda")(_plain(_name))


@kernel("prelu", "cuda")
def _k_prelu(a, w):
    return _act("prelu", (a, w))  # w already broadcasts against a (the front reshapes it)


@kernel("hardtanh_backward", "cuda")
def _k_hardtanh_backward(g, a, min_val, max_val):
    return _act("hardtanh_backward", (g, a), (min_val, max_val))


@kernel("gelu_backward", "cuda")
def _k_gelu_backward(g, a, approximate):
    return _act("gelu_tanh_backward" if approximate == "tanh" else "gelu_backward", (g, a), name="gelu_backward")


def _backward(label: str):
    """The kernel ``kernel(g, a)`` of ``label``: ``g * f'(a)``."""

    def backward(g, a):
        return _act(label, (g, a))

    return backward


for _name in ("silu_backward", "mish_backward", "hardswish_backward", "hardsigmoid_backward"):
    kernel(_name, "cuda")(_backward(_name))
del _name


@kernel("leaky_relu_backward", "cuda")
def _k_leaky_relu_backward(g, a, negative_slope, self_is_result):
    return _act("leaky_relu_backward", (g, a), (negative_slope,))


@kernel("elu_backward", "cuda")
def _k_elu_backward(g, alpha, scale, input_scale, is_result, a):
    return _act("elu_result_backward" if is_result else "elu_backward", (g, a), (alpha, scale, input_scale),
                name="elu_backward")


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the ternary template over every activation, for every
    storage dtype it is launched with (PTX compilation test)."""
    return nary_ptx_cases(ACTIVATIONS, ndim)
