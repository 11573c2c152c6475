"""CUDA kernels of the loss operators (see flambeau._kernels.cpu.loss and the convention in flambeau._ops.loss).

Class-index losses address their input as *rows*: a row is one target element (``M`` of them,
unravelled over ``kshape``, the target's shape) and its ``C`` class scores ``cs`` apart, at any
strides. ``cross_entropy`` runs one block per row, fusing log-softmax and the loss: the row maximum,
then ``sum(exp(x - max))`` (and, with label smoothing, the weight sums) reduced in shared memory
(the block reductions of ``nn_ops``), keeping only the row's log-sum-exp for backward; its backward
is one more block per row writing ``softmax - target`` with weights, smoothing and reduction folded
in. ``nll_loss`` and its backward are one thread per row. A target outside ``[0, C)`` that is not
``ignore_index`` is recorded in the device's error flag (Note [Device-side errors] in
``flambeau.cuda._sync``) and contributes nothing; it raises at the next synchronisation.

The element-wise losses are one template over a scalar device function per loss: with
``reduction="none"`` it writes each element, else each block sums its elements in shared memory.
Every reduction ends in :func:`_finish_py`, one block that sums the per-row (or per-block) partials
and the weights and divides for ``"mean"`` on the device: no reduction makes the host wait.
float16 and float32 accumulate in float32, float64 in float64. Out-of-range probabilities of
``binary_cross_entropy`` are reported through the error flag too (``ERR_VALUE``, the flat index of
the first offending element, bound 1).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import np_name
from flambeau._kernels.cuda._launch import (
    ERR_INDEX,
    ERR_VALUE,
    be,
    bind_numba_cuda,
    c_elem_strides,
    elem_strides,
    error_flag,
    jit,
    sim,
    stream,
    strides_for,
)
from flambeau._kernels.cuda.core import copy_into, fill
from flambeau._kernels.cuda.nn_ops import (
    FLOATS,
    ROW_BLOCK,
    acc_dtype,
    block,
    block_sum_fn,
    flag_fn,
    offset_fn,
    row_grid,
    row_max_fn,
)
from flambeau._ops._registry import kernel

__all__ = ["POINTWISE", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

TARGET_DTYPES = ("int64", "uint8")
_MODES = {"none": 0, "sum": 1, "mean": 2}


# --- the final reduction ----------------------------------------------------------------------------
def _finish_py(acc, B):
    """One block: ``tot[0]`` = the sum of ``w[:M]`` (or ``count`` without ``use_w``) and, by ``mode``
    (0 none, 1 sum, 2 mean), ``out[0]`` = the sum of ``part[:M]``, divided by the total for a mean
    (a zero total gives NaN for a zero or NaN sum, else an infinity of its sign, as on the CPU)."""
    bind_numba_cuda(globals())
    bsum = block_sum_fn(B)

    def finish(out, tot, part, w, M, use_w, count, mode):
        t = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        s = acc(0)
        sw = acc(0)
        i = t
        while i < M:
            if mode != 0:
                s += part[i]
            if use_w:
                sw += w[i]
            i += B
        s = bsum(buf, t, s)
        sw = bsum(buf, t, sw)
        if t == 0:
            total = sw if use_w else acc(count)
            tot[0] = total
            if mode == 2:
                if total == 0:
                    r = acc(math.nan) if s == 0 or s != s else acc(math.copysign(math.inf, s))
                else:
                    r = s / total
                out[0] = r
            elif mode == 1:
                out[0] = s

    return finish


@functools.cache
def _finish_kernel(acc: str, B: int):
    bind_numba_cuda(globals())
    return jit(_finish_py(np.dtype(acc).type, B))


def _finish(part, w, M: int, count: float, mode: int, out_dtype, tot_dtype):
    """Launch :func:`_finish_py`: ``(out, tot)`` 0-d device arrays of ``out_dtype`` / ``tot_dtype``."""
    backend = be()
    acc = np.dtype(part.dtype)
    out = backend.empty((), out_dtype)
    tot = backend.empty((), tot_dtype)
    B = block()
    use_w = w is not None
    _finish_kernel(np_name(acc), B)[1, B, stream()](backend.flat_view(out), backend.flat_view(tot), part,
                                                part if w is None else w, M, use_w, acc.type(count), mode)
    return out, tot


# --- helpers ------------------------------------------------------------------------------------------
def _device(arr):
    """A device array for ``arr`` (a 0-dim CPU tensor may join CUDA operands, as in torch)."""
    if isinstance(arr, np.ndarray):
        return be().from_numpy(arr)
    return arr


def _as_dtype(arr, d: np.dtype):
    """Device array ``arr`` in dtype ``d`` (a cast copy where it differs)."""
    arr = _device(arr)
    if arr.dtype == d:
        return arr
    out = be().empty(arr.shape, d)
    copy_into(out, arr)
    return out


def _class_rows(shape: tuple, strides: tuple) -> tuple:
    """``(kshape, row strides, class stride)`` of a ``(C,)``, ``(N, C)`` or ``(N, C, d...)`` layout."""
    if len(shape) == 1:
        return (1,), (0,), strides[0]
    return (shape[0],) + tuple(shape[2:]), (strides[0],) + tuple(strides[2:]), strides[1]


def _row_strides(arr, kshape: tuple) -> tuple:
    """Strides of a per-row array (target, lse, grad of ``reduction="none"``) over ``kshape``."""
    return elem_strides(arr) if arr.ndim else (0,) * len(kshape)


def _check_float(name: str, d) -> np.dtype:
    d = np.dtype(d)
    if d.name not in FLOATS:
        raise RuntimeError(f'"{name}_cuda" not implemented for \'{d.name}\'')
    return d


def _class_weight(weight, acc: np.dtype):
    """``(weight as a contiguous device vector in acc, use_w)``; a dummy vector when there is none."""
    backend = be()
    if weight is None:
        return backend.empty((1,), acc), False
    weight = _device(weight)
    if weight.dtype != acc or weight.ndim != 1 or weight.strides[0] != acc.itemsize:
        w = backend.empty((weight.size,), acc)
        copy_into(w, weight.reshape(-1) if weight.ndim != 1 else weight)
        return w, True
    return weight, True


def _target(target):
    target = _device(target)
    if np.dtype(target.dtype).name not in TARGET_DTYPES:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {np.dtype(target.dtype).name}")
    return target


def _target_class_py():
    bind_numba_cuda(globals())
    flag = flag_fn()

    def target_class(value, ignore, C, err):
        """Target ``value`` as a class index in ``[0, C)``, or -1 where it is ``ignore`` or out of range (the
        latter recorded in the error flag)."""
        ti = np.int64(value)
        if ti == ignore:
            return -1
        if ti < 0 or ti >= C:
            flag(err, ERR_INDEX, ti, C)
            return -1
        return ti

    return target_class


@functools.cache
def _target_class_fn():
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_target_class_py())


def _class_args(name: str, x, target, weight) -> tuple:
    """Host checks and layout of a class-index loss: ``(dtype, acc, target, C, kshape, xk, cs, tk, w, use_w)``
    (rows of ``x`` over ``kshape`` with strides ``xk``, classes ``cs`` apart; the target's row strides ``tk``;
    the class weights as an ``acc`` vector)."""
    d = _check_float(name, x.dtype)
    target = _target(target)
    acc = acc_dtype(d)
    C = x.shape[0] if x.ndim == 1 else x.shape[1]
    kshape, xk, cs = _class_rows(x.shape, elem_strides(x))
    w, use_w = _class_weight(weight, acc)
    return d, acc, target, C, kshape, xk, cs, _row_strides(target, kshape), w, use_w


# --- nll_loss -------------------------------------------------------------------------------------------
def _nll_py(acc):
    """One thread per row: ``loss[m] = -w[t] * x[m, t]``, ``wrow[m] = w[t]`` (0 for ignored or bad targets)."""
    bind_numba_cuda(globals())
    offset = offset_fn()
    target_class = _target_class_fn()

    def nll(x, xk, cs, t, tk, w, use_w, kshape, M, C, ignore, loss, wrow, err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < M:
            ti = target_class(t[offset(i, kshape, tk)], ignore, C, err)
            if ti < 0:
                loss[i] = 0
                wrow[i] = 0
            else:
                wt = acc(w[ti]) if use_w else acc(1)
                loss[i] = -(wt * acc(x[offset(i, kshape, xk) + ti * cs]))
                wrow[i] = wt
            i += step

    return nll


def _grad_of_py(acc):
    bind_numba_cuda(globals())

    def grad_of(g, off, per_row, mean, total):
        """The incoming gradient of a row: ``g[off]`` for ``reduction="none"``, else the loss's, divided by
        the total weight for a mean (NaN for a zero total, as on the CPU)."""
        gv = acc(g[off]) if per_row else acc(g[0])
        if mean:
            tw = acc(total[0])
            gv = gv / tw if tw != 0 else acc(math.nan)
        return gv

    return grad_of


@functools.cache
def _grad_of_fn(acc: str):
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_grad_of_py(np.dtype(acc).type))


def _nll_bwd_py(acc):
    """One thread per row: ``out[m, t] = -w[t] * g`` (``out`` zeroed before), g per row or the loss's."""
    bind_numba_cuda(globals())
    offset = offset_fn()
    target_class = _target_class_fn()
    grad_of = _grad_of_fn(np_name(acc))

    def nll_backward(out, ok, ocs, g, gk, t, tk, w, use_w, kshape, M, C, ignore, per_row, mean, total, err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < M:
            ti = target_class(t[offset(i, kshape, tk)], ignore, C, err)
            if ti >= 0:
                gv = grad_of(g, offset(i, kshape, gk), per_row, mean, total)
                wt = acc(w[ti]) if use_w else acc(1)
                out[offset(i, kshape, ok) + ti * ocs] = -(wt * gv)
            i += step

    return nll_backward


@functools.cache
def _nll_kernels(acc: str):
    bind_numba_cuda(globals())
    a = np.dtype(acc).type
    return jit(_nll_py(a)), jit(_nll_bwd_py(a))


def _grid(n: int, B: int) -> int:
    return max(1, min((n + B - 1) // B, 2 if sim() else 4096))


def _loss_out(loss_acc, shape: tuple, dtype: np.dtype):
    """The ``reduction="none"`` loss of ``shape`` in ``dtype`` from the flat accumulator buffer."""
    backend = be()
    if loss_acc.dtype != dtype:
        out = backend.empty((loss_acc.size,), dtype)
        copy_into(out, loss_acc)
        loss_acc = out
    return backend.as_strided(loss_acc, shape, c_elem_strides(shape), 0)


@kernel("nll_loss", "cuda")
def nll_loss_kernel(x, target, weight, ignore_index, reduction):
    """CUDA ``nll_loss`` -> ``(loss, total_weight)``, both in ``x``'s dtype; no host synchronisation."""
    d, acc, target, C, kshape, xk, cs, tk, w, use_w = _class_args("nll_loss", x, target, weight)
    backend = be()
    M = target.size
    loss = backend.empty((max(M, 1),), acc)
    wrow = backend.empty((max(M, 1),), acc)
    B = block()
    if M:
        fwd, _ = _nll_kernels(np_name(acc))
        fwd[_grid(M, B), B, stream()](backend.flat_view(x), xk, cs, backend.flat_view(target), tk, w, use_w,
                                      kshape, M, C, int(ignore_index), loss, wrow, error_flag())
    mode = _MODES[reduction]
    out, total = _finish(loss, wrow, M, 0.0, mode, d, d)
    if mode == 0:
        out = _loss_out(loss, tuple(target.shape), d) if M else backend.empty(tuple(target.shape), d)
    return out, total


def _grad_args(grad, reduction: str, kshape: tuple) -> tuple:
    """``(flat grad, its row strides, per_row)``: a per-row gradient for ``"none"``, else one value."""
    grad = _device(grad)
    if reduction == "none":
        return be().flat_view(grad), _row_strides(grad, kshape), True
    return be().flat_view(grad), (0,) * len(kshape), False


@kernel("nll_loss_backward", "cuda")
def nll_loss_backward_kernel(grad, x, target, weight, ignore_index, reduction, total_weight):
    """CUDA ``nll_loss_backward``: zeros of ``x``'s shape except ``-weight[t] * grad`` at the targets."""
    d, acc, target, C, kshape, _, _, tk, w, use_w = _class_args("nll_loss_backward", x, target, weight)
    backend = be()
    out = backend.empty(tuple(x.shape), d)
    fill(out, 0)
    M = target.size
    if M == 0 or out.size == 0:
        return out
    _, ok, ocs = _class_rows(out.shape, c_elem_strides(out.shape))
    g, gk, per_row = _grad_args(grad, reduction, kshape)
    B = block()
    _, bwd = _nll_kernels(np_name(acc))
    bwd[_grid(M, B), B, stream()](backend.flat_view(out), ok, ocs, g, gk, backend.flat_view(target), tk, w, use_w,
                                  kshape, M, C, int(ignore_index), per_row, reduction == "mean",
                                  backend.flat_view(_device(total_weight)), error_flag())
    return out


# --- cross_entropy ----------------------------------------------------------------------------------------
def _ce_py(acc, B):
    """One block per row: log-sum-exp, then the (smoothed, weighted) loss of the row's target."""
    bind_numba_cuda(globals())
    offset = offset_fn()
    bsum = block_sum_fn(B)
    row_max = row_max_fn(np_name(acc), B)
    target_class = _target_class_fn()

    def cross_entropy(x, xk, cs, t, tk, w, use_w, kshape, M, C, ignore, ls, lse, loss, wrow, err):
        tid = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        m = cuda.blockIdx.x
        while m < M:
            bx = offset(m, kshape, xk)
            mx = row_max(buf, tid, x, bx, cs, C)
            s = acc(0)
            sw = acc(0)
            swx = acc(0)
            j = tid
            while j < C:
                v = acc(x[bx + j * cs])
                s += math.exp(v - mx)
                if ls > 0:
                    wj = acc(w[j]) if use_w else acc(1)
                    sw += wj
                    swx += wj * v
                j += B
            s = bsum(buf, tid, s)
            if ls > 0:
                sw = bsum(buf, tid, sw)
                swx = bsum(buf, tid, swx)
            if tid == 0:
                c = mx + math.log(s)
                lse[m] = c
                ti = target_class(t[offset(m, kshape, tk)], ignore, C, err)
                if ti < 0:
                    loss[m] = 0
                    wrow[m] = 0
                else:
                    wt = acc(w[ti]) if use_w else acc(1)
                    val = (1 - ls) * wt * (c - acc(x[bx + ti * cs]))
                    if ls > 0:
                        val += ls / C * (sw * c - swx)
                    loss[m] = val
                    wrow[m] = wt
            m += cuda.gridDim.x

    return cross_entropy


def _ce_bwd_py(acc, B):
    """One block per row: ``g * ((1 - ls) * w[t] * (softmax - onehot) + ls / C * (wsum * softmax - w))``."""
    bind_numba_cuda(globals())
    offset = offset_fn()
    bsum = block_sum_fn(B)
    target_class = _target_class_fn()
    grad_of = _grad_of_fn(np_name(acc))

    def cross_entropy_backward(out, ok, ocs, x, xk, cs, g, gk, t, tk, w, use_w, kshape, M, C, ignore, per_row,
                               mean, total, ls, lse, lk, err):
        tid = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        m = cuda.blockIdx.x
        while m < M:
            ti = target_class(t[offset(m, kshape, tk)], ignore, C, err)
            gv = grad_of(g, offset(m, kshape, gk), per_row, mean, total)
            bo = offset(m, kshape, ok)
            if ti < 0 or gv == 0:
                j = tid
                while j < C:
                    out[bo + j * ocs] = 0
                    j += B
            else:
                wsum = acc(C)
                if ls > 0 and use_w:  # the same branch for the whole block
                    ws = acc(0)
                    j = tid
                    while j < C:
                        ws += acc(w[j])
                        j += B
                    wsum = bsum(buf, tid, ws)
                wt = acc(w[ti]) if use_w else acc(1)
                a = gv * ((1 - ls) * wt + ls * wsum / C)
                cw = gv * ls / C
                hit = gv * (1 - ls) * wt
                c = acc(lse[offset(m, kshape, lk)])
                bx = offset(m, kshape, xk)
                j = tid
                while j < C:
                    wj = acc(w[j]) if use_w else acc(1)
                    v = a * math.exp(acc(x[bx + j * cs]) - c) - cw * wj
                    if j == ti:
                        v -= hit
                    out[bo + j * ocs] = v
                    j += B
            m += cuda.gridDim.x

    return cross_entropy_backward


@functools.cache
def _ce_kernels(acc: str, B: int):
    bind_numba_cuda(globals())
    a = np.dtype(acc).type
    return jit(_ce_py(a, B)), jit(_ce_bwd_py(a, B))


@kernel("cross_entropy", "cuda")
def cross_entropy_kernel(x, target, weight, ignore_index, reduction, label_smoothing):
    """CUDA ``cross_entropy`` (class indices) -> ``(loss, lse, total_weight)``; ``lse`` and ``total_weight``
    are float64 as on the CPU; one fused pass per row, no host synchronisation."""
    d, acc, target, C, kshape, xk, cs, tk, w, use_w = _class_args("cross_entropy", x, target, weight)
    backend = be()
    M = target.size
    lse = backend.empty((max(M, 1),), np.float64)
    loss = backend.empty((max(M, 1),), acc)
    wrow = backend.empty((max(M, 1),), acc)
    B = block()
    if M and C:
        fwd, _ = _ce_kernels(np_name(acc), B)
        fwd[row_grid(M), B, stream()](backend.flat_view(x), xk, cs, backend.flat_view(target), tk, w, use_w,
                                      kshape, M, C, int(ignore_index), acc.type(label_smoothing), lse, loss, wrow,
                                      error_flag())
    mode = _MODES[reduction]
    out, total = _finish(loss, wrow, M if C else 0, 0.0, mode, d, np.float64)
    shape = tuple(target.shape)
    lse = backend.as_strided(lse, shape, c_elem_strides(shape), 0)
    if mode == 0:
        out = _loss_out(loss, shape, d) if M else backend.empty(shape, d)
    return out, lse, total


@kernel("cross_entropy_backward", "cuda")
def cross_entropy_backward_kernel(grad, x, target, weight, ignore_index, reduction, label_smoothing, lse,
                                  total_weight):
    """CUDA ``cross_entropy_backward``: the gradient of ``x`` in one fused pass per row."""
    d, acc, target, C, kshape, xk, cs, tk, w, use_w = _class_args("cross_entropy_backward", x, target, weight)
    backend = be()
    out = backend.empty(tuple(x.shape), d)
    M = target.size
    if out.size == 0:
        return out
    _, ok, ocs = _class_rows(out.shape, c_elem_strides(out.shape))
    lse = _device(lse)
    lk = _row_strides(lse, kshape)
    g, gk, per_row = _grad_args(grad, reduction, kshape)
    B = block()
    _, bwd = _ce_kernels(np_name(acc), B)
    bwd[row_grid(M), B, stream()](backend.flat_view(out), ok, ocs, backend.flat_view(x), xk, cs, g, gk,
                                  backend.flat_view(target), tk, w, use_w, kshape, M, C, int(ignore_index), per_row,
                                  reduction == "mean", backend.flat_view(_device(total_weight)),
                                  acc.type(label_smoothing), backend.flat_view(lse), lk, error_flag())
    return out


# --- element-wise losses ------------------------------------------------------------------------------------
# Scalar functions ``f(x, t, p, param)`` of one element: ``p`` is pos_weight (1 without), ``param`` the
# loss's beta / delta. The weight is applied by the template.
def _mse(x, t, p, param):
    d = x - t
    return d * d


def _l1(x, t, p, param):
    return abs(x - t)


def _smooth_l1(x, t, p, param):
    d = abs(x - t)
    if param == 0:
        return d
    if d < param:
        return 0.5 * d * d / param
    return d - 0.5 * param


def _huber(x, t, p, param):
    d = abs(x - t)
    if d < param:
        return 0.5 * d * d
    return param * (d - 0.5 * param)


def _clamped_log(v):
    # log clamped at -100, as torch's binary_cross_entropy (log(0) = -inf is clamped too)
    if v <= 0:
        return -100.0
    r = math.log(v)
    return r if r > -100.0 else -100.0


def _bce(x, t, p, param):
    return -(t * _clamped_log(x) + (1 - t) * _clamped_log(1 - x))


def _bce_logits(x, t, p, param):
    # (1 - t) x + (1 + (p - 1) t) softplus(-x), softplus(-x) = max(-x, 0) + log(1 + exp(-|x|))
    sp = math.log(1 + math.exp(-abs(x))) + (-x if x < 0 else 0)
    return (1 - t) * x + (1 + (p - 1) * t) * sp


# operator -> (scalar function, whether the input must lie in [0, 1])
POINTWISE = {
    "mse_loss": (_mse, False), "l1_loss": (_l1, False), "smooth_l1_loss": (_smooth_l1, False),
    "huber_loss": (_huber, False), "binary_cross_entropy": (_bce, True),
    "binary_cross_entropy_with_logits": (_bce_logits, False),
}


@functools.cache
def _loss_fn(name: str):
    bind_numba_cuda(globals())
    fn = POINTWISE[name][0]
    if fn is _bce:
        clog = cuda.jit(device=True)(_clamped_log)

        def bce(x, t, p, param):
            return -(t * clog(x) + (1 - t) * clog(1 - x))

        return cuda.jit(device=True)(bce)
    return cuda.jit(device=True)(fn)


def _pointwise_py(f, acc, B, unit: bool):
    """Loss ``f`` of every element of the broadcast ``shape`` (``n`` elements), times the weight.

    ``reduce``: each block sums its elements into ``part[block]``; else ``out`` gets each element.
    ``unit``: an input outside ``[0, 1]`` flags ``err`` (ERR_VALUE, the flat index, bound 1).
    """
    bind_numba_cuda(globals())
    bsum = block_sum_fn(B)
    offset = offset_fn()
    flag = flag_fn()

    def pointwise(out, ost, a, ast, b, bst, w, wst, use_w, pw, pst, use_pw, param, shape, n, reduce, part, err):
        tid = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        i = cuda.blockIdx.x * B + tid
        step = cuda.gridDim.x * B
        s = acc(0)
        while i < n:
            x = acc(a[offset(i, shape, ast)])
            y = acc(b[offset(i, shape, bst)])
            if unit and not (x >= 0 and x <= 1):
                flag(err, ERR_VALUE, i, 1)
            v = acc(f(x, y, acc(pw[offset(i, shape, pst)]) if use_pw else acc(1), param))
            if use_w:
                v *= acc(w[offset(i, shape, wst)])
            if reduce:
                s += v
            else:
                out[offset(i, shape, ost)] = v
            i += step
        if reduce:
            s = bsum(buf, tid, s)
            if tid == 0:
                part[cuda.blockIdx.x] = s

    return pointwise


@functools.cache
def _pointwise_kernel(name: str, acc: str, B: int):
    bind_numba_cuda(globals())
    return jit(_pointwise_py(_loss_fn(name), np.dtype(acc).type, B, POINTWISE[name][1]))


def _pointwise_launcher(name: str):
    def launch(a, b, reduction, param=0.0, *, weight=None, pos_weight=None):
        d = _check_float(name, a.dtype)
        backend = be()
        acc = acc_dtype(d)
        a, b = _device(a), _as_dtype(b, d)
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        n = math.prod(shape)
        kshape = shape or (1,)
        mode = _MODES[reduction]
        B = block()
        P = _grid(n, B)
        out = backend.empty(shape, d) if mode == 0 else backend.empty((P,), acc)
        if n:
            w = _as_dtype(weight, d) if weight is not None else a
            pw = _as_dtype(pos_weight, d) if pos_weight is not None else a
            zero = (0,) * len(kshape)
            ost = strides_for(out, shape) if mode == 0 else zero
            _pointwise_kernel(name, np_name(acc), B)[P, B, stream()](
                backend.flat_view(out), ost, backend.flat_view(a), strides_for(a, shape), backend.flat_view(b),
                strides_for(b, shape), backend.flat_view(w), strides_for(w, shape) if weight is not None else zero,
                weight is not None, backend.flat_view(pw), strides_for(pw, shape) if pos_weight is not None else zero,
                pos_weight is not None, acc.type(param), kshape, n, mode != 0, out, error_flag())
        if mode == 0:
            return out
        return _finish(out, None, P if n else 0, float(n), mode, d, d)[0]

    launch.__name__ = name
    return launch


_mse_k = _pointwise_launcher("mse_loss")
_l1_k = _pointwise_launcher("l1_loss")
_smooth_l1_k = _pointwise_launcher("smooth_l1_loss")
_huber_k = _pointwise_launcher("huber_loss")
_bce_k = _pointwise_launcher("binary_cross_entropy")
_bce_logits_k = _pointwise_launcher("binary_cross_entropy_with_logits")


@kernel("mse_loss", "cuda")
def mse_loss_kernel(a, b, reduction):
    return _mse_k(a, b, reduction)


@kernel("l1_loss", "cuda")
def l1_loss_kernel(a, b, reduction):
    return _l1_k(a, b, reduction)


@kernel("smooth_l1_loss", "cuda")
def smooth_l1_loss_kernel(a, b, reduction, beta):
    return _smooth_l1_k(a, b, reduction, beta)


@kernel("huber_loss", "cuda")
def huber_loss_kernel(a, b, reduction, delta):
    return _huber_k(a, b, reduction, delta)


@kernel("binary_cross_entropy", "cuda")
def binary_cross_entropy_kernel(x, t, weight, reduction):
    """CUDA ``binary_cross_entropy``; an input outside ``[0, 1]`` raises at the next synchronisation."""
    return _bce_k(x, t, reduction, weight=weight)


@kernel("binary_cross_entropy_with_logits", "cuda")
def binary_cross_entropy_with_logits_kernel(x, t, weight, pos_weight, reduction):
    return _bce_logits_k(x, t, reduction, weight=weight, pos_weight=pos_weight)


# --- concrete signatures (PTX test) -----------------------------------------------------------------------
def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of every loss kernel for every dtype it is launched with."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64, b1 = types.int64, types.boolean
    idx = types.UniTuple(i64, ndim)
    err = types.Array(i64, 1, "C")

    def arr(dn):
        return types.Array(from_dtype(np.dtype(dn)), 1, "C")

    B = ROW_BLOCK
    cases = []
    for dn in FLOATS:
        acc = acc_dtype(dn)
        a, at = acc.name, from_dtype(acc)
        for tot in sorted({dn, "float64"}):
            sig = (arr(dn), arr(tot), arr(a), arr(a), i64, b1, at, i64)
            cases.append((f"loss_finish:{dn}:{tot}", _finish_py(acc.type, B), sig))
        for tn in TARGET_DTYPES:
            sig = (arr(dn), idx, i64, arr(tn), idx, arr(a), b1, idx, i64, i64, i64, arr(a), arr(a), err)
            cases.append((f"nll_loss:{dn}:{tn}", _nll_py(acc.type), sig))
            sig = (arr(dn), idx, i64, arr(dn), idx, arr(tn), idx, arr(a), b1, idx, i64, i64, i64, b1, b1, arr(dn),
                   err)
            cases.append((f"nll_loss_backward:{dn}:{tn}", _nll_bwd_py(acc.type), sig))
            sig = (arr(dn), idx, i64, arr(tn), idx, arr(a), b1, idx, i64, i64, i64, at, arr("float64"), arr(a),
                   arr(a), err)
            cases.append((f"cross_entropy:{dn}:{tn}", _ce_py(acc.type, B), sig))
            sig = (arr(dn), idx, i64, arr(dn), idx, i64, arr(dn), idx, arr(tn), idx, arr(a), b1, idx, i64, i64, i64,
                   b1, b1, arr("float64"), at, arr("float64"), idx, err)
            cases.append((f"cross_entropy_backward:{dn}:{tn}", _ce_bwd_py(acc.type, B), sig))
        for name, (_, unit) in POINTWISE.items():
            f = _loss_fn(name)
            for mode, out in (("none", dn), ("reduce", a)):
                sig = (arr(out), idx, arr(dn), idx, arr(dn), idx, arr(dn), idx, b1, arr(dn), idx, b1, at, idx, i64,
                       b1, arr(out), err)
                cases.append((f"{name}:{mode}:{dn}", _pointwise_py(f, acc.type, B, unit), sig))
    return cases
