"""CUDA kernels of scaled_dot_product_attention and its backward (declared in ``flambeau/_ops/attention.py``).

Conventions: those of the CPU kernels, except that on CUDA ``mask`` may also be the boolean mask
itself (True: take part), which the softmax kernel reads directly (the front builds no additive
mask on the host). Two batched GEMMs (``linalg.matmul``, batch dims broadcast) around one fused
row kernel: scale, causal or boolean/additive mask and softmax in one block per score row (max
and sum by shared-memory trees, accumulating in float32, float64 for float64); rows whose every
key is masked give zero weights, as torch's math backend. The backward runs the four gradient
GEMMs around a fused softmax-backward row kernel over the saved weights. Dropout factors, when
the front drew them, multiply the weights elementwise. float16 computes in float32.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import from_numpy_dtype, np_name
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import be, bind_numba_cuda, jit, sim, stream, strides_for
from flambeau._kernels.cuda.conv import cast, compute_dtype, contig, mT
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._kernels.cuda.linalg import matmul
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

__all__ = ["sdpa", "sdpa_backward", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

_ROW_BLOCK = 128  # threads per score row (a power of two)


def _block_reduce(buf, t, B, v, is_max):
    """The max (``is_max``) or sum of the values ``v`` of a block's ``B`` threads (B a power of two), by a
    shared-memory tree in ``buf``; every thread gets it, and ``buf`` is free again on return."""
    buf[t] = v
    cuda.syncthreads()
    width = B // 2
    while width > 0:
        if t < width:
            if is_max:
                if buf[t + width] > buf[t]:
                    buf[t] = buf[t + width]
            else:
                buf[t] += buf[t + width]
        cuda.syncthreads()
        width //= 2
    r = buf[0]
    cuda.syncthreads()
    return r


def _score_fn(acc, mask_bool):
    """Device function: score ``j`` of a row, scaled and masked (``-inf`` where a boolean mask is False)."""
    bind_numba_cuda(globals())

    def score(s, so, scol, mask, mo, mcol, has_mask, scale, j):
        v = acc(s[so + j * scol]) * scale
        if has_mask:
            mv = mask[mo + j * mcol]
            if mask_bool:
                if not mv:
                    v = acc(-math.inf)
            else:
                v += acc(mv)
        return v

    return cuda.jit(device=True)(score)


def _softmax_py(acc, B=_ROW_BLOCK, mask_bool=False):
    """Row ``r`` (unravelled over ``rshape`` = batch + (L,), strides ``sst``/``mst``) of the scores:
    ``attn[r, :] = softmax(s[r, :] * scale + mask[r, :])`` with the causal and boolean masks applied."""
    bind_numba_cuda(globals())
    reduce = cuda.jit(device=True)(_block_reduce)
    offset = index_device("row_offset")
    score = _score_fn(acc, mask_bool)

    def softmax_rows(attn, s, sst, scol, mask, mst, mcol, has_mask, causal, scale, rshape, S):
        row = cuda.blockIdx.x
        t = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        so = offset(row, rshape, sst)
        mo = offset(row, rshape, mst)
        i = row % rshape[len(rshape) - 1]
        end = min(i + 1, S) if causal else S
        ninf = acc(-math.inf)
        m = ninf
        j = t
        while j < end:
            v = score(s, so, scol, mask, mo, mcol, has_mask, scale, j)
            if v > m:
                m = v
            j += B
        m = reduce(buf, t, B, m, True)
        tot = acc(0)
        if m != ninf:
            j = t
            while j < end:
                tot += math.exp(score(s, so, scol, mask, mo, mcol, has_mask, scale, j) - m)
                j += B
        tot = reduce(buf, t, B, tot, False)
        j = t
        while j < S:
            e = acc(0)
            if m != ninf and j < end:
                e = math.exp(score(s, so, scol, mask, mo, mcol, has_mask, scale, j) - m) / tot
            attn[row * S + j] = e
            j += B

    return softmax_rows


def _softmax_backward_py(acc, B=_ROW_BLOCK):
    """``ds[r, :] = p[r, :] * (dp[r, :] - sum(dp[r, :] * p[r, :]))``; ``p`` strided over ``rshape``, ``dp``/``ds``
    contiguous rows (``ds`` may be ``dp``)."""
    bind_numba_cuda(globals())
    reduce = cuda.jit(device=True)(_block_reduce)
    offset = index_device("row_offset")

    def softmax_backward(ds, p, pst, pcol, dp, rshape, S):
        row = cuda.blockIdx.x
        t = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        po = offset(row, rshape, pst)
        tot = acc(0)
        j = t
        while j < S:
            tot += acc(dp[row * S + j]) * acc(p[po + j * pcol])
            j += B
        tot = reduce(buf, t, B, tot, False)
        j = t
        while j < S:
            pv = acc(p[po + j * pcol])
            ds[row * S + j] = pv * (acc(dp[row * S + j]) - tot)
            j += B

    return softmax_backward


@functools.cache
def _kernel(name: str, acc: str, block: int, mask_bool: bool = False):
    bind_numba_cuda(globals())
    if name == "softmax":
        return jit(_softmax_py(np.dtype(acc).type, block, mask_bool))
    return jit(_softmax_backward_py(np.dtype(acc).type, block))


def _block() -> int:
    return 8 if sim() else _ROW_BLOCK


def _row_strides(a, shape):
    """Strides of ``a`` broadcast to ``shape``: (those of the row dims, the column stride)."""
    st = strides_for(a, shape)
    return st[:-1], st[-1]


_mul = binary_launcher("mul")


@kernel("scaled_dot_product_attention", "cuda")
def sdpa(q, k, v, mask, drop, is_causal, scale):
    """CUDA ``scaled_dot_product_attention``: ``(out, attn)`` (``attn`` the weights before dropout)."""
    dtype = np.dtype(q.dtype)
    cdt = compute_dtype(dtype)
    q, k, v = cast(q, cdt), cast(k, cdt), cast(v, cdt)
    if mask is not None and mask.dtype != np.bool_:
        mask = cast(mask, cdt)
    backend = be()
    s = matmul(q, mT(k))
    nl, ns = s.shape[-2:]
    batch = tuple(s.shape[:-2])
    if mask is not None and mask.ndim > 2:
        batch = broadcast_shapes(batch, tuple(mask.shape[:-2]))
    full = batch + (nl, ns)
    attn = backend.empty(full, cdt)
    rows = math.prod(batch) * nl
    if rows and ns:
        sst, scol = _row_strides(s, full)
        m = s if mask is None else mask
        mst, mcol = _row_strides(m, full)
        B = _block()
        _kernel("softmax", np_name(cdt), B, m.dtype == np.bool_)[rows, B, stream()](
            backend.flat_view(attn), backend.flat_view(s), sst, scol, backend.flat_view(m), mst, mcol,
            mask is not None, bool(is_causal), cdt.type(scale), batch + (nl,), ns)
    p = attn if drop is None else _mul(attn, cast(drop, cdt), from_numpy_dtype(cdt))
    out = matmul(p, v)
    return cast(out, dtype), cast(attn, dtype)


@kernel("_scaled_dot_product_attention_backward", "cuda")
def sdpa_backward(grad, q, k, v, attn, drop, scale):
    """CUDA backward of ``scaled_dot_product_attention``: ``(grad_q, grad_k, grad_v, grad_scores)``."""
    dtype = np.dtype(q.dtype)
    cdt = compute_dtype(dtype)
    fdt = from_numpy_dtype(cdt)
    grad, q, k, v, attn = (cast(a, cdt) for a in (grad, q, k, v, attn))
    drop = cast(drop, cdt)
    p = attn if drop is None else _mul(attn, drop, fdt)
    gv = matmul(mT(p), grad)
    dp = matmul(grad, mT(v))
    if drop is not None:
        _mul(dp, drop, fdt, out=dp)
    dp = contig(dp)
    ns = dp.shape[-1]
    rows = dp.size // ns if ns else 0
    if rows:
        backend = be()
        pst, pcol = _row_strides(attn, tuple(dp.shape))
        B = _block()
        _kernel("softmax_backward", np_name(cdt), B)[rows, B, stream()](
            backend.flat_view(dp), backend.flat_view(attn), pst, pcol, backend.flat_view(dp),
            tuple(dp.shape[:-1]), ns)
    ds = dp
    sc = float(scale)
    gq = matmul(ds, k)
    _mul(gq, sc, fdt, out=gq)
    gk = matmul(mT(ds), q)
    _mul(gk, sc, fdt, out=gk)
    return tuple(cast(a, dtype) for a in (gq, gk, gv, ds))


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the softmax kernels per compute dtype (and mask dtype),
    for a 3-d batch + row shape."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64 = types.int64
    r3 = types.UniTuple(i64, 3)
    cases = []
    for dn in ("float32", "float64"):
        t = from_dtype(np.dtype(dn))
        arr = types.Array(t, 1, "C")
        for mn in (dn, "bool"):
            marr = types.Array(from_dtype(np.dtype(mn)), 1, "C")
            sig = (arr, arr, r3, i64, marr, r3, i64, types.boolean, types.boolean, t, r3, i64)
            py = _softmax_py(np.dtype(dn).type, mask_bool=mn == "bool")
            cases.append((f"attention:softmax:{dn}:mask_{mn}", py, sig))
        cases.append((f"attention:softmax_backward:{dn}", _softmax_backward_py(np.dtype(dn).type),
                      (arr, arr, r3, i64, arr, r3, i64)))
    return cases
