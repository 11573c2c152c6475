"""CPU kernels of 3x3 stride-1 convolutions by Winograd's minimal filtering, F(2x2, 3x3).

Lavin and Gray's algorithm (Fast Algorithms for Convolutional Neural Networks, 2016): an output tile of
2x2 pixels is ``A^T [(G g G^T) * (B^T d B)] A`` for its 4x4 input tile ``d`` and the 3x3 filter ``g``; summed
over input channels, the elementwise products become 16 matrix products (one per position of the 4x4
transformed tile) of ``(O, C)`` transformed filters by ``(C, tiles)`` transformed inputs. That is 16
multiply-adds per 4 outputs and channel pair where im2col's GEMM does 36: 2.25x fewer, for cheap
transforms of the inputs, filters and outputs (Note [Winograd transforms, planar], Note [Winograd on small
planes]; the filters' is one GEMM by ``kron(G, G)``). Errors stay at im2col's level (the transforms' constants
are 0, 1 and 1/2).

``conv.py``'s convolution kernels call :func:`forward` (also for the input gradient, ``adjoint=True``: the
adjoint of a 3x3 stride-1 convolution is one with the filter flipped and transposed, padding ``2 - p``) and
:func:`weight_grad` where :func:`usable` says so; this module registers no operator of its own. The
matrices are::

    B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

and the weight gradient is ``G^T [sum over tiles of (A dY A^T) * (B^T d B)] G``.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau import _dtype as dt

__all__ = ["forward", "usable", "weight_grad"]

# Note [When Winograd pays]: against im2col + OpenBLAS, two threads (AMD EPYC, AVX-512; forward / input
# gradient / weight gradient): 32 channels on 32x32, batch 32, 3.18 / 3.07 / 4.10 ms against 5.24 / 4.59 /
# 6.89 (torch 3.38 / 3.17 / 3.65); 64 on 56x56, batch 8, 7.6 / 7.9 / 9.2 against 21.0 / 11.5 / 15.7; 128 on
# 8x8, batch 32, 2.9 / 4.1 / 2.9 against 3.7-4.2 / 3.9-6.5 / 4.0-6.4 (torch 2.7 / 2.7 / 3.8). On 4x4 planes
# (4 tiles) and 3x3 ones (4 tiles, 7 of 16 outputs wasted) it was no faster. Under 16 channels the 16
# products are too thin for BLAS. Planes of 14x14 tiles or more run the planar kernels (Note [Winograd
# transforms, planar]), smaller ones the channels-last kernels (Note [Winograd on small planes]): on 16x16
# planes the channels-last ones were 5-20% faster (32 and 64 channels), on 28x28 and 14x14 even, on 32x32
# and 56x56 slower by 20-50%.
_MIN_TILES = 16  # 4x4 tiles: output planes of 7x7 or more
_PLANAR_TILES = 196  # 14x14 tiles: output planes of 27x27 or more
_MIN_CHANNELS = 16
# Images per chunk: the transformed inputs and products of a chunk (16 x (C + O) x tiles values) stay
# around this many bytes, so they are written and read back in the cache; at least _MIN_CHUNK_TILES
# tiles, so that the 16 products are wide enough for BLAS.
_CHUNK_BYTES = 1 << 19
_MIN_CHUNK_TILES = 64
# The 16 transformed planes of a chunk lie this many elements more than a multiple of their size apart:
# planes a power of two bytes apart map to the same cache sets, and the input transform ran 2x slower.
_PLANE_SKEW = 16


def usable(C, O, OH, OW, kernel_size, stride, dilation, groups, dtype) -> bool:
    """Whether a convolution of ``C`` input and ``O`` output channels with output planes ``OH x OW`` runs
    here (Note [When Winograd pays])."""
    return (tuple(kernel_size) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and dtype in dt.FLOAT_NP
            and min(C, O) >= _MIN_CHANNELS and ((OH + 1) // 2) * ((OW + 1) // 2) >= _MIN_TILES)


@functools.cache
def _numba_winograd():
    """The input, output and gradient transforms over tile rows (Note [Winograd transforms, planar]),
    compiled on first use (float32 and float64)."""
    import numba

    serial = {"parallel": False, "cache": True, "nogil": True, "fastmath": {"contract", "reassoc", "nsz", "arcp"}}

    # Note [Winograd transforms, planar]: neighbouring tiles overlap by two columns and step by two, so a
    # loop over the tiles of a row reads and writes every other element. LLVM turns such loops into
    # gathers and scatters, which ran the output transform 50x slower on AMD's Zen 4. Each kernel
    # keeps its tile rows planar instead: the input is copied, zero-padded, into the even and the odd
    # columns of a scratch plane (pe, po), so tile j's four columns are pe[j], po[j], pe[j + 1],
    # po[j + 1]; the output (and the gradient fed to the weight gradient) goes through four planar rows
    # (even and odd columns of the tile's two rows) interleaved by one scalar copy per pixel. A
    # transformed plane is ``V[k, c, t]`` at ``k * ks + c * T + t`` (``t`` the tile (n, i, j) of the
    # chunk, ``ks`` the skewed plane stride, see _PLANE_SKEW).
    @numba.njit(**serial)
    def input_tiles(x, n0, n1, ph, pw, th, tw, Vf, ks, pe, po, rt):
        # x (N, C, H, W) -> V (16, C, T) = B^T d B of every 4x4 tile of images n0..n1
        N, C, H, W = x.shape
        Wh = tw + 1
        T = (n1 - n0) * th * tw
        xf = x.reshape(-1)
        ef = pe.reshape(-1)
        of = po.reshape(-1)
        rf = rt.reshape(-1)
        u = np.uintp
        for q in range(ef.size):
            ef[q] = 0
            of[q] = 0
        for n in range(n0, n1):
            for c in range(C):
                xb = (n * C + c) * H * W
                for ih in range(H):
                    r = (ih + ph) * Wh
                    s = xb + ih * W
                    for iw in range(W):
                        q = iw + pw
                        if q % 2 == 0:
                            ef[u(r + q // 2)] = xf[u(s + iw)]
                        else:
                            of[u(r + q // 2)] = xf[u(s + iw)]
                for i in range(th):
                    b0 = 2 * i * Wh
                    # B^T over the tile rows, for the even and odd columns: rf[(2 * row + parity) * Wh + m]
                    for m in range(Wh):
                        d0 = ef[u(b0 + m)]
                        d1 = ef[u(b0 + Wh + m)]
                        d2 = ef[u(b0 + 2 * Wh + m)]
                        d3 = ef[u(b0 + 3 * Wh + m)]
                        rf[u(m)] = d0 - d2
                        rf[u(2 * Wh + m)] = d1 + d2
                        rf[u(4 * Wh + m)] = d2 - d1
                        rf[u(6 * Wh + m)] = d1 - d3
                        d0 = of[u(b0 + m)]
                        d1 = of[u(b0 + Wh + m)]
                        d2 = of[u(b0 + 2 * Wh + m)]
                        d3 = of[u(b0 + 3 * Wh + m)]
                        rf[u(Wh + m)] = d0 - d2
                        rf[u(3 * Wh + m)] = d1 + d2
                        rf[u(5 * Wh + m)] = d2 - d1
                        rf[u(7 * Wh + m)] = d1 - d3
                    tb = ((n - n0) * th + i) * tw
                    for r in range(4):  # then B over the columns of each transformed row
                        o = r * 4 * ks + c * T + tb
                        e = 2 * r * Wh
                        od = e + Wh
                        for j in range(tw):
                            a = rf[u(e + j)]
                            b = rf[u(od + j)]
                            cc = rf[u(e + j + 1)]
                            d = rf[u(od + j + 1)]
                            Vf[u(o + j)] = a - cc
                            Vf[u(o + ks + j)] = b + cc
                            Vf[u(o + 2 * ks + j)] = cc - b
                            Vf[u(o + 3 * ks + j)] = b - d

    @numba.njit(**serial)
    def output_tiles(Mf, ks, y, n0, n1, th, tw, ot):
        # M (16, O, T) -> y[n0:n1] (N, O, OH, OW): A^T m A of every tile, cropped at the plane's edge
        N, O, OH, OW = y.shape
        T = (n1 - n0) * th * tw
        yf = y.reshape(-1)
        of = ot.reshape(-1)
        u = np.uintp
        for n in range(n0, n1):
            for o in range(O):
                yb = (n * O + o) * OH * OW
                for i in range(th):
                    tb = o * T + ((n - n0) * th + i) * tw
                    for j in range(tw):
                        q = tb + j
                        m0 = Mf[u(q)]
                        m1 = Mf[u(ks + q)]
                        m2 = Mf[u(2 * ks + q)]
                        m3 = Mf[u(3 * ks + q)]
                        m4 = Mf[u(4 * ks + q)]
                        m5 = Mf[u(5 * ks + q)]
                        m6 = Mf[u(6 * ks + q)]
                        m7 = Mf[u(7 * ks + q)]
                        m8 = Mf[u(8 * ks + q)]
                        m9 = Mf[u(9 * ks + q)]
                        m10 = Mf[u(10 * ks + q)]
                        m11 = Mf[u(11 * ks + q)]
                        m12 = Mf[u(12 * ks + q)]
                        m13 = Mf[u(13 * ks + q)]
                        m14 = Mf[u(14 * ks + q)]
                        m15 = Mf[u(15 * ks + q)]
                        r0 = m0 + m4 + m8
                        r1 = m1 + m5 + m9
                        r2 = m2 + m6 + m10
                        r3 = m3 + m7 + m11
                        s0 = m4 - m8 - m12
                        s1 = m5 - m9 - m13
                        s2 = m6 - m10 - m14
                        s3 = m7 - m11 - m15
                        of[u(j)] = r0 + r1 + r2
                        of[u(tw + j)] = r1 - r2 - r3
                        of[u(2 * tw + j)] = s0 + s1 + s2
                        of[u(3 * tw + j)] = s1 - s2 - s3
                    for a in range(2):
                        oh = 2 * i + a
                        if oh < OH:
                            s = yb + oh * OW
                            for ow in range(OW):
                                yf[u(s + ow)] = of[u((2 * a + ow % 2) * tw + ow // 2)]

    @numba.njit(**serial)
    def gradient_tiles(g, n0, n1, th, tw, Zf, ks, ot):
        # g (N, O, OH, OW) -> Z (16, O, T) = A dY A^T of every 2x2 gradient tile (zero past the plane)
        N, O, OH, OW = g.shape
        T = (n1 - n0) * th * tw
        gf = g.reshape(-1)
        of = ot.reshape(-1)
        u = np.uintp
        for n in range(n0, n1):
            for o in range(O):
                gb = (n * O + o) * OH * OW
                for i in range(th):
                    for q in range(4 * tw):
                        of[q] = 0
                    for a in range(2):
                        oh = 2 * i + a
                        if oh < OH:
                            s = gb + oh * OW
                            for ow in range(OW):
                                of[u((2 * a + ow % 2) * tw + ow // 2)] = gf[u(s + ow)]
                    zb = o * T + ((n - n0) * th + i) * tw
                    for j in range(tw):
                        y00 = of[u(j)]
                        y01 = of[u(tw + j)]
                        y10 = of[u(2 * tw + j)]
                        y11 = of[u(3 * tw + j)]
                        # rows: A dY = (y0, y0 + y1, y0 - y1, -y1); then columns alike
                        a0 = y00
                        b0 = y01
                        a1 = y00 + y10
                        b1 = y01 + y11
                        a2 = y00 - y10
                        b2 = y01 - y11
                        a3 = -y10
                        b3 = -y11
                        q = zb + j
                        Zf[u(q)] = a0
                        Zf[u(ks + q)] = a0 + b0
                        Zf[u(2 * ks + q)] = a0 - b0
                        Zf[u(3 * ks + q)] = -b0
                        Zf[u(4 * ks + q)] = a1
                        Zf[u(5 * ks + q)] = a1 + b1
                        Zf[u(6 * ks + q)] = a1 - b1
                        Zf[u(7 * ks + q)] = -b1
                        Zf[u(8 * ks + q)] = a2
                        Zf[u(9 * ks + q)] = a2 + b2
                        Zf[u(10 * ks + q)] = a2 - b2
                        Zf[u(11 * ks + q)] = -b2
                        Zf[u(12 * ks + q)] = a3
                        Zf[u(13 * ks + q)] = a3 + b3
                        Zf[u(14 * ks + q)] = a3 - b3
                        Zf[u(15 * ks + q)] = -b3

    return input_tiles, output_tiles, gradient_tiles


@functools.cache
def _numba_winograd_channels_last():
    """The input, output and gradient transforms over channel vectors (Note [Winograd on small planes])."""
    import numba

    serial = {"parallel": False, "cache": True, "nogil": True, "fastmath": {"contract", "reassoc", "nsz", "arcp"}}

    # Note [Winograd on small planes]: a plane of 7x7 to 26x26 outputs has 4 to 13 tiles a row, short
    # loops for the planar kernels. Here the transforms loop over channels instead: the images are
    # copied channels-last into a zero-bordered scratch plane (Hp, Wp, C) (as im2row's, Note [Columns as
    # rows of channel vectors]), a tile's 16 pixels are 16 channel vectors, and a transformed plane is
    # ``V[k, t, c]`` at ``k * ks + t * C + c``; the 16 products are ``(T, C) @ (C, O)``, and the output
    # (or gradient) tiles go through a channels-last plane too.
    @numba.njit(**serial)
    def input_tiles(x, n0, n1, ph, pw, th, tw, Vf, ks, xp):
        # x (N, C, H, W) -> V (16, T, C) = B^T d B of every tile, channel vectors
        N, C, H, W = x.shape
        Wp = 2 * tw + 2
        xf = x.reshape(-1)
        u = np.uintp
        for q in range(xp.size):
            xp[q] = 0
        for n in range(n0, n1):
            for ih in range(H):
                for c in range(C):
                    d = ((ih + ph) * Wp + pw) * C + c
                    src = ((n * C + c) * H + ih) * W
                    for iw in range(W):
                        xp[u(d + iw * C)] = xf[u(src + iw)]
            for i in range(th):
                for j in range(tw):
                    t = ((n - n0) * th + i) * tw + j
                    b = (2 * i * Wp + 2 * j) * C
                    for c in range(C):
                        p0 = b + c
                        p1 = p0 + Wp * C
                        p2 = p1 + Wp * C
                        p3 = p2 + Wp * C
                        # rows of B^T d: (d0 - d2, d1 + d2, d2 - d1, d1 - d3), each 4 columns
                        r00 = xp[u(p0)] - xp[u(p2)]
                        r01 = xp[u(p0 + C)] - xp[u(p2 + C)]
                        r02 = xp[u(p0 + 2 * C)] - xp[u(p2 + 2 * C)]
                        r03 = xp[u(p0 + 3 * C)] - xp[u(p2 + 3 * C)]
                        r10 = xp[u(p1)] + xp[u(p2)]
                        r11 = xp[u(p1 + C)] + xp[u(p2 + C)]
                        r12 = xp[u(p1 + 2 * C)] + xp[u(p2 + 2 * C)]
                        r13 = xp[u(p1 + 3 * C)] + xp[u(p2 + 3 * C)]
                        r20 = xp[u(p2)] - xp[u(p1)]
                        r21 = xp[u(p2 + C)] - xp[u(p1 + C)]
                        r22 = xp[u(p2 + 2 * C)] - xp[u(p1 + 2 * C)]
                        r23 = xp[u(p2 + 3 * C)] - xp[u(p1 + 3 * C)]
                        r30 = xp[u(p1)] - xp[u(p3)]
                        r31 = xp[u(p1 + C)] - xp[u(p3 + C)]
                        r32 = xp[u(p1 + 2 * C)] - xp[u(p3 + 2 * C)]
                        r33 = xp[u(p1 + 3 * C)] - xp[u(p3 + 3 * C)]
                        q = t * C + c
                        Vf[u(q)] = r00 - r02
                        Vf[u(ks + q)] = r01 + r02
                        Vf[u(2 * ks + q)] = r02 - r01
                        Vf[u(3 * ks + q)] = r01 - r03
                        Vf[u(4 * ks + q)] = r10 - r12
                        Vf[u(5 * ks + q)] = r11 + r12
                        Vf[u(6 * ks + q)] = r12 - r11
                        Vf[u(7 * ks + q)] = r11 - r13
                        Vf[u(8 * ks + q)] = r20 - r22
                        Vf[u(9 * ks + q)] = r21 + r22
                        Vf[u(10 * ks + q)] = r22 - r21
                        Vf[u(11 * ks + q)] = r21 - r23
                        Vf[u(12 * ks + q)] = r30 - r32
                        Vf[u(13 * ks + q)] = r31 + r32
                        Vf[u(14 * ks + q)] = r32 - r31
                        Vf[u(15 * ks + q)] = r31 - r33

    @numba.njit(**serial)
    def output_tiles(Mf, ks, y, n0, n1, th, tw, yp):
        # M (16, T, O) -> y[n0:n1] (N, O, OH, OW) through the channels-last plane yp (2 th, 2 tw, O)
        N, O, OH, OW = y.shape
        W2 = 2 * tw
        yf = y.reshape(-1)
        u = np.uintp
        for n in range(n0, n1):
            for i in range(th):
                for j in range(tw):
                    t = ((n - n0) * th + i) * tw + j
                    b = (2 * i * W2 + 2 * j) * O
                    for o in range(O):
                        q = t * O + o
                        m0 = Mf[u(q)]
                        m1 = Mf[u(ks + q)]
                        m2 = Mf[u(2 * ks + q)]
                        m3 = Mf[u(3 * ks + q)]
                        m4 = Mf[u(4 * ks + q)]
                        m5 = Mf[u(5 * ks + q)]
                        m6 = Mf[u(6 * ks + q)]
                        m7 = Mf[u(7 * ks + q)]
                        m8 = Mf[u(8 * ks + q)]
                        m9 = Mf[u(9 * ks + q)]
                        m10 = Mf[u(10 * ks + q)]
                        m11 = Mf[u(11 * ks + q)]
                        m12 = Mf[u(12 * ks + q)]
                        m13 = Mf[u(13 * ks + q)]
                        m14 = Mf[u(14 * ks + q)]
                        m15 = Mf[u(15 * ks + q)]
                        r0 = m0 + m4 + m8
                        r1 = m1 + m5 + m9
                        r2 = m2 + m6 + m10
                        r3 = m3 + m7 + m11
                        s0 = m4 - m8 - m12
                        s1 = m5 - m9 - m13
                        s2 = m6 - m10 - m14
                        s3 = m7 - m11 - m15
                        yp[u(b + o)] = r0 + r1 + r2
                        yp[u(b + O + o)] = r1 - r2 - r3
                        yp[u(b + W2 * O + o)] = s0 + s1 + s2
                        yp[u(b + (W2 + 1) * O + o)] = s1 - s2 - s3
            for oh in range(OH):
                for o in range(O):
                    d = ((n * O + o) * OH + oh) * OW
                    src = oh * W2 * O + o
                    for ow in range(OW):
                        yf[u(d + ow)] = yp[u(src + ow * O)]

    @numba.njit(**serial)
    def gradient_tiles(g, n0, n1, th, tw, Zf, ks, gp):
        # g (N, O, OH, OW) -> Z (16, T, O) = A dY A^T of every tile, through gp (2 th, 2 tw, O), zero past the plane
        N, O, OH, OW = g.shape
        W2 = 2 * tw
        gf = g.reshape(-1)
        u = np.uintp
        for q in range(gp.size):
            gp[q] = 0
        for n in range(n0, n1):
            for oh in range(OH):
                for o in range(O):
                    src = ((n * O + o) * OH + oh) * OW
                    d = oh * W2 * O + o
                    for ow in range(OW):
                        gp[u(d + ow * O)] = gf[u(src + ow)]
            for i in range(th):
                for j in range(tw):
                    t = ((n - n0) * th + i) * tw + j
                    b = (2 * i * W2 + 2 * j) * O
                    for o in range(O):
                        y00 = gp[u(b + o)]
                        y01 = gp[u(b + O + o)]
                        y10 = gp[u(b + W2 * O + o)]
                        y11 = gp[u(b + (W2 + 1) * O + o)]
                        a1 = y00 + y10
                        b1 = y01 + y11
                        a2 = y00 - y10
                        b2 = y01 - y11
                        q = t * O + o
                        Zf[u(q)] = y00
                        Zf[u(ks + q)] = y00 + y01
                        Zf[u(2 * ks + q)] = y00 - y01
                        Zf[u(3 * ks + q)] = -y01
                        Zf[u(4 * ks + q)] = a1
                        Zf[u(5 * ks + q)] = a1 + b1
                        Zf[u(6 * ks + q)] = a1 - b1
                        Zf[u(7 * ks + q)] = -b1
                        Zf[u(8 * ks + q)] = a2
                        Zf[u(9 * ks + q)] = a2 + b2
                        Zf[u(10 * ks + q)] = a2 - b2
                        Zf[u(11 * ks + q)] = -b2
                        Zf[u(12 * ks + q)] = -y10
                        Zf[u(13 * ks + q)] = -y10 - y11
                        Zf[u(14 * ks + q)] = y11 - y10
                        Zf[u(15 * ks + q)] = y11

    return input_tiles, output_tiles, gradient_tiles


# G (x) G: the 16 x 9 matrix that takes a filter's nine taps to its transformed tile (``G g G^T`` read row
# by row is ``kron(G, G) @ g``), and its transpose the tile's gradient back to the taps' (``G^T dU G``); per
# compute dtype, and with its columns reversed (``flipped``): flipping a 3x3 filter reverses its nine taps.
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
_FILTER_TRANSFORM = {(np.dtype(t), flipped): np.ascontiguousarray(np.kron(_G, _G)[:, ::-1] if flipped
                                                                   else np.kron(_G, _G), t)
                     for t in dt.FLOAT_NP for flipped in (False, True)}


def _planar(th, tw) -> bool:
    """Whether the planar kernels run (else the channels-last ones, Note [Winograd on small planes])."""
    return th * tw >= _PLANAR_TILES


def _geometry(N, C, O, OH, OW, itemsize):
    """Tiles per image side ``(th, tw)``, images per chunk, and the plane strides of a chunk's ``C`` and
    ``O`` planes."""
    th, tw = (OH + 1) // 2, (OW + 1) // 2
    per_image = th * tw
    nb = max(1, _CHUNK_BYTES // (16 * (C + O) * per_image * itemsize), -(-_MIN_CHUNK_TILES // per_image))
    nb = max(1, min(nb, N))  # an empty batch still gets a chunk size (its loops then run no chunk)
    return th, tw, nb, C * nb * per_image + _PLANE_SKEW, O * nb * per_image + _PLANE_SKEW


def _planes(buf, ks, rows, cols):
    """The ``(16, rows, cols)`` view of 16 planes ``ks`` elements apart in the flat buffer ``buf``."""
    return buf.reshape(16, ks)[:, :rows * cols].reshape(16, rows, cols)


def _filters(w, dtype, planar, adjoint):
    """The transformed filters: ``(16, out, in)`` planes for the planar kernels, ``(16, in, out)`` for the
    others. ``adjoint``: ``w`` is the filter of the convolution whose input gradient is computed, its
    channels swapped (in = ``w``'s first axis) and its taps reversed, without a copy of ``w`` for either."""
    A, B = w.shape[:2]
    own_order = planar != adjoint  # the planes' (rows, columns) are w's own (first, second) axes
    rows, cols = (A, B) if own_order else (B, A)
    ks = A * B + _PLANE_SKEW
    taps = (w if own_order else w.transpose(1, 0, 2, 3)).reshape(A * B, 9).T
    buf = np.empty(16 * ks, dtype)
    np.matmul(_FILTER_TRANSFORM[np.dtype(dtype), adjoint], taps, out=buf.reshape(16, ks)[:, :A * B])
    return _planes(buf, ks, rows, cols)


class _Scratch:
    """One thread's buffers: the chunk's transformed inputs ``V`` and products (or gradient tiles) ``M``,
    and the transforms' scratch planes of either layout."""

    def __init__(self, planar, th, tw, C, O, ksV, ksM, dtype):
        self.V = np.empty(16 * ksV, dtype)
        self.M = np.empty(16 * ksM, dtype)
        if planar:
            self.into = (np.empty((2 * th + 2, tw + 1), dtype), np.empty((2 * th + 2, tw + 1), dtype),
                         np.empty((8, tw + 1), dtype))
            self.out = np.empty(4 * tw, dtype)
        else:
            self.into = (np.empty((2 * th + 2) * (2 * tw + 2) * C, dtype),)
            self.out = np.empty(4 * th * tw * O, dtype)


def forward(x, w, padding, over_images, adjoint=False):
    """``(N, C, H, W) * (O, C, 3, 3) -> (N, O, H + 2p - 2, W + 2p - 2)``, stride 1, padding ``(ph, pw)``;
    with ``adjoint``, ``w`` is ``(C, O, 3, 3)`` and is used flipped and transposed (the input gradient of
    the convolution by ``w``, for padding ``2 - p``).

    ``over_images(N, body, work)`` runs ``body(n0, n1)`` over the batch (``conv.py``'s threads).
    """
    N, C, H, W = x.shape
    O = w.shape[1] if adjoint else w.shape[0]
    ph, pw = padding
    OH, OW = H + 2 * ph - 2, W + 2 * pw - 2
    y = np.empty((N, O, OH, OW), x.dtype)
    th, tw, nb, ksV, ksM = _geometry(N, C, O, OH, OW, x.itemsize)
    planar = _planar(th, tw)
    input_tiles, output_tiles, _ = _numba_winograd() if planar else _numba_winograd_channels_last()
    U = _filters(w, x.dtype, planar, adjoint)

    def body(a, b):
        s = _Scratch(planar, th, tw, C, O, ksV, ksM, x.dtype)
        for n0 in range(a, b, nb):
            n1 = min(b, n0 + nb)
            T = (n1 - n0) * th * tw
            input_tiles(x, n0, n1, ph, pw, th, tw, s.V, ksV, *s.into)
            if planar:
                np.matmul(U, _planes(s.V, ksV, C, T), out=_planes(s.M, ksM, O, T))
            else:
                np.matmul(_planes(s.V, ksV, T, C), U, out=_planes(s.M, ksM, T, O))
            output_tiles(s.M, ksM, y, n0, n1, th, tw, s.out)

    over_images(N, body, N * O * C * 9 * OH * OW)
    return y


def weight_grad(g, x, padding, over_images):
    """The weight gradient ``(O, C, 3, 3)`` of :func:`forward` for output gradient ``g (N, O, OH, OW)``."""
    N, C, H, W = x.shape
    O, OH, OW = g.shape[1:]
    ph, pw = padding
    th, tw, nb, ksV, ksZ = _geometry(N, C, O, OH, OW, x.itemsize)
    planar = _planar(th, tw)
    input_tiles, _, gradient_tiles = _numba_winograd() if planar else _numba_winograd_channels_last()
    partials = []

    def body(a, b):
        s = _Scratch(planar, th, tw, C, O, ksV, ksZ, x.dtype)
        part = np.empty((16, O, C), x.dtype)
        total = np.zeros((16, O, C), x.dtype)
        for n0 in range(a, b, nb):
            n1 = min(b, n0 + nb)
            T = (n1 - n0) * th * tw
            input_tiles(x, n0, n1, ph, pw, th, tw, s.V, ksV, *s.into)
            gradient_tiles(g, n0, n1, th, tw, s.M, ksZ, s.out)
            if planar:  # sum over the tiles of Z (16, O, T) @ V^T (16, T, C)
                total += np.matmul(_planes(s.M, ksZ, O, T), _planes(s.V, ksV, C, T).transpose(0, 2, 1), out=part)
            else:  # Z^T (16, O, T) @ V (16, T, C)
                total += np.matmul(_planes(s.M, ksZ, T, O).transpose(0, 2, 1), _planes(s.V, ksV, T, C), out=part)
        partials.append(total)

    over_images(N, body, N * O * C * 9 * OH * OW)
    dU = partials[0]
    for part in partials[1:]:
        dU += part
    taps = _FILTER_TRANSFORM[x.dtype, False].T @ dU.reshape(16, O * C)  # G^T dU G, (9, O*C)
    return np.ascontiguousarray(taps.T).reshape(O, C, 3, 3)
