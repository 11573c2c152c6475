"""CUDA kernels of the nn_ops operators: softmax, log_softmax, embedding (see flambeau._kernels.cpu.nn_ops).

Conventions (the CPU kernels'; arrays are numba device arrays, possibly strided views):
    softmax, log_softmax: ``kernel(a, dim) -> array`` (C-contiguous, ``a``'s dtype);
    embedding: ``kernel(weight, indices) -> array`` of shape ``indices.shape + (embedding_dim,)``;
    embedding_dense_backward: ``kernel(grad, indices, num_weights, padding_idx, scale_grad_by_freq) -> array``
    ``(num_weights, embedding_dim)`` of ``grad``'s dtype (``padding_idx`` -1: none).

softmax and log_softmax run one block per row (a row is every element along ``dim``, at any stride):
the row maximum and then the sum of ``exp(x - max)`` are reduced in shared memory (:func:`block_max`,
:func:`block_sum`, device functions the loss kernels share), then each thread writes its elements.
float16 and float32 accumulate in float32, float64 in float64; a row that is all ``-inf`` or holds
``+inf`` gives NaN, as on the CPU. embedding is a gather, one thread per output element; an index
outside ``[0, num_embeddings)`` is recorded in the device's error flag (Note [Device-side errors] in
``flambeau.cuda._sync``) and its row is written as zeros. :func:`embedding_renorm` rescales the
referenced rows of ``weight`` in place for ``max_norm`` on the device; :func:`embedding_backward`
(``embedding_dense_backward``) is the gradient of ``weight``, scattered with atomic adds.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import np_name
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import (
    ERR_INDEX,
    be,
    bind_numba_cuda,
    c_elem_strides,
    elem_strides,
    error_flag,
    jit,
    launch_1d,
    sim,
    stream,
)
from flambeau._kernels.cuda.bfloat16 import via_float32
from flambeau._ops._registry import kernel

__all__ = ["acc_dtype", "block", "offset_fn", "flag_fn", "block_sum_fn", "block_max_fn", "row_max_fn", "row_grid",
           "elem_strides", "softmax_kernel", "embedding_kernel", "embedding_renorm", "embedding_backward", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

FLOATS = ("float16", "float32", "float64")
ROW_BLOCK = 128  # threads per block of the row kernels (a power of two)
# weight dtypes the embedding gather is compiled for, and index dtypes
EMBED_DTYPES = ("float16", "float32", "float64", "int32", "int64", "bool")
INDEX_DTYPES = ("int32", "int64")


def acc_dtype(d) -> np.dtype:
    """The accumulator of floating dtype ``d``: float64 for float64, float32 otherwise."""
    return np.dtype(np.float64) if np.dtype(d) == np.float64 else np.dtype(np.float32)


def block() -> int:
    """Threads per block of the row kernels (4 under the simulator, which runs threads in Python)."""
    return 4 if sim() else ROW_BLOCK


# --- device functions shared with the loss kernels -----------------------------------------------------
@functools.cache
def offset_fn():
    """The row offset ``(r, shape, st) -> offset`` as a device function (``_index_math``)."""
    return index_device("row_offset")


def _flag(err, code, value, bound):
    """Record a device-side fault in error flag ``err`` (Note [Device-side errors])."""
    err[0] = code
    err[1] = value
    err[2] = bound


@functools.cache
def flag_fn():
    """:func:`_flag` as a device function."""
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_flag)


def _add(x, y):
    return x + y


def _nanmax(x, y):
    return y if y > x or y != y else x


@functools.cache
def _nanmax_fn():
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_nanmax)


def _block_reduce_py(B, combine):
    bind_numba_cuda(globals())

    def block_reduce(buf, t, v):
        """``combine`` of ``v`` over the block's ``B`` threads (thread ``t``), a tree in shared ``buf``;
        every thread gets the result, and ``buf`` may be reused at once."""
        buf[t] = v
        cuda.syncthreads()
        width = B // 2
        while width > 0:
            if t < width:
                buf[t] = combine(buf[t], buf[t + width])
            cuda.syncthreads()
            width //= 2
        r = buf[0]
        cuda.syncthreads()
        return r

    return block_reduce


def _block_sum_py(B):
    bind_numba_cuda(globals())
    return _block_reduce_py(B, cuda.jit(device=True)(_add))


def _block_max_py(B):
    return _block_reduce_py(B, _nanmax_fn())


@functools.cache
def block_sum_fn(B: int):
    """Block-wide sum over ``B`` threads as a device function ``(buf, t, v) -> sum``."""
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_block_sum_py(B))


@functools.cache
def block_max_fn(B: int):
    """Block-wide NaN-propagating maximum over ``B`` threads, a device function ``(buf, t, v) -> max``."""
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_block_max_py(B))


@functools.cache
def _row_shift_fn(B: int):
    """``(buf, t, mx) -> shift``: the block's maximum of its threads' ``mx``, NaN where it is infinite (a row
    that is all ``-inf`` or holds ``+inf`` normalises to NaN, as on the CPU), as a device function."""
    bind_numba_cuda(globals())
    bmax = block_max_fn(B)

    def row_shift(buf, t, mx):
        mx = bmax(buf, t, mx)
        if mx == math.inf or mx == -math.inf:
            mx = mx - mx
        return mx

    return cuda.jit(device=True)(row_shift)


def _row_max_py(acc, B):
    bind_numba_cuda(globals())
    nanmax = _nanmax_fn()
    shift = _row_shift_fn(B)

    def row_max(buf, t, a, base, st, n):
        """The maximum of the ``n`` elements ``a[base + j * st]`` (block-wide, thread ``t``; NaN wins), NaN where
        it is infinite (:func:`_row_shift_fn`)."""
        mx = acc(-math.inf)
        j = t
        while j < n:
            mx = nanmax(mx, acc(a[base + j * st]))
            j += B
        return shift(buf, t, mx)

    return row_max


@functools.cache
def row_max_fn(acc: str, B: int):
    """Block-wide maximum of a strided row as a device function ``(buf, t, a, base, stride, n) -> max``."""
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_row_max_py(np.dtype(acc).type, B))


# --- softmax, log_softmax ------------------------------------------------------------------------------
# Note [Softmax rows held]
#     A softmax reads its row three times (the maximum, the sum of exponentials, the output) where it reads
#     them from memory each time: on an H100, 8192 rows of 1024 float32 took 57 us against 26 us for torch,
#     which reads each row once. A row of up to ``HELD * B`` elements is held instead, ``HELD`` elements a
#     thread in registers (a local array of constant size, indexed by unrolled loops), all loaded before any
#     is used; longer rows take the three passes.
HELD = 8  # elements a thread of a softmax holds


def _softmax_py(acc, log: bool, B: int):
    """Row softmax (``log``: log_softmax) accumulating in numpy type ``acc``, ``B`` threads per row.

    Row ``m`` (unravelled over ``kshape``) starts at ``offset(m, kshape, ast)`` in ``a`` and
    ``offset(m, kshape, ost)`` in ``out``; its ``n`` elements are ``as_`` / ``os_`` apart. Rows of up to
    ``HELD * B`` elements are read once (Note [Softmax rows held]).
    """
    bind_numba_cuda(globals())
    offset = offset_fn()
    bsum = block_sum_fn(B)
    nanmax = _nanmax_fn()
    shift = _row_shift_fn(B)
    row_max = row_max_fn(np_name(acc), B)
    E = HELD

    def softmax(out, ost, os_, a, ast, as_, kshape, M, n):
        t = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        vals = cuda.local.array(E, acc)
        held = n <= B * E
        m = cuda.blockIdx.x
        while m < M:
            ba = offset(m, kshape, ast)
            bo = offset(m, kshape, ost)
            if held:
                for i in range(E):
                    j = t + i * B
                    vals[i] = acc(a[ba + j * as_]) if j < n else acc(-math.inf)
                mx = acc(-math.inf)
                for i in range(E):  # as row_max
                    mx = nanmax(mx, vals[i])
                mx = shift(buf, t, mx)
                s = acc(0)
                for i in range(E):
                    if t + i * B < n:
                        e = math.exp(vals[i] - mx)
                        s += e
                        if not log:
                            vals[i] = e
                s = bsum(buf, t, s)
                if log:
                    c = math.log(s)
                    for i in range(E):
                        j = t + i * B
                        if j < n:
                            out[bo + j * os_] = (vals[i] - mx) - c
                else:
                    inv = acc(1) / s
                    for i in range(E):
                        j = t + i * B
                        if j < n:
                            out[bo + j * os_] = vals[i] * inv
            else:
                mx = row_max(buf, t, a, ba, as_, n)
                s = acc(0)
                j = t
                while j < n:
                    s += math.exp(acc(a[ba + j * as_]) - mx)
                    j += B
                s = bsum(buf, t, s)
                if log:
                    c = math.log(s)
                    j = t
                    while j < n:
                        out[bo + j * os_] = (acc(a[ba + j * as_]) - mx) - c
                        j += B
                else:
                    inv = acc(1) / s
                    j = t
                    while j < n:
                        out[bo + j * os_] = math.exp(acc(a[ba + j * as_]) - mx) * inv
                        j += B
            m += cuda.gridDim.x

    return softmax


@functools.cache
def softmax_kernel(acc: str, log: bool, B: int = ROW_BLOCK):
    """The row softmax / log_softmax kernel accumulating in ``acc`` with ``B`` threads (cached)."""
    bind_numba_cuda(globals())
    return jit(_softmax_py(np.dtype(acc).type, log, B))


def rows_of(shape: tuple, strides: tuple, dim: int) -> tuple:
    """``(kshape, kstrides, dim stride)``: the rows along ``dim`` of an array (element strides)."""
    kshape = tuple(n for d, n in enumerate(shape) if d != dim) or (1,)
    kst = tuple(s for d, s in enumerate(strides) if d != dim) or (0,)
    return kshape, kst, strides[dim]


def row_grid(M: int) -> int:
    """Blocks of a one-block-per-row kernel over ``M`` rows (the kernels loop over the rest)."""
    return min(M, 2 if sim() else 65535)


def _softmax_launcher(log: bool):
    name = "log_softmax" if log else "softmax"

    def launch(a, dim):
        backend = be()
        d = np.dtype(a.dtype)
        if d.kind != "f":
            raise NotImplementedError(f'"{name}_lastdim_kernel_impl" not implemented for \'{d.name}\'')
        if a.ndim == 0:
            return backend.full((), 0 if log else 1, d)
        out = backend.empty(a.shape, d)
        if a.size == 0:
            return out
        kshape, kst, as_ = rows_of(a.shape, elem_strides(a), dim)
        okshape, okst, os_ = rows_of(a.shape, c_elem_strides(a.shape), dim)
        M = a.size // a.shape[dim]
        B = block()
        k = softmax_kernel(np_name(acc_dtype(d)), log, B)
        k[row_grid(M), B, stream()](backend.flat_view(out), okst, os_, backend.flat_view(a), kst, as_, kshape, M,
                                    a.shape[dim])
        return out

    launch.__name__ = name
    return launch


kernel("softmax", "cuda")(_softmax_launcher(False))
kernel("log_softmax", "cuda")(_softmax_launcher(True))


# --- embedding -----------------------------------------------------------------------------------------
def _embed_index_py():
    bind_numba_cuda(globals())
    offset = offset_fn()
    flag = flag_fn()
    quot = index_device("quot")

    def embed_index(i, D, idx, ist, ishape, rows, err):
        """``(k, j, row)`` of element ``i`` of a ``(K, D)`` embedding output: index ``k``, column ``j`` and the
        row ``idx[k]``, or -1 where it is out of range (recorded in the error flag)."""
        k = quot(i, D)
        j = i - k * D
        r = np.int64(idx[offset(k, ishape, ist)])
        if r < 0 or r >= rows:
            flag(err, ERR_INDEX, r, rows)
            r = -1
        return k, j, r

    return embed_index


@functools.cache
def _embed_index_fn():
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_embed_index_py())


def _embedding_py():
    """Gather ``out[k, j] = w[idx[k], j]`` over ``total = K * D`` elements; bad indices flag ``err``."""
    bind_numba_cuda(globals())
    embed_index = _embed_index_fn()

    def embedding(out, w, ws0, ws1, idx, ist, ishape, D, rows, total, err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            _, j, r = embed_index(i, D, idx, ist, ishape, rows, err)
            if r < 0:
                out[i] = 0
            else:
                out[i] = w[r * ws0 + j * ws1]
            i += step

    return embedding


@functools.cache
def embedding_gather_kernel():
    bind_numba_cuda(globals())
    return jit(_embedding_py())


def _index_layout(indices) -> tuple:
    """``(flat indices, element strides, shape)`` of an index array for :func:`_offset` (0-d as 1-d)."""
    if indices.ndim == 0:
        return be().flat_view(indices), (0,), (1,)
    return be().flat_view(indices), elem_strides(indices), tuple(indices.shape)


def _check_embedding_dtypes(weight, indices) -> None:
    if np.dtype(indices.dtype).name not in INDEX_DTYPES:
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {np.dtype(indices.dtype).name} instead (while checking arguments "
                           "for embedding)")
    if np.dtype(weight.dtype).name not in EMBED_DTYPES:
        raise RuntimeError(f"\"embedding_cuda\" not implemented for '{np.dtype(weight.dtype).name}'")


@kernel("embedding", "cuda")
def embedding_kernel(weight, indices):
    """CUDA ``embedding``: rows of ``weight`` gathered by ``indices`` (checked on the device)."""
    _check_embedding_dtypes(weight, indices)
    backend = be()
    rows, D = weight.shape
    out = backend.empty(tuple(indices.shape) + (D,), weight.dtype)
    total = out.size
    if total == 0:
        return out
    flat, ist, ishape = _index_layout(indices)
    ws0, ws1 = elem_strides(weight)
    grid, blk = launch_1d(total)
    embedding_gather_kernel()[grid, blk, stream()](backend.flat_view(out), backend.flat_view(weight), ws0, ws1, flat,
                                                   ist, ishape, D, rows, total, error_flag())
    return out


def _renorm_py(acc):
    """Rescale each marked row of ``w`` whose ``p``-norm exceeds ``max_norm`` (one thread per row)."""
    bind_numba_cuda(globals())

    def renorm_rows(w, ws0, ws1, mark, rows, D, max_norm, p):
        r = cuda.grid(1)
        step = cuda.gridsize(1)
        while r < rows:
            if mark[r]:
                norm = acc(0)
                for j in range(D):
                    v = abs(acc(w[r * ws0 + j * ws1]))
                    if p == math.inf:
                        norm = v if v > norm else norm
                    elif p == 0:
                        norm += acc(1) if v != 0 else acc(0)
                    elif p == 1:
                        norm += v
                    elif p == 2:
                        norm += v * v
                    else:
                        norm += v ** p
                if p == 2:
                    norm = math.sqrt(norm)
                elif p != math.inf and p != 0 and p != 1:
                    norm = norm ** (acc(1) / p)
                if norm > max_norm:
                    scale = max_norm / (norm + acc(1e-7))
                    for j in range(D):
                        o = r * ws0 + j * ws1
                        w[o] = acc(w[o]) * scale
            r += step

    return renorm_rows


@functools.cache
def _renorm_kernels(acc: str):
    bind_numba_cuda(globals())
    return _compiled(_count_py, "int32"), jit(_renorm_py(np.dtype(acc).type))  # (a count above 0 marks a row)


@functools.partial(via_float32, writes=("weight",))  # called by the front directly (Note [bfloat16 on CUDA])
def embedding_renorm(weight, indices, max_norm: float, norm_type: float) -> None:
    """``max_norm`` of embedding on the device: rows of ``weight`` referenced by ``indices`` whose
    ``norm_type``-norm exceeds ``max_norm`` are scaled to it in place (floating weights)."""
    d = np.dtype(weight.dtype)
    if d.kind != "f":
        raise RuntimeError(f"\"embedding_renorm_cuda_\" not implemented for '{d.name}'")
    backend = be()
    rows, D = weight.shape
    if indices.size == 0 or rows == 0:
        return
    acc = acc_dtype(d)
    mark_k, renorm_k = _renorm_kernels(np_name(acc))
    mark = backend.full((rows,), 0, np.int32)
    flat, ist, ishape = _index_layout(indices)
    s = stream()
    grid, blk = launch_1d(indices.size)
    mark_k[grid, blk, s](mark, flat, ist, ishape, indices.size, rows)
    ws0, ws1 = elem_strides(weight)
    grid, blk = launch_1d(rows)
    renorm_k[grid, blk, s](backend.flat_view(weight), ws0, ws1, mark, rows, D, acc.type(max_norm),
                           acc.type(norm_type))


def _embedding_backward_py(acc):
    """``gw[idx[k], j] += g[k, j]`` (in numpy type ``acc``) with atomic adds, skipping ``padding_idx`` and
    bad indices; each divided by its row's count in ``counts`` where ``scale`` (scale_grad_by_freq)."""
    bind_numba_cuda(globals())
    offset = offset_fn()
    embed_index = _embed_index_fn()

    def embedding_backward(gw, g, gk, gj, idx, ist, ishape, D, rows, total, padding_idx, counts, scale, err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            k, j, r = embed_index(i, D, idx, ist, ishape, rows, err)
            if r >= 0 and r != padding_idx:
                v = acc(g[offset(k, ishape, gk) + j * gj])
                if scale:
                    v = v / counts[r]
                cuda.atomic.add(gw, r * D + j, v)
            i += step

    return embedding_backward


def _count_py(acc):
    """``counts[idx[k]] += 1`` for every in-range index, in numpy type ``acc``: scale_grad_by_freq's frequencies,
    and the rows ``max_norm`` renormalises (int32)."""
    bind_numba_cuda(globals())
    offset = offset_fn()

    def count_rows(counts, idx, ist, ishape, K, rows):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < K:
            r = idx[offset(i, ishape, ist)]
            if r >= 0 and r < rows:
                cuda.atomic.add(counts, r, acc(1))
            i += step

    return count_rows


@functools.cache
def _compiled(builder, acc: str):
    """The kernel ``builder(acc's numpy type)`` makes, compiled once per accumulation dtype ``acc``."""
    bind_numba_cuda(globals())
    return jit(builder(np.dtype(acc).type))


@kernel("embedding_dense_backward", "cuda")
def embedding_backward(grad, indices, num_weights: int, padding_idx: int, scale_grad_by_freq: bool):
    """CUDA ``embedding_dense_backward``: the gradient of embedding's ``weight``, ``(num_weights, D)`` zeros plus
    each row of ``grad`` (shape ``indices.shape + (D,)``) added at its index, atomically; row ``padding_idx`` (-1:
    none) gets nothing; with ``scale_grad_by_freq`` each row divided by its index's count in ``indices`` (counted
    first, atomically). float32 and float64 add in their dtype, float16 in float32 (cast at the end). The order of
    the atomic adds makes float results nondeterministic in the last bits where an index repeats (torch sorts the
    indices and reduces segments to be deterministic; this is the plain scatter). An index out of range is
    recorded in the device's error flag (Note [Device-side errors]) and adds nothing."""
    backend = be()
    d = np.dtype(grad.dtype)
    if d.kind != "f":
        raise RuntimeError(f"\"embedding_backward_cuda\" not implemented for '{d.name}'")
    D = grad.shape[-1]
    acc = np.dtype(np.float32) if d == np.float16 else d
    gw = backend.full((num_weights, D), 0, acc)
    total = indices.size * D
    if total:
        flat, ist, ishape = _index_layout(indices)
        s = stream()
        counts = gw  # (never read without scale_grad_by_freq; of ``acc`` as the kernel's signature wants)
        if scale_grad_by_freq:
            counts = backend.full((num_weights,), 0, acc)
            grid, blk = launch_1d(indices.size)
            _compiled(_count_py, np_name(acc))[grid, blk, s](backend.flat_view(counts), flat, ist, ishape,
                                                             indices.size, num_weights)
        gst = elem_strides(grad)
        gk = gst[:-1] if indices.ndim else (0,)
        grid, blk = launch_1d(total)
        _compiled(_embedding_backward_py, np_name(acc))[grid, blk, s](
            backend.flat_view(gw), backend.flat_view(grad), gk, gst[-1], flat, ist, ishape, D, num_weights, total,
            int(padding_idx), backend.flat_view(counts), bool(scale_grad_by_freq), error_flag())
    if acc != d:
        from flambeau._kernels.cuda.core import copy_into

        out = backend.empty(gw.shape, d)
        copy_into(out, gw)
        return out
    return gw


# --- concrete signatures (PTX test) ------------------------------------------------------------------
def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of this family's kernels, for the PTX compilation test."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64 = types.int64
    idx = types.UniTuple(i64, ndim)
    err = types.Array(i64, 1, "C")

    def arr(dn):
        return types.Array(from_dtype(np.dtype(dn)), 1, "C")

    cases = []
    for dn in FLOATS:
        acc = acc_dtype(dn)
        for log in (False, True):
            sig = (arr(dn), idx, i64, arr(dn), idx, i64, idx, i64, i64)
            cases.append((f"{'log_' if log else ''}softmax:{dn}", _softmax_py(acc.type, log, ROW_BLOCK), sig))
        at = from_dtype(acc)
        cases.append((f"embedding_renorm:{dn}", _renorm_py(acc.type),
                      (arr(dn), i64, i64, arr("int32"), i64, i64, at, at)))
    for dn in EMBED_DTYPES:
        for ix in INDEX_DTYPES:
            sig = (arr(dn), arr(dn), i64, i64, arr(ix), idx, idx, i64, i64, i64, err)
            cases.append((f"embedding:{dn}:{ix}", _embedding_py(), sig))
    for ix in INDEX_DTYPES:
        for dn, acc in (("float16", "float32"), ("float32", "float32"), ("float64", "float64")):
            sig = (arr(acc), arr(dn), idx, i64, arr(ix), idx, idx, i64, i64, i64, i64, arr(acc), types.boolean, err)
            cases.append((f"embedding_backward:{dn}:{ix}", _embedding_backward_py(np.dtype(acc).type), sig))
        for acc in ("int32", "float32", "float64"):
            cases.append((f"embedding_count:{acc}:{ix}", _count_py(np.dtype(acc).type),
                          (arr(acc), arr(ix), idx, idx, i64, i64)))
    return cases
