"""CUDA kernels of the LU and Cholesky families of ``flambeau._ops.linalg_solvers``, in numba.cuda.

The calling conventions are the CPU kernels' (``flambeau._kernels.cpu.linalg_solvers``): ``info``
arrays are int32 of the batch shape, LAPACK's meaning. cuSOLVER is not bound; these are flambeau's own
kernels, one thread block per matrix of a batch:

* :func:`_lu_py` is getrf: partial pivoting (the first row of largest magnitude, as idamax), row
  swaps, multipliers and the rank-1 update of the trailing block, each step spread over the block's
  threads; a zero pivot records ``info`` and the elimination goes on past it, as LAPACK's does;
* :func:`_lu_solve_py` is getrs (one thread per right-hand side: the row swaps, then the unit-lower
  and the upper substitutions), and :func:`_triangular_py` is trsm for one triangle;
* :func:`_cholesky_py` is potrf of the lower triangle: each column's diagonal on one thread, the rest
  of the column over the others; it stops at the first minor that is not positive-definite;
* :func:`_lu_det_py` reads determinants (or their sign and log) off the LU factors, one thread per matrix.

float32 and float64 (the fronts refuse float16/bfloat16, as torch's linalg does); complex matrices
raise torch's "not implemented" error on CUDA. Inputs are first copied (broadcast, contiguous) into
the work arrays the kernels factor in place. Not here: QR, SVD, eigendecompositions, pinv and
matrix_exp (``NOT_ON_CUDA`` says why).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import scalar_name
from flambeau._kernels.cuda._launch import CACHE, be, bind_numba_cuda, sim, stream
from flambeau._kernels.cuda.core import contiguous, copy_into, fill
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

cuda = None
_THREADS = 128  # threads per block: one block per matrix (the shared arrays of the pivot search are this long)


# --- kernels ---------------------------------------------------------------------------------------------
def _lu_py():
    bind_numba_cuda(globals())

    def lu(a, piv, info, m, n):
        # a: (B, m, n) flat, factored in place; piv (B, min(m, n)) int32 1-based; info (B,) int32
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        T = cuda.blockDim.x
        base = b * m * n
        best_v = cuda.shared.array(128, np.float64)
        best_i = cuda.shared.array(128, np.int64)
        k_end = min(m, n)
        if t == 0:
            info[b] = 0
        for k in range(k_end):
            bv = -1.0
            bi = k
            i = k + t
            while i < m:
                v = abs(a[base + i * n + k])
                if v > bv:
                    bv = v
                    bi = i
                i += T
            best_v[t] = bv
            best_i[t] = bi
            cuda.syncthreads()
            if t == 0:  # the first row of largest magnitude (idamax)
                for s in range(1, T):
                    if best_v[s] > best_v[0] or (best_v[s] == best_v[0] and best_i[s] < best_i[0]):
                        best_v[0] = best_v[s]
                        best_i[0] = best_i[s]
                piv[b * k_end + k] = best_i[0] + 1
            cuda.syncthreads()
            p = best_i[0]
            pivot = a[base + p * n + k]
            cuda.syncthreads()
            if p != k:
                j = t
                while j < n:
                    tmp = a[base + k * n + j]
                    a[base + k * n + j] = a[base + p * n + j]
                    a[base + p * n + j] = tmp
                    j += T
            cuda.syncthreads()
            if pivot == 0:
                if t == 0 and info[b] == 0:
                    info[b] = k + 1
            else:
                i = k + 1 + t
                while i < m:
                    a[base + i * n + k] = a[base + i * n + k] / pivot
                    i += T
                cuda.syncthreads()
                rows = m - k - 1
                cols = n - k - 1
                q = t
                while q < rows * cols:
                    i = k + 1 + q // cols
                    j = k + 1 + q % cols
                    a[base + i * n + j] -= a[base + i * n + k] * a[base + k * n + j]
                    q += T
            cuda.syncthreads()

    return lu


def _lu_solve_py():
    bind_numba_cuda(globals())

    def lu_solve(lu, piv, x, n, nrhs):
        # x: (B, n, nrhs) flat, overwritten by the solution of lu[b] x = x
        b = cuda.blockIdx.x
        col = cuda.threadIdx.x
        T = cuda.blockDim.x
        lb = b * n * n
        xb = b * n * nrhs
        while col < nrhs:
            for k in range(n):
                p = piv[b * n + k] - 1
                if p != k:
                    tmp = x[xb + k * nrhs + col]
                    x[xb + k * nrhs + col] = x[xb + p * nrhs + col]
                    x[xb + p * nrhs + col] = tmp
            for i in range(n):
                s = x[xb + i * nrhs + col]
                for j in range(i):
                    s -= lu[lb + i * n + j] * x[xb + j * nrhs + col]
                x[xb + i * nrhs + col] = s
            for i in range(n - 1, -1, -1):
                s = x[xb + i * nrhs + col]
                for j in range(i + 1, n):
                    s -= lu[lb + i * n + j] * x[xb + j * nrhs + col]
                x[xb + i * nrhs + col] = s / lu[lb + i * n + i]
            col += T

    return lu_solve


def _triangular_py():
    bind_numba_cuda(globals())

    def triangular(a, x, n, nrhs, upper, unit):
        # x: (B, n, nrhs) flat, overwritten by the solution of T x = x, T a triangle of a[b]
        b = cuda.blockIdx.x
        col = cuda.threadIdx.x
        T = cuda.blockDim.x
        ab = b * n * n
        xb = b * n * nrhs
        while col < nrhs:
            for r in range(n):
                i = n - 1 - r if upper else r
                s = x[xb + i * nrhs + col]
                if upper:
                    for j in range(i + 1, n):
                        s -= a[ab + i * n + j] * x[xb + j * nrhs + col]
                else:
                    for j in range(i):
                        s -= a[ab + i * n + j] * x[xb + j * nrhs + col]
                x[xb + i * nrhs + col] = s if unit else s / a[ab + i * n + i]
            col += T

    return triangular


def _cholesky_py():
    bind_numba_cuda(globals())

    def cholesky(a, low, info, n):
        # low: (B, n, n) flat, zeroed by the caller; the factor of a[b]'s lower triangle
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        T = cuda.blockDim.x
        base = b * n * n
        failed = cuda.shared.array(1, np.int32)
        if t == 0:
            info[b] = 0
            failed[0] = 0
        cuda.syncthreads()
        for j in range(n):
            if t == 0:
                d = a[base + j * n + j]
                for k in range(j):
                    d -= low[base + j * n + k] * low[base + j * n + k]
                if d > 0:
                    low[base + j * n + j] = math.sqrt(d)
                else:  # not positive-definite (or NaN): LAPACK's info, the columns so far kept
                    info[b] = j + 1
                    failed[0] = 1
            cuda.syncthreads()
            if failed[0] != 0:
                return
            djj = low[base + j * n + j]
            i = j + 1 + t
            while i < n:
                s = a[base + i * n + j]
                for k in range(j):
                    s -= low[base + i * n + k] * low[base + j * n + k]
                low[base + i * n + j] = s / djj
                i += T
            cuda.syncthreads()

    return cholesky


def _lu_det_py():
    bind_numba_cuda(globals())

    def lu_det(lu, piv, n, count, sign, value, log):
        # one thread per matrix: det (log False) or (sign, log|det|) (log True) from the LU factors
        b = cuda.grid(1)
        if b < count:
            base = b * n * n
            sg = 1.0
            acc = 0.0 if log else 1.0
            for k in range(n):
                d = lu[base + k * n + k]
                if piv[b * n + k] - 1 != k:
                    sg = -sg
                if log:
                    if d < 0:
                        sg = -sg
                        d = -d
                    if d == 0:
                        sg = 0.0
                        acc = -math.inf
                    elif acc != -math.inf:
                        acc += math.log(d)
                else:
                    acc *= d
            if log:
                sign[b] = sg
                value[b] = acc
            else:
                value[b] = sg * acc

    return lu_det


def _nan_where_py():
    bind_numba_cuda(globals())

    def nan_where(x, info, per, total):
        # x (B, per) flat: NaN in every entry of the matrices whose info is not zero
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            if info[i // per] != 0:
                x[i] = math.nan
            i += step

    return nan_where


_PY = {"lu": _lu_py, "lu_solve": _lu_solve_py, "triangular": _triangular_py, "cholesky": _cholesky_py,
       "lu_det": _lu_det_py, "nan_where": _nan_where_py}


@functools.cache
def _compiled(name: str):
    bind_numba_cuda(globals())
    return cuda.jit(cache=CACHE)(_PY[name]())


def _per_matrix(name: str, count: int, *args) -> None:
    """Launch ``name`` with one block of threads per matrix."""
    if count:
        threads = 4 if sim() else _THREADS  # the simulator runs every thread in Python
        _compiled(name)[count, threads, stream()](*args)


def _per_thread(name: str, count: int, *args) -> None:
    if count:
        block = 4 if sim() else 128
        _compiled(name)[(count + block - 1) // block, block, stream()](*args)


# --- helpers -----------------------------------------------------------------------------------------------
def _check_real(a, name: str) -> np.dtype:
    d = np.dtype(a.dtype)
    if d not in (np.float32, np.float64):
        raise RuntimeError(f'"{name}_cuda" not implemented for \'{scalar_name(d)}\'')
    return d


def _work(a, batch: tuple, dtype=None):
    """A new contiguous array of ``a`` broadcast to ``batch + a.shape[-2:]`` (a copy the kernels may write)."""
    out = be().empty(tuple(batch) + tuple(a.shape[-2:]), a.dtype if dtype is None else dtype)
    if out.size:
        copy_into(out, a)
    return out


def _flat(x):
    return be().flat_view(x)


def _count(batch) -> int:
    return math.prod(batch)


def _lu(a, batch):
    """``(LU, pivots, info)`` of ``a`` broadcast to ``batch``: factors in a work copy."""
    m, n = a.shape[-2:]
    lu = _work(a, batch)
    piv = be().empty(tuple(batch) + (min(m, n),), np.int32)
    info = be().empty(tuple(batch), np.int32)
    if min(m, n) == 0:
        fill(info, 0)
    else:
        _per_matrix("lu", _count(batch), _flat(lu), _flat(piv), _flat(info), m, n)
    return lu, piv, info


def _nan_where_singular(x, info, batch) -> None:
    per = math.prod(x.shape[len(batch):])
    total = _count(batch) * per
    if total:
        _per_thread("nan_where", total, _flat(x), _flat(info), per, total)


def _solve_with_lu(lu, piv, x, batch) -> None:
    n, nrhs = x.shape[-2:]
    if n and nrhs:
        _per_matrix("lu_solve", _count(batch), _flat(lu), _flat(piv), _flat(x), n, nrhs)


def _transposed(a):
    """A contiguous copy of ``a`` with its last two dims swapped."""
    item = a.dtype.itemsize
    st = [s // item for s in a.strides]
    shape = list(a.shape)
    shape[-1], shape[-2] = shape[-2], shape[-1]
    st[-1], st[-2] = st[-2], st[-1]
    backend = be()
    return contiguous(backend.as_strided(backend.flat_view(a), tuple(shape), tuple(st), 0))


# --- the operators' kernels ----------------------------------------------------------------------------------
@kernel("linalg_lu_factor_ex", "cuda")
def lu_factor_ex(a):
    _check_real(a, "linalg_lu_factor")
    return _lu(a, tuple(a.shape[:-2]))


@kernel("linalg_inv_ex", "cuda")
def inv_ex(a):
    d = _check_real(a, "linalg_inv")
    batch = tuple(a.shape[:-2])
    n = a.shape[-1]
    lu, piv, info = _lu(a, batch)
    x = be().from_numpy(np.ascontiguousarray(np.broadcast_to(np.eye(n, dtype=d), batch + (n, n))))
    _solve_with_lu(lu, piv, x, batch)
    _nan_where_singular(x, info, batch)
    return x, info


@kernel("linalg_solve", "cuda")
def solve(a, b):
    _check_real(a, "linalg_solve")
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    lu, piv, info = _lu(a, batch)
    x = _work(b, batch, np.result_type(a.dtype, b.dtype))
    _solve_with_lu(lu, piv, x, batch)
    _nan_where_singular(x, info, batch)
    return x, info


def _det(a, log: bool):
    d = _check_real(a, "linalg_det")
    batch = tuple(a.shape[:-2])
    n = a.shape[-1]
    count = _count(batch)
    value = be().empty(batch, d)
    sign = be().empty(batch, d) if log else value
    if n == 0:  # the empty product
        fill(value, 0.0 if log else 1.0)
        if log:
            fill(sign, 1.0)
    elif count:
        lu, piv, _ = _lu(a, batch)
        _per_thread("lu_det", count, _flat(lu), _flat(piv), n, count, _flat(sign), _flat(value), log)
    return (sign, value) if log else value


@kernel("linalg_det", "cuda")
def det(a):
    return _det(a, False)


@kernel("linalg_slogdet", "cuda")
def slogdet(a):
    return _det(a, True)


@kernel("linalg_solve_triangular", "cuda")
def solve_triangular(a, b, upper, unitriangular):
    _check_real(a, "linalg_solve_triangular")
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    t = _work(a, batch)
    x = _work(b, batch, np.result_type(a.dtype, b.dtype))
    n, nrhs = x.shape[-2:]
    if n and nrhs:
        _per_matrix("triangular", _count(batch), _flat(t), _flat(x), n, nrhs, bool(upper), bool(unitriangular))
    return x


@kernel("linalg_cholesky_ex", "cuda")
def cholesky_ex(a, upper):
    _check_real(a, "linalg_cholesky")
    batch = tuple(a.shape[:-2])
    n = a.shape[-1]
    work = _transposed(a) if upper else _work(a, batch)
    low = be().empty(tuple(a.shape), a.dtype)
    fill(low, 0)
    info = be().empty(batch, np.int32)
    fill(info, 0)
    if n:
        _per_matrix("cholesky", _count(batch), _flat(work), _flat(low), _flat(info), n)
    return (_transposed(low) if upper else low), info


# --- concrete signatures (PTX test) -------------------------------------------------------------------------
def ptx_cases() -> list:
    """(label, python function, signature) for every kernel template x dtype this family launches."""
    from numba import types

    i64, i32, b = types.int64, types.Array(types.int32, 1, "C"), types.boolean
    cases = []
    for dn in ("float32", "float64"):
        f = types.Array(getattr(types, dn), 1, "C")
        cases += [(f"lu:{dn}", _lu_py(), (f, i32, i32, i64, i64)),
                  (f"lu_solve:{dn}", _lu_solve_py(), (f, i32, f, i64, i64)),
                  (f"triangular:{dn}", _triangular_py(), (f, f, i64, i64, b, b)),
                  (f"cholesky:{dn}", _cholesky_py(), (f, f, i32, i64)),
                  (f"lu_det:{dn}", _lu_det_py(), (f, i32, i64, i64, f, f, b)),
                  (f"nan_where:{dn}", _nan_where_py(), (f, i32, i64, i64))]
    return cases
