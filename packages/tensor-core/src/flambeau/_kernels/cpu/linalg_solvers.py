"""CPU kernels of the torch.linalg: factorizations, solvers, norms family.

LAPACK through ``numpy.linalg`` (batched over leading dimensions, results in the input's dtype).
The kernels that can fail (a singular or not positive-definite matrix) never raise: they return
LAPACK's ``info`` per matrix (int32, of the batch shape) and the front decides, as torch's ``*_ex``
functions do. numpy's batched calls raise for a whole batch, so on failure the kernel redoes the
batch one matrix at a time to find which ones failed and LAPACK's ``info`` for them.
"""

from __future__ import annotations

import math

import numpy as np

from flambeau._ops._registry import kernel

__all__ = ["lu_info", "cholesky_info", "triangular_substitution", "matrix_exp_pade13"]


def _batch(a: np.ndarray):
    """``a`` as a stack of matrices ``(b, m, n)`` (a view when it can be) and its batch shape."""
    return a.reshape((-1, *a.shape[-2:])), a.shape[:-2]


def lu_info(a: np.ndarray) -> int:
    """LAPACK getrf's ``info`` for one square matrix: 1 + the first exactly zero pivot, or 0.

    Gaussian elimination with partial pivoting, as getrf does, which goes on past a zero pivot
    (only called for the matrices numpy found singular, so its O(n) Python steps do not matter).
    """
    u = np.array(a)
    n = u.shape[0]
    for j in range(n):
        p = j + int(np.argmax(np.abs(u[j:, j])))
        if u[p, j] == 0:
            return j + 1
        u[[j, p]] = u[[p, j]]
        u[j + 1:, j:] -= np.outer(u[j + 1:, j] / u[j, j], u[j, j:])
    return 0


def cholesky_info(a: np.ndarray) -> tuple[np.ndarray, int]:
    """Cholesky of the lower triangle of one matrix, as far as it goes, and potrf's ``info``.

    ``info`` is the order of the first leading minor that is not positive-definite (0: none);
    the factor holds the columns computed before it, as LAPACK leaves them.
    """
    n = a.shape[0]
    low = np.zeros_like(a)
    for j in range(n):
        d = a[j, j] - low[j, :j] @ low[j, :j]
        if not d > 0:  # also catches NaN
            return low, j + 1
        low[j, j] = math.sqrt(d)
        low[j + 1:, j] = (a[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
    return low, 0


def triangular_substitution(a: np.ndarray, b: np.ndarray, upper: bool) -> np.ndarray:
    """Solve ``a x = b`` for triangular ``a`` ``(..., n, n)`` by substitution, one row at a time.

    The fallback for singular triangular matrices, where LAPACK's trsm divides by zero and torch
    returns the infinities and NaNs that gives (numpy's solve refuses such a matrix).
    """
    n = a.shape[-1]
    x = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype=b.dtype)
    rows = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in rows:
            done = slice(i + 1, n) if upper else slice(0, i)
            acc = b[..., i, :] - np.einsum("...j,...jk->...k", a[..., i, done], x[..., done, :])
            x[..., i, :] = acc / a[..., i, i][..., None]
    return x


@kernel("linalg_inv_ex", "cpu")
def inv_ex_kernel(a):
    """``(inverse, info)`` of square matrices ``(..., n, n)``; NaN where a matrix is singular."""
    try:
        return np.linalg.inv(a).astype(a.dtype, copy=False), np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        pass
    mats, batch = _batch(a)
    out = np.full(mats.shape, np.nan, dtype=a.dtype)
    info = np.zeros(len(mats), np.int32)
    for i, m in enumerate(mats):
        try:
            out[i] = np.linalg.inv(m)
        except np.linalg.LinAlgError:
            info[i] = lu_info(m) or m.shape[-1]  # rounding may differ from LAPACK's: still singular
    return out.reshape(a.shape), info.reshape(batch)


@kernel("linalg_det", "cpu")
def det_kernel(a):
    """Determinants of ``(..., n, n)`` -> ``(...)``."""
    return np.asarray(np.linalg.det(a), dtype=a.dtype)


@kernel("linalg_slogdet", "cpu")
def slogdet_kernel(a):
    """``(sign, log|det|)`` of ``(..., n, n)``, each ``(...)``; a singular matrix gives ``(0, -inf)``."""
    sign, logabsdet = np.linalg.slogdet(a)
    return np.asarray(sign, dtype=a.dtype), np.asarray(logabsdet, dtype=a.dtype)


@kernel("linalg_solve", "cpu")
def solve_kernel(a, b):
    """``(x, info)`` with ``a x = b``: ``a`` ``(..., n, n)``, ``b`` ``(..., n, k)``, batch dims broadcast.

    ``info`` has the broadcast batch shape (getrf's per matrix); ``x`` is NaN where ``a`` is singular.
    """
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    try:
        return np.linalg.solve(a, b).astype(a.dtype, copy=False), np.zeros(batch, np.int32)
    except np.linalg.LinAlgError:
        pass
    a = np.broadcast_to(a, batch + a.shape[-2:]).reshape((-1, *a.shape[-2:]))
    b = np.broadcast_to(b, batch + b.shape[-2:]).reshape((-1, *b.shape[-2:]))
    out = np.full(b.shape, np.nan, dtype=b.dtype)
    info = np.zeros(len(a), np.int32)
    for i in range(len(a)):
        try:
            out[i] = np.linalg.solve(a[i], b[i])
        except np.linalg.LinAlgError:
            info[i] = lu_info(a[i]) or a.shape[-1]
    return out.reshape(batch + b.shape[-2:]), info.reshape(batch)


@kernel("linalg_solve_triangular", "cpu")
def solve_triangular_kernel(a, b, upper, unitriangular):
    """``x`` with ``T x = b``, ``T`` the upper or lower triangle of ``a`` (unit diagonal if asked).

    Only that triangle of ``a`` is read. ``a`` ``(..., n, n)``, ``b`` ``(..., n, k)`` (batch dims
    broadcast). A zero on the diagonal gives infinities and NaNs, as LAPACK's trsm does.
    """
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t.copy()
        t[..., range(a.shape[-1]), range(a.shape[-1])] = 1
    try:
        return np.linalg.solve(t, b).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError:
        return triangular_substitution(t, b, upper)


@kernel("linalg_cholesky_ex", "cpu")
def cholesky_ex_kernel(a, upper):
    """``(L, info)``: the Cholesky factor of ``a`` ``(..., n, n)`` from its lower triangle.

    When ``upper``, from the upper triangle, and ``L`` is returned transposed (``a = L^T L``), as
    torch does; ``info`` ``(...)`` int32.
    """
    if upper:
        a = np.swapaxes(a, -1, -2)
    try:
        low = np.linalg.cholesky(a).astype(a.dtype, copy=False)
        info = np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        mats, batch = _batch(a)
        low = np.zeros_like(mats)
        info = np.zeros(len(mats), np.int32)
        for i, m in enumerate(mats):
            low[i], info[i] = cholesky_info(m)
        low, info = low.reshape(a.shape), info.reshape(batch)
    return (np.swapaxes(low, -1, -2).copy() if upper else low), info


@kernel("linalg_qr", "cpu")
def qr_kernel(a, mode):
    """``(Q, R)`` of ``a`` ``(..., m, n)`` for mode ``'reduced'``/``'complete'``; ``Q`` is empty for ``'r'``."""
    if mode == "r":
        return np.zeros((0,), a.dtype), np.linalg.qr(a, mode="r").astype(a.dtype, copy=False)
    q, r = np.linalg.qr(a, mode=mode)
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


@kernel("linalg_svd", "cpu")
def svd_kernel(a, full_matrices):
    """``(U, S, Vh)`` of ``a`` ``(..., m, n)`` (LAPACK gesdd); ``S`` descending."""
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u.astype(a.dtype, copy=False), s.astype(a.dtype, copy=False), vh.astype(a.dtype, copy=False)


@kernel("linalg_svdvals", "cpu")
def svdvals_kernel(a):
    """Singular values of ``a`` ``(..., m, n)`` -> ``(..., min(m, n))``, descending."""
    return np.linalg.svd(a, compute_uv=False).astype(a.dtype, copy=False)


@kernel("linalg_eigh", "cpu")
def eigh_kernel(a, uplo):
    """``(eigenvalues, eigenvectors)`` of the symmetric matrix held in triangle ``uplo`` of ``a``; ascending."""
    w, v = np.linalg.eigh(a, UPLO=uplo)
    return w.astype(a.dtype, copy=False), v.astype(a.dtype, copy=False)


@kernel("linalg_eigvalsh", "cpu")
def eigvalsh_kernel(a, uplo):
    """Eigenvalues (ascending) of the symmetric matrix held in triangle ``uplo`` of ``a``."""
    return np.linalg.eigvalsh(a, UPLO=uplo).astype(a.dtype, copy=False)


@kernel("linalg_pinv", "cpu")
def pinv_kernel(a, atol, rtol, hermitian):
    """Pseudo-inverse of ``a`` ``(..., m, n)`` -> ``(..., n, m)``.

    Singular values (eigenvalue magnitudes when ``hermitian``) at or below ``max(atol, rtol * largest)``
    are treated as zero; ``atol``/``rtol`` are floats here (the front resolved torch's defaults).
    """
    if hermitian:
        w, v = np.linalg.eigh(a)
        s = np.abs(w)
        cut = np.maximum(atol, rtol * s.max(axis=-1, initial=0.0))[..., None]
        with np.errstate(divide="ignore"):
            inv = np.where(s > cut, 1.0 / w, 0.0)
        out = (v * inv[..., None, :]) @ np.swapaxes(v, -1, -2)
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        cut = np.maximum(atol, rtol * s.max(axis=-1, initial=0.0))[..., None]
        with np.errstate(divide="ignore"):
            inv = np.where(s > cut, 1.0 / s, 0.0)
        out = (np.swapaxes(vh, -1, -2) * inv[..., None, :]) @ np.swapaxes(u, -1, -2)
    return out.astype(a.dtype, copy=False)


# Padé approximant of degree 13 and its range (Higham, "The scaling and squaring method for the
# matrix exponential revisited", 2005), the method of scipy's expm and torch's CPU matrix_exp.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0,
           1.0)
_THETA13 = 5.371920351148152


def matrix_exp_pade13(a: np.ndarray) -> np.ndarray:
    """``exp(a)`` for one float64 square matrix: scale by ``2**-s``, Padé 13, square ``s`` times."""
    n = a.shape[0]
    norm = np.abs(a).sum(axis=0).max() if n else 0.0
    s = max(0, math.ceil(math.log2(norm / _THETA13))) if norm > _THETA13 else 0
    a = a / 2.0 ** s
    b = _PADE13
    ident = np.eye(n)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


@kernel("linalg_matrix_exp", "cpu")
def matrix_exp_kernel(a):
    """Matrix exponential of ``a`` ``(..., n, n)``, computed in float64 and returned in ``a``'s dtype."""
    mats, _ = _batch(a.astype(np.float64))
    out = np.empty_like(mats)
    for i, m in enumerate(mats):
        out[i] = matrix_exp_pade13(m)
    return out.reshape(a.shape).astype(a.dtype, copy=False)


@kernel("linalg_lu_factor_ex", "cpu")
def lu_factor_ex_kernel(a):
    """``(LU, pivots, info)`` of ``a`` ``(..., m, n)``: LAPACK getrf's partial-pivoting LU, batched.

    ``LU`` holds ``U`` in its upper triangle and the unit-lower ``L`` below the diagonal; ``pivots``
    ``(..., min(m, n))`` int32, 1-based (row ``i`` was swapped with row ``pivots[i]``); ``info`` ``(...)``
    int32 is 0, or ``j`` for the first zero pivot ``U[j, j]`` (1-based), as getrf. numpy does not bind
    getrf: the elimination runs one column at a time, each step vectorised over the batch.
    """
    mats, batch = _batch(a)
    lu = np.array(mats, dtype=a.dtype)
    count, m, n = lu.shape
    k = min(m, n)
    pivots = np.zeros((count, k), np.int32)
    info = np.zeros(count, np.int32)
    every = np.arange(count)
    for j in range(k):
        p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
        pivots[:, j] = p + 1
        row = lu[every, j].copy()
        lu[every, j] = lu[every, p]
        lu[every, p] = row
        pivot = lu[:, j, j]
        zero = pivot == 0
        info[(info == 0) & zero] = j + 1
        # a zero pivot has a zero column below it (it was the largest): getrf leaves it unscaled
        below = lu[:, j + 1:, j] / np.where(zero, 1, pivot)[:, None]
        lu[:, j + 1:, j] = below
        lu[:, j + 1:, j + 1:] -= below[:, :, None] * lu[:, j, None, j + 1:]
    return lu.reshape(a.shape), pivots.reshape(batch + (k,)), info.reshape(batch)


@kernel("linalg_eig", "cpu")
def eig_kernel(a):
    """``(eigenvalues, eigenvectors)`` of square ``a`` ``(..., n, n)`` (LAPACK geev), always complex.

    complex64 for float32 input, complex128 for float64; eigenvectors in the columns, each of norm 1.
    """
    w, v = np.linalg.eig(a)
    ctype = np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128
    return w.astype(ctype, copy=False), v.astype(ctype, copy=False)
