"""CPU kernels of the convolution primitives: ``convolution`` and ``convolution_backward_weight``.

The operators, their calling convention and their checks are in ``flambeau/_ops/conv.py``. 1-D
convolutions arrive as 2-D ones with a height of 1.

* general case: ``im2col`` (numba) into columns ``(C*KH*KW, n*OH*OW)`` for one image, or a chunk
  of small images, then one BLAS GEMM per group (``np.matmul``); the input gradient (and the
  transposed convolution) is the GEMM ``W^T @ g`` followed by ``col2im``; the weight gradient is
  ``g @ cols^T`` summed over the batch. The batch is split between threads, each running BLAS on
  one thread (Note [Threads over work items, not inside BLAS] in ``flambeau/_blas.py``).
* 1x1 kernels without padding and stride 1: an image is its own column matrix.
* 3x3 stride-1 layers of 16 channels or more on planes of 7x7 or more: Winograd's F(2x2, 3x3)
  (``conv_winograd.py``, Note [When Winograd pays]), forward, input gradient and weight gradient.
* depthwise (``groups == in_channels``, one input channel per group): direct numba kernels for the
  forward, input and weight gradients, parallel over planes (``conv_depthwise.py``, Note [Depthwise
  convolution by phase planes]).
* float32 and float64 are jitted; float16 and bfloat16 compute in float32; integer tensors take a numpy path.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau import _dtype as dt
from flambeau._blas import blas_is_controllable, single_threaded_blas
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._kernels.cpu import conv_winograd as winograd
from flambeau._kernels.cpu.conv_depthwise import _is_depthwise, _numba_depthwise, _plane_chunks
from flambeau._ops._registry import kernel
from flambeau._parallel import get_num_threads, run_chunks


# --- numba kernels -----------------------------------------------------------------------------------
@functools.cache
def _numba_conv():
    """im2col and col2im, plain and over the padded width, compiled on first use (float32 and float64).

    None of them calls another jitted function (numba's disk cache misses for those). Inner loops run
    over views with one index (``dst[j] = src[j]``) or flat arrays with unsigned indices: LLVM
    vectorises those, not ``a[i + d]`` with a signed index (Note [Flat unsigned indices in the
    depthwise kernels]).
    """
    import numba

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


    return im2col, col2im, im2col_wide, col2im_wide


@functools.cache
def _numba_rows():
    """im2row and row2im (Note [Columns as rows of channel vectors]), compiled on first use."""
    import numba

    serial = {"parallel": False, "cache": True, "nogil": True, "fastmath": {"contract", "reassoc", "nsz", "arcp"}}

    # Note [Columns as rows of channel vectors]: on small planes (AlexNet's 3x3 and 7x7, ResNet's 8x8
    # and 4x4) the column matrix of im2col is written in runs of OW <= 8 elements, and the loops' own
    # overhead was 20-30% of a convolution (the GEMM the rest). Transposed, with its K axis ordered
    # (kh, kw, c), every run is one channel vector: the images are first copied channels-last into a
    # zero-bordered scratch plane (Hp, Wp, C), and then row (n, oh, ow) of the matrix is KH*KW copies of C
    # contiguous elements. For C >= 16 that wrote a 128-channel 3x3 layer's rows 8x faster (10 against 85
    # µs for 8 images) and an 8x8 one's 2x. The copy into the scratch plane reads each row of an input
    # plane contiguously (reading a pixel's channels, H*W apart, thrashed the L1 cache: 4 KiB strides).
    # The gradients' GEMMs take the matrix as it is ((n*L, O) @ (O, K) into it, (O, n*L) @ (n*L, K) from
    # it), with the weights reordered to (kh, kw, c) once per call: on a 128-channel 3x3 layer of batch 32
    # with two threads the input gradient took 15% less time and the weight gradient 15-23% (AlexNet's
    # 5x5 layer 15% and 21%, an 8x8 one 4% and 14%). The forward keeps im2col: its GEMM with the rows,
    # (n*L, K) @ (K, O), ran no faster with two threads (4x4 planes 10% slower), whatever it saved on
    # the copy. Planes over 8x8 keep im2col too: there its runs are long enough, and the channels-last
    # copy (scattered writes) was slower with two threads.
    @numba.njit(**serial)
    def im2row(x, n0, n1, rows, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW, xp, Wp):
        # rows (n*OH*OW, KH*KW*C): row (n, oh, ow), column (kh, kw, c); xp: the (Hp, Wp, C) scratch plane,
        # its border zero (never written here)
        N, C, H, W = x.shape
        K = KH * KW * C
        xf = x.reshape(-1)
        rf = rows.reshape(-1)
        u = np.uintp
        for n in range(n0, n1):
            for ih in range(H):
                for c in range(C):
                    d = ((ih + ph) * Wp + pw) * C + c
                    s = ((n * C + c) * H + ih) * W
                    for iw in range(W):
                        xp[u(d + iw * C)] = xf[u(s + iw)]
            for oh in range(OH):
                for ow in range(OW):
                    r = (((n - n0) * OH + oh) * OW + ow) * K
                    for kh in range(KH):
                        for kw in range(KW):
                            s = ((oh * sh + kh * dh) * Wp + ow * sw + kw * dw) * C
                            d = r + (kh * KW + kw) * C
                            for c in range(C):
                                rf[u(d + c)] = xp[u(s + c)]

    @numba.njit(**serial)
    def row2im(rows, gx, n0, n1, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW, gp, Wp):
        # the adjoint of im2row: rows summed into gx[n0:n1] (overwritten) through the scratch plane gp
        N, C, H, W = gx.shape
        K = KH * KW * C
        gf = gx.reshape(-1)
        rf = rows.reshape(-1)
        u = np.uintp
        for n in range(n0, n1):
            for q in range(gp.size):
                gp[q] = 0
            for oh in range(OH):
                for ow in range(OW):
                    r = (((n - n0) * OH + oh) * OW + ow) * K
                    for kh in range(KH):
                        for kw in range(KW):
                            d = ((oh * sh + kh * dh) * Wp + ow * sw + kw * dw) * C
                            s = r + (kh * KW + kw) * C
                            for c in range(C):
                                gp[u(d + c)] += rf[u(s + c)]
            for ih in range(H):
                for c in range(C):
                    s = ((ih + ph) * Wp + pw) * C + c
                    d = ((n * C + c) * H + ih) * W
                    for iw in range(W):
                        gf[u(d + iw)] = gp[u(s + iw * C)]

    return im2row, row2im


# --- numpy fallbacks (integer dtypes) ----------------------------------------------------------------
def _padded_size(H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW):
    """Height and width of the zero-padded plane every tap of every output position reads inside."""
    return max(H + 2 * ph, (OH - 1) * sh + (KH - 1) * dh + 1), max(W + 2 * pw, (OW - 1) * sw + (KW - 1) * dw + 1)


def _padded(shape, dtype, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW):
    N, C, H, W = shape
    return np.zeros((N, C, *_padded_size(H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW)), dtype)


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
# ... unless one image's GEMM does this many multiply-adds (forward only): a 3-channel stem or a 1x1
# convolution has few column bytes but a GEMM big enough for its call, and per image its output needs
# no transposition (ResNet's 3->32 stem on 32x32, batch 32: 0.80-0.87 -> 0.61-0.63 ms; a 1x1 8->48 on
# 32x32: 0.44-0.69 -> 0.23 ms; LeNet's 1->32 stem, 195K multiply-adds per image, stays chunked).
_PER_IMAGE_WORK = 1 << 18


def _jitted(a) -> bool:
    return a.dtype in dt.FLOAT_NP


def _out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _chunks(a, b, per_image_bytes, L, per_image_work=0):
    """Image ranges covering ``[a, b)``.

    Images with many output positions go one at a time: their GEMM is wide enough, the columns
    stay in cache and the output needs no transposition (BLAS also runs a 64x288x576 product
    faster than one 64x288x36864 product). ``per_image_work``: multiply-adds of one image's GEMM
    (the forward passes it: ``_PER_IMAGE_WORK``).
    """
    if L >= _WIDE_BELOW and (per_image_bytes >= _PER_IMAGE_BYTES or per_image_work >= _PER_IMAGE_WORK):
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


_ROWS_MIN_CHANNELS = 16  # shorter channel vectors copy no faster than im2col's runs
_ROWS_MAX_PIXELS = 64  # input planes of at most 8x8 pixels (on larger ones im2col's runs are long enough)


def _rows_ok(shape, KH, KW, stride, padding, OH, OW, groups, dtype):
    """Whether the columns are built as rows of channel vectors (Note [Columns as rows of channel vectors]):
    ``shape`` is the input's. The rows must outnumber the input pixels: a strided 1x1 convolution reads a
    quarter of its input, and copying all of it channels-last first cost more than im2col."""
    N, C, H, W = shape
    return (groups == 1 and C >= _ROWS_MIN_CHANNELS and dtype in dt.FLOAT_NP
            and H * W <= _ROWS_MAX_PIXELS and not _is_pointwise(KH, KW, stride, padding)
            and KH * KW * OH * OW >= H * W)


def _row_plane(shape, KH, KW, stride, padding, dilation, OH, OW, dtype):
    """The zero-bordered channels-last scratch plane of im2row and row2im, and its width."""
    C, H, W = shape[1:]
    Hp, Wp = _padded_size(H, W, KH, KW, *stride, *padding, *dilation, OH, OW)
    return np.zeros(Hp * Wp * C, dtype), Wp


def _im2row(x, n0, n1, KH, KW, stride, padding, dilation, OH, OW, buf, plane):
    """Rows ``((n1-n0)*OH*OW, KH*KW*C)`` of images ``x[n0:n1]`` in ``buf`` (Note [Columns as rows of channel
    vectors]); ``plane``: :func:`_row_plane`'s."""
    K = x.shape[1] * KH * KW
    rows = buf[:(n1 - n0) * OH * OW * K].reshape(-1, K)
    _numba_rows()[0](x, n0, n1, rows, KH, KW, *stride, *padding, *dilation, OH, OW, *plane)
    return rows


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
        _numba_depthwise()[0](x, w, out.reshape(N, O, OH, OW), *stride, *padding, *dilation, _plane_chunks(N * O))
        return out.reshape(N, O, OH, OW)
    if winograd.usable(C, O, OH, OW, (KH, KW), stride, dilation, groups, x.dtype):
        return winograd.forward(x, w, padding, _over_images)
    K = Cg * KH * KW
    w2 = w.reshape(O, K) if groups == 1 else w.reshape(groups, O // groups, K)
    wide = _wide_ok(x, KH, KW, stride, padding)
    Hp, Wp = H + 2 * padding[0], W + 2 * padding[1]
    CK = C * KH * KW

    def body(a, b):
        buf = ybuf = wbuf = wybuf = None  # Note [Scratch buffers per thread, not per image]
        for n0, n1 in _chunks(a, b, CK * L * x.itemsize, L, O * K * L):
            nb = n1 - n0
            if nb == 1 and wide:
                if wbuf is None:
                    wbuf = np.empty((CK, OH * Wp), x.dtype)
                    wybuf = np.empty(O * OH * Wp, x.dtype)
                cols = wbuf
                _numba_conv()[2](x[n0], cols, KH, KW, *padding, *dilation, Hp, Wp)
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
        _numba_depthwise()[1](g, w, gx, *stride, *padding, *dilation, _plane_chunks(N * C))
        return gx
    if (winograd.usable(O, C, shape[2], shape[3], (KH, KW), stride, dilation, groups, g.dtype)
            and max(padding) <= 2):
        # the adjoint of a 3x3 stride-1 convolution: the filter flipped and transposed, padding 2 - p
        return winograd.forward(g, w, (2 - padding[0], 2 - padding[1]), _over_images, adjoint=True)
    L = OH * OW
    K = Cg * KH * KW
    CK = C * KH * KW
    g3 = g.reshape(N, O, L)
    wt = w.reshape(O, K).T if groups == 1 else w.reshape(groups, O // groups, K).transpose(0, 2, 1)
    wide = _wide_ok(g, KH, KW, stride, padding)
    Hp, Wp = shape[2] + 2 * padding[0], shape[3] + 2 * padding[1]
    wide = wide and Hp == OH + (KH - 1) * dilation[0] and Wp == OW + (KW - 1) * dilation[1]
    rows = _rows_ok(shape, KH, KW, stride, padding, OH, OW, groups, g.dtype)
    if rows:
        wr = np.ascontiguousarray(w.transpose(0, 2, 3, 1).reshape(O, CK))  # O x (kh, kw, c)

    def body(a, b):
        gbuf = cbuf = wgbuf = wcbuf = plane = None  # Note [Scratch buffers per thread, not per image]
        for n0, n1 in _chunks(a, b, CK * L * g.itemsize, L):
            nb = n1 - n0
            if rows:
                if gbuf is None:
                    gbuf = np.empty(O * nb * L, g.dtype)
                    cbuf = np.empty(CK * nb * L, g.dtype)
                    plane = _row_plane(shape, KH, KW, stride, padding, dilation, OH, OW, g.dtype)
                gt = gbuf[:nb * L * O].reshape(nb, L, O)
                gt[...] = g3[n0:n1].transpose(0, 2, 1)
                r = np.matmul(gt.reshape(nb * L, O), wr, out=cbuf[:nb * L * CK].reshape(nb * L, CK))
                _numba_rows()[1](r, gx, n0, n1, KH, KW, *stride, *padding, *dilation, OH, OW, *plane)
                continue
            if nb == 1 and wide:
                if wgbuf is None:
                    wgbuf = np.zeros((O, OH, Wp), g.dtype)  # the scratch columns ow >= OW stay zero
                    wcbuf = np.empty(CK * OH * Wp, g.dtype)
                wgbuf[:, :, :OW] = g[n0]
                cols = _gemm(wt, wgbuf.reshape(O, OH * Wp), wcbuf, groups)
                _numba_conv()[3](cols, gx[n0], KH, KW, *padding, *dilation, Hp, Wp)
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
        _numba_depthwise()[2](g, x, gw, *stride, *padding, *dilation)
        return gw
    if winograd.usable(C, O, OH, OW, (KH, KW), stride, dilation, groups, g.dtype):
        return winograd.weight_grad(g, x, padding, _over_images)
    L = OH * OW
    K = Cg * KH * KW
    CK = C * KH * KW
    g3 = g.reshape(N, O, L)
    partials = []
    wide = _wide_ok(x, KH, KW, stride, padding)
    Hp, Wp = x.shape[2] + 2 * padding[0], x.shape[3] + 2 * padding[1]
    wide = wide and Hp == OH + (KH - 1) * dilation[0] and Wp == OW + (KW - 1) * dilation[1]
    rows = _rows_ok(x.shape, KH, KW, stride, padding, OH, OW, groups, x.dtype)

    def product(gg, cols, pbuf):
        """``gg (O, n) @ cols (C*KH*KW, n)^T`` per group, into ``pbuf``: ``(O, K)`` or ``(groups, O/groups, K)``."""
        if groups == 1:
            return np.matmul(gg, cols.T, out=pbuf)
        return np.matmul(gg.reshape(groups, O // groups, -1), cols.reshape(groups, K, -1).transpose(0, 2, 1),
                         out=pbuf)

    def body(a, b):
        total = None
        buf = gbuf = wbuf = wgbuf = plane = None  # Note [Scratch buffers per thread, not per image]
        pbuf = np.empty((O, K) if groups == 1 else (groups, O // groups, K), x.dtype)
        for n0, n1 in _chunks(a, b, CK * L * x.itemsize, L):
            nb = n1 - n0
            if rows:  # the product's columns come out ordered (kh, kw, c)
                if buf is None:
                    buf = np.empty(CK * nb * L, x.dtype)
                    gbuf = np.empty(O * nb * L, g.dtype)
                    plane = _row_plane(x.shape, KH, KW, stride, padding, dilation, OH, OW, x.dtype)
                r = _im2row(x, n0, n1, KH, KW, stride, padding, dilation, OH, OW, buf, plane)
                part = np.matmul(_from_images(g3[n0:n1], gbuf), r, out=pbuf)
                if total is None:
                    total = part.copy()
                else:
                    total += part
                continue
            if nb == 1 and wide:
                if wbuf is None:
                    wbuf = np.empty((CK, OH * Wp), x.dtype)
                    wgbuf = np.zeros((O, OH, Wp), g.dtype)  # the scratch columns ow >= OW stay zero
                cols = wbuf
                _numba_conv()[2](x[n0], cols, KH, KW, *padding, *dilation, Hp, Wp)
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
    if rows:
        return np.ascontiguousarray(total.reshape(O, KH, KW, Cg).transpose(0, 3, 1, 2))
    return total.reshape(wshape)


# --- kernels of the table -----------------------------------------------------------------------------
def _compute_dtype(a):
    """float32 for float16 and bfloat16 (computed in float32 and rounded once, Note [Compute dtype] in
    ``flambeau._dtype``), else None: the dtype's own kernels."""
    return np.float32 if a.dtype in dt.LOW_PRECISION_NP else None


@kernel("convolution", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    low, half = x.dtype, _compute_dtype(x)
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
    return out.astype(low) if half is not None else out


@kernel("convolution_backward_weight", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_convolution_backward_weight(g, x, weight_size, stride, padding, dilation, transposed, output_padding, groups):
    low, half = g.dtype, _compute_dtype(g)
    if half is not None:
        g, x = g.astype(half), x.astype(half)
    g = np.ascontiguousarray(g)
    x = np.ascontiguousarray(x)
    wshape = tuple(weight_size)
    if transposed:  # y = convT(x, w) is the input gradient of a plain convolution of y with w: swap roles
        gw = _weight_grad(x, g, wshape, stride, padding, dilation, groups)
    else:
        gw = _weight_grad(g, x, wshape, stride, padding, dilation, groups)
    return gw.astype(low) if half is not None else gw


@kernel("convolution_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_convolution_backward(g, x, w, stride, padding, dilation, transposed, output_padding, groups, mask):
    """``(grad_input, grad_weight)`` of ``convolution(x, w, ...)`` for ``g``, None where ``mask`` says so: the
    input's is the adjoint (a plain convolution's transposed one; a transposed convolution's plain one, cut to the
    input's size, which it exceeds where ``output_padding`` is at least the stride), the weight's as
    :func:`_k_convolution_backward_weight` makes it."""
    low, half = g.dtype, _compute_dtype(g)
    g = np.ascontiguousarray(g if half is None else g.astype(half))
    gx = gw = None
    if mask[0]:
        wc = np.ascontiguousarray(w if half is None else w.astype(half))
        if transposed:  # (an output_padding of at least the stride gave the input rows the convolution never read)
            gx = _forward(g, wc, stride, padding, dilation, groups)
            gx = np.ascontiguousarray(gx[:, :, :x.shape[2], :x.shape[3]])
        else:
            gx = _input_grad(g, wc, x.shape, stride, padding, dilation, groups)
    if mask[1]:
        xc = np.ascontiguousarray(x if half is None else x.astype(half))
        gw = (_weight_grad(xc, g, w.shape, stride, padding, dilation, groups) if transposed
              else _weight_grad(g, xc, w.shape, stride, padding, dilation, groups))
    if half is not None:
        gx, gw = (None if a is None else a.astype(low) for a in (gx, gw))
    return gx, gw
