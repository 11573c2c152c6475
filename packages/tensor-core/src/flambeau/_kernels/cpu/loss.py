"""CPU kernels of the loss operators declared in ``flambeau/_ops/loss.py``.

cross_entropy with class indices is one fused pass per row (parallel over rows, after numpy's SIMD
row maxima): ``log(sum(exp(x - max)))`` and the loss, keeping only each row's log-sum-exp for backward; its
backward recomputes ``softmax`` from that and writes ``softmax - target`` (label smoothing and weights
folded in) in one more pass. The log-softmax matrix is never stored. float32 rows use the vectorised
``expf`` of Note [Vectorised expf] (``_kernels/cpu/nn_ops.py``). nll_loss and the element-wise
losses are numpy passes.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau import _dtype as dt
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel

_add_reduce = np.add.reduce


def _reduce(loss: np.ndarray, reduction: str, dtype) -> np.ndarray:
    if reduction == "none":
        return np.asarray(loss, dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(dtype=np.float64), dtype)
    with np.errstate(all="ignore"):
        return np.asarray(loss.sum(dtype=np.float64) / loss.size if loss.size else np.nan, dtype)


# --- kernels of cross_entropy ------------------------------------------------------------------------
_expf_flush = None  # numba helper from _fast_exp.expf_helpers(), set by _ce_kernels()


@functools.cache
def _ce_kernels():
    """Fused cross-entropy rows: forward and backward, float32 (vectorised expf) and float64."""
    # The kernels reach the shared expf helper as a module global (see _fast_exp), not a closure cell.
    global _expf_flush
    import numba
    from numba import prange

    from flambeau._kernels.cpu._fast_exp import expf_helpers

    _, _expf_flush = expf_helpers()

    fm = {"contract", "reassoc", "nsz"}

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def fwd_f32(x, mx, t, w, ignore, ls, lse, loss, wrow, bad):
        rows, n = x.shape
        for i in prange(rows):
            xr = x[i]
            if mx.shape[0]:
                m = mx[i]
            else:
                m = xr[0]
                for j in range(n):
                    v = xr[j]
                    m = v if v > m or v != v else m
            if m == -np.inf or m == np.inf:
                m = m - m
            e = np.empty(n, np.float32)
            bits = np.empty(n, np.int32)
            for j in range(n):  # Note [Vectorised expf]
                y, b = _expf_flush(xr[j] - m)
                e[j] = y
                bits[j] = b
            scale = bits.view(np.float32)
            s = 0.0
            for j in range(n):
                s += e[j] * scale[j]
            c = m + np.log(s)
            lse[i] = c
            ti = t[i]
            if ti == ignore or ti < 0 or ti >= n:
                if ti != ignore:
                    bad[0] = ti  # out of range: the caller raises
                loss[i] = 0.0
                wrow[i] = 0.0
                continue
            wt = w[ti]
            val = (1.0 - ls) * wt * (c - xr[ti])
            if ls > 0.0:
                sw = 0.0
                swx = 0.0
                for j in range(n):
                    sw += w[j]
                    swx += w[j] * xr[j]
                val += ls / n * (sw * c - swx)
            loss[i] = val
            wrow[i] = wt

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def fwd_f64(x, mx, t, w, ignore, ls, lse, loss, wrow, bad):
        rows, n = x.shape
        for i in prange(rows):
            xr = x[i]
            if mx.shape[0]:
                m = mx[i]
            else:
                m = xr[0]
                for j in range(n):
                    v = xr[j]
                    m = v if v > m or v != v else m
            if m == -np.inf or m == np.inf:
                m = m - m
            s = 0.0
            for j in range(n):
                s += np.exp(xr[j] - m)
            c = m + np.log(s)
            lse[i] = c
            ti = t[i]
            if ti == ignore or ti < 0 or ti >= n:
                if ti != ignore:
                    bad[0] = ti  # out of range: the caller raises
                loss[i] = 0.0
                wrow[i] = 0.0
                continue
            wt = w[ti]
            val = (1.0 - ls) * wt * (c - xr[ti])
            if ls > 0.0:
                sw = 0.0
                swx = 0.0
                for j in range(n):
                    sw += w[j]
                    swx += w[j] * xr[j]
                val += ls / n * (sw * c - swx)
            loss[i] = val
            wrow[i] = wt

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def bwd_f32(x, t, w, wsum, ignore, ls, lse, gs, out, bad):
        # out = g * ((1 - ls) * w[t] * (softmax - onehot) + ls / n * (wsum * softmax - w))
        rows, n = x.shape
        for i in prange(rows):
            xr, o = x[i], out[i]
            ti = t[i]
            g = gs[i] if gs.shape[0] == rows else gs[0]
            if ti == ignore or g == 0.0 or ti < 0 or ti >= n:
                if ti != ignore and (ti < 0 or ti >= n):
                    bad[0] = ti  # out of range (a target changed since the forward): the caller raises
                for j in range(n):
                    o[j] = 0.0
                continue
            wt = w[ti]
            a = np.float32(g * ((1.0 - ls) * wt + ls * wsum / n))
            cw = np.float32(g * ls / n)
            c = np.float32(lse[i])
            bits = np.empty(n, np.int32)
            for j in range(n):
                y, b = _expf_flush(xr[j] - c)
                o[j] = y
                bits[j] = b
            scale = bits.view(np.float32)
            for j in range(n):
                o[j] = a * (o[j] * scale[j]) - cw * w[j]
            o[ti] -= np.float32(g * (1.0 - ls) * wt)

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def bwd_f64(x, t, w, wsum, ignore, ls, lse, gs, out, bad):
        rows, n = x.shape
        for i in prange(rows):
            xr, o = x[i], out[i]
            ti = t[i]
            g = gs[i] if gs.shape[0] == rows else gs[0]
            if ti == ignore or g == 0.0 or ti < 0 or ti >= n:
                if ti != ignore and (ti < 0 or ti >= n):
                    bad[0] = ti  # out of range: the caller raises
                for j in range(n):
                    o[j] = 0.0
                continue
            wt = w[ti]
            a = g * ((1.0 - ls) * wt + ls * wsum / n)
            cw = g * ls / n
            c = lse[i]
            for j in range(n):
                o[j] = a * np.exp(xr[j] - c) - cw * w[j]
            o[ti] -= g * (1.0 - ls) * wt

    return fwd_f32, fwd_f64, bwd_f32, bwd_f64


def _class_rows(x: np.ndarray) -> np.ndarray:
    """``x`` ``(C,)``, ``(N, C)`` or ``(N, C, d...)`` as C-contiguous rows ``(M, C)`` (class dim last)."""
    if x.ndim == 1:
        return np.ascontiguousarray(x).reshape(1, -1)
    if x.ndim > 2:
        x = np.moveaxis(x, 1, -1)
    return np.ascontiguousarray(x).reshape(-1, x.shape[-1])


def _check_targets(t: np.ndarray, c: int, ignore_index: int) -> np.ndarray:
    """int64 targets; IndexError naming the first target outside ``[0, c)`` that is not ignored."""
    t = t.astype(np.int64, copy=False)
    if t.size:
        bad = ((t < 0) | (t >= c)) & (t != ignore_index)
        if bad.any():
            raise IndexError(f"Target {int(t[bad].flat[0])} is out of bounds.")
    return t


@kernel("nll_loss", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_nll_loss(x, target, weight, ignore_index, reduction):
    c = x.shape[0] if x.ndim == 1 else x.shape[1]
    t = target.astype(np.int64, copy=False)
    if t.size and (t.min() < 0 or t.max() >= c or 0 <= ignore_index < c):
        t = _check_targets(t, c, ignore_index)
        valid = t != ignore_index
        tc = np.where(valid, t, 0)
    else:  # the common case: every target is a class, none is ignored
        valid = None
        tc = t
    if x.ndim == 1:
        picked = x[tc]
    elif x.ndim == 2:
        picked = x[np.arange(x.shape[0]), tc]
    else:
        picked = np.take_along_axis(x, tc[:, None], 1)[:, 0]
    if weight is None:
        wt = None if valid is None else valid.astype(x.dtype)
    else:
        wt = weight[tc] if valid is None else np.where(valid, weight[tc], 0)
    loss = np.negative(picked) if wt is None else np.asarray(-(picked * wt))
    total = float(t.size if wt is None else _add_reduce(wt, axis=None, dtype=np.float64))
    if reduction == "none":
        return np.asarray(loss, x.dtype), np.asarray(total, x.dtype)
    s = float(_add_reduce(loss, axis=None, dtype=np.float64))
    if reduction == "mean":
        s = s / total if total else (np.nan if s == 0 or s != s else np.copysign(np.inf, s))
    return np.asarray(s, x.dtype), np.asarray(total, x.dtype)


@kernel("nll_loss_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_nll_loss_backward(grad, x, target, weight, ignore_index, reduction, total_weight):
    c = x.shape[0] if x.ndim == 1 else x.shape[1]
    t = target.astype(np.int64, copy=False)
    if t.size and (t.min() < 0 or t.max() >= c):  # numpy would wrap a negative index onto another class
        t = _check_targets(t, c, ignore_index)
    valid = t != ignore_index
    tc = np.where(valid, t, 0)
    g = np.asarray(grad, np.float64)
    if reduction == "mean":
        total = float(total_weight)
        g = g / total if total else np.full(g.shape, np.nan)
    with np.errstate(all="ignore"):
        coef = np.where(valid, -(g if weight is None else weight[tc] * g), 0.0)  # ignored: 0 even if g is NaN
    out = np.zeros(x.shape, x.dtype)  # calloc'ed: only the written pages are touched here
    if x.ndim == 1:
        out[tc] = coef
    elif x.ndim == 2:
        out[np.arange(x.shape[0]), tc] = coef
    else:
        np.put_along_axis(out, tc[:, None], np.broadcast_to(coef, tc.shape)[:, None].astype(x.dtype), 1)
    return out


@functools.lru_cache(maxsize=64)
def _ones(c: int, dtype) -> np.ndarray:
    """A vector of ``c`` ones (the class weights when none are given), made once per size; never written
    (not flagged read-only: numba would compile the kernels once more for read-only arrays)."""
    return np.ones(c, dtype)


_NO_MAX = np.empty(0, np.float32)


@kernel("cross_entropy", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_cross_entropy(x, target, weight, ignore_index, reduction, label_smoothing):
    c = x.shape[0] if x.ndim == 1 else x.shape[1]
    t = target.astype(np.int64, copy=False).reshape(-1)
    rows = _class_rows(x if x.dtype.type in (np.float32, np.float64) else x.astype(np.float32))
    f32, f64, _, _ = _ce_kernels()
    m = rows.shape[0]
    lse = np.empty(m)
    loss = np.empty(m)
    wrow = np.empty(m)
    w = _ones(c, rows.dtype) if weight is None else weight.astype(rows.dtype)
    if m:
        # Long rows: their maxima by numpy's SIMD reduction (numba does not vectorise a max loop, 5x slower);
        # short rows: in the kernel (numpy's reduction of short rows costs more than the whole kernel).
        mx = np.maximum.reduce(rows, 1) if c >= 128 else _NO_MAX.astype(rows.dtype, copy=False)
        bad = np.full(1, ignore_index, np.int64)
        (f32 if rows.dtype == np.float32 else f64)(rows, mx, t, w, ignore_index, float(label_smoothing), lse, loss,
                                                   wrow, bad)
        if bad[0] != ignore_index:
            raise IndexError(f"Target {int(bad[0])} is out of bounds.")
    total = _add_reduce(wrow)
    lse = lse.reshape(target.shape)
    if reduction == "none":
        return loss.reshape(target.shape).astype(x.dtype), lse, np.asarray(total)
    s = _add_reduce(loss)
    if reduction == "mean":
        s = s / total if total else (np.nan if s == 0 or s != s else np.copysign(np.inf, s))
    return np.asarray(s, x.dtype), lse, np.asarray(total)


@kernel("cross_entropy_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_cross_entropy_backward(grad, x, target, weight, ignore_index, reduction, label_smoothing, lse, total_weight):
    c = x.shape[0] if x.ndim == 1 else x.shape[1]
    t = target.astype(np.int64, copy=False).reshape(-1)
    rows = _class_rows(x if x.dtype.type in (np.float32, np.float64) else x.astype(np.float32))
    _, _, b32, b64 = _ce_kernels()
    m = rows.shape[0]
    if reduction == "none":
        gs = np.ascontiguousarray(grad, np.float64).reshape(-1)
    else:  # one factor for every row
        g = float(grad)
        if reduction == "mean":
            total = float(total_weight)
            g = g / total if total else np.nan
        gs = np.full(1, g)
    w = _ones(c, rows.dtype) if weight is None else weight.astype(rows.dtype)
    wsum = float(c) if weight is None else float(_add_reduce(w, dtype=np.float64))
    full = np.empty(x.shape if x.ndim <= 2 else rows.shape, rows.dtype)  # owns its memory: autograd may steal it
    out = full.reshape(rows.shape)
    if m:
        bad = np.full(1, ignore_index, np.int64)
        (b32 if rows.dtype == np.float32 else b64)(rows, t, w, wsum, ignore_index,
                                                   float(label_smoothing), np.ascontiguousarray(lse, np.float64)
                                                   .reshape(-1), gs, out, bad)
        if bad[0] != ignore_index:
            raise IndexError(f"Target {int(bad[0])} is out of bounds.")
    if x.ndim > 2:
        full = np.moveaxis(out.reshape((x.shape[0],) + x.shape[2:] + (c,)), -1, 1)
    return full.astype(x.dtype, copy=False)


# --- element-wise losses --------------------------------------------------------------------------------
# Note [Fused pointwise losses]: mse_loss and binary_cross_entropy_with_logits reduced to a number took
# three to nine numpy passes over memory, each on one thread (1M float32: mse 0.24 ms, torch 0.16; BCE
# with logits 2.7 ms, torch 1.1). For C-contiguous operands of one float dtype and shape they run as one
# parallel pass over 4096-element blocks, each summed in the operands' dtype (vectorised), the block sums
# added in float64 (Note [Parallel full sums]). BCE's softplus(-x) = max(-x, 0) + log1p(e), e = exp(-|x|)
# in (0, 1], takes e from the vectorised expf (float32) and log1p(e) from Note [log1p by its atanh series].
_FUSED_LOSS_MIN = 1 << 16
_BLOCK = 4096


_MSE, _BCE_LOGITS_F32, _BCE_LOGITS_F64 = 0, 1, 2  # the block sums of _numba_pointwise_sum
_mse_block = _bce_logits_block_f32 = _bce_logits_block_f64 = None  # numba helpers, set by _numba_pointwise_sum()
_log1p32 = _log1p64 = None  # from _log1p.log1p_unit_helpers(), set by _numba_pointwise_sum()


@functools.cache
def _numba_pointwise_sum():
    """``pointwise_sum(a, b, kind) -> float``: the float64 sum of a loss's terms over flat arrays, ``kind`` one
    of ``_MSE`` (``(a - b)^2``) and ``_BCE_LOGITS_F32/_F64`` (``(1 - b) a + softplus(-a)``, by dtype)."""
    # The helpers are module globals, not closure cells (numba keys its disk cache on the cells).
    global _expf_flush, _mse_block, _bce_logits_block_f32, _bce_logits_block_f64, _log1p32, _log1p64
    import math

    import numba
    from numba import prange

    from flambeau._kernels.cpu._fast_exp import expf_helpers
    from flambeau._kernels.cpu._log1p import log1p_unit_helpers

    _, _expf_flush = expf_helpers()
    _log1p32, _log1p64 = log1p_unit_helpers()  # Note [log1p by its atanh series]
    fm = {"contract", "reassoc"}
    helper = {"inline": "always", "fastmath": fm}

    @numba.njit(**helper)
    def mse_block(xa, xb):
        acc = xa[0] * 0
        for j in range(xa.shape[0]):
            d = xa[j] - xb[j]
            acc += d * d
        return acc

    @numba.njit(**helper)
    def bce_logits_block_f32(xs, ts):
        m = xs.shape[0]
        f32 = np.float32
        e = np.empty(m, np.float32)
        bits = np.empty(m, np.int32)
        for j in range(m):
            y, k = _expf_flush(f32(-abs(xs[j])))
            e[j] = y
            bits[j] = k
        scale = bits.view(np.float32)
        acc = f32(0)
        for j in range(m):
            v = f32(xs[j])
            acc += (f32(1) - f32(ts[j])) * v + max(-v, f32(0)) + _log1p32(e[j] * scale[j])
        return acc

    @numba.njit(**helper)
    def bce_logits_block_f64(xs, ts):
        acc = 0.0
        for j in range(xs.shape[0]):
            v = float(xs[j])
            acc += (1.0 - ts[j]) * v + max(-v, 0.0) + _log1p64(math.exp(-abs(v)))
        return acc

    _mse_block, _bce_logits_block_f32, _bce_logits_block_f64 = mse_block, bce_logits_block_f32, bce_logits_block_f64

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def pointwise_sum(a, b, kind):
        n = a.shape[0]
        nb = (n + _BLOCK - 1) // _BLOCK
        parts = np.empty(nb, np.float64)
        for c in prange(nb):
            lo = c * _BLOCK
            xa, xb = a[lo:min(lo + _BLOCK, n)], b[lo:min(lo + _BLOCK, n)]
            if kind == _MSE:
                parts[c] = _mse_block(xa, xb)
            elif kind == _BCE_LOGITS_F32:
                parts[c] = _bce_logits_block_f32(xa, xb)
            else:
                parts[c] = _bce_logits_block_f64(xa, xb)
        return parts.sum()

    return pointwise_sum


def _fused_loss_fits(a, b, reduction) -> bool:
    """Note [Fused pointwise losses]: a reduced loss of two C-contiguous float operands of one dtype and shape."""
    return (reduction != "none" and a.__class__ is np.ndarray and b.__class__ is np.ndarray
            and a.size >= _FUSED_LOSS_MIN and a.dtype == b.dtype and a.dtype in dt.FLOAT_NP
            and a.shape == b.shape and a.flags.c_contiguous and b.flags.c_contiguous)


def _fused_reduced(total: float, n: int, reduction: str, dtype) -> np.ndarray:
    return np.asarray(total / n if reduction == "mean" else total, dtype)



@kernel("mse_loss", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_mse(a, b, reduction):
    if _fused_loss_fits(a, b, reduction):  # Note [Fused pointwise losses]
        total = _numba_pointwise_sum()(a.reshape(-1), b.reshape(-1), _MSE)
        return _fused_reduced(total, a.size, reduction, a.dtype)
    d = np.asarray(np.subtract(a, b))
    if reduction == "none":
        return np.asarray(np.square(d))
    if d.shape == () or d.size == 0:
        return _reduce(np.square(d), reduction, a.dtype)
    flat = d.reshape(-1)
    s = np.dot(flat, flat)
    return np.asarray(s / flat.size if reduction == "mean" else s, d.dtype)


@kernel("l1_loss", "cpu")
def _k_l1(a, b, reduction):
    d = np.asarray(np.subtract(a, b))
    return _reduce(np.abs(d, out=d), reduction, d.dtype)


@kernel("smooth_l1_loss", "cpu")
def _k_smooth_l1(a, b, reduction, beta):
    d = np.abs(np.subtract(a, b))
    if beta == 0:
        return _reduce(d, reduction, d.dtype)
    loss = np.where(d < beta, (0.5 / beta) * d * d, d - 0.5 * beta).astype(d.dtype, copy=False)
    return _reduce(loss, reduction, d.dtype)


@kernel("huber_loss", "cpu")
def _k_huber(a, b, reduction, delta):
    d = np.abs(np.subtract(a, b))
    loss = np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)).astype(d.dtype, copy=False)
    return _reduce(loss, reduction, d.dtype)


# Note [log1p]: numpy's float32 log1p has no SIMD loop (about 15x slower than log on this machine),
# so the binary losses take log(1 + e) and log(1 - x): the absolute error stays below float32's
# resolution of the loss terms they are added to.
def _on_one_element(kernel, x, *operands_and_reduction):
    """``kernel`` of 0-dim operands, computed on one-element arrays: numpy's ufuncs give scalars for 0-dim arrays,
    which the kernels' in-place steps (``out=``) cannot take."""
    *operands, reduction = operands_and_reduction
    ones = [None if a is None else np.reshape(a, (1,) * max(1, np.ndim(a))) for a in (x, *operands)]
    out = kernel(*ones, reduction)
    return out.reshape(()) if reduction == "none" else out


@kernel("binary_cross_entropy", "cpu")
def _k_bce(x, t, weight, reduction):
    if x.ndim == 0:
        return _on_one_element(_k_bce, x, t, weight, reduction)
    with np.errstate(all="ignore"):
        loss = np.log(x)
        np.maximum(loss, -100.0, out=loss)
        loss *= t
        lq = np.subtract(1, x)
        np.log(lq, out=lq)
        np.maximum(lq, -100.0, out=lq)
        lq *= np.subtract(1, t)
        loss += lq
        np.negative(loss, out=loss)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.astype(x.dtype, copy=False), reduction, x.dtype)


@kernel("binary_cross_entropy_with_logits", "cpu")
def _k_bce_logits(x, t, weight, pos_weight, reduction):
    if x.ndim == 0:
        return _on_one_element(_k_bce_logits, x, t, weight, pos_weight, reduction)
    if weight is None and pos_weight is None and _fused_loss_fits(x, t, reduction):  # Note [Fused pointwise losses]
        kind = _BCE_LOGITS_F32 if x.dtype == np.float32 else _BCE_LOGITS_F64
        total = _numba_pointwise_sum()(x.reshape(-1), t.reshape(-1), kind)
        return _fused_reduced(total, x.size, reduction, x.dtype)
    # loss = (1 - t) * x + lw * softplus(-x), lw = 1 + (pos_weight - 1) * t, softplus(-x) = max(-x, 0) +
    # log(1 + exp(-|x|)) (Note [log1p]).
    with np.errstate(all="ignore"):
        sp = np.abs(x)
        np.negative(sp, out=sp)
        np.exp(sp, out=sp)
        sp += 1
        np.log(sp, out=sp)
        sp += np.maximum(np.negative(x), 0)
        if pos_weight is not None:
            sp *= 1 + (pos_weight - 1) * t
        loss = np.subtract(1, t)
        loss *= x
        loss += sp
    if weight is not None:
        loss = loss * weight
    return _reduce(np.asarray(loss).astype(x.dtype, copy=False), reduction, x.dtype)

