"""CUDA kernels of the recurrent layers and cells declared in ``flambeau/_ops/rnn.py``.

Conventions: those of the CPU kernels (``flambeau/_kernels/cpu/rnn.py``); float32 and float64.
A layer's input projection of every step is one batched GEMM (``linalg.matmul``); each step adds
one ``h @ W_hh^T`` GEMM and ONE fused kernel (one thread per (batch row, hidden unit)) that adds
the biases, applies the gate nonlinearities and updates the state, saving the activated gates
(and LSTM's cells and their tanh) for the backward. The backward runs the steps in reverse, one
fused kernel and one GEMM per step, and finishes with one GEMM per weight (the bias gradients are
``ones @ dG``: column sums in a fixed order). A cell runs its layer's kernel over a one-step
sequence. Step ``t`` of a ``(T, B, n)`` array is addressed by its element offset ``t * B * n``.

Note [Step GEMMs]
    A step's GEMM has the shape and layout of every other step's; only the address of its rows moves.
    Through ``linalg.matmul`` each cost tens of microseconds of host time (a view, the batch analysis,
    the layouts, an allocation), which an LSTM language model paid 140 times a training step, while the
    GPU waited. :class:`_StepGemm` works the product out once per layer call (``_cublas.prepare``) and
    writes every step's result into one buffer: the step's kernel reads it before the next step's GEMM
    overwrites it, as one stream runs them in order. Without cuBLAS (the simulator), ``matmul``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import from_numpy_dtype, np_name
from flambeau._kernels.cuda import _cublas
from flambeau._kernels.cuda._launch import be, bind_numba_cuda, elem_strides, jit, launch_1d, launch_keyed, sim, stream
from flambeau._kernels.cuda.conv import contig, mT, view
from flambeau._kernels.cuda.core import contiguous as core_contiguous
from flambeau._kernels.cuda.core import copy_into
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._kernels.cuda.linalg import matmul
from flambeau._ops._registry import kernel

__all__ = ["lstm_layer", "lstm_layer_backward", "gru_layer", "gru_layer_backward", "rnn_layer",
           "rnn_layer_backward", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)


# --- fused step kernels ----------------------------------------------------------------------------------
def _get3(a, i, H):
    """The three gate values of unit ``i`` in a row of gates ``[r | z | n]`` (each ``H`` long)."""
    return a[i], a[i + H], a[i + 2 * H]


def _get4(a, i, H):
    return a[i], a[i + H], a[i + 2 * H], a[i + 3 * H]


def _put3(a, i, H, v0, v1, v2):
    a[i] = v0
    a[i + H] = v1
    a[i + 2 * H] = v2


def _sigmoid(x, one):
    return one / (one + math.exp(-x))


@functools.cache
def _device_fns():
    """The device functions of the step kernels: get3, get4, put3, put4, sigmoid."""
    bind_numba_cuda(globals())
    put3 = cuda.jit(device=True)(_put3)

    def put4(a, i, H, v0, v1, v2, v3):
        put3(a, i, H, v0, v1, v2)
        a[i + 3 * H] = v3

    return (cuda.jit(device=True)(_get3), cuda.jit(device=True)(_get4), put3, cuda.jit(device=True)(put4),
            cuda.jit(device=True)(_sigmoid))


def _lstm_fwd_py(acc):
    """``gates[t]`` holds the input projection; it becomes the activated i, f, g, o; writes c_t, tanh c_t, h_t."""
    bind_numba_cuda(globals())
    _, get4, _, put4, sigmoid = _device_fns()

    def lstm_fwd(gates, goff, gh, bih, bhh, has_bias, cprev, cpoff, out, cells, tcs, ooff, H, n):
        idx = cuda.grid(1)
        step = cuda.gridsize(1)
        one = acc(1)
        while idx < n:
            b = idx // H
            j = idx - b * H
            gb = goff + b * 4 * H + j
            v0, v1, v2, v3 = get4(gates, gb, H)
            if has_bias:
                b0, b1, b2, b3 = get4(bih, j, H)
                c0, c1, c2, c3 = get4(bhh, j, H)
                v0, v1, v2, v3 = v0 + (b0 + c0), v1 + (b1 + c1), v2 + (b2 + c2), v3 + (b3 + c3)
            h0, h1, h2, h3 = get4(gh, b * 4 * H + j, H)
            i = sigmoid(v0 + h0, one)
            f = sigmoid(v1 + h1, one)
            g = math.tanh(v2 + h2)
            o = sigmoid(v3 + h3, one)
            c = f * cprev[cpoff + idx] + i * g
            tc = math.tanh(c)
            put4(gates, gb, H, i, f, g, o)
            cells[ooff + idx] = c
            tcs[ooff + idx] = tc
            out[ooff + idx] = o * tc
            idx += step

    return lstm_fwd


def _lstm_bwd_py(acc):
    """``dh = mm + g_out[t]``; writes the pre-activation gradients ``dg[t]`` and updates ``dc`` to c_{t-1}'s."""
    bind_numba_cuda(globals())
    _, get4, _, put4, _ = _device_fns()

    def lstm_bwd(gates, goff, tcs, cprev, cpoff, mm, gout, ooff, dc, dg, H, n):
        idx = cuda.grid(1)
        step = cuda.gridsize(1)
        one = acc(1)
        while idx < n:
            b = idx // H
            gb = goff + b * 4 * H + idx - b * H
            i, f, g, o = get4(gates, gb, H)
            t = tcs[ooff + idx]
            dh = mm[idx] + gout[ooff + idx]
            dct = dc[idx] + dh * o * (one - t * t)
            put4(dg, gb, H, dct * g * i * (one - i), dct * cprev[cpoff + idx] * f * (one - f),
                 dct * i * (one - g * g), dh * t * o * (one - o))
            dc[idx] = dct * f
            idx += step

    return lstm_bwd


def _gru_fwd_py(acc):
    """GRU step from the input projection ``gx[t]`` and ``gh = h @ W_hh^T``; ``acts[t]`` = r, z, n, W_hn h + b_hn."""
    bind_numba_cuda(globals())
    get3, _, _, put4, sigmoid = _device_fns()

    def gru_fwd(gx, xoff, gh, bih, bhh, has_bias, hprev, hpoff, out, ooff, acts, aoff, H, n):
        idx = cuda.grid(1)
        step = cuda.gridsize(1)
        one = acc(1)
        while idx < n:
            b = idx // H
            j = idx - b * H
            x0, x1, x2 = get3(gx, xoff + b * 3 * H + j, H)
            h0, h1, h2 = get3(gh, b * 3 * H + j, H)
            if has_bias:
                b0, b1, b2 = get3(bih, j, H)
                c0, c1, c2 = get3(bhh, j, H)
                x0, x1, x2, h0, h1, h2 = x0 + b0, x1 + b1, x2 + b2, h0 + c0, h1 + c1, h2 + c2
            r = sigmoid(x0 + h0, one)
            z = sigmoid(x1 + h1, one)
            nn = math.tanh(x2 + r * h2)
            put4(acts, aoff + b * 4 * H + j, H, r, z, nn, h2)
            out[ooff + idx] = (one - z) * nn + z * hprev[hpoff + idx]
            idx += step

    return gru_fwd


def _gru_bwd_py(acc):
    """``d = dz + mm + g_out[t]``; writes ``dgx[t]``, ``dgh[t]`` and ``dz = d * z`` (h_{t-1}'s direct part)."""
    bind_numba_cuda(globals())
    _, get4, put3, _, _ = _device_fns()

    def gru_bwd(acts, aoff, hprev, gout, ooff, dz, mm, dgx, dgh, xoff, H, n):
        idx = cuda.grid(1)
        step = cuda.gridsize(1)
        one = acc(1)
        while idx < n:
            b = idx // H
            j = idx - b * H
            r, z, nn, hn = get4(acts, aoff + b * 4 * H + j, H)
            d = dz[idx] + mm[idx] + gout[ooff + idx]
            dpn = d * (one - z) * (one - nn * nn)
            dpr = dpn * hn * r * (one - r)
            dpz = d * (hprev[ooff + idx] - nn) * z * (one - z)
            xb = xoff + b * 3 * H + j
            put3(dgx, xb, H, dpr, dpz, dpn)
            put3(dgh, xb, H, dpr, dpz, dpn * r)
            dz[idx] = d * z
            idx += step

    return gru_bwd


def _rnn_fwd_py(acc):
    """Elman step in place: ``pre[t] = tanh|relu(pre[t] + b_ih + b_hh + mm)``."""
    bind_numba_cuda(globals())

    def rnn_fwd(pre, poff, mm, bih, bhh, has_bias, relu, H, n):
        idx = cuda.grid(1)
        step = cuda.gridsize(1)
        while idx < n:
            j = idx % H
            v = pre[poff + idx]
            if has_bias:
                v += bih[j] + bhh[j]
            v += mm[idx]
            if relu:
                v = v if v > 0 else acc(0)
            else:
                v = math.tanh(v)
            pre[poff + idx] = v
            idx += step

    return rnn_fwd


def _rnn_bwd_py(acc):
    """``dp[t] = (mm + g_out[t]) * act'`` from the step's output."""
    bind_numba_cuda(globals())

    def rnn_bwd(out, ooff, mm, gout, relu, dp, n):
        idx = cuda.grid(1)
        step = cuda.gridsize(1)
        one = acc(1)
        while idx < n:
            d = mm[idx] + gout[ooff + idx]
            o = out[ooff + idx]
            if relu:
                dp[ooff + idx] = d if o > 0 else acc(0)
            else:
                dp[ooff + idx] = d * (one - o * o)
            idx += step

    return rnn_bwd


# Note [Whole-sequence LSTM kernels]
#     With a small hidden size a step's work is a few microseconds of GPU time, and the step loop's host
#     time (a GEMM and a kernel launch per step, tens of microseconds each from Python) is what a training
#     step takes: an LSTM language model of hidden size 256 waited for the host 4x longer than torch's step,
#     which runs the sequence through cuDNN in a few calls. Where the hidden size is at most SEQ_MAX_HIDDEN,
#     one launch runs a layer's whole sequence, forward or backward: block ``b`` owns batch row ``b`` and
#     thread ``j`` hidden unit ``j``; the row's state stays in shared memory (``h``, or ``dh`` and the step's
#     gate gradients) and registers (``c``, ``dc``), and the recurrent product is computed in the block, each
#     thread's dot products reading a column of the recurrent weights (coalesced across the block's threads:
#     the forward reads ``W_hh^T``, the backward ``W_hh``, both C-contiguous). The rows never meet, so no block
#     waits for another. The input projection and the weight gradients stay one batched GEMM each, and the
#     arithmetic and what is saved for the backward are the step kernels': the backward of either path takes
#     the other's saved tensors. Every block reads the recurrent weights once per time step (1 MiB at hidden
#     size 256, mostly from L2) where the step loop's GEMM reads them once per step for all rows: a block's step
#     lasts at least as long as one multiprocessor takes to read them, which bounds the hidden size this suits.
SEQ_MAX_HIDDEN = 256  # hidden sizes up to which a layer's sequence runs in one launch (tests lower it: 0, the steps)
_SEQ_SHARED = 256  # the hidden size the kernels' shared arrays hold (fixed when compiled: SEQ_MAX_HIDDEN stays below)


def _row_start(shared, s_src, r_src, b, j, H, zero):
    """Thread ``j``'s start of batch row ``b``: unit ``j`` of ``s_src`` into ``shared``; returns that of ``r_src``
    (``zero`` for the threads past the hidden units)."""
    if j < H:
        shared[j] = s_src[b * H + j]
        return r_src[b * H + j]
    return zero


@functools.cache
def _row_start_fn():
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_row_start)


def _lstm_seq_fwd_py(acc):
    """The whole sequence of an LSTM layer (Note [Whole-sequence LSTM kernels]): ``gates`` holds the input
    projection of every step and becomes the activated i, f, g, o; writes ``out``, ``cells``, ``tcs``."""
    bind_numba_cuda(globals())
    _, get4, _, put4, sigmoid = _device_fns()
    row_start = _row_start_fn()
    M = _SEQ_SHARED

    def lstm_seq_fwd(gates, bih, bhh, has_bias, wt, h0, c0, out, cells, tcs, T, B, H, reverse):
        b = cuda.blockIdx.x
        j = cuda.threadIdx.x
        hs = cuda.shared.array(M, acc)
        one = acc(1)
        G = 4 * H
        c = row_start(hs, h0, c0, b, j, H, acc(0))
        cuda.syncthreads()
        for s in range(T):
            t = T - 1 - s if reverse else s
            hn = acc(0)
            if j < H:
                gb = (t * B + b) * G + j
                v0, v1, v2, v3 = get4(gates, gb, H)
                if has_bias:
                    b0, b1, b2, b3 = get4(bih, j, H)
                    c0_, c1, c2, c3 = get4(bhh, j, H)
                    v0, v1, v2, v3 = v0 + (b0 + c0_), v1 + (b1 + c1), v2 + (b2 + c2), v3 + (b3 + c3)
                s0 = s1 = s2 = s3 = acc(0)
                for k in range(H):
                    hk = hs[k]
                    w0, w1, w2, w3 = get4(wt, k * G + j, H)
                    s0 += hk * w0
                    s1 += hk * w1
                    s2 += hk * w2
                    s3 += hk * w3
                i = sigmoid(v0 + s0, one)
                f = sigmoid(v1 + s1, one)
                g = math.tanh(v2 + s2)
                o = sigmoid(v3 + s3, one)
                c = f * c + i * g
                tc = math.tanh(c)
                put4(gates, gb, H, i, f, g, o)
                oi = (t * B + b) * H + j
                cells[oi] = c
                tcs[oi] = tc
                hn = o * tc
                out[oi] = hn
            cuda.syncthreads()  # every thread has read h_{t-1}
            if j < H:
                hs[j] = hn
            cuda.syncthreads()

    return lstm_seq_fwd


def _lstm_seq_bwd_py(acc):
    """The backward of :func:`_lstm_seq_fwd_py` over the whole sequence: writes the pre-activation gradients
    ``dg`` of every step, and the gradients of ``h0`` and ``c0`` from ``g_h`` and ``g_c`` (those of h_n, c_n)."""
    bind_numba_cuda(globals())
    _, get4, _, put4, _ = _device_fns()
    row_start = _row_start_fn()
    M, M4 = _SEQ_SHARED, 4 * _SEQ_SHARED  # (constants: shared arrays' sizes are fixed when compiled)

    def lstm_seq_bwd(gates, tcs, cells, c0, gout, g_h, g_c, w, dg, gh0, gc0, T, B, H, reverse):
        b = cuda.blockIdx.x
        j = cuda.threadIdx.x
        dgs = cuda.shared.array(M4, acc)
        dhs = cuda.shared.array(M, acc)
        one = acc(1)
        G = 4 * H
        dc = row_start(dhs, g_h, g_c, b, j, H, acc(0))
        cuda.syncthreads()
        for s in range(T):
            t = s if reverse else T - 1 - s  # the forward's steps, last first
            p = t + 1 if reverse else t - 1  # the step before t in the forward's order
            if j < H:
                oi = (t * B + b) * H + j
                gb = (t * B + b) * G + j
                i, f, g, o = get4(gates, gb, H)
                tt = tcs[oi]
                dh = dhs[j] + gout[oi]
                dct = dc + dh * o * (one - tt * tt)
                cprev = c0[b * H + j] if p < 0 or p >= T else cells[(p * B + b) * H + j]
                d0 = dct * g * i * (one - i)
                d1 = dct * cprev * f * (one - f)
                d2 = dct * i * (one - g * g)
                d3 = dh * tt * o * (one - o)
                put4(dg, gb, H, d0, d1, d2, d3)
                put4(dgs, j, H, d0, d1, d2, d3)
                dc = dct * f
            cuda.syncthreads()  # the step's gate gradients are all in dgs
            m = acc(0)
            if j < H:
                for r in range(G):
                    m += dgs[r] * w[r * H + j]
            cuda.syncthreads()  # every thread has read dgs
            if j < H:
                dhs[j] = m
        if j < H:
            gh0[b * H + j] = dhs[j]
            gc0[b * H + j] = dc

    return lstm_seq_bwd


_TEMPLATES = {"lstm_fwd": _lstm_fwd_py, "lstm_bwd": _lstm_bwd_py, "gru_fwd": _gru_fwd_py, "gru_bwd": _gru_bwd_py,
              "rnn_fwd": _rnn_fwd_py, "rnn_bwd": _rnn_bwd_py, "lstm_seq_fwd": _lstm_seq_fwd_py,
              "lstm_seq_bwd": _lstm_seq_bwd_py}


@functools.cache
def _kernel(name: str, dtype: str):
    bind_numba_cuda(globals())
    return jit(_TEMPLATES[name](np.dtype(dtype).type))


def _stepper(name: str, dtype, n: int, hw: _StepGemm, arrays: tuple):
    """The launcher of step kernel ``name`` over ``n`` elements, worked out once per layer call: ``launch(*args)``.
    The arguments are flat views and Python ints and bools, in an order each kernel fixes: the arrays' dtypes
    fix the argument types, and key the launch (``launch_keyed``), which spares typing a dozen arguments at
    every time step. ``arrays``: every array the loop passes but ``hw``'s products. Where ``hw`` writes them all
    into one buffer, they are checked once to be of ``dtype`` and the key is worked out on the first launch
    only; otherwise (a new product array every step) at every launch."""
    if not n:
        return lambda *args: None
    kernel = _kernel(name, np_name(dtype))
    grid, block = launch_1d(n)
    config = (grid, block, stream())
    if hw.flat_out is None:
        def launch(*args) -> None:
            launch_keyed(kernel, config, _launch_key(args), *args, n)

        return launch
    # (the fronts check the dtypes: a kernel's keys must not rest on that unchecked)
    _check_dtypes(name, dtype, [a.dtype for a in (*arrays, hw.flat_out)])
    keys: list = []

    def launch_fixed(*args) -> None:
        if not keys:
            keys.append(_launch_key(args))
        launch_keyed(kernel, config, keys[0], *args, n)

    return launch_fixed


# --- helpers -----------------------------------------------------------------------------------------------
def _whole_sequence(nt: int, nb: int, H: int) -> bool:
    """Whether an LSTM layer's sequence runs in one launch (Note [Whole-sequence LSTM kernels])."""
    return nt > 0 and nb > 0 and 0 < H <= min(SEQ_MAX_HIDDEN, _SEQ_SHARED)


def _launch_sequence(name: str, dtype, nb: int, H: int, *args) -> None:
    """Launch whole-sequence kernel ``name``: a block per batch row, a thread per hidden unit (whole warps on a
    GPU). The arguments are flat views of ``dtype`` and Python ints and bools: their dtypes key the launch."""
    key = _launch_key(args)
    _check_dtypes(name, dtype, key)
    block = H if sim() else (H + 31) // 32 * 32
    launch_keyed(_kernel(name, np_name(dtype)), (nb, block, stream()), key, *args)


def _launch_key(args) -> tuple:
    """The launch key of a recurrent kernel's arguments (flat views, Python ints and bools, in an order the
    kernel fixes): the arrays' dtypes."""
    return tuple([a.dtype for a in args if a.__class__ is not int and a.__class__ is not bool])


def _check_dtypes(name: str, dtype, dtypes) -> None:
    """RuntimeError unless every one of ``dtypes`` (a launch's arrays') is ``dtype``."""
    for d in dtypes:
        if d != dtype:
            raise RuntimeError(f"{name}: expected arrays of {np.dtype(dtype)}, got one of {d}")


class _StepGemm:
    """``h @ w`` of every step of a layer (Note [Step GEMMs]): ``h`` the ``(nb, K)`` C-contiguous rows at an
    element offset of a flat array, ``w`` a fixed ``(K, N)`` device array (any strides). A call with ``(flat, offset)``
    returns the ``(nb, N)`` product and its flat view, in one buffer reused by every call where cuBLAS runs it."""

    __slots__ = ("w", "nb", "K", "gemm", "out", "flat_out", "ptr", "pw", "pout", "item")

    def __init__(self, w, nb: int, dtype):
        self.w, self.nb = w, nb
        self.K, N = w.shape
        self.gemm = None if sim() else _cublas.prepare(dtype, (self.K, 1), elem_strides(w), nb, N, self.K, stream())
        self.flat_out = None  # (the product's flat view where every call returns the same one)
        if self.gemm is not None:
            backend = be()
            self.out = backend.empty((nb, N), dtype)
            self.flat_out = backend.flat_view(self.out)
            self.ptr = backend.data_ptr
            self.pw, self.pout, self.item = self.ptr(w), self.ptr(self.out), np.dtype(dtype).itemsize

    def __call__(self, h_flat, offset: int) -> tuple:
        if self.gemm is None:
            out = matmul(view(h_flat, (self.nb, self.K), (self.K, 1), offset), self.w)
            return out, be().flat_view(out)
        self.gemm(self.ptr(h_flat) + offset * self.item, self.pw, self.pout)
        return self.out, self.flat_out


def _steps(t, reverse):
    return range(t - 1, -1, -1) if reverse else range(t)


def _state(a, t, B, H):
    """Step ``t`` of a contiguous ``(T, B, H)`` array, as a ``(B, H)`` view."""
    return view(a, (B, H), (H, 1), t * B * H)


def _prev(t, nt, reverse):
    """The step before ``t`` in the direction's order, or None at its start."""
    p = t + 1 if reverse else t - 1
    return p if 0 <= p < nt else None


def _bias_args(b_ih, b_hh, like):
    flat = be().flat_view
    if b_ih is None:
        return flat(like), flat(like), False
    return flat(contig(b_ih)), flat(contig(b_hh)), True


def _previous_states(h0, out, reverse):
    """``h_{t-1}`` for every step t, in time order (``h0`` where the direction starts), contiguous."""
    nt, B, H = out.shape
    hprev = be().empty(out.shape, out.dtype)
    if nt:
        copy_into(_state(hprev, nt - 1 if reverse else 0, B, H), h0)
    if nt > 1:
        shape, st = (nt - 1, B, H), (B * H, H, 1)
        src, dst = (B * H, 0) if reverse else (0, B * H)
        copy_into(view(hprev, shape, st, dst), view(out, shape, st, src))
    return hprev


def _weight_grads(dgx, dgh, x, hprev, has_bias):
    """``(g_w_ih, g_w_hh, g_b_ih, g_b_hh)`` from the pre-activation gradients ``(T, B, G)`` of every step."""
    nt, nb, G = dgx.shape
    R = nt * nb
    x = contig(x)
    gx2, gh2 = view(dgx, (R, G), (G, 1)), view(dgh, (R, G), (G, 1))
    gw_ih = matmul(mT(gx2), view(x, (R, x.shape[2]), (x.shape[2], 1)))
    gw_hh = matmul(mT(gh2), view(hprev, (R, hprev.shape[2]), (hprev.shape[2], 1)))
    if not has_bias:
        return gw_ih, gw_hh, None, None
    ones = be().full((R,), 1, dgx.dtype)
    gb_ih = matmul(ones, gx2)
    # the two bias gradients are equal when dgh is dgx, but each gets its own memory: they become two
    # .grad tensors, and in-place updates of one (clip_grad_norm_'s mul_) must not reach the other
    return gw_ih, gw_hh, gb_ih, core_contiguous(gb_ih) if dgh is dgx else matmul(ones, gh2)


def _projection(x, w_ih):
    """``x @ w_ih^T`` for every step: ``(T, B, G)`` contiguous."""
    return matmul(x, mT(w_ih))


# --- kernels of the table -----------------------------------------------------------------------------------
@kernel("_lstm_layer", "cuda")
@kernel("lstm_cell", "cuda")
def lstm_layer(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse):
    """CUDA LSTM layer: ``(out, h_n, c_n, gates, cells, tanh_cells)``."""
    backend = be()
    nt, nb, _ = x.shape
    H = w_hh.shape[1]
    dtype = np.dtype(x.dtype)
    flat = backend.flat_view
    gates = _projection(x, w_ih)
    out = backend.empty((nt, nb, H), dtype)
    cells = backend.empty((nt, nb, H), dtype)
    tcs = backend.empty((nt, nb, H), dtype)
    h0, c0 = contig(h0), contig(c0)
    bih, bhh, has_bias = _bias_args(b_ih, b_hh, gates)
    n = nb * H
    f_gates, f_out, f_cells, f_tcs, f_c0, f_h0 = flat(gates), flat(out), flat(cells), flat(tcs), flat(c0), flat(h0)
    if _whole_sequence(nt, nb, H):  # Note [Whole-sequence LSTM kernels]
        _launch_sequence("lstm_seq_fwd", dtype, nb, H, f_gates, bih, bhh, has_bias, flat(contig(mT(w_hh))), f_h0,
                         f_c0, f_out, f_cells, f_tcs, nt, nb, H, bool(reverse))
    else:
        hw = _StepGemm(mT(w_hh), nb, dtype)
        step = _stepper("lstm_fwd", dtype, n, hw, (f_gates, bih, bhh, f_c0, f_cells, f_out, f_tcs))
        for t in _steps(nt, reverse):
            p = _prev(t, nt, reverse)
            cprev, cpoff = (f_c0, 0) if p is None else (f_cells, p * n)
            _, f_gh = hw(f_h0, 0) if p is None else hw(f_out, p * n)
            step(f_gates, t * 4 * n, f_gh, bih, bhh, has_bias, cprev, cpoff,
                 f_out, f_cells, f_tcs, t * n, H)
    if nt == 0:
        return out, _copy(h0), _copy(c0), gates, cells, tcs
    last = 0 if reverse else nt - 1
    return out, _copy(_state(out, last, nb, H)), _copy(_state(cells, last, nb, H)), gates, cells, tcs


def _copy(a):
    out = be().empty(a.shape, a.dtype)
    copy_into(out, a)
    return out


@kernel("_lstm_layer_backward", "cuda")
def lstm_layer_backward(g_out, g_h, g_c, x, h0, c0, w_ih, w_hh, out, gates, cells, tcs, reverse, has_bias):
    """CUDA backward of the LSTM layer: ``(g_x, g_h0, g_c0, g_w_ih, g_w_hh, g_b_ih, g_b_hh)``."""
    backend = be()
    flat = backend.flat_view
    nt, nb, H = out.shape
    dtype = np.dtype(out.dtype)
    n = nb * H
    g_out, gates, cells, tcs = contig(g_out), contig(gates), contig(cells), contig(tcs)
    c0 = contig(c0)
    dg = backend.empty((nt, nb, 4 * H), dtype)
    if _whole_sequence(nt, nb, H):  # Note [Whole-sequence LSTM kernels]
        mm, dc = backend.empty((nb, H), dtype), backend.empty((nb, H), dtype)
        _launch_sequence("lstm_seq_bwd", dtype, nb, H, *(flat(a) for a in (gates, tcs, cells, c0, g_out)),
                         flat(contig(g_h)), flat(contig(g_c)), flat(contig(w_hh)), flat(dg), flat(mm), flat(dc),
                         nt, nb, H, bool(reverse))
    else:
        mm = contig(g_h)
        dc = _copy(g_c)
        f_gates, f_tcs, f_cells, f_c0, f_g_out, f_dc, f_dg = (flat(a) for a in (gates, tcs, cells, c0, g_out, dc, dg))
        hw = _StepGemm(w_hh, nb, dtype)
        f_mm = flat(mm)
        step = _stepper("lstm_bwd", dtype, n, hw, (f_gates, f_tcs, f_c0, f_cells, f_mm, f_g_out, f_dc, f_dg))
        for t in reversed(list(_steps(nt, reverse))):
            p = _prev(t, nt, reverse)
            cprev, cpoff = (f_c0, 0) if p is None else (f_cells, p * n)
            step(f_gates, t * 4 * n, f_tcs, cprev, cpoff, f_mm, f_g_out, t * n, f_dc, f_dg, H)
            mm, f_mm = hw(f_dg, t * 4 * n)
    gx = matmul(dg, w_ih)
    gw_ih, gw_hh, gb_ih, gb_hh = _weight_grads(dg, dg, x, _previous_states(contig(h0), out, reverse), has_bias)
    return gx, mm if nt else _copy(mm), dc, gw_ih, gw_hh, gb_ih, gb_hh


@kernel("_gru_layer", "cuda")
@kernel("gru_cell", "cuda")
def gru_layer(x, h0, w_ih, w_hh, b_ih, b_hh, reverse):
    """CUDA GRU layer: ``(out, h_n, gates)`` (``gates`` r, z, n and ``W_hn h + b_hn``)."""
    backend = be()
    flat = backend.flat_view
    nt, nb, _ = x.shape
    H = w_hh.shape[1]
    dtype = np.dtype(x.dtype)
    n = nb * H
    gx = _projection(x, w_ih)
    out = backend.empty((nt, nb, H), dtype)
    acts = backend.empty((nt, nb, 4 * H), dtype)
    h0 = contig(h0)
    bih, bhh, has_bias = _bias_args(b_ih, b_hh, gx)
    f_gx, f_out, f_acts, f_h0 = flat(gx), flat(out), flat(acts), flat(h0)
    hw = _StepGemm(mT(w_hh), nb, dtype)
    step = _stepper("gru_fwd", dtype, n, hw, (f_gx, bih, bhh, f_h0, f_out, f_acts))
    for t in _steps(nt, reverse):
        p = _prev(t, nt, reverse)
        hprev, hpoff = (f_h0, 0) if p is None else (f_out, p * n)
        _, f_gh = hw(hprev, hpoff)
        step(f_gx, t * 3 * n, f_gh, bih, bhh, has_bias, hprev, hpoff, f_out, t * n, f_acts,
              t * 4 * n, H)
    last = 0 if reverse else nt - 1
    return out, _copy(h0 if nt == 0 else _state(out, last, nb, H)), acts


_add = binary_launcher("add")


@kernel("_gru_layer_backward", "cuda")
def gru_layer_backward(g_out, g_h, x, h0, w_ih, w_hh, out, acts, reverse, has_bias):
    """CUDA backward of the GRU layer: ``(g_x, g_h0, g_w_ih, g_w_hh, g_b_ih, g_b_hh)``."""
    backend = be()
    flat = backend.flat_view
    nt, nb, H = out.shape
    dtype = np.dtype(out.dtype)
    n = nb * H
    g_out, acts = contig(g_out), contig(acts)
    hprev = _previous_states(contig(h0), out, reverse)
    dgx = backend.empty((nt, nb, 3 * H), dtype)
    dgh = backend.empty((nt, nb, 3 * H), dtype)
    dz = _copy(g_h)
    mm = backend.full((nb, H), 0, dtype)
    f_acts, f_hprev, f_g_out, f_dz, f_dgx, f_dgh = (flat(a) for a in (acts, hprev, g_out, dz, dgx, dgh))
    hw = _StepGemm(w_hh, nb, dtype)
    f_mm = flat(mm)
    step = _stepper("gru_bwd", dtype, n, hw, (f_acts, f_hprev, f_g_out, f_dz, f_mm, f_dgx, f_dgh))
    for t in reversed(list(_steps(nt, reverse))):
        step(f_acts, t * 4 * n, f_hprev, f_g_out, t * n, f_dz, f_mm, f_dgx, f_dgh, t * 3 * n, H)
        mm, f_mm = hw(f_dgh, t * 3 * n)
    _add(dz, mm, from_numpy_dtype(dtype), out=dz)
    gx = matmul(dgx, w_ih)
    gw_ih, gw_hh, gb_ih, gb_hh = _weight_grads(dgx, dgh, x, hprev, has_bias)
    return gx, dz, gw_ih, gw_hh, gb_ih, gb_hh


@kernel("_rnn_layer", "cuda")
@kernel("rnn_tanh_cell", "cuda")
@kernel("rnn_relu_cell", "cuda")
def rnn_layer(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse):
    """CUDA Elman RNN layer (tanh or relu): ``(out, h_n)``."""
    flat = be().flat_view
    nt, nb, _ = x.shape
    H = w_hh.shape[1]
    dtype = np.dtype(x.dtype)
    n = nb * H
    pre = _projection(x, w_ih)
    h0 = contig(h0)
    bih, bhh, has_bias = _bias_args(b_ih, b_hh, pre)
    relu = nonlinearity == "relu"
    f_pre, f_h0 = flat(pre), flat(h0)
    hw = _StepGemm(mT(w_hh), nb, dtype)
    step = _stepper("rnn_fwd", dtype, n, hw, (f_pre, bih, bhh))
    for t in _steps(nt, reverse):
        p = _prev(t, nt, reverse)
        _, f_mm = hw(f_h0, 0) if p is None else hw(f_pre, p * n)
        step(f_pre, t * n, f_mm, bih, bhh, has_bias, relu, H)
    last = 0 if reverse else nt - 1
    return pre, _copy(h0 if nt == 0 else _state(pre, last, nb, H))


@kernel("_rnn_layer_backward", "cuda")
def rnn_layer_backward(g_out, g_h, x, h0, w_ih, w_hh, out, nonlinearity, reverse, has_bias):
    """CUDA backward of the Elman RNN layer: ``(g_x, g_h0, g_w_ih, g_w_hh, g_b_ih, g_b_hh)``."""
    backend = be()
    flat = backend.flat_view
    nt, nb, H = out.shape
    dtype = np.dtype(out.dtype)
    n = nb * H
    g_out, out = contig(g_out), contig(out)
    dp = backend.empty((nt, nb, H), dtype)
    mm = contig(g_h)
    relu = nonlinearity == "relu"
    f_out, f_g_out, f_dp = flat(out), flat(g_out), flat(dp)
    hw = _StepGemm(w_hh, nb, dtype)
    f_mm = flat(mm)
    step = _stepper("rnn_bwd", dtype, n, hw, (f_out, f_mm, f_g_out, f_dp))
    for t in reversed(list(_steps(nt, reverse))):
        step(f_out, t * n, f_mm, f_g_out, relu, f_dp)
        mm, f_mm = hw(f_dp, t * n)
    gx = matmul(dp, w_ih)
    gw_ih, gw_hh, gb_ih, gb_hh = _weight_grads(dp, dp, x, _previous_states(contig(h0), out, reverse), has_bias)
    return gx, mm if nt else _copy(mm), gw_ih, gw_hh, gb_ih, gb_hh


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of every step kernel for float32 and float64."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64, b = types.int64, types.boolean
    cases = []
    for dn in ("float32", "float64"):
        a = types.Array(from_dtype(np.dtype(dn)), 1, "C")
        sigs = {"lstm_fwd": (a, i64, a, a, a, b, a, i64, a, a, a, i64, i64, i64),
                "lstm_bwd": (a, i64, a, a, i64, a, a, i64, a, a, i64, i64),
                "gru_fwd": (a, i64, a, a, a, b, a, i64, a, i64, a, i64, i64, i64),
                "gru_bwd": (a, i64, a, a, i64, a, a, a, a, i64, i64, i64),
                "rnn_fwd": (a, i64, a, a, a, b, b, i64, i64),
                "rnn_bwd": (a, i64, a, a, b, a, i64),
                "lstm_seq_fwd": (a, a, a, b, a, a, a, a, a, a, i64, i64, i64, b),
                "lstm_seq_bwd": (a, a, a, a, a, a, a, a, a, a, a, i64, i64, i64, b)}
        for name, sig in sigs.items():
            cases.append((f"rnn:{name}:{dn}", _TEMPLATES[name](np.dtype(dn).type), sig))
    return cases
