"""Convolution operators: conv1d, conv2d, conv_transpose1d, conv_transpose2d and their primitives.

Every convolution runs through one primitive, ``convolution`` (torch's ``aten::convolution``:
plain or transposed, 1-D or 2-D, any stride, padding, dilation and groups), and its weight
gradient ``convolution_backward_weight``. The input gradient of a convolution is the transposed
convolution of the output gradient and vice versa, so the derivative table needs nothing else and
double backward comes from the same two operators. ``conv1d`` and friends are composites: they
check their arguments with torch's messages, add a batch dimension to unbatched inputs and call
``convolution``.

Kernels (1-D convolutions run as 2-D ones with a height of 1):

* general case: ``im2col`` (numba) into columns ``(C*KH*KW, n*OH*OW)`` for one image, or a chunk
  of small images, then one BLAS GEMM per group (``np.matmul``); the input gradient (and the
  transposed convolution) is the GEMM ``W^T @ g`` followed by ``col2im``; the weight gradient is
  ``g @ cols^T`` summed over the batch. The batch is split between threads, each running BLAS on
  one thread (Note [Threads over work items, not inside BLAS] in ``flambeau/_blas.py``).
* 1x1 kernels without padding and stride 1: an image is its own column matrix.
* depthwise (``groups == in_channels``, one input channel per group): direct numba kernels for the
  forward, input and weight gradients, parallel over planes (Note [Depthwise convolution by phase
  planes]).
* float32 and float64 are jitted; float16 computes in float32; integer tensors take a numpy path.

Kernel convention (every device; arrays in, array out; ``x`` is ``(N, C, H, W)``):
    convolution: ``kernel(x, w, b, stride, padding, dilation, transposed, output_padding, groups)``
        with ``w`` ``(O, C/groups, KH, KW)`` (``(C, O/groups, KH, KW)`` if ``transposed``), ``b``
        an ``(O,)`` array or None, the others pairs of ints and an int.
    convolution_backward_weight: ``kernel(g, x, weight_size, stride, padding, dilation, transposed,
        output_padding, groups)`` returning the weight gradient of shape ``weight_size``.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau import _dtype as dt
from flambeau._blas import blas_is_controllable, single_threaded_blas
from flambeau._ops._common import Tensor, _wrap, check_tensor, grad_state, record
from flambeau._ops._registry import declare
from flambeau._parallel import get_num_threads, run_chunks

__all__ = ["convolution", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]



# --- numba kernels -----------------------------------------------------------------------------------
@functools.cache
def _numba_conv():
    """im2col, col2im and the depthwise kernels, compiled on first use (float32 and float64).

    None of them calls another jitted function (numba's disk cache misses for those). The column
    range ``[lo, hi)`` of output positions whose input column ``ow * sw + off`` falls inside the
    image is computed once per kernel tap, so the inner loops have no bounds test. Inner loops run
    over views with one index (``dst[j] = src[j]``): LLVM vectorises those, not ``a[i + d]`` with a
    signed index (the depthwise kernels use unsigned ones instead: Note [Flat unsigned indices in the
    depthwise kernels]).
    """
    import numba
    from numba import prange

    opts = {"parallel": True, "cache": True, "fastmath": {"contract", "reassoc", "nsz", "arcp"}}
    # Note [No numba threads between BLAS calls]: im2col and col2im run between GEMMs, and after a
    # GEMM OpenBLAS's threads keep spinning for a while; numba's workers woken in between fight
    # them for the cores (on 2 cores a forward ran 4-7x slower). These two run on the calling
    # thread (nogil) and leave the parallelism to BLAS.
    serial = {"parallel": False, "cache": True, "nogil": True, "fastmath": {"contract", "reassoc", "nsz", "arcp"}}

    # Note [im2col through a padded plane]: each input plane is first copied into the interior of a
    # zero-padded scratch plane (Hp x Wp, its border never written), so that every (tap, output row)
    # of the column matrix is one branch-free copy of OW elements (strided by sw). Flat arrays and
    # unsigned indices throughout (Note [Flat unsigned indices in the depthwise kernels]): the planes
    # of deep layers are tiny (4x4 rows of 4), where a slice per row cost more than the copy.
    @numba.njit(**serial)
    def im2col(x, cols, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW):
        # cols is (C*KH*KW, N*OH*OW): row (c, kh, kw), column (n, oh, ow).
        N, C, H, W = x.shape
        L = OH * OW
        Hp = max(H + 2 * ph, (OH - 1) * sh + (KH - 1) * dh + 1)
        Wp = max(W + 2 * pw, (OW - 1) * sw + (KW - 1) * dw + 1)
        xf = x.reshape(-1)
        cf = cols.reshape(-1)
        u = np.uintp
        xs = np.zeros(Hp * Wp, x.dtype)
        for nc in range(N * C):
            n = nc // C
            c = nc - n * C
            xb = nc * H * W
            for ih in range(H):
                r = (ih + ph) * Wp + pw
                s = xb + ih * W
                for j in range(W):
                    xs[u(r + j)] = xf[u(s + j)]
            for kh in range(KH):
                for kw in range(KW):
                    cb = ((c * KH + kh) * KW + kw) * N * L + n * L
                    for oh in range(OH):
                        o = cb + oh * OW
                        s = (oh * sh + kh * dh) * Wp + kw * dw
                        if sw == 1:
                            for j in range(OW):
                                cf[u(o + j)] = xs[u(s + j)]
                        else:
                            for j in range(OW):
                                cf[u(o + j)] = xs[u(s + j * sw)]

    @numba.njit(**serial)
    def col2im(cols, x, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW):
        N, C, H, W = x.shape
        L = OH * OW
        Hp = max(H + 2 * ph, (OH - 1) * sh + (KH - 1) * dh + 1)
        Wp = max(W + 2 * pw, (OW - 1) * sw + (KW - 1) * dw + 1)
        xf = x.reshape(-1)
        cf = cols.reshape(-1)
        u = np.uintp
        gs = np.empty(Hp * Wp, x.dtype)
        for nc in range(N * C):
            n = nc // C
            c = nc - n * C
            for i in range(Hp * Wp):
                gs[i] = 0
            for kh in range(KH):
                for kw in range(KW):
                    cb = ((c * KH + kh) * KW + kw) * N * L + n * L
                    for oh in range(OH):
                        o = cb + oh * OW
                        s = (oh * sh + kh * dh) * Wp + kw * dw
                        if sw == 1:
                            for j in range(OW):
                                gs[u(s + j)] += cf[u(o + j)]
                        else:
                            for j in range(OW):
                                gs[u(s + j * sw)] += cf[u(o + j)]
            xb = nc * H * W
            for ih in range(H):
                r = (ih + ph) * Wp + pw
                s = xb + ih * W
                for j in range(W):
                    xf[u(s + j)] = gs[u(r + j)]

    # Note [Depthwise convolution by phase planes]: each input plane is copied, zero-padded, into
    # sh * sw phase planes of Hq x Wq (phase (py, px) holds padded pixels (i * sh + py, j * sw + px)).
    # Tap (kh, kw) then reads phase ((kh*dh) % sh, (kw*dw) % sw) shifted by ((kh*dh) // sh,
    # (kw*dw) // sw) with unit stride whatever the convolution's stride, and output row oh is row
    # oh + shift of that phase. Computing the output over the phase width (position i = oh * Wq + ow,
    # the columns ow >= OW being scratch) makes every tap one long contiguous multiply-add over the
    # plane that vectorises, with no bounds tests. The input and weight gradients use the same layout.
    # 3x3 kernels (K == 9) sum their nine taps in one pass (the input gradient as a gather over a
    # copy of the output gradient shifted by the largest tap offset, so no tap writes another's cells).
    #
    # Note [Flat unsigned indices in the depthwise kernels]: these kernels handle many small planes
    # (MobileNet's 4x4 or 2x2 ones), where a slice view per row or tap costs more than its arithmetic
    # (each view is an object with reference-counted memory). They index flat arrays instead, with
    # ``np.uintp`` indices: numba then emits no negative-index wraparound test and LLVM vectorises
    # ``a[np.uintp(i + d)]`` (it does not vectorise the signed ``a[i + d]``).
    @numba.njit(**opts)
    def dw_forward(x, w, out, sh, sw, ph, pw, dh, dw, chunks):
        # out[n, o] = sum_k w[o, 0, k] * x[n, o // M, window]; M = O // C output channels per input channel.
        N, C, H, W = x.shape
        _, O, OH, OW = out.shape
        KH, KW = w.shape[2], w.shape[3]
        K = KH * KW
        M = O // C
        Hq = (max(H + 2 * ph, (OH - 1) * sh + (KH - 1) * dh + 1) + sh - 1) // sh
        Wq = (max(W + 2 * pw, (OW - 1) * sw + (KW - 1) * dw + 1) + sw - 1) // sw
        P = Hq * Wq
        span = (OH - 1) * Wq + OW
        xf = x.reshape(-1)
        of = out.reshape(-1)
        wf = w.reshape(-1)
        u = np.uintp
        # Planes are handed out in ``chunks`` ranges, each allocating its scratch once: the padding cells
        # of xs are never written.
        NO = N * O
        for ci in prange(chunks):
            xs = np.zeros(sh * sw * P, x.dtype)
            acc = np.zeros(span, x.dtype)
            d = np.empty(K, np.intp)  # tap k reads xs[i + d[k]] for output position i
            for kh in range(KH):
                for kw in range(KW):
                    d[kh * KW + kw] = ((((kh * dh) % sh) * sw + (kw * dw) % sw) * P
                                       + ((kh * dh) // sh) * Wq + (kw * dw) // sw)
            for no in range(ci * NO // chunks, (ci + 1) * NO // chunks):
                n = no // O
                o = no - n * O
                xb = (n * C + o // M) * H * W
                for py in range(sh):  # copy the plane into its phase planes (walking phases: no division per pixel)
                    for px in range(sw):
                        q0 = max(0, (pw - px + sw - 1) // sw)
                        q1 = min(Wq, (W + pw - px + sw - 1) // sw)
                        for qi in range(Hq):
                            ih = qi * sh + py - ph
                            if ih >= 0 and ih < H and q1 > q0:
                                r0 = (py * sw + px) * P + qi * Wq
                                s0 = xb + ih * W + px - pw
                                if sw == 1:
                                    for j in range(q0, q1):
                                        xs[u(r0 + j)] = xf[u(s0 + j)]
                                else:
                                    for j in range(q0, q1):
                                        xs[u(r0 + j)] = xf[u(s0 + j * sw)]
                wb = o * K
                if K == 9:
                    d0, d1, d2, d3, d4, d5, d6, d7, d8 = d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]
                    w0, w1, w2, w3, w4 = wf[wb], wf[wb + 1], wf[wb + 2], wf[wb + 3], wf[wb + 4]
                    w5, w6, w7, w8 = wf[wb + 5], wf[wb + 6], wf[wb + 7], wf[wb + 8]
                    for i in range(span):
                        acc[i] = (w0 * xs[u(i + d0)] + w1 * xs[u(i + d1)] + w2 * xs[u(i + d2)]
                                  + w3 * xs[u(i + d3)] + w4 * xs[u(i + d4)] + w5 * xs[u(i + d5)]
                                  + w6 * xs[u(i + d6)] + w7 * xs[u(i + d7)] + w8 * xs[u(i + d8)])
                else:
                    acc[:] = 0
                    for k in range(K):
                        wv = wf[wb + k]
                        dk = d[k]
                        for i in range(span):
                            acc[i] += wv * xs[u(i + dk)]
                ob = no * OH * OW
                for oh in range(OH):
                    r = oh * Wq
                    orow = ob + oh * OW
                    for j in range(OW):
                        of[u(orow + j)] = acc[u(r + j)]

    @numba.njit(**opts)
    def dw_input(g, w, gx, sh, sw, ph, pw, dh, dw, chunks):
        # Adjoint of dw_forward: gx[n, c] = sum_m scatter(g[n, c*M + m], w[c*M + m]).
        N, C, H, W = gx.shape
        _, O, OH, OW = g.shape
        KH, KW = w.shape[2], w.shape[3]
        K = KH * KW
        M = O // C
        Hq = (max(H + 2 * ph, (OH - 1) * sh + (KH - 1) * dh + 1) + sh - 1) // sh
        Wq = (max(W + 2 * pw, (OW - 1) * sw + (KW - 1) * dw + 1) + sw - 1) // sw
        P = Hq * Wq
        T = sh * sw * P
        span = (OH - 1) * Wq + OW
        gf = g.reshape(-1)
        xf = gx.reshape(-1)
        wf = w.reshape(-1)
        u = np.uintp
        NC = N * C
        for ci in prange(chunks):  # scratch allocated once per range of planes
            d = np.empty(K, np.intp)
            B = 0
            for kh in range(KH):
                for kw in range(KW):
                    dk = (((kh * dh) % sh) * sw + (kw * dw) % sw) * P + ((kh * dh) // sh) * Wq + (kw * dw) // sw
                    d[kh * KW + kw] = dk
                    B = max(B, dk)
            gs = np.zeros(T, g.dtype)
            # The output gradient at gw[B + i], i = oh * Wq + ow; the rest (scratch columns, the B cells
            # before and the cells after) is never written and stays zero.
            gw = np.zeros(B + T, g.dtype)
            for nc in range(ci * NC // chunks, (ci + 1) * NC // chunks):
                n = nc // C
                c = nc - n * C
                if K == 9 and M == 1:
                    gb = nc * OH * OW
                    for oh in range(OH):
                        r = B + oh * Wq
                        grow = gb + oh * OW
                        for j in range(OW):
                            gw[u(r + j)] = gf[u(grow + j)]
                    wb = c * K
                    w0, w1, w2, w3, w4 = wf[wb], wf[wb + 1], wf[wb + 2], wf[wb + 3], wf[wb + 4]
                    w5, w6, w7, w8 = wf[wb + 5], wf[wb + 6], wf[wb + 7], wf[wb + 8]
                    e0, e1, e2, e3, e4 = B - d[0], B - d[1], B - d[2], B - d[3], B - d[4]
                    e5, e6, e7, e8 = B - d[5], B - d[6], B - d[7], B - d[8]
                    for p in range(T):  # gs[p] = sum_k w_k * g[p - d_k]
                        gs[p] = (w0 * gw[u(p + e0)] + w1 * gw[u(p + e1)] + w2 * gw[u(p + e2)]
                                 + w3 * gw[u(p + e3)] + w4 * gw[u(p + e4)] + w5 * gw[u(p + e5)]
                                 + w6 * gw[u(p + e6)] + w7 * gw[u(p + e7)] + w8 * gw[u(p + e8)])
                else:
                    gs[:] = 0
                    for m in range(M):
                        o = c * M + m
                        gb = (n * O + o) * OH * OW
                        for oh in range(OH):
                            r = B + oh * Wq
                            grow = gb + oh * OW
                            for j in range(OW):
                                gw[u(r + j)] = gf[u(grow + j)]
                        for k in range(K):
                            wv = wf[o * K + k]
                            dk = d[k]
                            for i in range(span):
                                gs[u(i + dk)] += wv * gw[u(B + i)]
                xb = nc * H * W
                for py in range(sh):  # gather the phase planes back into the plane
                    for px in range(sw):
                        q0 = max(0, (pw - px + sw - 1) // sw)
                        q1 = min(Wq, (W + pw - px + sw - 1) // sw)
                        for qi in range(Hq):
                            ih = qi * sh + py - ph
                            if ih >= 0 and ih < H and q1 > q0:
                                r0 = (py * sw + px) * P + qi * Wq
                                s0 = xb + ih * W + px - pw
                                if sw == 1:
                                    for j in range(q0, q1):
                                        xf[u(s0 + j)] = gs[u(r0 + j)]
                                else:
                                    for j in range(q0, q1):
                                        xf[u(s0 + j * sw)] = gs[u(r0 + j)]

    @numba.njit(**opts)
    def dw_weight(g, x, gwt, sh, sw, ph, pw, dh, dw):
        # Parallel over output channels, each summing its own taps over the batch (no shared writes).
        N, C, H, W = x.shape
        _, O, OH, OW = g.shape
        KH, KW = gwt.shape[2], gwt.shape[3]
        K = KH * KW
        M = O // C
        Hq = (max(H + 2 * ph, (OH - 1) * sh + (KH - 1) * dh + 1) + sh - 1) // sh
        Wq = (max(W + 2 * pw, (OW - 1) * sw + (KW - 1) * dw + 1) + sw - 1) // sw
        P = Hq * Wq
        span = (OH - 1) * Wq + OW
        xf = x.reshape(-1)
        gf = g.reshape(-1)
        wtf = gwt.reshape(-1)
        u = np.uintp
        for o in prange(O):
            c = o // M
            xs = np.zeros(sh * sw * P, x.dtype)
            gw = np.zeros(span, g.dtype)  # its scratch columns are never written: they stay zero
            zero = gw[0] * 0  # of the array's dtype: the per-image sums run in it (float32 as torch)
            d = np.empty(K, np.intp)
            for kh in range(KH):
                for kw in range(KW):
                    d[kh * KW + kw] = ((((kh * dh) % sh) * sw + (kw * dw) % sw) * P
                                       + ((kh * dh) // sh) * Wq + (kw * dw) // sw)
            acc = np.zeros(K, np.float64)
            for n in range(N):
                xb = (n * C + c) * H * W
                for py in range(sh):  # copy the plane into its phase planes
                    for px in range(sw):
                        q0 = max(0, (pw - px + sw - 1) // sw)
                        q1 = min(Wq, (W + pw - px + sw - 1) // sw)
                        for qi in range(Hq):
                            ih = qi * sh + py - ph
                            if ih >= 0 and ih < H and q1 > q0:
                                r0 = (py * sw + px) * P + qi * Wq
                                s0 = xb + ih * W + px - pw
                                if sw == 1:
                                    for j in range(q0, q1):
                                        xs[u(r0 + j)] = xf[u(s0 + j)]
                                else:
                                    for j in range(q0, q1):
                                        xs[u(r0 + j)] = xf[u(s0 + j * sw)]
                gb = (n * O + o) * OH * OW
                for oh in range(OH):
                    r = oh * Wq
                    grow = gb + oh * OW
                    for j in range(OW):
                        gw[u(r + j)] = gf[u(grow + j)]
                if K == 9:
                    d0, d1, d2, d3, d4, d5, d6, d7, d8 = d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]
                    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = s8 = zero
                    for i in range(span):
                        gv = gw[i]
                        s0 += gv * xs[u(i + d0)]
                        s1 += gv * xs[u(i + d1)]
                        s2 += gv * xs[u(i + d2)]
                        s3 += gv * xs[u(i + d3)]
                        s4 += gv * xs[u(i + d4)]
                        s5 += gv * xs[u(i + d5)]
                        s6 += gv * xs[u(i + d6)]
                        s7 += gv * xs[u(i + d7)]
                        s8 += gv * xs[u(i + d8)]
                    acc[0] += s0
                    acc[1] += s1
                    acc[2] += s2
                    acc[3] += s3
                    acc[4] += s4
                    acc[5] += s5
                    acc[6] += s6
                    acc[7] += s7
                    acc[8] += s8
                else:
                    for k in range(K):
                        dk = d[k]
                        s = zero
                        for i in range(span):
                            s += gw[i] * xs[u(i + dk)]
                        acc[k] += s
            for k in range(K):
                wtf[o * K + k] = acc[k]

    # Note [Stride-1 columns over the padded width]: for a stride-1 convolution of one image, the
    # column of output position i = oh * Wp + ow (Wp: padded width, ow >= OW being scratch) for
    # tap (kh, kw) is padded input i + kh * dh * Wp + kw * dw, so each row of the column matrix is
    # one contiguous copy of the padded plane. The GEMM computes the scratch columns too (Wp / OW
    # more work, a few percent) and they are dropped; gradients fed in have zeros there.
    @numba.njit(**serial)
    def im2col_wide(x, cols, KH, KW, ph, pw, dh, dw, Hp, Wp):
        C, H, W = x.shape
        Lw = cols.shape[1]
        xs = np.zeros(Hp * Wp + Wp, x.dtype)  # slack: the last row's scratch columns read past the plane
        for c in range(C):
            xp = x[c]
            for ih in range(H):
                dst = xs[(ih + ph) * Wp + pw:(ih + ph) * Wp + pw + W]
                src = xp[ih]
                for j in range(W):
                    dst[j] = src[j]
            for kh in range(KH):
                for kw in range(KW):
                    d = kh * dh * Wp + kw * dw
                    dst = cols[(c * KH + kh) * KW + kw]
                    src = xs[d:d + Lw]
                    for j in range(Lw):
                        dst[j] = src[j]

    @numba.njit(**serial)
    def col2im_wide(cols, gx, KH, KW, ph, pw, dh, dw, Hp, Wp):
        C, H, W = gx.shape
        Lw = cols.shape[1]
        gs = np.zeros(Hp * Wp + Wp, gx.dtype)
        for c in range(C):
            gs[:] = 0
            for kh in range(KH):
                for kw in range(KW):
                    d = kh * dh * Wp + kw * dw
                    dst = gs[d:d + Lw]
                    src = cols[(c * KH + kh) * KW + kw]
                    for j in range(Lw):
                        dst[j] += src[j]
            xp = gx[c]
            for ih in range(H):
                src = gs[(ih + ph) * Wp + pw:(ih + ph) * Wp + pw + W]
                dst = xp[ih]
                for j in range(W):
                    dst[j] = src[j]

    return im2col, col2im, dw_forward, dw_input, dw_weight, im2col_wide, col2im_wide


# --- numpy fallbacks (integer dtypes) ----------------------------------------------------------------
def _padded(shape, dtype, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW):
    N, C, H, W = shape
    return np.zeros((N, C, max(H + 2 * ph, (OH - 1) * sh + (KH - 1) * dh + 1),
                     max(W + 2 * pw, (OW - 1) * sw + (KW - 1) * dw + 1)), dtype)


def _im2col_np(x, cols, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW):
    N, C, H, W = x.shape
    xp = _padded(x.shape, x.dtype, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW)
    xp[:, :, ph:ph + H, pw:pw + W] = x
    c6 = cols.reshape(C, KH, KW, N, OH, OW)
    for kh in range(KH):
        for kw in range(KW):
            h0, w0 = kh * dh, kw * dw
            c6[:, kh, kw] = xp[:, :, h0:h0 + (OH - 1) * sh + 1:sh, w0:w0 + (OW - 1) * sw + 1:sw].transpose(1, 0, 2, 3)


def _col2im_np(cols, x, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW):
    N, C, H, W = x.shape
    xp = _padded(x.shape, x.dtype, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW)
    c6 = cols.reshape(C, KH, KW, N, OH, OW)
    for kh in range(KH):
        for kw in range(KW):
            h0, w0 = kh * dh, kw * dw
            xp[:, :, h0:h0 + (OH - 1) * sh + 1:sh, w0:w0 + (OW - 1) * sw + 1:sw] += c6[:, kh, kw].transpose(1, 0, 2, 3)
    x[...] = xp[:, :, ph:ph + H, pw:pw + W]


# --- the three building blocks ------------------------------------------------------------------------
# Note [Convolution as chunked GEMMs]: the batch is processed in chunks whose column matrix
# (C*KH*KW, n*OH*OW) stays around _CHUNK_BYTES, so it is written and read back while still in
# cache and never costs a large fresh allocation (page faults). A chunk's images share one wide
# GEMM whose result is transposed into place: numpy's matmul does not hand strided operands to
# BLAS, and per-image GEMMs are too thin for small images. 1 MiB (a core's L2 cache) beat 4 MiB on
# the LeNet, ResNet and MobileNet layers (LeNet's first layer by 25%: its GEMM result, 3.5x the
# columns, then stays in cache too).
_CHUNK_BYTES = 1 << 20
_WIDE_BELOW = 256  # output positions per image under which one wide GEMM beats per-image GEMMs
_PER_IMAGE_BYTES = 1 << 18  # and the column bytes per image under which per-image calls cost too much


def _jitted(a) -> bool:
    return a.dtype == np.float32 or a.dtype == np.float64


def _out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _is_depthwise(C, w, groups):
    return groups == C and w.shape[1] == 1 and C > 1


def _chunks(a, b, per_image_bytes, L):
    """Image ranges covering ``[a, b)``.

    Images with many output positions go one at a time: their GEMM is wide enough, the columns
    stay in cache and the output needs no transposition (BLAS also runs a 64x288x576 product
    faster than one 64x288x36864 product).
    """
    if L >= _WIDE_BELOW and per_image_bytes >= _PER_IMAGE_BYTES:
        nb = 1
    else:
        nb = max(1, _CHUNK_BYTES // max(per_image_bytes, 1))
    return [(i, min(i + nb, b)) for i in range(a, b, nb)]


# Below this many multiply-adds a convolution runs on the calling thread alone: handing half of it
# to another thread costs 20-50 µs, more than it saves. BLAS stays on one thread all the same: its
# threads, left spinning after a GEMM, would fight numba's (Note [No numba threads between BLAS calls]).
_SERIAL_BELOW = 1 << 21


def _over_images(N, body, work) -> None:
    """Run ``body(n0, n1)`` over ``[0, N)``: one range per thread, each calling single-threaded BLAS.

    ``work`` is the convolution's number of multiply-adds. See Note [Threads over work items, not
    inside BLAS] in ``flambeau/_blas.py`` (torch parallelises its convolutions over the batch too).
    """
    if N < 2 or get_num_threads() < 2 or not blas_is_controllable():
        body(0, N)
        return
    with single_threaded_blas():
        if work < _SERIAL_BELOW:
            body(0, N)
        else:
            run_chunks(body, N)


def _is_pointwise(KH, KW, stride, padding):
    return KH == 1 and KW == 1 and padding == (0, 0) and stride == (1, 1)


def _im2col(x, KH, KW, stride, padding, dilation, OH, OW, buf=None):
    """Columns ``(C*KH*KW, N*OH*OW)`` of ``x`` ``(N, C, H, W)`` (in ``buf`` if given)."""
    N, C, H, W = x.shape
    size = (C * KH * KW, N * OH * OW)
    cols = np.empty(size, x.dtype) if buf is None else buf[:size[0] * size[1]].reshape(size)
    args = (KH, KW, *stride, *padding, *dilation, OH, OW)
    if _is_pointwise(KH, KW, stride, padding):
        if N == 1:
            return x.reshape(C, H * W)  # an image is its own column matrix
        cols.reshape(C, N, H * W)[...] = x.reshape(N, C, H * W).transpose(1, 0, 2)
    elif _jitted(x):
        _numba_conv()[0](x, cols, *args)
    else:
        _im2col_np(x, cols, *args)
    return cols


def _col2im(cols, x, KH, KW, stride, padding, dilation, OH, OW):
    """Sum columns ``(C*KH*KW, N*OH*OW)`` back into ``x`` ``(N, C, H, W)`` (overwritten)."""
    N, C, H, W = x.shape
    args = (KH, KW, *stride, *padding, *dilation, OH, OW)
    if _is_pointwise(KH, KW, stride, padding):
        x.reshape(N, C, H * W)[...] = cols.reshape(C, N, H * W).transpose(1, 0, 2)
    elif _jitted(x):
        _numba_conv()[1](cols, x, *args)
    else:
        _col2im_np(cols, x, *args)


def _wide_ok(x, KH, KW, stride, padding):
    """Whether one image takes the stride-1 padded-width path (Note [Stride-1 columns over the padded width])."""
    return stride == (1, 1) and _jitted(x) and not _is_pointwise(KH, KW, stride, padding)


# Note [Scratch buffers per thread, not per image]: a fresh array for every image's columns or GEMM
# result costs more than the copy into it: arrays over ~128 KiB are mapped from the kernel on every
# allocation and each page faults on first touch (measured: a 64x288x624 GEMM 1.5x slower writing a
# new array than an existing one, a 288x64x676 one 3x). Each thread's range of images allocates its
# buffers once and every image reuses them; GEMMs write into them with ``out=``.
def _gemm(a, b, out, groups):
    """``a @ b`` into the flat buffer ``out``; grouped, ``a`` is ``(G, m, k)`` and ``b`` ``(G*k, n)``. Returns 2-D."""
    n = b.shape[-1]
    if groups == 1:
        m = a.shape[0]
        return np.matmul(a, b, out=out[:m * n].reshape(m, n))
    G, m, k = a.shape
    np.matmul(a, b.reshape(G, k, n), out=out[:G * m * n].reshape(G, m, n))
    return out[:G * m * n].reshape(G * m, n)


def _plane_chunks(planes: int) -> int:
    """How many ranges of planes the depthwise kernels hand to numba's threads (a few per thread)."""
    return max(1, min(planes, 4 * get_num_threads()))


def _to_images(y, out, O):
    """``y`` ``(O, n*L)`` written into ``out`` ``(n, O, L)``."""
    n = out.shape[0]
    out[...] = y.reshape(O, n, -1).transpose(1, 0, 2)


def _from_images(g, buf):
    """``g`` ``(n, O, L)`` as ``(O, n*L)``, copied into the flat buffer ``buf``."""
    n, O, L = g.shape
    dst = buf[:O * n * L].reshape(O, n, L)
    dst[...] = g.transpose(1, 0, 2)
    return dst.reshape(O, n * L)


def _forward(x, w, stride, padding, dilation, groups):
    """Plain convolution ``(N, C, H, W) * (O, C/groups, KH, KW) -> (N, O, OH, OW)``."""
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    OH = _out_size(H, KH, stride[0], padding[0], dilation[0])
    OW = _out_size(W, KW, stride[1], padding[1], dilation[1])
    L = OH * OW
    out = np.empty((N, O, L), x.dtype)
    if _is_depthwise(C, w, groups) and _jitted(x):
        _numba_conv()[2](x, w, out.reshape(N, O, OH, OW), *stride, *padding, *dilation, _plane_chunks(N * O))
        return out.reshape(N, O, OH, OW)
    K = Cg * KH * KW
    w2 = w.reshape(O, K) if groups == 1 else w.reshape(groups, O // groups, K)
    wide = _wide_ok(x, KH, KW, stride, padding)
    Hp, Wp = H + 2 * padding[0], W + 2 * padding[1]
    CK = C * KH * KW

    def body(a, b):
        buf = ybuf = wbuf = wybuf = None  # Note [Scratch buffers per thread, not per image]
        for n0, n1 in _chunks(a, b, CK * L * x.itemsize, L):
            nb = n1 - n0
            if nb == 1 and wide:
                if wbuf is None:
                    wbuf = np.empty((CK, OH * Wp), x.dtype)
                    wybuf = np.empty(O * OH * Wp, x.dtype)
                cols = wbuf
                _numba_conv()[5](x[n0], cols, KH, KW, *padding, *dilation, Hp, Wp)
                y = _gemm(w2, cols, wybuf, groups)
                out[n0].reshape(O, OH, OW)[...] = y.reshape(O, OH, Wp)[:, :, :OW]
                continue
            if buf is None:
                buf = np.empty(CK * nb * L, x.dtype)
                ybuf = np.empty(O * nb * L, x.dtype)
            cols = _im2col(x[n0:n1], KH, KW, stride, padding, dilation, OH, OW, buf)
            if nb == 1:  # one image: its columns are (K, L) and the GEMM writes the output in place
                np.matmul(w2, cols if groups == 1 else cols.reshape(groups, K, L),
                          out=out[n0] if groups == 1 else out[n0].reshape(groups, O // groups, L))
            else:
                _to_images(_gemm(w2, cols, ybuf, groups), out[n0:n1], O)

    _over_images(N, body, N * O * K * L)
    return out.reshape(N, O, OH, OW)


def _input_grad(g, w, shape, stride, padding, dilation, groups):
    """Adjoint of :func:`_forward` in ``x``: ``g (N, O, OH, OW) -> (N, C, H, W)`` (= transposed convolution)."""
    N, O, OH, OW = g.shape
    _, Cg, KH, KW = w.shape
    C = shape[1]
    gx = np.empty(shape, g.dtype)
    if _is_depthwise(C, w, groups) and _jitted(g):
        _numba_conv()[3](g, w, gx, *stride, *padding, *dilation, _plane_chunks(N * C))
        return gx
    L = OH * OW
    K = Cg * KH * KW
    CK = C * KH * KW
    g3 = g.reshape(N, O, L)
    wt = w.reshape(O, K).T if groups == 1 else w.reshape(groups, O // groups, K).transpose(0, 2, 1)
    wide = _wide_ok(g, KH, KW, stride, padding)
    Hp, Wp = shape[2] + 2 * padding[0], shape[3] + 2 * padding[1]
    wide = wide and Hp == OH + (KH - 1) * dilation[0] and Wp == OW + (KW - 1) * dilation[1]

    def body(a, b):
        gbuf = cbuf = wgbuf = wcbuf = None  # Note [Scratch buffers per thread, not per image]
        for n0, n1 in _chunks(a, b, CK * L * g.itemsize, L):
            nb = n1 - n0
            if nb == 1 and wide:
                if wgbuf is None:
                    wgbuf = np.zeros((O, OH, Wp), g.dtype)  # the scratch columns ow >= OW stay zero
                    wcbuf = np.empty(CK * OH * Wp, g.dtype)
                wgbuf[:, :, :OW] = g[n0]
                cols = _gemm(wt, wgbuf.reshape(O, OH * Wp), wcbuf, groups)
                _numba_conv()[6](cols, gx[n0], KH, KW, *padding, *dilation, Hp, Wp)
                continue
            if groups == 1 and nb == 1 and _is_pointwise(KH, KW, stride, padding):
                np.matmul(wt, g3[n0], out=gx[n0].reshape(C, L))
                continue
            if gbuf is None:
                gbuf = np.empty(O * nb * L, g.dtype)
                cbuf = np.empty(CK * nb * L, g.dtype)
            cols = _gemm(wt, _from_images(g3[n0:n1], gbuf), cbuf, groups)
            _col2im(cols, gx[n0:n1], KH, KW, stride, padding, dilation, OH, OW)

    _over_images(N, body, N * O * K * L)
    return gx


def _weight_grad(g, x, wshape, stride, padding, dilation, groups):
    """Adjoint of :func:`_forward` in ``w``: ``g (N, O, OH, OW), x (N, C, H, W) -> (O, C/groups, KH, KW)``."""
    N, O, OH, OW = g.shape
    C = x.shape[1]
    _, Cg, KH, KW = wshape
    if groups == C and Cg == 1 and C > 1 and _jitted(g):
        gw = np.empty(wshape, g.dtype)
        _numba_conv()[4](g, x, gw, *stride, *padding, *dilation)
        return gw
    L = OH * OW
    K = Cg * KH * KW
    CK = C * KH * KW
    g3 = g.reshape(N, O, L)
    partials = []
    wide = _wide_ok(x, KH, KW, stride, padding)
    Hp, Wp = x.shape[2] + 2 * padding[0], x.shape[3] + 2 * padding[1]
    wide = wide and Hp == OH + (KH - 1) * dilation[0] and Wp == OW + (KW - 1) * dilation[1]

    def product(gg, cols, pbuf):
        """``gg (O, n) @ cols (C*KH*KW, n)^T`` per group, into ``pbuf``: ``(O, K)`` or ``(groups, O/groups, K)``."""
        if groups == 1:
            return np.matmul(gg, cols.T, out=pbuf)
        return np.matmul(gg.reshape(groups, O // groups, -1), cols.reshape(groups, K, -1).transpose(0, 2, 1),
                         out=pbuf)

    def body(a, b):
        total = None
        buf = gbuf = wbuf = wgbuf = None  # Note [Scratch buffers per thread, not per image]
        pbuf = np.empty((O, K) if groups == 1 else (groups, O // groups, K), x.dtype)
        for n0, n1 in _chunks(a, b, CK * L * x.itemsize, L):
            nb = n1 - n0
            if nb == 1 and wide:
                if wbuf is None:
                    wbuf = np.empty((CK, OH * Wp), x.dtype)
                    wgbuf = np.zeros((O, OH, Wp), g.dtype)  # the scratch columns ow >= OW stay zero
                cols = wbuf
                _numba_conv()[5](x[n0], cols, KH, KW, *padding, *dilation, Hp, Wp)
                wgbuf[:, :, :OW] = g[n0]
                gg = wgbuf.reshape(O, OH * Wp)
            else:
                if buf is None:
                    buf = np.empty(CK * nb * L, x.dtype)
                    gbuf = np.empty(O * nb * L, g.dtype)
                cols = _im2col(x[n0:n1], KH, KW, stride, padding, dilation, OH, OW, buf)
                gg = _from_images(g3[n0:n1], gbuf)
            if total is None:
                total = product(gg, cols, pbuf).copy()
            else:
                total += product(gg, cols, pbuf)
        if total is not None:
            partials.append(total)

    _over_images(N, body, N * O * K * L)
    if not partials:
        return np.zeros(wshape, g.dtype)
    total = partials[0]
    for part in partials[1:]:
        total += part
    return total.reshape(wshape)


# --- kernels of the table -----------------------------------------------------------------------------
def _compute_dtype(a):
    return np.float32 if a.dtype == np.float16 else None


def _k_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    half = _compute_dtype(x)
    if half is not None:
        x, w = x.astype(half), w.astype(half)
        b = None if b is None else b.astype(half)
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w)
    if transposed:
        N, C, H, W = x.shape
        _, Og, KH, KW = w.shape
        OH = (H - 1) * stride[0] - 2 * padding[0] + dilation[0] * (KH - 1) + output_padding[0] + 1
        OW = (W - 1) * stride[1] - 2 * padding[1] + dilation[1] * (KW - 1) + output_padding[1] + 1
        shape = (N, Og * groups, OH, OW)
        out = _input_grad(x, w, shape, stride, padding, dilation, groups)
    else:
        out = _forward(x, w, stride, padding, dilation, groups)
    if b is not None:
        out += b.reshape(-1, 1, 1).astype(out.dtype, copy=False)
    return out.astype(np.float16) if half is not None else out


def _k_convolution_backward_weight(g, x, weight_size, stride, padding, dilation, transposed, output_padding, groups):
    half = _compute_dtype(g)
    if half is not None:
        g, x = g.astype(half), x.astype(half)
    g = np.ascontiguousarray(g)
    x = np.ascontiguousarray(x)
    wshape = tuple(weight_size)
    if transposed:  # y = convT(x, w) is the input gradient of a plain convolution of y with w: swap roles
        gw = _weight_grad(x, g, wshape, stride, padding, dilation, groups)
    else:
        gw = _weight_grad(g, x, wshape, stride, padding, dilation, groups)
    return gw.astype(np.float16) if half is not None else gw


# --- the primitives -----------------------------------------------------------------------------------
CONVOLUTION = declare(
    "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
    "bool transposed, int[] output_padding, int groups) -> Tensor",
    category="convolution", method=False, kernels={"cpu": _k_convolution})

CONVOLUTION_BACKWARD_WEIGHT = declare(
    "convolution_backward_weight(Tensor grad_output, Tensor input, int[] weight_size, int[] stride, "
    "int[] padding, int[] dilation, bool transposed, int[] output_padding, int groups) -> Tensor",
    category="convolution", method=False, function=False, kernels={"cpu": _k_convolution_backward_weight})


def _as4d(a: np.ndarray, dim: int) -> np.ndarray:
    return a.reshape(a.shape[0], a.shape[1], 1, a.shape[2]) if dim == 1 else a


def _pad2(v, dim, fill):
    """A 1-D convolution's parameter as the 2-D kernels' pair (height 1)."""
    return (fill, v[0]) if dim == 1 else (v[0], v[1])


def _check_dtypes(opname, x, w, b):
    if x.dtype is not w.dtype:
        raise RuntimeError(f"Input type ({x.dtype.scalar_name}) and weight type ({w.dtype.scalar_name}) "
                           "should be the same")
    if b is not None and b.dtype is not w.dtype:
        raise RuntimeError(f"Input type ({x.dtype.scalar_name}) and bias type ({b.dtype.scalar_name}) "
                           "should be the same")
    if x.dtype is dt.bool:
        raise NotImplementedError(f"\"{opname}\" not implemented for 'Bool'")
    if x._device is not w._device or (b is not None and b._device is not x._device):
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                           f"{x._device} and {w._device if w._device is not x._device else b._device}!")


@CONVOLUTION.front
def convolution(input: Tensor, weight: Tensor, bias, stride, padding, dilation, transposed: bool,
                output_padding, groups: int) -> Tensor:
    """The general convolution of a batched ``input`` ``(N, C, L)`` or ``(N, C, H, W)`` (torch's ``convolution``).

    Args:
        input: float tensor ``(N, C_in, *spatial)`` with one or two spatial dimensions.
        weight: ``(C_out, C_in / groups, *kernel)``, or ``(C_in, C_out / groups, *kernel)`` if ``transposed``.
        bias: ``(C_out,)`` tensor or None.
        stride, padding, dilation, output_padding: one int per spatial dimension (lists or tuples).
        transposed: compute the transposed convolution (the adjoint of the plain one).
        groups: number of blocked connections from input to output channels.

    Returns:
        ``(N, C_out, *out_spatial)`` of ``input``'s dtype.

    Raises:
        RuntimeError: for shapes, parameters, dtypes or devices that do not make a convolution
            (torch's messages; the kernels index by these shapes without bounds checks). The checks
            are cached per distinct call (Note [Cached convolution checks]).
    """
    stride, padding, dilation, output_padding = _check_primitive(
        "convolution", input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def _convolution(input: Tensor, weight: Tensor, bias, stride, padding, dilation, transposed: bool,
                 output_padding, groups: int) -> Tensor:
    """:func:`convolution` of checked arguments (what conv1d, conv2d and their transposes call)."""
    dim = input.ndim - 2
    stride, padding, dilation, output_padding = (_pad2(tuple(v), dim, f) for v, f in
                                                 ((stride, 1), (padding, 0), (dilation, 1), (output_padding, 0)))
    x, w = _as4d(input._data, dim), _as4d(weight._data, dim)
    out = CONVOLUTION.kernel(input._device.type)(x, w, None if bias is None else bias._data, stride, padding,
                                                 dilation, bool(transposed), output_padding, int(groups))
    if dim == 1:
        out = out.reshape(out.shape[0], out.shape[1], out.shape[3])
    out = _wrap(out, input._device)
    if grad_state.enabled and (input._requires_grad or weight._requires_grad
                               or (bias is not None and bias._requires_grad)):
        record(CONVOLUTION, (input, weight, bias, stride[2 - dim:], padding[2 - dim:], dilation[2 - dim:],
                             bool(transposed), output_padding[2 - dim:], int(groups)), {}, out)
    return out


@CONVOLUTION_BACKWARD_WEIGHT.front
def convolution_backward_weight(grad_output: Tensor, input: Tensor, weight_size, stride, padding, dilation,
                                transposed: bool, output_padding, groups: int) -> Tensor:
    """Gradient of :func:`convolution` with respect to its weight, given ``grad_output`` and ``input``.

    Args:
        grad_output: ``(N, C_out, *out_spatial)``, the gradient of the convolution's result.
        input: ``(N, C_in, *spatial)``, the convolution's input.
        weight_size: the shape of the weight.
        stride, padding, dilation, transposed, output_padding, groups: as given to :func:`convolution`.

    Returns:
        A tensor of shape ``weight_size``; it is bilinear in ``grad_output`` and ``input``, and
        differentiable in both (double backward of convolutions).
    """
    ws = tuple(weight_size)
    _check_backward_weight(grad_output, input, ws, stride, padding, dilation, transposed, output_padding, groups)
    dim = input.ndim - 2
    st, pa, di, op = (_pad2(tuple(v), dim, f) for v, f in
                      ((stride, 1), (padding, 0), (dilation, 1), (output_padding, 0)))
    ws4 = (ws[0], ws[1], 1, ws[2]) if dim == 1 else ws
    gw = CONVOLUTION_BACKWARD_WEIGHT.kernel(input._device.type)(
        _as4d(grad_output._data, dim), _as4d(input._data, dim), ws4, st, pa, di, bool(transposed), op, int(groups))
    out = _wrap(gw.reshape(ws), input._device)
    if grad_state.enabled and (input._requires_grad or grad_output._requires_grad):
        record(CONVOLUTION_BACKWARD_WEIGHT, (grad_output, input, ws, tuple(stride), tuple(padding), tuple(dilation),
                                             bool(transposed), tuple(output_padding), int(groups)), {}, out)
    return out


def _check_primitive(opname, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The checks of the :func:`convolution` primitive called directly (or by autograd): its input must be
    batched; returns ``(stride, padding, dilation, output_padding)`` as tuples of ints."""
    check_tensor(input, "input", opname)
    check_tensor(weight, "weight", opname)
    if bias is not None:
        check_tensor(bias, "bias", opname)
    _check_dtypes(opname, input, weight, bias)
    return _checked_call(opname, input, tuple(weight.shape), None if bias is None else tuple(bias.shape), stride,
                         padding, dilation, transposed, output_padding, groups)[:4]


def _check_backward_weight(grad_output, input, weight_size, stride, padding, dilation, transposed, output_padding,
                           groups) -> None:
    """``grad_output`` must be the gradient of the convolution of ``input`` with a weight of ``weight_size``:
    the weight-gradient kernels index both by those shapes."""
    opname = "convolution_backward_weight"
    check_tensor(grad_output, "grad_output", opname)
    check_tensor(input, "input", opname)
    if grad_output.dtype is not input.dtype or grad_output._device is not input._device:
        raise RuntimeError(f"{opname}(): expected grad_output of input's dtype and device ({input.dtype} on "
                           f"{input._device}), got {grad_output.dtype} on {grad_output._device}")
    expected = _checked_call(opname, input, tuple(weight_size), None, stride, padding, dilation, transposed,
                             output_padding, groups)[4]
    if tuple(grad_output.shape) != expected:
        raise RuntimeError(f"{opname}(): expected grad_output of size {list(expected)} (the output of the "
                           f"convolution of input {list(input.shape)} with weight {list(weight_size)}), got "
                           f"{list(grad_output.shape)}")


def _checked_call(opname, input, w_shape, b_shape, stride, padding, dilation, transposed, output_padding, groups):
    """``(stride, padding, dilation, output_padding, output_shape)`` of a convolution of a batched ``input``
    with a weight of ``w_shape``, checked by :func:`_check_params` (cached: Note [Cached convolution checks])."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{opname}(): expected a batched input (N, C, L) or (N, C, H, W), but got input of size "
                           f"{list(input.shape)}")
    args = (opname, tuple(input.shape), w_shape, b_shape, input.ndim - 2, _key(stride), _key(padding), _key(dilation),
            groups, bool(transposed), _key(output_padding))
    plain = _plain(w_shape) and _plain(args[5]) and _plain(args[6]) and _plain(args[7]) and _plain(groups) \
        and _plain(args[10])
    return (_call_shape if plain else _call_shape.__wrapped__)(*args)


def _key(v):
    """A parameter as :func:`_check_params` takes it: lists become tuples (an int expands to every dimension)."""
    return tuple(v) if isinstance(v, (list, tuple)) else v


@functools.lru_cache(maxsize=512)
def _call_shape(opname, in_shape, w_shape, b_shape, dim, stride, padding, dilation, groups, transposed,
                output_padding):
    """The pure part of :func:`_checked_call` (cached)."""
    _, stride, padding, dilation, output_padding, _ = _check_params.__wrapped__(
        opname, in_shape, w_shape, b_shape, dim, stride, padding, dilation, groups, transposed, output_padding)
    k = w_shape[2:]
    if transposed:
        spatial = [(n - 1) * s - 2 * p + d * (kk - 1) + op + 1
                   for n, s, p, d, kk, op in zip(in_shape[2:], stride, padding, dilation, k, output_padding)]
        out = (in_shape[0], w_shape[1] * groups, *spatial)
    else:
        spatial = [_out_size(n, kk, s, p, d) for n, kk, s, p, d in zip(in_shape[2:], k, stride, padding, dilation)]
        out = (in_shape[0], w_shape[0], *spatial)
    return stride, padding, dilation, output_padding, out


# --- user-facing composites ---------------------------------------------------------------------------
def _expand(value, n: int, argname: str):
    if isinstance(value, bool):
        raise TypeError(f"{argname} must be an int or a tuple of ints, got bool")
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) == 1:
            return tuple(value) * n
        if len(value) == n:
            return tuple(value)
        raise RuntimeError(f"expected {argname} to be a single integer value or a list of {n} values to match "
                           f"the convolution dimensions, but got {argname}={list(value)}")
    raise TypeError(f"{argname} must be an int or a tuple of ints, got {type(value).__name__}")


def _check_conv(opname, input, weight, bias, dim, stride, padding, dilation, groups, transposed, output_padding):
    """torch's argument checks; returns (batched input, stride, padding, dilation, output_padding, groups, asym)."""
    check_tensor(input, "input", opname)
    check_tensor(weight, "weight", opname)
    if bias is not None:
        check_tensor(bias, "bias", opname)
    args = (opname, input.shape, weight.shape, None if bias is None else bias.shape, dim, stride, padding,
            dilation, groups, transposed, output_padding)
    # Only ints, tuples of ints and strings go through the cache: a bool or float parameter (or one in
    # a tuple) compares equal to an int and would hit an entry made for valid arguments.
    plain = _plain(stride) and _plain(padding) and _plain(dilation) and _plain(groups) and _plain(output_padding)
    checked = _check_params if plain else _check_params.__wrapped__
    if input.ndim not in (dim + 1, dim + 2) or weight.ndim != dim + 2:
        checked(*args)  # raises torch's message
    _check_dtypes(opname, input, weight, bias)
    batched, stride, padding, dilation, output_padding, asym = checked(*args)
    if not input.dtype.is_floating_point and (
            input._requires_grad or weight._requires_grad):  # pragma: no cover - ints cannot require grad
        raise RuntimeError("only floating point tensors can require gradients")
    return input if batched else input.unsqueeze(0), batched, stride, padding, dilation, output_padding, asym


def _plain(v) -> bool:
    """Whether ``v`` is an int, a tuple of ints or a string (exact types: no bool, no float)."""
    t = type(v)
    if t is int or t is str:
        return True
    if t is not tuple:
        return False
    for e in v:
        if type(e) is not int:
            return False
    return True


# Note [Cached convolution checks]: the checks of a convolution's shapes and parameters depend on
# nothing else, and a model calls each layer with the same ones every step: they are computed once
# per distinct call (an exception is not cached, so a bad call raises every time). They cost ~15 µs
# a call otherwise, as much as the whole kernel of a small layer.
@functools.lru_cache(maxsize=512)
def _check_params(opname, in_shape, w_shape, b_shape, dim, stride, padding, dilation, groups, transposed,
                  output_padding):
    """The shape and parameter checks of :func:`_check_conv` (pure: cached); returns
    ``(batched, stride, padding, dilation, output_padding, asym)``."""
    if len(in_shape) not in (dim + 1, dim + 2):
        raise RuntimeError(f"Expected {dim + 1}D (unbatched) or {dim + 2}D (batched) input to {opname}, but got "
                           f"input of size: {list(in_shape)}")
    if len(w_shape) != dim + 2:
        raise RuntimeError(f"Expected {dim + 2}-dimensional weight for {dim + 2}-dimensional input "
                           f"{list(in_shape)}, but got {len(w_shape)}-dimensional weight of size "
                           f"{list(w_shape)} instead")
    if isinstance(groups, bool) or not isinstance(groups, int):
        raise TypeError(f"{opname}(): argument 'groups' must be int, not {type(groups).__name__}")
    stride = _expand(stride, dim, "stride")
    dilation = _expand(dilation, dim, "dilation")
    output_padding = _expand(output_padding, dim, "output_padding")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    k = tuple(w_shape[2:])
    asym = None
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * dim
        elif padding == "same":
            if transposed:
                raise RuntimeError(f"{opname}(): padding='same' is not supported for transposed convolutions")
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            totals = [d * (kk - 1) for d, kk in zip(dilation, k)]
            padding = tuple(t // 2 for t in totals)
            if any(t % 2 for t in totals):
                asym = tuple(t - t // 2 - t // 2 for t in totals)  # the extra pad on the right/bottom
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        padding = _expand(padding, dim, "padding")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    batched = len(in_shape) == dim + 2
    x_shape = tuple(in_shape) if batched else (1, *in_shape)
    C = x_shape[1]
    if transposed:
        if w_shape[0] != C:
            raise RuntimeError(f"Given transposed=1, weight of size {list(w_shape)}, expected input"
                               f"{list(x_shape)} to have {w_shape[0]} channels, but got {C} channels instead")
        if w_shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size {list(w_shape)} instead")
        out_channels = w_shape[1] * groups
        for i in range(dim):
            if output_padding[i] >= stride[i] and output_padding[i] >= dilation[i]:
                names = ("height", "width") if dim == 2 else ("",)
                raise RuntimeError(
                    "output padding must be smaller than either stride or dilation, but got "
                    + " ".join(f"output_padding_{n}: {output_padding[j]}" for j, n in enumerate(names)) + " "
                    + " ".join(f"stride_{n}: {stride[j]}" for j, n in enumerate(names)) + " "
                    + " ".join(f"dilation_{n}: {dilation[j]}" for j, n in enumerate(names)))
        spatial = x_shape[2:]
        size = [(n - 1) * s - 2 * p + d * (kk - 1) + op + 1
                for n, s, p, d, kk, op in zip(spatial, stride, padding, dilation, k, output_padding)]
        if any(n <= 0 for n in size):
            raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). Calculated output "
                               f"size per channel: ({' x '.join(map(str, size))}). Output size is too small")
    else:
        if w_shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                               f"but got weight of size {list(w_shape)} instead")
        if w_shape[1] * groups != C:
            raise RuntimeError(f"Given groups={groups}, weight of size {list(w_shape)}, expected input"
                               f"{list(x_shape)} to have {w_shape[1] * groups} channels, but got {C} "
                               "channels instead")
        out_channels = w_shape[0]
        spatial = x_shape[2:]
        padded = tuple(n + 2 * p + (asym[i] if asym else 0) for i, (n, p) in enumerate(zip(spatial, padding)))
        eff = tuple(d * (kk - 1) + 1 for d, kk in zip(dilation, k))
        if any(e > pn for e, pn in zip(eff, padded)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                               f"Kernel size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                               "actual input size")
    if b_shape is not None and (len(b_shape) != 1 or b_shape[0] != out_channels):
        raise RuntimeError(f"Given weight of size {list(w_shape)}, expected bias to be 1-dimensional with "
                           f"{out_channels} elements, but got bias of size {list(b_shape)} instead")
    return batched, stride, padding, dilation, output_padding, asym


def _pad_right(x, extra, dim):
    """``x`` with ``extra[i]`` zeros appended along spatial dimension ``i`` (asymmetric 'same' padding)."""
    import flambeau as fl

    for i, e in enumerate(extra):
        if e:
            shape = list(x.shape)
            shape[2 + i] = e
            x = fl.cat([x, fl.zeros(shape, dtype=x.dtype, device=x.device)], 2 + i)
    return x


def _conv(opname, dim, input, weight, bias, stride, padding, dilation, groups):
    x, batched, stride, padding, dilation, _, asym = _check_conv(
        opname, input, weight, bias, dim, stride, padding, dilation, groups, False, 0)
    if asym is not None:
        x = _pad_right(x, asym, dim)
    out = _convolution(x, weight, bias, stride, padding, dilation, False, (0,) * dim, groups)
    return out if batched else out.squeeze(0)


def _conv_t(opname, dim, input, weight, bias, stride, padding, output_padding, groups, dilation):
    x, batched, stride, padding, dilation, output_padding, _ = _check_conv(
        opname, input, weight, bias, dim, stride, padding, dilation, groups, True, output_padding)
    out = _convolution(x, weight, bias, stride, padding, dilation, True, output_padding, groups)
    return out if batched else out.squeeze(0)


CONV1D = declare("conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, "
                 "str padding=0, int[1] dilation=1, int groups=1) -> Tensor",
                 category="convolution", method=False, composite=True)
CONV2D = declare("conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
                 "str padding=0, int[2] dilation=1, int groups=1) -> Tensor",
                 category="convolution", method=False, composite=True)
CONV_TRANSPOSE1D = declare("conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, "
                           "int[1] padding=0, int[1] output_padding=0, int groups=1, int[1] dilation=1) -> Tensor",
                           category="convolution", method=False, composite=True)
CONV_TRANSPOSE2D = declare("conv_transpose2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
                           "int[2] padding=0, int[2] output_padding=0, int groups=1, int[2] dilation=1) -> Tensor",
                           category="convolution", method=False, composite=True)


@CONV1D.front
def conv1d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """1-D convolution (cross-correlation, as in torch) over ``input`` ``(N, C_in, L)`` or ``(C_in, L)``.

    Args:
        input: float tensor ``(N, C_in, L)`` or unbatched ``(C_in, L)``.
        weight: ``(C_out, C_in / groups, K)``.
        bias: optional ``(C_out,)``.
        stride: int or 1-tuple.
        padding: int, 1-tuple, ``"valid"`` (no padding) or ``"same"`` (output length = input length, stride 1).
        dilation: spacing between kernel taps.
        groups: ``C_in`` and ``C_out`` are split into this many independent groups.

    Returns:
        ``(N, C_out, L_out)`` (or ``(C_out, L_out)``) with
        ``L_out = (L + 2 * padding - dilation * (K - 1) - 1) // stride + 1``.
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@CONV2D.front
def conv2d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation, as in torch) over ``input`` ``(N, C_in, H, W)`` or ``(C_in, H, W)``.

    Args:
        input: float tensor ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_out, C_in / groups, KH, KW)``.
        bias: optional ``(C_out,)``.
        stride: int or pair.
        padding: int, pair, ``"valid"`` or ``"same"`` (output size = input size; stride 1 only).
        dilation: int or pair, spacing between kernel taps.
        groups: blocked connections; ``groups == C_in`` with ``C_out = k * C_in`` is a depthwise convolution.

    Returns:
        ``(N, C_out, H_out, W_out)`` with ``H_out = (H + 2 * padding - dilation * (KH - 1) - 1) // stride + 1``
        (likewise ``W_out``).
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@CONV_TRANSPOSE1D.front
def conv_transpose1d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1) -> Tensor:
    """1-D transposed convolution (the gradient of :func:`conv1d` with respect to its input).

    Args:
        input: float tensor ``(N, C_in, L)`` or unbatched ``(C_in, L)``.
        weight: ``(C_in, C_out / groups, K)``.
        bias: optional ``(C_out,)``.
        stride, padding, dilation: as for the convolution this transposes.
        output_padding: extra length added on one side of the output (smaller than stride or dilation).
        groups: blocked connections.

    Returns:
        ``(N, C_out, L_out)`` with ``L_out = (L - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1``.
    """
    return _conv_t("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups, dilation)


@CONV_TRANSPOSE2D.front
def conv_transpose2d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1) -> Tensor:
    """2-D transposed convolution ("deconvolution": the gradient of :func:`conv2d` with respect to its input).

    Args:
        input: float tensor ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_in, C_out / groups, KH, KW)``.
        bias: optional ``(C_out,)``.
        stride, padding, dilation: int or pair, as for the convolution this transposes.
        output_padding: int or pair added to one side of each output dimension (smaller than stride or dilation).
        groups: blocked connections.

    Returns:
        ``(N, C_out, H_out, W_out)`` with
        ``H_out = (H - 1) * stride - 2 * padding + dilation * (KH - 1) + output_padding + 1`` (likewise ``W_out``).
    """
    return _conv_t("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups, dilation)
