"""CPU kernels of the upsampling operators declared in ``flambeau/_ops/resample.py``.

Nearest and linear interpolation are separable: along each resized dimension the output is a
fixed linear map of the input, an ``(out, in)`` matrix with one (nearest) or two (linear) nonzero
weights per row, built from torch's source-index formulas exactly (``nearest_idx``,
``area_pixel_compute_source_index`` with ``align_corners``, user scales or ``in / out``) and
cached. Linear interpolation then is two BLAS matmuls (width, then height: torch's order of
operations), nearest a gather (``np.take``); the backward of both is the transposed matmuls.
Integer and float16 inputs compute in float32.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._ops._registry import kernel

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


@kernel("upsample_nearest1d", "cpu")
def _k_nearest1d(x, output_size, scales=None):
    return np.take(x, _nearest_index(x.shape[-1], output_size[0], scales), axis=-1)


@kernel("upsample_nearest2d", "cpu")
def _k_nearest2d(x, output_size, scales_h=None, scales_w=None):
    ih = _nearest_index(x.shape[-2], output_size[0], scales_h)
    iw = _nearest_index(x.shape[-1], output_size[1], scales_w)
    return np.take(np.take(x, ih, axis=-2), iw, axis=-1)


@kernel("upsample_nearest1d_backward", "cpu")
def _k_nearest1d_backward(g, output_size, input_size, scales=None):
    cdt = _compute_dtype(g)
    a = _nearest_matrix(input_size[-1], output_size[0], scales, cdt)
    return _apply_w(g.astype(cdt, copy=False), a.T).astype(g.dtype, copy=False)


@kernel("upsample_nearest2d_backward", "cpu")
def _k_nearest2d_backward(g, output_size, input_size, scales_h=None, scales_w=None):
    cdt = _compute_dtype(g)
    ah = _nearest_matrix(input_size[-2], output_size[0], scales_h, cdt)
    aw = _nearest_matrix(input_size[-1], output_size[1], scales_w, cdt)
    y = _apply_h(_apply_w(g.astype(cdt, copy=False), aw.T), ah.T)
    return y.astype(g.dtype, copy=False)


@kernel("upsample_linear1d", "cpu")
def _k_linear1d(x, output_size, align_corners, scales=None):
    cdt = _compute_dtype(x)
    a = _linear_matrix(x.shape[-1], output_size[0], bool(align_corners), scales, cdt)
    return _apply_w(x.astype(cdt, copy=False), a).astype(x.dtype, copy=False)


@kernel("upsample_bilinear2d", "cpu")
def _k_bilinear2d(x, output_size, align_corners, scales_h=None, scales_w=None):
    cdt = _compute_dtype(x)
    ah = _linear_matrix(x.shape[-2], output_size[0], bool(align_corners), scales_h, cdt)
    aw = _linear_matrix(x.shape[-1], output_size[1], bool(align_corners), scales_w, cdt)
    return _apply_h(_apply_w(x.astype(cdt, copy=False), aw), ah).astype(x.dtype, copy=False)


@kernel("upsample_linear1d_backward", "cpu")
def _k_linear1d_backward(g, output_size, input_size, align_corners, scales=None):
    cdt = _compute_dtype(g)
    a = _linear_matrix(input_size[-1], output_size[0], bool(align_corners), scales, cdt)
    return _apply_w(g.astype(cdt, copy=False), a.T).astype(g.dtype, copy=False)


@kernel("upsample_bilinear2d_backward", "cpu")
def _k_bilinear2d_backward(g, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    cdt = _compute_dtype(g)
    ah = _linear_matrix(input_size[-2], output_size[0], bool(align_corners), scales_h, cdt)
    aw = _linear_matrix(input_size[-1], output_size[1], bool(align_corners), scales_w, cdt)
    return _apply_w(_apply_h(g.astype(cdt, copy=False), ah.T), aw.T).astype(g.dtype, copy=False)

