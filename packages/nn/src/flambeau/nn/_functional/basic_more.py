"""nn.functional: channel shuffle, local response normalization and the 3-D transposed convolution.

Composites of existing operators (no kernels of their own).
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.basic import pad
from flambeau.nn._functional.conv import conv3d
from flambeau.nn._functional.pooling import avg_pool3d

__all__ = ["channel_shuffle", "native_channel_shuffle", "local_response_norm", "conv_transpose3d"]


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Shuffle the channels (dimension 1) of ``(N, C, *)``: ``C = g * k`` is viewed as ``(g, k)`` and transposed.

    Args:
        input: ``(N, C, *)`` with ``C`` divisible by ``groups``.
        groups: the number of groups.

    Returns:
        a new tensor of ``input``'s shape and dtype.
    """
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    channels = input.shape[1]
    if channels % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {channels} channels and {groups} "
                           f"groups.")
    n, rest = input.shape[0], tuple(input.shape[2:])
    return input.reshape(n, groups, channels // groups, *rest).transpose(1, 2).reshape(input.shape)


native_channel_shuffle = channel_shuffle


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Local response normalization across channels: ``x / (k + alpha * mean of x^2 over size channels)^beta``.

    Args:
        input: ``(N, C, *)`` with at least 3 dimensions.
        size: the number of neighbouring channels (``size // 2`` before, ``(size - 1) // 2`` after).
        alpha, beta, k: the constants of the formula.
    """
    dim = input.ndim
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    div = input * input
    if dim == 3:
        div = pad(div.unsqueeze(1), (0, 0, size // 2, (size - 1) // 2))
        div = fl.avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = input.shape
        div = div.reshape(sizes[0], 1, sizes[1], sizes[2], -1)
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1).reshape(sizes)
    return input / div.mul(alpha).add(k).pow(beta)


def _triple(value, name: str) -> tuple:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * 3
    if isinstance(value, (tuple, list)) and len(value) in (1, 3):
        return tuple(int(v) for v in value) * (3 // len(value))
    raise RuntimeError(f"expected {name} to be a single integer value or a list of 3 values to match the "
                       f"convolution dimensions, but got {name}={value}")


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """3-D transposed convolution ("deconvolution") of ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``.

    Computed as :func:`conv3d` of the input with ``stride - 1`` zeros between its elements, padded by
    ``dilation * (k - 1) - padding`` (``+ output_padding`` after), with the flipped, transposed weight.

    Args:
        input: float ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``.
        weight: ``(C_in, C_out / groups, kD, kH, kW)``.
        bias: optional ``(C_out,)``.
        stride, padding, output_padding, dilation: ints or triples.
        groups: blocked connections.

    Returns:
        ``(N, C_out, D_out, H_out, W_out)`` with
        ``D_out = (D - 1) * stride - 2 * padding + dilation * (kD - 1) + output_padding + 1`` (likewise H, W).
    """
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Expected 4D (unbatched) or 5D (batched) input to conv_transpose3d, but got input of "
                           f"size: {list(input.shape)}")
    if weight.ndim != 5:
        raise RuntimeError(f"Expected 5-dimensional weight for conv_transpose3d, but got weight of size "
                           f"{list(weight.shape)}")
    stride, padding = _triple(stride, "stride"), _triple(padding, "padding")
    output_padding, dilation = _triple(output_padding, "output_padding"), _triple(dilation, "dilation")
    if min(stride) <= 0 or min(dilation) <= 0 or groups <= 0:
        raise RuntimeError("non-positive stride, dilation or groups is not supported")
    if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding={list(output_padding)}, stride={list(stride)}, "
                           f"dilation={list(dilation)}")
    x = input if input.ndim == 5 else input.unsqueeze(0)
    c_in = weight.shape[0]
    if x.shape[1] != c_in or c_in % groups:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input "
                           f"{list(x.shape)} to have {c_in} channels, but got {x.shape[1]} channels instead")
    for axis, s in zip((2, 3, 4), stride):
        if s > 1:  # s - 1 zeros after each element along this axis, none after the last
            length = x.shape[axis]
            x = fl.stack([x] + [fl.zeros_like(x)] * (s - 1), axis + 1)
            x = x.reshape(*x.shape[:axis], length * s, *x.shape[axis + 2:]).narrow(axis, 0, (length - 1) * s + 1)
    kernel = weight.shape[2:]
    before = [d * (k - 1) - p for d, k, p in zip(dilation, kernel, padding)]
    after = [b + op for b, op in zip(before, output_padding)]
    for axis, (b, a) in enumerate(zip(before, after), start=2):  # negative pads crop
        if b < 0:
            x = x.narrow(axis, -b, x.shape[axis] + b)
        if a < 0:
            x = x.narrow(axis, 0, x.shape[axis] + a)
    pads = []
    for b, a in reversed(list(zip(before, after))):
        pads += [max(b, 0), max(a, 0)]
    if any(pads):
        x = pad(x, tuple(pads))
    cg = c_in // groups
    w = weight.reshape(groups, cg, weight.shape[1], *kernel).transpose(1, 2)
    w = w.reshape(groups * weight.shape[1], cg, *kernel).flip((2, 3, 4))
    y = conv3d(x, w, bias, 1, 0, dilation, groups)
    return y if input.ndim == 5 else y.squeeze(0)
