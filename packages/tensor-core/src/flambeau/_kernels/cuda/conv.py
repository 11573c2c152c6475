"""CUDA kernels of the convolution primitives: ``convolution`` and ``convolution_backward_weight``.

Conventions: those of the CPU kernels (``flambeau/_ops/conv.py``); ``x`` ``(N, C, H, W)`` (1-D
convolutions arrive with a height of 1), ``w`` ``(O, C/groups, KH, KW)``.

* general case: a strided im2col kernel writes the columns ``(N, C*KH*KW, OH*OW)``, viewed as
  ``(N, G, K, L)`` (``K = C/G*KH*KW``); one batched GEMM (``linalg.matmul``, whose batch dims
  broadcast) with the weight viewed as ``(G, O/G, K)`` gives ``(N, G, O/G, L)``, the output
  itself. The input gradient (and the transposed convolution) is the GEMM ``W^T @ g`` into columns
  followed by a *gather* col2im (each input element sums its taps: deterministic, no atomics);
  the weight gradient is ``g @ cols^T`` per image summed over the batch by a small kernel.
* depthwise (``groups == C``, one input channel per group): direct kernels for the forward and
  the input gradient (``K`` multiply-adds per element, too few for a GEMM to pay), and a row reduction
  per weight element for the weight gradient.
* cuDNN (``_cudnn``, through cffi) takes the three float32/float64 calls on a real GPU where libcudnn loads;
  the numba kernels above serve everything else (the simulator included) and any call cuDNN declines.
* float32, float64, int32 and int64 compute in their dtype; float16 computes in float32 and 8/16-bit
  integers in int64 (as the CPU kernels: same results once stored).

The small helpers of device-array views (:func:`view`, :func:`contig`, :func:`cast`, :func:`mT`)
serve the attention and recurrent families too.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._dtype import from_numpy_dtype, np_name
from flambeau._kernels.cuda import _cudnn as cudnn
from flambeau._kernels.cuda._launch import (
    REDUCE_BLOCK,
    be,
    bind_numba_cuda,
    block_sums,
    elem_strides,
    jit,
    launch_1d,
    row_parts,
    sim,
    stream,
)
from flambeau._kernels.cuda.core import copy_into
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._kernels.cuda.linalg import matmul
from flambeau._ops._registry import kernel

__all__ = ["view", "elem_strides", "contig", "cast", "mT", "compute_dtype", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

_DTYPES = ("float32", "float64", "int32", "int64")  # what the kernels of this module compute in


# --- device-array helpers (shared with attention.py and rnn.py) ------------------------------------------
def view(a, shape, strides, offset: int = 0):
    """A view of device array ``a``'s memory: ``shape``, element ``strides``, element ``offset`` from its start."""
    backend = be()
    return backend.as_strided(backend.flat_view(a), tuple(shape), tuple(strides), offset)


def contig(a, dtype=None):
    """``a`` itself if C-contiguous of ``dtype`` (default its own), else a contiguous copy cast to it."""
    backend = be()
    if (dtype is None or a.dtype == dtype) and backend.is_c_contiguous(a):  # (worked out once per array)
        return a
    out = backend.empty(a.shape, np.dtype(a.dtype if dtype is None else dtype))
    copy_into(out, a)
    return out


def cast(a, dtype):
    """``a`` cast to ``dtype`` (a new contiguous array unless it already has that dtype)."""
    return a if a is None or a.dtype == np.dtype(dtype) else contig(a, dtype)


def mT(a):
    """``a`` with its last two dimensions swapped (a view)."""
    st = elem_strides(a)
    shape = tuple(a.shape)
    return view(a, shape[:-2] + (shape[-1], shape[-2]), st[:-2] + (st[-1], st[-2]))


def compute_dtype(d) -> np.dtype:
    """The dtype a GEMM-based kernel computes ``d`` in: float16 in float32, 8/16-bit integers in int64."""
    d = np.dtype(d)
    if d == np.float16:
        return np.dtype(np.float32)
    if d.kind in "iu" and d.itemsize < 4:
        return np.dtype(np.int64)
    return d


# --- kernels --------------------------------------------------------------------------------------------
def _unravel4(i, d1, d2, d3):
    """``i`` as ``(a0, a1, a2, a3)`` over a C-ordered shape ``(*, d1, d2, d3)``."""
    a3 = i % d3
    r = i // d3
    a2 = r % d2
    r //= d2
    return r // d1, r % d1, a2, a3


def _source(o, s, p, k, d, n):
    """The input position read by output ``o`` at tap ``k`` (stride ``s``, padding ``p``, dilation ``d``), or -1
    when it falls in the padding."""
    v = o * s - p + k * d
    return v if v >= 0 and v < n else -1


def _target(i, s, p, k, d, n):
    """The output position whose tap ``k`` reads input ``i``, or -1 if none does (the inverse of :func:`_source`)."""
    t = i + p - k * d
    if s == 1:  # the common stride: no division (a 64-bit one costs dozens of instructions per tap)
        return t if t >= 0 and t < n else -1
    return t // s if t >= 0 and t % s == 0 and t // s < n else -1


@functools.cache
def _device_fns():
    bind_numba_cuda(globals())
    return tuple(cuda.jit(device=True)(f) for f in (_unravel4, _source, _target))


def _im2col_py():
    """``cols[n, (c*KH + kh)*KW + kw, oh*OW + ow] = x[n, c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]`` (0 outside)."""
    bind_numba_cuda(globals())
    unravel4, source, _ = _device_fns()

    def im2col(cols, x, xst, geo, total):
        C, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW = geo
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            nc, kh, kw, l = unravel4(i, KH, KW, OH * OW)
            ih = source(l // OW, sh, ph, kh, dh, H)
            iw = source(l % OW, sw, pw, kw, dw, W)
            if ih >= 0 and iw >= 0:
                cols[i] = x[(nc // C) * xst[0] + (nc % C) * xst[1] + ih * xst[2] + iw * xst[3]]
            else:
                cols[i] = 0
            i += step

    return im2col


def _col2im_py(acc):
    """Gather form of col2im: ``x[n, c, ih, iw]`` sums the columns of every tap landing on it."""
    bind_numba_cuda(globals())
    unravel4, _, target = _device_fns()

    def col2im(x, cols, geo, total):
        C, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW = geo
        L = OH * OW
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            n, c, ih, iw = unravel4(i, C, H, W)
            s = acc(0)
            for kh in range(KH):
                oh = target(ih, sh, ph, kh, dh, OH)
                if oh >= 0:
                    for kw in range(KW):
                        ow = target(iw, sw, pw, kw, dw, OW)
                        if ow >= 0:
                            s += cols[((n * C + c) * KH + kh) * KW * L + kw * L + oh * OW + ow]
            x[i] = s
            i += step

    return col2im


def _batch_sum_py(acc):
    """``out[j] = sum_n a[n * M + j]`` (the weight gradient's sum over images, in a fixed order)."""
    bind_numba_cuda(globals())

    def batch_sum(out, a, N, M):
        j = cuda.grid(1)
        step = cuda.gridsize(1)
        while j < M:
            s = acc(0)
            for n in range(N):
                s += a[n * M + j]
            out[j] = s
            j += step

    return batch_sum


def _dw_forward_py(acc):
    """Depthwise forward: ``out[n, o, oh, ow] = sum_k w[o, 0, k] * x[n, o // M, window]``."""
    bind_numba_cuda(globals())
    unravel4, source, _ = _device_fns()

    def dw_forward(out, x, xst, w, wst, geo, M, total):
        C, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW = geo
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            n, o, oh, ow = unravel4(i, C * M, OH, OW)
            xb = n * xst[0] + (o // M) * xst[1]
            s = acc(0)
            for kh in range(KH):
                ih = source(oh, sh, ph, kh, dh, H)
                if ih >= 0:
                    for kw in range(KW):
                        iw = source(ow, sw, pw, kw, dw, W)
                        if iw >= 0:
                            s += acc(w[o * wst[0] + kh * wst[2] + kw * wst[3]]) * acc(x[xb + ih * xst[2] + iw * xst[3]])
            out[i] = s
            i += step

    return dw_forward


def _dw_input_py(acc):
    """Depthwise input gradient (gather): ``gx[n, c, ih, iw] = sum_m sum_k w[c*M + m, 0, k] * g[n, c*M + m, ...]``."""
    bind_numba_cuda(globals())
    unravel4, _, target = _device_fns()

    def dw_input(gx, g, gst, w, wst, geo, M, total):
        C, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW = geo
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            n, c, ih, iw = unravel4(i, C, H, W)
            s = acc(0)
            for m in range(M):
                o = c * M + m
                gb = n * gst[0] + o * gst[1]
                for kh in range(KH):
                    oh = target(ih, sh, ph, kh, dh, OH)
                    if oh >= 0:
                        for kw in range(KW):
                            ow = target(iw, sw, pw, kw, dw, OW)
                            if ow >= 0:
                                wv = w[o * wst[0] + kh * wst[2] + kw * wst[3]]
                                s += acc(wv) * acc(g[gb + oh * gst[2] + ow * gst[3]])
            gx[i] = s
            i += step

    return dw_input


def _dw_weight_py(acc, B=REDUCE_BLOCK, mode="final"):
    """Depthwise weight gradient: ``gw[o, 0, kh, kw] = sum_{n, oh, ow} g[n, o, oh, ow] * x[n, o // M, ih, iw]``.

    One row per weight element ``r = (o * KH + kh) * KW + kw`` of ``K = N * OH * OW`` terms, reduced by a
    block (threads take consecutive ``ow``: coalesced), a long row split over ``P`` blocks whose partial
    sums a second launch adds, as the normalisation kernels' rows (Note [Split rows] in
    ``normalization``); the modes are theirs, and so is the block's sum (``_launch.block_sums``).
    """
    bind_numba_cuda(globals())
    block_sum, _ = block_sums()
    partial = mode == "partial"
    parts = mode == "parts"

    def dw_weight(gw, g, gst, x, xst, geo, M, K, P, part):
        C, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW = geo
        r = cuda.blockIdx.x
        p = cuda.blockIdx.y
        t = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        o = r // (KH * KW)
        kh = (r // KW) % KH
        kw = r % KW
        gb = o * gst[1]
        xb = (o // M) * xst[1]
        L = OH * OW
        a = acc(0)
        if parts:
            k = t
            while k < P:
                a += part[r * P + k]
                k += B
        else:
            k = p * B + t
            while k < K:
                n = k // L
                oh = (k // OW) % OH
                ow = k % OW
                ih = oh * sh - ph + kh * dh
                iw = ow * sw - pw + kw * dw
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    a += acc(g[gb + n * gst[0] + oh * gst[2] + ow * gst[3]]) * acc(
                        x[xb + n * xst[0] + ih * xst[2] + iw * xst[3]])
                k += P * B
        buf[t] = a
        block_sum(buf, t, B)
        if t == 0:
            if partial:
                part[r * P + p] = buf[0]
            else:
                gw[r] = buf[0]

    return dw_weight


_TEMPLATES = {"im2col": lambda acc: _im2col_py(), "col2im": _col2im_py, "batch_sum": _batch_sum_py,
              "dw_forward": _dw_forward_py, "dw_input": _dw_input_py}
_MODES = ("final", "partial", "parts")  # of the split-row template (Note [Split rows] in ``normalization``)


@functools.cache
def _kernel(name: str, dtype: str):
    bind_numba_cuda(globals())
    return jit(_TEMPLATES[name](np.dtype(dtype).type))


def _launch(name: str, dtype, total: int, *args) -> None:
    if total:
        grid, block = launch_1d(total)
        _kernel(name, np_name(dtype))[grid, block, stream()](*args, total)


@functools.cache
def _dw_weight_kernel(dtype: str, B: int, mode: str):
    bind_numba_cuda(globals())
    return jit(_dw_weight_py(np.dtype(dtype).type, B, mode))


def _dw_weight(g, x, wshape, stride, padding, dilation):
    """The depthwise weight gradient ``(O, 1, KH, KW)`` of ``g (N, O, OH, OW)`` and ``x (N, C, H, W)``, ``O = C * M``
    (no im2col: its columns would be ``KH * KW`` times the input)."""
    backend = be()
    N, O, OH, OW = g.shape
    C, H, W = x.shape[1:]
    KH, KW = wshape[2:]
    gw = backend.empty(wshape, g.dtype)
    rows, K = O * KH * KW, N * OH * OW
    B = 2 if sim() else REDUCE_BLOCK  # (the simulator runs each GPU thread as a Python thread)
    # a row stays one block up to 32 elements a thread: there are KH * KW rows a channel to fill the GPU,
    # and a second launch costs host time (MobileNet v2 on 64x64 images: rows of 4,096 to 16,384)
    P = row_parts(K, B, 8 if sim() else 32)
    dn = np_name(g.dtype)
    args = (backend.flat_view(gw), backend.flat_view(g), elem_strides(g), backend.flat_view(x), elem_strides(x),
            _geo(C, H, W, KH, KW, stride, padding, dilation, OH, OW), O // C, K)
    s = stream()
    if P == 1:
        _dw_weight_kernel(dn, B, "final")[rows, B, s](*args, 1, args[0])
        return gw
    part = backend.empty((rows * P,), g.dtype)
    _dw_weight_kernel(dn, B, "partial")[(rows, P), B, s](*args, P, part)
    _dw_weight_kernel(dn, B, "parts")[rows, B, s](*args, P, part)
    return gw


# --- building blocks ------------------------------------------------------------------------------------
def _out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _geo(C, H, W, KH, KW, stride, padding, dilation, OH, OW) -> tuple:
    return tuple(int(v) for v in (C, H, W, KH, KW, *stride, *padding, *dilation, OH, OW))


def _is_depthwise(C, w, groups) -> bool:
    """Whether a convolution of ``C`` input channels with weight ``w`` (an array, or its shape) is depthwise."""
    return groups == C and tuple(getattr(w, "shape", w))[1] == 1 and C > 1


def _im2col(x, KH, KW, stride, padding, dilation, OH, OW):
    """Columns ``(N, C*KH*KW, OH*OW)`` (contiguous) of ``x`` ``(N, C, H, W)`` (any strides)."""
    N, C, H, W = x.shape
    backend = be()
    cols = backend.empty((N, C * KH * KW, OH * OW), x.dtype)
    _launch("im2col", x.dtype, cols.size, backend.flat_view(cols), backend.flat_view(x), elem_strides(x),
            _geo(C, H, W, KH, KW, stride, padding, dilation, OH, OW))
    return cols


# Depthwise convolutions go to cuDNN's grouped kernels where cuDNN loads; the direct kernels below run
# elsewhere (the simulator, no libcudnn, other dtypes). torch runs its own kernels (ConvBackend::CudaDepthwise2d)
# for float32 and float64 in NCHW, so ours were tried first, but on an H100 (benchmarks/gpu_ops.py and
# tools/gpu_kernel_times.py, 2026-11-27) a 3x3 depthwise forward and backward took 5.7 ms of device time with
# them against 1.5 ms for torch's and 1.6 ms through cuDNN (64x144x56x56; stride 2 at 64x96x112x112: 8.9 ms, torch
# 2.2, cuDNN 2.2). The switch stays so that benchmarks/gpu_ops.py can time both paths on another card.
DEPTHWISE_BY_CUDNN = True
_CUDNN_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _cudnn(kind, a, b, shape, stride, padding, dilation, groups, depthwise: bool = False):
    """The result of cuDNN's ``kind`` call (``_cudnn.forward``, ``backward_data`` or ``backward_filter``), or None
    where cuDNN is not used (the simulator, other dtypes, ``depthwise`` unless DEPTHWISE_BY_CUDNN, no libcudnn, a
    failure): the numba path runs then."""
    if a.dtype not in _CUDNN_DTYPES or depthwise and not DEPTHWISE_BY_CUDNN or not cudnn.available():
        return None  # (available() is False under the simulator)
    fn = cudnn.forward if kind == "forward" else cudnn.backward_data if kind == "data" else cudnn.backward_filter
    try:
        return fn(contig(a), contig(b), tuple(shape), tuple(stride), tuple(padding), tuple(dilation), int(groups))
    except cudnn.CudnnUnavailable:
        return None


def _forward(x, w, stride, padding, dilation, groups):
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    OH = _out_size(H, KH, stride[0], padding[0], dilation[0])
    OW = _out_size(W, KW, stride[1], padding[1], dilation[1])
    depthwise = _is_depthwise(C, w, groups)
    y = _cudnn("forward", x, w, (N, O, OH, OW), stride, padding, dilation, groups, depthwise)
    if y is not None:
        return y
    backend = be()
    if depthwise:
        out = backend.empty((N, O, OH, OW), x.dtype)
        _launch("dw_forward", x.dtype, out.size, backend.flat_view(out), backend.flat_view(x), elem_strides(x),
                backend.flat_view(w), elem_strides(w), _geo(C, H, W, KH, KW, stride, padding, dilation, OH, OW),
                O // C)
        return out
    G, Og, K, L = groups, O // groups, Cg * KH * KW, OH * OW
    cols = _im2col(x, KH, KW, stride, padding, dilation, OH, OW)
    w = contig(w)
    y = matmul(view(w, (G, Og, K), (Og * K, K, 1)), view(cols, (N, G, K, L), (G * K * L, K * L, L, 1)))
    return view(y, (N, O, OH, OW), (O * L, L, OW, 1))


def _input_grad(g, w, shape, stride, padding, dilation, groups):
    """Adjoint of :func:`_forward` in ``x``: ``g (N, O, OH, OW) -> (N, C, H, W)`` (= transposed convolution)."""
    N, O, OH, OW = g.shape
    _, Cg, KH, KW = w.shape
    C, H, W = shape[1:]
    depthwise = _is_depthwise(C, w, groups)
    gx = _cudnn("data", g, w, shape, stride, padding, dilation, groups, depthwise)
    if gx is not None:
        return gx
    backend = be()
    geo = _geo(C, H, W, KH, KW, stride, padding, dilation, OH, OW)
    gx = backend.empty(shape, g.dtype)
    if depthwise:
        _launch("dw_input", g.dtype, gx.size, backend.flat_view(gx), backend.flat_view(g), elem_strides(g),
                backend.flat_view(w), elem_strides(w), geo, O // C)
        return gx
    G, Og, K, L = groups, O // groups, Cg * KH * KW, OH * OW
    g = contig(g)
    w = contig(w)
    cols = matmul(view(w, (G, K, Og), (Og * K, 1, K)), view(g, (N, G, Og, L), (O * L, Og * L, L, 1)))
    _launch("col2im", g.dtype, gx.size, backend.flat_view(gx), backend.flat_view(cols), geo)
    return gx


def _weight_grad(g, x, wshape, stride, padding, dilation, groups):
    """Adjoint of :func:`_forward` in ``w``: ``g (N, O, OH, OW), x (N, C, H, W) -> (O, C/groups, KH, KW)``."""
    N, O, OH, OW = g.shape
    _, Cg, KH, KW = wshape
    G, Og, K, L = groups, O // groups, Cg * KH * KW, OH * OW
    depthwise = _is_depthwise(x.shape[1], wshape, groups)
    gw = _cudnn("filter", g, x, wshape, stride, padding, dilation, groups, depthwise)
    if gw is not None:
        return gw
    backend = be()
    if N == 0 or L == 0:
        gw = backend.empty(wshape, g.dtype)
        copy_into(gw, 0)
        return gw
    if depthwise:
        return _dw_weight(g, x, wshape, stride, padding, dilation)
    gw = backend.empty(wshape, g.dtype)
    cols = _im2col(x, KH, KW, stride, padding, dilation, OH, OW)
    g = contig(g)
    per = matmul(view(g, (N, G, Og, L), (O * L, Og * L, L, 1)), view(cols, (N, G, L, K), (G * K * L, K * L, 1, L)))
    _launch("batch_sum", g.dtype, gw.size, backend.flat_view(gw), backend.flat_view(per), N)
    return gw


# --- kernels of the table -------------------------------------------------------------------------------
_add = binary_launcher("add")


@kernel("convolution", "cuda")
def convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """CUDA ``convolution`` (plain or transposed; im2col + batched GEMM, direct depthwise kernels)."""
    dtype = np.dtype(x.dtype)
    cdt = compute_dtype(dtype)
    x, w, b = cast(x, cdt), cast(w, cdt), cast(b, cdt)
    if transposed:
        N, C, H, W = x.shape
        _, Og, KH, KW = w.shape
        OH = (H - 1) * stride[0] - 2 * padding[0] + dilation[0] * (KH - 1) + output_padding[0] + 1
        OW = (W - 1) * stride[1] - 2 * padding[1] + dilation[1] * (KW - 1) + output_padding[1] + 1
        out = _input_grad(x, w, (N, Og * groups, OH, OW), stride, padding, dilation, groups)
    else:
        out = _forward(x, w, stride, padding, dilation, groups)
    if b is not None and out.size:
        O = out.shape[1]
        bv = view(b, (O, 1, 1), (elem_strides(b)[0], 0, 0))
        _add(out, bv, from_numpy_dtype(cdt), out=out)
    return cast(out, dtype)


@kernel("convolution_backward_weight", "cuda")
def convolution_backward_weight(g, x, weight_size, stride, padding, dilation, transposed, output_padding, groups):
    """CUDA ``convolution_backward_weight``: per-image GEMMs ``g @ cols^T`` summed over the batch."""
    dtype = np.dtype(g.dtype)
    cdt = compute_dtype(dtype)
    g, x = cast(g, cdt), cast(x, cdt)
    wshape = tuple(weight_size)
    if transposed:  # y = convT(x, w) is the input gradient of a plain convolution of y with w: swap roles
        gw = _weight_grad(x, g, wshape, stride, padding, dilation, groups)
    else:
        gw = _weight_grad(g, x, wshape, stride, padding, dilation, groups)
    return cast(gw, dtype)


@kernel("convolution_backward", "cuda")
def convolution_backward(g, x, w, stride, padding, dilation, transposed, output_padding, groups, mask):
    """CUDA ``convolution_backward``: ``(grad_input, grad_weight)``, None where ``mask`` says so; through cuDNN
    two library calls back to back (Note [Convolution backward as one operator] in ``flambeau._ops.conv``)."""
    dtype = np.dtype(g.dtype)
    cdt = compute_dtype(dtype)
    g = cast(g, cdt)
    gx = gw = None
    if mask[0]:
        wc = cast(w, cdt)
        if transposed:
            gx = _forward(g, wc, stride, padding, dilation, groups)
            if tuple(gx.shape) != tuple(x.shape):  # (see the CPU kernel: cut to the input's size)
                gx = contig(view(gx, tuple(x.shape), elem_strides(gx)))
        else:
            gx = _input_grad(g, wc, tuple(x.shape), stride, padding, dilation, groups)
        gx = cast(gx, dtype)
    if mask[1]:
        xc, wshape = cast(x, cdt), tuple(w.shape)
        gw = cast(_weight_grad(xc, g, wshape, stride, padding, dilation, groups) if transposed
                  else _weight_grad(g, xc, wshape, stride, padding, dilation, groups), dtype)
    return gx, gw


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of every kernel of this module for every dtype it computes in."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64 = types.int64
    s4 = types.UniTuple(i64, 4)
    geo = types.UniTuple(i64, 13)
    cases = []
    for dn in _DTYPES:
        arr = types.Array(from_dtype(np.dtype(dn)), 1, "C")
        sigs = {"im2col": (arr, arr, s4, geo, i64), "col2im": (arr, arr, geo, i64),
                "batch_sum": (arr, arr, i64, i64), "dw_forward": (arr, arr, s4, arr, s4, geo, i64, i64),
                "dw_input": (arr, arr, s4, arr, s4, geo, i64, i64)}
        for name, sig in sigs.items():
            cases.append((f"conv:{name}:{dn}", _TEMPLATES[name](np.dtype(dn).type), sig))
        for mode in _MODES:
            cases.append((f"conv:dw_weight_{mode}:{dn}", _dw_weight_py(np.dtype(dn).type, REDUCE_BLOCK, mode),
                          (arr, arr, s4, arr, s4, geo, i64, i64, i64, arr)))
    return cases

