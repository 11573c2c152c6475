"""Resampling operators: nearest and (bi)linear upsampling, pixel_shuffle / pixel_unshuffle.

Nearest and linear interpolation are separable: along each resized dimension the output is a
fixed linear map of the input, an ``(out, in)`` matrix with one (nearest) or two (linear) nonzero
weights per row, built from torch's source-index formulas exactly (``nearest_idx``,
``area_pixel_compute_source_index`` with ``align_corners``, user scales or ``in / out``) and
cached. Linear interpolation then is two BLAS matmuls (width, then height: torch's order of
operations), nearest a gather (``np.take``); the backward of both is the transposed matmuls, and
the backward operators' own derivative is the forward operator again (double backward is exact).
pixel_shuffle and pixel_unshuffle are reshape/permute composites.

Kernel convention (every device; arrays in, array out):
    upsample_nearest1d / 2d: ``kernel(x, output_size, scales...) -> array``.
    upsample_linear1d / upsample_bilinear2d: ``kernel(x, output_size, align_corners, scales...)``.
    <op>_backward: ``kernel(grad, output_size, input_size, [align_corners,] scales...) -> array``
        of shape ``input_size``.
``scales`` are the user's scale factors (None: ``in / out`` is used), as in torch.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._ops._common import Tensor, _wrap, check_tensor, record_if_needed
from flambeau._ops._registry import declare

__all__ = ["upsample_nearest1d", "upsample_nearest2d", "upsample_linear1d", "upsample_bilinear2d",
           "pixel_shuffle", "pixel_unshuffle"]

_matmul = np.matmul


def _scale_value(scale, n_in, n_out, dtype):
    """torch's compute_scales_value: ``1 / scale`` if given and positive, else ``in / out``."""
    if scale is not None and scale > 0:
        return dtype(1.0 / scale)
    return dtype(n_in) / dtype(n_out)


@functools.lru_cache(maxsize=256)
def _nearest_index(n_in: int, n_out: int, scale):
    if n_out == n_in:
        return np.arange(n_out)
    if n_out == 2 * n_in:
        return np.arange(n_out) >> 1
    s = _scale_value(scale, n_in, n_out, np.float32)
    return np.minimum(np.floor(np.arange(n_out, dtype=np.float32) * s).astype(np.int64), n_in - 1)


@functools.lru_cache(maxsize=256)
def _nearest_matrix(n_in: int, n_out: int, scale, npdt):
    a = np.zeros((n_out, n_in), npdt)
    a[np.arange(n_out), _nearest_index(n_in, n_out, scale)] = 1
    return a


@functools.lru_cache(maxsize=256)
def _linear_matrix(n_in: int, n_out: int, align_corners: bool, scale, npdt):
    """``(n_out, n_in)`` weights of torch's linear interpolation along one dimension."""
    a = np.zeros((n_out, n_in), npdt)
    rows = np.arange(n_out)
    if n_out == n_in:
        a[rows, rows] = 1
        return a
    t = npdt.type
    if align_corners:
        ratio = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
        src = ratio * np.arange(n_out, dtype=npdt)
    else:
        ratio = _scale_value(scale, n_in, n_out, t)
        src = np.maximum(ratio * (np.arange(n_out, dtype=npdt) + t(0.5)) - t(0.5), t(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    lam1 = np.clip(src - i0.astype(npdt), 0, 1).astype(npdt)
    i1 = i0 + (i0 < n_in - 1)
    np.add.at(a, (rows, i0), (t(1) - lam1).astype(npdt))
    np.add.at(a, (rows, i1), lam1)
    return a


def _compute_dtype(x):
    return x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float32)


def _apply_w(x, a):
    """``x @ a.T`` over the last dim as one GEMM."""
    lead = x.shape[:-1]
    y = _matmul(np.ascontiguousarray(x).reshape(-1, x.shape[-1]), a.T)
    return y.reshape(lead + (a.shape[0],))


def _apply_h(x, a):
    """``a @ x`` over dim -2 (batched over the leading dims)."""
    return _matmul(a, x)


def _k_nearest1d(x, output_size, scales=None):
    return np.take(x, _nearest_index(x.shape[-1], output_size[0], scales), axis=-1)


def _k_nearest2d(x, output_size, scales_h=None, scales_w=None):
    ih = _nearest_index(x.shape[-2], output_size[0], scales_h)
    iw = _nearest_index(x.shape[-1], output_size[1], scales_w)
    return np.take(np.take(x, ih, axis=-2), iw, axis=-1)


def _k_nearest1d_backward(g, output_size, input_size, scales=None):
    cdt = _compute_dtype(g)
    a = _nearest_matrix(input_size[-1], output_size[0], scales, cdt)
    return _apply_w(g.astype(cdt, copy=False), a.T).astype(g.dtype, copy=False)


def _k_nearest2d_backward(g, output_size, input_size, scales_h=None, scales_w=None):
    cdt = _compute_dtype(g)
    ah = _nearest_matrix(input_size[-2], output_size[0], scales_h, cdt)
    aw = _nearest_matrix(input_size[-1], output_size[1], scales_w, cdt)
    y = _apply_h(_apply_w(g.astype(cdt, copy=False), aw.T), ah.T)
    return y.astype(g.dtype, copy=False)


def _k_linear1d(x, output_size, align_corners, scales=None):
    cdt = _compute_dtype(x)
    a = _linear_matrix(x.shape[-1], output_size[0], bool(align_corners), scales, cdt)
    return _apply_w(x.astype(cdt, copy=False), a).astype(x.dtype, copy=False)


def _k_bilinear2d(x, output_size, align_corners, scales_h=None, scales_w=None):
    cdt = _compute_dtype(x)
    ah = _linear_matrix(x.shape[-2], output_size[0], bool(align_corners), scales_h, cdt)
    aw = _linear_matrix(x.shape[-1], output_size[1], bool(align_corners), scales_w, cdt)
    return _apply_h(_apply_w(x.astype(cdt, copy=False), aw), ah).astype(x.dtype, copy=False)


def _k_linear1d_backward(g, output_size, input_size, align_corners, scales=None):
    cdt = _compute_dtype(g)
    a = _linear_matrix(input_size[-1], output_size[0], bool(align_corners), scales, cdt)
    return _apply_w(g.astype(cdt, copy=False), a.T).astype(g.dtype, copy=False)


def _k_bilinear2d_backward(g, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    cdt = _compute_dtype(g)
    ah = _linear_matrix(input_size[-2], output_size[0], bool(align_corners), scales_h, cdt)
    aw = _linear_matrix(input_size[-1], output_size[1], bool(align_corners), scales_w, cdt)
    return _apply_w(_apply_h(g.astype(cdt, copy=False), ah.T), aw.T).astype(g.dtype, copy=False)


_S1 = "float? scales=None"
_S2 = "float? scales_h=None, float? scales_w=None"
NEAREST1D = declare(f"upsample_nearest1d(Tensor input, int[1] output_size, {_S1}) -> Tensor",
                    category="resampling", method=False, kernels={"cpu": _k_nearest1d})
NEAREST2D = declare(f"upsample_nearest2d(Tensor input, int[2] output_size, {_S2}) -> Tensor",
                    category="resampling", method=False, kernels={"cpu": _k_nearest2d})
LINEAR1D = declare(f"upsample_linear1d(Tensor input, int[1] output_size, bool align_corners, {_S1}) -> Tensor",
                   category="resampling", method=False, kernels={"cpu": _k_linear1d})
BILINEAR2D = declare(f"upsample_bilinear2d(Tensor input, int[2] output_size, bool align_corners, {_S2}) -> Tensor",
                     category="resampling", method=False, kernels={"cpu": _k_bilinear2d})
NEAREST1D_BACKWARD = declare(f"upsample_nearest1d_backward(Tensor grad_output, int[1] output_size, "
                             f"int[3] input_size, {_S1}) -> Tensor",
                             category="resampling", method=False, kernels={"cpu": _k_nearest1d_backward})
NEAREST2D_BACKWARD = declare(f"upsample_nearest2d_backward(Tensor grad_output, int[2] output_size, "
                             f"int[4] input_size, {_S2}) -> Tensor",
                             category="resampling", method=False, kernels={"cpu": _k_nearest2d_backward})
LINEAR1D_BACKWARD = declare(f"upsample_linear1d_backward(Tensor grad_output, int[1] output_size, int[3] input_size, "
                            f"bool align_corners, {_S1}) -> Tensor",
                            category="resampling", method=False, kernels={"cpu": _k_linear1d_backward})
BILINEAR2D_BACKWARD = declare(f"upsample_bilinear2d_backward(Tensor grad_output, int[2] output_size, "
                              f"int[4] input_size, bool align_corners, {_S2}) -> Tensor",
                              category="resampling", method=False, kernels={"cpu": _k_bilinear2d_backward})


def _size(output_size, n, name):
    if isinstance(output_size, int):
        output_size = (output_size,)
    try:
        size = tuple(int(s) for s in output_size)
    except TypeError:
        raise TypeError(f"{name}(): argument 'output_size' must be a sequence of {n} ints, "
                        f"not {type(output_size).__name__}") from None
    if len(size) != n:
        raise RuntimeError(f"{name}(): It is expected output_size equals to {n}, but got size {len(size)}")
    if any(s <= 0 for s in size):
        raise RuntimeError(f"{name}(): Input and output sizes should be greater than 0, but got output_size "
                           f"{list(size)}")
    return size


def _check_input(input, ndim, name):
    check_tensor(input, "input", name)
    if input.ndim != ndim:
        raise RuntimeError(f"{name}(): Expected {ndim}D input tensor, but got {input.ndim}D input "
                           f"of shape {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): expected a floating input, got {input.dtype}")
    if any(s == 0 for s in input.shape[2:]):
        raise RuntimeError(f"{name}(): Input and output sizes should be greater than 0, but got input "
                           f"{list(input.shape)}")


def _norm_args(args, takes_align):
    return tuple(None if a is None else (bool(a) if i == 0 and takes_align else float(a)) for i, a in enumerate(args))


def _run_forward(op, ndim, takes_align, input, output_size, args):
    _check_input(input, ndim, op.name)
    size = _size(output_size, ndim - 2, op.name)
    args = _norm_args(args, takes_align)
    dev = input._device
    out = _wrap(op.kernel(dev.type)(input._data, size, *args), dev)
    record_if_needed(op, (input, size) + args, {}, out)
    return out


def _run_backward(op, ndim, takes_align, grad_output, output_size, input_size, args):
    name = op.name
    check_tensor(grad_output, "grad_output", name)
    size = _size(output_size, ndim - 2, name)
    in_size = tuple(int(s) for s in input_size)
    if len(in_size) != ndim:
        raise RuntimeError(f"{name}(): It is expected input_size equals to {ndim}, but got size {len(in_size)}")
    expected = in_size[:2] + size
    if tuple(grad_output.shape) != expected:
        raise RuntimeError(f"{name}(): expected grad_output of shape {list(expected)}, got "
                           f"{list(grad_output.shape)}")
    args = _norm_args(args, takes_align)
    dev = grad_output._device
    out = _wrap(op.kernel(dev.type)(grad_output._data, size, in_size, *args), dev)
    record_if_needed(op, (grad_output, size, in_size) + args, {}, out)
    return out


@NEAREST1D.front
def upsample_nearest1d(input: Tensor, output_size, scales=None) -> Tensor:
    """Nearest-neighbour upsampling of ``(N, C, W)`` to ``(N, C, output_size[0])``, as torch's kernel.

    Args:
        input: floating ``(N, C, W)`` tensor.
        output_size: ``(W_out,)``.
        scales: the user's scale factor, used in the source index ``floor(dst * (1 / scales))``
            instead of ``in / out`` when given.

    Returns:
        ``(N, C, W_out)`` tensor of ``input``'s dtype.
    """
    return _run_forward(NEAREST1D, 3, False, input, output_size, (scales,))


@NEAREST2D.front
def upsample_nearest2d(input: Tensor, output_size, scales_h=None, scales_w=None) -> Tensor:
    """Nearest-neighbour upsampling of ``(N, C, H, W)`` to ``(N, C, *output_size)``, as torch's kernel.

    Args:
        input: floating ``(N, C, H, W)`` tensor.
        output_size: ``(H_out, W_out)``.
        scales_h, scales_w: the user's scale factors, used in the source index instead of
            ``in / out`` when given.

    Returns:
        ``(N, C, H_out, W_out)`` tensor of ``input``'s dtype.
    """
    return _run_forward(NEAREST2D, 4, False, input, output_size, (scales_h, scales_w))


@LINEAR1D.front
def upsample_linear1d(input: Tensor, output_size, align_corners: bool = False, scales=None) -> Tensor:
    """Linear interpolation of ``(N, C, W)`` to ``(N, C, output_size[0])``, as torch's kernel.

    Args:
        input: floating ``(N, C, W)`` tensor.
        output_size: ``(W_out,)``.
        align_corners: map the corner pixels' centres onto each other (source index
            ``dst * (in - 1) / (out - 1)``) instead of the half-pixel rule.
        scales: the user's scale factor, used instead of ``in / out`` when given.

    Returns:
        ``(N, C, W_out)`` tensor of ``input``'s dtype.
    """
    return _run_forward(LINEAR1D, 3, True, input, output_size, (align_corners, scales))


@BILINEAR2D.front
def upsample_bilinear2d(input: Tensor, output_size, align_corners: bool = False, scales_h=None,
                        scales_w=None) -> Tensor:
    """Bilinear interpolation of ``(N, C, H, W)`` to ``(N, C, *output_size)``, as torch's kernel.

    Args:
        input: floating ``(N, C, H, W)`` tensor.
        output_size: ``(H_out, W_out)``.
        align_corners: map the corner pixels' centres onto each other (source index
            ``dst * (in - 1) / (out - 1)``) instead of the half-pixel rule.
        scales_h, scales_w: the user's scale factors, used instead of ``in / out`` when given.

    Returns:
        ``(N, C, H_out, W_out)`` tensor of ``input``'s dtype.
    """
    return _run_forward(BILINEAR2D, 4, True, input, output_size, (align_corners, scales_h, scales_w))


_BACKWARD_DOC = """Gradient of ``{fwd}``: ``grad_output`` (shape ``input_size[:2] + output_size``) spread back
    onto ``input_size`` (the transposed interpolation). Linear in ``grad_output``; its own derivative
    is ``{fwd}``.

    Args:
        grad_output: gradient of the upsampled output.
        output_size: the forward's output spatial sizes.
        input_size: the forward input's shape.
        align_corners, scales...: as given to ``{fwd}``.

    Returns:
        tensor of shape ``input_size``.
    """


@NEAREST1D_BACKWARD.front
def upsample_nearest1d_backward(grad_output: Tensor, output_size, input_size, scales=None) -> Tensor:
    return _run_backward(NEAREST1D_BACKWARD, 3, False, grad_output, output_size, input_size, (scales,))


@NEAREST2D_BACKWARD.front
def upsample_nearest2d_backward(grad_output: Tensor, output_size, input_size, scales_h=None,
                                scales_w=None) -> Tensor:
    return _run_backward(NEAREST2D_BACKWARD, 4, False, grad_output, output_size, input_size, (scales_h, scales_w))


@LINEAR1D_BACKWARD.front
def upsample_linear1d_backward(grad_output: Tensor, output_size, input_size, align_corners: bool = False,
                               scales=None) -> Tensor:
    return _run_backward(LINEAR1D_BACKWARD, 3, True, grad_output, output_size, input_size, (align_corners, scales))


@BILINEAR2D_BACKWARD.front
def upsample_bilinear2d_backward(grad_output: Tensor, output_size, input_size, align_corners: bool = False,
                                 scales_h=None, scales_w=None) -> Tensor:
    return _run_backward(BILINEAR2D_BACKWARD, 4, True, grad_output, output_size, input_size,
                         (align_corners, scales_h, scales_w))


for _f in (upsample_nearest1d_backward, upsample_nearest2d_backward, upsample_linear1d_backward,
           upsample_bilinear2d_backward):
    _f.__doc__ = _BACKWARD_DOC.format(fwd=_f.__name__[:-9])


# --- pixel shuffle (composites of reshape and permute) ------------------------------------------------
PIXEL_SHUFFLE = declare("pixel_shuffle(Tensor input, int upscale_factor) -> Tensor", category="resampling",
                        method=False, composite=True)
PIXEL_UNSHUFFLE = declare("pixel_unshuffle(Tensor input, int downscale_factor) -> Tensor", category="resampling",
                          method=False, composite=True)


@PIXEL_SHUFFLE.front
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """Rearrange ``(*, C * r**2, H, W)`` into ``(*, C, H * r, W * r)`` (sub-pixel convolution).

    Args:
        input: tensor with at least 3 dims; dim -3 divisible by ``upscale_factor ** 2``.
        upscale_factor: ``r``, a positive int.

    Returns:
        ``(*, C, H * r, W * r)`` tensor (a copy).
    """
    check_tensor(input, "input", "pixel_shuffle")
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


@PIXEL_UNSHUFFLE.front
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """Rearrange ``(*, C, H * r, W * r)`` into ``(*, C * r**2, H, W)``: the inverse of pixel_shuffle.

    Args:
        input: tensor with at least 3 dims; its last two dims divisible by ``downscale_factor``.
        downscale_factor: ``r``, a positive int.

    Returns:
        ``(*, C * r**2, H, W)`` tensor (a copy).
    """
    check_tensor(input, "input", "pixel_unshuffle")
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} and input.size(-1)={w} are not divisible by {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)
