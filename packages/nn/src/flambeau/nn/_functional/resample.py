"""nn.functional: resampling (interpolate, upsample, pixel_shuffle, pixel_unshuffle), as torch.

Nearest and (bi)linear resampling are tensor-core operators; ``"area"`` is adaptive average
pooling, as in torch; ``"bicubic"`` is a composite (Note [Bicubic as two gathers]).

Note [Bicubic as two gathers]: torch's bicubic output is ``sum_ij wy[i] * wx[j] * x[y0 - 1 + i, x0 - 1 + j]``
with Keys' cubic convolution weights (``A = -0.75``) and source indices clamped to the border. The
weights factor by axis, so the resampling runs along the width then along the height: each pass is
one ``index_select`` of the four taps of every output position, a multiply by their weights and a
sum. The taps and weights depend only on the sizes and the scale, so they are computed once with
numpy; autograd differentiates the gathers (their gradient scatters back with ``index_add``).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.pooling import adaptive_avg_pool1d, adaptive_avg_pool2d
from flambeau.nn._functional.pooling_more import adaptive_avg_pool3d

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle"]

pixel_shuffle = fl.pixel_shuffle
pixel_unshuffle = fl.pixel_unshuffle

_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")
_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                recompute_scale_factor=None, antialias: bool = False) -> Tensor:
    """Resize ``input`` ``(N, C, W)`` or ``(N, C, H, W)`` to ``size`` or by ``scale_factor``.

    Args:
        input: floating tensor, 3-D for ``'nearest'``/``'linear'``/``'area'``, 4-D for
            ``'nearest'``/``'bilinear'``/``'bicubic'``/``'area'``.
        size: output spatial size (an int or one int per spatial dim); exclusive with ``scale_factor``.
        scale_factor: multiplier(s) of the spatial sizes; the output size is ``floor(in * scale)``.
        mode: ``'nearest'``, ``'linear'`` (3-D), ``'bilinear'`` (4-D), ``'bicubic'`` (4-D: Keys' cubic
            convolution with ``A = -0.75`` over 4 x 4 taps, borders replicated, as torch) or ``'area'``
            (adaptive average pooling to the output size).
        align_corners: for the interpolating modes: align the corner pixels' centres (default False);
            must be None for ``'nearest'`` and ``'area'``.
        recompute_scale_factor: if True, the kernels use ``in / out`` instead of the given
            ``scale_factor`` in their source-index formula (torch's option of the same name).
        antialias: with ``'bilinear'`` or ``'bicubic'`` on 4-D inputs, low-pass filter as it downsamples (Note
            [Antialiased resampling]).

    Returns:
        the resized tensor, ``input``'s dtype.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate(): argument 'input' must be Tensor, not {type(input).__name__}")
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate(): mode {mode!r} is not one of {', '.join(_MODES)}")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scale_factors = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError("Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(input.shape[2:])} and output size of {size}. "
                                 "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            output_size = [int(s) for s in size]
        else:
            output_size = [int(size)] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError("Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(input.shape[2:])} and scale_factor of "
                                 f"shape {scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                                 "format and scale_factor in (s1, s2, ...,sK) format.")
            scale_factors = [float(s) for s in scale_factor]
        else:
            scale_factors = [float(scale_factor)] * dim
        if not all(math.isfinite(s) for s in scale_factors):
            raise RuntimeError(f"value cannot be converted to type int64 without overflow (scale_factor "
                               f"{scale_factor} is not finite)")
        output_size = [int(math.floor(float(input.shape[i + 2]) * scale_factors[i])) for i in range(dim)]
        if any(n <= 0 for n in output_size):  # (bicubic divided by the scale before the kernels' own check)
            def sizes(values):
                return ", ".join(f"{axis}: {n}" for axis, n in zip("DHW"[3 - dim:], values))

            raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                               f"({sizes(input.shape[2:])}) output ({sizes(output_size)})")
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor:
        scale_factors = None
    if antialias and not (mode in ("bilinear", "bicubic") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor as "
                         "input")
    scales = scale_factors if scale_factors is not None else [None] * max(dim, 0)
    if not input.dtype.is_floating_point:  # Note [Integer images]
        if mode in ("nearest", "nearest-exact") and input.ndim in (3, 4, 5):
            return _separable(input, output_size, mode, False, scales)
        if mode == "bilinear" and input.dtype is fl.uint8 and input.ndim == 4:
            out = interpolate(input.float(), size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
            return out.round().clamp(0, 255).to(fl.uint8)
        if mode == "bicubic" and input.dtype is fl.uint8 and input.ndim == 4:  # rows first, stored as uint8 between
            def bicubic(x, out_size, pass_scales):
                if antialias:
                    return _antialiased(x, out_size, mode, bool(align_corners), pass_scales)
                return _bicubic(x, out_size, align_corners, pass_scales)

            rows = bicubic(input.float(), (input.shape[2], output_size[1]), [None, scales[1]]).round().clamp(0, 255)
            return bicubic(rows, tuple(output_size), [scales[0], None]).round().clamp(0, 255).to(fl.uint8)
    if antialias:
        return _antialiased(input, output_size, mode, bool(align_corners), scales)
    if input.ndim == 3 and mode == "nearest":
        return fl.upsample_nearest1d(input, output_size, scales[0])
    if input.ndim == 4 and mode == "nearest":
        return fl.upsample_nearest2d(input, output_size, scales[0], scales[1])
    if input.ndim == 3 and mode == "linear":
        return fl.upsample_linear1d(input, output_size, align_corners, scales[0])
    if input.ndim == 4 and mode == "bilinear":
        return fl.upsample_bilinear2d(input, output_size, align_corners, scales[0], scales[1])
    if input.ndim == 4 and mode == "bicubic":
        return _bicubic(input, output_size, align_corners, scales)
    if input.ndim == 3 and mode == "area":
        return adaptive_avg_pool1d(input, output_size)
    if input.ndim == 4 and mode == "area":
        return adaptive_avg_pool2d(input, output_size)
    if input.ndim == 5 and mode == "area":
        return adaptive_avg_pool3d(input, output_size)
    if (input.ndim == 5 and mode in ("nearest", "trilinear")) or (input.ndim in (3, 4, 5) and mode == "nearest-exact"):
        return _separable(input, output_size, mode, bool(align_corners), scales)
    need = {"linear": "3D", "bilinear": "4D", "trilinear": "5D"}.get(mode)
    if input.ndim in (3, 4, 5) and need is not None:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {need} input")
    raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the "
                              f"modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
                              f"(got {mode})")


# Note [Integer images]: torch resamples integer tensors (uint8 images, label maps) with the nearest modes, and
# uint8 images bilinearly and bicubically. The nearest modes only gather, so any dtype takes the separable path as it
# is (exactly torch's result); bilinear uint8 resamples in float32 and rounds, where torch's uint8 kernels compute in
# fixed point: a value may differ from torch's by 1. Bicubic uint8 does the same in two passes, the rows (width)
# first and then the columns, rounded and clamped to [0, 255] in between as torch's kernels store the first pass in
# uint8: a bicubic overshoot is clipped before the second pass (one pass in float differed from torch's by up to 17).
# Note [Separable resampling]: trilinear, nearest in 5-D and nearest-exact resample one spatial dim at a time, as
# bicubic does (Note [Bicubic as two gathers]): each pass is one ``index_select`` of every output position's source
# taps along that dim (one for the nearest modes, two for linear) and, for linear, a sum weighted by the taps'
# weights. Taps and weights follow torch's CPU kernels: the scale as float32 (the float dtypes' arithmetic there),
# ``floor(dst * scale)`` for nearest, ``floor((dst + 0.5) * scale)`` for nearest-exact, both clamped to the last
# position, and for linear the source ``scale * (dst + 0.5) - 0.5`` clamped at 0 (``scale * dst`` with
# align_corners) between its floor and the next position. Autograd differentiates the gathers.
def _taps(mode: str, in_size: int, out_size: int, align_corners: bool, scale, acc) -> tuple[np.ndarray,
                                                                                             np.ndarray | None]:
    """``(index, weight)`` of one dim (Note [Separable resampling]): ``(out_size, taps)`` int64 and float64 arrays
    (``weight`` None for the nearest modes); ``acc``: the numpy type of torch's arithmetic for the linear modes."""
    acc = np.float32 if mode != "trilinear" else acc  # (torch's nearest modes compute in float32 for every dtype)
    dst = np.arange(out_size, dtype=acc)
    if mode == "trilinear" and align_corners:
        ratio = acc((in_size - 1) / (out_size - 1)) if out_size > 1 else acc(0)
    else:
        ratio = acc(1.0 / scale) if scale is not None and scale > 0 else acc(in_size) / acc(out_size)
    if mode != "trilinear":
        src = np.floor((dst + acc(0.5)) * ratio if mode == "nearest-exact" else dst * ratio)
        return np.minimum(src.astype(np.int64), in_size - 1)[:, None], None
    src = ratio * dst if align_corners else np.maximum(ratio * (dst + acc(0.5)) - acc(0.5), 0)
    low = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    high = np.minimum(low + 1, in_size - 1)
    frac = (src - low).astype(np.float64)
    return np.stack([low, high], 1), np.stack([1 - frac, frac], 1)


def _separable(input: Tensor, size, mode: str, align_corners: bool, scales) -> Tensor:
    """Resampling of ``(N, C, *spatial)`` one spatial dim at a time (Note [Separable resampling])."""
    if mode == "trilinear" and not input.dtype.is_floating_point:
        raise NotImplementedError(f'"upsample_trilinear3d_out_frame" not implemented for \'{input.dtype}\'')
    spatial = tuple(input.shape[2:])
    if min(spatial) < 1 or min(size) < 1:
        names = "DHW"[3 - len(spatial):]
        sizes = [", ".join(f"{n}: {v}" for n, v in zip(names, dims)) for dims in (spatial, size)]
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({sizes[0]}) output "
                           f"({sizes[1]})")
    acc = np.float64 if input.dtype is fl.float64 else np.float32
    x = input
    for d in range(input.ndim - 1, 1, -1):
        x = _resample_dim(x, d, *_taps(mode, x.shape[d], size[d - 2], align_corners, scales[d - 2], acc))
    return x


def _resample_dim(x: Tensor, d: int, index: np.ndarray, weight: np.ndarray | None) -> Tensor:
    """``x`` resampled along dim ``d``: output ``o`` is the ``weight[o]``-weighted sum of the inputs at ``index[o]``
    (``(out, taps)`` arrays; ``weight`` None: one tap, taken as it is), by one ``index_select`` and a sum."""
    out, k = index.shape
    taps = x.index_select(d, fl.from_numpy(index.reshape(-1)).to(x.device))
    if weight is None:
        return taps
    taps = taps.reshape(*taps.shape[:d], out, k, *taps.shape[d + 1:])
    w = fl.from_numpy(weight).to(device=x.device, dtype=x.dtype).reshape(out, k, *(1,) * (x.ndim - 1 - d))
    return (taps * w).sum(d + 1)


def _cubic_taps(in_size: int, out_size: int, align_corners: bool, scale) -> tuple[np.ndarray, np.ndarray]:
    """``(index, weight)``, each ``(out_size, 4)``: the clamped source taps of each output and their weights."""
    dst = np.arange(out_size, dtype=np.float64)
    if align_corners:
        src = dst * ((in_size - 1) / (out_size - 1) if out_size > 1 else 0.0)
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else in_size / out_size
        src = ratio * (dst + 0.5) - 0.5  # not clamped at 0, unlike the linear modes
    base = np.floor(src)
    t = src - base
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weight = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)
    index = np.clip(base.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :], 0, in_size - 1)
    return index, weight


def _bicubic(input: Tensor, size, align_corners: bool, scales) -> Tensor:
    """Bicubic resampling of ``(N, C, H, W)`` (Note [Bicubic as two gathers])."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"compute_indices_weights_cubic" not implemented for \'{input.dtype}\'')
    x = input
    for dim, out, scale in ((3, size[1], scales[1]), (2, size[0], scales[0])):
        index, weight = _cubic_taps(x.shape[dim], out, align_corners, scale)
        x = _resample_dim(x, dim, index, weight)
    return x


# Note [Antialiased resampling]: with antialias=True torch resamples as PIL does: each output position ``i`` of a
# dim averages the inputs within ``support`` of its centre ``scale * (i + 0.5)``, weighted by the mode's filter
# (a triangle for bilinear, Keys' cubic with ``a = -0.5`` for bicubic) stretched by the scale when downsampling
# (``support`` is the filter's half-width times the scale then), the weights normalised to sum to 1. Each dim is
# then a gather of every output's taps and a weighted sum, as in Note [Separable resampling], with torch's
# windows and weights (its float32 arithmetic for float32 inputs, float64 for float64).
def _aa_filter(mode: str, x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    if mode == "bilinear":
        return np.maximum(0.0, 1.0 - x)
    a = -0.5
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _aa_taps(mode: str, in_size: int, out_size: int, align_corners: bool, scale, acc) -> tuple[np.ndarray, np.ndarray]:
    """``(index, weight)``, each ``(out_size, taps)``, of one dim (Note [Antialiased resampling]); taps past an
    output's window have weight 0 (and index 0)."""
    if align_corners:
        ratio = acc((in_size - 1) / (out_size - 1)) if out_size > 1 else acc(0)
    else:
        ratio = acc(1.0 / scale) if scale is not None and scale > 0 else acc(in_size) / acc(out_size)
    half = acc(1.0 if mode == "bilinear" else 2.0)  # half the filter's width
    support = half * ratio if ratio >= 1.0 else half
    invscale = acc(1.0) / ratio if ratio >= 1.0 else acc(1.0)
    centre = ratio * (np.arange(out_size, dtype=acc) + acc(0.5))
    lo = np.maximum((centre - support + acc(0.5)).astype(np.int64), 0)
    size = np.minimum((centre + support + acc(0.5)).astype(np.int64), in_size) - lo
    taps = int(size.max()) if out_size else 0
    j = np.arange(taps)
    weight = _aa_filter(mode, ((j[None, :] + lo[:, None] - centre[:, None] + acc(0.5)) * invscale).astype(acc))
    weight = np.where(j[None, :] < size[:, None], weight, 0).astype(np.float64)
    total = weight.sum(1, keepdims=True)
    weight = np.divide(weight, total, out=np.zeros_like(weight), where=total != 0)
    index = np.where(j[None, :] < size[:, None], lo[:, None] + j[None, :], 0)
    return index, weight


def _antialiased(input: Tensor, size, mode: str, align_corners: bool, scales) -> Tensor:
    """Antialiased bilinear or bicubic resampling of ``(N, C, H, W)`` (Note [Antialiased resampling])."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"upsample_{mode}2d_aa" not implemented for \'{input.dtype}\'')
    acc = np.float64 if input.dtype is fl.float64 else np.float32
    x = input
    for d in (3, 2):
        x = _resample_dim(x, d, *_aa_taps(mode, x.shape[d], size[d - 2], align_corners, scales[d - 2], acc))
    return x


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None) -> Tensor:
    """Deprecated alias of :func:`interpolate` (warns, as torch does)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode='nearest')``."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode='bilinear', align_corners=True)``."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
