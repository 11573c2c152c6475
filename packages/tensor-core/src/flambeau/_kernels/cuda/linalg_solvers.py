"""CUDA kernels of ``flambeau._ops.linalg_solvers``, in numba.cuda (cuSOLVER is not bound).

The calling conventions are the CPU kernels' (``flambeau._kernels.cpu.linalg_solvers``): ``info``
arrays are int32 of the batch shape, LAPACK's meaning. One thread block per matrix of a batch: right
for batches of small and middling matrices, far from cuSOLVER on one large matrix.

* :func:`_lu_py` is getrf: partial pivoting (the first row of largest magnitude, as idamax), row
  swaps, multipliers and the rank-1 update of the trailing block, each step spread over the block's
  threads; a zero pivot records ``info`` and the elimination goes on past it, as LAPACK's does;
  :func:`_lu_solve_py` is getrs (one thread per right-hand side) and :func:`_triangular_py` trsm;
  :func:`_lu_det_py` reads determinants (or their sign and log) off the LU factors;
* :func:`_cholesky_py` is potrf of the lower triangle; it stops at the first minor that is not
  positive-definite;
* :func:`_jacobi_py` diagonalises a symmetric matrix by cyclic Jacobi rotations (eigh, eigvalsh;
  eigenvalues ascending, eigenvectors up to their signs); :func:`_svd_jacobi_py` is one-sided
  (Hestenes) Jacobi for the SVD, whose U is completed by a QR (full matrices, zero singular values);
  pinv and matrix_exp (Padé 13 with scaling and squaring, in float64) are built from these and the
  matrix products.

float32 and float64 (the fronts refuse float16/bfloat16, as torch's linalg does); complex matrices
raise torch's "not implemented" error on CUDA. Inputs are first copied (broadcast, contiguous) into
work arrays the kernels change in place. ``linalg_eig`` (the nonsymmetric eigenproblem) runs on the
host, as torch's does for CUDA tensors (MAGMA's geev is a CPU routine), and so does ``linalg_qr`` for
now (Note [QR on the host]): the kernels here that wait for the device.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import from_numpy_dtype, scalar_name
from flambeau._kernels.cpu.linalg_solvers import _PADE13, _THETA13
from flambeau._kernels.cuda._launch import be, bind_numba_cuda, jit, sim, stream
from flambeau._kernels.cuda.core import contiguous, copy_into, fill, permuted
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._kernels.cuda.linalg import matmul
from flambeau._kernels.cuda.shape import tril, triu
from flambeau._ops._registry import KERNELS, kernel
from flambeau._size import broadcast_shapes

cuda = None
_THREADS = 128  # threads per block: one block per matrix (the shared arrays of the pivot search are this long)


# --- device functions (each bound as ``_d_<name>`` by _bind) -------------------------------------------------
def _block_sum(red, value):
    """The sum of ``value`` over the block's threads, for every thread (``red``: a shared float64 array
    of at least blockDim entries, free again on return)."""
    t = cuda.threadIdx.x
    red[t] = value
    cuda.syncthreads()
    total = 0.0
    for r in range(cuda.blockDim.x):
        total += red[r]
    cuda.syncthreads()
    return total


def _rotate_columns(x, base, ncols, rows, p, q, c, s):
    """Columns p and q of the matrix ``x[base:]`` (``rows`` x ``ncols``) rotated by (c, s), over the block's threads."""
    k = cuda.threadIdx.x
    while k < rows:
        xp = x[base + k * ncols + p]
        xq = x[base + k * ncols + q]
        x[base + k * ncols + p] = c * xp - s * xq
        x[base + k * ncols + q] = s * xp + c * xq
        k += cuda.blockDim.x


def _substitute(t, tb, n, x, xb, nrhs, col, upper, unit):
    """Column ``col`` of ``x[xb:]`` (``n`` x ``nrhs``) overwritten by the solution of ``T y = x``, ``T`` the
    upper or lower triangle of the ``n`` x ``n`` matrix ``t[tb:]`` (its diagonal taken as ones if ``unit``)."""
    for r in range(n):
        i = n - 1 - r if upper else r
        s = x[xb + i * nrhs + col]
        if upper:
            for j in range(i + 1, n):
                s -= t[tb + i * n + j] * x[xb + j * nrhs + col]
        else:
            for j in range(i):
                s -= t[tb + i * n + j] * x[xb + j * nrhs + col]
        x[xb + i * nrhs + col] = s if unit else s / t[tb + i * n + i]


def _jacobi_rotation(alpha, beta, gamma):
    """``(c, s)`` of the Jacobi rotation that zeroes ``gamma`` of the symmetric 2x2 ``[[alpha, gamma],
    [gamma, beta]]``: the smaller of the two angles (Golub and Van Loan 8.5.2); ``gamma`` is not zero."""
    theta = (beta - alpha) / (2.0 * gamma)
    tt = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
    if theta < 0:
        tt = -tt
    c = 1.0 / math.sqrt(tt * tt + 1.0)
    return c, tt * c


def _sort_order(keys, kb, kstep, order, ob, n, descending):
    """``order[ob:ob + n]``: the indices 0..n-1 sorted by ``keys[kb + i * kstep]``, stably (one thread,
    insertion sort: the matrices here are small)."""
    for i in range(n):
        order[ob + i] = i
    for i in range(1, n):
        j = i
        while j > 0:
            before = keys[kb + order[ob + j - 1] * kstep]
            here = keys[kb + order[ob + j] * kstep]
            if not (here > before if descending else before > here):
                break
            tmp = order[ob + j]
            order[ob + j] = order[ob + j - 1]
            order[ob + j - 1] = tmp
            j -= 1


def _gather_columns(src, dst, base, n, order, ob):
    """``dst[base:]`` = the ``n`` x ``n`` matrix ``src[base:]`` with its columns in ``order[ob:]``, over the
    block's threads."""
    q = cuda.threadIdx.x
    while q < n * n:
        r = q // n
        c = q - r * n
        dst[base + q] = src[base + r * n + order[ob + c]]
        q += cuda.blockDim.x


_DEVICE_FUNCTIONS = (_block_sum, _rotate_columns, _substitute, _jacobi_rotation, _sort_order, _gather_columns)
_d_block_sum = _d_rotate_columns = _d_substitute = _d_jacobi_rotation = _d_sort_order = _d_gather_columns = None


def _bind():
    """numba.cuda and the device functions (``_d_<name>``) as this module's globals (Note [numba.cuda
    bound on first use])."""
    bind_numba_cuda(globals())
    if _d_block_sum is None:
        for fn in _DEVICE_FUNCTIONS:
            globals()["_d" + fn.__name__] = cuda.jit(device=True)(fn)


def _lu_py():
    _bind()

    def lu(a, piv, info, m, n):
        # a: (B, m, n) flat, factored in place; piv (B, min(m, n)) int32 1-based; info (B,) int32
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        T = cuda.blockDim.x
        base = b * m * n
        best_v = cuda.shared.array(_THREADS, np.float64)
        best_i = cuda.shared.array(_THREADS, np.int64)
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
    _bind()

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
            _d_substitute(lu, lb, n, x, xb, nrhs, col, False, True)  # L, unit diagonal
            _d_substitute(lu, lb, n, x, xb, nrhs, col, True, False)  # then U
            col += T

    return lu_solve


def _triangular_py():
    _bind()

    def triangular(a, x, n, nrhs, upper, unit):
        # x: (B, n, nrhs) flat, overwritten by the solution of T x = x, T a triangle of a[b]
        b = cuda.blockIdx.x
        col = cuda.threadIdx.x
        T = cuda.blockDim.x
        ab = b * n * n
        xb = b * n * nrhs
        while col < nrhs:
            _d_substitute(a, ab, n, x, xb, nrhs, col, upper, unit)
            col += T

    return triangular


def _cholesky_py():
    _bind()

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
    _bind()

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
    _bind()

    def nan_where(x, info, per, total):
        # x (B, per) flat: NaN in every entry of the matrices whose info is not zero
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            if info[i // per] != 0:
                x[i] = math.nan
            i += step

    return nan_where


def _jacobi_py():
    _bind()

    def jacobi(a, v, n, max_sweeps, tol):
        # cyclic Jacobi on the symmetric a (B, n, n), rotated towards diagonal in place; v (B, n, n),
        # the identity on entry, accumulates the rotations (eigenvectors in its columns)
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        T = cuda.blockDim.x
        base = b * n * n
        red = cuda.shared.array(_THREADS, np.float64)
        rot = cuda.shared.array(2, np.float64)
        for _sweep in range(max_sweeps):
            off = 0.0
            total = 0.0
            q = t
            while q < n * n:
                x = a[base + q]
                total += x * x
                if q // n != q % n:
                    off += x * x
                q += T
            if _d_block_sum(red, off) <= tol * tol * _d_block_sum(red, total):
                return
            for p in range(n - 1):
                for qq in range(p + 1, n):
                    if t == 0:
                        apq = a[base + p * n + qq]
                        c = 1.0
                        s = 0.0
                        if apq != 0:
                            c, s = _d_jacobi_rotation(a[base + p * n + p], a[base + qq * n + qq], apq)
                        rot[0] = c
                        rot[1] = s
                    cuda.syncthreads()
                    c = rot[0]
                    s = rot[1]
                    if s != 0:
                        _d_rotate_columns(a, base, n, n, p, qq, c, s)  # columns p and q
                        _d_rotate_columns(v, base, n, n, p, qq, c, s)
                        cuda.syncthreads()
                        k = t
                        while k < n:  # then rows p and q
                            apk = a[base + p * n + k]
                            aqk = a[base + qq * n + k]
                            a[base + p * n + k] = c * apk - s * aqk
                            a[base + qq * n + k] = s * apk + c * aqk
                            k += T
                    cuda.syncthreads()

    return jacobi


def _sorted_eigen_py():
    _bind()

    def sorted_eigen(a, v, w, vout, order, n):
        # eigenvalues (a's diagonal) ascending into w (B, n), v's columns in that order into vout
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        base = b * n * n
        ob = b * n
        if t == 0:
            _d_sort_order(a, base, n + 1, order, ob, n, False)  # by eigenvalue (the diagonal), ascending
            for i in range(n):
                w[ob + i] = a[base + order[ob + i] * (n + 1)]
        cuda.syncthreads()
        _d_gather_columns(v, vout, base, n, order, ob)

    return sorted_eigen


def _svd_jacobi_py():
    _bind()

    def svd_jacobi(u, v, m, n, max_sweeps, tol):
        # one-sided Jacobi (Hestenes) on u (B, m, n), m >= n: rotates pairs of columns until every pair
        # is orthogonal; v (B, n, n), the identity on entry, accumulates the rotations
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        T = cuda.blockDim.x
        ub = b * m * n
        vb = b * n * n
        red = cuda.shared.array(_THREADS, np.float64)
        rot = cuda.shared.array(3, np.float64)
        for _sweep in range(max_sweeps):
            if t == 0:
                rot[2] = 0.0
            cuda.syncthreads()
            for p in range(n - 1):
                for q in range(p + 1, n):
                    al = 0.0
                    be_ = 0.0
                    ga = 0.0
                    k = t
                    while k < m:
                        up = u[ub + k * n + p]
                        uq = u[ub + k * n + q]
                        al += up * up
                        be_ += uq * uq
                        ga += up * uq
                        k += T
                    sa = _d_block_sum(red, al)
                    sb = _d_block_sum(red, be_)
                    sg = _d_block_sum(red, ga)
                    if t == 0:
                        c = 1.0
                        s = 0.0
                        if sg != 0 and abs(sg) > tol * math.sqrt(sa * sb):
                            c, s = _d_jacobi_rotation(sa, sb, sg)
                            rot[2] = 1.0
                        rot[0] = c
                        rot[1] = s
                    cuda.syncthreads()
                    c = rot[0]
                    s = rot[1]
                    if s != 0:
                        _d_rotate_columns(u, ub, n, m, p, q, c, s)
                        _d_rotate_columns(v, vb, n, n, p, q, c, s)
                    cuda.syncthreads()
            converged = rot[2] == 0.0
            cuda.syncthreads()
            if converged:
                return

    return svd_jacobi


def _svd_sort_py():
    _bind()

    def svd_sort(u, v, s_out, u_out, v_out, norms, order, m, n):
        # singular values (u's column norms) descending into s_out (B, n); u's columns over their norms
        # (zero columns stay zero) and v's columns in that order into u_out (B, m, n), v_out (B, n, n)
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        T = cuda.blockDim.x
        ub = b * m * n
        vb = b * n * n
        ob = b * n
        j = t
        while j < n:
            acc = 0.0
            for k in range(m):
                x = u[ub + k * n + j]
                acc += x * x
            norms[ob + j] = math.sqrt(acc)
            j += T
        cuda.syncthreads()
        if t == 0:
            _d_sort_order(norms, ob, 1, order, ob, n, True)
            for i in range(n):
                s_out[ob + i] = norms[ob + order[ob + i]]
        cuda.syncthreads()
        q = t
        while q < m * n:
            r = q // n
            c = q - r * n
            src = order[ob + c]
            sv = norms[ob + src]
            u_out[ub + q] = u[ub + r * n + src] / sv if sv > 0 else 0.0
            q += T
        _d_gather_columns(v, v_out, vb, n, order, ob)

    return svd_sort


def _column_signs_py():
    _bind()

    def column_signs(q, r, m, qcols, rrows, rcols, k):
        # q (B, m, qcols) from the QR of u (B, m, rcols), r (B, rrows, rcols): column j < k times the sign
        # of r[j, j] (kept where it is zero), so that q's first columns are u's own unit columns
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        T = cuda.blockDim.x
        qb = b * m * qcols
        rb = b * rrows * rcols
        p = t
        while p < m * k:
            i = p // k
            j = p - i * k
            if r[rb + j * rcols + j] < 0:
                q[qb + i * qcols + j] = -q[qb + i * qcols + j]
            p += T

    return column_signs


def _pinv_scale_py():
    _bind()

    def pinv_scale(v, s, rows, k, atol, rtol):
        # v (B, rows, k): column j over s[j] where |s[j]| > max(atol, rtol * max |s|), else zero
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        T = cuda.blockDim.x
        sb = b * k
        vb = b * rows * k
        smax = 0.0
        for j in range(k):
            smax = max(smax, abs(s[sb + j]))
        cut = max(atol, rtol * smax)
        q = t
        while q < rows * k:
            sj = s[sb + q % k]
            v[vb + q] = v[vb + q] / sj if abs(sj) > cut else 0.0
            q += T

    return pinv_scale


def _one_norm_py():
    _bind()

    def one_norm(a, n, count, out):
        # out[b] = the largest column sum of |a[b]| (one thread per matrix)
        b = cuda.grid(1)
        if b < count:
            base = b * n * n
            best = 0.0
            for j in range(n):
                acc = 0.0
                for i in range(n):
                    acc += abs(a[base + i * n + j])
                best = max(best, acc)
            out[b] = best

    return one_norm


_PY = {"lu": _lu_py, "lu_solve": _lu_solve_py, "triangular": _triangular_py, "cholesky": _cholesky_py,
       "lu_det": _lu_det_py, "nan_where": _nan_where_py, "jacobi": _jacobi_py,
       "sorted_eigen": _sorted_eigen_py, "svd_jacobi": _svd_jacobi_py, "svd_sort": _svd_sort_py,
       "column_signs": _column_signs_py, "pinv_scale": _pinv_scale_py,
       "one_norm": _one_norm_py}


@functools.cache
def _compiled(name: str):
    _bind()
    return jit(_PY[name]())


def _per_matrix(name: str, count: int, *args) -> None:
    """Launch ``name`` with one block of threads per matrix."""
    if count:
        threads = 4 if sim() else _THREADS  # the simulator runs every thread in Python
        _compiled(name)[count, threads, stream()](*args)


def _per_thread(name: str, count: int, *args) -> None:
    if count:
        block = 4 if sim() else _THREADS
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
    return permuted(a, list(range(a.ndim - 2)) + [a.ndim - 1, a.ndim - 2])


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
    x = _eye_batch(batch, n, n, d)
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


def _eye_batch(batch, m: int, cols: int, dtype):
    """A new device array of identity matrices ``batch + (m, cols)``."""
    return _work(be().from_numpy(np.eye(m, cols, dtype=dtype)), batch)


@kernel("linalg_qr", "cuda")
def qr(a, mode):
    """``(Q, R)`` of ``a`` by LAPACK's geqrf/orgqr on the host, copied back (one synchronisation).

    Note [QR on the host]
        flambeau had a Householder geqrf/orgqr in numba.cuda, one block per matrix, right under the
        simulator and under numba's CPU target. On an H100 (numba-cuda 0.30.4, CUDA 13) it was wrong: the
        reflector update ``x[i] -= w * v[i]`` came out as ``w = w * v[i]; x[i] -= w``, the error matching
        that reading to four digits on a 6x1 matrix whose geqrf was exact, the same with the update as a
        device function, inlined, or compiled with ``opt=False``. Until a GPU session pins the cause (or
        cuSOLVER's geqrf is bound), QR and what builds on it (the SVD's U, pinv) take LAPACK's, as torch
        does for ``linalg.eig`` on CUDA. ``tools/gpu_probe_linalg.py`` is the reproduction.
    """
    _check_real(a, "linalg_qr")
    q, r = KERNELS["linalg_qr"]["cpu"](be().to_numpy(a), mode)
    return be().from_numpy(q), be().from_numpy(r)


def _symmetric(a, uplo: str, batch):
    """Contiguous symmetric copies of ``a`` filled from triangle ``uplo`` (the other one is not read)."""
    low = tril(a, 0) if uplo == "L" else triu(a, 0)
    diag_free = tril(a, -1) if uplo == "L" else triu(a, 1)
    return binary_launcher("add")(low, _transposed(diag_free), from_numpy_dtype(a.dtype))


_SWEEPS = 60  # cyclic Jacobi converges quadratically: a dozen sweeps in practice; a bound, not a goal


def _eigh(a, uplo):
    d = _check_real(a, "linalg_eigh")
    batch = tuple(a.shape[:-2])
    n = a.shape[-1]
    work = _symmetric(a, uplo, batch)
    v = _eye_batch(batch, n, n, d)
    w = be().empty(batch + (n,), d)
    vout = be().empty(batch + (n, n), d)
    if n and _count(batch):
        tol = float(np.finfo(d).eps)
        _per_matrix("jacobi", _count(batch), _flat(work), _flat(v), n, _SWEEPS, tol)
        order = be().empty(batch + (n,), np.int64)
        _per_matrix("sorted_eigen", _count(batch), _flat(work), _flat(v), _flat(w), _flat(vout), _flat(order), n)
    return w, vout


@kernel("linalg_eigh", "cuda")
def eigh(a, uplo):
    return _eigh(a, uplo)


@kernel("linalg_eigvalsh", "cuda")
def eigvalsh(a, uplo):
    return _eigh(a, uplo)[0]


def _svd_tall(a, batch, full_matrices: bool, compute_uv: bool):
    """``(U, S, V)`` of ``a`` ``(..., m, n)`` with ``m >= n``: one-sided Jacobi, then ``U`` completed
    (and its zero-singular-value columns filled) by a QR of its unit columns."""
    d = np.dtype(a.dtype)
    m, n = a.shape[-2:]
    count = _count(batch)
    u = _work(a, batch)
    v = _eye_batch(batch, n, n, d)
    s_out = be().empty(tuple(batch) + (n,), d)
    u_out = be().empty(tuple(batch) + (m, n), d)
    v_out = be().empty(tuple(batch) + (n, n), d)
    if n == 0 or count == 0:
        return (_eye_batch(batch, m, m if full_matrices else 0, d) if compute_uv else None), s_out, v_out
    _per_matrix("svd_jacobi", count, _flat(u), _flat(v), m, n, _SWEEPS, float(np.finfo(d).eps))
    norms = be().empty(tuple(batch) + (n,), d)
    order = be().empty(tuple(batch) + (n,), np.int64)
    _per_matrix("svd_sort", count, _flat(u), _flat(v), _flat(s_out), _flat(u_out), _flat(v_out), _flat(norms),
                _flat(order), m, n)
    if not compute_uv:
        return None, s_out, None
    q, r = qr(u_out, "complete" if full_matrices else "reduced")
    _per_matrix("column_signs", count, _flat(q), _flat(r), m, q.shape[-1], r.shape[-2], n, min(m, n))
    return q, s_out, v_out


def _svd(a, full_matrices: bool, compute_uv: bool = True):
    """``(U, S, V)`` of any ``a`` ``(..., m, n)`` (``a = U diag(S) V^T``; new arrays): a wide matrix is
    decomposed through its transpose."""
    _check_real(a, "linalg_svd")
    batch = tuple(a.shape[:-2])
    m, n = a.shape[-2:]
    if m >= n:
        return _svd_tall(a, batch, full_matrices, compute_uv)
    v, s, u = _svd_tall(_transposed(a), batch, full_matrices, compute_uv)  # a^T = V S U^T
    return u, s, v


@kernel("linalg_svd", "cuda")
def svd(a, full_matrices):
    u, s, v = _svd(a, bool(full_matrices))
    return u, s, _transposed(v)


@kernel("linalg_svdvals", "cuda")
def svdvals(a):
    return _svd(a, False, compute_uv=False)[1]


@kernel("linalg_pinv", "cuda")
def pinv(a, atol, rtol, hermitian):
    """``V diag(1/s) U^T`` from the SVD (the eigendecomposition when ``hermitian``), small values cut
    at ``max(atol, rtol * largest)`` as the CPU kernel does."""
    _check_real(a, "linalg_pinv")
    batch = tuple(a.shape[:-2])
    if hermitian:
        s, w = _eigh(a, "L")
        left, scaled = _transposed(w), contiguous(w)  # W diag(1/w) W^T
    else:
        u, s, v = _svd(a, False)
        left, scaled = _transposed(u), v  # V diag(1/s) U^T
    rows, k = scaled.shape[-2:]
    if rows and k and _count(batch):
        _per_matrix("pinv_scale", _count(batch), _flat(scaled), _flat(s), rows, k, float(atol), float(rtol))
    return matmul(scaled, left)


@kernel("linalg_matrix_exp", "cuda")
def matrix_exp(a):
    """``exp(a)`` of square matrices in float64 (as the CPU kernel): each matrix scaled by its own
    ``2**-s``, Padé 13 (matrix products and one LU solve), then squared ``s`` times; the scalings are
    read back to the host (one synchronisation), the squarings of a batch run together."""
    d = np.dtype(a.dtype)
    if d.kind != "f":
        raise RuntimeError(f'"linalg_matrix_exp_cuda" not implemented for \'{scalar_name(d)}\'')
    batch = tuple(a.shape[:-2])
    n = a.shape[-1]
    count = _count(batch)
    f64 = np.dtype(np.float64)
    x = _work(a, batch, f64)
    if n == 0 or count == 0:
        return _work(x, batch, d)
    fl64 = from_numpy_dtype(f64)
    add, mul = binary_launcher("add"), binary_launcher("mul")

    def comb(*terms):  # sum of coefficient * matrix
        out = None
        for c, m in terms:
            out = mul(m, c, fl64) if out is None else add(out, mul(m, c, fl64), fl64)
        return out

    norms = be().empty((count,), f64)
    _per_thread("one_norm", count, _flat(x), n, count, norms)
    host = be().to_numpy(norms)
    steps = np.array([max(0, math.ceil(math.log2(v / _THETA13))) if v > _THETA13 else 0 for v in host], np.int64)
    x = mul(x, be().from_numpy((0.5 ** steps).reshape(tuple(batch) + (1, 1))), fl64)
    b = _PADE13
    eye = _eye_batch(batch, n, n, f64)
    x2 = matmul(x, x)
    x4 = matmul(x2, x2)
    x6 = matmul(x4, x2)
    u = matmul(x, add(matmul(x6, comb((b[13], x6), (b[11], x4), (b[9], x2))),
                      comb((b[7], x6), (b[5], x4), (b[3], x2), (b[1], eye)), fl64))
    v = add(matmul(x6, comb((b[12], x6), (b[10], x4), (b[8], x2))),
            comb((b[6], x6), (b[4], x4), (b[2], x2), (b[0], eye)), fl64)
    r, _ = solve(binary_launcher("sub")(v, u, fl64), add(v, u, fl64))
    mask_host = np.zeros(tuple(batch) + (1, 1), np.bool_)
    for k in range(1, int(steps.max(initial=0)) + 1):
        mask_host[...] = (steps >= k).reshape(mask_host.shape)
        r = KERNELS["where"]["cuda"](be().from_numpy(mask_host), matmul(r, r), r, fl64)
    return _work(r, batch, d)


@kernel("linalg_eig", "cuda")
def eig(a):
    """``(eigenvalues, eigenvectors)`` of square ``a``, complex, computed by LAPACK's geev on the host and
    copied back, as torch does for CUDA tensors (it synchronises the device with the CPU)."""
    w, v = KERNELS["linalg_eig"]["cpu"](be().to_numpy(a))
    return be().from_numpy(w), be().from_numpy(v)


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
                  (f"nan_where:{dn}", _nan_where_py(), (f, i32, i64, i64)),
                  (f"jacobi:{dn}", _jacobi_py(), (f, f, i64, i64, types.float64)),
                  (f"sorted_eigen:{dn}", _sorted_eigen_py(), (f, f, f, f, types.Array(i64, 1, "C"), i64)),
                  (f"svd_jacobi:{dn}", _svd_jacobi_py(), (f, f, i64, i64, i64, types.float64)),
                  (f"svd_sort:{dn}", _svd_sort_py(), (f, f, f, f, f, f, types.Array(i64, 1, "C"), i64, i64)),
                  (f"column_signs:{dn}", _column_signs_py(), (f, f, i64, i64, i64, i64, i64)),
                  (f"pinv_scale:{dn}", _pinv_scale_py(), (f, f, i64, i64, types.float64, types.float64)),
                  (f"one_norm:{dn}", _one_norm_py(), (f, i64, i64, types.Array(types.float64, 1, "C")))]
    return cases
