"""CUDA kernels of the linear algebra of ``flambeau._ops.linalg`` (whose docstring gives the conventions).

Three numba.cuda templates serve the family:

- :func:`matmul_kernel`: a tiled shared-memory batched GEMM ``c = a @ b`` (``matmul``, ``mm``,
  ``bmm``, and the products einsum, tensordot and inner are composed of);
- :func:`addmm_kernel`: the same GEMM with the epilogue ``c = alpha * sum_kz a[kz] @ b[kz] + beta
  * x`` (``x`` the broadcast input), so ``addmm``, ``baddbmm`` and ``addbmm`` are one launch;
- :func:`rowdot_kernel`: one block per output element reducing ``sum_k a[k] * b[k]`` (or
  ``sum_k a[k]``) in a shared-memory tree, with the same epilogue: ``dot``, ``vdot``, ``mv``,
  ``addmv``, ``trace``, matrix-vector ``matmul`` and the sums of ``einsum``.

cuBLAS (:mod:`flambeau._kernels.cuda._cublas`) takes the GEMMs of float16/32/64 on a real GPU
when libcublas loads (float16 computing in float32); the numba kernels serve everything else,
the simulator included. ``outer`` and ``kron`` are the elementwise ``mul`` over broadcast views;
``diagonal`` is a view; ``diag`` and ``diag_embed`` copy through it. ``einsum`` and ``tensordot``
contract operand pairs through diagonal and permuted views and the batched GEMM (:func:`_contract`),
copying only dims that cannot merge; bool operands compute in int64. float16 accumulates in
float32, integers in int64. Nothing here waits for the device.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import from_numpy_dtype, np_name, scalar_name
from flambeau._kernels.cuda import _cublas
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import (
    REDUCE_BLOCK,
    TILE,
    be,
    bind_numba_cuda,
    block_sums,
    c_elem_strides,
    jit,
    launch_1d,
    row_parts,
    sim,
    stream,
)
from flambeau._kernels.cuda.complex import conj_physical
from flambeau._kernels.cuda.core import contiguous, copy_into, fill
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._kernels.cuda.reduction import _reduce_sum
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

__all__ = ["matmul_kernel", "addmm_kernel", "rowdot_kernel", "matmul", "scaled_matmul", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

_MAX_GRID_Z = 65535


# --- device functions ---------------------------------------------------------------------------
def _tile_dot_py(acc, T):
    """``s + sum_k a[aoff + row*ars + k*acs] * b[boff + k*brs + col*bcs]`` for this thread's
    ``(row, col)``, staged through ``T x T`` shared tiles (every thread of the block calls it)."""
    bind_numba_cuda(globals())
    def tile_dot(a, aoff, ars, acs, b, boff, brs, bcs, row, col, M, N, K, s):
        sa = cuda.shared.array((T, T), acc)
        sb = cuda.shared.array((T, T), acc)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        for t0 in range(0, K, T):
            ka = t0 + tx
            if row < M and ka < K:
                sa[ty, tx] = acc(a[aoff + row * ars + ka * acs])
            else:
                sa[ty, tx] = acc(0)
            kb = t0 + ty
            if col < N and kb < K:
                sb[ty, tx] = acc(b[boff + kb * brs + col * bcs])
            else:
                sb[ty, tx] = acc(0)
            cuda.syncthreads()
            for kk in range(T):
                s += sa[ty, kk] * sb[kk, tx]
            cuda.syncthreads()
        return s

    return tile_dot


def _unravel_fn():
    """The offset of a flat batch index unravelled over a shape with strides, ``(z, shape, st) -> offset``."""
    return index_device("row_offset")


@functools.cache
def _tile_dot_fn(acc: str, T: int):
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_tile_dot_py(np.dtype(acc).type, T))


# --- kernel templates -----------------------------------------------------------------------------
def _matmul_py(acc, T=TILE):
    """Tiled batched GEMM: ``c[z, i, j] = sum_k a[z, i, k] * b[z, k, j]`` (``c`` C-contiguous).

    Batch ``z`` unravels over ``bshape`` with batch strides ``abst`` / ``bbst`` (0 where a
    batch dimension broadcasts); ``ars, acs`` / ``brs, bcs`` are row and column strides.
    """
    bind_numba_cuda(globals())
    unravel, tile_dot = _unravel_fn(), _tile_dot_fn(np_name(acc), T)

    def matmul(c, a, abst, ars, acs, b, bbst, brs, bcs, bshape, M, N, K):
        row = cuda.blockIdx.y * T + cuda.threadIdx.y
        col = cuda.blockIdx.x * T + cuda.threadIdx.x
        z = cuda.blockIdx.z
        s = tile_dot(a, unravel(z, bshape, abst), ars, acs, b, unravel(z, bshape, bbst), brs, bcs,
                     row, col, M, N, K, acc(0))
        if row < M and col < N:
            c[(z * M + row) * N + col] = s

    return matmul


def _addmm_py(acc, T=TILE):
    """GEMM with epilogue: ``c[z, i, j] = alpha * sum_{q < KZ} a[z, q] @ b[z, q] + beta * x[z, i, j]``.

    As :func:`_matmul_py`, plus: ``azs`` / ``bzs`` step the ``KZ`` summed batches (addbmm), ``x``
    is read with batch strides ``xbst`` and row/column strides ``xrs, xcs`` when ``use_x``.
    """
    bind_numba_cuda(globals())
    unravel, tile_dot = _unravel_fn(), _tile_dot_fn(np_name(acc), T)

    def addmm(c, a, abst, ars, acs, azs, b, bbst, brs, bcs, bzs, bshape, M, N, K, KZ,
              x, xbst, xrs, xcs, use_x, alpha, beta):
        row = cuda.blockIdx.y * T + cuda.threadIdx.y
        col = cuda.blockIdx.x * T + cuda.threadIdx.x
        z = cuda.blockIdx.z
        aoff = unravel(z, bshape, abst)
        boff = unravel(z, bshape, bbst)
        s = acc(0)
        for q in range(KZ):
            s = tile_dot(a, aoff + q * azs, ars, acs, b, boff + q * bzs, brs, bcs, row, col, M, N, K, s)
        if row < M and col < N:
            v = alpha * s
            if use_x:
                v += beta * acc(x[unravel(z, bshape, xbst) + row * xrs + col * xcs])
            c[(z * M + row) * N + col] = v

    return addmm


def _gemm_each_py(acc, _unused=0):
    """GEMM with the epilogue of :func:`_addmm_py`, one output element per thread in a grid-stride loop,
    no shared memory. Note [GEMMs under the simulator]: the simulator runs every GPU thread as a
    Python thread, and the tiled kernels' two barriers per tile make any product of more than a few
    tiles crawl there (a tiny ResNet's step took minutes); so under the simulator products of more
    than :data:`_SIM_TILED_OUT` outputs or :data:`_SIM_TILED_K` summed terms run through this kernel,
    while the small ones of the linear-algebra tests keep exercising the tiled kernels. On a GPU it is
    never used."""
    bind_numba_cuda(globals())
    unravel = _unravel_fn()

    def gemm_each(c, a, abst, ars, acs, azs, b, bbst, brs, bcs, bzs, bshape, M, N, K, KZ,
                  x, xbst, xrs, xcs, use_x, alpha, beta, total):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            col = i % N
            row = (i // N) % M
            z = i // (M * N)
            aoff = unravel(z, bshape, abst) + row * ars
            boff = unravel(z, bshape, bbst) + col * bcs
            s = acc(0)
            for q in range(KZ):
                for k in range(K):
                    s += acc(a[aoff + q * azs + k * acs]) * acc(b[boff + q * bzs + k * brs])
            v = alpha * s
            if use_x:
                v += beta * acc(x[unravel(z, bshape, xbst) + row * xrs + col * xcs])
            c[i] = v
            i += step

    return gemm_each


_SIM_TILED_OUT = 16  # outputs (batch included) and summed terms above which the simulator takes _gemm_each_py
_SIM_TILED_K = 8


def _rowdot_py(acc, B=REDUCE_BLOCK):
    """Block-tree reduction: output ``m`` (unravelled over ``mshape``) is ``sum_k a[.] * b[.]``
    (``sum_k a[.]`` without ``use_b``) over ``k`` unravelled over ``kshape``.

    Block ``(m, p)`` of ``P`` per output sums elements ``p*B + t, p*B + t + P*B, ...`` and writes
    ``out[m * P + p]``; with ``P == 1`` it writes ``alpha * sum + beta * x[m]`` (``x`` read when
    ``use_x``), else the raw partial sum (a second pass adds the partials).
    """
    bind_numba_cuda(globals())
    unravel = _unravel_fn()
    block_sum, _ = block_sums()

    def rowdot(out, a, amst, akst, b, bmst, bkst, use_b, mshape, kshape, K, P, x, xmst, use_x, alpha, beta):
        m = cuda.blockIdx.x
        p = cuda.blockIdx.y
        t = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        abase = unravel(m, mshape, amst)
        bbase = unravel(m, mshape, bmst)
        s = acc(0)
        k = p * B + t
        step = P * B
        while k < K:
            v = acc(a[abase + unravel(k, kshape, akst)])
            if use_b:
                v *= acc(b[bbase + unravel(k, kshape, bkst)])
            s += v
            k += step
        buf[t] = s
        block_sum(buf, t, B)
        if t == 0:
            v = buf[0]
            if P == 1:
                v = alpha * v
                if use_x:
                    v += beta * acc(x[unravel(m, mshape, xmst)])
            out[m * P + p] = v

    return rowdot


@functools.cache
def _compiled(template, acc: str, size: int):
    bind_numba_cuda(globals())
    return jit(template(np.dtype(acc).type, size))


def matmul_kernel(acc: str, tile: int = TILE):
    """The tiled matmul kernel computing in numpy dtype ``acc`` with ``tile`` x ``tile`` blocks (cached)."""
    return _compiled(_matmul_py, acc, tile)


def addmm_kernel(acc: str, tile: int = TILE):
    """The tiled GEMM with the alpha/beta epilogue, computing in numpy dtype ``acc`` (cached)."""
    return _compiled(_addmm_py, acc, tile)


def rowdot_kernel(acc: str, block: int = REDUCE_BLOCK):
    """The block-tree dot/sum kernel accumulating in numpy dtype ``acc``, ``block`` threads (cached)."""
    return _compiled(_rowdot_py, acc, block)


# --- host helpers -------------------------------------------------------------------------------
def _acc(d: np.dtype) -> np.dtype:
    """Accumulator dtype: float32 for float16/32, float64 and the complex dtypes themselves, int64 for
    every integer."""
    d = np.dtype(d)
    if d == np.float64 or d.kind == "c":
        return d
    if d.kind == "f":
        return np.dtype(np.float32)
    return np.dtype(np.int64)


def _product_dtype(compute: np.dtype, name: str = "addmm_cuda") -> np.dtype:
    if compute == np.bool_ or compute.kind not in "fiuc":  # complex: numba's kernels (cuBLAS takes reals only here)
        raise RuntimeError(f"\"{name}\" not implemented for '{scalar_name(compute)}'")
    return compute


def _est(x) -> list:
    """Element strides of device array ``x``."""
    item = x.dtype.itemsize
    return [s // item for s in x.strides]


def _view(x, shape, strides, offset: int = 0):
    """A view of ``x``'s memory (element ``strides`` and ``offset`` from its first element)."""
    shape = tuple(int(n) for n in shape)
    if 0 in shape:
        offset = 0
    return be().as_strided(be().flat_view(x), shape, tuple(int(s) for s in strides), int(offset))


def _merge(x, groups):
    """``x`` with each group of consecutive dims (lengths in ``groups``) merged into one: a view
    when the strides allow, else a C-contiguous copy merged."""
    sh, st = list(x.shape), _est(x)
    if x.size == 0:
        shape = [math.prod(sh[sum(groups[:i]):sum(groups[:i + 1])]) for i in range(len(groups))]
        return _view(x, shape, c_elem_strides(shape))
    shape, strides, d = [], [], 0
    for g in groups:
        dims = [i for i in range(d, d + g) if sh[i] != 1]
        d += g
        n = math.prod(sh[i] for i in dims) if dims else 1
        for i, j in zip(dims, dims[1:]):
            if st[i] != st[j] * sh[j]:
                return _merge(contiguous(x), groups)
        shape.append(n)
        strides.append(st[dims[-1]] if dims else 0)
    return _view(x, shape, strides)


def _out_shape(x, shape):
    """C-contiguous ``x`` (a fresh result) viewed as ``shape``."""
    shape = tuple(shape)
    return x if tuple(x.shape) == shape else _view(x, shape, c_elem_strides(shape))


def _cast(arr, dtype):
    out = be().empty(arr.shape, dtype)
    copy_into(out, arr)
    return out


def _batch_strides(sh, st, nb):
    """Batch strides of a ``(*batch, rows, cols)`` operand aligned to ``nb`` broadcast batch dims."""
    out = [0] * nb
    off = nb - (len(sh) - 2)
    for i in range(len(sh) - 2):
        out[off + i] = 0 if sh[i] == 1 else st[i]
    return out


def _collapse(batch, *strides):
    """Merge adjacent batch dims whose strides agree for every operand; size-1 dims drop out."""
    dims = [d for d in range(len(batch)) if batch[d] != 1]
    shape, sts = [], [[] for _ in strides]
    for d in dims:
        if shape and all(s[-1] == st[d] * batch[d] for s, st in zip(sts, strides)):
            shape[-1] *= batch[d]
            for s, st in zip(sts, strides):
                s[-1] = st[d]
            continue
        shape.append(batch[d])
        for s, st in zip(sts, strides):
            s.append(st[d])
    return shape, sts


def _gemm(out, a, A, b, B, batch, M, N, K, x=None, X=None, alpha=1, beta=0, KZ=1, zs=(0, 0)):
    """``out = alpha * sum_{q<KZ} a[q] @ b[q] + beta * x`` into C-contiguous ``out`` (batch + (M, N)).

    ``A = (batch strides, row stride, column stride)`` of ``a`` in elements (likewise ``B``,
    and ``X`` for the broadcast input ``x``); ``zs`` are the strides of the ``KZ`` summed batches.
    """
    backend = be()
    compute = np.dtype(out.dtype)
    epi = x is not None or alpha != 1 or KZ != 1
    if K == 0 or KZ == 0:
        if x is None or beta == 0:
            fill(out, 0)
        else:
            _scale_into(out, x, beta)
        return
    strides = [A[0], B[0]] + ([X[0]] if x is not None else [])
    cb, (abst, bbst, *xb) = _collapse(list(batch), *strides)
    if x is None and KZ == 1 and len(cb) == 1 and bbst[0] == 0 and abst[0] == M * A[1] and M * A[1] != 0:
        # Note [Folding batch dims]: a broadcast right operand makes one GEMM of Z*M rows.
        M, cb, abst, bbst = M * cb[0], [], [], []
    if not sim() and _cublas_gemm(out, a, (abst, A[1], A[2]), b, (bbst, B[1], B[2]), cb, M, N, K, x, alpha, beta,
                                  KZ, zs):
        return
    acc = _acc(compute)
    if a.dtype != compute:
        a = _cast(a, compute)
    if b.dtype != compute:
        b = _cast(b, compute)
    T = 4 if sim() else TILE
    grid = ((N + T - 1) // T, (M + T - 1) // T, math.prod(cb))
    if grid[1] > _MAX_GRID_Z or grid[2] > _MAX_GRID_Z:
        raise RuntimeError(f"matmul on CUDA without cuBLAS supports at most {_MAX_GRID_Z} batches and "
                           f"{_MAX_GRID_Z * T} rows, got {grid[2]} and {M}")
    bshape = tuple(cb) or (1,)
    fa, fb, fo = backend.flat_view(a), backend.flat_view(b), backend.flat_view(out)
    each = sim() and (math.prod(cb) * M * N > _SIM_TILED_OUT or K * KZ > _SIM_TILED_K)  # Note [GEMMs under the ...]
    if not epi and not each:
        matmul_kernel(np_name(acc), T)[grid, (T, T), stream()](
            fo, fa, tuple(abst) or (0,), A[1], A[2], fb, tuple(bbst) or (0,), B[1], B[2], bshape, M, N, K)
        return
    use_x = x is not None and beta != 0
    xf, xbst, xrs, xcs = fo, (0,) * len(bshape), 0, 0
    if use_x:
        xf, xbst, xrs, xcs = backend.flat_view(x), tuple(xb[0]) or (0,), X[1], X[2]
    args = (fo, fa, tuple(abst) or (0,), A[1], A[2], zs[0], fb, tuple(bbst) or (0,), B[1], B[2], zs[1], bshape,
            M, N, K, KZ, xf, xbst, xrs, xcs, use_x, acc.type(alpha), acc.type(beta))
    if each:
        total = math.prod(cb) * M * N
        g, blk = launch_1d(total)
        _compiled(_gemm_each_py, np_name(acc), 0)[g, blk, stream()](*args, total)
        return
    addmm_kernel(np_name(acc), T)[grid, (T, T), stream()](*args)


def _cublas_gemm(out, a, A, b, B, batch, M, N, K, x, alpha, beta, KZ, zs) -> bool:
    """The GEMM of :func:`_gemm` on cuBLAS (a real GPU only); False when cuBLAS cannot take it (cffi and the
    library load on first use)."""
    if a.dtype != out.dtype or b.dtype != out.dtype or not _cublas.supports(out.dtype, A[1], A[2], B[1], B[2], M, N, K):
        return False
    if not _cublas.available():
        return False
    use_x = x is not None and beta != 0
    if use_x:
        copy_into(out, x)  # C = broadcast input, then C = beta * C + alpha * A @ B
    for q in range(KZ):  # addbmm: one GEMM per summed batch, accumulating into C after the first
        _cublas.gemm(out, a, b, (A[0], A[1], A[2], q * zs[0]), (B[0], B[1], B[2], q * zs[1]), batch, M, N, K,
                     float(alpha), 1.0 if q else float(beta) if use_x else 0.0, be(), stream())
    return True


def _scale_into(out, x, beta) -> None:
    """``out = beta * x`` (``x`` broadcast to ``out``)."""
    _MUL(_view(x, out.shape, _x_strides(x, out.shape)), beta, from_numpy_dtype(out.dtype), out=out)


_MUL = binary_launcher("mul")


def _rowdot(out_dtype, a, amst, akst, b, bmst, bkst, mshape, kshape, x=None, xmst=None, alpha=1, beta=0):
    """C-contiguous array of ``mshape``: ``alpha * sum_k a*b + beta * x`` (``b`` None: ``sum_k a``)."""
    backend = be()
    out_dtype = np.dtype(out_dtype)
    M = math.prod(mshape)
    K = math.prod(kshape)
    out = backend.empty(tuple(mshape), out_dtype)
    if M == 0:
        return out
    use_x = x is not None and beta != 0
    if K == 0:
        if use_x:
            _scale_into(out, x, beta)
        else:
            fill(out, 0)
        return out
    acc = _acc(out_dtype)
    ms = tuple(mshape) or (1,)
    ks = tuple(kshape)
    use_b = b is not None
    amst = tuple(amst) or (0,)
    bmst, bkst = ((tuple(bmst) or (0,)), tuple(bkst)) if use_b else ((0,) * len(ms), (0,) * len(ks))
    fa = backend.flat_view(a)
    fb = backend.flat_view(b) if use_b else fa
    B = 8 if sim() else (REDUCE_BLOCK if K > 64 else 32)
    P = row_parts(K, B)
    s = stream()
    fo = backend.flat_view(out)
    xf = backend.flat_view(x) if use_x else fo
    xs = (tuple(xmst) or (0,)) if use_x else (0,) * len(ms)
    if P == 1:
        rowdot_kernel(np_name(acc), B)[(M, 1), B, s](fo, fa, amst, tuple(akst), fb, bmst, bkst, use_b, ms, ks,
                                                  K, 1, xf, xs, use_x, acc.type(alpha), acc.type(beta))
        return out
    part = backend.empty((M * P,), acc)
    one, zero = acc.type(1), acc.type(0)
    rowdot_kernel(np_name(acc), B)[(M, P), B, s](part, fa, amst, tuple(akst), fb, bmst, bkst, use_b, ms, ks,
                                             K, P, part, (0,) * len(ms), False, one, zero)
    pst = tuple(P * st for st in c_elem_strides(ms))  # the partials, viewed as (*mshape, P)
    rowdot_kernel(np_name(acc), B)[(M, 1), B, s](fo, part, pst, (1,), part, pst, (1,), False, ms, (P,), P, 1,
                                             xf, xs, use_x, acc.type(alpha), acc.type(beta))
    return out


# --- matmul, mm, bmm, mv, dot, vdot ---------------------------------------------------------------
@kernel("matmul", "cuda")
@kernel("mm", "cuda")
@kernel("bmm", "cuda")
@kernel("mv", "cuda")
def matmul(a, b):
    """CUDA ``matmul`` with torch's rules: 1-d operands are promoted, batch dims broadcast.

    A matrix with contiguous rows times a vector is a block-tree reduction per output element;
    everything else is a GEMM (cuBLAS for float16/32/64 on a real GPU, else the tiled numba kernel).
    float16 accumulates in float32, integers in int64.
    """
    return scaled_matmul(a, b, 1)


def scaled_matmul(a, b, alpha):
    """``alpha * matmul(a, b)``, the scale in the GEMM's epilogue (for other CUDA kernels: attention's backward)."""
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    ash, ast = list(a.shape), _est(a)
    bsh, bst = list(b.shape), _est(b)
    if squeeze_a:
        ash, ast = [1] + ash, [0] + ast
    if squeeze_b:
        bsh, bst = bsh + [1], bst + [0]
    M, K = ash[-2], ash[-1]
    K2, N = bsh[-2], bsh[-1]
    if K != K2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({M}x{K} and {K2}x{N})")
    batch = list(broadcast_shapes(tuple(ash[:-2]), tuple(bsh[:-2])))
    nb = len(batch)
    abst, bbst = _batch_strides(ash, ast, nb), _batch_strides(bsh, bst, nb)
    compute = _product_dtype(np.result_type(a.dtype, b.dtype))
    shape = list(batch) + ([] if squeeze_a else [M]) + ([] if squeeze_b else [N])
    if squeeze_b and (squeeze_a or M == 1 or ast[-1] == 1):  # rows read coalesced (else a GEMM is faster)
        if a.dtype != compute:
            a = _cast(a, compute)
        if b.dtype != compute:
            b = _cast(b, compute)
        # out[batch, i, j] = sum_k a[batch, i, k] * b[batch, k, j] with i or j of size 1
        mshape = batch + [M, N]
        amst = abst + [0 if M == 1 else ast[-2], 0]
        bmst = bbst + [0, 0 if N == 1 else bst[-1]]
        out = _rowdot(compute, a, amst, (ast[-1],), b, bmst, (bst[-2],), mshape, (K,), alpha=alpha)
        return _out_shape(out, shape)
    out = be().empty(tuple(batch) + (M, N), compute)
    if out.size:
        _gemm(out, a, (abst, ast[-2], ast[-1]), b, (bbst, bst[-2], bst[-1]), batch, M, N, K, alpha=alpha)
    return _out_shape(out, shape)


@kernel("dot", "cuda")
def dot(a, b):
    """Dot product of two 1-d device arrays of one dtype (0-d result)."""
    compute = _product_dtype(np.result_type(a.dtype, b.dtype), "dot")
    return _rowdot(compute, a, (), _est(a), b, (), _est(b), (), a.shape)


@kernel("vdot", "cuda")
def vdot(a, b):
    """``dot(conj(a), b)``: ``dot`` for real dtypes."""
    if np.dtype(a.dtype).kind == "c":
        a = conj_physical(a)
    return dot(a, b)


# --- addmm, addmv, baddbmm, addbmm --------------------------------------------------------------------
def _x_strides(x, shape):
    """Element strides of ``x`` broadcast to ``shape`` (0 on broadcast dims)."""
    st = [0] * len(shape)
    off = len(shape) - x.ndim
    for i, (n, s) in enumerate(zip(x.shape, _est(x))):
        st[off + i] = 0 if n == 1 else s
    return st


def _add_product(x, a, b, beta, alpha, summed: bool):
    """``beta * x + alpha * (a @ b)`` for 2-d or 3-d ``a``, ``b`` (``summed``: sum over the batch)."""
    compute = _product_dtype(np.dtype(a.dtype))
    sa, sb = _est(a), _est(b)
    if a.ndim == 2:
        batch, zs, KZ = [], (0, 0), 1
        a_, b_ = ([], sa[0], sa[1]), ([], sb[0], sb[1])
    elif summed:
        batch, zs, KZ = [], (sa[0], sb[0]), a.shape[0]
        a_, b_ = ([], sa[1], sa[2]), ([], sb[1], sb[2])
    else:
        batch, zs, KZ = [a.shape[0]], (0, 0), 1
        a_, b_ = ([sa[0]], sa[1], sa[2]), ([sb[0]], sb[1], sb[2])
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    shape = tuple(batch) + (M, N)
    xs = _x_strides(x, shape)
    out = be().empty(shape, compute)
    if out.size:
        _gemm(out, a, a_, b, b_, batch, M, N, K, x, (xs[:-2], xs[-2], xs[-1]), alpha, beta, KZ, zs)
    return out


@kernel("addmm", "cuda")
@kernel("baddbmm", "cuda")
def addmm(input, a, b, beta, alpha):
    """``beta * input + alpha * (a @ b)`` in one GEMM launch (cuBLAS: a broadcast copy of ``input``, then
    one call)."""
    return _add_product(input, a, b, beta, alpha, False)


def _matrix_rows(a) -> tuple:
    """``(a, (row stride, column stride))``: ``a`` as the matrix of its folded leading dims' rows, in elements. A
    matrix is read as it is, whatever its strides; an array of more dims is made C-contiguous first."""
    if a.ndim == 2:
        return a, tuple(_est(a))
    if not be().is_c_contiguous(a):
        a = contiguous(a)
    return a, (a.shape[-1], 1)


@kernel("linear", "cuda")
def linear(x, w, b):
    """``x @ w.T + b`` in one GEMM over the rows of ``x``'s folded leading dims (a strided ``x`` of more than two
    dims is copied contiguous first), the bias in its epilogue as addmm's ``input`` (Note [Linear as one
    operator]). The operands go to the GEMM as memory and strides: no view is made of them."""
    out_f, k = w.shape
    sw = _est(w)
    x, (xr, xc) = _matrix_rows(x)
    A = ([], xr, xc)
    rows = math.prod(x.shape[:-1])
    out = be().empty((*x.shape[:-1], out_f), _product_dtype(np.dtype(x.dtype)))
    if out.size:
        W = ([], sw[1], sw[0])  # w.T
        if b is None:
            _gemm(out, x, A, w, W, [], rows, out_f, k)
        else:
            xs = _x_strides(b, (rows, out_f))
            _gemm(out, x, A, w, W, [], rows, out_f, k, b, ([], xs[0], xs[1]), 1, 1)
    return out


@kernel("linear_backward", "cuda")
def linear_backward(g, x, w, mask):
    """``(g2 @ w, g2.T @ x2, g2's column sums)`` over the folded rows ``g2`` of ``g`` and ``x2`` of ``x``: two GEMMs
    (cuBLAS on a GPU) reading the operands in place where they are matrices or C-contiguous, and one column
    reduction (Note [Linear as one operator])."""
    backend = be()
    out_f, k = w.shape
    rows = math.prod(x.shape[:-1])
    compute = np.dtype(g.dtype)
    gi = gw = gb = None
    g, (gr, gc) = _matrix_rows(g)
    if mask[0]:
        gi = backend.empty(tuple(x.shape), compute)
        if gi.size:
            sw = _est(w)
            _gemm(gi, g, ([], gr, gc), w, ([], sw[0], sw[1]), [], rows, k, out_f)
    if mask[1]:
        x, (xr, xc) = _matrix_rows(x)
        gw = backend.empty((out_f, k), compute)
        if gw.size:
            _gemm(gw, g, ([], gc, gr), x, ([], xr, xc), [], out_f, k, rows)  # g2.T @ x2
    if mask[2]:
        gb = _reduce_sum(g, tuple(range(g.ndim - 1)), False, compute)
    return gi, gw, gb


@kernel("addbmm", "cuda")
def addbmm(input, a, b, beta, alpha):
    """``beta * input + alpha * sum_i a[i] @ b[i]``: the GEMM sums the batches in its K loop."""
    return _add_product(input, a, b, beta, alpha, True)


@kernel("addmv", "cuda")
def addmv(input, a, b, beta, alpha):
    """``beta * input + alpha * (a @ b)``: one block-tree reduction per row with the epilogue."""
    x = input
    compute = _product_dtype(np.dtype(a.dtype), "addmv_impl_cuda")
    sa, sb = _est(a), _est(b)
    n = a.shape[0]
    return _rowdot(compute, a, (sa[0],), (sa[1],), b, (0,), (sb[0],), (n,), (a.shape[1],), x,
                   tuple(_x_strides(x, (n,))), alpha, beta)


# --- outer, kron, inner ---------------------------------------------------------------------------
@kernel("outer", "cuda")
def outer(a, b):
    """``a[i] * b[j]``: the elementwise mul of ``a`` viewed as a column and ``b``."""
    col = _view(a, (a.shape[0], 1), (_est(a)[0], 0))
    return _MUL(col, b, from_numpy_dtype(np.result_type(a.dtype, b.dtype)))


@kernel("kron", "cuda")
def kron(a, b):
    """Kronecker product: the mul of ``a`` and ``b`` broadcast to the interleaved shape
    ``(a0, b0, a1, b1, ...)``, written into a view of the C-contiguous result."""
    nd = max(a.ndim, b.ndim)
    ash = [1] * (nd - a.ndim) + list(a.shape)
    bsh = [1] * (nd - b.ndim) + list(b.shape)
    ast = [0] * (nd - a.ndim) + _est(a)
    bst = [0] * (nd - b.ndim) + _est(b)
    dtype = np.result_type(a.dtype, b.dtype)
    shape = tuple(p * q for p, q in zip(ash, bsh))
    out = be().empty(shape, dtype)
    if out.size == 0:
        return out
    cst = c_elem_strides(shape)
    inter = [n for pair in zip(ash, bsh) for n in pair]
    ost = [s for i in range(nd) for s in (bsh[i] * cst[i], cst[i])]
    av = _view(a, [n for i in range(nd) for n in (ash[i], 1)], [s for i in range(nd) for s in (ast[i], 0)])
    bv = _view(b, [n for i in range(nd) for n in (1, bsh[i])], [s for i in range(nd) for s in (0, bst[i])])
    _MUL(av, bv, from_numpy_dtype(dtype), out=_view(out, inter, ost))
    return out


@kernel("inner", "cuda")
def inner(a, b):
    """Inner product over the last dims: a GEMM of ``a`` as rows and ``b`` as columns (a reduction
    when one is a vector); a 0-d operand multiplies elementwise."""
    if a.ndim == 0 or b.ndim == 0:
        return _MUL(a, b, from_numpy_dtype(np.result_type(a.dtype, b.dtype)))
    lead_a, lead_b = a.shape[:-1], b.shape[:-1]
    a2 = a if a.ndim == 1 else _merge(a, (a.ndim - 1, 1))
    b2 = b if b.ndim == 1 else _merge(b, (b.ndim - 1, 1))
    if b2.ndim == 2:
        b2 = _view(b2, (b2.shape[1], b2.shape[0]), tuple(reversed(_est(b2))))
    return _out_shape(matmul(a2, b2), tuple(lead_a) + tuple(lead_b))


# --- trace, diag, diagonal, diag_embed --------------------------------------------------------------
@kernel("trace", "cuda")
def trace(a):
    """Sum of the main diagonal (a block-tree reduction; integers give int64)."""
    d = np.dtype(a.dtype)
    out_dtype = d if d.kind == "f" else np.dtype(np.int64)
    st = _est(a)
    return _rowdot(out_dtype, a, (), (st[0] + st[1],), None, (), (), (), (min(a.shape),))


@kernel("diagonal", "cuda")
def diagonal_view(a, offset, dim1, dim2):
    """The diagonal ``offset`` of the ``(dim1, dim2)`` planes as a view (appended as the last dim)."""
    sh, st = list(a.shape), _est(a)
    n1, n2 = sh[dim1], sh[dim2]
    if offset >= 0:
        n, start = max(0, min(n1, n2 - offset)), offset * st[dim2]
    else:
        n, start = max(0, min(n1 + offset, n2)), -offset * st[dim1]
    keep = [i for i in range(a.ndim) if i not in (dim1, dim2)]
    return _view(a, [sh[i] for i in keep] + [n], [st[i] for i in keep] + [st[dim1] + st[dim2]],
                 start if n else 0)


@kernel("diag", "cuda")
def diag(a, diagonal):
    """1-d ``a``: the square matrix with ``a`` on diagonal ``diagonal``; 2-d: a copy of that diagonal."""
    if a.ndim == 2:
        return contiguous(diagonal_view(a, diagonal, 0, 1))
    n = a.shape[0] + abs(diagonal)
    out = be().full((n, n), 0, a.dtype)
    copy_into(diagonal_view(out, diagonal, 0, 1), a)
    return out


@kernel("diag_embed", "cuda")
def diag_embed(a, offset, dim1, dim2):
    """Zeros with the last dim of ``a`` on the ``(dim1, dim2)`` diagonals ``offset``."""
    shape = list(a.shape[:-1])
    for d in sorted((dim1, dim2)):
        shape.insert(d, a.shape[-1] + abs(offset))
    out = be().full(tuple(shape), 0, a.dtype)
    copy_into(diagonal_view(out, offset, dim1, dim2), a)
    return out


# --- einsum, tensordot ----------------------------------------------------------------------------
def _contract(x, xl, y, yl, keep):
    """Contract ``x`` (dims labelled ``xl``) with ``y``: labels of both not in ``keep`` are summed.

    Returns ``(array, labels)``, labels ``batch + x-only + y-only``: ``x`` is permuted to
    ``(batch, x-only, summed)`` and ``y`` to ``(batch, summed, y-only)`` (views; a copy only where
    the dims cannot merge), and one batched GEMM multiplies them.
    """
    both = [c for c in xl if c in yl]
    bl = [c for c in both if c in keep]
    kl = [c for c in both if c not in keep]
    il = [c for c in xl if c not in yl]
    jl = [c for c in yl if c not in xl]
    size = {c: n for c, n in zip(xl, x.shape)}
    size.update({c: n for c, n in zip(yl, y.shape) if n != 1 or c not in size})
    xp = _permute(x, xl, bl + il + kl, size)
    yp = _permute(y, yl, bl + kl + jl, size)
    x3 = _merge(xp, (len(bl), len(il), len(kl)))
    y3 = _merge(yp, (len(bl), len(kl), len(jl)))
    out = matmul(x3, y3)
    return _out_shape(out, [size[c] for c in bl + il + jl]), bl + il + jl


def _permute(x, labels, order, size):
    """View of ``x`` with dims ``order`` (labels); a size-1 dim of a label of size n broadcasts."""
    st = dict(zip(labels, _est(x)))
    sh = dict(zip(labels, x.shape))
    return _view(x, [size[c] for c in order], [0 if sh[c] != size[c] else st[c] for c in order])


def _sum_labels(x, labels, keep):
    """``x`` summed over the labels not in ``keep`` (the others keep their order)."""
    kl = [c for c in labels if c not in keep]
    if not kl:
        return x, labels
    ml = [c for c in labels if c in keep]
    st, sh = dict(zip(labels, _est(x))), dict(zip(labels, x.shape))
    out = _rowdot(x.dtype, x, [st[c] for c in ml], [st[c] for c in kl], None, [], [],
                  [sh[c] for c in ml], [sh[c] for c in kl])
    return out, ml


def _einsum_operand(x, term):
    """``x`` with the repeated labels of ``term`` taken on their diagonal: (view, unique labels)."""
    labels, shape, strides = [], [], []
    for c, n, s in zip(term, x.shape, _est(x)):
        if c in labels:
            i = labels.index(c)
            if shape[i] != n:
                raise ValueError(f"dimensions in operand for collapsing index '{c}' don't match ({shape[i]} != {n})")
            strides[i] += s
            continue
        labels.append(c)
        shape.append(n)
        strides.append(s)
    return _view(x, shape, strides), labels


def _einsum_terms(equation, arrays):
    """Expanded label lists of the operands and of the output (``...`` as one label per dim)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    if "->" in rhs:
        raise ValueError("einsum equation has more than one '->'")
    terms = lhs.split(",")
    if len(terms) != len(arrays):
        raise ValueError(f"{len(terms)} subscript terms for {len(arrays)} operands")
    for t in terms + [rhs]:
        bad = [c for c in t.replace("...", "") if not c.isalpha() or not c.isascii()]
        if bad or t.count("...") > 1:
            raise ValueError(f"invalid subscript {bad[0]!r} in einstein sum subscripts string"
                             if bad else "einstein sum subscripts string contains more than one ellipsis")
    n_ell = []
    for t, x in zip(terms, arrays):
        named = len(t.replace("...", ""))
        n = x.ndim - named
        if n < 0 or (n > 0 and "..." not in t):
            raise ValueError(f"operand has {x.ndim} dimensions for the {named} subscripts of {t!r}")
        n_ell.append(n if "..." in t else 0)
    ne = max(n_ell, default=0)
    ell = [chr(0x100 + i) for i in range(ne)]

    def expand(t, n):
        head, dots, tail = t.partition("...")
        return list(head) + (ell[ne - n:] if dots else []) + list(tail)

    ins = [expand(t, n) for t, n in zip(terms, n_ell)]
    if arrow:
        out = expand(rhs, ne)
        if len(set(out)) != len(out):
            raise ValueError("einstein sum subscripts string includes output subscript more than once")
        for c in out:
            if not any(c in t for t in ins):
                raise ValueError(f"einstein sum subscripts string included output subscript {c!r} which never "
                                 "appeared in an input")
    else:
        counts = {}
        for t in ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, k in counts.items() if k == 1 and c not in ell)
    return ins, out


def _bool_as_int(fn):
    """Wrap a contraction so bool operands compute in int64 and the result is ``!= 0`` (numpy's bool
    einsum/tensordot: or of ands)."""

    @functools.wraps(fn)
    def contraction(*args):
        if not any(getattr(x, "dtype", None) == np.bool_ for x in args):
            return fn(*args)
        res = fn(*(_cast(x, np.int64) if getattr(x, "dtype", None) == np.bool_ else x for x in args))
        return _cast(res, np.bool_)

    return contraction


@kernel("einsum", "cuda")
@_bool_as_int
def einsum(equation, *arrays):
    """Einstein summation composed from diagonal and permuted views, batched GEMMs (left to right)
    and block-tree sums of the labels only one operand has; a copy only where dims cannot merge."""
    ins, out_labels = _einsum_terms(equation, arrays)
    size = {}
    ops = []
    for x, term in zip(arrays, ins):
        v, labels = _einsum_operand(x, term)
        for c, n in zip(labels, v.shape):
            if size.get(c, 1) != 1 and n != 1 and size[c] != n:
                raise ValueError(f"operands could not be broadcast together: label {c!r} has sizes {size[c]} and {n}")
            if n != 1 or c not in size:
                size[c] = n
        ops.append((v, labels))
    _product_dtype(np.dtype(arrays[0].dtype), "einsum_cuda")
    later = [set(out_labels)]
    for _, labels in reversed(ops[1:]):
        later.insert(0, later[0] | set(labels))
    x, xl = _sum_labels(*ops[0], later[0])
    for (y, yl), keep in zip(ops[1:], later[1:]):
        y, yl = _sum_labels(y, yl, keep | set(xl))
        x, xl = _contract(x, xl, y, yl, keep)
    x = _permute(x, xl, out_labels, size)
    return contiguous(x)


@kernel("tensordot", "cuda")
@_bool_as_int
def tensordot(a, b, axes_a, axes_b):
    """Contract dims ``axes_a`` of ``a`` with ``axes_b`` of ``b``: one GEMM over permuted views."""
    al = list(range(a.ndim))
    bl = [a.ndim + i for i in range(b.ndim)]
    for i, j in zip(axes_a, axes_b):
        bl[j] = al[i]
    keep = set(al) ^ set(bl)
    out, _ = _contract(a, al, b, bl, keep)
    return out


# --- concrete signatures (PTX test) ---------------------------------------------------------------
# (accumulator, operand dtype, output dtype) of every launch
_GEMM_TYPES = [("float32", "float32", "float32"), ("float32", "float16", "float16"), ("float64", "float64", "float64"),
               ("int64", "int64", "int64"), ("int64", "int32", "int32"), ("int64", "int16", "int16"),
               ("int64", "int8", "int8"), ("int64", "uint8", "uint8"), ("complex64", "complex64", "complex64"),
               ("complex128", "complex128", "complex128")]
# the rowdot's single pass (operand -> output), first pass (operand -> partials) and second pass (partials -> output)
_ROWDOT_TYPES = sorted({t for acc, dn, on in _GEMM_TYPES + [("int64", d, "int64") for d in ("int32", "int16", "int8",
                                                                                          "uint8", "bool")]
                        for t in ((acc, dn, on), (acc, dn, acc), (acc, acc, on))})


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the matmul, addmm and rowdot kernels per dtype."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    def nb(dn):
        return from_dtype(np.dtype(dn))

    def arr(dn):
        return types.Array(nb(dn), 1, "C")

    i64, b1 = types.int64, types.boolean
    idx = types.UniTuple(i64, ndim)
    t1 = types.UniTuple(i64, 1)
    cases = []
    for acc, dn, on in _GEMM_TYPES:
        A, O, a_t = arr(dn), arr(on), np.dtype(acc).type
        cases.append((f"matmul:{acc}:{dn}", _matmul_py(a_t),
                      (O, A, t1, i64, i64, A, t1, i64, i64, t1, i64, i64, i64)))
        cases.append((f"addmm:{acc}:{dn}", _addmm_py(a_t),
                      (O, A, t1, i64, i64, i64, A, t1, i64, i64, i64, t1, i64, i64, i64, i64, O, t1, i64, i64, b1,
                       nb(acc), nb(acc))))
        cases.append((f"gemm_each:{acc}:{dn}", _gemm_each_py(a_t),
                      (O, A, t1, i64, i64, i64, A, t1, i64, i64, i64, t1, i64, i64, i64, i64, O, t1, i64, i64, b1,
                       nb(acc), nb(acc), i64)))
    for acc, dn, on in _ROWDOT_TYPES:
        A, O = arr(dn), arr(on)
        cases.append((f"rowdot:{acc}:{dn}->{on}", _rowdot_py(np.dtype(acc).type),
                      (O, A, idx, t1, A, idx, t1, b1, idx, t1, i64, i64, O, idx, b1, nb(acc), nb(acc))))
    return cases
