"""nn.functional: pooling (max, average, adaptive; 1-D, 2-D and 3-D), ``lp_pool`` and max unpooling.

The 1-D and 2-D poolings are tensor-core's operators (``flambeau.max_pool2d`` ...) under torch's
``nn.functional`` names and signatures; ``return_indices`` gives torch's flat per-plane indices.

Note [3-D pooling as 2-D pooling then a depth reduction]: a pooling window is a box, and both max
and sum reduce a box one axis after another. ``max_pool3d``/``avg_pool3d`` therefore pool the
``(H, W)`` planes of all ``C * D`` depth slices with the fused 2-D operator, then reduce the depth:
the pooled planes are padded along the depth (``-inf`` or 0), the ``kD`` taps of every output depth
gathered by one ``index_select``, and reduced with ``max(dim)`` / ``sum``. Max keeps torch's choice
among ties (the first element in ``(d, h, w)`` order: the 2-D operator picks the first in each
plane, ``max(dim)`` the first depth) and routes the gradient to that one element; the average's
divisor is a product of per-axis counts (torch's ``count_include_pad`` rule holds per axis), so
the 2-D operator divides by its part and the depth sum by the rest.
"""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.basic import pad as _pad

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool1d_with_indices",
           "adaptive_max_pool2d_with_indices", "lp_pool1d", "lp_pool2d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d"]

max_pool1d = fl.max_pool1d
max_pool2d = fl.max_pool2d
max_pool1d_with_indices = fl.max_pool1d_with_indices
max_pool2d_with_indices = fl.max_pool2d_with_indices
avg_pool1d = fl.avg_pool1d
avg_pool2d = fl.avg_pool2d
adaptive_avg_pool1d = fl.adaptive_avg_pool1d
adaptive_avg_pool2d = fl.adaptive_avg_pool2d
adaptive_max_pool1d = fl.adaptive_max_pool1d
adaptive_max_pool2d = fl.adaptive_max_pool2d


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """:func:`adaptive_max_pool1d` returning ``(values, indices)``."""
    return fl.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """:func:`adaptive_max_pool2d` returning ``(values, indices)``."""
    return fl.adaptive_max_pool2d(input, output_size, True)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling ``(sum over window of x^p)^(1/p)`` over ``(N, C, L)``.

    Args:
        input: ``(N, C, L)`` or ``(C, L)``.
        norm_type: the power ``p``.
        kernel_size: window length.
        stride: defaults to ``kernel_size``.
        ceil_mode: round the output length up.

    Returns:
        ``(N, C, L_out)``.
    """
    k = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    out = fl.avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(k).pow(1.0 / norm_type)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling ``(sum over window of x^p)^(1/p)`` over ``(N, C, H, W)``.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        norm_type: the power ``p``.
        kernel_size: int or pair.
        stride: defaults to ``kernel_size``.
        ceil_mode: round output sizes up.

    Returns:
        ``(N, C, H_out, W_out)``.
    """
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    out = fl.avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kh * kw).pow(1.0 / norm_type)


# --- 3-D pooling (Note [3-D pooling as 2-D pooling then a depth reduction]) ---------------------------
def _triple(value, what: str) -> tuple:
    """An int or a 1- or 3-sequence as a triple; otherwise RuntimeError ``what`` (torch's message)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * 3
    if isinstance(value, (tuple, list)) and len(value) in (1, 3):
        return tuple(int(v) for v in value) * (3 // len(value))
    raise RuntimeError(what)


def _pool3d_args(op: str, input: Tensor, kernel_size, stride, padding, dilation):
    """torch's argument checks of the 3-D poolings; returns the batched input and the triples."""
    either = "either be" if op == "max_pool3d" else "be"
    k = _triple(kernel_size, f"{op}: kernel_size must {either} a single int, or a tuple of three ints")
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        s = k
    else:
        s = _triple(stride, f"{op}: stride must {either} omitted, a single int, or a tuple of three ints")
    p = _triple(padding, f"{op}: padding must {either} a single int, or a tuple of three ints")
    d = _triple(dilation, f"{op}: dilation must be either a single int, or a tuple of three ints")
    if min(s) == 0:
        raise RuntimeError("stride should not be zero")
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} kH: {k[1]} kW: {k[2]}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} dilationH: {d[1]} "
                           f"dilationW: {d[2]}")
    for kk, pp, dd in zip(k, p, d):
        if pp > ((kk - 1) * dd + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pp}, "
                               f"kernel_size={kk} and dilation={dd}")
    if input.ndim not in (4, 5) or any(n == 0 for n in input.shape[-4:]):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    return (input if input.ndim == 5 else input.unsqueeze(0)), k, s, p, d


def _pool_out(size: int, k: int, p: int, s: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape: a window must start inside the input or its left padding."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _depth_windows(x: Tensor, k: int, s: int, p: int, d: int, out: int, fill: float) -> Tensor:
    """``(N, C, D, *)`` to ``(N, C, out, k, *)``: the ``k`` depth taps of each output depth, ``fill`` outside."""
    depth = x.shape[2]
    right = max((out - 1) * s + d * (k - 1) + 1 - depth - p, 0)
    if p or right:
        x = _pad(x, (0, 0, 0, 0, p, right), value=fill)
    taps = (np.arange(out)[:, None] * s + np.arange(k)[None, :] * d).reshape(-1)
    x = x.index_select(2, fl.from_numpy(taps.astype(np.int64)).to(x.device))
    return x.reshape(x.shape[0], x.shape[1], out, k, *x.shape[3:])


def _max_pool3d(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool, with_indices: bool):
    x, k, s, p, d = _pool3d_args("max_pool3d", input, kernel_size, stride, padding, dilation)
    n, c, depth, h, w = x.shape
    out = [_pool_out(size, *a, ceil_mode) for size, a in zip((depth, h, w), zip(k, p, s, d))]
    if min(out) < 1:
        raise RuntimeError(f"Given input size: ({c}x{depth}x{h}x{w}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")
    planes = x.reshape(n, c * depth, h, w)
    if with_indices:
        planes, plane_idx = fl.max_pool2d_with_indices(planes, k[1:], s[1:], p[1:], d[1:], ceil_mode)
    else:
        planes = fl.max_pool2d(planes, k[1:], s[1:], p[1:], d[1:], ceil_mode)
    planes = planes.reshape(n, c, depth, out[1], out[2])
    values, tap = _depth_windows(planes, k[0], s[0], p[0], d[0], out[0], float("-inf")).max(3)
    batched = input.ndim == 5
    if not with_indices:
        return values if batched else values.squeeze(0)
    starts = fl.arange(out[0], device=x.device).mul_(s[0]).sub_(p[0]).reshape(1, 1, -1, 1, 1)
    # A window of -inf only picks its first tap, maybe padding: torch's index is then the first real slice.
    depth_idx = (starts + tap * d[0]).clamp_(0, depth - 1)
    indices = depth_idx * (h * w) + plane_idx.reshape(n, c, depth, out[1], out[2]).gather(2, depth_idx)
    return (values, indices) if batched else (values.squeeze(0), indices.squeeze(0))


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):
    """:func:`max_pool3d` returning ``(values, indices)``; indices are flat per-volume ``(d * H + h) * W + w``."""
    return _max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """3-D max pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``.

    Runs the 2-D operator over the ``(H, W)`` planes then a maximum over the depth taps (Note
    [3-D pooling as 2-D pooling then a depth reduction]); values, indices and gradients are torch's.

    Args:
        input: ``(N, C, D, H, W)`` or ``(C, D, H, W)``.
        kernel_size: int or triple, the window.
        stride: int or triple; defaults to ``kernel_size``.
        padding: implicit ``-inf`` padding on both sides (at most half the effective kernel size).
        dilation: int or triple, spacing between window elements.
        ceil_mode: round output sizes up (a window must start inside the input or its left padding).
        return_indices: also return the flat positions ``(d * H + h) * W + w`` of the maxima.

    Returns:
        ``(N, C, D_out, H_out, W_out)`` with ``D_out = (D + 2 * padding - dilation * (kD - 1) - 1) // stride + 1``
        (likewise the others), and the int64 indices of that shape with ``return_indices``.
    """
    return _max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """3-D average pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``.

    Runs the 2-D operator over the ``(H, W)`` planes then a sum over the depth taps (Note [3-D
    pooling as 2-D pooling then a depth reduction]).

    Args:
        input: ``(N, C, D, H, W)`` or ``(C, D, H, W)``.
        kernel_size: int or triple, the window.
        stride: int or triple; defaults to ``kernel_size``.
        padding: implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: round output sizes up.
        count_include_pad: count the zero padding in the divisor.
        divisor_override: if given, divide every window's sum by it instead.

    Returns:
        ``(N, C, D_out, H_out, W_out)`` (or without ``N``), ``input``'s dtype.
    """
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x, k, s, p, _ = _pool3d_args("avg_pool3d", input, kernel_size, stride, padding, 1)
    n, c, depth, h, w = x.shape
    if depth < k[0] or h < k[1] or w < k[2]:
        raise RuntimeError(f"input image (T: {depth} H: {h} W: {w}) smaller than kernel size (kT: {k[0]} kH: {k[1]} "
                           f"kW: {k[2]})")
    out = [_pool_out(size, kk, pp, ss, 1, ceil_mode) for size, kk, pp, ss in zip((depth, h, w), k, p, s)]
    if min(out) < 1:
        raise RuntimeError(f"Given input size: ({c}x{depth}x{h}x{w}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")
    planes = fl.avg_pool2d(x.reshape(n, c * depth, h, w), k[1:], s[1:], p[1:], ceil_mode, count_include_pad,
                           divisor_override)
    planes = planes.reshape(n, c, depth, out[1], out[2])
    y = _depth_windows(planes, k[0], s[0], p[0], 1, out[0], 0.0).sum(3)
    if divisor_override is None:
        start = np.arange(out[0]) * s[0] - p[0]
        end = np.minimum(start + k[0], depth + p[0])
        count = end - start if count_include_pad else np.minimum(end, depth) - np.maximum(start, 0)
        count = np.maximum(count, 1).astype(np.float64)  # a window of padding only sums to 0, as torch's
        y = y / fl.from_numpy(count).to(device=y.device, dtype=y.dtype).reshape(-1, 1, 1)
    return y if input.ndim == 5 else y.squeeze(0)


# --- max unpooling -----------------------------------------------------------------------------------------
def _unpool_output_size(input: Tensor, kernel_size: tuple, stride: tuple, padding: tuple, output_size) -> list:
    n = len(kernel_size)
    default = [(input.shape[input.ndim - n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d] for d in range(n)]
    if output_size is None:
        return default
    output_size = list(output_size)
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a length "
                         f"of '{len(output_size)}'")
    for d in range(n):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {d} must be between {lo} and {hi})')
    return [int(v) for v in output_size]


def _max_unpool(input: Tensor, indices: Tensor, kernel_size, stride, padding, output_size, n: int) -> Tensor:
    def ntuple(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n

    kernel_size = ntuple(kernel_size)
    stride = kernel_size if stride is None else ntuple(stride)
    padding = ntuple(padding)
    size = _unpool_output_size(input, kernel_size, stride, padding, output_size)
    # torch runs 1-D unpooling as 2-D with a trailing dimension of 1, and says so in its messages
    dims, name = (2, "max_unpooling2d") if n == 1 else (n, f"max_unpooling{n}d")
    ndim = input.ndim + (1 if n == 1 else 0)
    if ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"Input to {name} should be a {dims + 1}d or {dims + 2}d Tensor, but got a tensor with "
                           f"{ndim} dimensions.")
    if indices.dtype != fl.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype.scalar_name}")
    if indices.shape != input.shape:
        shape = list(input.shape) + ([1] if n == 1 else [])
        ishape = list(indices.shape) + ([1] if n == 1 else [])
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({shape}) but got "
                           f"indices tensor with shape: {ishape}")
    volume = int(np.prod(size))
    if indices.numel():
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= volume:
            sizes = "x".join(str(v) for v in (size + [1] if n == 1 else size))
            raise RuntimeError(f"Found an invalid max index: {lo if lo < 0 else hi} (output volumes are of size "
                               f"{sizes})")
    batched = input.ndim == n + 2
    x, idx = (input, indices) if batched else (input.unsqueeze(0), indices.unsqueeze(0))
    b, c = x.shape[0], x.shape[1]
    out = fl.zeros((b, c, volume), dtype=x.dtype, device=x.device)
    out = out.scatter(2, idx.reshape(b, c, -1), x.reshape(b, c, -1)).reshape(b, c, *size)
    return out if batched else out.squeeze(0)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """Partial inverse of :func:`max_pool1d`: each value goes to its index, the rest is zero.

    Args:
        input: ``(N, C, L_in)`` or ``(C, L_in)``.
        indices: int64 of ``input``'s shape, as returned by ``max_pool1d(..., return_indices=True)``.
        kernel_size: int or 1-tuple, as given to the pooling.
        stride: defaults to ``kernel_size``.
        padding: as given to the pooling.
        output_size: the output length (or a full shape) when several are possible.

    Returns:
        ``(N, C, L_out)``, ``L_out = (L_in - 1) * stride - 2 * padding + kernel_size`` unless ``output_size``.
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """Partial inverse of :func:`max_pool2d`: each value goes to its flat index ``h * W_out + w``, the rest is zero.

    Args:
        input: ``(N, C, H_in, W_in)`` or ``(C, H_in, W_in)``.
        indices: int64 of ``input``'s shape, as returned by ``max_pool2d(..., return_indices=True)``.
        kernel_size: int or pair, as given to the pooling.
        stride: defaults to ``kernel_size``.
        padding: as given to the pooling.
        output_size: ``(H_out, W_out)`` (or a full shape) when several are possible.

    Returns:
        ``(N, C, H_out, W_out)``, ``H_out = (H_in - 1) * stride - 2 * padding + kernel_size`` unless ``output_size``.
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """Partial inverse of :func:`max_pool3d`: each value goes to its flat index, the rest is zero.

    Args:
        input: ``(N, C, D_in, H_in, W_in)`` or ``(C, D_in, H_in, W_in)``.
        indices: int64 of ``input``'s shape, as returned by ``max_pool3d(..., return_indices=True)``.
        kernel_size: int or triple, as given to the pooling.
        stride: defaults to ``kernel_size``.
        padding: as given to the pooling.
        output_size: ``(D_out, H_out, W_out)`` (or a full shape) when several are possible.

    Returns:
        ``(N, C, D_out, H_out, W_out)``, ``D_out = (D_in - 1) * stride - 2 * padding + kernel_size`` (likewise
        the others) unless ``output_size``.
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)
