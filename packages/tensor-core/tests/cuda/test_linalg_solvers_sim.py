"""The LU and Cholesky families on CUDA (``flambeau._kernels.cuda.linalg_solvers``) against the CPU's LAPACK:
values, pivots and ``info`` (singular and not positive-definite matrices), batches that broadcast,
rectangular LU, the errors of the non-``_ex`` spellings, and gradients."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

RNG = np.random.default_rng(0)


def _close(got, want, tol=1e-4):
    got = got.cpu()
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol, equal_nan=True)


def _pairs(got, want, tol=1e-4):
    for g, w in zip(got, want, strict=True):
        _close(g, w, tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lu_family_matches_the_cpu(dtype):
    d = getattr(np, dtype)
    A = fl.tensor(RNG.standard_normal((2, 3, 4, 4)).astype(d))
    B = fl.tensor(RNG.standard_normal((3, 4, 2)).astype(d))  # batch dims broadcast against A's
    _close(fl.linalg.inv(A.cuda()), fl.linalg.inv(A))
    _close(fl.linalg.det(A.cuda()), fl.linalg.det(A))
    _pairs(fl.linalg.slogdet(A.cuda()), fl.linalg.slogdet(A))
    _close(fl.linalg.solve(A.cuda(), B.cuda()), fl.linalg.solve(A, B))
    _pairs(fl.linalg.lu_factor(A.cuda()), fl.linalg.lu_factor(A))
    R = fl.tensor(RNG.standard_normal((3, 5, 4)).astype(d))
    _pairs(fl.linalg.lu_factor_ex(R.cuda()), fl.linalg.lu_factor_ex(R))
    _pairs(fl.linalg.lu_factor_ex(R.mT.cuda()), fl.linalg.lu_factor_ex(R.mT))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_solve_triangular_reads_one_triangle(upper, unitriangular):
    A = fl.tensor(RNG.standard_normal((2, 4, 4)))
    B = fl.tensor(RNG.standard_normal((4, 3)))
    kw = {"upper": upper, "unitriangular": unitriangular}
    _close(fl.linalg.solve_triangular(A.cuda(), B.cuda(), **kw), fl.linalg.solve_triangular(A, B, **kw), 1e-9)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_the_cpu(upper):
    A = fl.tensor(RNG.standard_normal((3, 5, 5)))
    S = A @ A.mT + 5 * fl.eye(5)
    _close(fl.linalg.cholesky(S.cuda(), upper=upper), fl.linalg.cholesky(S, upper=upper), 1e-10)


def test_singular_and_indefinite_matrices_give_lapack_info_and_torch_errors():
    Z = fl.tensor([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 3.0]]])
    _pairs(fl.linalg.inv_ex(Z.cuda()), fl.linalg.inv_ex(Z))  # NaN inverse and info 2 for the first
    _pairs(fl.linalg.cholesky_ex(-Z.cuda()), fl.linalg.cholesky_ex(-Z))
    _pairs(fl.linalg.solve_ex(Z.cuda(), fl.ones(2, 2, 1).cuda()), fl.linalg.solve_ex(Z, fl.ones(2, 2, 1)))
    _close(fl.linalg.det(Z.cuda()), fl.linalg.det(Z))
    _pairs(fl.linalg.slogdet(Z.cuda()), fl.linalg.slogdet(Z))
    for f in (fl.linalg.inv, lambda m: fl.linalg.cholesky(-m)):
        with pytest.raises(RuntimeError) as want:
            f(Z)
        with pytest.raises(RuntimeError) as got:
            f(Z.cuda())
        assert str(got.value) == str(want.value)
    with pytest.raises(RuntimeError, match="not implemented for 'ComplexFloat'"):
        fl.linalg.det(fl.tensor([[1j, 0], [0, 1]], dtype=fl.complex64).cuda())


def test_gradients_match_the_cpu():
    A = fl.tensor(RNG.standard_normal((2, 3, 3)))
    B = fl.tensor(RNG.standard_normal((2, 3, 2)))

    def loss(a, b):
        return (fl.linalg.inv(a).sum() + fl.linalg.det(a).sum() + fl.linalg.solve(a, b).pow(2).sum()
                + fl.linalg.cholesky(a @ a.mT + 3 * fl.eye(3, device=a.device)).sum())

    grads = []
    for dev in ("cpu", "cuda"):
        a, b = A.detach().to(dev).requires_grad_(), B.detach().to(dev).requires_grad_()
        loss(a, b).backward()
        grads.append((a.grad, b.grad))
    _pairs(grads[1], grads[0], 1e-8)
