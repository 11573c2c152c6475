"""Derivatives of the convolution and pooling operators (see _formulas.py for the convention).

A convolution is linear in its input and in its weight: the input gradient is the transposed
convolution of the output gradient with the same weight (and a transposed convolution's is a plain
one), the weight gradient is ``convolution_backward_weight``, itself bilinear in the output
gradient and the input, whose derivatives are convolutions again. So every formula here is built
from the same two operators and second derivatives come for free. A first-order backward takes the
three gradients from one ``convolution_backward`` call instead (the derivative's joint: Note
[Convolution backward as one operator] in ``flambeau._ops.conv``).

Pooling backwards are operators of their own (``max_pool_backward`` scatters through the saved
indices, ``avg_pool2d_backward`` and ``adaptive_avg_pool2d_backward`` spread each gradient over its
window); each is linear in the gradient, and its derivative is the forward pooling (or the gather
through the indices) again.
"""

from __future__ import annotations

import flambeau as fl
from flambeau._ops import get_op
from flambeau.autograd._opnode import Derivative as D
from flambeau.autograd._shared_grads import masked

__all__ = ["TABLE"]

_conv_weight = get_op("convolution_backward_weight").fn


def _conv_input_grad(g, w, s, input_shape):
    """Gradient with respect to the input of ``convolution(x, w, ...)`` (x of ``input_shape``) given ``g``."""
    stride, padding, dilation, groups = s.stride, s.padding, s.dilation, s.groups
    if s.transposed:  # the adjoint of a transposed convolution is the plain one (cut to the input's size, which it
        #               exceeds where output_padding is at least the stride: rows the convolution never read)
        gx = fl.convolution(g, w, None, stride, padding, dilation, False, [0] * len(stride), groups)
        if tuple(gx.shape) != tuple(input_shape):
            gx = gx[(slice(None), slice(None), *(slice(0, n) for n in input_shape[2:]))]
        return gx
    k = w.shape[2:]
    out = g.shape[2:]
    # The output_padding that makes the transposed convolution give back the input's size exactly.
    output_padding = [n - ((o - 1) * st - 2 * p + d * (kk - 1) + 1)
                      for n, o, st, p, d, kk in zip(input_shape[2:], out, stride, padding, dilation, k)]
    return fl.convolution(g, w, None, stride, padding, dilation, True, output_padding, groups)


def _conv_weight_grad(g, x, weight_shape, s):
    return _conv_weight(g, x, list(weight_shape), s.stride, s.padding, s.dilation, s.transposed,
                        s.output_padding, s.groups)


def _bias_grad(g):
    return g.sum(dim=(0,) + tuple(range(2, g.ndim)))


_conv_backward = get_op("convolution_backward").fn


def _conv_fused(g, s, mask):
    """The three gradients from one ``convolution_backward`` call (Note [Convolution backward as one operator] in
    ``flambeau._ops.conv``); None for complex dtypes (and, through :func:`masked`, under ``create_graph``), where the
    formulas' differentiable operators run."""
    if g.dtype.is_complex:
        return None
    return _conv_backward(g, s.input, s.weight, None, s.stride, s.padding, s.dilation, s.transposed,
                          s.output_padding, s.groups, mask)


def _bw_grad_output(gg, s):
    # <gg, W_grad(g, x)> = <g, convolution(x, gg)>: the derivative in g is the convolution of x with gg.
    return fl.convolution(s.input, gg, None, s.stride, s.padding, s.dilation, s.transposed, s.output_padding,
                          s.groups)


TABLE: dict = {
    "convolution": D({
        "input": lambda g, s: _conv_input_grad(g, s.weight, s, s.input_shape),
        "weight": lambda g, s: _conv_weight_grad(g, s.input, s.weight_shape, s),
        "bias": lambda g, s: _bias_grad(g),
    }, save=("input", "weight"), joint=masked(_conv_fused)),
    "convolution_backward_weight": D({
        "grad_output": _bw_grad_output,
        # <gg, W_grad(g, x)> = <g, convolution(x, gg)> = <input-gradient of that convolution at g, x>.
        "input": lambda gg, s: _conv_input_grad(s.grad_output, gg, s, s.input_shape),
    }, save=("grad_output", "input")),
}


# --- pooling -------------------------------------------------------------------------------------------
_max_pool_backward = get_op("max_pool2d_backward").fn
_avg_pool_backward = get_op("avg_pool2d_backward").fn
_adaptive_avg_backward = get_op("adaptive_avg_pool2d_backward").fn


def _gather_planes(gg, indices):
    """``gg`` (shaped like the pooled input) read at the pooling ``indices``: derivative of the scatter."""
    flat = gg.reshape(tuple(indices.shape[:-2]) + (-1,))
    return flat.gather(-1, indices.reshape(tuple(indices.shape[:-2]) + (-1,))).reshape(indices.shape)


def _avg_args(s):
    return (s.kernel_size, s.stride, s.padding, s.ceil_mode, s.count_include_pad, s.divisor_override)


TABLE.update({
    "max_pool2d_with_indices": D({"input": lambda g, s: _max_pool_backward(g[0], s.result1, s.input_shape)},
                                 save=("result1",), outputs=2),
    "adaptive_max_pool2d": D({"input": lambda g, s: _max_pool_backward(g[0], s.result1, s.input_shape)},
                             save=("result1",), outputs=2),
    "max_pool2d_backward": D({"grad_output": lambda gg, s: _gather_planes(gg, s.indices)}, save=("indices",)),
    "avg_pool2d": D({"input": lambda g, s: _avg_pool_backward(g, s.input_shape, *_avg_args(s))}),
    "avg_pool2d_backward": D({"grad_output": lambda gg, s: fl.avg_pool2d(gg, *_avg_args(s))}),
    "adaptive_avg_pool2d": D({"input": lambda g, s: _adaptive_avg_backward(g, s.input_shape)}),
    "adaptive_avg_pool2d_backward": D({"grad_output": lambda gg, s: fl.adaptive_avg_pool2d(
        gg, s.grad_output_shape[-2:])}),
})
