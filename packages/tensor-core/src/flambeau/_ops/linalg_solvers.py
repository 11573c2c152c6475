"""Operators of the torch.linalg: factorizations, solvers, norms family (``flambeau.linalg``).

The primitives (operators with kernels and derivatives) are the LAPACK routines: ``linalg_inv_ex``,
``linalg_det``, ``linalg_slogdet``, ``linalg_solve``, ``linalg_solve_triangular``,
``linalg_cholesky_ex``, ``linalg_qr``, ``linalg_svd``, ``linalg_svdvals``, ``linalg_eigh``,
``linalg_eigvalsh``, ``linalg_pinv``, ``linalg_matrix_exp``, ``linalg_lu_factor_ex`` and
``linalg_eig`` (complex results, not differentiable). They are reached through ``flambeau.linalg``
(``function=False``: torch has no ``torch.linalg_det``). Everything else is composite: the norms
(over ``norm``, ``svdvals``, ``abs``, ``sum``, ``amax``), ``lstsq`` (over ``pinv``), ``solve_ex``,
``lu``/``lu_factor``/``lu_unpack``/``lu_solve`` (over ``linalg_lu_factor_ex`` and the triangular
solver), ``cond``, ``tensorinv``, ``tensorsolve``, ``householder_product``, ``vander``,
``matrix_power``, ``matrix_rank``, ``multi_dot``, ``vecdot``, ``cross``, ``diagonal``, and torch's
top-level names of the area (``det``, ``inverse``, ``svd``, ``qr``, ``cholesky``, ``slogdet``,
``logdet``, ``pinverse``, ``matrix_exp``, ``matrix_power``, ``lu``, ``lu_solve``, ``lu_unpack``,
``triangular_solve``, ``cholesky_solve``, ``cholesky_inverse``, ``chain_matmul``, ``vander``,
``cartesian_prod``, ``block_diag``, ``cov``, ``corrcoef``, ``renorm``, ``histc``, ``histogram``),
declared here so that ``flambeau.<name>`` and ``Tensor.<name>`` exist as in torch.

Inputs are batches of matrices ``(*, m, n)`` of float32 or float64; results keep the input's dtype.
A matrix for which LAPACK fails (singular for ``inv``/``solve``, not positive-definite for
``cholesky``) raises :class:`LinAlgError` (a RuntimeError, as ``torch.linalg.LinAlgError``) with
torch's message; the ``*_ex`` variants return LAPACK's ``info`` instead.

Kernel convention (arrays in, arrays out; CPU kernels: ``flambeau._kernels.cpu.linalg_solvers``):
    linalg_inv_ex(a) -> (inverse, info); linalg_det(a) -> det; linalg_slogdet(a) -> (sign, logabsdet);
    linalg_solve(a, b) -> (x, info) with ``b`` a batch of matrices (batch dims broadcast);
    linalg_solve_triangular(a, b, upper, unitriangular) -> x; linalg_cholesky_ex(a, upper) -> (L, info);
    linalg_qr(a, mode) -> (Q, R); linalg_svd(a, full_matrices) -> (U, S, Vh); linalg_svdvals(a) -> S;
    linalg_eigh(a, uplo) -> (eigenvalues, eigenvectors); linalg_eigvalsh(a, uplo) -> eigenvalues;
    linalg_pinv(a, atol, rtol, hermitian) -> pinv (float tolerances); linalg_matrix_exp(a) -> exp(a);
    linalg_lu_factor_ex(a) -> (LU, pivots, info) (pivots int32, 1-based); linalg_eig(a) -> (w, v) complex.
    ``info`` arrays are int32 of the batch shape.

Autograd recording: ``inputs`` are the tensors and positional arguments in signature order, multi-output
operators record their namedtuple.

CUDA kernels (``flambeau._kernels.cuda.linalg_solvers``, flambeau's own: cuSOLVER is not bound) for
every primitive but ``linalg_eig``. The composites run on CUDA where their parts do (``vector_norm``,
``matrix_norm('fro')``, ``vecdot``, ``cross``, ``multi_dot``, ``matrix_power``, ``diagonal`` ...).
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from flambeau import _dtype as dt
from flambeau._device import CPU
from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, record_if_needed, wrap_dim
from flambeau._ops._registry import declare
from flambeau._ops.reduction import _return_type

__all__ = ["LinAlgError", "norm", "vector_norm", "matrix_norm", "inv", "inv_ex", "det", "slogdet", "solve",
           "solve_ex", "solve_triangular", "cholesky", "cholesky_ex", "qr", "svd", "svdvals", "eigh", "eigvalsh",
           "eig", "eigvals", "lstsq", "pinv", "matrix_exp", "matrix_power", "matrix_rank", "cross", "vecdot",
           "multi_dot", "diagonal", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "lu_unpack", "cond", "tensorinv",
           "tensorsolve", "householder_product", "vander", "matmul"]


class LinAlgError(RuntimeError):
    """A LAPACK routine failed on the input (singular, not positive-definite), as ``torch.linalg.LinAlgError``."""


class return_types:  # noqa: N801 - mirrors torch.return_types
    """Namedtuple types of the linalg functions, as ``torch.return_types``."""

    linalg_inv_ex = _return_type("linalg_inv_ex", "inverse info")
    linalg_cholesky_ex = _return_type("linalg_cholesky_ex", "L info")
    linalg_slogdet = _return_type("linalg_slogdet", "sign logabsdet")
    linalg_qr = _return_type("linalg_qr", "Q R")
    linalg_svd = _return_type("linalg_svd", "U S Vh")
    linalg_eigh = _return_type("linalg_eigh", "eigenvalues eigenvectors")
    linalg_lstsq = _return_type("linalg_lstsq", "solution residuals rank singular_values")
    slogdet = _return_type("slogdet", "sign logabsdet")
    svd = _return_type("svd", "U S V")
    qr = _return_type("qr", "Q R")
    linalg_solve_ex = _return_type("linalg_solve_ex", "result info")
    linalg_lu_factor_ex = _return_type("linalg_lu_factor_ex", "LU pivots info")
    linalg_lu_factor = _return_type("linalg_lu_factor", "LU pivots")
    linalg_lu = _return_type("linalg_lu", "P L U")
    lu_unpack = _return_type("lu_unpack", "P L U")
    _lu_with_info = _return_type("_lu_with_info", "LU pivots info")
    linalg_eig = _return_type("linalg_eig", "eigenvalues eigenvectors")
    triangular_solve = _return_type("triangular_solve", "solution cloned_coefficient")
    histogram = _return_type("histogram", "hist bin_edges")


# --- argument checks (torch's messages) ------------------------------------------------------------
def _check_matrix(A, fname: str, argname: str = "A", square: bool = False) -> None:
    check_tensor(A, argname, fname)
    if A.ndim < 2:
        raise RuntimeError(f"{fname}: The input tensor {argname} must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fname}: {argname} must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _check_float(A, fname: str, low_precision: bool = False) -> None:
    d = A.dtype
    if not d.is_floating_point and not d.is_complex:
        raise RuntimeError(f"{fname}: Expected a floating point or complex tensor as input. Got {d.scalar_name}")
    if d.is_floating_point and d.itemsize < 4 and not low_precision:
        raise RuntimeError(f"{fname}: Low precision dtypes not supported. Got {d.scalar_name}")


def _check(A, fname: str, argname: str = "A", square: bool = False) -> None:
    _check_matrix(A, fname, argname, square)
    _check_float(A, fname)


def _kernel(op, device):
    """``op``'s kernel for ``device``; on a device without one, an error that says what to do."""
    k = op.kernels.get(device.type)
    if k is None:
        raise NotImplementedError(
            f"flambeau.{op.name} has no kernel for device type '{device.type}' (available: "
            f"{', '.join(sorted(op.kernels)) or 'none'}): it needs cuSOLVER, which flambeau does not bind yet, "
            "or a kernel of flambeau's own, which it does not have yet; move the tensor to the CPU (A.cpu())")
    return k


def _raise_for_info(info: Tensor, batched: bool, message) -> None:
    """LinAlgError for the first matrix whose ``info`` (a tensor on any device) is non-zero
    (``message(info) -> str``); a CUDA ``info`` is read back, as torch does to raise."""
    flat = info.cpu().numpy().reshape(-1)
    bad = np.flatnonzero(flat)
    if bad.size:
        i = int(bad[0])
        prefix = f"(Batch element {i}): " if batched else ""
        raise LinAlgError(message(prefix, int(flat[i])))


def _inv_message(fname):
    return lambda prefix, k: (f"{fname}: {prefix}The diagonal element {k} is zero, the inversion could not be "
                              "completed because the input matrix is singular.")


def _cholesky_message(prefix, k):
    return (f"linalg.cholesky: {prefix}The factorization could not be completed because the input is not "
            f"positive-definite (the leading minor of order {k} is not positive-definite).")


def _solve_message(fname):
    return lambda prefix, k: f"{fname}: {prefix}The solver failed because the input matrix is singular."


def _run(op, inputs: tuple, attrs: dict, A: Tensor, *args, wrap=None):
    """Call ``op``'s kernel on ``A``'s device with ``A`` and ``args``; wrap, record and return the result."""
    dev = A._device
    res = _kernel(op, dev)(A._data, *args)
    out = _wrap(res, dev) if wrap is None else wrap(*(_wrap(r, dev) for r in res))
    record_if_needed(op, inputs, attrs, out)
    return out


# --- inv, det, slogdet -------------------------------------------------------------------------------
INV_EX = declare("linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)",
                 category="linalg_solvers", function=False, method=False)


@INV_EX.front
def inv_ex(A: Tensor, *, check_errors: bool = False):
    """Inverse of square matrices ``A`` ``(*, n, n)``, and LAPACK's ``info`` (int32, ``(*)``) for each.

    ``info`` is 0 for an invertible matrix, else ``k`` where the ``k``-th diagonal element of its LU
    factor is zero (the inverse is then NaN). ``check_errors=True`` raises :class:`LinAlgError` instead.
    """
    _check(A, "linalg.inv_ex", square=True)
    out = _run(INV_EX, (A,), {}, A, wrap=return_types.linalg_inv_ex)
    if check_errors:
        _raise_for_info(out.info, A.ndim > 2, _inv_message("linalg.inv_ex"))
    return out


def inv(A: Tensor) -> Tensor:
    """Inverse of square matrices ``A`` ``(*, n, n)`` (float32/float64); :class:`LinAlgError` if one is singular."""
    _check(A, "linalg.inv", square=True)
    out = _run(INV_EX, (A,), {}, A, wrap=return_types.linalg_inv_ex)
    _raise_for_info(out.info, A.ndim > 2, _inv_message("linalg.inv"))
    return out.inverse


DET = declare("linalg_det(Tensor A) -> Tensor", category="linalg_solvers", function=False, method=False)


@DET.front
def det(A: Tensor) -> Tensor:
    """Determinants of square matrices ``A`` ``(*, n, n)`` -> ``(*)``, in ``A``'s dtype."""
    _check(A, "linalg.det", square=True)
    return _run(DET, (A,), {}, A)


SLOGDET = declare("linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)", category="linalg_solvers",
                  function=False, method=False)


@SLOGDET.front
def slogdet(A: Tensor):
    """The namedtuple ``(sign, logabsdet)`` of the determinants of ``A`` ``(*, n, n)``, each ``(*)``.

    ``det(A) == sign * exp(logabsdet)``; a singular matrix gives ``(0, -inf)``. Differentiable
    through ``logabsdet``.
    """
    _check(A, "linalg.slogdet", square=True)
    return _run(SLOGDET, (A,), {}, A, wrap=return_types.linalg_slogdet)


# --- solve, solve_triangular -------------------------------------------------------------------------
SOLVE = declare("linalg_solve(Tensor A, Tensor B) -> (Tensor result, Tensor info)", category="linalg_solvers",
                function=False, method=False)


@SOLVE.front
def _solve_matrices(A: Tensor, B: Tensor):
    """``(X, info)`` with ``A X = B`` for ``A`` ``(*, n, n)`` and a batch of matrices ``B`` ``(*, n, k)``.

    The primitive under :func:`solve` (which handles vectors, ``left`` and errors).
    """
    dev = common_device(A, B)
    x, info = _kernel(SOLVE, dev)(A._data, B._data)
    out = (_wrap(x, dev), _wrap(info, dev))
    record_if_needed(SOLVE, (A, B), {}, out)
    return out


def _vector_rhs(A: Tensor, B: Tensor) -> bool:
    """torch's rule: ``B`` is a (batch of) vector(s) if 1-D, or if its shape is ``A``'s without the last dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve_ex(A: Tensor, B: Tensor, left: bool, fname: str):
    """``(X, info)`` for :func:`solve` and :func:`solve_ex`: torch's checks, vector and ``left`` rules."""
    _check(A, fname, square=True)
    check_tensor(B, "B", fname)
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fname}: Expected A and B to have the same dtype, but found A of type "
                           f"{A.dtype.scalar_name} and B of type {B.dtype.scalar_name} instead")
    vector = _vector_rhs(A, B)
    b = B.unsqueeze(-1) if vector else B
    if not left:
        if vector:
            raise RuntimeError(f"{fname}: Vector broadcasting of the left hand side is not supported for "
                               "left=False. In this case linalg.solve is equivalent to B / A.squeeze(-1)")
        A, b = A.mT, b.mT
    if b.shape[-2] != A.shape[-1]:
        shape_b = f"{b.shape[-2]}x{b.shape[-1]}"
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {shape_b})")
    x, info = _solve_matrices(A, b)
    if not left:
        x = x.mT
    return (x.squeeze(-1) if vector else x), info


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``A X = B`` (``X A = B`` when ``left=False``).

    ``A`` ``(*, n, n)`` square; ``B`` ``(*, n, k)``, or ``(*, n)``/``(n,)`` for vectors (torch's rule);
    batch dimensions broadcast. :class:`LinAlgError` if a matrix of ``A`` is singular.
    """
    x, info = _solve_ex(A, B, left, "linalg.solve")
    _raise_for_info(info, info.ndim > 0, _solve_message("flambeau.linalg.solve"))
    return x


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False):
    """The namedtuple ``(result, info)``: :func:`solve` that reports singular matrices in ``info``.

    ``info`` (int32, the broadcast batch shape) is 0, or the 1-based index of the zero pivot of the
    LU factorization of a singular matrix (whose ``result`` is then not finite);
    ``check_errors=True`` raises :class:`LinAlgError` instead.
    """
    x, info = _solve_ex(A, B, left, "linalg.solve")  # torch's checks name linalg.solve here too
    if check_errors:
        _raise_for_info(info, info.ndim > 0, _solve_message("flambeau.linalg.solve_ex"))
    return return_types.linalg_solve_ex(x, info)


SOLVE_TRIANGULAR = declare("linalg_solve_triangular(Tensor A, Tensor B, bool upper, bool unitriangular) -> Tensor",
                           category="linalg_solvers", function=False, method=False)


@SOLVE_TRIANGULAR.front
def _solve_triangular_left(A: Tensor, B: Tensor, upper: bool, unitriangular: bool) -> Tensor:
    """``X`` with ``T X = B``, ``T`` the upper/lower triangle of ``A``; the primitive under :func:`solve_triangular`."""
    dev = common_device(A, B)
    out = _wrap(_kernel(SOLVE_TRIANGULAR, dev)(A._data, B._data, upper, unitriangular), dev)
    record_if_needed(SOLVE_TRIANGULAR, (A, B, upper, unitriangular), {}, out)
    return out


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """Solve ``T X = B`` (``X T = B`` when ``left=False``), ``T`` the upper or lower triangle of ``A``.

    ``A`` ``(*, n, n)``, ``B`` ``(*, n, k)`` (``(*, k, n)`` when ``left=False``), batch dims broadcast.
    Only the triangle of ``A`` is read; ``unitriangular`` takes its diagonal as ones. No error for a
    singular ``T``: the result holds infinities/NaNs, as in torch.
    """
    _check(A, "linalg.solve_triangular", square=True)
    _check(B, "linalg.solve_triangular", "B")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type "
                           f"{A.dtype.scalar_name} and B of type {B.dtype.scalar_name} instead")
    if not left:
        return _solve_triangular_left(A.mT, B.mT, not upper, unitriangular).mT
    if B.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    return _solve_triangular_left(A, B, upper, unitriangular)


# --- cholesky ----------------------------------------------------------------------------------------
CHOLESKY_EX = declare("linalg_cholesky_ex(Tensor A, *, bool upper=False, bool check_errors=False) -> "
                      "(Tensor L, Tensor info)", category="linalg_solvers", function=False, method=False)


@CHOLESKY_EX.front
def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False):
    """The namedtuple ``(L, info)``: Cholesky factors of the symmetric positive-definite ``A`` ``(*, n, n)``.

    ``A = L L^T`` with ``L`` lower triangular (``A = U^T U``, upper, when ``upper``); only the lower
    triangle of ``A`` is read (the upper one when ``upper``). ``info`` (int32, ``(*)``) is 0, or the
    order of the first leading minor that is not positive-definite; ``check_errors=True`` raises
    :class:`LinAlgError` instead.
    """
    _check(A, "linalg.cholesky_ex", square=True)
    out = _run(CHOLESKY_EX, (A,), {"upper": upper}, A, upper, wrap=return_types.linalg_cholesky_ex)
    if check_errors:
        _raise_for_info(out.info, A.ndim > 2, _cholesky_message)
    return out


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """Cholesky factor ``L`` ``(*, n, n)`` of symmetric positive-definite ``A`` (``A = L L^T``; ``U^T U`` if upper).

    Only the lower triangle of ``A`` is read (the upper one when ``upper``); :class:`LinAlgError` if a
    matrix is not positive-definite.
    """
    _check(A, "linalg.cholesky", square=True)
    out = _run(CHOLESKY_EX, (A,), {"upper": upper}, A, upper, wrap=return_types.linalg_cholesky_ex)
    _raise_for_info(out.info, A.ndim > 2, _cholesky_message)
    return out.L


# --- qr, svd, svdvals, eigh, eigvalsh ----------------------------------------------------------------
QR = declare("linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)", category="linalg_solvers",
             function=False, method=False)


@QR.front
def qr(A: Tensor, mode: str = "reduced"):
    """The namedtuple ``(Q, R)`` with ``A = Q R``, ``Q`` orthonormal columns, ``R`` upper triangular.

    ``A`` ``(*, m, n)``, ``k = min(m, n)``. ``mode='reduced'``: ``Q`` ``(*, m, k)``, ``R`` ``(*, k, n)``;
    ``'complete'``: ``Q`` ``(*, m, m)``, ``R`` ``(*, m, n)``; ``'r'``: ``R`` only (``Q`` is empty).
    Differentiable (not for ``'complete'`` with ``m > n``, nor ``'r'``, as in torch).
    """
    _check(A, "linalg.qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    return _run(QR, (A, mode), {}, A, mode, wrap=return_types.linalg_qr)


SVD = declare("linalg_svd(Tensor A, bool full_matrices=True) -> (Tensor U, Tensor S, Tensor Vh)",
              category="linalg_solvers", function=False, method=False)


@SVD.front
def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None):
    """The namedtuple ``(U, S, Vh)`` with ``A = U diag(S) Vh``, ``S`` descending.

    ``A`` ``(*, m, n)``, ``k = min(m, n)``: ``U`` ``(*, m, m)``, ``S`` ``(*, k)``, ``Vh`` ``(*, n, n)``
    (``(*, m, k)`` and ``(*, k, n)`` when ``full_matrices=False``). The singular vectors are unique
    up to sign only; the gradient is defined for losses that do not depend on the signs (as in
    torch, it ignores the extra columns of ``full_matrices=True``). ``driver`` is accepted for
    torch's signature and must be None on the CPU.
    """
    _check(A, "linalg.svd")
    if driver is not None:
        raise RuntimeError("flambeau.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    return _run(SVD, (A, full_matrices), {}, A, full_matrices, wrap=return_types.linalg_svd)


SVDVALS = declare("linalg_svdvals(Tensor A) -> Tensor", category="linalg_solvers", function=False, method=False)


@SVDVALS.front
def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:
    """Singular values of ``A`` ``(*, m, n)`` -> ``(*, min(m, n))``, descending (always differentiable)."""
    _check(A, "linalg.svdvals")
    if driver is not None:
        raise RuntimeError("flambeau.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    return _run(SVDVALS, (A,), {}, A)


def _check_uplo(UPLO: str) -> None:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


EIGH = declare("linalg_eigh(Tensor A, str UPLO='L') -> (Tensor eigenvalues, Tensor eigenvectors)",
               category="linalg_solvers", function=False, method=False)


@EIGH.front
def eigh(A: Tensor, UPLO: str = "L"):  # noqa: N803 - torch's argument name
    """The namedtuple ``(eigenvalues, eigenvectors)`` of symmetric ``A`` ``(*, n, n)``.

    Only the triangle ``UPLO`` (``'L'`` lower, ``'U'`` upper) of ``A`` is read. Eigenvalues ``(*, n)``
    ascending; eigenvectors ``(*, n, n)`` in the columns, unique up to sign (the gradient is defined
    for sign-independent losses and distinct eigenvalues).
    """
    _check(A, "linalg.eigh", square=True)
    _check_uplo(UPLO)
    return _run(EIGH, (A, UPLO), {}, A, UPLO, wrap=return_types.linalg_eigh)


EIGVALSH = declare("linalg_eigvalsh(Tensor A, str UPLO='L') -> Tensor", category="linalg_solvers",
                   function=False, method=False)


@EIGVALSH.front
def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803 - torch's argument name
    """Eigenvalues ``(*, n)``, ascending, of the symmetric matrix held in triangle ``UPLO`` of ``A`` ``(*, n, n)``."""
    _check(A, "linalg.eigvalsh", square=True)
    _check_uplo(UPLO)
    return _run(EIGVALSH, (A, UPLO), {}, A, UPLO)


# --- pinv, lstsq, matrix_rank ------------------------------------------------------------------------
PINV = declare("linalg_pinv(Tensor A, float atol, float rtol, bool hermitian=False) -> Tensor",
               category="linalg_solvers", function=False, method=False)


def _tolerances(A: Tensor, atol, rtol) -> tuple[float, float]:
    """torch's defaults: ``rtol = eps * max(m, n)`` unless ``atol > 0`` is given alone."""
    if isinstance(atol, Tensor) or isinstance(rtol, Tensor):
        raise NotImplementedError("linalg: tensor atol/rtol are not supported by flambeau; pass floats")
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else float(np.finfo(A.dtype.np).eps) * builtins.max(A.shape[-2:])
    return float(atol or 0.0), float(rtol)


@PINV.front
def _pinv(A: Tensor, atol: float, rtol: float, hermitian: bool = False) -> Tensor:
    """Pseudo-inverse with float tolerances: the primitive under :func:`pinv`."""
    return _run(PINV, (A, atol, rtol, hermitian), {}, A, atol, rtol, hermitian)


def pinv(A: Tensor, *, atol: float | None = None, rtol: float | None = None, hermitian: bool = False) -> Tensor:
    """Moore-Penrose pseudo-inverse of ``A`` ``(*, m, n)`` -> ``(*, n, m)``.

    Singular values at or below ``max(atol, rtol * largest)`` count as zero; by default
    ``rtol = eps * max(m, n)``. ``hermitian=True`` takes ``A`` as symmetric (eigendecomposition).
    """
    _check(A, "linalg.pinv")
    if hermitian:
        _check_matrix(A, "linalg.pinv", square=True)
    return _pinv(A, *_tolerances(A, atol, rtol), hermitian)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None):
    """Least-squares solution of ``A X = B``: the namedtuple ``(solution, residuals, rank, singular_values)``.

    ``A`` ``(*, m, n)``, ``B`` ``(*, m, k)`` (or ``(*, m)``), batch dims broadcast; ``solution``
    ``(*, n, k)`` is the minimum-norm solution, with singular values below ``rcond * largest`` taken
    as zero (default ``eps * max(m, n)``). As torch's CPU drivers: ``residuals`` (squared, ``(*, k)``)
    only when ``m > n``, every ``A`` has full rank and ``driver`` is not ``'gelsy'`` (the default);
    ``rank`` (int64, ``(*)``) unless ``driver='gels'``; ``singular_values`` for ``'gelsd'``/``'gelss'``.
    Differentiable in ``A`` and ``B`` through ``solution`` (computed as ``pinv(A) @ B``).
    """
    _check(A, "flambeau.linalg.lstsq")
    check_tensor(B, "B", "flambeau.linalg.lstsq")
    driver = "gelsy" if driver is None else driver
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("flambeau.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"flambeau.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {A.dtype.scalar_name} and other's dtype {B.dtype.scalar_name}")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    if b.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"flambeau.linalg.lstsq: input.size(-2) should match other.size(-2). Got {A.shape[-2]} "
                           f"and {b.shape[-2]}")
    m, n = A.shape[-2:]
    _, rtol = _tolerances(A, None, rcond if rcond is not None and rcond > 0 else None)
    x = _pinv(A, 0.0, rtol) @ b
    empty = A.new_zeros((0,))
    sv = svdvals(A.detach())
    cut = sv.amax(-1, keepdim=True) * rtol if sv.shape[-1] else sv
    rank = (sv > cut).sum(-1) if sv.shape[-1] else A.new_zeros(A.shape[:-2]).to(dt.int64)
    residuals = empty
    if driver != "gelsy" and m > n and bool((rank == n).all()):
        residuals = ((A @ x - b) ** 2).sum(-2)  # (*, 1) for a vector B too, as torch
    rank_out = empty.to(dt.int64) if driver == "gels" else rank
    sv_out = sv if driver in ("gelsd", "gelss") else empty
    return return_types.linalg_lstsq(x.squeeze(-1) if vector else x, residuals, rank_out, sv_out)


def matrix_rank(A: Tensor, *, atol: float | None = None, rtol: float | None = None, hermitian: bool = False,
                tol: float | None = None) -> Tensor:
    """Numerical rank of ``A`` ``(*, m, n)`` -> int64 ``(*)``: singular values above ``max(atol, rtol * largest)``.

    Defaults as :func:`pinv` (``rtol = eps * max(m, n)``); ``tol`` is torch's older spelling of ``atol``.
    ``hermitian=True`` uses the eigenvalue magnitudes of a symmetric ``A``.
    """
    _check(A, "linalg.matrix_rank")
    if tol is not None:
        atol, rtol = tol, 0.0
    atol, rtol = _tolerances(A, atol, rtol)
    s = eigvalsh(A.detach()).abs() if hermitian else svdvals(A.detach())
    if s.shape[-1] == 0:
        return A.new_zeros(A.shape[:-2]).to(dt.int64)
    cut = (s.amax(-1, keepdim=True) * rtol).clamp(min=atol)
    return (s > cut).sum(-1)


# --- matrix_exp, matrix_power ------------------------------------------------------------------------
MATRIX_EXP = declare("linalg_matrix_exp(Tensor A) -> Tensor", category="linalg_solvers", function=False,
                     method=False)


@MATRIX_EXP.front
def matrix_exp(A: Tensor) -> Tensor:
    """Matrix exponential ``sum_k A^k / k!`` of square ``A`` ``(*, n, n)`` (scaling and squaring, Padé 13)."""
    _check_matrix(A, "linalg.matrix_exp", square=True)
    _check_float(A, "linalg.matrix_exp", low_precision=True)  # torch takes float16 and bfloat16 here (in float64)
    return _run(MATRIX_EXP, (A,), {}, A)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` ``(*, m, m)`` to the integer power ``n`` by repeated squaring; ``n < 0`` inverts first, 0 gives I."""
    check_tensor(A, "A", "linalg.matrix_power")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        _check_matrix(A, "linalg.matrix_power", square=True)
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"linalg_matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    if n == 0:
        from flambeau._factories import eye

        return eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape).clone()
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while True:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if not n:
            return result
        base = base @ base


# --- LU: factorization, unpacking, solving -------------------------------------------------------------
LU_FACTOR_EX = declare("linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> "
                       "(Tensor LU, Tensor pivots, Tensor info)", category="linalg_solvers", function=False,
                       method=False)


def _lu_message(fname):
    return lambda prefix, k: (f"flambeau.{fname}: {prefix}U[{k},{k}] is zero and using it on lu_solve would "
                              "result in a division by zero. If you still want to perform the factorization, "
                              "consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def _check_lu(A, pivot: bool, fname: str, dims_name: str = "flambeau.lu_factor") -> None:
    """torch's checks of the LU functions (their messages name ``dims_name`` for a missing dimension)."""
    check_tensor(A, "A", fname)
    if A.ndim < 2:
        raise RuntimeError(f"{dims_name}: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} instead")
    _check_float(A, fname)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")


@LU_FACTOR_EX.front
def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False):
    """The namedtuple ``(LU, pivots, info)``: the LU factorization with partial pivoting of ``A`` ``(*, m, n)``.

    ``A = P L U``; ``LU`` ``(*, m, n)`` holds ``U`` on and above the diagonal and the unit lower
    triangular ``L`` below it; ``pivots`` (int32, ``(*, min(m, n))``, 1-based, LAPACK's): row ``i``
    was swapped with row ``pivots[i]``; ``info`` (int32, ``(*)``) is 0 or the 1-based index of the
    first zero on ``U``'s diagonal. :func:`flambeau.lu_unpack` turns them into ``P, L, U``.
    ``pivot=False`` is not available on the CPU (as in torch). Differentiable through ``LU``.
    """
    _check_lu(A, pivot, "linalg.lu_factor_ex")
    out = _run(LU_FACTOR_EX, (A,), {}, A, wrap=return_types.linalg_lu_factor_ex)
    if check_errors:
        _raise_for_info(out.info, A.ndim > 2, _lu_message("linalg.lu_factor_ex"))
    return out


def lu_factor(A: Tensor, *, pivot: bool = True):
    """The namedtuple ``(LU, pivots)`` of :func:`lu_factor_ex`; :class:`LinAlgError` for a singular ``A``."""
    _check_lu(A, pivot, "linalg.lu_factor")
    out = _run(LU_FACTOR_EX, (A,), {}, A, wrap=return_types.linalg_lu_factor_ex)
    _raise_for_info(out.info, A.ndim > 2, _lu_message("linalg.lu_factor"))
    return return_types.linalg_lu_factor(out.LU, out.pivots)


def _permutation_matrices(pivots: Tensor, m: int, like: Tensor) -> Tensor:
    """``P`` ``(*, m, m)`` (``like``'s dtype) of LAPACK's 1-based row swaps ``pivots`` ``(*, k)``: ``A = P L U``."""
    piv = pivots.numpy(force=True).astype(np.int64) - 1  # (the row swaps are worked out on the host)
    flat = piv.reshape(-1, piv.shape[-1])
    perm = np.tile(np.arange(m), (len(flat), 1))  # perm[b, i]: the row of A that is row i of P^T A
    every = np.arange(len(flat))
    for j in range(flat.shape[-1]):
        p = flat[:, j]
        if ((p < j) | (p >= m)).any():
            raise RuntimeError(f"lu_unpack: LU_pivots holds an invalid row index at position {j} (expected in "
                               f"[{j + 1}, {m}], 1-based)")
        row = perm[every, j].copy()
        perm[every, j] = perm[every, p]
        perm[every, p] = row
    pt = np.eye(m, dtype=like.dtype.np)[perm]  # P^T: row i is e_{perm[i]}
    host = np.ascontiguousarray(np.swapaxes(pt, -1, -2)).reshape(piv.shape[:-1] + (m, m))
    return _wrap(host, CPU).to(like._device)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True):  # noqa: N803
    """The namedtuple ``(P, L, U)`` of an LU factorization ``(LU, pivots)`` from :func:`lu_factor`.

    ``LU_data`` ``(*, m, n)``, ``k = min(m, n)``: ``P`` ``(*, m, m)`` (the permutation, ``A = P L U``),
    ``L`` ``(*, m, k)`` unit lower triangular, ``U`` ``(*, k, n)`` upper triangular. ``unpack_data=False``
    returns empty ``L``/``U``, ``unpack_pivots=False`` an empty ``P``. Differentiable in ``LU_data``.
    """
    from flambeau._factories import eye

    check_tensor(LU_data, "LU_data", "lu_unpack")
    check_tensor(LU_pivots, "LU_pivots", "lu_unpack")
    if LU_data.ndim < 2:
        raise RuntimeError(f"lu_unpack: LU_data must have at least 2 dimensions, but got {LU_data.ndim}")
    if LU_pivots.dtype is not dt.int32:
        raise RuntimeError("flambeau.lu_unpack: LU_pivots is expected to be a contiguous tensor of flambeau.int32 "
                           "dtype.\nNote: this function is intended to be used with the output produced by "
                           "flambeau.linalg.lu_factor")
    m, n = LU_data.shape[-2:]
    k = builtins.min(m, n)
    if unpack_pivots and tuple(LU_pivots.shape) != tuple(LU_data.shape[:-2]) + (k,):
        raise RuntimeError(f"lu_unpack: LU_pivots must have shape {[*LU_data.shape[:-2], k]} (LU_data's batch and "
                           f"min(m, n) row swaps), but got {list(LU_pivots.shape)}")
    empty = LU_data.new_zeros((0,))
    low = upper = empty
    if unpack_data:
        low = LU_data[..., :, :k].tril(-1) + eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
        upper = LU_data[..., :k, :].triu()
    perm = _permutation_matrices(LU_pivots, m, LU_data) if unpack_pivots else empty
    return return_types.lu_unpack(perm, low, upper)


def lu(A: Tensor, *, pivot: bool = True):
    """The namedtuple ``(P, L, U)`` with ``A = P L U`` for ``A`` ``(*, m, n)`` (shapes as :func:`lu_unpack`).

    Works for singular matrices too; differentiable (through :func:`lu_factor_ex`).
    """
    _check_lu(A, pivot, "linalg.lu", "linalg.lu")
    factors = _run(LU_FACTOR_EX, (A,), {}, A, wrap=return_types.linalg_lu_factor_ex)
    return return_types.linalg_lu(*lu_unpack(factors.LU, factors.pivots))


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:  # noqa: N803
    """Solve ``A X = B`` given the LU factorization ``(LU, pivots)`` of ``A`` from :func:`lu_factor`.

    ``LU`` ``(*, n, n)``, ``B`` ``(*, n, k)`` (``(*, k, n)`` for ``left=False``: ``X A = B``);
    ``adjoint=True`` solves with ``A^T``. Batch dims broadcast. Differentiable in ``LU`` and ``B``.
    """
    _check(LU, "linalg.lu_solve", "LU", square=True)
    _check_matrix(B, "linalg.lu_solve", "B")
    if LU.dtype is not B.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{LU.dtype.scalar_name} and B of type {B.dtype.scalar_name} instead")
    n = LU.shape[-1]
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    if B.shape[-2] != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    perm = lu_unpack(LU, pivots, unpack_data=False).P
    if adjoint:  # A^T = U^T L^T P^T; the lower triangle of LU^T is U^T, its strict upper one L^T's
        y = solve_triangular(LU.mT, B, upper=False)
        return perm @ solve_triangular(LU.mT, y, upper=True, unitriangular=True)
    y = solve_triangular(LU, perm.mT @ B, upper=False, unitriangular=True)
    return solve_triangular(LU, y, upper=True)


# --- eig, eigvals (complex results) ------------------------------------------------------------------
EIG = declare("linalg_eig(Tensor A) -> (Tensor eigenvalues, Tensor eigenvectors)", category="linalg_solvers",
              function=False, method=False, differentiable=False)


@EIG.front
def eig(A: Tensor):
    """The namedtuple ``(eigenvalues, eigenvectors)`` of a general square ``A`` ``(*, n, n)``, both complex.

    complex64 for float32 input, complex128 for float64; eigenvalues ``(*, n)`` in LAPACK's order,
    eigenvectors ``(*, n, n)`` in the columns, each of norm 1. Not differentiable in flambeau (torch
    is): with grad mode on, an ``A`` that requires grad raises; ``detach()`` it.
    """
    from flambeau._grad_mode import state as grad_state

    _check(A, "linalg.eig", square=True)
    if A.requires_grad and grad_state.enabled:
        raise NotImplementedError("linalg.eig: the derivative of eig/eigvals is not implemented in flambeau (it "
                                  "needs complex autograd); call it on A.detach() or under flambeau.no_grad()")
    dev = A._device
    w, v = _kernel(EIG, dev)(A._data)
    return return_types.linalg_eig(_wrap(w, dev), _wrap(v, dev))


def eigvals(A: Tensor) -> Tensor:
    """Eigenvalues ``(*, n)`` of a general square ``A`` ``(*, n, n)``, complex (see :func:`eig`)."""
    _check(A, "linalg.eigvals", square=True)
    return eig(A).eigenvalues


# --- solve_ex companions: cond, tensorinv, tensorsolve, householder_product, vander, matmul -------------
def cond(A: Tensor, p=None) -> Tensor:
    """Condition number of ``A`` ``(*, m, n)`` in the norm ``p`` -> ``(*)``.

    ``p`` None or 2: ratio of the largest to the smallest singular value (-2: its inverse), any shape;
    ``'fro'``, ``'nuc'``, ``inf``, ``-inf``, 1, -1: ``norm(A) * norm(inv(A))`` for square ``A``
    (``inf`` for a singular one, as torch).
    """
    _check(A, "linalg.cond")
    if p is None or p in (2, -2):
        s = svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return small / big if p == -2 else big / small
    if not isinstance(p, str) and p not in _MATRIX_ORDS or isinstance(p, str) and p not in ("fro", "nuc"):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    _check_matrix(A, "linalg.cond", square=True)
    inverse, info = inv_ex(A)
    out = matrix_norm(A, p) * matrix_norm(inverse, p)
    return out.masked_fill(info != 0, math.inf)


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of ``A`` for :func:`flambeau.tensordot` over ``ind`` dims: shape ``A.shape[ind:] + A.shape[:ind]``.

    ``prod(A.shape[:ind])`` must equal ``prod(A.shape[ind:])``; :class:`LinAlgError` if singular.
    """
    _check_float(A, "linalg.tensorinv")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    return inv(A.reshape(rows, cols)).reshape(tuple(A.shape[ind:]) + tuple(A.shape[:ind]))


def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """``X`` with ``tensordot(A, X, X.ndim) == B``: shape ``A.shape[B.ndim:]``.

    ``dims`` (optional) are dims of ``A`` moved to the end first. ``prod(B.shape)`` must equal
    ``prod(A.shape[B.ndim:])``.
    """
    check_tensor(A, "A", "linalg.tensorsolve")
    check_tensor(B, "B", "linalg.tensorsolve")
    if dims is not None:
        dims = [wrap_dim(d, A.ndim) for d in dims]
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    result_shape = tuple(A.shape[B.ndim:])
    rows, cols = B.numel(), math.prod(result_shape)
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {cols} != {rows}")
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(result_shape)


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T`` (LAPACK orgqr).

    ``A`` ``(*, m, n)`` holds the Householder vectors below its diagonal (``v_i`` is column ``i`` with
    zeros above row ``i`` and 1 on it), ``tau`` ``(*, k)``, ``k <= n <= m``. Returns ``(*, m, n)``.
    Differentiable in ``A`` and ``tau`` (a composition of products).
    """
    from flambeau._factories import arange, eye

    _check(A, "flambeau.linalg.householder_product", "input")
    check_tensor(tau, "tau", "flambeau.linalg.householder_product")
    m, n = A.shape[-2:]
    k = tau.shape[-1] if tau.ndim else 0
    if m < n:
        raise RuntimeError("flambeau.linalg.householder_product: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    if n < k:
        raise RuntimeError("flambeau.linalg.householder_product: input.shape[-1] must be greater than or equal to "
                           "tau.shape[-1]")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"flambeau.linalg.householder_product: Expected tau to have one dimension less than input, "
                           f"but got tau.ndim equal to {tau.ndim} and input.ndim is equal to {A.ndim}")
    if A.dtype is not tau.dtype:
        raise RuntimeError(f"flambeau.linalg.householder_product: tau dtype {tau.dtype.scalar_name} does not match "
                           f"input dtype {A.dtype.scalar_name}")
    ident = eye(m, dtype=A.dtype, device=A.device)
    rows = arange(m, device=A.device)
    q = ident.expand(tuple(A.shape[:-2]) + (m, m))
    for i in range(k):
        v = A[..., :, i] * (rows > i).to(A.dtype) + ident[i]
        q = q - (q @ v.unsqueeze(-1)) @ (tau[..., i, None, None] * v.unsqueeze(-2))  # q H_i
    return q[..., :, :n]


_VANDER_TRIAL = 1 << 24  # elements of a Vandermonde result above which its allocation is tried first


def _vander_columns(x: Tensor, n: int) -> Tensor:
    """``(*, len) -> (*, len, n)``: the powers ``x^0 .. x^(n-1)``, integers as int64.

    By repeated products rather than ``cumprod``, whose derivative is NaN where ``x`` is 0.
    """
    from flambeau._ops.shape import stack

    if n < 0:
        raise RuntimeError(f"N must be non-negative, but got N={n}.")
    if not x.dtype.is_floating_point and not x.dtype.is_complex:
        x = x.to(dt.int64)
    if x.numel() * n > _VANDER_TRIAL:  # a result too large to allocate fails here, not after n products
        x.new_empty(tuple(x.shape) + (n,))
    columns = [x.new_ones(tuple(x.shape))]
    for _ in range(1, n):
        columns.append(columns[-1] * x)
    return stack(columns[:n], -1) if n else x.new_ones(tuple(x.shape) + (0,))


def vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803 - torch's argument name
    """Vandermonde matrices ``(*, n, N)`` of ``x`` ``(*, n)``: column ``j`` is ``x ** j`` (increasing powers).

    ``N`` defaults to ``n``; integer inputs give int64 (as torch).
    """
    check_tensor(x, "x", "linalg.vander")
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    if N is not None and N <= 1:
        raise RuntimeError("N must be greater than 1.")
    return _vander_columns(x, x.shape[-1] if N is None else N)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with broadcasting: :func:`flambeau.matmul`."""
    from flambeau._ops.linalg import matmul as _matmul

    return _matmul(input, other)


# --- norms -------------------------------------------------------------------------------------------
def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Vector ``ord``-norm of ``x`` over ``dim`` (every element when None), floating dtypes only.

    ``ord``: any number, ``inf``/``-inf`` (max/min of ``|x|``), 0 (count of non-zeros). ``dtype``
    casts ``x`` first (no narrowing). Works on every device (composite of ``flambeau.norm``).
    """
    from flambeau._ops.reduction import norm as _vector_norm

    check_tensor(x, "x", "linalg.vector_norm")
    if isinstance(ord, str) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not {type(ord).__name__}")
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        dim = None
    return _vector_norm(x, ord, dim, keepdim, dtype=dtype)


_MATRIX_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """Matrix norm of ``A`` over the two dims ``dim`` (default the last two), batched over the others.

    ``ord``: ``'fro'`` (Frobenius), ``'nuc'`` (sum of singular values), 2/-2 (largest/smallest
    singular value), 1/-1 (max/min column sum of ``|A|``), ``inf``/``-inf`` (max/min row sum).
    ``'fro'`` and ``±1``/``±inf`` work on every device; ``'nuc'`` and ``±2`` need the SVD (CPU).
    """
    check_tensor(A, "A", "linalg.matrix_norm")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if not A.dtype.is_floating_point and not A.dtype.is_complex:
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as input. Got "
                           f"{A.dtype.scalar_name}")
    if not isinstance(ord, str) and ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if isinstance(ord, str) and ord not in ("fro", "nuc"):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if not isinstance(dim, (list, tuple)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    d0, d1 = wrap_dim(dim[0], A.ndim), wrap_dim(dim[1], A.ndim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(A.movedim((d0, d1), (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    # 1/-1: extreme column sum (sum over rows d0, then over columns d1); inf/-inf: extreme row sum.
    summed, extreme = (d0, d1) if abs(ord) == 1 else (d1, d0)
    out = A.abs().sum(summed, keepdim=True)
    out = out.amax(extreme, keepdim=True) if ord > 0 else out.amin(extreme, keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Vector or matrix norm, as ``torch.linalg.norm``.

    ``dim`` an int (or 1-tuple): vector norm; a 2-tuple: matrix norm. ``dim=None``: the 2-norm of
    the flattened ``A`` when ``ord`` is None, else ``A`` must be 1-D (vector norm) or 2-D (matrix norm).
    """
    check_tensor(A, "A", "linalg.norm")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")


# --- products and views --------------------------------------------------------------------------------
def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """Cross product of 3-vectors along ``dim`` (default the last) of ``input`` and ``other``.

    Both have the same number of dimensions; their sizes broadcast. The result has the promoted dtype.
    """
    from flambeau._ops.linalg import cross as _cross

    check_tensor(input, "input", "linalg.cross")
    check_tensor(other, "other", "linalg.cross")
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    return _cross(input, other, dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """Dot products of the vectors along ``dim`` of ``x`` and ``y`` (broadcast): ``(x * y).sum(dim)``."""
    check_tensor(x, "x", "linalg.vecdot")
    check_tensor(y, "y", "linalg.vecdot")
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{x.dtype.scalar_name} and y of type {y.dtype.scalar_name} instead")
    return (x * y).sum(dim)


def _chain_order(shapes: list) -> list:
    """``split[i][j]``: where the cheapest product of matrices ``i..j`` splits (matrix-chain DP)."""
    n = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors) -> Tensor:
    """Product of two or more matrices in the cheapest order; the first/last may be 1-D (a row/column vector).

    Shapes ``(n, k1), (k1, k2), ..., (kj, m)`` -> ``(n, m)`` (the 1-D ends drop their dimension).
    """
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        check_tensor(t, f"tensors[{i}]", "linalg.multi_dot")
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = [tensors[0].unsqueeze(0) if first else tensors[0], *tensors[1:-1],
            tensors[-1].unsqueeze(-1) if last else tensors[-1]]
    for i, t in enumerate(mats):
        if t.ndim != 2:
            where = "first" if i == 0 else ("last" if i == len(mats) - 1 else None)
            if where:
                raise RuntimeError(f"multi_dot(): the {where} tensor must be 1D or 2D but got {tensors[i].ndim}D")
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype is not mats[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{mats[0].dtype.scalar_name} and tensor {i} {t.dtype.scalar_name}")
        if i and mats[i - 1].shape[1] != t.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i - 1} and {i} with shapes {list(mats[i - 1].shape)} and "
                               f"{list(t.shape)} cannot be multiplied")
    split = _chain_order([tuple(t.shape) for t in mats])

    def product(i, j):
        return mats[i] if i == j else product(i, split[i][j]) @ product(split[i][j] + 1, j)

    out = product(0, len(mats) - 1)
    if first:
        out = out.squeeze(0)
    if last:
        out = out.squeeze(-1)
    return out


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """A view of the diagonals ``offset`` of the matrices of ``A`` (the ``(dim1, dim2)`` planes) -> ``(*, d)``."""
    from flambeau._ops.linalg import diagonal as _diagonal

    check_tensor(A, "A", "linalg.diagonal")
    return _diagonal(A, offset, dim1, dim2)


# --- torch's top-level spellings (flambeau.<name> and Tensor.<name>): composites ----------------------
def _top(signature: str, **options):
    op = declare(signature, category="linalg_solvers", composite=True, **options)
    return op.front


@_top("det(Tensor input) -> Tensor")
def _det(input: Tensor) -> Tensor:
    """Determinants of square matrices ``(*, n, n)`` -> ``(*)``: :func:`flambeau.linalg.det`."""
    return det(input)


@_top("inverse(Tensor input) -> Tensor")
def _inverse(input: Tensor) -> Tensor:
    """Inverse of square matrices ``(*, n, n)``: :func:`flambeau.linalg.inv`."""
    return inv(input)


@_top("slogdet(Tensor input) -> (Tensor sign, Tensor logabsdet)")
def _slogdet(input: Tensor):
    """The namedtuple ``(sign, logabsdet)`` of determinants: :func:`flambeau.linalg.slogdet`."""
    return return_types.slogdet(*slogdet(input))


@_top("logdet(Tensor input) -> Tensor")
def _logdet(input: Tensor) -> Tensor:
    """``log(det(input))`` of ``(*, n, n)`` -> ``(*)``: NaN for a negative determinant, ``-inf`` for zero."""
    sign, logabsdet = slogdet(input)
    return logabsdet + sign.detach().log()


@_top("cholesky(Tensor input, bool upper=False) -> Tensor")
def _cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """Cholesky factor of symmetric positive-definite ``(*, n, n)``: :func:`flambeau.linalg.cholesky`."""
    return cholesky(input, upper=upper)


@_top("svd(Tensor input, bool some=True, bool compute_uv=True) -> (Tensor U, Tensor S, Tensor V)")
def _svd(input: Tensor, some: bool = True, compute_uv: bool = True):
    """flambeau.svd: the namedtuple ``(U, S, V)`` with ``input = U diag(S) V^T`` (``V``, not ``Vh``).

    ``some=True``: reduced ``U`` ``(*, m, k)``, ``V`` ``(*, n, k)``; ``some=False``: full. With
    ``compute_uv=False`` ``U`` and ``V`` are zero matrices ``(*, m, m)``/``(*, n, n)``.
    """
    if not compute_uv:
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        return return_types.svd(input.new_zeros(batch + (m, m)), svdvals(input), input.new_zeros(batch + (n, n)))
    u, s, vh = svd(input, full_matrices=not some)
    return return_types.svd(u, s, vh.mT)


@_top("qr(Tensor input, bool some=True) -> (Tensor Q, Tensor R)")
def _qr(input: Tensor, some: bool = True):
    """flambeau.qr: the namedtuple ``(Q, R)``, reduced when ``some`` else complete: :func:`flambeau.linalg.qr`."""
    return return_types.qr(*qr(input, "reduced" if some else "complete"))


@_top("pinverse(Tensor input, float rcond=1e-15) -> Tensor")
def _pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """Pseudo-inverse ``(*, m, n)`` -> ``(*, n, m)``, singular values below ``rcond * largest`` dropped."""
    return pinv(input, rtol=rcond)


@_top("matrix_exp(Tensor input) -> Tensor")
def _matrix_exp(input: Tensor) -> Tensor:
    """Matrix exponential of square ``(*, n, n)``: :func:`flambeau.linalg.matrix_exp`."""
    return matrix_exp(input)


@_top("matrix_power(Tensor input, int n) -> Tensor")
def _matrix_power(input: Tensor, n: int) -> Tensor:
    """``input`` ``(*, m, m)`` to the integer power ``n``: :func:`flambeau.linalg.matrix_power`."""
    return matrix_power(input, n)


@_top("lu(Tensor A, bool pivot=True, bool get_infos=False) -> (Tensor LU, Tensor pivots)")
def _lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """flambeau.lu: ``(LU, pivots)`` of :func:`flambeau.linalg.lu_factor`, plus ``infos`` when ``get_infos``.

    Without ``get_infos`` a singular matrix raises :class:`LinAlgError`.
    """
    if get_infos:
        return return_types._lu_with_info(*lu_factor_ex(A, pivot=pivot))
    return tuple(lu_factor(A, pivot=pivot))


@_top("lu_solve(Tensor b, Tensor LU_data, Tensor LU_pivots) -> Tensor")
def _lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: N803 - torch's names
    """flambeau.lu_solve: ``X`` with ``A X = b`` from ``A``'s ``(LU, pivots)``: :func:`flambeau.linalg.lu_solve`."""
    return lu_solve(LU_data, LU_pivots, b)


_top("lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> "
     "(Tensor P, Tensor L, Tensor U)", method=False)(lu_unpack)


@_top("triangular_solve(Tensor b, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False) -> "
      "(Tensor solution, Tensor cloned_coefficient)")
def _triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                      unitriangular: bool = False):
    """torch.triangular_solve: ``(X, A)`` with ``T X = b`` (``T^T X = b`` if ``transpose``), ``T`` a triangle of ``A``.

    ``A`` ``(*, n, n)``, ``b`` ``(*, n, k)``, batch dims broadcast; ``cloned_coefficient`` is ``A``
    broadcast to the batch shape.
    """
    _check(A, "triangular_solve", "A", square=True)
    _check(b, "triangular_solve", "b")
    x = (solve_triangular(A.mT, b, upper=not upper, unitriangular=unitriangular) if transpose
         else solve_triangular(A, b, upper=upper, unitriangular=unitriangular))
    return return_types.triangular_solve(x, A.expand(tuple(x.shape[:-2]) + tuple(A.shape[-2:])).clone())


def _cholesky_product(L: Tensor, upper: bool) -> Tensor:  # noqa: N803
    """``L L^T`` (``U^T U`` when ``upper``) from the triangle of ``L`` only, with torch's gradient.

    torch's cholesky_solve/cholesky_inverse read one triangle, but their derivative treats the
    factor as a dense matrix: the other triangle gets a gradient too. The zero-valued term
    ``L - L.detach()`` carries exactly that gradient.
    """
    other = (L - L.detach()).tril(-1) if upper else (L - L.detach()).triu(1)
    tri = (L.triu() if upper else L.tril()) + other
    return tri.mT @ tri if upper else tri @ tri.mT


@_top("cholesky_solve(Tensor B, Tensor L, bool upper=False) -> Tensor")
def _cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:  # noqa: N803 - torch's names
    """``X`` with ``A X = B`` for ``A = L L^T`` (``U^T U`` when ``upper``) given its Cholesky factor.

    ``B`` ``(*, n, k)``, ``L`` ``(*, n, n)`` (only its triangle is read), batch dims broadcast.
    """
    _check(B, "cholesky_solve", "B")
    _check(L, "cholesky_solve", "L", square=True)
    if B.dtype is not L.dtype:
        raise RuntimeError(f"cholesky_solve: Expected b and A to have the same dtype, but found b of type "
                           f"{B.dtype.scalar_name} and A of type {L.dtype.scalar_name} instead.")
    return solve(_cholesky_product(L, upper), B)


@_top("cholesky_inverse(Tensor L, bool upper=False) -> Tensor")
def _cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:  # noqa: N803 - torch's name
    """Inverse of ``A = L L^T`` (``U^T U`` when ``upper``) from its Cholesky factor ``L`` ``(*, n, n)``."""
    _check(L, "cholesky_inverse", "L", square=True)
    return inv(_cholesky_product(L, upper))


@_top("chain_matmul(Tensor[] matrices) -> Tensor", method=False)
def _chain_matmul(*matrices: Tensor) -> Tensor:
    """Product of 2-D matrices in the cheapest order (torch's deprecated spelling of :func:`multi_dot`)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, t in enumerate(matrices):
        check_tensor(t, f"matrices[{i}]", "chain_matmul")
        if t.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {t.ndim}, expected 2 instead.")
    return matrices[0].clone() if len(matrices) == 1 else multi_dot(matrices)


@_top("vander(Tensor x, int? N=None, bool increasing=False) -> Tensor", method=False)
def _vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803 - torch's name
    """Vandermonde matrix ``(n, N)`` of a 1-D ``x``: decreasing powers ``x^(N-1) .. x^0`` unless ``increasing``."""
    check_tensor(x, "x", "vander")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    out = _vander_columns(x, x.shape[0] if N is None else N)
    return out if increasing else out.flip(-1)


@_top("cartesian_prod(Tensor[] tensors) -> Tensor", method=False)
def _cartesian_prod(*tensors: Tensor) -> Tensor:
    """Cartesian product of 1-D tensors ``(n1,), ..., (nk,)`` -> ``(n1 * ... * nk, k)`` (a single one: itself)."""
    from flambeau._ops.searching import meshgrid
    from flambeau._ops.shape import stack

    for i, t in enumerate(tensors):
        check_tensor(t, f"tensors[{i}]", "cartesian_prod")
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


@_top("block_diag(Tensor[] tensors) -> Tensor", method=False)
def _block_diag(*tensors: Tensor) -> Tensor:
    """Block-diagonal matrix of 0-, 1- or 2-D tensors (a 1-D one is a row), in their promoted dtype."""
    from flambeau._factories import zeros
    from flambeau._ops.shape import cat

    mats = []
    for i, t in enumerate(tensors):
        check_tensor(t, f"tensors[{i}]", "block_diag")
        if t.ndim > 2:
            raise RuntimeError(f"flambeau.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not mats:
        return zeros(1, 0)
    dtype = mats[0].dtype
    for t in mats[1:]:
        dtype = dt.promote_types(dtype, t.dtype)
    width = builtins.sum(t.shape[1] for t in mats)
    rows, left = [], 0
    for t in mats:
        r, c = t.shape
        pad = dict(dtype=dtype, device=t.device)
        rows.append(cat([zeros(r, left, **pad), t.to(dtype), zeros(r, width - left - c, **pad)], 1))
        left += c
    return cat(rows, 0)


@_top("cov(Tensor input, *, int correction=1, Tensor? fweights=None, Tensor? aweights=None) -> Tensor")
def _cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
         aweights: Tensor | None = None) -> Tensor:
    """Covariance matrix of the variables in the rows of ``input`` ``(vars, obs)`` (a 1-D input: one variable).

    ``correction``: 1 for the unbiased estimate, 0 for the biased one. ``fweights`` (integer, ``(obs,)``)
    repeat observations, ``aweights`` (``(obs,)``) weight them. Result ``(vars, vars)``, or a scalar
    for one variable; integer inputs give the default float dtype.
    """
    check_tensor(input, "input", "cov")
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    if not x.dtype.is_floating_point and not x.dtype.is_complex:
        x = x.to(dt.get_default_dtype())
    observations = x.shape[1]
    w = None
    for name, weights in (("fweights", fweights), ("aweights", aweights)):
        if weights is None:
            continue
        check_tensor(weights, name, "cov")
        if weights.ndim > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                               f"{weights.ndim} dimensions")
        if weights.numel() != observations:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                               f"input but got {weights.numel()} != {observations}")
        if name == "fweights" and (weights.dtype.is_floating_point or weights.dtype.is_complex):
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{weights.dtype.scalar_name} dtype")
        if name == "aweights" and not weights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{weights.dtype.scalar_name} dtype")
        weights = weights.to(x.dtype)
        w = weights if w is None else w * weights
    if w is None:
        w_sum = float(observations)
        mean = x.mean(1, keepdim=True)
    else:
        w_sum = w.sum()
        mean = (x * w).sum(1, keepdim=True) / w_sum
    if w is None or correction == 0:
        norm_factor = w_sum - correction
    elif aweights is None:
        norm_factor = w_sum - correction
    else:
        norm_factor = w_sum - correction * (w * aweights.to(x.dtype)).sum() / w_sum
    if isinstance(norm_factor, Tensor):
        norm_factor = norm_factor.clamp(min=0)
    else:
        norm_factor = builtins.max(norm_factor, 0.0)
    centred = x - mean
    weighted = centred if w is None else centred * w
    return (centred @ weighted.mT / norm_factor).squeeze()


@_top("corrcoef(Tensor input) -> Tensor")
def _corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the variables in the rows of ``input`` (as :func:`flambeau.cov`)."""
    c = _cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1, 1)


@_top("renorm(Tensor input, Scalar p, int dim, Scalar maxnorm) -> Tensor")
def _renorm(input: Tensor, p, dim: int, maxnorm) -> Tensor:
    """Rescale each slice ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` to norm ``maxnorm``.

    The factor is ``maxnorm / (norm + 1e-7)``, as torch.
    """
    from flambeau._ops.elementwise import where

    check_tensor(input, "input", "renorm")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"renorm: Expected a floating point or complex tensor as input. Got "
                           f"{input.dtype.scalar_name}")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = wrap_dim(dim, input.ndim)
    others = tuple(i for i in range(input.ndim) if i != d)
    norms = vector_norm(input, p, others, keepdim=True) if others else input.abs()
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), norms.new_ones(()))
    return input * factor


def _histc_range(x: Tensor, lo: float, hi: float, fname: str) -> tuple[float, float]:
    """torch's range: the data's when ``lo == hi`` (then widened by 1 each side if still equal)."""
    if lo > hi:
        raise RuntimeError(f"{fname}: max must be larger than min")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"{fname}: range of [{lo}, {hi}] is not finite")
    if lo == hi and x.numel():
        lo, hi = float(x.min().item()), float(x.max().item())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    return lo, hi


def _count(idx: Tensor, weight: Tensor, bins: int) -> Tensor:
    """Sum of ``weight`` per bin index ``idx`` (int64), ``(bins,)``."""
    return weight.new_zeros((bins,)).scatter_add(0, idx, weight)


@_top("histc(Tensor input, int bins=100, Scalar min=0, Scalar max=0) -> Tensor", differentiable=False)
def _histc(input: Tensor, bins: int = 100, min=0, max=0) -> Tensor:  # noqa: A002 - torch's names
    """Histogram ``(bins,)`` of ``input``'s elements over ``bins`` equal bins spanning ``[min, max]``.

    ``min == max`` (the default 0, 0) uses the data's range; elements outside are ignored; the result
    has ``input``'s (floating) dtype.
    """
    check_tensor(input, "input", "histc")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{input.dtype.scalar_name}'")
    if bins <= 0:
        raise RuntimeError(f"flambeau.histc: bins must be > 0, but got {bins} for dimension 0")
    x = input.detach().reshape(-1)
    lo, hi = _histc_range(x, float(min), float(max), "flambeau.histc")
    x = x[(x >= lo) & (x <= hi)]
    idx = ((x.to(dt.float64) - lo) * bins / (hi - lo)).to(dt.int64).clamp(max=bins - 1)
    return _count(idx, x.new_ones(x.shape), bins)


@_top("histogram(Tensor input, Tensor bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> "
      "(Tensor hist, Tensor bin_edges)", differentiable=False)
def _histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None,  # noqa: A002
               density: bool = False):
    """The namedtuple ``(hist, bin_edges)`` of ``input``'s elements (as ``numpy.histogram``).

    ``bins``: a number of equal bins over ``range`` (default the data's), or a 1-D tensor of
    increasing edges. The last bin includes its right edge. ``weight`` (``input``'s shape) weights
    the counts; ``density`` divides by the total and the bin widths.
    """
    from flambeau._factories import linspace
    from flambeau._ops.searching import searchsorted

    check_tensor(input, "input", "histogram")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"flambeau.histogram: input tensor and bins tensors should have the same dtype, but got "
                           f"input {input.dtype.scalar_name}")
    x = input.detach().reshape(-1)
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.numel() < 2:
            raise RuntimeError("flambeau.histogram: bins tensor should have one dimension and at least 2 elements")
        edges = bins.detach().to(x.dtype)
    else:
        if bins <= 0:
            raise RuntimeError(f"flambeau.histogram(): bins must be > 0, but got {bins} for dimension 0")
        lo, hi = (0.0, 0.0) if range is None else (float(range[0]), float(range[1]))
        lo, hi = _histc_range(x, lo, hi, "flambeau.histogram")
        edges = linspace(lo, hi, bins + 1, dtype=x.dtype, device=x.device)
    nbins = edges.numel() - 1
    w = x.new_ones(x.shape) if weight is None else weight.detach().reshape(-1).to(x.dtype)
    inside = (x >= edges[0]) & (x <= edges[-1])
    x, w = x[inside], w[inside]
    idx = (searchsorted(edges, x, right=True) - 1).clamp(max=nbins - 1)
    hist = _count(idx, w, nbins)
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return return_types.histogram(hist, edges)


# --- sample inputs (Note [Sample inputs] in _registry): unique results, and gradients of every entry ----
def _declare_samples():
    from flambeau._ops._registry import OPS
    from flambeau._ops._samples import FLOAT, cases
    from flambeau._ops._samples import SampleInput as S

    def add(name, *builders, **meta):
        OPS[name].samples(cases(*builders), dtypes=FLOAT, **meta)

    # Not sampled: eigh/eigvalsh/cholesky read one triangle (gradcheck perturbs the other too; so do
    # cholesky_solve/cholesky_inverse, whose gradient is dense as torch's), the factorizations are
    # unique up to signs, eig's eigenvectors up to phases; tests/test_linalg_solvers.py checks them.
    square = (lambda mk, mki: S(mk((3, 3))), lambda mk, mki: S(mk((2, 4, 4))).named("batched"))
    for name in ("det", "inverse", "matrix_exp"):
        add(name, *square)
    add("linalg_det", *square, ref="linalg.det")
    add("linalg_matrix_exp", *square, ref="linalg.matrix_exp")
    add("linalg_svdvals", lambda mk, mki: S(mk((4, 3))), lambda mk, mki: S(mk((2, 3, 5))).named("batched wide"),
        ref="linalg.svdvals")
    add("matrix_power", lambda mk, mki: S(mk((3, 3)), 3), lambda mk, mki: S(mk((2, 3, 3)), -2).named("negative"))
    add("pinverse", lambda mk, mki: S(mk((4, 3))), lambda mk, mki: S(mk((2, 3, 4))).named("batched wide"))
    add("linalg_lu_factor_ex", *square, lambda mk, mki: S(mk((2, 3, 5))).named("batched wide"),
        lambda mk, mki: S(mk((5, 3))).named("tall"), ref="linalg.lu_factor_ex")
    add("cov", lambda mk, mki: S(mk((3, 5))), lambda mk, mki: S(mk((4,))).named("one variable"),
        lambda mk, mki: S(mk((2, 4)), correction=0).named("biased"))
    add("corrcoef", lambda mk, mki: S(mk((3, 5))))
    add("renorm", lambda mk, mki: S(mk((3, 4)), 2, 0, 1.0), lambda mk, mki: S(mk((2, 3, 2)), 1, -1, 0.5).named("p=1"))
    add("vander", lambda mk, mki: S(mk((4,))), lambda mk, mki: S(mk((3,)), 5, True).named("N increasing"))
    add("block_diag", lambda mk, mki: S(mk((2, 3)), mk((1,)), mk((2, 2))))
    add("cartesian_prod", lambda mk, mki: S(mk((2,)), mk((3,))))
    add("chain_matmul", lambda mk, mki: S(mk((2, 3)), mk((3, 4)), mk((4, 2))))
    add("histc", lambda mk, mki: S(mk((20,)), 5), lambda mk, mki: S(mk((4, 5)), 3, -1, 1).named("range"))


_declare_samples()
