"""Derivatives of the activation operators of ``_ops/activation.py`` (see _formulas.py for the convention).

Every formula is written with flambeau operators (comparisons, ``exp`` ...), so double backward
works. Comparisons give the subgradient torch uses at the kinks (e.g. leaky_relu's slope at 0,
hardtanh's 0 at the bounds). Piecewise formulas blend with 0/1 masks rather than ``where``: numpy's
masked selection is several times slower than arithmetic on a mask.
"""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.autograd._opnode import Derivative as D

__all__ = ["TABLE"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_GELU_K = math.sqrt(2 / math.pi)
_GELU_C = 0.044715
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _mask(cond, like):
    """``cond`` (a bool tensor) as 0/1 values of ``like``'s dtype."""
    return cond.to(like.dtype)


def _elu_backward(g, x, alpha, scale, input_scale):
    return fl.elu_backward(g, alpha, scale, input_scale, False, x)


def _elu_backward_grad(g, s):
    """elu_backward's derivative in its input (or result): ``g * grad_output`` times elu'' (x <= 0 only)."""
    x, c, ab = s.self_or_result, s.input_scale, s.alpha * s.scale
    if s.is_result:  # d/dy of grad * c (y + a b) is grad * c
        return g * s.grad_output * _mask(x <= 0, g) * c
    return g * s.grad_output * _mask(x <= 0, g) * (x.clamp(max=0) * c).exp() * (c * c * ab)


def _silu_grad2(x):
    """silu''(x) = s (1 - s) (2 + x (1 - 2 s)), s = sigmoid(x) (composite, for double backward)."""
    sig = x.sigmoid()
    return sig * (1 - sig) * (2 + x * (1 - 2 * sig))


def _mish_grad2(x):
    """mish''(x) = (1 - t^2) (2 s + x s (1 - s) - 2 x s^2 t), t = tanh(softplus x), s = sigmoid(x)."""
    t = fl.softplus(x).tanh()
    sig = x.sigmoid()
    return (1 - t * t) * (2 * sig + x * sig * (1 - sig) - 2 * x * sig * sig * t)


def _approx(s):
    return s.get("approximate", "none")


def _gelu_grad2(x, approximate):
    """gelu''(x), composite (only second and higher derivatives use it)."""
    if approximate == "tanh":
        # gelu' = (1 + t) / 2 + x (1 - t^2) u' / 2 with t = tanh(u), u = k (x + c x^3):
        # gelu'' = (1 - t^2) (u' - x t u'^2 + x u'' / 2)
        t = (_GELU_K * (x + _GELU_C * x * x * x)).tanh()
        du = _GELU_K * (1 + 3 * _GELU_C * x * x)
        return (1 - t * t) * (du - x * t * du * du + 3 * _GELU_K * _GELU_C * x * x)
    # gelu' = Phi(x) + x phi(x), phi' = -x phi: gelu'' = phi(x) (2 - x^2)
    return (-0.5 * x * x).exp() * _INV_SQRT_2PI * (2 - x * x)


def _hardtanh_grad(g, s):
    # The mask min < x < max of the input, as torch's: its hardtanh_ keeps a copy of the old value, so
    # changing the result in place again before backward is allowed (a saved result would forbid it;
    # Note [In-place operators that keep no old value]).
    return fl.hardtanh_backward(g, s.input, s.get("min_val", -1.0), s.get("max_val", 1.0))


def _prelu_input(g, s):
    x, w = s.input, s.weight
    pos = _mask(x > 0, g)
    return g * (pos + (1 - pos) * _prelu_w(w, x))


def _prelu_w(w, x):
    if w.numel() == 1:
        return w.reshape(())
    if x.dim() > 2:
        return w.reshape((w.shape[0],) + (1,) * (x.dim() - 2))
    return w


def _prelu_weight(g, s):
    x, w = s.input, s.weight
    contrib = g * x * _mask(x <= 0, g)
    if w.numel() == 1 or x.dim() < 2:
        return contrib.sum().reshape(s.weight_shape)
    dims = [0] + list(range(2, x.dim()))
    return contrib.sum(dims).reshape(s.weight_shape)


TABLE: dict = {
    # leaky_relu, the elu family and hardsigmoid: fused *_backward operators (torch's aten ones), as gelu's
    "leaky_relu": D({"input": lambda g, s: fl.leaky_relu_backward(g, s.input, s.get("negative_slope", 0.01), False)},
                    save=("input",)),
    "leaky_relu_backward": D({"grad_output": lambda g, s: fl.leaky_relu_backward(g, s.input, s.negative_slope,
                                                                                 s.self_is_result),
                              "input": lambda g, s: g * 0}, save=("input",)),
    "elu": D({"input": lambda g, s: _elu_backward(g, s.input, s.get("alpha", 1.0), s.get("scale", 1.0),
                                                  s.get("input_scale", 1.0))}, save=("input",)),
    "selu": D({"input": lambda g, s: _elu_backward(g, s.input, _SELU_ALPHA, _SELU_SCALE, 1.0)}, save=("input",)),
    "celu": D({"input": lambda g, s: _elu_backward(g, s.input, s.get("alpha", 1.0), 1.0, 1.0 / s.get("alpha", 1.0))},
              save=("input",)),
    "elu_backward": D({"grad_output": lambda g, s: fl.elu_backward(g, s.alpha, s.scale, s.input_scale, s.is_result,
                                                                   s.self_or_result),
                       "self_or_result": _elu_backward_grad}, save=("grad_output", "self_or_result")),
    "hardtanh": D({"input": _hardtanh_grad}, save=("input",)),
    # its derivative w.r.t. grad_output is the same mask; w.r.t. input it is zero almost everywhere
    "hardtanh_backward": D({"grad_output": lambda g, s: fl.hardtanh_backward(g, s.input, s.min_val, s.max_val),
                            "input": lambda g, s: g * 0}, save=("input",)),
    # gelu's backward is one fused operator with its own derivative (as in torch), rather than a formula
    # that picks a fast kernel when grad mode is off and a composite otherwise: one formula, no hidden
    # dependence on the grad mode, the fused kernel serves create_graph=True too, and only double
    # backward pays for the composite second derivative below.
    "gelu_backward": D({"grad_output": lambda g, s: fl.gelu_backward(g, s.input, approximate=_approx(s)),
                        "input": lambda g, s: g * s.grad_output * _gelu_grad2(s.input, _approx(s))},
                       save=("grad_output", "input")),
    # silu, mish, hardswish: fused *_backward operators, as gelu's
    "silu_backward": D({"grad_output": lambda g, s: fl.silu_backward(g, s.input),
                        "input": lambda g, s: g * s.grad_output * _silu_grad2(s.input)},
                       save=("grad_output", "input")),
    "mish": D({"input": lambda g, s: fl.mish_backward(g, s.input)}, save=("input",)),
    "mish_backward": D({"grad_output": lambda g, s: fl.mish_backward(g, s.input),
                        "input": lambda g, s: g * s.grad_output * _mish_grad2(s.input)},
                       save=("grad_output", "input")),
    "hardswish": D({"input": lambda g, s: fl.hardswish_backward(g, s.input)}, save=("input",)),
    "hardswish_backward": D({"grad_output": lambda g, s: fl.hardswish_backward(g, s.input),
                             "input": lambda g, s: g * s.grad_output * _mask((s.input > -3) & (s.input < 3), g) / 3},
                            save=("grad_output", "input")),
    "hardsigmoid": D({"input": lambda g, s: fl.hardsigmoid_backward(g, s.input)}, save=("input",)),
    "hardsigmoid_backward": D({"grad_output": lambda g, s: fl.hardsigmoid_backward(g, s.input),
                               "input": lambda g, s: g * 0}, save=("input",)),
    "log_sigmoid": D({"input": lambda g, s: g * (-s.input).sigmoid()}, save=("input",)),
    "threshold": D({"input": lambda g, s: g * _mask(s.input > s.get("threshold"), g)}, save=("input",)),
    "hardshrink": D({"input": lambda g, s: g * _mask(s.input.abs() > s.get("lambd", 0.5), g)}, save=("input",)),
    "softshrink": D({"input": lambda g, s: g * _mask(s.input.abs() > s.get("lambd", 0.5), g)}, save=("input",)),
    "prelu": D({"input": _prelu_input, "weight": _prelu_weight}, save=("input", "weight")),
}
