"""CPU kernels of the neural-network primitives declared in ``flambeau/_ops/nn_ops.py``.

Softmax over the last dimension of a large contiguous tensor runs a fused numba kernel, parallel
over rows (one pass for the maximum, one for ``exp`` and the sum, one to scale), built on first
use; other cases use numpy. float32 rows take the vectorised ``expf`` of Note [Vectorised expf],
which the fused kernels of cross-entropy, attention and the recurrent cells share. float16
computes in float32. embedding and dropout are numpy gathers and products; embedding's backward
scatters with index_add's kernel.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau import _dtype as dt
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._kernels.cpu.indexing import _cpu_index_add as _index_add  # (the scatter of embedding's backward)
from flambeau._ops._registry import kernel

_max_reduce = np.maximum.reduce
_add_reduce = np.add.reduce
# Below this many elements numpy's passes beat starting numba's thread pool.
_NUMBA_MIN_SIZE = 1 << 15


_expf_flush = _row_max = None  # numba helpers (expf from _fast_exp.expf_helpers()), set by _numba_softmax()


@functools.cache
def _numba_softmax():
    """Fused row-wise softmax / log_softmax kernels (float32, float64), compiled on first use.

    The kernels reach their one jitted helper (``_fast_exp``'s inlined expf) as a module global:
    numba's on-disk cache misses on every run for functions that close over other dispatchers.
    See Note [Vectorised expf] for why float32 rows do not call ``np.exp``.
    """
    # The kernels reach the shared expf helper as a module global (see _fast_exp), not a closure cell.
    global _expf_flush, _row_max
    import numba
    from numba import prange

    from flambeau._kernels.cpu._fast_exp import expf_helpers
    from flambeau._kernels.cpu._row_max import row_max_helper

    _, _expf_flush = expf_helpers()

    _row_max = row_max_helper()  # Note [Row maxima in eight lanes]

    # Note [Vectorised expf]: without Intel SVML, LLVM turns np.exp into a scalar libm call per
    # element, which makes softmax 3-6x slower than torch's vectorised kernel. Cephes' expf
    # (range reduction by a split ln 2, a degree-6 polynomial, then a 2**k scale) is branch-free
    # arithmetic that LLVM vectorises; 2**k is built in an int32 scratch row viewed as float32.
    # It is accurate to ~1 ulp; results below float32's normal range (x - max < -87.33) flush to 0.
    @numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc"})
    def softmax_rows_f32(x, out, log):
        rows, n = x.shape
        for i in prange(rows):
            xr, o = x[i], out[i]
            m = _row_max(xr)  # Note [Row maxima in eight lanes]
            if m == -np.inf or m == np.inf:  # all -inf, or +inf present: torch gives a NaN row
                m = m - m
            bits = np.empty(n, np.int32)
            nan = 0
            for j in range(n):
                v = xr[j]
                y, b = _expf_flush(v - m)
                o[j] = y
                bits[j] = b
                nan |= v != v  # (expf_flush takes NaN to 0: the row is NaN all the same, as torch's)
            if nan:
                o[:] = np.float32(np.nan)
                continue
            scale = bits.view(np.float32)
            s = np.float32(0.0)
            for j in range(n):
                e = o[j] * scale[j]
                o[j] = e
                s += e
            if log:  # (x - m) - log(s) rather than x - (m + log(s)): no cancellation
                c = np.log(s)
                for j in range(n):
                    o[j] = (xr[j] - m) - c
            else:
                inv = np.float32(1.0) / s
                for j in range(n):
                    o[j] *= inv

    @numba.njit(parallel=True, cache=True, fastmath={"contract", "reassoc"})
    def softmax_rows(x, out, log):
        rows, n = x.shape
        for i in prange(rows):
            xr, o = x[i], out[i]
            m = _row_max(xr)
            if m == -np.inf or m == np.inf:
                m = m - m
            s = 0.0
            for j in range(n):
                e = np.exp(xr[j] - m)
                o[j] = e
                s += e
            if log:
                c = np.log(s)
                for j in range(n):
                    o[j] = (xr[j] - m) - c
            else:
                inv = 1.0 / s
                for j in range(n):
                    o[j] *= inv

    return softmax_rows_f32, softmax_rows


def _softmax_numpy(a, dim, log):
    if a.size == 0:
        return np.empty(a.shape, a.dtype)
    # A slice that is all -inf, or holds +inf, turns into NaN through inf - inf, as in torch.
    with np.errstate(all="ignore"):
        shifted = np.subtract(a, _max_reduce(a, dim, None, None, True))
        if log:
            e = np.exp(shifted)
            return np.subtract(shifted, np.log(_add_reduce(e, dim, None, None, True)),
                               out=shifted)
        e = np.exp(shifted, out=shifted)
        return np.true_divide(e, _add_reduce(e, dim, None, None, True), out=e)


def _softmax_kernel(log: bool):
    def softmax_kernel(a, dim):
        if a.ndim == 0:
            return np.asarray(np.zeros((), a.dtype) if log else np.ones((), a.dtype))
        low = a.dtype if a.dtype in dt.LOW_PRECISION_NP else None  # float16, bfloat16: in float32, rounded once
        if low is not None:
            a = a.astype(np.float32)
        if a.size >= _NUMBA_MIN_SIZE and dim == a.ndim - 1 and a.flags.c_contiguous and a.shape[-1]:
            x = a.reshape(-1, a.shape[-1])
            out = np.empty_like(x)
            f32, f64 = _numba_softmax()
            (f32 if x.dtype == np.float32 else f64)(x, out, log)
            r = out.reshape(a.shape)
        else:
            r = _softmax_numpy(a, dim, log)
        return r if low is None else r.astype(low)

    return takes_bfloat16(softmax_kernel)


kernel("softmax", "cpu")(_softmax_kernel(False))
kernel("log_softmax", "cpu")(_softmax_kernel(True))


# --- embedding -------------------------------------------------------------------------------------
@kernel("embedding", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_embedding(weight, indices):
    return np.take(weight, indices, axis=0)


@kernel("embedding_dense_backward", "cpu")
def _k_embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """``(num_weights, D)`` zeros plus each row of ``grad`` ``indices.shape + (D,)`` added at its index (the
    indices in range: the front checks them), but at ``padding_idx`` (-1: none); with ``scale_grad_by_freq``
    each row divided by its index's count. float16 adds in float32."""
    d = grad.dtype
    acc = np.float32 if d == np.float16 else d
    D = grad.shape[-1]
    idx = np.ascontiguousarray(indices, dtype=np.int64).reshape(-1)
    rows = np.ascontiguousarray(grad, dtype=acc).reshape(idx.size, D)
    if scale_grad_by_freq and idx.size:
        rows = rows / np.bincount(idx, minlength=num_weights)[idx].astype(acc)[:, None]
    if 0 <= padding_idx < num_weights:
        keep = idx != padding_idx
        idx, rows = idx[keep], rows[keep]
    out = np.zeros((num_weights, D), acc)
    _index_add(out, 0, idx, rows, 1)
    return out.astype(d, copy=False)


# --- dropout ---------------------------------------------------------------------------------------
@kernel("dropout", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_dropout(a, mask, out=None):
    return np.multiply(a, mask, out=out)
