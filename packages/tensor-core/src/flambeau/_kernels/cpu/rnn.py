"""CPU kernels of the recurrent layers and cells declared in ``flambeau/_ops/rnn.py``.

The GEMMs run through BLAS (``np.matmul``); the gate nonlinearities and the state update run in
one fused numba pass per step, forward and backward (the gate activations are saved, never
recomputed). A layer's input projection of every step is one GEMM, each step adds one
``h @ W_hh.T`` GEMM and one fused pass; the backward runs the steps in reverse and finishes with
one GEMM per weight. A cell runs its layer's kernel over a one-step sequence.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._blas import single_threaded_blas
from flambeau._ops._registry import kernel

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

    from flambeau._kernels.cpu._fast_exp import expf_helpers

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


def _recurrent_weight(w_hh, steps: int):
    """``w_hh.T`` for the steps' ``h @ W_hh.T``: a C-ordered copy when several steps read it (BLAS runs a
    transposed B 17% slower: a 2-layer LSTM over 50 steps 51-56 -> 45-47 ms), the view for a cell's one step."""
    return np.ascontiguousarray(w_hh.T) if steps > 2 else w_hh.T


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


@kernel("_lstm_layer", "cpu")
@kernel("lstm_cell", "cpu")
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
    whT = _recurrent_weight(w_hh, x.shape[0])
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


@kernel("_lstm_layer_backward", "cpu")
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
    # the two bias gradients are equal, but each needs its own memory: autograd makes each a .grad, and an
    # in-place update of one (clip_grad_norm_'s mul_) must not reach the other
    return gx, dh, dc, gw_ih, gw_hh, gb, None if gb is None else gb.copy()


@kernel("_gru_layer", "cpu")
@kernel("gru_cell", "cpu")
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
    whT = _recurrent_weight(w_hh, x.shape[0])
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


@kernel("_gru_layer_backward", "cpu")
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


@kernel("_rnn_layer", "cpu")
@kernel("rnn_tanh_cell", "cpu")
@kernel("rnn_relu_cell", "cpu")
def _k_rnn_layer(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse):
    nt = x.shape[0]
    pre = _input_projection(x, w_ih, b_ih, b_hh)
    whT = _recurrent_weight(w_hh, x.shape[0])
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


@kernel("_rnn_layer_backward", "cpu")
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
    return gx, dh, gw_ih, gw_hh, gb, None if gb is None else gb.copy()  # (own memory for each, as the LSTM's)

