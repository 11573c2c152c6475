"""Recurrent cells (lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell) and whole-sequence layers.

torch's gate order and formulas: LSTM gates ``i, f, g, o`` (``c' = f * c + i * g``,
``h' = o * tanh(c')``); GRU gates ``r, z, n`` with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``
and ``h' = (1 - z) * n + z * h``; Elman cells ``h' = tanh|relu(W_ih x + b_ih + W_hh h + b_hh)``.

The GEMMs run through BLAS (``np.matmul``); the gate nonlinearities and the state update run in
one fused numba pass per step, forward and backward (the gate activations are saved, never
recomputed). ``_lstm_layer`` / ``_gru_layer`` / ``_rnn_layer`` run a whole sequence in one
operator (the input projection of every step is one GEMM, each step adds one ``h @ W_hh.T``
GEMM and one fused pass), so that ``flambeau.nn.LSTM`` records one autograd node per layer and
direction instead of one per step; their backward runs the steps in reverse and finishes with one
GEMM per weight. A cell is a one-step layer.

Kernel convention (every device; arrays in, arrays out), ``x (T, B, I)``, ``h0``/``c0 (B, H)``:
    _lstm_layer: ``kernel(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse) -> (out, h_n, c_n, gates,
        cells, tanh_cells)``; ``gates (T, B, 4H)`` the activated i, f, g, o, ``cells`` every c_t.
    _lstm_layer_backward: ``kernel(g_out, g_h, g_c, x, h0, c0, w_ih, w_hh, out, gates, cells,
        tanh_cells, reverse, has_bias) -> (g_x, g_h0, g_c0, g_w_ih, g_w_hh, g_b_ih, g_b_hh)``.
    _gru_layer: ``kernel(x, h0, w_ih, w_hh, b_ih, b_hh, reverse) -> (out, h_n, gates)``;
        ``gates (T, B, 4H)``: r, z, n and ``W_hn h + b_hn``.
    _gru_layer_backward: ``kernel(g_out, g_h, x, h0, w_ih, w_hh, out, gates, reverse, has_bias)``.
    _rnn_layer: ``kernel(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse) -> (out, h_n)``.
    _rnn_layer_backward: ``kernel(g_out, g_h, x, h0, w_ih, w_hh, out, nonlinearity, reverse, has_bias)``.
Gradients of absent biases come back as None.

Autograd recording: the layers and cells record their tensor arguments positionally and the saved
workspace (``gates``, ``cells``, ``tanh_cells``) as attrs. Their derivatives run the backward
operators above, which are not differentiable: double backward raises a RuntimeError.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._blas import single_threaded_blas
from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, grad_state, record
from flambeau._ops._registry import declare

__all__ = ["lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"]

_matmul = np.matmul


_expf_poly = None  # numba helper from _fast_exp.expf_helpers(), set by _numba_rnn()


@functools.cache
def _numba_rnn():
    """Fused LSTM / GRU step kernels (forward and backward), compiled on first use.

    Only the float32 forward kernels run parallel over the batch rows: numba's parallel lowering
    also vectorises their scratch-row loops (2x faster on one thread); the others gain nothing.
    """
    # The kernels reach the shared expf helper as a module global (see _fast_exp), not a closure cell.
    global _expf_poly
    import numba

    from flambeau._ops._fast_exp import expf_helpers

    _expf_poly, _ = expf_helpers()

    @numba.njit(cache=True, fastmath={"contract", "reassoc"})
    def lstm_fwd(g, gh, c_prev, h_out, c_out, tc_out, one):
        nb, h4 = g.shape
        nh = h4 // 4
        for b in range(nb):
            gb, hb, cp = g[b], gh[b], c_prev[b]
            for j in range(nh):
                i = one / (one + np.exp(-(gb[j] + hb[j])))
                f = one / (one + np.exp(-(gb[nh + j] + hb[nh + j])))
                gg = np.tanh(gb[2 * nh + j] + hb[2 * nh + j])
                o = one / (one + np.exp(-(gb[3 * nh + j] + hb[3 * nh + j])))
                c = f * cp[j] + i * gg
                tc = np.tanh(c)
                gb[j] = i
                gb[nh + j] = f
                gb[2 * nh + j] = gg
                gb[3 * nh + j] = o
                c_out[b, j] = c
                tc_out[b, j] = tc
                h_out[b, j] = o * tc

    @numba.njit(cache=True, fastmath={"contract", "reassoc"})
    def lstm_bwd(acts, tc, c_prev, dh, dc, dg, one):
        # dc: in the gradient of c_t, out the gradient of c_{t-1}; dg: gradient of the pre-activations.
        nb, h4 = acts.shape
        nh = h4 // 4
        for b in range(nb):
            a, d = acts[b], dg[b]
            for j in range(nh):
                i = a[j]
                f = a[nh + j]
                gg = a[2 * nh + j]
                o = a[3 * nh + j]
                t = tc[b, j]
                dht = dh[b, j]
                dct = dc[b, j] + dht * o * (one - t * t)
                d[j] = dct * gg * i * (one - i)
                d[nh + j] = dct * c_prev[b, j] * f * (one - f)
                d[2 * nh + j] = dct * i * (one - gg * gg)
                d[3 * nh + j] = dht * t * o * (one - o)
                dc[b, j] = dct * f

    @numba.njit(cache=True, fastmath={"contract", "reassoc"})
    def gru_fwd(gx, gh, h_prev, h_out, acts, one):
        nb, h3 = gx.shape
        nh = h3 // 3
        for b in range(nb):
            x, hh, a = gx[b], gh[b], acts[b]
            for j in range(nh):
                r = one / (one + np.exp(-(x[j] + hh[j])))
                z = one / (one + np.exp(-(x[nh + j] + hh[nh + j])))
                hn = hh[2 * nh + j]
                n = np.tanh(x[2 * nh + j] + r * hn)
                a[j] = r
                a[nh + j] = z
                a[2 * nh + j] = n
                a[3 * nh + j] = hn
                h_out[b, j] = (one - z) * n + z * h_prev[b, j]

    @numba.njit(cache=True, fastmath={"contract", "reassoc"})
    def gru_bwd(acts, h_prev, dh, dgx, dgh):
        # dh: in the gradient of h_t, out its direct part on h_{t-1} (dh * z).
        nb, h4 = acts.shape
        nh = h4 // 4
        for b in range(nb):
            a, dx, dhh = acts[b], dgx[b], dgh[b]
            for j in range(nh):
                r = a[j]
                z = a[nh + j]
                n = a[2 * nh + j]
                hn = a[3 * nh + j]
                d = dh[b, j]
                dpn = d * (1 - z) * (1 - n * n)
                dpr = dpn * hn * r * (1 - r)
                dpz = d * (h_prev[b, j] - n) * z * (1 - z)
                dx[j] = dpr
                dx[nh + j] = dpz
                dx[2 * nh + j] = dpn
                dhh[j] = dpr
                dhh[nh + j] = dpz
                dhh[2 * nh + j] = dpn * r
                dh[b, j] = d * z

    # float32 forward kernels: see Note [Vectorised expf] in nn_ops.py. Every exponential of a row
    # is taken in one branch-free loop over a scratch row (Cephes' expf polynomial and a 2**k scale
    # built in an int32 row), which LLVM vectorises; sigmoid(x) = 1 / (1 + exp(-x)) and
    # tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2|x|), or Cephes' tanhf polynomial for
    # |x| < 0.625 where that form would cancel. About 1e-7 from torch's values.
    @numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc"})
    def lstm_fwd_f32(g, gh, c_prev, h_out, c_out, tc_out, one):
        nb, h4 = g.shape
        nh = h4 // 4
        for b in numba.prange(nb):
            gb, hb, cp = g[b], gh[b], c_prev[b]
            a = np.empty(h4, np.float32)
            bits = np.empty(h4, np.int32)
            for j in range(h4):
                v = gb[j] + hb[j]
                gb[j] = v
                a[j] = -v
            for j in range(2 * nh, 3 * nh):
                a[j] = np.float32(-2.0) * abs(gb[j])
            for rep in range(2):
                n = h4 if rep == 0 else nh
                for j in range(n):
                    v = min(max(a[j], np.float32(-87.0)), np.float32(88.0))
                    y, k = _expf_poly(v)
                    a[j] = y
                    bits[j] = (np.int32(k) + np.int32(127)) << np.int32(23)
                sc = bits.view(np.float32)
                for j in range(n):
                    a[j] *= sc[j]
                if rep == 0:
                    for j in range(nh):
                        i = one / (one + a[j])
                        f = one / (one + a[nh + j])
                        o = one / (one + a[3 * nh + j])
                        x = gb[2 * nh + j]
                        e = a[2 * nh + j]
                        z = x * x
                        small = ((((np.float32(-5.70498872745e-3) * z + np.float32(2.06390887954e-2)) * z
                                   - np.float32(5.37397155531e-2)) * z + np.float32(1.33314422036e-1)) * z
                                 - np.float32(3.33332819422e-1)) * z * x + x
                        big = (one - e) / (one + e)
                        big = big if x >= 0 else -big
                        gg = small if abs(x) < np.float32(0.625) else big
                        c = f * cp[j] + i * gg
                        gb[j] = i
                        gb[nh + j] = f
                        gb[2 * nh + j] = gg
                        gb[3 * nh + j] = o
                        c_out[b, j] = c
                        a[j] = np.float32(-2.0) * abs(c)
                else:
                    for j in range(nh):
                        x = c_out[b, j]
                        e = a[j]
                        z = x * x
                        small = ((((np.float32(-5.70498872745e-3) * z + np.float32(2.06390887954e-2)) * z
                                   - np.float32(5.37397155531e-2)) * z + np.float32(1.33314422036e-1)) * z
                                 - np.float32(3.33332819422e-1)) * z * x + x
                        big = (one - e) / (one + e)
                        big = big if x >= 0 else -big
                        t = small if abs(x) < np.float32(0.625) else big
                        tc_out[b, j] = t
                        h_out[b, j] = gb[3 * nh + j] * t

    @numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc"})
    def gru_fwd_f32(gx, gh, h_prev, h_out, acts, one):
        nb, h3 = gx.shape
        nh = h3 // 3
        for b in numba.prange(nb):
            x, hh, act = gx[b], gh[b], acts[b]
            a = np.empty(2 * nh, np.float32)
            bits = np.empty(2 * nh, np.int32)
            for j in range(2 * nh):
                a[j] = -(x[j] + hh[j])
            for rep in range(2):
                n = 2 * nh if rep == 0 else nh
                for j in range(n):
                    v = min(max(a[j], np.float32(-87.0)), np.float32(88.0))
                    y, k = _expf_poly(v)
                    a[j] = y
                    bits[j] = (np.int32(k) + np.int32(127)) << np.int32(23)
                sc = bits.view(np.float32)
                for j in range(n):
                    a[j] *= sc[j]
                if rep == 0:
                    for j in range(nh):
                        r = one / (one + a[j])
                        z = one / (one + a[nh + j])
                        hn = hh[2 * nh + j]
                        pre = x[2 * nh + j] + r * hn
                        act[j] = r
                        act[nh + j] = z
                        act[2 * nh + j] = pre
                        act[3 * nh + j] = hn
                        a[j] = np.float32(-2.0) * abs(pre)
                else:
                    for j in range(nh):
                        xx = act[2 * nh + j]
                        e = a[j]
                        zz = xx * xx
                        small = ((((np.float32(-5.70498872745e-3) * zz + np.float32(2.06390887954e-2)) * zz
                                   - np.float32(5.37397155531e-2)) * zz + np.float32(1.33314422036e-1)) * zz
                                 - np.float32(3.33332819422e-1)) * zz * xx + xx
                        big = (one - e) / (one + e)
                        big = big if xx >= 0 else -big
                        n_ = small if abs(xx) < np.float32(0.625) else big
                        act[2 * nh + j] = n_
                        z = act[nh + j]
                        h_out[b, j] = (one - z) * n_ + z * h_prev[b, j]

    return lstm_fwd, lstm_bwd, gru_fwd, gru_bwd, lstm_fwd_f32, gru_fwd_f32


# Note [Small GEMMs on one BLAS thread]: the per-step products ``h @ W_hh.T`` are small
# (batch x hidden x 4 hidden); with OpenBLAS's threads each of them paid a thread hand-off, and on
# a loaded 2-core machine a layer ran 10-20x slower than on one thread. The step loops therefore
# run with OpenBLAS on one thread; the large GEMMs before and after them (input projection, weight
# gradients) keep every thread.
def _c(a):
    """``a`` as a writable C-contiguous array (a read-only one would be another numba type)."""
    return a if a.flags.c_contiguous and a.flags.writeable else np.array(a, order="C")


def _input_projection(x, w_ih, b_ih, b_hh, split_hh=False):
    t, b, i = x.shape
    gx = _matmul(_c(x).reshape(t * b, i), w_ih.T).reshape(t, b, w_ih.shape[0])
    if b_ih is not None:
        gx += b_ih if b_hh is None or split_hh else b_ih + b_hh
    elif b_hh is not None and not split_hh:
        gx += b_hh
    return gx


def _steps(t, reverse):
    return range(t - 1, -1, -1) if reverse else range(t)


def _k_lstm_layer(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse):
    kernels = _numba_rnn()
    lstm_fwd = kernels[4] if x.dtype == np.float32 else kernels[0]
    nt, nb, _ = x.shape
    nh = w_hh.shape[1]
    dtype = x.dtype
    gates = _input_projection(x, w_ih, b_ih, b_hh)
    out = np.empty((nt, nb, nh), dtype)
    cells = np.empty((nt, nb, nh), dtype)
    tcs = np.empty((nt, nb, nh), dtype)
    gh = np.empty((nb, 4 * nh), dtype)
    whT = w_hh.T
    h, c = _c(h0), _c(c0)
    one = dtype.type(1)
    with single_threaded_blas():  # Note [Small GEMMs on one BLAS thread]
        for t in _steps(nt, reverse):
            _matmul(h, whT, out=gh)
            lstm_fwd(gates[t], gh, c, out[t], cells[t], tcs[t], one)
            h, c = out[t], cells[t]
    return out, h.copy(), c.copy(), gates, cells, tcs


def _weight_grads(dgx, dgh, x, hprev, b_present):
    nt, nb, n4 = dgx.shape
    gw_ih = _matmul(dgx.reshape(nt * nb, n4).T, _c(x).reshape(nt * nb, -1))
    gw_hh = _matmul(dgh.reshape(nt * nb, n4).T, hprev.reshape(nt * nb, -1))
    if b_present:
        return gw_ih, gw_hh, dgx.sum((0, 1)), dgh.sum((0, 1))
    return gw_ih, gw_hh, None, None


def _previous_states(h0, out, reverse):
    """``h_{t-1}`` for every step t, in time order (``h0`` where the direction starts)."""
    hprev = np.empty_like(out)
    if reverse:
        hprev[-1] = h0
        hprev[:-1] = out[1:]
    else:
        hprev[0] = h0
        hprev[1:] = out[:-1]
    return hprev


def _k_lstm_layer_backward(g_out, g_h, g_c, x, h0, c0, w_ih, w_hh, out, gates, cells, tcs, reverse, has_bias):
    lstm_bwd = _numba_rnn()[1]
    nt, nb, nh = out.shape
    dtype = out.dtype
    dg = np.empty((nt, nb, 4 * nh), dtype)
    dh = np.array(g_h, dtype, copy=True)
    dc = np.array(g_c, dtype, copy=True)
    c0 = _c(c0)
    one = dtype.type(1)
    steps = list(_steps(nt, reverse))[::-1]
    with single_threaded_blas():
        for k, t in enumerate(steps):
            dh += g_out[t]
            c_prev = c0 if k == nt - 1 else cells[steps[k + 1]]
            lstm_bwd(gates[t], tcs[t], c_prev, dh, dc, dg[t], one)
            _matmul(dg[t], w_hh, out=dh)
    gx = _matmul(dg.reshape(nt * nb, 4 * nh), w_ih).reshape(x.shape)
    gw_ih, gw_hh, gb, _ = _weight_grads(dg, dg, x, _previous_states(h0, out, reverse), has_bias)
    return gx, dh, dc, gw_ih, gw_hh, gb, gb


def _k_gru_layer(x, h0, w_ih, w_hh, b_ih, b_hh, reverse):
    kernels = _numba_rnn()
    gru_fwd = kernels[5] if x.dtype == np.float32 else kernels[2]
    nt, nb, _ = x.shape
    nh = w_hh.shape[1]
    dtype = x.dtype
    gx = _input_projection(x, w_ih, b_ih, b_hh, split_hh=True)
    out = np.empty((nt, nb, nh), dtype)
    acts = np.empty((nt, nb, 4 * nh), dtype)
    gh = np.empty((nb, 3 * nh), dtype)
    whT = w_hh.T
    h = _c(h0)
    one = dtype.type(1)
    with single_threaded_blas():
        for t in _steps(nt, reverse):
            _matmul(h, whT, out=gh)
            if b_hh is not None:
                gh += b_hh
            gru_fwd(gx[t], gh, h, out[t], acts[t], one)
            h = out[t]
    return out, h.copy(), acts


def _k_gru_layer_backward(g_out, g_h, x, h0, w_ih, w_hh, out, acts, reverse, has_bias):
    gru_bwd = _numba_rnn()[3]
    nt, nb, nh = out.shape
    dtype = out.dtype
    dgx = np.empty((nt, nb, 3 * nh), dtype)
    dgh = np.empty((nt, nb, 3 * nh), dtype)
    hprev = _previous_states(_c(h0), out, reverse)
    dh = np.array(g_h, dtype, copy=True)
    tmp = np.empty((nb, nh), dtype)
    with single_threaded_blas():
        for t in list(_steps(nt, reverse))[::-1]:
            dh += g_out[t]
            gru_bwd(acts[t], hprev[t], dh, dgx[t], dgh[t])
            _matmul(dgh[t], w_hh, out=tmp)
            dh += tmp
    gx = _matmul(dgx.reshape(nt * nb, 3 * nh), w_ih).reshape(x.shape)
    gw_ih, gw_hh, gb_ih, gb_hh = _weight_grads(dgx, dgh, x, hprev, has_bias)
    return gx, dh, gw_ih, gw_hh, gb_ih, gb_hh


def _k_rnn_layer(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse):
    nt = x.shape[0]
    pre = _input_projection(x, w_ih, b_ih, b_hh)
    whT = w_hh.T
    h = h0
    tanh = nonlinearity == "tanh"
    with single_threaded_blas():
        for t in _steps(nt, reverse):
            p = pre[t]
            p += _matmul(h, whT)
            if tanh:
                np.tanh(p, out=p)
            else:
                np.maximum(p, 0, out=p)
            h = p
    return pre, h.copy()


def _k_rnn_layer_backward(g_out, g_h, x, h0, w_ih, w_hh, out, nonlinearity, reverse, has_bias):
    nt, nb, nh = out.shape
    dp = np.empty_like(out)
    dh = np.array(g_h, out.dtype, copy=True)
    tanh = nonlinearity == "tanh"
    with single_threaded_blas():
        for t in list(_steps(nt, reverse))[::-1]:
            dh += g_out[t]
            o = out[t]
            if tanh:
                np.multiply(dh, 1 - o * o, out=dp[t])
            else:
                np.multiply(dh, o > 0, out=dp[t])
            _matmul(dp[t], w_hh, out=dh)
    gx = _matmul(dp.reshape(nt * nb, nh), w_ih).reshape(x.shape)
    gw_ih, gw_hh, gb, _ = _weight_grads(dp, dp, x, _previous_states(h0, out, reverse), has_bias)
    return gx, dh, gw_ih, gw_hh, gb, gb


_W = "Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None"
LSTM_LAYER = declare(f"_lstm_layer(Tensor input, Tensor h0, Tensor c0, {_W}, bool reverse=False) "
                     "-> (Tensor, Tensor, Tensor)", category="recurrent", method=False,
                     kernels={"cpu": _k_lstm_layer})
LSTM_LAYER_BACKWARD = declare(
    "_lstm_layer_backward(Tensor grad_output, Tensor grad_h, Tensor grad_c, Tensor input, Tensor h0, Tensor c0, "
    "Tensor w_ih, Tensor w_hh, Tensor output, Tensor gates, Tensor cells, Tensor tanh_cells, bool reverse, "
    "bool has_bias) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    category="recurrent", method=False, differentiable=False, kernels={"cpu": _k_lstm_layer_backward})
GRU_LAYER = declare(f"_gru_layer(Tensor input, Tensor h0, {_W}, bool reverse=False) -> (Tensor, Tensor)",
                    category="recurrent", method=False, kernels={"cpu": _k_gru_layer})
GRU_LAYER_BACKWARD = declare(
    "_gru_layer_backward(Tensor grad_output, Tensor grad_h, Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, "
    "Tensor output, Tensor gates, bool reverse, bool has_bias) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    category="recurrent", method=False, differentiable=False, kernels={"cpu": _k_gru_layer_backward})
RNN_LAYER = declare(f"_rnn_layer(Tensor input, Tensor h0, {_W}, str nonlinearity='tanh', bool reverse=False) "
                    "-> (Tensor, Tensor)", category="recurrent", method=False, kernels={"cpu": _k_rnn_layer})
RNN_LAYER_BACKWARD = declare(
    "_rnn_layer_backward(Tensor grad_output, Tensor grad_h, Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, "
    "Tensor output, str nonlinearity, bool reverse, bool has_bias) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    category="recurrent", method=False, differentiable=False, kernels={"cpu": _k_rnn_layer_backward})
LSTM_CELL = declare(f"lstm_cell(Tensor input, Tensor[] hx, {_W}) -> (Tensor, Tensor)", category="recurrent",
                    method=False, kernels={"cpu": _k_lstm_layer})
GRU_CELL = declare(f"gru_cell(Tensor input, Tensor hx, {_W}) -> Tensor", category="recurrent", method=False,
                   kernels={"cpu": _k_gru_layer})
RNN_TANH_CELL = declare(f"rnn_tanh_cell(Tensor input, Tensor hx, {_W}) -> Tensor", category="recurrent",
                        method=False, kernels={"cpu": _k_rnn_layer})
RNN_RELU_CELL = declare(f"rnn_relu_cell(Tensor input, Tensor hx, {_W}) -> Tensor", category="recurrent",
                        method=False, kernels={"cpu": _k_rnn_layer})


# --- validation --------------------------------------------------------------------------------------
def _check_weights(name, dtype, batch, in_features, hs, w_ih, w_hh, b_ih, b_hh, gates):
    check_tensor(w_ih, "w_ih", name)
    check_tensor(w_hh, "w_hh", name)
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name}(): expected a floating input, got {dtype}")
    if dtype.np not in (np.float32, np.float64):
        raise RuntimeError(f"{name}(): {dtype} is not supported (float32 and float64 are)")
    nh = w_hh.shape[-1] if w_hh.ndim == 2 else -1
    if w_ih.ndim != 2 or w_hh.ndim != 2 or w_hh.shape[0] != gates * nh or w_ih.shape[0] != gates * nh:
        raise RuntimeError(f"{name}(): expected w_ih of shape [{gates} * hidden_size, input_size] and w_hh of "
                           f"shape [{gates} * hidden_size, hidden_size], got {list(w_ih.shape)} and "
                           f"{list(w_hh.shape)}")
    if in_features != w_ih.shape[1]:
        raise RuntimeError(f"{name}(): input has inconsistent input_size: got {in_features} expected "
                           f"{w_ih.shape[1]}")
    for b, bn in ((b_ih, "b_ih"), (b_hh, "b_hh")):
        if b is not None:
            check_tensor(b, bn, name)
            if tuple(b.shape) != (gates * nh,):
                raise RuntimeError(f"{name}(): expected {bn} of shape [{gates * nh}], got {list(b.shape)}")
    for t in (w_ih, w_hh, b_ih, b_hh, *hs):
        if t is not None and t.dtype is not dtype:
            raise RuntimeError(f"{name}(): expected all tensors to have dtype {dtype}, got {t.dtype}")
    for h, hn in zip(hs, ("hx", "cx")):
        if tuple(h.shape) != tuple(batch) + (nh,):
            raise RuntimeError(f"{name}(): expected {hn} of shape {list(batch) + [nh]}, got {list(h.shape)}")
    common_device(w_ih, w_hh, b_ih, b_hh, *hs)
    return nh


def _any_grad(*ts):
    return grad_state.enabled and any(t is not None and t._requires_grad for t in ts)


def _d(t):
    return None if t is None else t._data


# --- layers ------------------------------------------------------------------------------------------
def _check_layer(name, input, hs, w_ih, w_hh, b_ih, b_hh, gates):
    check_tensor(input, "input", name)
    if input.ndim != 3:
        raise RuntimeError(f"{name}(): expected a 3-D input (seq, batch, feature), got {input.ndim}-D")
    for h in hs:
        check_tensor(h, "h0", name)
    if (b_ih is None) != (b_hh is None):
        raise RuntimeError(f"{name}(): b_ih and b_hh must both be given or both be None")
    _check_weights(name, input.dtype, input.shape[1:2], input.shape[2], hs, w_ih, w_hh, b_ih, b_hh, gates)
    common_device(input, w_ih)


@LSTM_LAYER.front
def _lstm_layer(input: Tensor, h0: Tensor, c0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None,
                reverse: bool = False):
    """One LSTM layer over a whole sequence (one direction), as ``flambeau.nn.LSTM`` runs it.

    Args:
        input: ``(T, B, input_size)``.
        h0, c0: ``(B, hidden_size)`` initial states.
        w_ih: ``(4 * hidden_size, input_size)``; w_hh: ``(4 * hidden_size, hidden_size)``;
            b_ih, b_hh: ``(4 * hidden_size,)`` or both None. Gate order i, f, g, o.
        reverse: run the sequence from its last step to its first.

    Returns:
        ``(output (T, B, hidden_size), h_n, c_n)``.
    """
    _check_layer("_lstm_layer", input, (h0, c0), w_ih, w_hh, b_ih, b_hh, 4)
    dev = input._device
    res = LSTM_LAYER.kernel(dev.type)(input._data, h0._data, c0._data, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh),
                                      bool(reverse))
    out = tuple(_wrap(r, dev) for r in res[:3])
    if _any_grad(input, h0, c0, w_ih, w_hh, b_ih, b_hh):
        record(LSTM_LAYER, (input, h0, c0, w_ih, w_hh, b_ih, b_hh, bool(reverse)),
               {"gates": _wrap(res[3], dev), "cells": _wrap(res[4], dev), "tanh_cells": _wrap(res[5], dev)}, out)
    return out


@GRU_LAYER.front
def _gru_layer(input: Tensor, h0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None, reverse: bool = False):
    """One GRU layer over a whole sequence (one direction), as ``flambeau.nn.GRU`` runs it.

    Args:
        input: ``(T, B, input_size)``; h0: ``(B, hidden_size)``.
        w_ih: ``(3 * hidden_size, input_size)``; w_hh: ``(3 * hidden_size, hidden_size)``;
            b_ih, b_hh: ``(3 * hidden_size,)`` or both None. Gate order r, z, n.
        reverse: run the sequence from its last step to its first.

    Returns:
        ``(output (T, B, hidden_size), h_n)``.
    """
    _check_layer("_gru_layer", input, (h0,), w_ih, w_hh, b_ih, b_hh, 3)
    dev = input._device
    res = GRU_LAYER.kernel(dev.type)(input._data, h0._data, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh),
                                     bool(reverse))
    out = (_wrap(res[0], dev), _wrap(res[1], dev))
    if _any_grad(input, h0, w_ih, w_hh, b_ih, b_hh):
        record(GRU_LAYER, (input, h0, w_ih, w_hh, b_ih, b_hh, bool(reverse)), {"gates": _wrap(res[2], dev)}, out)
    return out


def _check_nonlinearity(nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")


@RNN_LAYER.front
def _rnn_layer(input: Tensor, h0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None,
               nonlinearity: str = "tanh", reverse: bool = False):
    """One Elman RNN layer over a whole sequence (one direction), as ``flambeau.nn.RNN`` runs it.

    Args:
        input: ``(T, B, input_size)``; h0: ``(B, hidden_size)``.
        w_ih: ``(hidden_size, input_size)``; w_hh: ``(hidden_size, hidden_size)``;
            b_ih, b_hh: ``(hidden_size,)`` or both None.
        nonlinearity: ``'tanh'`` or ``'relu'``.
        reverse: run the sequence from its last step to its first.

    Returns:
        ``(output (T, B, hidden_size), h_n)``.
    """
    _check_nonlinearity(nonlinearity)
    _check_layer("_rnn_layer", input, (h0,), w_ih, w_hh, b_ih, b_hh, 1)
    dev = input._device
    res = RNN_LAYER.kernel(dev.type)(input._data, h0._data, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh),
                                     nonlinearity, bool(reverse))
    out = (_wrap(res[0], dev), _wrap(res[1], dev))
    if _any_grad(input, h0, w_ih, w_hh, b_ih, b_hh):
        record(RNN_LAYER, (input, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, bool(reverse)), {}, out)
    return out


# The tensor arguments of the backward operators, in signature order, and their shapes in terms of
# T, B, I, H (``G`` stands for gates * H): Note [Recurrent backward checks].
_BACKWARD_SHAPES = {
    "_lstm_layer_backward": (4, (("grad_output", "TBH"), ("grad_h", "BH"), ("grad_c", "BH"), ("input", "TBI"),
                                 ("h0", "BH"), ("c0", "BH"), ("w_ih", "GI"), ("w_hh", "GH"), ("output", "TBH"),
                                 ("gates", "TBG"), ("cells", "TBH"), ("tanh_cells", "TBH"))),
    "_gru_layer_backward": (3, (("grad_output", "TBH"), ("grad_h", "BH"), ("input", "TBI"), ("h0", "BH"),
                                ("w_ih", "GI"), ("w_hh", "GH"), ("output", "TBH"), ("gates", "TBF"))),
    "_rnn_layer_backward": (1, (("grad_output", "TBH"), ("grad_h", "BH"), ("input", "TBI"), ("h0", "BH"),
                                ("w_ih", "GI"), ("w_hh", "GH"), ("output", "TBH"))),
}


def _check_backward(name: str, args: tuple) -> None:
    """Note [Recurrent backward checks]: the fused step kernels index the saved workspace and states by
    the sizes of ``output`` and ``input``, with no bounds checks, and autograd hands them the saved
    tensors (which a ``.data`` assignment may have changed since the forward): every tensor argument
    must have its shape in terms of ``T, B, I, H`` (GRU's ``gates`` hold four blocks of ``H``), and
    ``input``'s dtype and device."""
    gates, spec = _BACKWARD_SHAPES[name]
    tensors = args[:len(spec)]
    for t, (argname, _) in zip(tensors, spec):
        check_tensor(t, argname, name)
    x, out = tensors[[n for n, _ in spec].index("input")], tensors[[n for n, _ in spec].index("output")]
    if x.ndim != 3 or out.ndim != 3:
        raise RuntimeError(f"{name}(): expected 3-D input and output (seq, batch, feature), got "
                           f"{list(x.shape)} and {list(out.shape)}")
    sizes = {"T": x.shape[0], "B": x.shape[1], "I": x.shape[2], "H": out.shape[2]}
    sizes["G"], sizes["F"] = gates * sizes["H"], 4 * sizes["H"]
    for t, (argname, dims) in zip(tensors, spec):
        expected = tuple(sizes[d] for d in dims)
        if tuple(t.shape) != expected or t.dtype is not x.dtype:
            raise RuntimeError(f"{name}(): expected {argname} of shape {list(expected)} and dtype {x.dtype} "
                               f"(T, B, I, H = {sizes['T']}, {sizes['B']}, {sizes['I']}, {sizes['H']}), got "
                               f"{list(t.shape)} and {t.dtype}")
    common_device(*tensors)


def _backward_front(op, n_grads):
    def fn(*args):
        _check_backward(op.name, args)
        dev = args[0]._device
        arrays = tuple(a._data if isinstance(a, Tensor) else a for a in args)
        return tuple(None if r is None else _wrap(r, dev) for r in op.kernel(dev.type)(*arrays))

    fn.__doc__ = f"""Gradients of ``{op.name[:-9]}`` from its saved workspace ({n_grads} results).

    Not differentiable (double backward through the recurrent layers is not supported). The
    arguments are those of the signature: output gradients (zeros where an output got none), the
    forward's inputs, its output and workspace; gradients of absent biases are None.
    """
    op.front(fn)
    return fn


_lstm_layer_backward = _backward_front(LSTM_LAYER_BACKWARD, 7)
_gru_layer_backward = _backward_front(GRU_LAYER_BACKWARD, 6)
_rnn_layer_backward = _backward_front(RNN_LAYER_BACKWARD, 6)


# --- cells -------------------------------------------------------------------------------------------
def _cell_args(name, input, hs, w_ih, w_hh, b_ih, b_hh, gates):
    check_tensor(input, "input", name)
    for h in hs:
        check_tensor(h, "hx", name)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{name}(): Expected input to be 1D or 2D, got {input.ndim}D instead")
    if (b_ih is None) != (b_hh is None):
        raise RuntimeError(f"{name}(): b_ih and b_hh must both be given or both be None")
    _check_weights(name, input.dtype, input.shape[:-1], input.shape[-1], hs, w_ih, w_hh, b_ih, b_hh, gates)
    common_device(input, w_ih)
    x = input._data
    x = x[None, None] if x.ndim == 1 else x[None]
    return x, tuple(h._data if h.ndim == 2 else h._data[None] for h in hs)


@LSTM_CELL.front
def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None):
    """One LSTM step: ``(h', c')`` from ``input`` and ``hx = (h, c)`` (torch's gate order i, f, g, o).

    Args:
        input: ``(B, input_size)`` or unbatched ``(input_size,)``.
        hx: a pair ``(h, c)`` of ``(B, hidden_size)`` (or ``(hidden_size,)``) tensors.
        w_ih: ``(4 * hidden_size, input_size)``; w_hh: ``(4 * hidden_size, hidden_size)``.
        b_ih, b_hh: ``(4 * hidden_size,)`` biases, or both None.

    Returns:
        ``(h', c')`` of the shape of ``h``.
    """
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise RuntimeError("lstm_cell(): hx must be a pair (h, c) of tensors")
    h, c = hx
    x, (h0, c0) = _cell_args("lstm_cell", input, (h, c), w_ih, w_hh, b_ih, b_hh, 4)
    dev = input._device
    res = LSTM_CELL.kernel(dev.type)(x, h0, c0, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh), False)
    shape = h.shape
    out = (_wrap(res[1].reshape(shape), dev), _wrap(res[2].reshape(shape), dev))
    if _any_grad(input, h, c, w_ih, w_hh, b_ih, b_hh):
        record(LSTM_CELL, (input, (h, c), w_ih, w_hh, b_ih, b_hh),
               {"gates": _wrap(res[3], dev), "cells": _wrap(res[4], dev), "tanh_cells": _wrap(res[5], dev),
                "output": _wrap(res[0], dev)}, out)
    return out


@GRU_CELL.front
def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:
    """One GRU step (torch's gates r, z, n; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``).

    Args:
        input: ``(B, input_size)`` or unbatched ``(input_size,)``.
        hx: ``(B, hidden_size)`` (or ``(hidden_size,)``) hidden state.
        w_ih: ``(3 * hidden_size, input_size)``; w_hh: ``(3 * hidden_size, hidden_size)``.
        b_ih, b_hh: ``(3 * hidden_size,)`` biases, or both None.

    Returns:
        ``h' = (1 - z) * n + z * h``, of the shape of ``hx``.
    """
    x, (h0,) = _cell_args("gru_cell", input, (hx,), w_ih, w_hh, b_ih, b_hh, 3)
    dev = input._device
    res = GRU_CELL.kernel(dev.type)(x, h0, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh), False)
    out = _wrap(res[1].reshape(hx.shape), dev)
    if _any_grad(input, hx, w_ih, w_hh, b_ih, b_hh):
        record(GRU_CELL, (input, hx, w_ih, w_hh, b_ih, b_hh),
               {"gates": _wrap(res[2], dev), "output": _wrap(res[0], dev)}, out)
    return out


def _rnn_cell(op, nonlinearity):
    def fn(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:
        x, (h0,) = _cell_args(op.name, input, (hx,), w_ih, w_hh, b_ih, b_hh, 1)
        dev = input._device
        res = op.kernel(dev.type)(x, h0, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh), nonlinearity, False)
        out = _wrap(res[1].reshape(hx.shape), dev)
        if _any_grad(input, hx, w_ih, w_hh, b_ih, b_hh):
            record(op, (input, hx, w_ih, w_hh, b_ih, b_hh), {"output": _wrap(res[0], dev)}, out)
        return out

    fn.__doc__ = f"""One Elman RNN step: ``h' = {nonlinearity}(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``.

    Args:
        input: ``(B, input_size)`` or unbatched ``(input_size,)``.
        hx: ``(B, hidden_size)`` (or ``(hidden_size,)``) hidden state.
        w_ih: ``(hidden_size, input_size)``; w_hh: ``(hidden_size, hidden_size)``.
        b_ih, b_hh: ``(hidden_size,)`` biases, or both None.

    Returns:
        ``h'`` of the shape of ``hx``.
    """
    return op.front(fn)


rnn_tanh_cell = _rnn_cell(RNN_TANH_CELL, "tanh")
rnn_relu_cell = _rnn_cell(RNN_RELU_CELL, "relu")
