"""CPU kernels of scaled_dot_product_attention (declared in ``flambeau/_ops/attention.py``).

Two BLAS matmuls around a fused masked-softmax kernel: the scores are scaled, masked and normalised
in one numba pass over each row, parallel over rows (built on first use); rows whose every entry is
masked give zero weights, as torch's math backend does. The backward never recomputes the softmax:
it runs the four gradient matmuls around a fused softmax-backward pass on the saved weights.
Batched products of many heads run their single-threaded GEMMs in parallel over flambeau's threads
(Note [Heads in parallel] in ``linalg.py``). float16 computes in float32.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._kernels.cpu.linalg import batched_matmul as _bmm  # Note [Heads in parallel] in linalg.py
from flambeau._ops._registry import kernel


def _dense(a):
    """``a`` C-contiguous: heads split from one fused projection (``qkv.view(B, T, 3, H, d)``) are strided
    views whose batched products numpy runs at half speed (GPT's attention: 2.0 -> 1.0 ms forward, the
    copies included)."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


_expf_flush = _row_max = None  # numba helpers (_fast_exp's expf, _row_max's), set by _numba_attention()


@functools.cache
def _numba_attention():
    """Fused masked softmax forward (float32, float64) and softmax backward, compiled on first use.

    See Note [Vectorised expf] in nn_ops.py: the float32 kernel evaluates Cephes' expf
    polynomial so that LLVM vectorises the row loop.
    """
    # The kernels reach the shared expf helper as a module global (see _fast_exp), not a closure cell.
    global _expf_flush, _row_max
    import numba
    from numba import prange

    from flambeau._kernels.cpu._fast_exp import expf_helpers
    from flambeau._kernels.cpu._row_max import row_max_helper

    _, _expf_flush = expf_helpers()
    _row_max = row_max_helper()  # Note [Row maxima in eight lanes]

    @numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc"})
    def softmax_f32(s, mask, midx, has_mask, causal, scale, out):
        nb, nl, n = s.shape
        for r in prange(nb * nl):
            b = r // nl
            i = r - b * nl
            x = s[b, i]
            o = out[b, i]
            mrow = mask[midx[b], i if mask.shape[1] > 1 else 0]
            end = min(i + 1, n) if causal else n
            for j in range(end):
                v = x[j] * scale
                if has_mask:
                    v += mrow[j]
                o[j] = v
            m = _row_max(o[:end]) if end else np.float32(-np.inf)
            if m == -np.inf:  # every key masked: zero weights (torch's math backend)
                for j in range(n):
                    o[j] = np.float32(0.0)
                continue
            bits = np.empty(end, np.int32)
            nan = 0
            for j in range(end):
                v = o[j]
                y, b = _expf_flush(v - m)
                o[j] = y
                bits[j] = b
                nan |= v != v
            if nan:  # (expf takes NaN to 0) a NaN score makes the row NaN, as torch's and the float64 kernel's
                o[:] = np.float32(np.nan)
                continue
            sc = bits.view(np.float32)
            t = np.float32(0.0)
            for j in range(end):
                e = o[j] * sc[j]
                o[j] = e
                t += e
            inv = np.float32(1.0) / t
            for j in range(end):
                o[j] *= inv
            for j in range(end, n):
                o[j] = np.float32(0.0)

    @numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc"})
    def softmax_f64(s, mask, midx, has_mask, causal, scale, out):
        nb, nl, n = s.shape
        for r in prange(nb * nl):
            b = r // nl
            i = r - b * nl
            x = s[b, i]
            o = out[b, i]
            mrow = mask[midx[b], i if mask.shape[1] > 1 else 0]
            end = min(i + 1, n) if causal else n
            for j in range(end):
                v = x[j] * scale
                if has_mask:
                    v += mrow[j]
                o[j] = v
            m = _row_max(o[:end]) if end else -np.inf
            if m == -np.inf:
                for j in range(n):
                    o[j] = 0.0
                continue
            t = 0.0
            for j in range(end):
                e = np.exp(o[j] - m)
                o[j] = e
                t += e
            inv = 1.0 / t
            for j in range(end):
                o[j] *= inv
            for j in range(end, n):
                o[j] = 0.0

    @numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc"})
    def softmax_backward(p, dp, out):
        # out = p * (dp - sum(dp * p)) row by row (dp may alias out).
        rows, n = p.shape
        for r in prange(rows):
            pr = p[r]
            dr = dp[r]
            o = out[r]
            t = dr[0] * pr[0] * 0
            for j in range(n):
                t += dr[j] * pr[j]
            for j in range(n):
                o[j] = pr[j] * (dr[j] - t)

    return softmax_f32, softmax_f64, softmax_backward


def _softmax_rows(s3, mask, is_causal, scale):
    """Masked, scaled softmax of ``s3`` (B, L, S) in place; ``mask`` None or (Bm, Lm, S) with ``midx``."""
    f32, f64, _ = _numba_attention()
    if mask is None:
        m3, midx, has = np.zeros((1, 1, 1), s3.dtype), np.zeros(s3.shape[0], np.int64), False
    else:
        m3, midx = mask
        has = True
    (f32 if s3.dtype == np.float32 else f64)(s3, m3, midx, has, is_causal, s3.dtype.type(scale), s3)
    return s3


def _mask_layout(mask, batch_shape, ns, npdt):
    """``mask`` as a contiguous (Bm, Lm, S) array plus the index of each score batch's mask batch."""
    mask = np.asarray(mask, npdt)
    mb = mask.shape[:-2] if mask.ndim >= 2 else ()
    lm = mask.shape[-2] if mask.ndim >= 2 else 1
    # Writable C-contiguous copies where needed: a read-only array would be another numba type.
    m3 = np.broadcast_to(mask, mb + (lm, ns)).reshape((-1, lm, ns))
    if not (m3.flags.c_contiguous and m3.flags.writeable):
        m3 = m3.copy()
    ids = np.arange(m3.shape[0], dtype=np.int64).reshape(mb) if mb else np.zeros((), np.int64)
    midx = np.broadcast_to(ids, batch_shape).reshape(-1).copy()
    return m3, midx


@kernel("scaled_dot_product_attention", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_sdpa(q, k, v, mask, drop, is_causal, scale):
    cdt = q.dtype
    half = cdt not in (np.float32, np.float64)
    if half:
        q, k, v = q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)
        mask = None if mask is None else mask.astype(np.float32)
    q, k, v = _dense(q), _dense(k), _dense(v)
    s = _bmm(q, np.swapaxes(k, -1, -2))
    nl, ns = s.shape[-2:]
    batch_shape = s.shape[:-2]
    if mask is not None and mask.ndim > 2:
        batch_shape = np.broadcast_shapes(batch_shape, mask.shape[:-2])
        if batch_shape != s.shape[:-2]:  # the mask has batch dims the scores lack: broadcast the scores
            s = np.broadcast_to(s, batch_shape + (nl, ns))
    if not s.flags.c_contiguous or not s.flags.writeable:
        s = np.ascontiguousarray(s) if s.flags.writeable else s.copy()
    s3 = s.reshape((-1, nl, ns))
    if s3.size:
        ml = None if mask is None else _mask_layout(mask, batch_shape, ns, s.dtype)
        _softmax_rows(s3, ml, is_causal, scale)
    attn = s3.reshape(s.shape)
    p = attn if drop is None else attn * drop
    out = _bmm(p, v)
    if half:
        return out.astype(cdt), attn.astype(cdt)
    return out, attn


@kernel("_scaled_dot_product_attention_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_sdpa_backward(grad, q, k, v, attn, drop, scale):
    cdt = q.dtype
    half = cdt not in (np.float32, np.float64)
    if half:
        grad, q, k, v, attn = (x.astype(np.float32) for x in (grad, q, k, v, attn))
    grad, q, k, v = _dense(grad), _dense(q), _dense(k), _dense(v)
    p = attn if drop is None else attn * drop
    gv = _bmm(np.swapaxes(p, -1, -2), grad)
    dp = _bmm(grad, np.swapaxes(v, -1, -2))
    if drop is not None:
        dp *= drop
    if not dp.flags.c_contiguous:
        dp = np.ascontiguousarray(dp)
    a = np.ascontiguousarray(np.broadcast_to(attn, dp.shape))
    ns = dp.shape[-1]
    if dp.size:
        _numba_attention()[2](a.reshape(-1, ns), dp.reshape(-1, ns), dp.reshape(-1, ns))
    ds = dp  # gradient of the masked scores
    sc = ds.dtype.type(scale)
    gq = _bmm(ds, k)
    gq *= sc
    gk = _bmm(np.swapaxes(ds, -1, -2), q)
    gk *= sc
    if half:
        return gq.astype(cdt), gk.astype(cdt), gv.astype(cdt), ds.astype(cdt)
    return gq, gk, gv, ds

