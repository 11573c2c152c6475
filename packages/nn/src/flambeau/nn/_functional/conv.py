"""nn.functional: convolutions (``conv1d``/``2d``/``3d``, transposed forms) and ``unfold``/``fold``.

``conv1d``, ``conv2d`` and the transposed forms are tensor-core's operators under torch's
``nn.functional`` names. The rest are composites of public operators, so autograd differentiates
them (twice, too) without derivatives of their own:

Note [unfold and fold as one gather and one scatter-add]: with the input padded and each plane
flattened, the element that column ``(c, i, j)`` of block ``l`` reads sits at the same flat offset
in every plane. One index vector of length ``kh * kw * L`` therefore turns im2col into a single
``index_select`` along the flattened plane, and col2im (its adjoint) into a single ``index_add``
into a zero plane, cropped afterwards. Each is the other's derivative, each touches every element
once (a one-hot convolution would multiply every element by ``kh * kw`` zeros), and the index
depends only on the geometry, so it is built once per geometry and device.

Note [conv3d as one conv2d]: a 3-D convolution is a 2-D convolution whose input channels are the
``kd`` depth taps of every input channel. ``index_select`` along the depth gathers, for each output
depth ``o``, the input slices ``o * stride + k * dilation``; they are moved next to the channels
(``(N * D_out, groups * kd * C_in / groups, H, W)``) and convolved in one ``conv2d`` call with the
weight rearranged to ``(C_out, kd * C_in / groups, kh, kw)``. The work is the same as a direct 3-D
convolution; the gathered input is ``kd / stride_d`` times the input's size.
"""

from __future__ import annotations

import functools

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.basic import pad as _pad

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "unfold", "fold"]

conv1d = fl.conv1d
conv2d = fl.conv2d
conv_transpose1d = fl.conv_transpose1d
conv_transpose2d = fl.conv_transpose2d


def _ntuple(v, n: int, name: str) -> tuple:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    if isinstance(v, (tuple, list)) and len(v) == n and all(isinstance(e, int) for e in v):
        return tuple(v)
    if isinstance(v, (tuple, list)) and len(v) != n:
        raise RuntimeError(f"It is expected {name} equals to {n}, but got size {len(v)}")
    raise TypeError(f"{name} must be an int or a tuple of {n} ints, got {v!r}")


# --- unfold / fold (Note [unfold and fold as one gather and one scatter-add]) ------------------------
def _block_params(kernel_size, dilation, padding, stride) -> tuple:
    """``(kernel, dilation, padding, stride)`` of :func:`unfold` / :func:`fold` as checked pairs."""
    kernel = _ntuple(kernel_size, 2, "kernel_size")
    dilation, padding, stride = (_ntuple(dilation, 2, "dilation"), _ntuple(padding, 2, "padding"),
                                 _ntuple(stride, 2, "stride"))
    _check_block_params(kernel, dilation, padding, stride)
    return kernel, dilation, padding, stride


def _check_block_params(kernel, dilation, padding, stride) -> None:
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {kernel[0]} "
                           f"kernel_width: {kernel[1]}")
    if min(stride) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {stride[0]} "
                           f"stride_width: {stride[1]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    if min(padding) < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {padding[0]} "
                           f"pad_width: {padding[1]}")


def _blocks(size, kernel, dilation, padding, stride) -> tuple:
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in zip(size, kernel, dilation, padding,
                                                                                  stride))


@functools.lru_cache(maxsize=64)
def _block_index(padded: tuple, kernel: tuple, dilation: tuple, stride: tuple, blocks: tuple, device: str) -> Tensor:
    """int64 ``(kh * kw * L,)``: the flat offset in a padded plane of column ``(i, j)`` of block ``(bh, bw)``."""
    kh, kw = kernel
    bh, bw = blocks
    rows = np.arange(kh)[:, None] * dilation[0] + np.arange(bh)[None, :] * stride[0]  # (kh, bh)
    cols = np.arange(kw)[:, None] * dilation[1] + np.arange(bw)[None, :] * stride[1]  # (kw, bw)
    flat = rows[:, None, :, None] * padded[1] + cols[None, :, None, :]  # (kh, kw, bh, bw)
    return fl.from_numpy(np.ascontiguousarray(flat.reshape(-1), dtype=np.int64)).to(device)


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Extract sliding local blocks (im2col): ``(N, C, H, W) -> (N, C * kh * kw, L)``.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        kernel_size: int or pair, the block size.
        dilation: int or pair, the spacing between the elements of a block.
        padding: int or pair, implicit zeros on both sides of each spatial dimension.
        stride: int or pair, the step between blocks.

    Returns:
        ``(N, C * kh * kw, L)`` (or ``(C * kh * kw, L)``), ``L`` the number of blocks
        ``prod((size + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1)``; rows are
        ordered channel-major then kernel position, as in torch.
    """
    kernel, dilation, padding, stride = _block_params(kernel_size, dilation, padding, stride)
    if input.ndim not in (3, 4) or any(s == 0 for s in input.shape[-3:]):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    batched = input.ndim == 4
    x = input if batched else input.unsqueeze(0)
    n, c, h, w = x.shape
    blocks = _blocks((h, w), kernel, dilation, padding, stride)
    if min(blocks) < 1:
        raise RuntimeError(f"Given input with spatial size {(h, w)}, kernel_size={kernel}, dilation={dilation}, "
                           f"padding={padding}, calculated shape of the array of sliding blocks as {blocks}, but "
                           "its components must be at least one.")
    if padding != (0, 0):
        x = _pad(x, (padding[1], padding[1], padding[0], padding[0]))
    padded = (h + 2 * padding[0], w + 2 * padding[1])
    index = _block_index(padded, kernel, dilation, stride, blocks, str(x.device))
    cols = x.reshape(n, c, padded[0] * padded[1]).index_select(2, index)
    cols = cols.reshape(n, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
    return cols if batched else cols.squeeze(0)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Combine sliding local blocks into a tensor (col2im), summing overlaps: the adjoint of :func:`unfold`.

    Args:
        input: ``(N, C * kh * kw, L)`` or ``(C * kh * kw, L)``.
        output_size: int or pair ``(H, W)`` of the result.
        kernel_size: int or pair, as given to :func:`unfold`.
        dilation: int or pair, as given to :func:`unfold`.
        padding: int or pair, as given to :func:`unfold` (cropped from the result).
        stride: int or pair, as given to :func:`unfold`.

    Returns:
        ``(N, C, H, W)`` (or ``(C, H, W)``).
    """
    size = _ntuple(output_size, 2, "output_size")
    kernel, dilation, padding, stride = _block_params(kernel_size, dilation, padding, stride)
    if input.ndim not in (2, 3) or any(s == 0 for s in input.shape[-2:]):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    batched = input.ndim == 3
    x = input if batched else input.unsqueeze(0)
    kk = kernel[0] * kernel[1]
    if x.shape[1] % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={x.shape[1]} and kernel_size={kernel}.")
    blocks = _blocks(size, kernel, dilation, padding, stride)
    if min(blocks) < 1:
        raise RuntimeError(f"Given output_size={size}, kernel_size={kernel}, dilation={dilation}, padding={padding}, "
                           f"stride={stride}, calculated shape of the array of sliding blocks as {blocks}, but its "
                           "components must be at least one.")
    if blocks[0] * blocks[1] != x.shape[2]:
        raise RuntimeError(f"Given output_size={size}, kernel_size={kernel}, dilation={dilation}, padding={padding}, "
                           f"stride={stride}, expected size of input's dimension 2 to match the calculated number of "
                           f"sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={x.shape[2]}.")
    n, c = x.shape[0], x.shape[1] // kk
    padded = (size[0] + 2 * padding[0], size[1] + 2 * padding[1])
    index = _block_index(padded, kernel, dilation, stride, blocks, str(x.device))
    planes = fl.zeros((n, c, padded[0] * padded[1]), dtype=x.dtype, device=x.device)
    out = planes.index_add(2, index, x.reshape(n, c, kk * x.shape[2])).reshape(n, c, padded[0], padded[1])
    if padding != (0, 0):
        out = out[:, :, padding[0]:padding[0] + size[0], padding[1]:padding[1] + size[1]]
    return out if batched else out.squeeze(0)


# --- conv3d (Note [conv3d as one conv2d]) -------------------------------------------------------------
def _conv3d_params(input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups):
    """torch's checks of conv3d; returns ``(stride, (pad_before, pad_after) per dim, dilation)``."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of size: "
                           f"{list(input.shape)}")
    if weight.ndim != 5:
        raise RuntimeError(f"Expected 5-dimensional weight for 5-dimensional input {list(input.shape)}, but got "
                           f"{weight.ndim}-dimensional weight of size {list(weight.shape)} instead")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"Input type ({input.dtype}) and weight type ({weight.dtype}) should be the same")
    if input.device != weight.device:
        raise RuntimeError(f"Input ({input.device}) and weight ({weight.device}) must be on the same device")

    def triple(v, name):
        if isinstance(v, int) and not isinstance(v, bool):
            return (v,) * 3
        if isinstance(v, (tuple, list)) and len(v) == 1:
            return (int(v[0]),) * 3
        if isinstance(v, (tuple, list)) and len(v) == 3:
            return tuple(int(e) for e in v)
        raise RuntimeError(f"expected {name} to be a single integer value or a list of 3 values to match the "
                           f"convolution dimensions, but got {name}={list(v) if isinstance(v, (tuple, list)) else v}")

    stride, dilation = triple(stride, "stride"), triple(dilation, "dilation")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * 3
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            # torch puts the odd extra pad of 'same' after the input
            pads = tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for d, k in zip(dilation, kernel))
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        padding = triple(padding, "padding")
        if min(padding) < 0:
            raise RuntimeError("negative padding is not supported")
        pads = tuple((p, p) for p in padding)
    shape = tuple(input.shape) if input.ndim == 5 else (1, *input.shape)
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size {list(weight.shape)} instead")
    if weight.shape[1] * groups != shape[1]:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(shape)} to have {weight.shape[1] * groups} channels, but got {shape[1]} channels "
                           "instead")
    padded = tuple(n + a + b for n, (a, b) in zip(shape[2:], pads))
    eff = tuple(d * (k - 1) + 1 for d, k in zip(dilation, kernel))
    if any(e > p for e, p in zip(eff, padded)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, eff))}). Kernel size can't be greater than actual input size")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
                           f"{weight.shape[0]} elements, but got bias of size {list(bias.shape)} instead")
    return stride, pads, dilation


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """3-D convolution (cross-correlation, as in torch) over ``input`` ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``.

    Computed as one :func:`conv2d` over the gathered depth taps (Note [conv3d as one conv2d] in
    this module), so it runs on every device and dtype that ``conv2d`` does.

    Args:
        input: float tensor ``(N, C_in, D, H, W)`` or unbatched ``(C_in, D, H, W)``.
        weight: ``(C_out, C_in / groups, kD, kH, kW)``.
        bias: optional ``(C_out,)``.
        stride: int or triple.
        padding: int, triple, ``"valid"`` or ``"same"`` (output size = input size; stride 1 only).
        dilation: int or triple, spacing between kernel taps.
        groups: ``C_in`` and ``C_out`` are split into this many independent groups.

    Returns:
        ``(N, C_out, D_out, H_out, W_out)`` with
        ``D_out = (D + 2 * padding - dilation * (kD - 1) - 1) // stride + 1`` (likewise ``H_out``, ``W_out``).
    """
    stride, pads, dilation = _conv3d_params(input, weight, bias, stride, padding, dilation, groups)
    batched = input.ndim == 5
    x = input if batched else input.unsqueeze(0)
    (pd0, pd1), (ph0, ph1), (pw0, pw1) = pads
    symmetric_hw = ph0 == ph1 and pw0 == pw1
    if pd0 or pd1 or not symmetric_hw:
        hw = (0, 0, 0, 0) if symmetric_hw else (pw0, pw1, ph0, ph1)
        x = _pad(x, (*hw, pd0, pd1))
    hw_padding = (ph0, pw0) if symmetric_hw else (0, 0)
    n, c, depth, h, w = x.shape
    o, cg, kd = weight.shape[0], weight.shape[1], weight.shape[2]
    d_out = (depth - dilation[0] * (kd - 1) - 1) // stride[0] + 1
    taps = (np.arange(d_out)[:, None] * stride[0] + np.arange(kd)[None, :] * dilation[0]).reshape(-1)
    x = x.index_select(2, fl.from_numpy(taps.astype(np.int64)).to(x.device))  # (N, C, D_out * kd, H, W)
    x = x.reshape(n, groups, cg, d_out, kd, h, w).permute(0, 3, 1, 4, 2, 5, 6)
    x = x.reshape(n * d_out, groups * kd * cg, h, w)
    w2 = weight.permute(0, 2, 1, 3, 4).reshape(o, kd * cg, weight.shape[3], weight.shape[4])
    y = fl.conv2d(x, w2, bias, stride[1:], hw_padding, dilation[1:], groups)  # (N * D_out, C_out, H_out, W_out)
    y = y.reshape(n, d_out, o, y.shape[2], y.shape[3]).permute(0, 2, 1, 3, 4).contiguous()
    return y if batched else y.squeeze(0)
