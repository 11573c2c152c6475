"""CUDA kernels of the normalisation operators (the CPU kernels: ``flambeau._kernels.cpu.normalization``).

Conventions: those of ``flambeau._ops.normalization`` (the CPU kernels'). Every operator views its
(C-contiguous) input as *rows* that share a statistic: layer_norm's rows are the normalised trailing
dims, group_norm's the ``(n, group)`` blocks, batch_norm's the channels (strided: ``N`` runs of
``L = H * W``). One element ``k`` of row ``r`` is at ``(k // inner) * ostride + r * rstride + k % inner``,
so four kernel templates serve the three operators:

- ``stats``: one block per row (a long row: several, Note [Split rows]); each thread runs Welford's
  algorithm over its elements, the block merges the ``(count, mean, M2)`` triples in shared memory (a
  tree), and thread 0 writes the mean and ``1 / sqrt(var + eps)``; in training it also updates
  batch_norm's running statistics in place on the device (momentum, unbiased variance), with no host
  synchronisation.
- ``affine``: one thread per element, ``(x - mean[s]) * rstd[s] * w[a] + b[a]`` with the statistic
  and affine indices ``s``, ``a`` computed from the flat index (once where they are one).
- ``grad_sums``: one block per row (or several, as ``stats``), the tree-reduced sums of ``g * w`` and
  ``g * w * xhat`` (with ``xhat = (x - mean) * rstd`` and per-element statistic and weight indices): the
  per-row sums of the input gradient, and, over columns (layer_norm) or channels, ``grad_weight`` and
  ``grad_bias``.
- ``grad_input``: one thread per element, ``rstd * (g * w - c * sum1 - xhat * c * sum2)`` (the
  weight outside the bracket for batch_norm; ``c = 0`` in evaluation mode).

layer_norm's rows are contiguous, and up to ``_WHOLE`` blocks' worth long (32,768 elements) one block holds a
whole row: its forward and its input gradient then take one launch each (``ln_forward``, ``ln_grad_input``;
Note [Layer norm rows in one launch]).

So every backward is two to five launches, deterministic (no atomics). Sums accumulate in the
compute dtype: float32 (float16 inputs compute in float32, as on the CPU) or float64.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import np_name
from flambeau._kernels.cuda import _cudnn_bn as cudnn_bn
from flambeau._kernels.cuda._direct import FlatArg
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import (
    COLUMN_TILE,
    GROUP,
    REDUCE_BLOCK,
    be,
    bind_numba_cuda,
    block_sums,
    c_elem_strides,
    column_parts,
    column_tile,
    jit,
    launch_1d,
    launch_keyed,
    row_parts,
    sim,
    stream,
)
from flambeau._kernels.cuda.core import copy_into
from flambeau._kernels.cuda.pooling import cast_back, compute_input
from flambeau._ops._registry import kernel

__all__ = ["ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)


# --- kernel templates ------------------------------------------------------------------------------------
# Note [Split rows]
#     A row a block reduces may be long and the rows few: batch_norm's are the channels (64 rows of 400,000
#     elements in a ResNet's first layer at batch 32), so one block per row would leave most of a GPU idle
#     and each thread walking 1,500 elements one dependent load at a time. ``row_parts`` (the reductions'
#     rule) splits a long row over ``P`` blocks (``blockIdx.y``): in mode "partial" block ``(r, p)`` reduces
#     elements ``p * B + t, p * B + t + P * B, ...`` of row ``r`` into a partial result ``r * P + p``, and a
#     second launch in mode "parts" (one block per row) combines the ``P`` partials of each row; a row of at
#     most ``_WHOLE * B`` elements is one block in mode "final", one launch as before. The templates below are
#     written once for the three modes (a mode is a compile-time constant of its kernel).
_MODES = ("final", "partial", "parts")
# A row of up to _WHOLE * B elements stays one block: with four loads in flight a thread walks 128 elements
# (32 groups) in about the host time of the second launch a split costs, which small models, whose GPU
# waits for the host, would pay for nothing (ResNet-18 on 32x32 images: rows of 8,192 to 32,768).
_WHOLE = 128


@functools.cache
def _index_helpers():
    """The device functions ``(row_offset, wrap, quot)`` the templates below address their elements with, each
    a shape of ``_index_math``'s offsets (Note [Narrow index math] there): ``row_offset(k, inner, ostride,
    base)``, element ``k`` of a row laid out in runs of ``inner`` contiguous elements ``ostride`` apart from
    ``base``; ``wrap(j, div, mod)``, ``(j // div) % mod`` (the statistic or channel of flat element ``j``);
    ``quot(j, div)``, ``j // div``. (Outer extents are never divided by: ``j`` stands in for them.)"""
    bind_numba_cuda(globals())
    offset = index_device("offset")

    def row_offset(k, inner, ostride, base):
        return offset(base, k, (k, inner), (ostride, 1))

    def wrap(j, div, mod):
        return offset(0, j, (j, mod, div), (0, 1, 0))

    return cuda.jit(device=True)(row_offset), cuda.jit(device=True)(wrap), index_device("quot")


def _stats_py(acc, B=REDUCE_BLOCK, mode="final"):
    """Per row: mean and 1 / sqrt(biased variance + eps) (per thread, Welford's update merging each group of four
    elements' own mean and M2, one division a group; threads merged in shared memory with
    Chan's formula); with ``update``, ``rm[r]`` and ``rv[r]`` move towards the mean and the unbiased
    variance. Mode "partial" writes each block's ``(count, mean, M2)`` to ``pc/pm/pq[r * P + p]``, mode
    "parts" merges the ``P`` of each row (Note [Split rows])."""
    bind_numba_cuda(globals())
    partial = mode == "partial"
    parts = mode == "parts"
    row_offset, _, _ = _index_helpers()

    def stats(mean_out, rstd_out, x, K, inner, ostride, rstride, eps, rm, rv, momentum, update, P, pc, pm, pq):
        r = cuda.blockIdx.x
        p = cuda.blockIdx.y
        t = cuda.threadIdx.x
        sc = cuda.shared.array(B, acc)
        sm = cuda.shared.array(B, acc)
        sq = cuda.shared.array(B, acc)
        c = acc(0)
        m = acc(0)
        q = acc(0)
        if parts:
            k = t
            while k < P:
                j = r * P + k
                cb = pc[j]
                if cb > acc(0):
                    n = c + cb
                    d = pm[j] - m
                    m += d * (cb / n)
                    q += pq[j] + d * d * (c * cb / n)
                    c = n
                k += B
        else:
            # the elements p * B + t, + P * B, ... in groups of four loaded before any is used (Note [Grouped
            # loads] in elementwise; the last index stands in for those past the row), taken in that order
            step = P * B
            base = r * rstride
            last = K - 1
            k = p * B + t
            while k < K:
                ks = (k, min(k + step, last), min(k + 2 * step, last), min(k + 3 * step, last))
                xs = (x[row_offset(ks[0], inner, ostride, base)],
                      x[row_offset(ks[1], inner, ostride, base)],
                      x[row_offset(ks[2], inner, ostride, base)],
                      x[row_offset(ks[3], inner, ostride, base)])
                if k + 3 * step < K:  # all four: their mean and M2, merged by Chan's formula (one division)
                    v0 = acc(xs[0])
                    v1 = acc(xs[1])
                    v2 = acc(xs[2])
                    v3 = acc(xs[3])
                    m4 = ((v0 + v1) + (v2 + v3)) * acc(0.25)
                    e0 = v0 - m4
                    e1 = v1 - m4
                    e2 = v2 - m4
                    e3 = v3 - m4
                    n = c + acc(4)
                    f = acc(4) / n
                    d = m4 - m
                    m += d * f
                    q += (e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3) + d * d * c * f
                    c = n
                else:
                    for u in range(4):
                        if k + u * step < K:
                            v = acc(xs[u])
                            c += acc(1)
                            d = v - m
                            m += d / c
                            q += d * (v - m)
                k += 4 * step
        sc[t] = c
        sm[t] = m
        sq[t] = q
        cuda.syncthreads()
        width = B // 2
        while width > 0:
            if t < width:
                ca = sc[t]
                cb = sc[t + width]
                n = ca + cb
                if cb > acc(0):
                    d = sm[t + width] - sm[t]
                    sm[t] = sm[t] + d * (cb / n)
                    sq[t] = sq[t] + sq[t + width] + d * d * (ca * cb / n)
                    sc[t] = n
            cuda.syncthreads()
            width //= 2
        if t == 0:
            if partial:
                j = r * P + p
                pc[j] = sc[0]
                pm[j] = sm[0]
                pq[j] = sq[0]
            else:
                mean = sm[0]
                var = sq[0] / acc(K)
                mean_out[r] = mean
                rstd_out[r] = acc(1) / math.sqrt(var + acc(eps))
                if update:
                    rm[r] = (1.0 - momentum) * rm[r] + momentum * mean
                    unbiased = var * acc(K) / acc(K - 1) if K > 1 else acc(math.nan)
                    rv[r] = (1.0 - momentum) * rv[r] + momentum * unbiased

    return stats


def _affine_py():
    bind_numba_cuda(globals())

    _, wrap, _ = _index_helpers()

    def affine(out, x, mean, rstd, w, b, has_w, has_b, sdiv, smod, adiv, amod, same, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        last = n - 1
        while i < n:  # GROUP (4) elements a thread, loaded first: Note [Grouped loads] in elementwise
            js = (i, i + step, i + 2 * step, i + 3 * step)
            xs = (x[i], x[min(js[1], last)], x[min(js[2], last)], x[min(js[3], last)])  # (in bounds)
            for u in range(4):
                j = js[u]
                if j < n:
                    s = wrap(j, sdiv, smod)
                    a = s if same else wrap(j, adiv, amod)
                    y = (xs[u] - mean[s]) * rstd[s]
                    if has_w:
                        y = y * w[a]
                    if has_b:
                        y = y + b[a]
                    out[j] = y
            i += 4 * step

    return affine


def _grad_sums_py(acc, B=REDUCE_BLOCK, mode="final"):
    """Per row ``r``: ``s1[r] = sum(g * w)``, ``s2[r] = sum(g * w * (x - mean[si]) * rstd[si])``, the
    statistic index ``si = (k // sdiv_k) * smul_k + r // sdiv_r`` and the weight index
    ``(k // wdiv) % wmod + (r % wrmod) * wrmul`` of element ``k``. Mode "partial" writes each block's sums
    to ``p1/p2[r * P + p]``, mode "parts" adds the ``P`` of each row (Note [Split rows])."""
    bind_numba_cuda(globals())
    partial = mode == "partial"
    parts = mode == "parts"
    row_offset, wrap, quot = _index_helpers()
    _, block_sum2 = block_sums()

    def grad_sums(s1, s2, g, x, mean, rstd, w, has_w, K, inner, ostride, rstride, sdiv_k, smul_k, sdiv_r,
                  wdiv, wmod, wrmod, wrmul, P, p1, p2):
        r = cuda.blockIdx.x
        p = cuda.blockIdx.y
        t = cuda.threadIdx.x
        b1 = cuda.shared.array(B, acc)
        b2 = cuda.shared.array(B, acc)
        a1 = acc(0)
        a2 = acc(0)
        if parts:
            k = t
            while k < P:
                a1 += p1[r * P + k]
                a2 += p2[r * P + k]
                k += B
        else:
            step = P * B  # in groups of four, as stats'
            base = r * rstride
            last = K - 1
            si_r = r // sdiv_r
            wi_r = (r % wrmod) * wrmul
            k = p * B + t
            while k < K:
                ks = (k, min(k + step, last), min(k + 2 * step, last), min(k + 3 * step, last))
                offs = (row_offset(ks[0], inner, ostride, base),
                        row_offset(ks[1], inner, ostride, base),
                        row_offset(ks[2], inner, ostride, base),
                        row_offset(ks[3], inner, ostride, base))
                gs = (g[offs[0]], g[offs[1]], g[offs[2]], g[offs[3]])
                xs = (x[offs[0]], x[offs[1]], x[offs[2]], x[offs[3]])
                for u in range(4):
                    kk = k + u * step
                    if kk < K:
                        si = si_r if smul_k == 0 else quot(kk, sdiv_k) * smul_k + si_r
                        gv = acc(gs[u])
                        if has_w:
                            gv = gv * acc(w[wrap(kk, wdiv, wmod) + wi_r])
                        a1 += gv
                        a2 += gv * ((acc(xs[u]) - acc(mean[si])) * acc(rstd[si]))
                k += 4 * step
        b1[t] = a1
        b2[t] = a2
        block_sum2(b1, b2, t, B)
        if t == 0:
            if partial:
                p1[r * P + p] = b1[0]
                p2[r * P + p] = b2[0]
            else:
                s1[r] = b1[0]
                s2[r] = b2[0]

    return grad_sums


# Note [Column sums]
#     The weight and bias gradients of layer_norm (and of batch_norm over (N, C) inputs) sum each column of a
#     row-major (K, C) gradient: as rows of grad_sums, each thread's load came from another row, 32 memory
#     sectors a warp for 128 useful bytes (layer_norm's backward over 8192x768: 2 x 244 us against 45 us for
#     torch's on an H100). They run as the reductions' column tiles do (Note [Column tiles] in reduction): a
#     block of TX adjacent columns by TY threads, a warp reading TX neighbouring elements of a row, each thread
#     summing rows ``p * TY + ty, + P * TY, ...`` four at a time; past a million elements the columns split
#     over ``P`` tiles whose partial sums, laid out (P, C), a second launch adds (below, one launch: host time
#     is what the small models it serves wait on).
_COLUMN_WHOLE = 1 << 20  # elements up to which column sums take one launch (GPT 2048 x 128: 4 tiles, tens of us)


def _column_sums_py(acc, tile, mode="final"):
    """Per column ``c`` of row-major (K, C) ``g`` and ``x``: ``s1[c] = sum(g)``, ``s2[c] = sum(g * (x -
    mean[si]) * rstd[si])``, with statistic index ``si = k * smul_k + c // sdiv_r`` of row ``k`` (Note [Column
    sums]); modes as :func:`_grad_sums_py`'s, partial sums at ``p1/p2[p * C + c]``."""
    bind_numba_cuda(globals())
    TX, TY = tile
    partial = mode == "partial"
    parts = mode == "parts"

    def column_sums(s1, s2, g, x, mean, rstd, K, C, smul_k, sdiv_r, P, p1, p2):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        c = cuda.blockIdx.x * TX + tx
        p = cuda.blockIdx.y
        b1 = cuda.shared.array((TY, TX), acc)
        b2 = cuda.shared.array((TY, TX), acc)
        a1 = acc(0)
        a2 = acc(0)
        if c < C:
            if parts:
                k = ty
                while k < P:
                    a1 += p1[k * C + c]
                    a2 += p2[k * C + c]
                    k += TY
            else:
                si_c = c // sdiv_r
                step = P * TY
                last = K - 1
                k = p * TY + ty
                while k < K:  # four rows loaded before any is used (Note [Grouped loads] in elementwise)
                    ks = (k, min(k + step, last), min(k + 2 * step, last), min(k + 3 * step, last))
                    gs = (g[ks[0] * C + c], g[ks[1] * C + c], g[ks[2] * C + c], g[ks[3] * C + c])
                    xs = (x[ks[0] * C + c], x[ks[1] * C + c], x[ks[2] * C + c], x[ks[3] * C + c])
                    for u in range(4):
                        kk = k + u * step
                        if kk < K:
                            si = si_c + kk * smul_k
                            gv = acc(gs[u])
                            a1 += gv
                            a2 += gv * ((acc(xs[u]) - acc(mean[si])) * acc(rstd[si]))
                    k += 4 * step
        b1[ty, tx] = a1
        b2[ty, tx] = a2
        cuda.syncthreads()
        if ty == 0 and c < C:
            for r in range(1, TY):
                a1 += b1[r, tx]
                a2 += b2[r, tx]
            if partial:
                p1[p * C + c] = a1
                p2[p * C + c] = a2
            else:
                s1[c] = a1
                s2[c] = a2

    return column_sums


def _grad_input_py():
    bind_numba_cuda(globals())

    _, wrap, _ = _index_helpers()

    def grad_input(dx, g, x, mean, rstd, s1, s2, w, has_w, w_inside, c, sdiv, smod, adiv, amod, same, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        last = n - 1
        while i < n:  # as affine's
            js = (i, i + step, i + 2 * step, i + 3 * step)
            gs = (g[i], g[min(js[1], last)], g[min(js[2], last)], g[min(js[3], last)])
            xs = (x[i], x[min(js[1], last)], x[min(js[2], last)], x[min(js[3], last)])
            for u in range(4):
                j = js[u]
                if j < n:
                    s = wrap(j, sdiv, smod)
                    a = s if same else wrap(j, adiv, amod)
                    rs = rstd[s]
                    gv = gs[u]
                    if has_w and w_inside:
                        gv = gv * w[a]
                    y = rs * (gv - c * s1[s] - (xs[u] - mean[s]) * rs * c * s2[s])
                    if has_w and not w_inside:
                        y = y * w[a]
                    dx[j] = y
            i += 4 * step

    return grad_input


# Note [Layer norm rows in one launch]
#     layer_norm's statistics and affine pass were two launches forward, and its input gradient's row sums and
#     the gradient itself two more backward: host time a GPU waits for in a transformer's step (a small GPT
#     normalises nine times a step, 100 us of host time per backward on the fake device of
#     tools/host_overhead.py), and the row read from memory twice. Its rows are contiguous and, up to
#     ``_WHOLE * B`` elements (the split rule of Note [Split rows]), one block's: the block reduces the row, every
#     thread reads the result from shared memory and writes its own elements, so each direction is one launch.
#     The statistics are two passes over the row (its sum, then the squared deviations from the mean): exact
#     like Welford's, and the second pass reads what the first brought into the cache. The weight and bias
#     gradients stay column sums (Note [Column sums]); longer rows keep the split templates.
def _ln_forward_py(acc, B=REDUCE_BLOCK, mode="final"):
    """One block per contiguous row ``r`` of ``K`` elements (Note [Layer norm rows in one launch]): ``mean[r]``,
    ``rstd[r] = 1 / sqrt(biased variance + eps)`` and ``out = (x - mean) * rstd * w + b`` (``w`` and ``b``
    under their flags, indexed by the element's place in its row)."""
    bind_numba_cuda(globals())
    block_sum, _ = block_sums()

    def ln_forward(out, mean_out, rstd_out, x, w, b, has_w, has_b, K, eps):
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        base = r * K
        a = acc(0)
        k = t
        while k < K:
            a += acc(x[base + k])
            k += B
        buf[t] = a
        block_sum(buf, t, B)
        mean = buf[0] / acc(K)
        cuda.syncthreads()  # every thread has read buf[0] before it is written again
        a = acc(0)
        k = t
        while k < K:
            d = acc(x[base + k]) - mean
            a += d * d
            k += B
        buf[t] = a
        block_sum(buf, t, B)
        rstd = acc(1) / math.sqrt(buf[0] / acc(K) + acc(eps))
        if t == 0:
            mean_out[r] = mean
            rstd_out[r] = rstd
        k = t
        while k < K:
            y = (acc(x[base + k]) - mean) * rstd
            if has_w:
                y = y * acc(w[k])
            if has_b:
                y = y + acc(b[k])
            out[base + k] = y
            k += B

    return ln_forward


def _ln_grad_input_py(acc, B=REDUCE_BLOCK, mode="final"):
    """One block per contiguous row ``r`` of ``K`` elements (Note [Layer norm rows in one launch]): the sums
    ``s1 = sum(g * w)`` and ``s2 = sum(g * w * xhat)`` of the row, then ``dx = rstd * (g * w - s1 / K - xhat *
    s2 / K)`` (``grad_input``'s formula with the weight inside, ``xhat = (x - mean[r]) * rstd[r]``)."""
    bind_numba_cuda(globals())
    _, block_sum2 = block_sums()

    def ln_grad_input(dx, g, x, mean, rstd, w, has_w, K):
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        b1 = cuda.shared.array(B, acc)
        b2 = cuda.shared.array(B, acc)
        base = r * K
        mu = acc(mean[r])
        rs = acc(rstd[r])
        a1 = acc(0)
        a2 = acc(0)
        k = t
        while k < K:
            gv = acc(g[base + k])
            if has_w:
                gv = gv * acc(w[k])
            a1 += gv
            a2 += gv * ((acc(x[base + k]) - mu) * rs)
            k += B
        b1[t] = a1
        b2[t] = a2
        block_sum2(b1, b2, t, B)
        c = acc(1) / acc(K)
        c1 = c * b1[0]
        c2 = c * b2[0]
        k = t
        while k < K:
            gv = acc(g[base + k])
            if has_w:
                gv = gv * acc(w[k])
            dx[base + k] = rs * (gv - c1 - (acc(x[base + k]) - mu) * rs * c2)
            k += B

    return ln_grad_input


def _eval_stats_py():
    bind_numba_cuda(globals())

    def eval_stats(mean_out, invstd_out, rm, rv, eps, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            mean_out[i] = rm[i]
            invstd_out[i] = 1.0 / math.sqrt(float(rv[i]) + eps)
            i += step

    return eval_stats


_PY = {"stats": _stats_py, "grad_sums": _grad_sums_py, "affine": _affine_py, "grad_input": _grad_input_py,
       "eval_stats": _eval_stats_py, "column_sums": _column_sums_py, "ln_forward": _ln_forward_py,
       "ln_grad_input": _ln_grad_input_py}


@functools.cache
def _kernel(which: str, acc: str = "", block: int = 0, mode: str = "final"):
    bind_numba_cuda(globals())
    py = _PY[which](np.dtype(acc).type, block, mode) if block else _PY[which]()
    return jit(py)


def _block() -> int:
    return 2 if sim() else REDUCE_BLOCK  # (the simulator runs each GPU thread as a Python thread)


# --- launchers -----------------------------------------------------------------------------------------
def _copied(a, t) -> bool:
    """Whether :func:`_vec_t` copies ``a``."""
    return a.dtype is not t and a.dtype != t or not be().is_c_contiguous(a)


def _vec_t(a, t):
    """``a`` as a 1-D contiguous array of dtype ``t`` for a launch (its flat view when it is one: writes go
    through; Note [Direct kernel launches]'s ``FlatArg`` on a GPU); None stays None (:func:`_vec_or` gives
    launches a stand-in). Idempotent: the ops convert a weight once and hand it to several launchers, which
    convert again."""
    if a is None or a.__class__ is FlatArg:
        return a
    backend = be()
    if not _copied(a, t):
        return backend.flat_arg(a)
    out = backend.empty(a.shape, t)
    copy_into(out, a)
    return backend.flat_view(out)


def _vec_or(a, t, stand_in):
    """:func:`_vec_t` of ``a``, or ``stand_in`` (a launch argument of ``t`` already made) where ``a`` is None: the
    templates read a weight or bias only under its flag, so an absent one needs no allocation of its own."""
    return stand_in if a is None else _vec_t(a, t)


def _shaped(a, shape):
    """The C-contiguous array ``a`` viewed with ``shape`` (as many elements)."""
    return be().as_strided(be().flat_view(a), tuple(shape), c_elem_strides(tuple(shape)), 0)


def _flat(a):
    return be().flat_arg(a)


# Note [Keyed normalisation launches]
#     The templates take flat views and 1-d allocations of the compute dtype ``t`` only (statistics,
#     weights and dummies alike, through _flat and _vec_t), Python ints for the geometry, Python floats and
#     bools for eps, momentum and the flags, and ``t``'s scalar type for ``c``: ``t`` fixes every argument
#     type, and keys the launch (``launch_keyed``), which spares typing a dozen arguments per launch.
def _split_launch(which: str, rows: int, K: int, t, outputs: tuple, inputs: tuple, tail: tuple, parts: int):
    """Launch template ``which`` (``stats`` or ``grad_sums``) over ``rows`` rows of ``K`` elements, split into
    partial blocks for long rows (Note [Split rows]). ``outputs`` lead the arguments, ``inputs`` and ``tail``
    (the input-only arguments) follow them; ``parts`` partial arrays (per output) end them."""
    P = _row_parts(K)
    _launch_in_modes(which, rows, _block(), P, rows * P, t, outputs, (*inputs, *tail), parts)


def _row_parts(K: int) -> int:
    """How many blocks share a row of ``K`` elements (Note [Split rows]): 1 where one block holds it."""
    return row_parts(K, _block(), 8 if sim() else _WHOLE)


def _launch_rows(which: str, grid: int, block, t, *args) -> None:
    """Template ``which`` in mode "final", ``grid`` blocks (a row each) of ``block`` threads, on ``args`` keyed by
    ``t`` (Note [Keyed normalisation launches])."""
    launch_keyed(_kernel(which, np_name(t), block), ((grid, 1), block, stream()), t, *args)


def _launch_in_modes(which: str, grid: int, block, P: int, count: int, t, outputs: tuple, args: tuple, parts: int):
    """Launch template ``which``, ``grid`` blocks of ``block`` threads: one launch in mode "final" when ``P`` is
    1, else mode "partial" with ``P`` blocks along y into ``parts`` fresh arrays of ``count`` partial results,
    then mode "parts" combining them. The arguments: ``outputs``, ``args``, ``P``, the partial arrays, keyed
    by ``t`` (Note [Keyed normalisation launches])."""
    if P == 1:
        dummies = (outputs[0],) * parts  # (never touched in mode "final"; of ``t`` as the key requires)
        _launch_rows(which, grid, block, t, *outputs, *args, 1, *dummies)
        return
    acc = np_name(t)
    backend = be()
    partials = backend.flat_parts(backend.empty((count * parts,), t), parts)  # (one allocation for them all)
    launch_keyed(_kernel(which, acc, block, "partial"), ((grid, P), block, stream()), t,
                 *outputs, *args, P, *partials)
    launch_keyed(_kernel(which, acc, block, "parts"), ((grid, 1), block, stream()), t,
                 *outputs, *args, P, *partials)


def _stats(x, rows, layout, eps, t, running=None):
    """``(mean, rstd)`` of every row of ``x`` (``layout`` = ``(K, inner, ostride, rstride)``); ``running``:
    ``(rm, rv, momentum)`` to update in place (arrays of ``t``, or None)."""
    backend = be()
    mean = backend.empty((rows,), t)
    rstd = backend.empty((rows,), t)
    rm, rv, momentum = running if running is not None else (None, None, 0.0)
    # stands in for a missing running statistic: written (and so of ``rows``) when the other one is updated
    dummy = None if rm is not None and rv is not None else backend.empty((1 if running is None else rows,), t)
    _split_launch("stats", rows, layout[0], t, (mean, rstd), (_flat(x),),
                  (*layout, float(eps), dummy if rm is None else rm, dummy if rv is None else rv, float(momentum),
                   running is not None), 3)
    return mean, rstd


def _affine(x, mean, rstd, w, b, index, t):
    backend = be()
    out = backend.empty(x.shape, t)
    n = x.size
    grid, block = launch_1d(n, GROUP)
    launch_keyed(_kernel("affine"), (grid, block, stream()), t, _flat(out), _flat(x), mean, rstd, _vec_or(w, t, mean),
                 _vec_or(b, t, mean), w is not None, b is not None, *index, _same_index(index), n)
    return out


def _same_index(index) -> bool:
    """Whether the statistic and affine indices ``(sdiv, smod, adiv, amod)`` are one (batch_norm's channel):
    the templates then compute it once per element."""
    return index[:2] == index[2:]


def _grad_sums(g, x, mean, rstd, w, rows, layout, stat_index, w_index, t):
    backend = be()
    s1 = backend.empty((rows,), t)
    s2 = backend.empty((rows,), t)
    K, inner, ostride, rstride = layout
    sdiv_k, smul_k, sdiv_r = stat_index
    if w is None and inner == 1 and rstride == 1 and ostride == rows and (sdiv_k == 1 or smul_k == 0):
        # the columns of a row-major (K, rows): Note [Column sums] (layer_norm's weight and bias gradients,
        # batch_norm's and group_norm's channel sums over (N, C) inputs)
        _column_sums(g, x, mean, rstd, K, rows, (smul_k, sdiv_r), t, (s1, s2))
        return s1, s2
    _split_launch("grad_sums", rows, layout[0], t, (s1, s2), (_flat(g), _flat(x), mean, rstd, _vec_or(w, t, mean)),
                  (w is not None, *layout, *stat_index, *w_index), 2)
    return s1, s2


def _column_sums(g, x, mean, rstd, K, C, stat_index, t, outputs):
    """Launch the column tiles of Note [Column sums] (``stat_index``: their ``(smul_k, sdiv_r)``): one launch,
    or partial sums then their sums."""
    TX, _ = tile = column_tile()
    # a small gradient stays one launch, whose host time small (host-bound) models would pay for nothing
    P = 1 if K * C <= (0 if sim() else _COLUMN_WHOLE) else column_parts(K, C)
    _launch_in_modes("column_sums", (C + TX - 1) // TX, tile, P, P * C, t, outputs,
                     (_flat(g), _flat(x), mean, rstd, K, C, *stat_index), 2)


def _grad_input(g, x, mean, rstd, s1, s2, w, w_inside, c, index, t, back):
    backend = be()
    dx = backend.empty(x.shape, t)
    n = x.size
    grid, block = launch_1d(n, GROUP)
    launch_keyed(_kernel("grad_input"), (grid, block, stream()), t, _flat(dx), _flat(g), _flat(x), mean, rstd, s1,
                 s2, _vec_or(w, t, mean), w is not None, bool(w_inside), t.type(c), *index, _same_index(index), n)
    return cast_back(dx, back)


def _zeros(shape, t):
    return be().full(tuple(shape), 0, t)


def _empty_backward(x, mask, wshape, t):
    return (_zeros(x.shape, x.dtype) if mask[0] else None, _zeros(wshape, t) if mask[1] else None,
            _zeros(wshape, t) if mask[2] else None)


def _backward_inputs(grad, x, mask, wshape):
    """``((x, grad, t, back), None)``: ``x`` and ``grad`` in the compute dtype ``t`` and the dtype to cast the
    input gradient back to; or ``(None, result)`` for an empty ``x``."""
    xc, back = compute_input(x)
    t = xc.dtype
    if x.size == 0:
        return None, _empty_backward(x, mask, wshape, t)
    return (xc, compute_input(grad)[0], t, back), None


def _ncl(shape) -> tuple:
    L = 1
    for s in shape[2:]:
        L *= s
    return shape[0], shape[1], L


# --- batch_norm ---------------------------------------------------------------------------------------
@kernel("batch_norm", "cuda")
def batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps):
    """Training: batch statistics, running statistics updated in place on the device; evaluation: the
    running statistics."""
    N, C, L = _ncl(x.shape)
    xc, back = compute_input(x)
    t = xc.dtype
    if x.size == 0:
        return be().empty(x.shape, x.dtype), _zeros((C,), t), _zeros((C,), t)
    if training and x.dtype == t:  # (Note [Batch norm through cuDNN]; None where it does not take the call)
        done = cudnn_bn.forward(x, running_mean, running_var, weight, bias, momentum, eps)
        if done is not None:
            return done
    w = _vec_t(weight, t)
    b = _vec_t(bias, t)
    if training:
        rm = _vec_t(running_mean, t)
        rv = _vec_t(running_var, t)
        mean, invstd = _stats(xc, C, (N * L, L, C * L, L), eps, t,
                              None if rm is None and rv is None else (rm, rv, momentum))
        for orig, upd in ((running_mean, rm), (running_var, rv)):
            if orig is not None and _copied(orig, t):
                copy_into(orig, upd)  # a running statistic of another dtype or layout was updated in a copy
    else:
        backend = be()
        mean = backend.empty((C,), t)
        invstd = backend.empty((C,), t)
        grid, block = launch_1d(C)
        _kernel("eval_stats")[grid, block, stream()](mean, invstd, _vec_t(running_mean, t),
                                                     _vec_t(running_var, t), float(eps), C)
    out = _affine(xc, mean, invstd, w, b, (L, C, L, C), t)
    return cast_back(out, back), mean, invstd


@kernel("batch_norm_backward", "cuda")
def batch_norm_backward(grad, x, weight, save_mean, save_invstd, training, mask):
    N, C, L = _ncl(x.shape)
    inputs, empty = _backward_inputs(grad, x, mask, (C,))
    if inputs is None:
        return empty
    xc, gc, t, back = inputs
    if training and mask[0] and x.dtype == t:  # (Note [Batch norm through cuDNN]: the three gradients at once)
        done = cudnn_bn.backward(grad, x, weight, save_mean, save_invstd)
        if done is not None:
            return done[0], (done[1] if mask[1] else None), (done[2] if mask[2] else None)
    mean, invstd = _vec_t(save_mean, t), _vec_t(save_invstd, t)
    w = _vec_t(weight, t)
    s1 = s2 = None
    if mask[1] or mask[2] or (mask[0] and training):  # sum(g), sum(g * xhat) per channel
        s1, s2 = _grad_sums(gc, xc, mean, invstd, None, C, (N * L, L, C * L, L), (N * L, 0, 1), (1, 1, 1, 0), t)
    dx = None
    if mask[0]:
        if s1 is None:  # evaluation mode: the sums are not used (c = 0)
            s1 = s2 = _zeros((C,), t)
        dx = _grad_input(gc, xc, mean, invstd, s1, s2, w, False,
                         1.0 / (N * L) if training else 0.0, (L, C, L, C), t, back)
    return dx, (s2 if mask[1] else None), (s1 if mask[2] else None)


# --- layer_norm ---------------------------------------------------------------------------------------
def _rows(x, k) -> tuple:
    n = math.prod(x.shape[x.ndim - k:])
    return math.prod(x.shape[:x.ndim - k]), n


@kernel("layer_norm", "cuda")
def layer_norm(x, k, weight, bias, eps):
    rows, n = _rows(x, k)
    xc, back = compute_input(x)
    t = xc.dtype
    if x.size == 0:
        return be().empty(x.shape, x.dtype), _zeros((rows,), t), _zeros((rows,), t)
    if _row_parts(n) == 1:  # one block holds a row: Note [Layer norm rows in one launch]
        backend = be()
        out, mean, rstd = backend.empty(xc.shape, t), backend.empty((rows,), t), backend.empty((rows,), t)
        _launch_rows("ln_forward", rows, _block(), t, _flat(out), mean, rstd, _flat(xc), _vec_or(weight, t, mean),
                     _vec_or(bias, t, mean), weight is not None, bias is not None, n, float(eps))
        return cast_back(out, back), mean, rstd
    mean, rstd = _stats(xc, rows, (n, n, 0, n), eps, t)
    out = _affine(xc, mean, rstd, weight, bias, (n, rows, 1, n), t)
    return cast_back(out, back), mean, rstd


@kernel("layer_norm_backward", "cuda")
def layer_norm_backward(grad, x, k, mean, rstd, weight, mask):
    rows, n = _rows(x, k)
    wshape = tuple(x.shape[x.ndim - k:])
    inputs, empty = _backward_inputs(grad, x, mask, wshape)
    if inputs is None:
        return empty
    xc, gc, t, back = inputs
    mean, rstd = _vec_t(mean, t), _vec_t(rstd, t)
    w = _vec_t(weight, t)
    dx = dw = db = None
    if mask[0] and _row_parts(n) == 1:  # one block holds a row: Note [Layer norm rows in one launch]
        dxc = be().empty(x.shape, t)
        _launch_rows("ln_grad_input", rows, _block(), t, _flat(dxc), _flat(gc), _flat(xc), mean, rstd,
                     _vec_or(w, t, mean), w is not None, n)
        dx = cast_back(dxc, back)
    elif mask[0]:
        s1, s2 = _grad_sums(gc, xc, mean, rstd, w, rows, (n, n, 0, n), (n, 0, 1), (1, n, 1, 0), t)
        dx = _grad_input(gc, xc, mean, rstd, s1, s2, w, True, 1.0 / n, (n, rows, 1, n), t, back)
    if mask[1] or mask[2]:  # over the columns: sum(g * xhat), sum(g)
        sb, sw = _grad_sums(gc, xc, mean, rstd, None, n, (rows, 1, n, 1), (1, 1, n), (1, 1, 1, 0), t)
        dw = _shaped(sw, wshape) if mask[1] else None
        db = _shaped(sb, wshape) if mask[2] else None
    return dx, dw, db


# --- group_norm ---------------------------------------------------------------------------------------
@kernel("group_norm", "cuda")
def group_norm(x, groups, weight, bias, eps):
    N, C, L = _ncl(x.shape)
    xc, back = compute_input(x)
    t = xc.dtype
    if x.size == 0:
        return be().empty(x.shape, x.dtype), _zeros((N, groups), t), _zeros((N, groups), t)
    K = (C // groups) * L
    rows = N * groups
    mean, rstd = _stats(xc, rows, (K, K, 0, K), eps, t)
    w = _vec_t(weight, t)
    b = _vec_t(bias, t)
    out = _affine(xc, mean, rstd, w, b, (K, rows, L, C), t)
    return cast_back(out, back), _shaped(mean, (N, groups)), _shaped(rstd, (N, groups))


@kernel("group_norm_backward", "cuda")
def group_norm_backward(grad, x, groups, mean, rstd, weight, mask):
    N, C, L = _ncl(x.shape)
    inputs, empty = _backward_inputs(grad, x, mask, (C,))
    if inputs is None:
        return empty
    xc, gc, t, back = inputs
    per = C // groups
    K = per * L
    rows = N * groups
    mean, rstd = _vec_t(mean, t), _vec_t(rstd, t)
    w = _vec_t(weight, t)
    dx = dw = db = None
    if mask[0]:
        s1, s2 = _grad_sums(gc, xc, mean, rstd, w, rows, (K, K, 0, K), (K, 0, 1), (L, per, groups, per), t)
        dx = _grad_input(gc, xc, mean, rstd, s1, s2, w, True, 1.0 / K, (K, rows, L, C), t, back)
    if mask[1] or mask[2]:  # per channel over (N, L): sum(g * xhat), sum(g)
        sb, sw = _grad_sums(gc, xc, mean, rstd, None, C, (N * L, L, C * L, L), (L, groups, per), (1, 1, 1, 0), t)
        dw = sw if mask[1] else None
        db = sb if mask[2] else None
    return dx, dw, db


# --- concrete signatures (PTX test) ---------------------------------------------------------------------
def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the normalisation kernels for float32 and float64."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64, f64, b = types.int64, types.float64, types.boolean
    cases = []
    for dn in ("float32", "float64"):
        t = from_dtype(np.dtype(dn))
        ct = np.dtype(dn).type
        arr = types.Array(t, 1, "C")
        for mode in _MODES:
            cases += [
                (f"norm_stats_{mode}:{dn}", _stats_py(ct, REDUCE_BLOCK, mode),
                 (arr, arr, arr) + (i64,) * 4 + (f64, arr, arr, f64, b) + (i64, arr, arr, arr)),
                (f"norm_grad_sums_{mode}:{dn}", _grad_sums_py(ct, REDUCE_BLOCK, mode),
                 (arr,) * 7 + (b,) + (i64,) * 11 + (i64, arr, arr)),
                (f"norm_column_sums_{mode}:{dn}", _column_sums_py(ct, COLUMN_TILE, mode),
                 (arr,) * 6 + (i64,) * 5 + (arr, arr)),
            ]
        cases += [
            (f"norm_affine:{dn}", _affine_py(), (arr,) * 6 + (b, b) + (i64,) * 4 + (b, i64)),
            (f"norm_grad_input:{dn}", _grad_input_py(), (arr,) * 8 + (b, b, t) + (i64,) * 4 + (b, i64)),
            (f"norm_eval_stats:{dn}", _eval_stats_py(), (arr,) * 4 + (f64, i64)),
            (f"norm_ln_forward:{dn}", _ln_forward_py(ct, REDUCE_BLOCK), (arr,) * 6 + (b, b, i64, f64)),
            (f"norm_ln_grad_input:{dn}", _ln_grad_input_py(ct, REDUCE_BLOCK), (arr,) * 6 + (b, i64)),
        ]
    return cases
