"""CPU kernels of the pooling operators declared in ``flambeau/_ops/pooling.py``.

A window along one spatial dimension is described by, per output position, its first input
position and its length (and, for max pooling, the step between taps: the dilation). Regular
pooling (kernel, stride, padding, dilation, ceil_mode) and adaptive pooling only differ in how
those per-position tables are computed, so four fused numba kernels (max forward with indices, max
backward, average forward, average backward), parallel over the ``N * C`` planes, serve all of
them; the usual max pooling windows (2x2 at stride 2, 3x3 at stride 1 or 2) have faster forward
kernels of their own (Note [Branch-free max pooling]). Average pooling divides by a per-row times
per-column divisor, which covers ``count_include_pad``, ``divisor_override`` and adaptive windows.
float32 and float64 are jitted; float16 computes in float32 and integer inputs in float64 (exact
below 2**53; average pooling truncates, as torch does).
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel


@functools.cache
def _numba_pool():
    """The four pooling kernels over ``(P, H, W)`` planes, compiled on first use (float32, float64)."""
    import numba
    from numba import prange

    opts = {"parallel": True, "cache": True}

    _window_scan()

    @numba.njit(**opts)
    def max_fwd(x, out, idx, h0, hn, dh, w0, wn, dw):
        P, H, W = x.shape
        OH, OW = out.shape[1], out.shape[2]
        xf = x.reshape(P * H * W)  # flat indices: no row views in the loops (cost more than 2x2 windows)
        for p in prange(P):
            o = out[p]
            ix = idx[p]
            for oh in range(OH):
                for ow in range(OW):
                    o[oh, ow], ix[oh, ow] = _scan(xf, p * H * W, W, h0[oh], hn[oh], dh, w0[ow], wn[ow], dw)

    @numba.njit(**opts)
    def max_bwd(g, idx, gx, bad):
        # An index outside the plane (indices changed since the forward) is skipped and reported in
        # ``bad``: the caller raises.
        P, L = g.shape
        n = gx.shape[1]
        for p in prange(P):
            gp = gx[p]
            gp[:] = 0
            ip = idx[p]
            gg = g[p]
            for i in range(L):
                k = ip[i]
                if k < 0 or k >= n:
                    bad[0] = k
                else:
                    gp[k] += gg[i]

    @numba.njit(**opts)
    def avg_fwd(x, out, h0, h1, w0, w1, divh, divw):
        P = x.shape[0]
        OH, OW = out.shape[1], out.shape[2]
        for p in prange(P):
            xp = x[p]
            for oh in range(OH):
                for ow in range(OW):
                    s = 0.0
                    for ih in range(h0[oh], h1[oh]):
                        xr = xp[ih]
                        for iw in range(w0[ow], w1[ow]):
                            s += xr[iw]
                    out[p, oh, ow] = s / (divh[oh] * divw[ow])

    @numba.njit(**opts)
    def avg_bwd(g, gx, h0, h1, w0, w1, divh, divw):
        P = g.shape[0]
        OH, OW = g.shape[1], g.shape[2]
        for p in prange(P):
            gp = gx[p]
            gp[:, :] = 0
            for oh in range(OH):
                for ow in range(OW):
                    v = g[p, oh, ow] / (divh[oh] * divw[ow])
                    for ih in range(h0[oh], h1[oh]):
                        gr = gp[ih]
                        for iw in range(w0[ow], w1[ow]):
                            gr[iw] += v

    return max_fwd, max_bwd, avg_fwd, avg_bwd


# Note [Branch-free max pooling]: "take a tap greater than the best so far, or NaN" (torch's rule: the
# first maximum, or the last NaN) as a branch mispredicts half the time on real activations; written as
# selects the general forward runs twice as fast (LeNet's 2x2 pooling of 64x64x24x24: 6.8 -> 3.6 ms,
# torch 7 ms). Its windows' trip counts come from the tables, so LLVM can neither unroll a window nor
# vectorise across outputs. 2x2 windows at stride 2, the common case, have a kernel of their own: the
# NaN-propagating maximum of the four taps, then the index of the first tap equal to it by arithmetic
# on the comparisons, so a row's outputs run without a branch and vectorise (0.40 ms). A row whose
# maximum is NaN somewhere, and the last row or column that ceil_mode clips, take the general scan.
_scan = None  # numba helper, set by _window_scan(): a module global, not a closure cell (see _fast_exp.py)


@functools.cache
def _window_scan():
    """``_scan(xf, base, W, hs, hc, dh, ws, wc, dw) -> (max, index)``: one window by torch's rule.
    Inlined into its callers: after editing it, clear their numba caches."""
    global _scan
    import numba

    @numba.njit(cache=True, inline="always")
    def scan(xf, base, W, hs, hc, dh, ws, wc, dw):
        best = -np.inf
        bi = hs * W + ws
        for i in range(hc):
            row = (hs + i * dh) * W
            for j in range(wc):
                k = row + ws + j * dw
                v = xf[base + k]
                take = (v > best) | (v != v)  # selects, not branches (Note [Branch-free max pooling])
                best = v if take else best
                bi = k if take else bi
        return best, bi

    _scan = scan


@functools.cache
def _max_pool_2x2():
    """Max pooling forward of 2x2 windows at stride 2, no padding (Note [Branch-free max pooling])."""
    import numba
    from numba import prange

    _window_scan()

    @numba.njit(parallel=True, cache=True)
    def max_fwd(x, out, idx, h0, hn, w0, wn):
        P, H, W = x.shape
        OH, OW = out.shape[1], out.shape[2]
        xf = x.reshape(P * H * W)
        whole = min(OW, W // 2)  # ceil_mode's last column may be clipped
        for p in prange(P):
            for oh in range(OH):
                o = out[p, oh]
                ix = idx[p, oh]
                nan = 2 * oh + 2 > H
                if not nan:
                    a = x[p, 2 * oh]
                    b = x[p, 2 * oh + 1]
                    base = 2 * oh * W
                    for ow in range(whole):
                        c = 2 * ow
                        v0, v1, v2, v3 = a[c], a[c + 1], b[c], b[c + 1]
                        m = np.maximum(np.maximum(v0, v1), np.maximum(v2, v3))
                        n0 = np.int64(v0 != m)  # 1 while no earlier tap equals the maximum
                        n1 = n0 * np.int64(v1 != m)
                        n2 = n1 * np.int64(v2 != m)
                        o[ow] = m
                        ix[ow] = base + c + n0 + n1 * (W - 1) + n2
                        nan |= m != m
                for ow in range(0 if nan else whole, OW):
                    o[ow], ix[ow] = _scan(xf, p * H * W, W, h0[oh], hn[oh], 1, w0[ow], wn[ow], 1)

    return max_fwd


_WHOLE_WINDOWS = frozenset({(3, 1), (3, 2)})  # (K, S) compiled by _max_pool_whole


@functools.cache
def _max_pool_whole(K: int, S: int):
    """Max pooling forward of K x K windows at stride S, dilation 1, compiled per (K, S): K is a constant
    of the loops, which LLVM unrolls (3x3 at stride 2 twice as fast as the general scan, though not
    vectorised across outputs as the 2x2 kernel is). Padding-clipped and NaN rows take the general scan."""
    import numba
    from numba import prange

    _window_scan()

    @numba.njit(parallel=True, cache=True)
    def max_fwd(x, out, idx, h0, hn, w0, wn, ph, pw):
        P, H, W = x.shape
        OH, OW = out.shape[1], out.shape[2]
        lo = min((pw + S - 1) // S, OW)  # the outputs whose columns are whole: [lo, hi)
        hi = max(min((W + pw - K) // S + 1, OW), lo)
        xf = x.reshape(P * H * W)
        for p in prange(P):
            xb = p * H * W
            for oh in range(OH):
                o = out[p, oh]
                ix = idx[p, oh]
                r0 = oh * S - ph
                a, b = (0, 0) if r0 < 0 or r0 + K > H else (lo, hi)
                nan = False
                for ow in range(a, b):
                    c = r0 * W + ow * S - pw
                    m = -np.inf
                    for i in range(K):
                        for j in range(K):
                            m = np.maximum(m, xf[xb + c + i * W + j])
                    off = 0  # the first tap equal to the maximum, as in the 2x2 kernel
                    alive = 1
                    prev = 0
                    for i in range(K):
                        for j in range(K):
                            t = i * W + j
                            off += alive * (t - prev)
                            prev = t
                            alive *= np.int64(xf[xb + c + i * W + j] != m)
                    o[ow] = m
                    ix[ow] = c + off
                    nan |= m != m
                for ow in range(OW):
                    if nan or not a <= ow < b:
                        o[ow], ix[ow] = _scan(xf, xb, W, h0[oh], hn[oh], 1, w0[ow], wn[ow], 1)

    return max_fwd


# --- window tables -----------------------------------------------------------------------------------
def _out_len(n, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape."""
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _max_windows(n, out, k, s, p, d):
    """First valid tap and number of valid taps (step ``d``) of each output position."""
    o = np.arange(out, dtype=np.int64)
    start = o * s - p
    i0 = np.where(start < 0, (-start + d - 1) // d, 0)
    i1 = np.minimum(k, (n - start + d - 1) // d)
    return start + i0 * d, np.maximum(i1 - i0, 0)


def _avg_windows(n, out, k, s, p, count_include_pad):
    o = np.arange(out, dtype=np.int64)
    start = o * s - p
    end = np.minimum(start + k, n + p)
    size = end - start
    lo, hi = np.maximum(start, 0), np.minimum(end, n)
    valid = np.maximum(hi - lo, 0)
    div = size if count_include_pad else np.where(valid > 0, valid, 1)
    return lo, np.maximum(hi, lo), div


def _adaptive_windows(n, out):
    o = np.arange(out, dtype=np.int64)
    lo = (o * n) // out
    hi = ((o + 1) * n + out - 1) // out
    return lo, hi


def _planes(x):
    """``x`` as contiguous ``(P, H, W)`` planes in a jitted dtype, and the dtype to return."""
    back = None
    if x.dtype == np.float16:
        x, back = x.astype(np.float32), np.float16
    elif x.dtype != np.float32 and x.dtype != np.float64:
        x, back = x.astype(np.float64), x.dtype
    return np.ascontiguousarray(x).reshape(-1, x.shape[-2], x.shape[-1]), back


def _cast_back(a, back):
    if back is None:
        return a
    if np.issubdtype(back, np.integer):
        return np.trunc(a).astype(back)
    return a.astype(back)


def _max_windows_kernel(x, hw, ww, dh, dw, OH, OW, fast=None):
    xp, back = _planes(x)
    P = xp.shape[0]
    out = np.empty((P, OH, OW), xp.dtype)
    idx = np.empty((P, OH, OW), np.int64)
    if P and OH and OW:
        if fast == (2, 2, 0, 0):  # Note [Branch-free max pooling]
            _max_pool_2x2()(xp, out, idx, hw[0], hw[1], ww[0], ww[1])
        elif fast is not None:
            K, S, ph, pw = fast
            _max_pool_whole(K, S)(xp, out, idx, hw[0], hw[1], ww[0], ww[1], ph, pw)
        else:
            _numba_pool()[0](xp, out, idx, hw[0], hw[1], dh, ww[0], ww[1], dw)
    shape = x.shape[:-2] + (OH, OW)
    return _cast_back(out.reshape(shape), back), idx.reshape(shape)


def _avg_windows_kernel(x, h0, h1, w0, w1, divh, divw, OH, OW):
    xp, back = _planes(x)
    P = xp.shape[0]
    out = np.empty((P, OH, OW), xp.dtype)
    if P and OH and OW:
        _numba_pool()[2](xp, out, h0, h1, w0, w1, divh.astype(xp.dtype), divw.astype(xp.dtype))
    return _cast_back(out.reshape(x.shape[:-2] + (OH, OW)), back)


def _avg_windows_backward(g, input_size, h0, h1, w0, w1, divh, divw):
    gp, back = _planes(g)
    H, W = input_size[-2], input_size[-1]
    gx = np.empty((gp.shape[0], H, W), gp.dtype)
    if gx.size:
        _numba_pool()[3](gp, gx, h0, h1, w0, w1, divh.astype(gp.dtype), divw.astype(gp.dtype))
    return _cast_back(gx.reshape(tuple(input_size)), back)


# --- kernels of the table -----------------------------------------------------------------------------
@kernel("max_pool2d_with_indices", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode):
    H, W = x.shape[-2:]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    OH, OW = _out_len(H, kh, sh, ph, dh, ceil_mode), _out_len(W, kw, sw, pw, dw, ceil_mode)
    fast = None  # (K, S, ph, pw) of a square window with a kernel of its own
    if kh == kw and sh == sw and dh == dw == 1 and ((kh, sh, ph, pw) == (2, 2, 0, 0) or (kh, sh) in _WHOLE_WINDOWS):
        fast = (kh, sh, ph, pw)
    return _max_windows_kernel(x, _max_windows(H, OH, kh, sh, ph, dh), _max_windows(W, OW, kw, sw, pw, dw),
                               dh, dw, OH, OW, fast)


@kernel("adaptive_max_pool2d", "cpu")
def _k_adaptive_max_pool2d(x, output_size):
    H, W = x.shape[-2:]
    OH, OW = output_size
    (h0, h1), (w0, w1) = _adaptive_windows(H, OH), _adaptive_windows(W, OW)
    return _max_windows_kernel(x, (h0, h1 - h0), (w0, w1 - w0), 1, 1, OH, OW)


@kernel("max_pool2d_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_max_pool2d_backward(g, indices, input_size):
    gp, back = _planes(g)
    P = gp.shape[0]
    H, W = input_size[-2], input_size[-1]
    gx = np.empty((P, H * W), gp.dtype)
    if gx.size:
        bad = np.zeros(1, np.int64)
        _numba_pool()[1](gp.reshape(P, -1), np.ascontiguousarray(indices, np.int64).reshape(P, -1), gx, bad)
        if bad[0]:
            raise IndexError(f"max_pool2d_backward(): index {int(bad[0])} in indices is out of range for input "
                             f"planes of {H} x {W} = {H * W} elements")
    return _cast_back(gx.reshape(tuple(input_size)), back)


def _avg_tables(input_size, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    H, W = input_size[-2:]
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    OH, OW = _out_len(H, kh, sh, ph, 1, ceil_mode), _out_len(W, kw, sw, pw, 1, ceil_mode)
    h0, h1, divh = _avg_windows(H, OH, kh, sh, ph, count_include_pad)
    w0, w1, divw = _avg_windows(W, OW, kw, sw, pw, count_include_pad)
    if divisor_override:
        divh, divw = np.full(OH, float(divisor_override)), np.ones(OW)
    return (h0, h1, w0, w1, divh, divw), OH, OW


@kernel("avg_pool2d", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    tables, OH, OW = _avg_tables(x.shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                 divisor_override)
    return _avg_windows_kernel(x, *tables, OH, OW)


@kernel("avg_pool2d_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_avg_pool2d_backward(g, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
                           divisor_override):
    tables, _, _ = _avg_tables(input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
                               divisor_override)
    return _avg_windows_backward(g, input_size, *tables)


def _adaptive_avg_tables(H, W, OH, OW):
    (h0, h1), (w0, w1) = _adaptive_windows(H, OH), _adaptive_windows(W, OW)
    return h0, h1, w0, w1, (h1 - h0).astype(np.float64), (w1 - w0).astype(np.float64)


@kernel("adaptive_avg_pool2d", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_adaptive_avg_pool2d(x, output_size):
    H, W = x.shape[-2:]
    OH, OW = output_size
    if OH == 1 and OW == 1 and x.dtype in (np.float32, np.float64) and x.size:  # global average pooling
        # A matrix-vector product: numpy's reduction along a short last axis is ~10x slower.
        xc = np.ascontiguousarray(x).reshape(-1, H * W)
        return (xc @ np.full(H * W, 1.0 / (H * W), x.dtype)).reshape(x.shape[:-2] + (1, 1))
    return _avg_windows_kernel(x, *_adaptive_avg_tables(H, W, OH, OW), OH, OW)


@kernel("adaptive_avg_pool2d_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_adaptive_avg_pool2d_backward(g, input_size):
    H, W = input_size[-2:]
    OH, OW = g.shape[-2:]
    if OH == 1 and OW == 1 and g.dtype in (np.float32, np.float64):
        return np.broadcast_to(g * g.dtype.type(1.0 / (H * W)), tuple(input_size)).copy()
    return _avg_windows_backward(g, input_size, *_adaptive_avg_tables(H, W, OH, OW))
