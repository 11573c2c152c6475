"""Activation operators beyond the elementwise table: leaky_relu, elu, selu, celu, hardtanh, mish,
hardswish, hardsigmoid, prelu, log_sigmoid, threshold, hardshrink, softshrink.

``flambeau.nn.functional`` and the activation modules build on these (relu, gelu, silu, softplus,
sigmoid and tanh live in ``elementwise.py``). Each takes a floating tensor and returns one of the
same shape and dtype; those that torch also has in place (``leaky_relu_``, ``elu_``, ``hardtanh_`` ...)
get a ``Tensor.<name>_`` variant.

Kernel convention (every device; arrays in, array out):
    ``kernel(a, *params, out=None) -> array``: ``params`` are the operator's scalar arguments in
    signature order; the result has ``a``'s dtype and is written into ``out`` when given (the
    in-place form passes ``out=a``).
    hardtanh_backward: ``kernel(grad, a, min_val, max_val) -> array``: ``grad`` where
    ``min_val < a < max_val``, else 0 (the derivative of hardtanh and relu6, fused).
    prelu: ``kernel(a, w) -> array`` where ``w`` is already reshaped to broadcast against ``a``
    (channels along dimension 1).

Autograd recording: ``inputs`` is ``(input,)`` (``(input, weight)`` for prelu) and ``attrs`` holds the
scalar arguments by their signature names.
"""

from __future__ import annotations

import numpy as np

from flambeau._ops._common import Tensor, _wrap, grad_state, inplace_by_engine, inplace_needs_engine, record
from flambeau._ops._registry import declare

__all__ = ["leaky_relu", "elu", "selu", "celu", "hardtanh", "hardtanh_backward", "mish", "hardswish", "hardsigmoid",
           "prelu", "log_sigmoid", "threshold", "hardshrink", "softshrink"]

_CATEGORY = "activation_ext"
_TYPE_NAME = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _store(r, out):
    """``r`` written into ``out`` (when given), else ``r`` as an ndarray."""
    if out is None:
        return r if isinstance(r, np.ndarray) else np.asarray(r)
    np.copyto(out, r, casting="unsafe")
    return out


def _sc(a, v):
    """The Python scalar ``v`` as a scalar of ``a``'s dtype (keeps float32 arithmetic in float32)."""
    return a.dtype.type(v)


# --- kernels ---------------------------------------------------------------------------------------
def _k_leaky_relu(a, negative_slope, out=None):
    # max(x, s x) for s <= 1 (min for s > 1): two fast passes where np.where takes ten times longer
    if a.ndim == 0:
        return _store(_k_leaky_relu(a.reshape(1), negative_slope).reshape(()), out)
    r = np.multiply(a, _sc(a, negative_slope))
    return (np.maximum if negative_slope <= 1 else np.minimum)(a, r, out=r if out is None else out)


def _expm1_neg(x):
    """``expm1`` of the non-positive array ``x`` (a fresh array), as ``2 t / (1 - t)`` with ``t = tanh(x / 2)``.

    numpy's ``expm1`` has no SIMD loop (8x slower than ``tanh`` on float32); this identity is
    exact in exact arithmetic and accurate to a few ulp (no cancellation near 0).
    """
    t = np.multiply(x, x.dtype.type(0.5))
    np.tanh(t, out=t)
    d = np.subtract(x.dtype.type(1), t)
    t *= x.dtype.type(2)
    t /= d
    return t


def _k_elu(a, alpha, scale, input_scale, out=None):
    if a.ndim == 0:  # numpy returns scalars, not arrays, from 0-d operations
        return _store(_k_elu(a.reshape(1), alpha, scale, input_scale).reshape(()), out)
    neg = np.minimum(a, _sc(a, 0))
    if input_scale != 1:
        neg *= _sc(a, input_scale)
    r = _expm1_neg(neg)
    r *= _sc(a, alpha)
    r += np.maximum(a, _sc(a, 0))  # x > 0: expm1(0) = 0, so r = x there
    if scale != 1:
        r *= _sc(a, scale)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        if nan.any():
            r[nan] = a[nan]
    return _store(r, out)


def _k_selu(a, out=None):
    return _k_elu(a, SELU_ALPHA, SELU_SCALE, 1.0, out)


def _k_celu(a, alpha, out=None):
    return _k_elu(a, alpha, 1.0, 1.0 / alpha, out)


def _k_hardtanh(a, min_val, max_val, out=None):
    return np.clip(a, _sc(a, min_val), _sc(a, max_val), out=out)


def _softplus_np(a):
    return np.maximum(a, _sc(a, 0)) + np.log1p(np.exp(-np.abs(a)))


def _k_mish(a, out=None):
    if a.ndim == 0:
        return _store(_k_mish(a.reshape(1)).reshape(()), out)
    # tanh(softplus(x)) = n / (n + 2) with n = e^x (e^x + 2): one exp, no log1p (numpy's has no SIMD loop).
    # Above x = 20 the ratio is 1 in float64 and float32; clamping keeps e^x finite.
    with np.errstate(all="ignore"):  # -inf * 0 is NaN, as in torch
        e = np.exp(np.minimum(a, _sc(a, 20)))
        n = e + _sc(a, 2)
        n *= e
        d = n + _sc(a, 2)
        n /= d
        n *= a
        return _store(n, out)


def _k_hardswish(a, out=None):
    with np.errstate(all="ignore"):  # -inf * 0 is NaN, as in torch
        return _store(a * np.clip(a + _sc(a, 3), _sc(a, 0), _sc(a, 6)) / _sc(a, 6), out)


def _k_hardsigmoid(a, out=None):
    return _store(np.clip(a + _sc(a, 3), _sc(a, 0), _sc(a, 6)) / _sc(a, 6), out)


def _log1p_small(u):
    """``log1p`` of the array ``u`` in ``[0, 1]`` with numpy's SIMD ``log``: ``log(w) + (u - (w - 1)) / w``,
    ``w = 1 + u`` (the rounding of ``w`` is corrected to first order; accurate to ~1 ulp)."""
    w = u + u.dtype.type(1)
    c = w - u.dtype.type(1)
    np.subtract(u, c, out=c)
    c /= w
    np.log(w, out=w)
    w += c
    return w


def _k_log_sigmoid(a, out=None):
    if a.ndim == 0:
        return _store(_k_log_sigmoid(a.reshape(1)).reshape(()), out)
    u = np.abs(a)
    np.negative(u, out=u)
    np.exp(u, out=u)
    r = _log1p_small(u)
    np.subtract(np.minimum(a, _sc(a, 0)), r, out=r)
    return _store(r, out)


def _k_threshold(a, threshold, value, out=None):
    return _store(np.where(a > _sc(a, threshold), a, _sc(a, value)), out)


def _k_hardshrink(a, lambd, out=None):
    return _store(np.where(np.abs(a) > _sc(a, lambd), a, _sc(a, 0)), out)


def _k_softshrink(a, lambd, out=None):
    lam = _sc(a, lambd)
    return _store(np.where(a > lam, a - lam, np.where(a < -lam, a + lam, _sc(a, 0))), out)


def _k_prelu(a, w):
    if a.ndim == 0:
        return _k_prelu(a.reshape(1), w).reshape(())
    with np.errstate(all="ignore"):  # max(x, 0) + min(x, 0) w: fast passes where np.where is slow
        r = np.minimum(a, a.dtype.type(0))
        r *= w
        r += np.maximum(a, a.dtype.type(0))
        return r


# --- fronts ---------------------------------------------------------------------------------------
def _check(input, name: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        tname = _TYPE_NAME.get(input.dtype.name, input.dtype)
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{tname}\'')


def _run(op, input, params: tuple, names: tuple, inplace: bool):
    """Run ``op``'s kernel out of place or into ``input``, and call the autograd seam."""
    _check(input, op.name)
    dev = input._device
    if inplace:
        if inplace_needs_engine(input):
            return inplace_by_engine(op, (input,), {"inplace": True, **dict(zip(names, params))})
        op.kernel(dev.type)(input._data, *params, out=input._data)
        input._storage._version += 1
        return input
    out = _wrap(op.kernel(dev.type)(input._data, *params), dev)
    if input._requires_grad and grad_state.enabled:
        record(op, (input,), dict(zip(names, params)), out)
    return out


def _declare(signature: str, kernel, method: bool = False):
    return declare(signature, category=_CATEGORY, method=method, kernels={"cpu": kernel})


LEAKY_RELU = _declare("leaky_relu(Tensor input, Scalar negative_slope=0.01) -> Tensor", _k_leaky_relu)


@LEAKY_RELU.front
def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``.

    Args:
        input: a floating tensor of any shape.
        negative_slope: the slope for negative inputs.

    Returns a tensor of ``input``'s shape and dtype.
    """
    return _run(LEAKY_RELU, input, (negative_slope,), ("negative_slope",), False)


@LEAKY_RELU.inplace
def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`; returns ``input``."""
    return _run(LEAKY_RELU, input, (negative_slope,), ("negative_slope",), True)


_ELU_NAMES = ("alpha", "scale", "input_scale")
ELU = _declare("elu(Tensor input, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor", _k_elu)


@ELU.front
def elu(input: Tensor, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Tensor:
    """Exponential linear unit: ``scale * x`` where ``x > 0``, else ``scale * alpha * (exp(input_scale * x) - 1)``.

    Args:
        input: a floating tensor of any shape.
        alpha: the saturation value for negative inputs.
        scale: the output scale (SELU's ``scale``).
        input_scale: the scale applied to negative inputs inside ``exp``.

    Returns a tensor of ``input``'s shape and dtype.
    """
    return _run(ELU, input, (alpha, scale, input_scale), _ELU_NAMES, False)


@ELU.inplace
def elu_(input: Tensor, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Tensor:
    """In-place :func:`elu`; returns ``input``."""
    return _run(ELU, input, (alpha, scale, input_scale), _ELU_NAMES, True)


SELU = _declare("selu(Tensor input) -> Tensor", _k_selu)


@SELU.front
def selu(input: Tensor) -> Tensor:
    """Scaled ELU: ``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))`` with alpha ~1.6733, scale ~1.0507.

    ``input``: a floating tensor of any shape; the result has its shape and dtype.
    """
    return _run(SELU, input, (), (), False)


@SELU.inplace
def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`; returns ``input``."""
    return _run(SELU, input, (), (), True)


CELU = _declare("celu(Tensor input, Scalar alpha=1.0) -> Tensor", _k_celu)


def _check_celu_alpha(alpha):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")


@CELU.front
def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Args:
        input: a floating tensor of any shape.
        alpha: the saturation value (non-zero).

    Returns a tensor of ``input``'s shape and dtype.
    """
    _check_celu_alpha(alpha)
    return _run(CELU, input, (alpha,), ("alpha",), False)


@CELU.inplace
def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`; returns ``input``."""
    _check_celu_alpha(alpha)
    return _run(CELU, input, (alpha,), ("alpha",), True)


HARDTANH = _declare("hardtanh(Tensor input, Scalar min_val=-1, Scalar max_val=1) -> Tensor", _k_hardtanh)


def _check_hardtanh(min_val, max_val):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")


@HARDTANH.front
def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]`` (``relu6`` is ``hardtanh(x, 0, 6)``).

    Args:
        input: a floating tensor of any shape.
        min_val: the lower bound.
        max_val: the upper bound (not below ``min_val``).

    Returns a tensor of ``input``'s shape and dtype.
    """
    _check_hardtanh(min_val, max_val)
    return _run(HARDTANH, input, (min_val, max_val), ("min_val", "max_val"), False)


@HARDTANH.inplace
def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`; returns ``input``."""
    _check_hardtanh(min_val, max_val)
    return _run(HARDTANH, input, (min_val, max_val), ("min_val", "max_val"), True)


def _k_hardtanh_backward(g, a, min_val, max_val):
    inside = np.greater(a, _sc(a, min_val))
    inside &= np.less(a, _sc(a, max_val))
    return np.multiply(g, inside, dtype=g.dtype)


HARDTANH_BACKWARD = declare("hardtanh_backward(Tensor grad_output, Tensor input, Scalar min_val, Scalar max_val) "
                            "-> Tensor", category=_CATEGORY, method=False, kernels={"cpu": _k_hardtanh_backward})


@HARDTANH_BACKWARD.front
def hardtanh_backward(grad_output: Tensor, input: Tensor, min_val: float, max_val: float) -> Tensor:
    """The gradient of :func:`hardtanh`: ``grad_output`` where ``min_val < input < max_val``, else 0.

    Args:
        grad_output: the incoming gradient, of ``input``'s shape.
        input: the input of hardtanh (floating).
        min_val: the lower bound.
        max_val: the upper bound.

    Returns a tensor of ``grad_output``'s shape and dtype.
    """
    _check(input, "hardtanh_backward")
    if not isinstance(grad_output, Tensor):
        raise TypeError("hardtanh_backward(): argument 'grad_output' (position 1) must be Tensor, not "
                        f"{type(grad_output).__name__}")
    if grad_output.shape != input.shape:
        raise RuntimeError(f"hardtanh_backward(): grad_output of shape {list(grad_output.shape)} does not match "
                           f"input of shape {list(input.shape)}")
    dev = input._device
    out = _wrap(HARDTANH_BACKWARD.kernel(dev.type)(grad_output._data, input._data, min_val, max_val), dev)
    if grad_state.enabled and (grad_output._requires_grad or input._requires_grad):
        record(HARDTANH_BACKWARD, (grad_output, input, min_val, max_val), {}, out)
    return out


def _simple(name: str, kernel, doc: str):
    op = _declare(f"{name}(Tensor input) -> Tensor", kernel)

    def fn(input: Tensor) -> Tensor:
        return _run(op, input, (), (), False)

    def fn_(input: Tensor) -> Tensor:
        return _run(op, input, (), (), True)

    fn.__doc__ = doc + "\n\n    ``input``: a floating tensor of any shape; the result has its shape and dtype.\n    "
    fn_.__doc__ = f"In-place :func:`{name}`; returns ``input``."
    op.front(fn)
    op.inplace(fn_)
    return op


MISH = _simple("mish", _k_mish, "Mish: ``x * tanh(softplus(x))``.")
HARDSWISH = _simple("hardswish", _k_hardswish, "Hard swish: ``x * relu6(x + 3) / 6``.")
HARDSIGMOID = _simple("hardsigmoid", _k_hardsigmoid, "Hard sigmoid: ``relu6(x + 3) / 6``.")
mish, hardswish, hardsigmoid = MISH.fn, HARDSWISH.fn, HARDSIGMOID.fn

LOG_SIGMOID = _declare("log_sigmoid(Tensor input) -> Tensor", _k_log_sigmoid)


@LOG_SIGMOID.front
def log_sigmoid(input: Tensor) -> Tensor:
    """``log(1 / (1 + exp(-x)))``, computed stably.

    ``input``: a floating tensor of any shape; the result has its shape and dtype.
    """
    return _run(LOG_SIGMOID, input, (), (), False)


THRESHOLD = _declare("threshold(Tensor input, Scalar threshold, Scalar value) -> Tensor", _k_threshold)


@THRESHOLD.front
def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``.

    Args:
        input: a floating tensor of any shape.
        threshold: the threshold.
        value: the replacement for elements not above it.

    Returns a tensor of ``input``'s shape and dtype.
    """
    return _run(THRESHOLD, input, (threshold, value), ("threshold", "value"), False)


@THRESHOLD.inplace
def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold`; returns ``input``."""
    return _run(THRESHOLD, input, (threshold, value), ("threshold", "value"), True)


HARDSHRINK = _declare("hardshrink(Tensor input, Scalar lambd=0.5) -> Tensor", _k_hardshrink, method=True)
SOFTSHRINK = _declare("softshrink(Tensor input, Scalar lambd=0.5) -> Tensor", _k_softshrink)


def _check_lambd(name, lambd):
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")


@HARDSHRINK.front
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0.

    Args:
        input: a floating tensor of any shape.
        lambd: the threshold (non-negative).

    Returns a tensor of ``input``'s shape and dtype.
    """
    return _run(HARDSHRINK, input, (lambd,), ("lambd",), False)


@SOFTSHRINK.front
def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` where ``x > lambd``, ``x + lambd`` where ``x < -lambd``, else 0.

    Args:
        input: a floating tensor of any shape.
        lambd: the threshold (non-negative).

    Returns a tensor of ``input``'s shape and dtype.
    """
    _check_lambd("softshrink", lambd)
    return _run(SOFTSHRINK, input, (lambd,), ("lambd",), False)


PRELU = declare("prelu(Tensor input, Tensor weight) -> Tensor", category=_CATEGORY, method=True,
                kernels={"cpu": _k_prelu})


@PRELU.front
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where ``x > 0``, else ``weight * x`` with one learnable slope per channel (dimension 1).

    Args:
        input: a floating tensor ``(N, C, *)``, ``(C,)``-like 1-D, or 0-D.
        weight: 1-D, with 1 element or ``C`` (the size of dimension 1 of ``input``; 1 for inputs
            of fewer than 2 dimensions).

    Returns a tensor of ``input``'s shape and dtype.
    """
    _check(input, "prelu")
    if not isinstance(weight, Tensor):
        raise TypeError(f"prelu(): argument 'weight' (position 2) must be Tensor, not {type(weight).__name__}")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} "
                           f"and channel size = {channels}.")
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"prelu: expected input and weight to have the same dtype, got {input.dtype} and "
                           f"{weight.dtype}")
    w = weight._data
    if n == 1:
        w = w.reshape(())
    elif input.ndim > 2:
        w = w.reshape((n,) + (1,) * (input.ndim - 2))
    out = _wrap(PRELU.kernel(input._device.type)(input._data, w), input._device)
    if grad_state.enabled and (input._requires_grad or weight._requires_grad):
        record(PRELU, (input, weight), {}, out)
    return out
