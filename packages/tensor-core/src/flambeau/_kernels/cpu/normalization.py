"""CPU kernels of the normalisation operators declared in ``flambeau/_ops/normalization.py``.

Every operator views its input as rows of contiguous memory and runs fused numba kernels, parallel
over rows, built on first use:

- statistics: layer_norm and group_norm compute each row's mean and sum of squared deviations (two
  passes over the row, the second from cache); group_norm's rows are the ``(n, group)`` blocks,
  layer_norm's the normalised trailing dimensions. batch_norm sums ``x - x[0, c]`` and its square
  per channel, parallel over chunks of the batch. Sums along a row accumulate in the input's
  dtype and are combined in float64 (Note [Row accumulation]).
- normalisation and affine transform: one pass, ``((x - mu) * a + c) * w + b`` with per-row
  ``mu, a, c`` and per-column ``w, b``.
- backward: one pass of per-row sums of ``g`` and ``g * (x - mu)``, then one pass
  writing ``dx = g * A + (x - mu) * B + C`` with per-row coefficients; layer_norm fuses both into
  a row loop that also accumulates the weight and bias gradients per thread.

float32 and float64 are jitted; float16 computes in float32.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel
from flambeau._parallel import get_num_threads

_FLOATS = (np.float32, np.float64)


# --- kernels -----------------------------------------------------------------------------------------
@functools.cache
def _numba_norm():
    """The fused row kernels (each specialised for float32 and float64 inputs), compiled on first use."""
    import numba
    from numba import prange

    fm = {"contract", "reassoc", "nsz"}

    # Note [Row accumulation]: sums along one row accumulate in the input's dtype, which LLVM
    # vectorises at full width with several partial sums (reassoc); rows are then combined in
    # float64. Float64 accumulators inside the loops halve the throughput (measured) for an error of
    # a few ulps of float32 on rows of up to a few thousand elements.
    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def row_moments(x, eps, mean, rstd):
        # Per row of ``x`` (R, L): the mean and 1 / sqrt(biased variance + eps), in x's dtype. Two
        # passes over the row (the second from cache): no cancellation.
        rows, n = x.shape
        zero = x.dtype.type(0.0)
        for i in prange(rows):
            r = x[i]
            s = zero
            for j in range(n):
                s += r[j]
            mu = s / n
            q = zero
            for j in range(n):
                d = r[j] - mu
                q += d * d
            mean[i] = mu
            rstd[i] = 1.0 / np.sqrt(q / n + eps)

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def affine(x, mu, a, c, w, b, out):
        # out[i, j] = ((x[i, j] - mu[i]) * a[i] + c[i]) * w[j] + b[j]
        rows, n = x.shape
        for i in prange(rows):
            r, o = x[i], out[i]
            m, s, t = mu[i], a[i], c[i]
            for j in range(n):
                o[j] = ((r[j] - m) * s + t) * w[j] + b[j]

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def grad_sums(g, x, mu, sg, sgx):
        # Per row: sum(g) and sum(g * (x - mu[i])) (Note [Row accumulation]).
        rows, n = x.shape
        zero = x.dtype.type(0.0)
        for i in prange(rows):
            gr, r = g[i], x[i]
            m = mu[i]
            s = zero
            q = zero
            for j in range(n):
                v = gr[j]
                s += v
                q += v * (r[j] - m)
            sg[i] = s
            sgx[i] = q

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def affine2(g, x, mu, a, b, c, out):
        # out[i, j] = g[i, j] * a[i] + (x[i, j] - mu[i]) * b[i] + c[i]
        rows, n = x.shape
        for i in prange(rows):
            gr, r, o = g[i], x[i], out[i]
            m, p, q, t = mu[i], a[i], b[i], c[i]
            for j in range(n):
                o[j] = gr[j] * p + (r[j] - m) * q + t

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def ln_backward(g, x, w, mean, rstd, dx, dwp, dbp):
        # Rows split into one chunk per partial accumulator. Per row: the sums of g * w and
        # g * w * (x - mean) (float64), then dx and the weight and bias partial sums from the row in
        # cache. The partial sums live in arrays local to the chunk: LLVM vectorises the loops only
        # when it can prove that they do not alias the rows (measured: 2.5x slower otherwise).
        rows, n = x.shape
        chunks = dwp.shape[0]
        per = (rows + chunks - 1) // chunks
        zero = x.dtype.type(0.0)
        for k in prange(chunks):
            dwk = np.zeros(n)
            dbk = np.zeros(n)
            for i in range(k * per, min(rows, (k + 1) * per)):
                gr, r, o = g[i], x[i], dx[i]
                m, s = mean[i], rstd[i]
                a = zero
                b = zero
                for j in range(n):
                    gw = gr[j] * w[j]
                    a += gw
                    b += gw * (r[j] - m)
                # dx = s * (g * w - a / n - (x - m) * s * s * b / n) = g * (w * s) + x * q + t
                q = -s * s * s * b / n
                t = -s * a / n - q * m
                qf, tf = o.dtype.type(q), o.dtype.type(t)
                for j in range(n):
                    o[j] = gr[j] * (w[j] * s) + r[j] * qf + tf
                for j in range(n):
                    dwk[j] += gr[j] * ((r[j] - m) * s)
                    dbk[j] += gr[j]
            for j in range(n):
                dwp[k, j] = dwk[j]
                dbp[k, j] = dbk[j]

    # batch_norm: per-channel loops over (N, C, L), parallel over chunks of the batch, each chunk
    # accumulating float64 partial sums per channel (no per-(n, c) scratch arrays: small spatial
    # sizes such as 4x4 or BatchNorm1d's L = 1 are dominated by such overheads otherwise).
    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def chan_sums(x, g, shift, ps, pq):
        # ps[k, c] = sum(v), pq[k, c] = sum(v * w) over chunk k's samples, v = x - shift[c] and
        # w = v (statistics: g is empty) or w = g (backward: ps sums g, pq sums g * (x - mean)).
        n_, c_, l_ = x.shape
        chunks = ps.shape[0]
        per = (n_ + chunks - 1) // chunks
        stats = g.shape[0] == 0
        zero = x.dtype.type(0.0)
        for k in prange(chunks):
            psk = np.zeros(c_)  # chunk-local partial sums: see ln_backward on aliasing
            pqk = np.zeros(c_)
            lo, hi = k * per, min(n_, (k + 1) * per)
            if l_ == 1:  # (N, C): vectorise across the channels
                x2 = x.reshape(n_, c_)
                if stats:
                    for n in range(lo, hi):
                        r = x2[n]
                        for c in range(c_):
                            v = r[c] - shift[c]
                            psk[c] += v
                            pqk[c] += v * v
                else:
                    g2 = g.reshape(n_, c_)
                    for n in range(lo, hi):
                        r, gr = x2[n], g2[n]
                        for c in range(c_):
                            psk[c] += gr[c]
                            pqk[c] += gr[c] * (r[c] - shift[c])
            else:
                for n in range(lo, hi):
                    for c in range(c_):
                        r = x[n, c]
                        sh = shift[c]
                        s = zero
                        q = zero
                        if stats:
                            for j in range(l_):
                                v = r[j] - sh
                                s += v
                                q += v * v
                        else:
                            gr = g[n, c]
                            for j in range(l_):
                                v = gr[j]
                                s += v
                                q += v * (r[j] - sh)
                        psk[c] += s
                        pqk[c] += q
            for c in range(c_):
                ps[k, c] = psk[c]
                pq[k, c] = pqk[c]

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def chan_affine(x, g, a, b, cc, out):
        # out = x * a[c] + cc[c], or with g given: out = g * a[c] + x * b[c] + cc[c]
        n_, c_, l_ = x.shape
        plain = g.shape[0] == 0
        for n in prange(n_):
            if l_ == 1:  # (N, C): vectorise across the channels
                r, o = x[n].reshape(c_), out[n].reshape(c_)
                if plain:
                    for c in range(c_):
                        o[c] = r[c] * a[c] + cc[c]
                else:
                    gr = g[n].reshape(c_)
                    for c in range(c_):
                        o[c] = gr[c] * a[c] + r[c] * b[c] + cc[c]
                continue
            for c in range(c_):
                r, o = x[n, c], out[n, c]
                p, t = a[c], cc[c]
                if plain:
                    for j in range(l_):
                        o[j] = r[j] * p + t
                else:
                    gr = g[n, c]
                    q = b[c]
                    for j in range(l_):
                        o[j] = gr[j] * p + r[j] * q + t

    # Note [Per-channel coefficients in one call]: between its two passes over the data, batch_norm
    # turns the per-chunk sums into per-channel statistics, running-statistic updates and affine
    # coefficients. As some 30 numpy calls on (C,) vectors that cost ~35 µs a layer, as much as the
    # passes themselves on MobileNet's small planes; these serial loops do it in one call. Sums and
    # coefficients are computed in float64, outputs written in their arrays' dtypes; an empty array
    # stands for an absent running statistic, weight or bias.
    @numba.njit(cache=True)
    def bn_coefs(ps, pq, shift, count, rm, rv, momentum, eps, w, b, a, cc, mean_out, invstd_out):
        k, c_ = ps.shape
        for c in range(c_):
            s = 0.0
            q = 0.0
            for i in range(k):
                s += ps[i, c]
                q += pq[i, c]
            d = s / count
            mean = shift[c] + d
            var = max(q / count - d * d, 0.0)
            if rm.shape[0] != 0:
                rm[c] = (1.0 - momentum) * rm[c] + momentum * mean
            if rv.shape[0] != 0:
                unbiased = var * (count / (count - 1)) if count > 1 else np.nan
                rv[c] = (1.0 - momentum) * rv[c] + momentum * unbiased
            invstd = 1.0 / np.sqrt(var + eps)
            av = invstd * w[c] if w.shape[0] != 0 else invstd
            a[c] = av
            cc[c] = (b[c] if b.shape[0] != 0 else 0.0) - mean * av
            mean_out[c] = mean
            invstd_out[c] = invstd

    @numba.njit(cache=True)
    def bn_grad_coefs(ps, pq, mean_t, invstd_t, w, count, training, a, b, cc, dw, db):
        # dx = g * a + x * b + cc per channel (training: through the batch statistics), dw, db.
        k, c_ = ps.shape
        for c in range(c_):
            sg = 0.0
            sgx = 0.0
            for i in range(k):
                sg += ps[i, c]
                sgx += pq[i, c]
            invstd = np.float64(invstd_t[c])
            av = invstd * w[c] if w.shape[0] != 0 else invstd
            a[c] = av
            if training:
                bv = -av * invstd * invstd * sgx / count
                b[c] = bv
                cc[c] = -av * sg / count - bv * np.float64(mean_t[c])
            else:
                b[c] = 0.0
                cc[c] = 0.0
            dw[c] = sgx * invstd
            db[c] = sg

    return row_moments, affine, grad_sums, affine2, ln_backward, chan_sums, chan_affine, bn_coefs, bn_grad_coefs


def _as_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` as a C-contiguous (rows, -1) array (a view when ``a`` is contiguous)."""
    return np.ascontiguousarray(a).reshape(rows, -1)


def _compute(a: np.ndarray) -> np.ndarray:
    """``a`` in a dtype the kernels take (float16 computes in float32)."""
    return a if a.dtype.type in _FLOATS else a.astype(np.float32)


@functools.lru_cache(maxsize=64)
def _ones(n: int, dtype) -> np.ndarray:
    """``n`` ones (the weight when there is none), made once per size; the kernels never write it."""
    return np.ones(n, dtype)


@functools.lru_cache(maxsize=64)
def _zeros(n: int, dtype) -> np.ndarray:
    """``n`` zeros (the bias when there is none), made once per size; the kernels never write it."""
    return np.zeros(n, dtype)


def _threads() -> int:
    return get_num_threads()  # flambeau's setting (numba's get_num_threads costs ~5 µs a call)


# --- batch_norm ---------------------------------------------------------------------------------------
def _as_ncl(a: np.ndarray) -> np.ndarray:
    """``a`` ``(N, C, *)`` as a C-contiguous (N, C, L) array (a view when ``a`` is contiguous)."""
    return np.ascontiguousarray(a).reshape(a.shape[0], a.shape[1], -1)


_NONE = {np.dtype(np.float32): np.empty((0, 0, 0), np.float32), np.dtype(np.float64): np.empty((0, 0, 0))}
_EMPTY = {np.dtype(np.float32): np.empty(0, np.float32), np.dtype(np.float64): np.empty(0)}


def _chunks(n: int) -> int:
    return max(1, min(_threads(), n))


def _in_dtype(v, t):
    """A ``(C,)`` array for the coefficient kernels: ``v`` itself if of dtype ``t`` (writes go through), a
    copy in ``t`` otherwise, an empty array for None."""
    if v is None:
        return _EMPTY[t]
    return v if v.dtype == t else v.astype(t)


@kernel("batch_norm", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps):
    n, c = x.shape[0], x.shape[1]
    xc = _compute(x)
    t = xc.dtype
    if x.size == 0:
        return np.empty(x.shape, x.dtype), np.zeros(c, t), np.zeros(c, t)
    x3 = _as_ncl(xc)
    kernels = _numba_norm()
    chan_sums, chan_affine = kernels[5:7]
    full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
    if training:
        # Sums of x - x[0, c, 0] (accumulated in float64 per chunk): the shift keeps the variance free
        # of cancellation.
        shift = x3[0, :, 0].copy()
        k = _chunks(n)
        ps = np.zeros((k, c))
        pq = np.zeros((k, c))
        chan_sums(x3, _NONE[t], shift, ps, pq)
        a = np.empty(c, t)
        cc = np.empty(c, t)
        mean = np.empty(c, t)
        invstd = np.empty(c, t)
        rm, rv = _in_dtype(running_mean, t), _in_dtype(running_var, t)
        kernels[7](ps, pq, shift, float(n * x3.shape[2]), rm, rv, float(momentum), float(eps),
                   _in_dtype(weight, t), _in_dtype(bias, t), a, cc, mean, invstd)
        for arr, updated in ((running_mean, rm), (running_var, rv)):
            if arr is not None and arr is not updated:
                arr[...] = updated  # a running statistic of another dtype (float16) was updated in a copy
        chan_affine(x3, _NONE[t], a, a, cc, full.reshape(x3.shape))
        return (full if t == x.dtype else full.astype(x.dtype)), mean, invstd
    mean = running_mean.astype(np.float64)
    var = running_var.astype(np.float64)
    invstd = 1.0 / np.sqrt(var + eps)
    a = invstd if weight is None else invstd * weight
    cc = -mean * a if bias is None else bias - mean * a
    chan_affine(x3, _NONE[t], a.astype(t), a.astype(t), cc.astype(t), full.reshape(x3.shape))
    return (full if t == x.dtype else full.astype(x.dtype)), mean.astype(t), invstd.astype(t)


@kernel("batch_norm_backward", "cpu")
def _k_batch_norm_backward(grad, x, weight, save_mean, save_invstd, training, mask):
    n, c = x.shape[0], x.shape[1]
    xc = _compute(x)
    t = xc.dtype
    if x.size == 0:
        return (np.zeros(x.shape, x.dtype) if mask[0] else None,
                np.zeros(c, t) if mask[1] else None, np.zeros(c, t) if mask[2] else None)
    x3 = _as_ncl(xc)
    g3 = _as_ncl(_compute(grad))
    kernels = _numba_norm()
    chan_sums, chan_affine = kernels[5:7]
    mean_t = save_mean.astype(t, copy=False)
    k = _chunks(n)
    ps = np.zeros((k, c))
    pq = np.zeros((k, c))
    chan_sums(x3, g3, mean_t, ps, pq)  # sum(g), sum(g * (x - mean)) per channel
    a, b, cc, dw, db = (np.empty(c, t) for _ in range(5))
    kernels[8](ps, pq, mean_t, save_invstd.astype(t, copy=False), _in_dtype(weight, t), float(n * x3.shape[2]),
               bool(training), a, b, cc, dw, db)
    dx = None
    if mask[0]:
        full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
        if training:
            chan_affine(x3, g3, a, b, cc, full.reshape(x3.shape))
        else:
            chan_affine(g3, _NONE[t], a, b, b, full.reshape(x3.shape))  # b is zero
        dx = full.astype(x.dtype, copy=False)
    return dx, (dw if mask[1] else None), (db if mask[2] else None)


# --- layer_norm ---------------------------------------------------------------------------------------
@kernel("layer_norm", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_layer_norm(x, k, weight, bias, eps):
    xc = _compute(x)
    t = xc.dtype
    n = math.prod(x.shape[x.ndim - k:])
    rows = math.prod(x.shape[:x.ndim - k])
    if x.size == 0:
        return np.empty(x.shape, x.dtype), np.zeros(rows, t), np.zeros(rows, t)
    x2 = _as_rows(xc, rows)
    row_moments, affine = _numba_norm()[:2]
    mean = np.empty(rows, t)
    rstd = np.empty(rows, t)
    row_moments(x2, float(eps), mean, rstd)
    full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
    out = full.reshape(x2.shape)
    w = _ones(n, t) if weight is None else np.ascontiguousarray(weight.reshape(-1), t)
    b = _zeros(n, t) if bias is None else np.ascontiguousarray(bias.reshape(-1), t)
    affine(x2, mean, rstd, _zeros(rows, t), w, b, out)
    out = full
    return (out if out.dtype == x.dtype else out.astype(x.dtype)), mean, rstd


@kernel("layer_norm_backward", "cpu")
def _k_layer_norm_backward(grad, x, k, mean, rstd, weight, mask):
    xc = _compute(x)
    t = xc.dtype
    n = math.prod(x.shape[x.ndim - k:])
    rows = math.prod(x.shape[:x.ndim - k])
    wshape = x.shape[x.ndim - k:]
    if x.size == 0:
        return (np.zeros(x.shape, x.dtype) if mask[0] else None,
                np.zeros(wshape, t) if mask[1] else None, np.zeros(wshape, t) if mask[2] else None)
    x2 = _as_rows(xc, rows)
    g2 = _as_rows(_compute(grad), rows)
    chunks = max(1, min(_threads(), rows))
    dwp = np.empty((chunks, n))  # every row written by the kernel
    dbp = np.empty((chunks, n))
    full = np.empty(x.shape, t)
    dx = full.reshape(x2.shape)
    w = _ones(n, t) if weight is None else np.ascontiguousarray(weight.reshape(-1), t)
    _numba_norm()[4](g2, x2, w, np.ascontiguousarray(mean.reshape(-1), t), np.ascontiguousarray(rstd.reshape(-1), t),
                  dx, dwp, dbp)
    return (full.astype(x.dtype, copy=False) if mask[0] else None,
            dwp.sum(0).astype(t).reshape(wshape) if mask[1] else None,
            dbp.sum(0).astype(t).reshape(wshape) if mask[2] else None)


# --- group_norm ---------------------------------------------------------------------------------------
@kernel("group_norm", "cpu")
def _k_group_norm(x, groups, weight, bias, eps):
    n, c = x.shape[0], x.shape[1]
    xc = _compute(x)
    t = xc.dtype
    if x.size == 0:
        return np.empty(x.shape, x.dtype), np.zeros((n, groups), t), np.zeros((n, groups), t)
    row_moments, affine = _numba_norm()[:2]
    xg = _as_rows(xc, n * groups)
    mean = np.empty(n * groups, t)
    rstd = np.empty(n * groups, t)
    row_moments(xg, float(eps), mean, rstd)
    # per (n, c) block: ((x - mean[n, g]) * rstd[n, g] * w[c] + b[c])
    per = c // groups
    mu_b = np.repeat(mean, per)
    a_b = np.repeat(rstd, per).reshape(n, c)
    if weight is not None:
        a_b = a_b * weight
    c_b = np.zeros((n, c)) if bias is None else np.broadcast_to(bias.astype(np.float64), (n, c))
    x2 = xg.reshape(n * c, -1)
    full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
    out = full.reshape(x2.shape)
    length = x2.shape[1]
    affine(x2, mu_b, a_b.astype(t).reshape(-1), np.ascontiguousarray(c_b, t).reshape(-1), _ones(length, t),
           _zeros(length, t), out)
    out = full
    return (out if out.dtype == x.dtype else out.astype(x.dtype)), mean.reshape(n, groups), rstd.reshape(n, groups)


@kernel("group_norm_backward", "cpu")
def _k_group_norm_backward(grad, x, groups, mean, rstd, weight, mask):
    n, c = x.shape[0], x.shape[1]
    xc = _compute(x)
    t = xc.dtype
    if x.size == 0:
        return (np.zeros(x.shape, x.dtype) if mask[0] else None,
                np.zeros(c, t) if mask[1] else None, np.zeros(c, t) if mask[2] else None)
    _, _, grad_sums, affine2 = _numba_norm()[:4]
    x2 = _as_rows(xc, n * c)
    g2 = _as_rows(_compute(grad), n * c)
    length = x2.shape[1]
    per = c // groups
    rstd64 = rstd.astype(np.float64).reshape(n, groups)
    mu_b = np.repeat(mean.reshape(-1).astype(t), per)
    sg = np.empty(n * c)
    sgx = np.empty(n * c)
    grad_sums(g2, x2, mu_b, sg, sgx)  # per (n, c): sum g, sum g * (x - mean[n, g])
    sg = sg.reshape(n, c)
    sgx = sgx.reshape(n, c)
    w = np.ones(c) if weight is None else weight.astype(np.float64)
    dx = dw = db = None
    if mask[0]:
        d = per * length
        r_b = np.repeat(rstd64, per, axis=1)  # (n, c)
        # dL/dxhat = g * w[c]; dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) over the group
        mgh = (sg * w).reshape(n, groups, per).sum(2) / d
        mghx = (sgx * w).reshape(n, groups, per).sum(2) * rstd64 / d
        a = r_b * w
        b = -np.repeat(rstd64 * rstd64 * mghx, per, axis=1)
        cc = -np.repeat(rstd64 * mgh, per, axis=1)
        full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
        out = full.reshape(x2.shape)
        affine2(g2, x2, mu_b, a.astype(t).reshape(-1), b.astype(t).reshape(-1), cc.astype(t).reshape(-1), out)
        dx = full.astype(x.dtype, copy=False)
    if mask[1]:
        dw = (sgx * np.repeat(rstd64, per, axis=1)).sum(0).astype(t)
    if mask[2]:
        db = sg.sum(0).astype(t)
    return dx, dw, db
