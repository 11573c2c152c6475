"""CPU kernels of 3x3 stride-1 convolutions by Winograd's minimal filtering, F(2x2, 3x3).

Lavin and Gray's algorithm (Fast Algorithms for Convolutional Neural Networks, 2016): an output tile of
2x2 pixels is ``A^T [(G g G^T) * (B^T d B)] A`` for its 4x4 input tile ``d`` and the 3x3 filter ``g``; summed
over input channels, the elementwise products become 16 matrix products (one per position of the 4x4
transformed tile) of ``(O, C)`` transformed filters by ``(C, tiles)`` transformed inputs. That is 16
multiply-adds per 4 outputs and channel pair where im2col's GEMM does 36: 2.25x fewer, for four cheap
transforms (Note [Winograd transforms, planar]). Errors stay at im2col's level (the transforms' constants
are 0, 1 and 1/2).

``conv.py``'s convolution kernels call :func:`forward` (also for the input gradient: the adjoint of a 3x3
stride-1 convolution is one with the filter flipped and transposed, padding ``2 - p``) and
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

__all__ = ["forward", "usable", "weight_grad"]

# Note [When Winograd pays]: one thread, batch 16, against im2col + OpenBLAS (AMD EPYC, AVX-512): 3x3
# layers on 32x32 planes of 32 channels 3.24 against 4.15 ms, 16x16 x 64 3.20 against 3.88, 56x56 x 64 28
# against 49, 14x14 x 256 15 against 21; 8x8 x 128 about even and 4x4 x 256 1.6x slower (a plane of 2x2
# tiles leaves the transforms' loops too short). Under 16 channels the 16 products are too thin for BLAS.
_MIN_TILES = 49  # 7x7 tiles: output planes of 13x13 or more
_MIN_CHANNELS = 16
# Images per chunk: the transformed inputs and products of a chunk (16 x (C + O) x tiles values) stay
# around this many bytes, so they are written and read back in the cache; at least _MIN_CHUNK_TILES
# tiles, so that the 16 products are wide enough for BLAS.
_CHUNK_BYTES = 1 << 20
_MIN_CHUNK_TILES = 256
# The 16 transformed planes of a chunk lie this many elements more than a multiple of their size apart:
# planes a power of two bytes apart map to the same cache sets, and the input transform ran 2x slower.
_PLANE_SKEW = 16


def usable(C, O, OH, OW, kernel_size, stride, dilation, groups, dtype) -> bool:
    """Whether a convolution of ``C`` input and ``O`` output channels with output planes ``OH x OW`` runs
    here (Note [When Winograd pays])."""
    return (tuple(kernel_size) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and (dtype == np.float32 or dtype == np.float64)
            and min(C, O) >= _MIN_CHANNELS and ((OH + 1) // 2) * ((OW + 1) // 2) >= _MIN_TILES)


@functools.cache
def _numba_winograd():
    """The five transforms, compiled on first use (float32 and float64); see the module docstring."""
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

    # The filters arrive as nine planes, w9[3 * kh + kw, o * C + c] (numpy transposes them), so that a loop
    # over the filters loads and stores unit-stride runs, and U's 16 planes lie ``ks`` apart (_PLANE_SKEW).
    @numba.njit(**serial)
    def filter_tiles(w9, Uf, ks):
        # w9 (9, O*C) -> U (16, O, C) = G g G^T
        OC = w9.shape[1]
        h = w9.dtype.type(0.5)
        for q in range(OC):
            g00 = w9[0, q]
            g01 = w9[1, q]
            g02 = w9[2, q]
            g10 = w9[3, q]
            g11 = w9[4, q]
            g12 = w9[5, q]
            g20 = w9[6, q]
            g21 = w9[7, q]
            g22 = w9[8, q]
            # G g: rows (g0), (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, (g2); then each row (a, b, c) times
            # G^T: (a, (a + b + c) / 2, (a - b + c) / 2, c)
            a1 = h * (g00 + g10 + g20)
            b1 = h * (g01 + g11 + g21)
            c1 = h * (g02 + g12 + g22)
            a2 = h * (g00 - g10 + g20)
            b2 = h * (g01 - g11 + g21)
            c2 = h * (g02 - g12 + g22)
            Uf[q] = g00
            Uf[ks + q] = h * (g00 + g01 + g02)
            Uf[2 * ks + q] = h * (g00 - g01 + g02)
            Uf[3 * ks + q] = g02
            Uf[4 * ks + q] = a1
            Uf[5 * ks + q] = h * (a1 + b1 + c1)
            Uf[6 * ks + q] = h * (a1 - b1 + c1)
            Uf[7 * ks + q] = c1
            Uf[8 * ks + q] = a2
            Uf[9 * ks + q] = h * (a2 + b2 + c2)
            Uf[10 * ks + q] = h * (a2 - b2 + c2)
            Uf[11 * ks + q] = c2
            Uf[12 * ks + q] = g20
            Uf[13 * ks + q] = h * (g20 + g21 + g22)
            Uf[14 * ks + q] = h * (g20 - g21 + g22)
            Uf[15 * ks + q] = g22

    @numba.njit(**serial)
    def filter_gradient(df, ks, gw9):
        # dU (16, O, C) planes ``ks`` apart -> gw9 (9, O*C) = G^T dU G
        OC = gw9.shape[1]
        h = gw9.dtype.type(0.5)
        for q in range(OC):
            # G^T over the rows: (u0, u1, u2, u3) -> (u0 + (u1 + u2) / 2, (u1 - u2) / 2, (u1 + u2) / 2 + u3)
            p00 = df[q] + h * (df[4 * ks + q] + df[8 * ks + q])
            p01 = df[ks + q] + h * (df[5 * ks + q] + df[9 * ks + q])
            p02 = df[2 * ks + q] + h * (df[6 * ks + q] + df[10 * ks + q])
            p03 = df[3 * ks + q] + h * (df[7 * ks + q] + df[11 * ks + q])
            p10 = h * (df[4 * ks + q] - df[8 * ks + q])
            p11 = h * (df[5 * ks + q] - df[9 * ks + q])
            p12 = h * (df[6 * ks + q] - df[10 * ks + q])
            p13 = h * (df[7 * ks + q] - df[11 * ks + q])
            p20 = h * (df[4 * ks + q] + df[8 * ks + q]) + df[12 * ks + q]
            p21 = h * (df[5 * ks + q] + df[9 * ks + q]) + df[13 * ks + q]
            p22 = h * (df[6 * ks + q] + df[10 * ks + q]) + df[14 * ks + q]
            p23 = h * (df[7 * ks + q] + df[11 * ks + q]) + df[15 * ks + q]
            # then G over the columns, the same map
            gw9[0, q] = p00 + h * (p01 + p02)
            gw9[1, q] = h * (p01 - p02)
            gw9[2, q] = h * (p01 + p02) + p03
            gw9[3, q] = p10 + h * (p11 + p12)
            gw9[4, q] = h * (p11 - p12)
            gw9[5, q] = h * (p11 + p12) + p13
            gw9[6, q] = p20 + h * (p21 + p22)
            gw9[7, q] = h * (p21 - p22)
            gw9[8, q] = h * (p21 + p22) + p23

    return input_tiles, output_tiles, gradient_tiles, filter_tiles, filter_gradient


def _geometry(N, C, O, OH, OW, itemsize):
    """Tiles per image side ``(th, tw)``, images per chunk, and the plane strides of a chunk's ``C`` and
    ``O`` planes."""
    th, tw = (OH + 1) // 2, (OW + 1) // 2
    per_image = th * tw
    nb = max(1, _CHUNK_BYTES // (16 * (C + O) * per_image * itemsize), -(-_MIN_CHUNK_TILES // per_image))
    nb = min(nb, N)
    return th, tw, nb, C * nb * per_image + _PLANE_SKEW, O * nb * per_image + _PLANE_SKEW


def _planes(buf, ks, rows, T):
    """The ``(16, rows, T)`` view of a chunk's transformed planes in the flat buffer ``buf``."""
    return buf.reshape(16, ks)[:, :rows * T].reshape(16, rows, T)


def _scratch(th, tw, dtype):
    """Each thread's scratch planes of the input transform: even and odd padded columns, transformed rows."""
    return np.empty((2 * th + 2, tw + 1), dtype), np.empty((2 * th + 2, tw + 1), dtype), np.empty((8, tw + 1), dtype)


def forward(x, w, padding, over_images):
    """``(N, C, H, W) * (O, C, 3, 3) -> (N, O, H + 2p - 2, W + 2p - 2)``, stride 1, padding ``(ph, pw)``.

    ``over_images(N, body, work)`` runs ``body(n0, n1)`` over the batch (``conv.py``'s threads).
    """
    N, C, H, W = x.shape
    O = w.shape[0]
    ph, pw = padding
    OH, OW = H + 2 * ph - 2, W + 2 * pw - 2
    input_tiles, output_tiles, _, filter_tiles, _ = _numba_winograd()
    ksU = O * C + _PLANE_SKEW
    U = np.empty(16 * ksU, x.dtype)
    filter_tiles(np.ascontiguousarray(w.reshape(O * C, 9).T, x.dtype), U, ksU)
    U = _planes(U, ksU, O, C)
    y = np.empty((N, O, OH, OW), x.dtype)
    th, tw, nb, ksV, ksM = _geometry(N, C, O, OH, OW, x.itemsize)

    def body(a, b):
        V = np.empty(16 * ksV, x.dtype)
        M = np.empty(16 * ksM, x.dtype)
        pe, po, rt = _scratch(th, tw, x.dtype)
        ot = np.empty(4 * tw, x.dtype)
        for n0 in range(a, b, nb):
            n1 = min(b, n0 + nb)
            T = (n1 - n0) * th * tw
            input_tiles(x, n0, n1, ph, pw, th, tw, V, ksV, pe, po, rt)
            np.matmul(U, _planes(V, ksV, C, T), out=_planes(M, ksM, O, T))
            output_tiles(M, ksM, y, n0, n1, th, tw, ot)

    over_images(N, body, N * O * C * 9 * OH * OW)
    return y


def weight_grad(g, x, padding, over_images):
    """The weight gradient ``(O, C, 3, 3)`` of :func:`forward` for output gradient ``g (N, O, OH, OW)``."""
    N, C, H, W = x.shape
    O, OH, OW = g.shape[1:]
    ph, pw = padding
    input_tiles, _, gradient_tiles, _, filter_gradient = _numba_winograd()
    th, tw, nb, ksV, ksZ = _geometry(N, C, O, OH, OW, x.itemsize)
    ksU = O * C + _PLANE_SKEW
    partials = []

    def body(a, b):
        V = np.empty(16 * ksV, x.dtype)
        Z = np.empty(16 * ksZ, x.dtype)
        pe, po, rt = _scratch(th, tw, x.dtype)
        ot = np.empty(4 * tw, x.dtype)
        part = _planes(np.empty(16 * ksU, x.dtype), ksU, O, C)
        flat = np.zeros(16 * ksU, x.dtype)  # this thread's sum of dU (16 planes ksU apart)
        total = _planes(flat, ksU, O, C)
        for n0 in range(a, b, nb):
            n1 = min(b, n0 + nb)
            T = (n1 - n0) * th * tw
            input_tiles(x, n0, n1, ph, pw, th, tw, V, ksV, pe, po, rt)
            gradient_tiles(g, n0, n1, th, tw, Z, ksZ, ot)
            total += np.matmul(_planes(Z, ksZ, O, T), _planes(V, ksV, C, T).transpose(0, 2, 1), out=part)
        partials.append(flat)

    over_images(N, body, N * O * C * 9 * OH * OW)
    dU = partials[0]
    for part in partials[1:]:
        dU += part
    gw9 = np.empty((9, O * C), x.dtype)
    filter_gradient(dU, ksU, gw9)
    return np.ascontiguousarray(gw9.T).reshape(O, C, 3, 3)
