"""CPU kernels of depthwise convolutions (``groups == in_channels``, one input channel per group).

A depthwise convolution does ``K`` multiply-adds per output element, too few for the im2col + GEMM
path of ``conv.py`` beside this module to pay: direct numba kernels compute its forward, input
gradient and weight gradient, parallel over planes (Note [Depthwise convolution by phase planes]).
``conv.py``'s ``convolution`` and ``convolution_backward_weight`` kernels call them for float32 and
float64 depthwise convolutions; they register no operator of their own.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._parallel import get_num_threads


@functools.cache
def _numba_depthwise():
    """The forward, input-gradient and weight-gradient kernels, compiled on first use (float32 and float64).

    None of them calls another jitted function (numba's disk cache misses for those). They index flat
    arrays with unsigned indices (Note [Flat unsigned indices in the depthwise kernels]).
    """
    import numba
    from numba import prange

    opts = {"parallel": True, "cache": True, "fastmath": {"contract", "reassoc", "nsz", "arcp"}}

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

    return dw_forward, dw_input, dw_weight


def _is_depthwise(C, w, groups):
    return groups == C and w.shape[1] == 1 and C > 1


def _plane_chunks(planes: int) -> int:
    """How many ranges of planes the depthwise kernels hand to numba's threads (a few per thread)."""
    return max(1, min(planes, 4 * get_num_threads()))
