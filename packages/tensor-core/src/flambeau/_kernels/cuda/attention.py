"""CUDA kernels of scaled_dot_product_attention and its backward (declared in ``flambeau/_ops/attention.py``).

Conventions: those of the CPU kernels, except that on CUDA ``mask`` may also be the boolean mask
itself (True: take part), which the softmax kernel reads directly (the front builds no additive
mask on the host). Two batched GEMMs (``linalg.matmul``, batch dims broadcast) around one fused
row kernel: scale, causal or boolean/additive mask and softmax in one block per score row (max
and sum by shared-memory trees, accumulating in float32, float64 for float64); rows whose every
key is masked give zero weights, as torch's math backend. The backward runs the four gradient
GEMMs around a fused softmax-backward row kernel over the saved weights. Dropout factors, when
the front drew them, multiply the weights elementwise. float16 computes in float32.

Note [Fused small attention]
    At short sequences the two GEMMs and the softmax are launches more than work: a causal GPT block of
    64 tokens ran nine launches forward (four cuBLAS calls per product: the heads of a fused qkv
    projection are views that no one batch stride spans) and nineteen backward, for microseconds of
    arithmetic each, while the GPU waited on the host. Where queries and keys are at most
    :data:`FUSED_MAX_SEQ` long and head dims at most :data:`FUSED_MAX_HEAD_DIM` (a thread walks a whole
    row, so both bound its serial work), and neither a mask nor dropout is given, one launch computes each
    query row in one thread: its scores (causal ones up to the diagonal), their softmax into ``attn`` (saved
    for the backward as before) and its output row. The backward is two launches: one thread per query row
    (``dp``, ``ds``, ``dq``), then one per key row (``dv``, ``dk``). The operands may be strided views with
    equal batch dims; the arithmetic is the composite's, accumulated in the compute dtype. Longer
    sequences keep the GEMMs, whose work then dominates.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import from_numpy_dtype, np_name
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import (
    be,
    bind_numba_cuda,
    c_elem_strides,
    elem_strides,
    jit,
    launch_keyed,
    sim,
    stream,
    strides_for,
)
from flambeau._kernels.cuda.conv import cast, compute_dtype, contig, mT
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._kernels.cuda.linalg import matmul, scaled_matmul
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

__all__ = ["sdpa", "sdpa_backward", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

_ROW_BLOCK = 128  # threads per score row (a power of two)
# the longest sequences (queries and keys) and head dims the fused kernels take (Note [Fused small attention])
FUSED_MAX_SEQ = 128
FUSED_MAX_HEAD_DIM = 128
_FUSED_BLOCK = 64  # query (or key) rows per block of the fused kernels, a thread each


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


def _fused_forward_py(acc):
    """Thread ``i`` of block ``(z, y)`` takes query row ``y * blockDim + i`` of batch element ``z``: its scores, their
    softmax (a row of ``attn``, contiguous ``(Z, L, S)``) and its output row (``out`` in the query's layout: Note
    [Gradients in their operands' layout]). ``out``, ``q``, ``k``, ``v`` are strided: batch strides ``*b`` over
    ``bshape``, (row, column) strides ``*s``."""
    bind_numba_cuda(globals())
    offset = index_device("row_offset")

    def fused_forward(out, ob, os, attn, q, qb, qs, k, kb, ks, v, vb, vs, bshape, L, S, E, Ev, causal, scale):
        z = cuda.blockIdx.x
        i = cuda.blockIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        if i >= L:
            return
        qo = offset(z, bshape, qb) + i * qs[0]
        ko = offset(z, bshape, kb)
        vo = offset(z, bshape, vb)
        ao = (z * L + i) * S
        end = min(i + 1, S) if causal else S
        ninf = acc(-math.inf)
        m = ninf
        for j in range(end):
            dot = acc(0)
            kj = ko + j * ks[0]
            for e in range(E):
                dot += q[qo + e * qs[1]] * k[kj + e * ks[1]]
            sc = dot * scale
            attn[ao + j] = sc
            if sc > m:
                m = sc
        tot = acc(0)
        if m != ninf:
            for j in range(end):
                tot += math.exp(attn[ao + j] - m)
        for j in range(S):
            w = acc(0)
            if m != ninf and j < end:
                w = math.exp(attn[ao + j] - m) / tot
            attn[ao + j] = w
        oo = offset(z, bshape, ob) + i * os[0]
        for e in range(Ev):
            o = acc(0)
            for j in range(end):
                o += attn[ao + j] * v[vo + j * vs[0] + e * vs[1]]
            out[oo + e * os[1]] = o

    return fused_forward


def _fused_backward_q_py(acc):
    """Thread of query row ``i`` (as the forward's): the row of ``ds = p * (dp - sum(dp * p))`` with ``dp = g @ v^T``,
    then of ``gq = scale * ds @ k``; ``p`` and ``ds`` contiguous, ``gq`` (Note [Gradients in their operands'
    layout]), ``g``, ``k`` and ``v`` strided."""
    bind_numba_cuda(globals())
    offset = index_device("row_offset")

    def fused_backward_q(ds, gq, gqb, gqs, g, gb, gs, p, k, kb, ks, v, vb, vs, bshape, L, S, E, Ev, scale):
        z = cuda.blockIdx.x
        i = cuda.blockIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        if i >= L:
            return
        ko = offset(z, bshape, kb)
        vo = offset(z, bshape, vb)
        go = offset(z, bshape, gb) + i * gs[0]
        po = (z * L + i) * S
        total = acc(0)
        for j in range(S):
            dp = acc(0)
            vj = vo + j * vs[0]
            for e in range(Ev):
                dp += g[go + e * gs[1]] * v[vj + e * vs[1]]
            ds[po + j] = dp
            total += dp * p[po + j]
        for j in range(S):
            ds[po + j] = p[po + j] * (ds[po + j] - total)
        qo = offset(z, bshape, gqb) + i * gqs[0]
        for e in range(E):
            a = acc(0)
            for j in range(S):
                a += ds[po + j] * k[ko + j * ks[0] + e * ks[1]]
            gq[qo + e * gqs[1]] = a * scale

    return fused_backward_q


def _fused_backward_kv_py(acc):
    """Thread of key row ``j``: its rows of ``gv = p^T @ g`` and ``gk = scale * ds^T @ q`` (``gk``, ``gv`` and ``q``
    strided, as ``g``: Note [Gradients in their operands' layout])."""
    bind_numba_cuda(globals())
    offset = index_device("row_offset")

    def fused_backward_kv(gk, gkb, gks, gv, gvb, gvs, g, gb, gs, p, ds, q, qb, qs, bshape, L, S, E, Ev, scale):
        z = cuda.blockIdx.x
        j = cuda.blockIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        if j >= S:
            return
        qo = offset(z, bshape, qb)
        go = offset(z, bshape, gb)
        base = z * L * S + j
        vo = offset(z, bshape, gvb) + j * gvs[0]
        for e in range(Ev):
            a = acc(0)
            for i in range(L):
                a += p[base + i * S] * g[go + i * gs[0] + e * gs[1]]
            gv[vo + e * gvs[1]] = a
        ko = offset(z, bshape, gkb) + j * gks[0]
        for e in range(E):
            a = acc(0)
            for i in range(L):
                a += ds[base + i * S] * q[qo + i * qs[0] + e * qs[1]]
            gk[ko + e * gks[1]] = a * scale

    return fused_backward_kv


_FUSED = {"fused_forward": _fused_forward_py, "fused_backward_q": _fused_backward_q_py,
          "fused_backward_kv": _fused_backward_kv_py}


@functools.cache
def _kernel(name: str, acc: str, block: int = 0, mask_bool: bool = False):
    bind_numba_cuda(globals())
    if name in _FUSED:
        return jit(_FUSED[name](np.dtype(acc).type))
    if name == "softmax":
        return jit(_softmax_py(np.dtype(acc).type, block, mask_bool))
    return jit(_softmax_backward_py(np.dtype(acc).type, block))


def _fused_geometry(q, k, v):
    """``(bshape, qb, qs, kb, ks, vb, vs)`` of operands the fused kernels take (Note [Fused small attention]): the
    batch shape (``(1,)`` for none) and each operand's batch and (row, column) element strides; None unless the
    batch dims are equal and the sequences and head dims are at most :data:`FUSED_MAX_SEQ` and
    :data:`FUSED_MAX_HEAD_DIM`."""
    batch = tuple(q.shape[:-2])
    if tuple(k.shape[:-2]) != batch or tuple(v.shape[:-2]) != batch:
        return None
    nl, ns = q.shape[-2], k.shape[-2]
    if max(nl, ns) > FUSED_MAX_SEQ or max(q.shape[-1], v.shape[-1]) > FUSED_MAX_HEAD_DIM \
            or not (nl and ns and math.prod(batch)):
        return None
    geometry = [batch or (1,)]
    for a in (q, k, v):
        geometry += _batch_and_matrix(elem_strides(a))
    return tuple(geometry)


# Note [Keyed fused attention launches]
#     The fused kernels take flat launch arguments of the compute dtype (``flat_arg``: on a GPU no device-array
#     object is made), Python ints, the scale in the compute dtype, and tuples whose lengths are the batch shape's
#     (``bshape``, each operand's batch strides: ``_batch_and_matrix`` pads them alike) and two (the row and column
#     strides): ``(compute dtype, len(bshape))`` fixes every argument's type, so the launches are keyed by it
#     (``launch_keyed``) instead of typing some twenty arguments, tuples within them, every call.
def _batch_and_matrix(strides) -> tuple:
    """Element ``strides`` as the fused kernels take an operand's: ``(batch strides, (row, column))``, the batch
    strides ``(0,)`` where there is no batch dim."""
    strides = tuple(strides)
    return strides[:-2] or (0,), strides[-2:]


def _fused_grid(Z: int, rows: int) -> tuple:
    """``(grid, block)`` of a fused launch: a thread per row, blocks of up to :data:`_FUSED_BLOCK` rows."""
    block = min(4 if sim() else _FUSED_BLOCK, rows)
    return (Z, (rows + block - 1) // block), block


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
    geometry = _fused_geometry(q, k, v) if mask is None and drop is None else None
    if geometry is not None:  # Note [Fused small attention]
        bshape, qb, qs, kb, ks, vb, vs = geometry
        nl, ns, ne, nev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
        batch = tuple(q.shape[:-2])
        out, (ob, os) = _like(q, cdt, batch + (nl, nev))  # the query's layout, as torch's attention gives
        attn = backend.empty(batch + (nl, ns), cdt)
        grid, block = _fused_grid(math.prod(bshape), nl)
        flat = backend.flat_arg
        launch_keyed(_kernel("fused_forward", np_name(cdt)), (grid, block, stream()), (cdt, len(bshape)),
                     flat(out), ob, os, flat(attn), flat(q), qb, qs, flat(k), kb, ks, flat(v), vb, vs, bshape, nl, ns,
                     ne, nev, bool(is_causal), cdt.type(scale))
        return cast(out, dtype), cast(attn, dtype)
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
    geometry = _fused_geometry(q, k, v) if drop is None else None
    if geometry is not None and tuple(attn.shape) == tuple(q.shape[:-1]) + (k.shape[-2],) \
            and tuple(grad.shape) == tuple(q.shape[:-1]) + (v.shape[-1],):  # Note [Fused small attention]
        return tuple(cast(a, dtype) for a in _fused_backward(grad, q, k, v, attn, geometry, float(scale), cdt))
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
    gq = scaled_matmul(ds, k, sc)  # (the scale in the GEMMs' epilogue: no pass of its own)
    gk = scaled_matmul(mT(ds), q, sc)
    return tuple(cast(a, dtype) for a in (gq, gk, gv, ds))


# Note [Gradients in their operands' layout]
#     A GPT's query, key and value are (batch, heads) views of one fused projection: ``qkv.split(...)``, ``view``
#     and ``transpose``. Written contiguous, their gradients came back through the transpose's backward as strided
#     views, and the ``view``'s backward copied each into the projection's layout before ``split``'s backward
#     concatenated them: three copies per block and step. As torch's attention does, the fused backward writes each
#     gradient in its operand's layout instead (the dims ordered as the operand's strides order them, densely):
#     the transpose's backward then gives a contiguous tensor, and the view's a view of it. The fused forward
#     writes its output in the query's layout likewise, so ``y.transpose(1, 2).reshape(b, t, c)`` is a view, and
#     the backward reads the output's gradient, strided so, in place: two more copies per block and step gone.
def _like(a, cdt, shape=None):
    """An uninitialised array of ``shape`` (default ``a``'s) whose dims lie in memory in the order of ``a``'s
    strides (densely), with its ``(batch strides, (row, column))`` element strides as the fused kernels take them."""
    backend = be()
    shape = tuple(a.shape) if shape is None else tuple(shape)
    stored, strides, fused = _like_layout(shape, tuple(a.strides), a.dtype.itemsize)
    view = backend.as_strided(backend.flat_view(backend.empty(stored, cdt)), shape, strides, 0)
    return view, fused


@functools.lru_cache(maxsize=256)
def _like_layout(shape: tuple, byte_strides: tuple, item: int) -> tuple:
    """:func:`_like`'s geometry for a ``shape`` laid out as byte strides ``byte_strides`` (of ``item`` bytes) order
    their dims: ``(the shape as stored, element strides, (batch strides, (row, column)))``, worked out once per
    geometry (a GPT repeats the same few every step)."""
    st = [b // item for b in byte_strides]
    order = sorted(range(len(shape)), key=lambda d: -st[d])  # outermost first; ties keep the dims' order
    stored = tuple(shape[d] for d in order)
    dense = c_elem_strides(stored)
    strides = [0] * len(shape)
    for i, d in enumerate(order):
        strides[d] = dense[i]
    return stored, tuple(strides), _batch_and_matrix(strides)


def _fused_backward(grad, q, k, v, attn, geometry, scale: float, cdt) -> tuple:
    """``(gq, gk, gv, ds)`` by the two fused backward launches (Note [Fused small attention]); ``gq``, ``gk`` and
    ``gv`` in their operands' layouts (Note [Gradients in their operands' layout])."""
    backend = be()
    bshape, qb, qs, kb, ks, vb, vs = geometry
    nl, ns, ne, nev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    batch = tuple(q.shape[:-2])
    p = contig(attn)
    # the output's gradient, read in place in the output's layout (Note [Gradients in their operands' layout])
    gb, gs = _batch_and_matrix(elem_strides(grad))
    ds = backend.empty(batch + (nl, ns), cdt)
    (gq, (gqb, gqs)), (gk, (gkb, gks)), (gv, (gvb, gvs)) = _like(q, cdt), _like(k, cdt), _like(v, cdt)
    flat = backend.flat_arg
    sc = cdt.type(scale)
    Z = math.prod(bshape)
    key = (cdt, len(bshape))  # fixes every argument's type: Note [Keyed fused attention launches]
    grid, block = _fused_grid(Z, nl)
    launch_keyed(_kernel("fused_backward_q", np_name(cdt)), (grid, block, stream()), key,
                 flat(ds), flat(gq), gqb, gqs, flat(grad), gb, gs, flat(p), flat(k), kb, ks, flat(v), vb, vs, bshape,
                 nl, ns, ne, nev, sc)
    grid, block = _fused_grid(Z, ns)
    launch_keyed(_kernel("fused_backward_kv", np_name(cdt)), (grid, block, stream()), key,
                 flat(gk), gkb, gks, flat(gv), gvb, gvs, flat(grad), gb, gs, flat(p), flat(ds), flat(q), qb, qs, bshape,
                 nl, ns, ne, nev, sc)
    return gq, gk, gv, ds


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the softmax kernels per compute dtype (and mask dtype),
    for a 3-d batch + row shape, and of the fused kernels for a 2-d batch."""
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
        # the fused kernels over (batch, heads) views, as a GPT's (Note [Fused small attention])
        b2 = types.UniTuple(i64, 2)
        acc = np.dtype(dn).type
        dims = (i64, i64, i64, i64)
        cases.append((f"attention:fused_forward:{dn}", _fused_forward_py(acc),
                      (arr, b2, b2, arr, arr, b2, b2, arr, b2, b2, arr, b2, b2, b2, *dims, types.boolean, t)))
        cases.append((f"attention:fused_backward_q:{dn}", _fused_backward_q_py(acc),
                      (arr, arr, b2, b2, arr, b2, b2, arr, arr, b2, b2, arr, b2, b2, b2, *dims, t)))
        cases.append((f"attention:fused_backward_kv:{dn}", _fused_backward_kv_py(acc),
                      (arr, b2, b2, arr, b2, b2, arr, b2, b2, arr, arr, arr, b2, b2, b2, *dims, t)))
    return cases
