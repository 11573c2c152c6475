"""nn.functional: adaptive 3-D pooling, ``lp_pool3d`` and fractional max pooling.

All are composites (Note [Window maxima as one gather]): no kernels of their own.

Note [Window maxima as one gather]
The windows of adaptive and fractional max pooling are known before the values are read (they depend
only on the sizes and, for fractional pooling, the random samples). Their flat positions are computed
with numpy as an index ``(N, C, outputs, taps)`` (windows shorter than the longest repeat their first
tap, which leaves the maximum unchanged), the input is gathered once and reduced with ``max`` over the
taps. The gradient is the gather's (to the argmax, as torch's) and the returned indices are the flat
positions of the maxima in each plane, as torch's.
"""

from __future__ import annotations

import math

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.pooling import _triple, avg_pool3d, max_pool3d

__all__ = ["adaptive_avg_pool3d", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "lp_pool3d",
           "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d_with_indices"]


def _tuple(value, n: int, name: str) -> tuple:
    """An int, float or None repeated ``n`` times, or a sequence of ``n`` of them (torch's ``_ntuple``)."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return tuple(value) * n
        if len(value) != n:
            raise ValueError(f"{name} must be a single value or a tuple of {n} values, but got {list(value)}")
        return tuple(value)
    return (value,) * n


def _batched(input: Tensor, dims: int, name: str) -> Tensor:
    if input.ndim not in (dims + 1, dims + 2) or any(n == 0 for n in input.shape[-dims:]):
        raise RuntimeError(f"{name}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: {list(input.shape)}")
    return input if input.ndim == dims + 2 else input.unsqueeze(0)


def _adaptive_sizes(input: Tensor, output_size, dims: int) -> tuple:
    sizes = _tuple(output_size, dims, "output_size")
    return tuple(int(input.shape[-dims + i]) if s is None else int(s) for i, s in enumerate(sizes))


def _adaptive_bounds(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive windows: ``[floor(i * size / out), ceil((i + 1) * size / out))``."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _window_max(x: Tensor, flat: np.ndarray) -> tuple[Tensor, Tensor]:
    """Max over the taps of ``flat`` ``(N or 1, C or 1, outputs, taps)`` positions in ``x``'s planes (Note above)."""
    n, c = x.shape[:2]
    flat = np.broadcast_to(flat, (n, c, *flat.shape[2:]))
    index = fl.from_numpy(np.ascontiguousarray(flat).astype(np.int64)).to(x.device)
    taps = x.reshape(n, c, -1).gather(2, index.reshape(n, c, -1)).reshape(index.shape)
    values, arg = taps.max(3)
    return values, index.gather(3, arg.unsqueeze(3)).squeeze(3)


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """3-D adaptive average pooling of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` to ``output_size``.

    ``output_size`` is an int or a triple (``None`` keeps that input size). Each output averages the
    window ``[floor(i * D / D_out), ceil((i + 1) * D / D_out))`` (likewise H, W), as torch.
    """
    x = _batched(input, 3, "adaptive_avg_pool3d")
    y = x
    for axis, out in zip((2, 3, 4), _adaptive_sizes(input, output_size, 3)):
        start, end = _adaptive_bounds(x.shape[axis], out)
        weights = np.zeros((out, x.shape[axis]))
        for i, (a, b) in enumerate(zip(start, end)):
            weights[i, a:b] = 1.0 / (b - a)
        mat = fl.from_numpy(weights).to(device=x.device, dtype=x.dtype)
        y = (y.movedim(axis, -1) @ mat.t()).movedim(-1, axis)
    return y if input.ndim == 5 else y.squeeze(0)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """:func:`adaptive_max_pool3d` returning ``(values, indices)``; indices are flat ``(d * H + h) * W + w``."""
    x = _batched(input, 3, "adaptive_max_pool3d")
    sizes = tuple(x.shape[2:])
    outs = _adaptive_sizes(input, output_size, 3)
    axes = []
    for size, out in zip(sizes, outs):
        start, end = _adaptive_bounds(size, out)
        width = int((end - start).max())
        pos = start[:, None] + np.arange(width)[None, :]
        axes.append(np.where(pos < end[:, None], pos, start[:, None]))  # (out, taps), short windows repeat
    d, h, w = axes
    flat = ((d[:, None, None, :, None, None] * sizes[1] + h[None, :, None, None, :, None]) * sizes[2]
            + w[None, None, :, None, None, :])
    values, indices = _window_max(x, flat.reshape(1, 1, math.prod(outs), -1))
    values, indices = values.reshape(*x.shape[:2], *outs), indices.reshape(*x.shape[:2], *outs)
    return (values, indices) if input.ndim == 5 else (values.squeeze(0), indices.squeeze(0))


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """3-D adaptive max pooling of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` to ``output_size`` (int or triple).

    Returns the values, and the int64 flat indices ``(d * H + h) * W + w`` too with ``return_indices``.
    """
    values, indices = adaptive_max_pool3d_with_indices(input, output_size)
    return (values, indices) if return_indices else values


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling ``(sum over window of x^p)^(1/p)`` over ``(N, C, D, H, W)`` or ``(C, D, H, W)``.

    ``norm_type`` ``inf`` is max pooling of ``|x|`` (``-inf``: min pooling), as torch.
    """
    kd, kh, kw = _triple(kernel_size, "lp_pool3d: kernel_size must be a single int, or a tuple of three ints")
    if norm_type == math.inf:
        return max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kd * kh * kw).pow(1.0 / norm_type)


# --- fractional max pooling (Graham, 2014) ---------------------------------------------------------------
def _intervals(samples: np.ndarray, size: int, out: int, pool: int) -> np.ndarray:
    """torch's generate_intervals, in the samples' dtype: the window starts ``(N, C, out)``."""
    dtype = samples.dtype.type
    starts = np.empty((*samples.shape, out), dtype=np.int64)
    if out > 1:
        alpha = dtype(size - pool) / dtype(out - 1)
        i = np.arange(out - 1).astype(samples.dtype)
        starts[..., :-1] = ((i + samples[..., None]) * alpha).astype(np.int64) \
            - (samples[..., None] * alpha).astype(np.int64)
    starts[..., -1] = size - pool
    return starts


def _fractional(input: Tensor, kernel_size, output_size, output_ratio, samples, dims: int):
    name = f"fractional_max_pool{dims}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    kernel = _tuple(kernel_size, dims, "kernel_size")
    if output_size is None:
        ratio = _tuple(output_ratio, dims, "output_ratio")
        output_size = [int(input.shape[-dims + i] * ratio[i]) for i in range(dims)]
    outs = _tuple(output_size, dims, "output_size")
    x = _batched(input, dims, name)
    n, c = x.shape[:2]
    sizes = tuple(x.shape[2:])
    for axis, size, out, pool in zip("THW"[3 - dims:], sizes, outs, kernel):
        if out + pool - 1 > size:
            raise RuntimeError(f"{name}(): pool size {pool} too large relative to input size {size} along {axis} "
                               f"(output size {out})")
    if samples is None:
        samples = fl.rand(n, c, dims, dtype=x.dtype, device=x.device)
    if tuple(samples.shape) != (n, c, dims):
        raise RuntimeError(f"{name}(): expected _random_samples of shape ({n}, {c}, {dims}), but got "
                           f"{list(samples.shape)}")
    drawn = samples.detach().cpu().numpy()
    # torch's sample order: the 2-D kernel reads sample 0 for the width and 1 for the height; 3-D: T, H, W
    order = (1, 0) if dims == 2 else (0, 1, 2)
    flat = np.zeros((n, c, *outs, *kernel), dtype=np.int64)
    for axis in range(dims):
        starts = _intervals(drawn[..., order[axis]], sizes[axis], outs[axis], kernel[axis])  # (N, C, out)
        pos = starts[..., :, None] + np.arange(kernel[axis])  # (N, C, out, pool)
        shape = [n, c] + [1] * (2 * dims)
        shape[2 + axis], shape[2 + dims + axis] = outs[axis], kernel[axis]
        flat = flat * sizes[axis] + pos.reshape(shape)
    values, indices = _window_max(x, flat.reshape(n, c, math.prod(outs), -1))
    values, indices = values.reshape(n, c, *outs), indices.reshape(n, c, *outs)
    return (values, indices) if input.ndim == dims + 2 else (values.squeeze(0), indices.squeeze(0))


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None):
    """:func:`fractional_max_pool2d` returning ``(values, indices)`` (flat ``h * W + w`` per plane)."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Fractional max pooling (Graham, 2014) over ``(N, C, H, W)`` or ``(C, H, W)``.

    Args:
        input: the input.
        kernel_size: int or pair, the window.
        output_size: int or pair: the output size; or give ``output_ratio``.
        output_ratio: float or pair in ``(0, 1)``: the output size as a ratio of the input's.
        return_indices: also return the flat ``h * W + w`` positions of the maxima.
        _random_samples: ``(N, C, 2)`` samples in ``[0, 1)`` placing the windows (drawn from flambeau's
            generator with :func:`flambeau.rand` when omitted); torch reads sample 0 for the width and
            1 for the height.
    """
    values, indices = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)
    return (values, indices) if return_indices else values


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None):
    """:func:`fractional_max_pool3d` returning ``(values, indices)`` (flat ``(t * H + h) * W + w``)."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Fractional max pooling over ``(N, C, T, H, W)`` or ``(C, T, H, W)``; ``_random_samples`` ``(N, C, 3)``.

    The arguments are :func:`fractional_max_pool2d`'s, with triples.
    """
    values, indices = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)
    return (values, indices) if return_indices else values
