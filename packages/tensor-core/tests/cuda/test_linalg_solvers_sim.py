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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5), (6, 1), (1, 4)])
def test_qr_is_lapacks_householder_qr(shape, dtype):
    A = fl.tensor(RNG.standard_normal(shape).astype(getattr(np, dtype)))
    for mode in ("reduced", "complete", "r"):
        _pairs(fl.linalg.qr(A.cuda(), mode=mode), fl.linalg.qr(A, mode=mode))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle_and_matches_the_cpu_up_to_signs(uplo, dtype):
    S = fl.tensor(RNG.standard_normal((2, 5, 5)).astype(getattr(np, dtype)))
    S = S + S.mT
    M = S.triu() if uplo == "U" else S.tril()
    (w, v), (ww, vw) = fl.linalg.eigh(M.cuda(), UPLO=uplo), fl.linalg.eigh(M, UPLO=uplo)
    _close(w, ww)
    _close(fl.linalg.eigvalsh(M.cuda(), UPLO=uplo), ww)
    v, vw = v.cpu().numpy(), vw.numpy()  # eigenvectors are defined up to their signs
    np.testing.assert_allclose(v * np.sign((v * vw).sum(-2, keepdims=True)), vw, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5), (6, 1), (1, 4), (2, 3, 3)])
def test_svd_reconstructs_with_orthonormal_factors(shape, dtype):
    tol = 1e-4 if dtype == "float32" else 1e-9
    A = fl.tensor(RNG.standard_normal(shape).astype(getattr(np, dtype)))
    if shape == (2, 3, 3):
        A[0, :, 2] = A[0, :, 0] * 2  # rank-deficient: U's last column is a completion
    for full in (True, False):
        got, want = fl.linalg.svd(A.cuda(), full_matrices=full), fl.linalg.svd(A, full_matrices=full)
        assert [tuple(x.shape) for x in got] == [tuple(x.shape) for x in want]
        U, S, Vh = (x.cpu().numpy() for x in got)
        np.testing.assert_allclose(S, want.S.numpy(), rtol=tol, atol=tol)
        k = min(shape[-2:])
        np.testing.assert_allclose((U[..., :k] * S[..., None, :]) @ Vh[..., :k, :], A.numpy(), atol=10 * tol)
        for Q in (U, np.swapaxes(Vh, -1, -2)):
            eye = np.broadcast_to(np.eye(Q.shape[-1]), Q.shape[:-2] + (Q.shape[-1],) * 2)
            np.testing.assert_allclose(np.swapaxes(Q, -1, -2) @ Q, eye, atol=10 * tol)
    _close(fl.linalg.svdvals(A.cuda()), fl.linalg.svdvals(A), tol)


def test_pinv_and_gradients_through_the_decompositions_match_the_cpu():
    for shape in ((4, 4), (2, 5, 3), (3, 5)):
        A = fl.tensor(RNG.standard_normal(shape))
        _close(fl.linalg.pinv(A.cuda()), fl.linalg.pinv(A), 1e-8)
    S = fl.tensor(RNG.standard_normal((3, 3)))
    S = S + S.T
    _close(fl.linalg.pinv(S.cuda(), hermitian=True), fl.linalg.pinv(S, hermitian=True), 1e-8)
    R = fl.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=fl.float64)
    _close(fl.linalg.pinv(R.cuda()), fl.linalg.pinv(R), 1e-8)
    _close(fl.linalg.pinv(R.cuda(), atol=10.0), fl.linalg.pinv(R, atol=10.0))
    A = fl.tensor(RNG.standard_normal((4, 3)))
    for loss in (lambda a: fl.linalg.svdvals(a).sum(), lambda a: fl.linalg.pinv(a).pow(2).sum(),
                 lambda a: fl.linalg.qr(a).R.abs().sum() + fl.linalg.qr(a).Q.pow(2).sum(),
                 lambda a: fl.linalg.eigvalsh(a @ a.mT).sum()):
        x, y = A.detach().requires_grad_(), A.detach().cuda().requires_grad_()
        loss(x).backward()
        loss(y).backward()
        _close(y.grad, x.grad, 1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matrix_exp_scales_each_matrix_of_a_batch(dtype):
    scales = np.array([0.1, 1.0, 8.0])[:, None, None]  # no squaring, a few, more
    A = fl.tensor((RNG.standard_normal((3, 4, 4)) * scales).astype(getattr(np, dtype)))
    _close(fl.linalg.matrix_exp(A.cuda()), fl.linalg.matrix_exp(A), 1e-5 if dtype == "float32" else 1e-10)
    x = fl.tensor(RNG.standard_normal((3, 3)))
    a, b = x.detach().requires_grad_(), x.detach().cuda().requires_grad_()
    fl.linalg.matrix_exp(a).sum().backward()
    fl.linalg.matrix_exp(b).sum().backward()
    _close(b.grad, a.grad, 1e-9)


def test_eig_runs_on_the_host_as_torch_and_answers_on_the_device():
    A = fl.tensor(RNG.standard_normal((2, 4, 4)))
    got, want = fl.linalg.eig(A.cuda()), fl.linalg.eig(A)
    assert all(t.device.type == "cuda" for t in got)
    _pairs(got, want, 1e-12)
