"""Activation operators beyond the elementwise table: leaky_relu, elu, selu, celu, hardtanh, mish,
hardswish, hardsigmoid, prelu, log_sigmoid, threshold, hardshrink, softshrink, and the derivatives
gelu_backward, silu_backward, mish_backward, hardswish_backward, hardsigmoid_backward,
leaky_relu_backward and elu_backward (torch's aten signatures). Their CPU kernels live in
``flambeau._kernels.cpu.activation``, with the fused numba kernels of gelu and silu (declared in
``elementwise.py``), mish, hardswish and the ``*_backward`` operators (Note [Fused activations]); their
CUDA kernels (one launch each, forward and backward) in ``flambeau._kernels.cuda.activation``.

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
    gelu_backward: ``kernel(grad, a, approximate) -> array``: ``grad * gelu'(a)`` (same shapes);
    silu/mish/hardswish/hardsigmoid_backward: ``kernel(grad, a) -> array``.
    leaky_relu_backward: ``kernel(grad, a, negative_slope, self_is_result) -> array``: ``grad`` where
    ``a > 0``, else ``grad * negative_slope`` (``a`` may be the result: the same signs).
    elu_backward: ``kernel(grad, alpha, scale, input_scale, is_result, a) -> array``: ``grad * scale`` where
    ``a > 0`` (NaN too, as torch), else ``grad * input_scale * alpha * scale * exp(a * input_scale)`` or, with
    ``is_result``, ``grad * input_scale * (a + alpha * scale)`` (``a`` is then elu's result).

Autograd recording: ``inputs`` is ``(input,)`` (``(input, weight)`` for prelu) and ``attrs`` holds the
scalar arguments by their signature names.
"""

from __future__ import annotations

# gelu's constants, for the derivatives composed from operators (devices without a fused kernel)
from flambeau._kernels.cpu.activation import _C_TANH, _INV_SQRT_2PI, _K_TANH, _SQRT_HALF
from flambeau._ops._common import (
    Tensor,
    _wrap,
    common_device,
    grad_state,
    inplace_by_engine,
    inplace_needs_engine,
    record,
)
from flambeau._ops._registry import declare, get_op

__all__ = ["leaky_relu", "elu", "selu", "celu", "hardtanh", "hardtanh_backward", "mish", "hardswish", "hardsigmoid",
           "prelu", "log_sigmoid", "threshold", "hardshrink", "softshrink", "gelu_backward",
           "silu_backward", "mish_backward", "hardswish_backward", "hardsigmoid_backward", "leaky_relu_backward",
           "elu_backward"]

_CATEGORY = "activation_ext"


# --- fronts ---------------------------------------------------------------------------------------
def _check(input, name: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        tname = input.dtype.scalar_name
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


def _declare(signature: str, method: bool = False):
    return declare(signature, category=_CATEGORY, method=method)


LEAKY_RELU = _declare("leaky_relu(Tensor input, Scalar negative_slope=0.01) -> Tensor")


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
ELU = _declare("elu(Tensor input, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor")


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


SELU = _declare("selu(Tensor input) -> Tensor")


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


CELU = _declare("celu(Tensor input, Scalar alpha=1.0) -> Tensor")


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


HARDTANH = _declare("hardtanh(Tensor input, Scalar min_val=-1, Scalar max_val=1) -> Tensor")


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




HARDTANH_BACKWARD = declare("hardtanh_backward(Tensor grad_output, Tensor input, Scalar min_val, Scalar max_val) "
                            "-> Tensor", category=_CATEGORY, method=False)


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
    common_device(grad_output, input)
    dev = input._device
    k = HARDTANH_BACKWARD.kernels.get(dev.type)
    if k is None:  # a device without the fused kernel: the mask from differentiable operators
        return grad_output * ((input > min_val) & (input < max_val)).to(grad_output.dtype)
    out = _wrap(k(grad_output._data, input._data, min_val, max_val), dev)
    if grad_state.enabled and (grad_output._requires_grad or input._requires_grad):
        record(HARDTANH_BACKWARD, (grad_output, input, min_val, max_val), {}, out)
    return out


def _simple(name: str, doc: str):
    op = _declare(f"{name}(Tensor input) -> Tensor")

    def fn(input: Tensor) -> Tensor:
        return _run(op, input, (), (), False)

    def fn_(input: Tensor) -> Tensor:
        return _run(op, input, (), (), True)

    fn.__doc__ = doc + "\n\n    ``input``: a floating tensor of any shape; the result has its shape and dtype.\n    "
    fn_.__doc__ = f"In-place :func:`{name}`; returns ``input``."
    op.front(fn)
    op.inplace(fn_)
    return op


MISH = _simple("mish", "Mish: ``x * tanh(softplus(x))``.")
HARDSWISH = _simple("hardswish", "Hard swish: ``x * relu6(x + 3) / 6``.")
HARDSIGMOID = _simple("hardsigmoid", "Hard sigmoid: ``relu6(x + 3) / 6``.")
mish, hardswish, hardsigmoid = MISH.fn, HARDSWISH.fn, HARDSIGMOID.fn

LOG_SIGMOID = _declare("log_sigmoid(Tensor input) -> Tensor")


@LOG_SIGMOID.front
def log_sigmoid(input: Tensor) -> Tensor:
    """``log(1 / (1 + exp(-x)))``, computed stably.

    ``input``: a floating tensor of any shape; the result has its shape and dtype.
    """
    return _run(LOG_SIGMOID, input, (), (), False)


THRESHOLD = _declare("threshold(Tensor input, Scalar threshold, Scalar value) -> Tensor")


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


HARDSHRINK = _declare("hardshrink(Tensor input, Scalar lambd=0.5) -> Tensor", method=True)
SOFTSHRINK = _declare("softshrink(Tensor input, Scalar lambd=0.5) -> Tensor")


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


PRELU = declare("prelu(Tensor input, Tensor weight) -> Tensor", category=_CATEGORY, method=True)


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


def _composite_backward(name: str, g, x):
    """``g * name'(x)`` from differentiable operators: the backward ops' path on devices without a
    kernel of theirs (CUDA), recorded by autograd through its primitives."""
    if name == "gelu":
        return g * (0.5 * (1 + (x * _SQRT_HALF).erf()) + x * (-0.5 * x * x).exp() * _INV_SQRT_2PI)
    if name == "gelu_tanh":
        t = (_K_TANH * (x + _C_TANH * x * x * x)).tanh()
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _K_TANH * (1 + 3 * _C_TANH * x * x))
    if name == "silu":
        s = x.sigmoid()
        return g * (s * (1 + x * (1 - s)))
    if name == "mish":
        t = get_op("softplus").fn(x).tanh()  # softplus is elementwise.py's: by name, not by import
        return g * (t + x * x.sigmoid() * (1 - t * t))
    inside = ((x > -3) & (x < 3)).to(x.dtype)
    if name == "hardsigmoid":
        return g * inside / 6
    return g * (inside * (x / 3 + 0.5) + (x >= 3).to(x.dtype))  # hardswish


def _check_backward_args(name, grad_output, input):
    _check(input, name)
    if not isinstance(grad_output, Tensor):
        raise TypeError(f"{name}(): argument 'grad_output' (position 1) must be Tensor, not "
                        f"{type(grad_output).__name__}")
    if grad_output.shape != input.shape:
        raise RuntimeError(f"{name}(): grad_output of shape {list(grad_output.shape)} does not match "
                           f"input of shape {list(input.shape)}")
    common_device(grad_output, input)  # the fused kernels read both in one pass, on one device


GELU_BACKWARD = declare("gelu_backward(Tensor grad_output, Tensor input, *, str approximate='none') -> Tensor",
                        category=_CATEGORY, method=False)


@GELU_BACKWARD.front
def gelu_backward(grad_output: Tensor, input: Tensor, approximate: str = "none") -> Tensor:
    """The gradient of :func:`flambeau.gelu`: ``grad_output * gelu'(input)``, fused in one pass.

    Args:
        grad_output: the incoming gradient, of ``input``'s shape.
        input: the input of gelu (floating).
        approximate: ``'none'`` or ``'tanh'``, as given to gelu.

    Returns a tensor of ``input``'s shape and dtype.
    """
    _check_backward_args("gelu_backward", grad_output, input)
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    dev = input._device
    k = GELU_BACKWARD.kernels.get(dev.type)
    if k is None:
        return _composite_backward("gelu_tanh" if approximate == "tanh" else "gelu", grad_output, input)
    out = _wrap(k(grad_output._data, input._data, approximate), dev)
    if grad_state.enabled and (grad_output._requires_grad or input._requires_grad):
        record(GELU_BACKWARD, (grad_output, input), {"approximate": approximate}, out)
    return out


def _backward_op(name: str):
    """Declare ``<name>_backward(grad_output, input)``: ``grad_output * name'(input)``, fused."""
    op = declare(f"{name}_backward(Tensor grad_output, Tensor input) -> Tensor", category=_CATEGORY, method=False)

    def fn(grad_output: Tensor, input: Tensor) -> Tensor:
        _check_backward_args(op.name, grad_output, input)
        dev = input._device
        k = op.kernels.get(dev.type)
        if k is None:
            return _composite_backward(name, grad_output, input)
        out = _wrap(k(grad_output._data, input._data), dev)
        if grad_state.enabled and (grad_output._requires_grad or input._requires_grad):
            record(op, (grad_output, input), {}, out)
        return out

    fn.__doc__ = f"""The gradient of :func:`flambeau.{name}`: ``grad_output * {name}'(input)``, fused in one pass.

    Args:
        grad_output: the incoming gradient, of ``input``'s shape.
        input: the input of {name} (floating).

    Returns a tensor of ``input``'s shape and dtype.
    """
    op.front(fn)
    return op


SILU_BACKWARD = _backward_op("silu")
MISH_BACKWARD = _backward_op("mish")
HARDSWISH_BACKWARD = _backward_op("hardswish")
HARDSIGMOID_BACKWARD = _backward_op("hardsigmoid")
silu_backward, mish_backward, hardswish_backward = SILU_BACKWARD.fn, MISH_BACKWARD.fn, HARDSWISH_BACKWARD.fn
hardsigmoid_backward = HARDSIGMOID_BACKWARD.fn


def _backward_kernel(op, grad_output, input, negative_from_result: bool, what: str):
    """The checks of a ``*_backward`` operator with a slope (torch's messages); its kernel on ``input``'s device
    (every device has one: the table-walk test says so)."""
    _check_backward_args(op.name, grad_output, input)
    if negative_from_result:
        raise RuntimeError(f"In-place {what} backward calculation is triggered with a negative slope which is not "
                           "supported. This is caused by calling in-place forward function with a negative slope, "
                           "please call out-of-place version instead.")
    return op.kernel(input._device.type)


LEAKY_RELU_BACKWARD = declare("leaky_relu_backward(Tensor grad_output, Tensor input, Scalar negative_slope, "
                              "bool self_is_result) -> Tensor", category=_CATEGORY, method=False)


@LEAKY_RELU_BACKWARD.front
def leaky_relu_backward(grad_output: Tensor, input: Tensor, negative_slope: float, self_is_result: bool) -> Tensor:
    """The gradient of :func:`leaky_relu`: ``grad_output`` where ``input > 0``, else ``grad_output *
    negative_slope``, in one pass.

    Args:
        grad_output: the incoming gradient, of ``input``'s shape.
        input: the input of leaky_relu (floating), or its result when ``self_is_result`` (the same signs
            for a non-negative slope).
        negative_slope: the slope for negative inputs.
        self_is_result: whether ``input`` is the result (torch's in-place form); the slope must then be
            non-negative.

    Returns a tensor of ``input``'s shape and dtype.
    """
    k = _backward_kernel(LEAKY_RELU_BACKWARD, grad_output, input, self_is_result and negative_slope < 0, "leakyReLu")
    out = _wrap(k(grad_output._data, input._data, negative_slope, bool(self_is_result)), input._device)
    if grad_state.enabled and (grad_output._requires_grad or input._requires_grad):
        record(LEAKY_RELU_BACKWARD, (grad_output, input, negative_slope, bool(self_is_result)), {}, out)
    return out


ELU_BACKWARD = declare("elu_backward(Tensor grad_output, Scalar alpha, Scalar scale, Scalar input_scale, "
                       "bool is_result, Tensor self_or_result) -> Tensor", category=_CATEGORY, method=False)


@ELU_BACKWARD.front
def elu_backward(grad_output: Tensor, alpha: float, scale: float, input_scale: float, is_result: bool,
                 self_or_result: Tensor) -> Tensor:
    """The gradient of :func:`elu` (and of selu and celu, which are elu with other constants), in one pass.

    Args:
        grad_output: the incoming gradient, of ``self_or_result``'s shape.
        alpha, scale, input_scale: elu's constants.
        is_result: whether ``self_or_result`` is elu's result rather than its input.
        self_or_result: elu's input (or result, with ``is_result``), floating.

    Returns ``grad_output * scale`` where ``self_or_result > 0`` (NaN too, as torch), else ``grad_output *
    input_scale * alpha * scale * exp(x * input_scale)`` (from the result: ``grad_output * input_scale *
    (result + alpha * scale)``), of ``self_or_result``'s shape and dtype.
    """
    k = _backward_kernel(ELU_BACKWARD, grad_output, self_or_result, is_result and alpha < 0, "elu")
    out = _wrap(k(grad_output._data, alpha, scale, input_scale, bool(is_result), self_or_result._data),
                self_or_result._device)
    if grad_state.enabled and (grad_output._requires_grad or self_or_result._requires_grad):
        record(ELU_BACKWARD, (grad_output, alpha, scale, input_scale, bool(is_result), self_or_result), {}, out)
    return out


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _declare_samples():
    from flambeau._ops._registry import OPS
    from flambeau._ops._samples import FLOAT, cases
    from flambeau._ops._samples import SampleInput as S

    def add(name, *builders, dtypes=FLOAT, **meta):
        OPS[name].samples(cases(*builders), dtypes=dtypes, **meta)

    f = "nn.functional."
    add("leaky_relu", lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((3, 4)), 0.2), ref=f + "leaky_relu")
    add("elu", lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((3, 4)), 0.5), ref=f + "elu")
    add("selu", lambda mk, mki: S(mk((3, 4))), ref=f + "selu")
    add("celu", lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((3, 4)), 0.5), ref=f + "celu")
    add("hardtanh", lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((3, 4)), -2.0, 2.0), ref=f + "hardtanh")
    for name in ("mish", "hardswish", "hardsigmoid"):
        add(name, lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((5,), noncontiguous=True)), ref=f + name)
    add("log_sigmoid", lambda mk, mki: S(mk((3, 4))), ref=f + "logsigmoid")
    add("threshold", lambda mk, mki: S(mk((3, 4)), 0.5, -1.0), ref=f + "threshold")
    add("hardshrink", lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((3, 4)), 1.0), ref=f + "hardshrink")
    add("softshrink", lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((3, 4)), 1.0), ref=f + "softshrink")
    add("prelu", lambda mk, mki: S(mk((2, 3, 4)), mk((3,))), lambda mk, mki: S(mk((2, 3)), mk((1,))), ref=f + "prelu")
    # the derivatives: (grad_output, input), contiguous and transposed
    aten = "ops.aten."
    grad_input = (lambda mk, mki: S(mk((3, 4)), mk((3, 4))),
                  lambda mk, mki: S(mk((4, 3), noncontiguous=True), mk((4, 3), noncontiguous=True)).named("strided"))
    for name in ("silu_backward", "mish_backward", "hardswish_backward", "hardsigmoid_backward"):
        add(name, *grad_input, ref=aten + name)
    add("leaky_relu_backward", lambda mk, mki: S(mk((3, 4)), mk((3, 4)), 0.2, False),
        lambda mk, mki: S(mk((4, 3), noncontiguous=True), mk((4, 3), noncontiguous=True), 0.01, True).named("result"),
        ref=aten + "leaky_relu_backward")
    add("elu_backward", lambda mk, mki: S(mk((3, 4)), 1.0, 1.0, 1.0, False, mk((3, 4))),
        lambda mk, mki: S(mk((3, 4)), 1.3, 1.0507, 0.7, False, mk((3, 4), noncontiguous=True)).named("scaled"),
        lambda mk, mki: S(mk((3, 4)), 0.5, 2.0, 1.5, True, mk((3, 4))).named("result"),
        ref=aten + "elu_backward")
    add("gelu_backward", *grad_input, lambda mk, mki: S(mk((3, 4)), mk((3, 4)), approximate="tanh").named("tanh"),
        ref=aten + "gelu_backward")
    add("hardtanh_backward", lambda mk, mki: S(mk((3, 4)), mk((3, 4)), -1.0, 1.0),
        lambda mk, mki: S(mk((3, 4)), mk((3, 4), noncontiguous=True), 0.0, 6.0).named("relu6"),
        ref=aten + "hardtanh_backward")

_declare_samples()
