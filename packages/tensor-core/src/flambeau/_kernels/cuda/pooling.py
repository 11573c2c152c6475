"""CUDA kernels of the pooling operators (the CPU kernels: ``flambeau._kernels.cpu.pooling``).

Conventions: those of ``flambeau._ops.pooling`` (the CPU kernels'). Every kernel sees its input as
C-contiguous ``(P, H, W)`` planes; one thread computes one output (forward) or one input element
(average backward), in a grid-stride loop. A window along one dimension is computed on the device
from the pooling parameters, regular (kernel, stride, padding, dilation, ceil_mode) or adaptive
(torch's ``floor(o * n / out)`` to ``ceil((o + 1) * n / out)``), by one device function each for
max and average pooling, so regular and adaptive pooling share their kernels as on the CPU.

- max pooling keeps the first valid tap as the index of an all ``-inf`` window and lets a NaN win
  (torch's rule); indices are int64 flat positions ``ih * W + iw`` in the plane.
- the max pooling backward only has the indices, so it scatters with ``cuda.atomic.add`` (the sum
  at an input element that is the maximum of several overlapping windows is in arbitrary order);
  an index outside the plane is skipped and reported through the device error flag (Note
  [Device-side errors] in ``flambeau.cuda._sync``).
- the average pooling backward gathers: each input element sums the gradients of the windows that
  cover it (deterministic, no atomics).

float32 and float64 compute natively; float16 computes in float32 and integers in float64 (average
pooling truncates back, as the CPU kernel and torch do).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import np_name
from flambeau._kernels.cpu.pooling import _out_len
from flambeau._kernels.cuda._launch import ERR_INDEX, be, bind_numba_cuda, error_flag, jit, launch_1d, stream
from flambeau._kernels.cuda.core import copy_into, fill
from flambeau._ops._registry import kernel

__all__ = ["compute_input", "cast_back", "plane_index_fn", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_FLOAT_COMPUTE = {_F32: _F32, _F64: _F64, _F16: _F32}  # a float dtype -> the one it computes in


# --- dtypes and layout (shared by the normalization and resample kernels) ------------------------------
def compute_input(x, int_dtype=_F64):
    """``x`` as a C-contiguous device array of its compute dtype (float16 -> float32, integers and
    bool -> ``int_dtype``), and the dtype to cast results back to (None: the same)."""
    d = x.dtype
    ct = _FLOAT_COMPUTE.get(d)  # (a lookup: the float dtypes are nearly every call)
    if ct is None:
        d = np.dtype(d)
        ct = np.dtype(int_dtype)
    backend = be()
    if ct == d and backend.is_c_contiguous(x):
        return x, None
    out = backend.empty(x.shape, ct)
    copy_into(out, x)
    return out, (None if ct == d else d)


def cast_back(a, back):
    """``a`` cast to dtype ``back`` (a float to an integer truncates), or ``a`` if ``back`` is None."""
    if back is None:
        return a
    out = be().empty(a.shape, back)
    copy_into(out, a)
    return out


# --- device functions: one window along one dimension --------------------------------------------------
@functools.cache
def plane_index_fn():
    """``(plane, row, column)`` of flat index ``i`` of C-contiguous ``(P, H, W)`` planes (also the
    resample kernels')."""
    bind_numba_cuda(globals())

    def plane_index(i, H, W):
        return i // (H * W), (i // W) % H, i % W

    return cuda.jit(device=True)(plane_index)


@functools.cache
def _max_taps_fn():
    """``(start, count, step)`` of output ``o``'s taps along a dimension of ``n`` (taps may be invalid)."""
    bind_numba_cuda(globals())

    def max_taps(o, n, out, k, s, p, d, adaptive):
        if adaptive:
            lo = (o * n) // out
            hi = ((o + 1) * n + out - 1) // out
            return lo, hi - lo, 1
        return o * s - p, k, d

    return cuda.jit(device=True)(max_taps)


@functools.cache
def _avg_window_fn():
    """``(lo, hi, divisor)`` of output ``o``'s average window along a dimension of ``n`` (the CPU's
    ``_avg_windows`` / ``_adaptive_windows``)."""
    bind_numba_cuda(globals())

    def avg_window(o, n, out, k, s, p, include_pad, adaptive):
        if adaptive:
            lo = (o * n) // out
            hi = ((o + 1) * n + out - 1) // out
            return lo, hi, hi - lo
        start = o * s - p
        end = min(start + k, n + p)
        lo = max(start, 0)
        hi = max(min(end, n), lo)
        if include_pad:
            return lo, hi, end - start
        return lo, hi, max(hi - lo, 1)

    return cuda.jit(device=True)(avg_window)


# --- kernel templates ------------------------------------------------------------------------------------
def _max_pool_py():
    bind_numba_cuda(globals())
    taps = _max_taps_fn()
    pos = plane_index_fn()

    def max_pool(out, idx, x, P, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, adaptive):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        n = P * OH * OW
        while i < n:
            p, oh, ow = pos(i, OH, OW)
            base = p * H * W
            h0, hc, hs = taps(oh, H, OH, kh, sh, ph, dh, adaptive)
            w0, wc, ws = taps(ow, W, OW, kw, sw, pw, dw, adaptive)
            best = -math.inf
            bi = -1
            for a in range(hc):
                ih = h0 + a * hs
                if ih < 0 or ih >= H:
                    continue
                for b in range(wc):
                    iw = w0 + b * ws
                    if iw < 0 or iw >= W:
                        continue
                    k = ih * W + iw
                    v = x[base + k]
                    if bi < 0:
                        bi = k
                    if v > best or v != v:
                        best = v
                        bi = k
            out[i] = best
            idx[i] = bi
            i += step

    return max_pool


def _max_backward_py():
    bind_numba_cuda(globals())

    def max_backward(gx, g, idx, L, HW, n, err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            k = idx[i]
            if k < 0 or k >= HW:
                err[0] = ERR_INDEX
                err[1] = k
                err[2] = HW
            else:
                cuda.atomic.add(gx, (i // L) * HW + k, g[i])
            i += step

    return max_backward


def _avg_pool_py(ct):
    bind_numba_cuda(globals())
    window = _avg_window_fn()
    pos = plane_index_fn()

    def avg_pool(out, x, P, H, W, OH, OW, kh, kw, sh, sw, ph, pw, include_pad, divisor, adaptive):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        n = P * OH * OW
        while i < n:
            p, oh, ow = pos(i, OH, OW)
            base = p * H * W
            h0, h1, dvh = window(oh, H, OH, kh, sh, ph, include_pad, adaptive)
            w0, w1, dvw = window(ow, W, OW, kw, sw, pw, include_pad, adaptive)
            s = ct(0)
            for ih in range(h0, h1):
                for iw in range(w0, w1):
                    s += ct(x[base + ih * W + iw])
            out[i] = s / ct(divisor if divisor > 0 else dvh * dvw)
            i += step

    return avg_pool


def _avg_backward_py(ct):
    bind_numba_cuda(globals())
    window = _avg_window_fn()
    pos = plane_index_fn()

    def avg_backward(gx, g, P, H, W, OH, OW, kh, kw, sh, sw, ph, pw, include_pad, divisor, adaptive):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        n = P * H * W
        while i < n:
            p, ih, iw = pos(i, H, W)
            base = p * OH * OW
            # candidate outputs (a superset), each checked against its window
            if adaptive:
                oh0, oh1 = (ih * OH) // H - 1, ((ih + 1) * OH + H - 1) // H + 1
                ow0, ow1 = (iw * OW) // W - 1, ((iw + 1) * OW + W - 1) // W + 1
            else:
                oh0, oh1 = (ih + ph - kh) // sh, (ih + ph) // sh + 1
                ow0, ow1 = (iw + pw - kw) // sw, (iw + pw) // sw + 1
            s = ct(0)
            for oh in range(max(oh0, 0), min(oh1, OH)):
                h0, h1, dvh = window(oh, H, OH, kh, sh, ph, include_pad, adaptive)
                if ih < h0 or ih >= h1:
                    continue
                for ow in range(max(ow0, 0), min(ow1, OW)):
                    w0, w1, dvw = window(ow, W, OW, kw, sw, pw, include_pad, adaptive)
                    if iw < w0 or iw >= w1:
                        continue
                    s += ct(g[base + oh * OW + ow]) / ct(divisor if divisor > 0 else dvh * dvw)
            gx[i] = s
            i += step

    return avg_backward


@functools.cache
def _max_pool_kernel():
    bind_numba_cuda(globals())
    return jit(_max_pool_py())


@functools.cache
def _max_backward_kernel():
    bind_numba_cuda(globals())
    return jit(_max_backward_py())


@functools.cache
def _avg_pool_kernel(ct: str):
    bind_numba_cuda(globals())
    return jit(_avg_pool_py(np.dtype(ct).type))


@functools.cache
def _avg_backward_kernel(ct: str):
    bind_numba_cuda(globals())
    return jit(_avg_backward_py(np.dtype(ct).type))


# --- launchers -----------------------------------------------------------------------------------------
def _planes(shape) -> tuple:
    H, W = shape[-2], shape[-1]
    P = 1
    for n in shape[:-2]:
        P *= n
    return P, H, W


def _max_launch(x, OH, OW, params, adaptive):
    xc, back = compute_input(x)
    P, H, W = _planes(x.shape)
    shape = tuple(x.shape[:-2]) + (OH, OW)
    backend = be()
    out = backend.empty(shape, xc.dtype)
    idx = backend.empty(shape, np.int64)
    n = P * OH * OW
    if n:
        grid, block = launch_1d(n)
        _max_pool_kernel()[grid, block, stream()](backend.flat_view(out), backend.flat_view(idx),
                                                  backend.flat_view(xc), P, H, W, OH, OW, *params, adaptive)
    return cast_back(out, back), idx


@kernel("max_pool2d_with_indices", "cuda")
def max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode):
    H, W = x.shape[-2:]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    OH, OW = _out_len(H, kh, sh, ph, dh, ceil_mode), _out_len(W, kw, sw, pw, dw, ceil_mode)
    return _max_launch(x, OH, OW, (kh, kw, sh, sw, ph, pw, dh, dw), False)


@kernel("adaptive_max_pool2d", "cuda")
def adaptive_max_pool2d(x, output_size):
    OH, OW = output_size
    return _max_launch(x, OH, OW, (0, 0, 1, 1, 0, 0, 1, 1), True)


@kernel("max_pool2d_backward", "cuda")
def max_pool2d_backward(g, indices, input_size):
    """Scatters ``g`` into zeros of ``input_size`` at ``indices`` with atomics; a bad index is reported at
    the next host synchronisation (no sync here)."""
    gc, back = compute_input(g)
    ic, _ = compute_input(indices, np.int64)
    P, H, W = _planes(tuple(input_size))
    backend = be()
    gx = backend.empty(tuple(input_size), gc.dtype)
    fill(gx, 0)
    n = g.size
    if n and gx.size:
        grid, block = launch_1d(n)
        L = g.shape[-1] * g.shape[-2]
        _max_backward_kernel()[grid, block, stream()](backend.flat_view(gx), backend.flat_view(gc),
                                                      backend.flat_view(ic), L, H * W, n, error_flag())
    return cast_back(gx, back)


def _avg_args(kernel_size, stride, padding, count_include_pad, divisor_override):
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    return kh, kw, sh, sw, ph, pw, bool(count_include_pad), int(divisor_override or 0)


def _avg_launch(x, OH, OW, params, adaptive):
    xc, back = compute_input(x)
    P, H, W = _planes(x.shape)
    backend = be()
    out = backend.empty(tuple(x.shape[:-2]) + (OH, OW), xc.dtype)
    n = P * OH * OW
    if n:
        grid, block = launch_1d(n)
        _avg_pool_kernel(np_name(xc.dtype))[grid, block, stream()](
            backend.flat_view(out), backend.flat_view(xc), P, H, W, OH, OW, *params, adaptive)
    return cast_back(out, back)


def _avg_backward_launch(g, input_size, params, adaptive):
    gc, back = compute_input(g)
    P, H, W = _planes(tuple(input_size))
    OH, OW = g.shape[-2:]
    backend = be()
    gx = backend.empty(tuple(input_size), gc.dtype)
    n = P * H * W
    if n:
        grid, block = launch_1d(n)
        _avg_backward_kernel(np_name(gc.dtype))[grid, block, stream()](
            backend.flat_view(gx), backend.flat_view(gc), P, H, W, OH, OW, *params, adaptive)
    return cast_back(gx, back)


@kernel("avg_pool2d", "cuda")
def avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    H, W = x.shape[-2:]
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    OH, OW = _out_len(H, kh, sh, ph, 1, ceil_mode), _out_len(W, kw, sw, pw, 1, ceil_mode)
    return _avg_launch(x, OH, OW, _avg_args(kernel_size, stride, padding, count_include_pad, divisor_override),
                       False)


@kernel("avg_pool2d_backward", "cuda")
def avg_pool2d_backward(g, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    return _avg_backward_launch(g, input_size, _avg_args(kernel_size, stride, padding, count_include_pad,
                                                         divisor_override), False)


_ADAPTIVE = (0, 0, 1, 1, 0, 0, True, 0)


@kernel("adaptive_avg_pool2d", "cuda")
def adaptive_avg_pool2d(x, output_size):
    OH, OW = output_size
    return _avg_launch(x, OH, OW, _ADAPTIVE, True)


@kernel("adaptive_avg_pool2d_backward", "cuda")
def adaptive_avg_pool2d_backward(g, input_size):
    return _avg_backward_launch(g, input_size, _ADAPTIVE, True)


# --- concrete signatures (PTX test) ---------------------------------------------------------------------
def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the pooling kernels for float32 and float64."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64, b = types.int64, types.boolean
    cases = []
    err = types.Array(i64, 1, "C")
    idx = types.Array(i64, 1, "C")
    for dn in ("float32", "float64"):
        arr = types.Array(from_dtype(np.dtype(dn)), 1, "C")
        ct = np.dtype(dn).type
        cases.append((f"max_pool2d:{dn}", _max_pool_py(), (arr, idx, arr) + (i64,) * 13 + (b,)))
        cases.append((f"max_pool2d_backward:{dn}", _max_backward_py(), (arr, arr, idx, i64, i64, i64, err)))
        avg_sig = (arr, arr) + (i64,) * 11 + (b, i64, b)
        cases.append((f"avg_pool2d:{dn}", _avg_pool_py(ct), avg_sig))
        cases.append((f"avg_pool2d_backward:{dn}", _avg_backward_py(ct), avg_sig))
    return cases
