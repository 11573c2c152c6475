"""Folding a batch norm in evaluation mode into the convolution or linear layer before it, as torch.nn.utils.fusion.

In evaluation mode a batch norm is the per-channel affine map ``y = (x - mean) / sqrt(var + eps) * gamma + beta``
with fixed statistics, so after a convolution or a linear layer it folds into that layer's weight and bias:
``W' = W * s`` (scaled along the output channels) and ``b' = (b - mean) * s + beta`` with ``s = gamma / sqrt(var +
eps)``. The fused layer computes the pair's output in one operator (inference only: the statistics no longer update).
"""

from __future__ import annotations

import copy

import flambeau as fl
from flambeau import Tensor
from flambeau.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _bn_scale_shift(bn_rm: Tensor, bn_rv: Tensor, bn_eps: float, bn_w, bn_b) -> tuple[Tensor, Tensor]:
    """``(s, beta)`` of a batch norm's affine map, absent weight and bias taken as 1 and 0."""
    scale = fl.rsqrt(bn_rv + bn_eps)
    if bn_w is not None:
        scale = scale * bn_w
    return scale, (fl.zeros_like(bn_rm) if bn_b is None else bn_b)


def fuse_conv_bn_weights(conv_w: Tensor, conv_b, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float, bn_w, bn_b,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:
    """The weight and bias of a convolution followed by a batch norm in evaluation mode, as one convolution.

    Args:
        conv_w: the convolution's weight ``(out, in / groups, *kernel)`` (``(in, out / groups, *kernel)`` with
            ``transpose``).
        conv_b: its bias ``(out,)`` or None.
        bn_rm, bn_rv: the batch norm's running mean and variance ``(out,)``.
        bn_eps: its epsilon.
        bn_w, bn_b: its weight and bias ``(out,)``, or None.
        transpose: the convolution is transposed (its output channels are dim 1 of its weight).

    Returns:
        ``(weight, bias)`` as Parameters, in the convolution's dtypes (its weight's for an absent bias).
    """
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    scale, shift = _bn_scale_shift(bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    shape = [1, -1] if transpose else [-1, 1]
    shape += [1] * (conv_w.ndim - 2)
    weight = (conv_w * scale.reshape(shape)).to(dtype=w_dtype)
    bias = conv_b if conv_b is not None else fl.zeros_like(bn_rm)
    bias = ((bias - bn_rm) * scale + shift).to(dtype=b_dtype)
    return Parameter(weight, conv_w.requires_grad), Parameter(bias, conv_b.requires_grad if conv_b is not None
                                                               else conv_w.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of convolution ``conv`` that computes ``bn(conv(x))`` (both in evaluation mode): see
    :func:`fuse_conv_bn_weights`. ``conv`` and ``bn`` are left as they are."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("batch norm without running statistics cannot be fused")
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float, bn_w,
                           bn_b) -> tuple[Parameter, Parameter]:
    """The weight ``(out, in)`` and bias ``(out,)`` of a linear layer followed by a batch norm in evaluation mode,
    as one linear layer (arguments as :func:`fuse_conv_bn_weights`'s)."""
    scale, shift = _bn_scale_shift(bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    weight = linear_w * scale.unsqueeze(-1)
    bias = linear_b if linear_b is not None else fl.zeros_like(bn_rm)
    bias = (bias - bn_rm) * scale + shift
    return Parameter(weight, linear_w.requires_grad), Parameter(bias, linear_b.requires_grad if linear_b is not None
                                                                 else linear_w.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of linear layer ``linear`` that computes ``bn(linear(x))`` (both in evaluation mode; the batch norm's
    features must be the linear layer's outputs, or one feature broadcast to them)."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if not (linear.out_features == bn.num_features or bn.num_features == 1):
        raise AssertionError("To fuse, linear.out_features == bn.num_features or bn.num_features == 1")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("batch norm without running statistics cannot be fused")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused
