"""Derivatives of flambeau.linalg (``autograd/_formulas_linalg.py``): against torch, gradcheck, double backward.

``CASES`` follows the convention of ``test_derivatives.CASES`` (``name[#variant]: (fn, inputs[, options])``,
keyed by operator name) so that the operator table's completeness test can take them in (importing this
module needs no torch: only the tests that compare with torch skip without it). Losses of
factorizations are chosen independent of the signs of singular vectors/eigenvectors (gauge-invariant),
where the derivative is defined.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(23)


def t(*shape):
    return fl.tensor(RNG.standard_normal(shape), dtype=fl.float64, requires_grad=True)


def _spd(a):
    return a @ a.mT + a.shape[-1] * fl.eye(a.shape[-1], dtype=a.dtype)


def _sym(a):
    return a + a.mT


def _tri(a):
    return a + 4 * fl.eye(a.shape[-1], dtype=a.dtype)


def _svd_gauge(a, full_matrices=False):
    """``(U[:, :2] diag(S[:2]) Vh[:2], S)``: no dependence on the signs of singular vectors."""
    u, s, vh = fl.linalg.svd(a, full_matrices=full_matrices)
    return (u[..., :2] * s[..., :2].unsqueeze(-2)) @ vh[..., :2, :] + u[..., :1] @ vh[..., :1, :], s


def _eigh_gauge(a, uplo="L"):
    w, v = fl.linalg.eigh(_sym(a), UPLO=uplo)
    return v[..., :2] @ v[..., :2].mT, w


def _qr_loss(a, mode="reduced"):
    q, r = fl.linalg.qr(a, mode=mode)
    return q * 2, r


CASES = {
    "linalg_inv_ex": (lambda a: fl.linalg.inv_ex(a).inverse, (t(2, 3, 3),)),
    "linalg_det": (lambda a: fl.linalg.det(a), (t(2, 3, 3),)),
    "linalg_det#singular": (lambda a: fl.linalg.det(a * fl.tensor([1.0, 1.0, 0.0], dtype=fl.float64)),
                            (t(3, 3),)),
    "linalg_slogdet": (lambda a: fl.linalg.slogdet(a).logabsdet, (t(2, 3, 3),)),
    "linalg_solve": (lambda a, b: fl.linalg.solve(a, b), (t(2, 3, 3), t(3, 2))),
    "linalg_solve#vector": (lambda a, b: fl.linalg.solve(a, b), (t(2, 3, 3), t(3))),
    "linalg_solve#right": (lambda a, b: fl.linalg.solve(a, b, left=False), (t(3, 3), t(2, 3))),
    "linalg_solve_triangular": (lambda a, b: fl.linalg.solve_triangular(_tri(a), b, upper=True), (t(2, 3, 3), t(3, 2))),
    "linalg_solve_triangular#lower_unit_right": (
        lambda a, b: fl.linalg.solve_triangular(_tri(a), b, upper=False, left=False, unitriangular=True),
        (t(3, 3), t(2, 3))),
    "linalg_cholesky_ex": (lambda a: fl.linalg.cholesky_ex(_spd(a)).L, (t(2, 3, 3),)),
    "linalg_cholesky_ex#upper": (lambda a: fl.linalg.cholesky(_spd(a), upper=True), (t(3, 3),)),
    "linalg_qr": (_qr_loss, (t(4, 3),)),
    "linalg_qr#wide": (_qr_loss, (t(2, 3, 4),)),
    "linalg_qr#complete_square": (lambda a: _qr_loss(a, "complete"), (t(3, 3),)),
    "linalg_svd": (_svd_gauge, (t(4, 3),)),
    "linalg_svd#wide_full": (lambda a: _svd_gauge(a, True), (t(2, 3, 4),)),
    "linalg_svdvals": (lambda a: fl.linalg.svdvals(a), (t(2, 3, 4),)),
    "linalg_eigh": (_eigh_gauge, (t(2, 3, 3),)),
    "linalg_eigh#upper": (lambda a: _eigh_gauge(a, "U"), (t(3, 3),)),
    "linalg_eigvalsh": (lambda a: fl.linalg.eigvalsh(_sym(a)), (t(2, 3, 3),)),
    "linalg_pinv": (lambda a: fl.linalg.pinv(a), (t(4, 3),)),
    "linalg_pinv#wide": (lambda a: fl.linalg.pinv(a), (t(2, 3, 4),)),
    "linalg_matrix_exp": (lambda a: fl.linalg.matrix_exp(a), (t(2, 3, 3),)),
    # torch's top-level spellings (composites)
    "det": (lambda a: fl.det(a), (t(3, 3),)),
    "inverse": (lambda a: a.inverse(), (t(3, 3),)),
    "slogdet": (lambda a: fl.slogdet(a).logabsdet, (t(3, 3),)),
    "logdet": (lambda a: fl.logdet(_spd(a)), (t(3, 3),)),
    "cholesky": (lambda a: fl.cholesky(_spd(a)), (t(3, 3),)),
    "svd": (lambda a: fl.svd(a).S, (t(4, 3),)),
    "qr": (lambda a: fl.qr(a).R.abs(), (t(4, 3),)),
    "pinverse": (lambda a: a.pinverse(), (t(3, 4),)),
    "matrix_exp": (lambda a: a.matrix_exp(), (t(3, 3),)),
    "matrix_power": (lambda a: fl.matrix_power(a, 3), (t(3, 3),)),
    "matrix_power#negative": (lambda a: a.matrix_power(-2), (t(3, 3),)),
    # LU (the primitive and its composites) and torch's other top-level linear-algebra names
    "linalg_lu_factor_ex": (lambda a: fl.linalg.lu_factor_ex(a).LU, (t(2, 3, 3),)),
    "linalg_lu_factor_ex#wide": (lambda a: fl.linalg.lu_factor(a).LU, (t(3, 5),)),
    "linalg_lu_factor_ex#tall": (lambda a: fl.linalg.lu(a), (t(2, 5, 3),)),
    "lu": (lambda a: fl.lu(a)[0], (t(3, 3),)),
    "lu_unpack": (lambda a: fl.lu_unpack(a, fl.tensor([2, 3, 3], dtype=fl.int32))[1:], (t(3, 3),)),
    "lu_solve": (lambda lu, b: fl.lu_solve(b, _tri(lu), fl.tensor([3, 2, 3], dtype=fl.int32)), (t(3, 3), t(2, 3, 2))),
    "triangular_solve": (lambda b, a: fl.triangular_solve(b, _tri(a), transpose=True).solution, (t(3, 2), t(2, 3, 3))),
    # the factor's other triangle is not read, but gets torch's (dense) gradient: pass a triangular one
    "cholesky_solve": (lambda b, a: fl.cholesky_solve(b, _tri(a).tril()), (t(3, 2), t(3, 3))),
    "cholesky_solve#upper": (lambda b, a: b.cholesky_solve(_tri(a).triu(), upper=True), (t(2, 3, 2), t(3, 3))),
    "cholesky_inverse": (lambda a: fl.cholesky_inverse(_tri(a).tril()), (t(3, 3),)),
    "chain_matmul": (lambda a, b, c: fl.chain_matmul(a, b, c), (t(2, 3), t(3, 4), t(4, 2))),
    "vander": (lambda x: fl.vander(x * fl.tensor([1.0, 0.0, 1.0], dtype=fl.float64), 4), (t(3),)),
    "cartesian_prod": (lambda a, b: fl.cartesian_prod(a, b), (t(2), t(3))),
    "block_diag": (lambda a, b, c: fl.block_diag(a, b, c), (t(2, 3), t(2), t())),
    "cov": (lambda a, w: fl.cov(a, fweights=fl.tensor([1, 2, 1, 1]), aweights=w.abs() + 0.1), (t(3, 4), t(4))),
    "corrcoef": (lambda a: fl.corrcoef(a), (t(3, 4),)),
    "renorm": (lambda a: a.renorm(2, 1, 1.5), (t(3, 4, 2),)),
}

# Compositions without an operator of their own, checked the same way.
COMPOSITE_CASES = {
    "lstsq": (lambda a, b: fl.linalg.lstsq(a, b).solution, (t(4, 3), t(4, 2))),
    "matrix_norm#nuc": (lambda a: fl.linalg.matrix_norm(a, "nuc"), (t(2, 3, 4),)),
    "matrix_norm#2": (lambda a: fl.linalg.matrix_norm(a, 2), (t(3, 4),)),
    "matrix_norm#fro": (lambda a: fl.linalg.matrix_norm(a), (t(3, 4),)),
    "matrix_norm#inf": (lambda a: fl.linalg.matrix_norm(a, float("inf")), (t(3, 4),)),
    "vector_norm": (lambda a: fl.linalg.vector_norm(a, 3, dim=-1), (t(3, 4),)),
    "multi_dot": (lambda a, b, c: fl.linalg.multi_dot([a, b, c]), (t(3), t(3, 4), t(4, 2))),
    "vecdot": (lambda a, b: fl.linalg.vecdot(a, b), (t(2, 3), t(3))),
    "cross": (lambda a, b: fl.linalg.cross(a, b), (t(2, 3), t(2, 3))),
    "solve_ex": (lambda a, b: fl.linalg.solve_ex(a, b).result, (t(2, 3, 3), t(3))),
    "lu_solve#linalg_adjoint_right": (
        lambda a, b: fl.linalg.lu_solve(*fl.linalg.lu_factor(a), b, left=False, adjoint=True), (t(3, 3), t(2, 3))),
    "cond": (lambda a: fl.linalg.cond(a), (t(2, 3, 4),)),
    "cond#fro": (lambda a: fl.linalg.cond(a, "fro"), (t(3, 3),)),
    "tensorinv": (lambda a: fl.linalg.tensorinv(a, 1), (t(6, 2, 3),)),
    "tensorsolve": (lambda a, b: fl.linalg.tensorsolve(a, b), (t(2, 3, 6), t(2, 3))),
    "householder_product": (lambda a, tau: fl.linalg.householder_product(a, tau), (t(2, 4, 3), t(2, 2))),
    "linalg.vander": (lambda x: fl.linalg.vander(x, N=4), (t(2, 3),)),
}

ALL_CASES = {**CASES, **COMPOSITE_CASES}


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_gradcheck(case):
    fn, inputs = ALL_CASES[case][:2]
    assert gradcheck(fn, inputs)


# Double backward: every primitive once (the derivatives are written with operators).
GRADGRAD = ["linalg_inv_ex", "linalg_det", "linalg_slogdet", "linalg_solve", "linalg_solve_triangular",
            "linalg_cholesky_ex", "linalg_qr", "linalg_qr#wide", "linalg_qr#complete_square", "linalg_svd",
            "linalg_svd#wide_full", "linalg_svdvals", "linalg_eigh", "linalg_eigh#upper", "linalg_eigvalsh",
            "linalg_pinv", "linalg_matrix_exp", "lstsq", "linalg_lu_factor_ex", "linalg_lu_factor_ex#wide",
            "linalg_lu_factor_ex#tall"]


@pytest.mark.parametrize("case", GRADGRAD)
def test_gradgradcheck(case):
    fn, inputs = ALL_CASES[case][:2]
    assert gradgradcheck(fn, inputs)


def test_every_linalg_operator_has_a_case():
    from flambeau._ops import OPS

    ours = {n for n, op in OPS.items() if op.category == "linalg_solvers" and op.differentiable}
    assert ours <= {k.split("#")[0] for k in CASES}, ours - {k.split("#")[0] for k in CASES}


# --- gradients against torch (also for sign-dependent losses: LAPACK gives both libraries the same signs) ---
A4 = RNG.standard_normal((2, 4, 4))
TALL = RNG.standard_normal((2, 5, 3))
WIDE = RNG.standard_normal((2, 3, 5))
SPD = A4 @ np.swapaxes(A4, -1, -2) + 4 * np.eye(4)


def _sum4(x):
    return (x ** 4).sum()


TORCH_CASES = {
    "inv": (lambda m, a: m.linalg.inv(a) ** 2, [A4]),
    "det": (lambda m, a: m.linalg.det(a), [A4]),
    "slogdet": (lambda m, a: m.linalg.slogdet(a).logabsdet, [A4]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b) ** 2, [A4, TALL[:, :4]]),
    "solve_left_false": (lambda m, a, b: m.linalg.solve(a, b, left=False) ** 2, [A4, WIDE[:, :, :4]]),
    "solve_triangular": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False) ** 2, [A4 + 4 * np.eye(4),
                                                                                            TALL[:, :4]]),
    "cholesky": (lambda m, a: m.linalg.cholesky(a) ** 3, [SPD]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky(a, upper=True) ** 3, [SPD]),
    "qr_tall": (lambda m, a: _sum4(m.linalg.qr(a).Q) + _sum4(m.linalg.qr(a).R), [TALL]),
    "qr_wide": (lambda m, a: _sum4(m.linalg.qr(a).Q) + _sum4(m.linalg.qr(a).R), [WIDE]),
    "svd_tall": (lambda m, a: _sum4(m.linalg.svd(a, False).U) + _sum4(m.linalg.svd(a, False).Vh)
                 + m.linalg.svd(a, False).S.sum(), [TALL]),
    "svd_wide_full": (lambda m, a: _sum4(m.linalg.svd(a).U) + _sum4(m.linalg.svd(a).Vh[..., :3, :])
                      + m.linalg.svd(a).S.sum(), [WIDE]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a) ** 2, [TALL]),
    "eigh": (lambda m, a: _sum4(m.linalg.eigh(a).eigenvectors) + m.linalg.eigh(a).eigenvalues.sum(), [A4]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a, UPLO="U") ** 2, [A4]),
    "pinv": (lambda m, a: m.linalg.pinv(a) ** 2, [WIDE]),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a) ** 2, [A4]),
    "lstsq": (lambda m, a, b: m.linalg.lstsq(a, b).solution ** 2, [TALL, RNG.standard_normal((2, 5, 2))]),
    "logdet": (lambda m, a: m.logdet(a), [SPD]),
    "matrix_power": (lambda m, a: m.linalg.matrix_power(a, -3), [A4]),
    "matrix_norm_nuc": (lambda m, a: m.linalg.matrix_norm(a, "nuc"), [WIDE]),
    "matrix_norm_-2": (lambda m, a: m.linalg.matrix_norm(a, -2), [TALL]),
    "norm": (lambda m, a: m.linalg.norm(a, dim=(0, 2)), [TALL]),
    "lu_factor": (lambda m, a: m.linalg.lu_factor(a).LU ** 2, [A4]),
    "lu_wide": (lambda m, a: _sum4(m.linalg.lu(a).L) + _sum4(m.linalg.lu(a).U), [WIDE]),
    "lu_tall": (lambda m, a: _sum4(m.linalg.lu(a).L) + _sum4(m.linalg.lu(a).U), [TALL]),
    "lu_solve": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, adjoint=True) ** 2, [A4, TALL[:, :4]]),
    "solve_ex": (lambda m, a, b: m.linalg.solve_ex(a, b).result ** 2, [A4, TALL[:, :4]]),
    "triangular_solve": (lambda m, b, a: m.triangular_solve(b, a, upper=False).solution ** 2, [TALL[:, :4],
                                                                                            A4 + 4 * np.eye(4)]),
    # torch differentiates cholesky_solve/inverse as if the factor were dense: so must we
    "cholesky_solve": (lambda m, b, a: m.cholesky_solve(b, a) ** 2, [TALL[:, :4], np.tril(A4) + 4 * np.eye(4)]),
    "cholesky_inverse_upper": (lambda m, a: m.cholesky_inverse(a, upper=True) ** 2, [np.triu(A4[0]) + 4 * np.eye(4)]),
    "householder_product": (lambda m, a, tau: m.linalg.householder_product(a, tau) ** 2, [TALL, WIDE[:, :, 0]]),
    "cond": (lambda m, a: m.linalg.cond(a) + m.linalg.cond(a, -2), [TALL]),
    "tensorsolve": (lambda m, a, b: m.linalg.tensorsolve(a, b) ** 2, [A4[0].reshape(2, 2, 2, 2), TALL[0, :2, :2]]),
    "vander": (lambda m, x: m.linalg.vander(x) ** 2, [np.array([[0.0, 1.5, -2.0], [0.5, 0.0, 3.0]])]),
    "cov": (lambda m, a, w: m.cov(a, correction=2, aweights=w.abs()) ** 2, [WIDE[0], WIDE[1, 0]]),
    "corrcoef": (lambda m, a: m.corrcoef(a) ** 2, [WIDE[0]]),
    "renorm": (lambda m, a: m.renorm(a, 3, 0, 1.0) ** 2, [TALL]),
    "block_diag": (lambda m, a, b: m.block_diag(a, b) ** 2, [A4[0], TALL[0]]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_gradients_match_torch(case, dtype):
    torch = pytest.importorskip("torch")
    fn, arrays = TORCH_CASES[case]
    xs = [fl.tensor(a, dtype=getattr(fl, dtype), requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True) for a in arrays]
    fn(fl, *xs).sum().backward()
    fn(torch, *ts).sum().backward()
    tol = 1e-9 if dtype == "float64" else 2e-3
    for x, tx in zip(xs, ts):
        assert x.grad.dtype == x.dtype
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix():
    # torch's LU-based formula returns zeros here; the cofactor matrix is the derivative.
    a = fl.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype=fl.float64, requires_grad=True)
    fl.linalg.det(a).backward()
    cofactor = np.array([[4.0, 4.0, -4.0], [-2.0, -2.0, 2.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(a.grad.numpy(), cofactor, atol=1e-12)


def test_non_differentiable_cases_raise_as_torch():
    a = t(4, 3)
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        fl.linalg.qr(a, mode="complete").Q.sum().backward()
    with pytest.raises(RuntimeError, match="which is not computed when mode='r'"):
        fl.linalg.qr(a, mode="r").R.sum().backward()


def test_lu_gradient_matches_torch_through_a_dense_use_of_lu():
    # lu_solve reads both triangles of LU: the gradient on LU is dense, split by lu_factor_ex's formula
    torch = pytest.importorskip("torch")
    a, b = A4[0], TALL[0, :4]
    x = fl.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    lu, piv = fl.linalg.lu_factor(x)
    tlu, tpiv = torch.linalg.lu_factor(tx)
    (fl.linalg.lu_solve(lu, piv, fl.tensor(b)).sum() + (lu ** 2).sum()).backward()
    (torch.linalg.lu_solve(tlu, tpiv, torch.tensor(b)).sum() + (tlu ** 2).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_eig_refuses_inputs_that_require_grad():
    with pytest.raises(NotImplementedError, match="derivative of eig/eigvals is not implemented"):
        fl.linalg.eigvals(t(3, 3))
    with fl.no_grad():
        assert fl.linalg.eig(t(3, 3)).eigenvalues.dtype is fl.complex128
    assert fl.linalg.eigvals(t(3, 3).detach()).shape == (3,)


def test_int_outputs_carry_no_gradient():
    res = fl.linalg.inv_ex(t(3, 3))
    assert res.inverse.requires_grad and not res.info.requires_grad
    assert not fl.linalg.matrix_rank(t(3, 3)).requires_grad


# --- forward mode (the rules of _formulas_linalg.TANGENTS) against torch's forward AD ---------------------
JVP_CASES = {
    "inv": (lambda m, a: m.linalg.inv(a), [A4]),
    "det": (lambda m, a: m.linalg.det(a), [A4]),
    "slogdet": (lambda m, a: m.linalg.slogdet(a).logabsdet, [A4]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [A4, TALL[:, :4]]),
    "solve_triangular": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True, left=False), [A4 + 4 * np.eye(4),
                                                                                                  WIDE[:, :, :4]]),
    "cholesky": (lambda m, a: m.linalg.cholesky(a @ a.mT + 4 * m.eye(4, dtype=a.dtype)), [A4]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky_ex(a @ a.mT + 4 * m.eye(4, dtype=a.dtype), upper=True).L, [A4]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a + a.mT), [A4]),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), [A4]),
}


@pytest.fixture
def linalg_tangents(monkeypatch):
    """Install the linalg tangent rules in forward_ad (a no-op once forward_ad merges them itself)."""
    from flambeau.autograd import _formulas_linalg, forward_ad

    for name, rule in _formulas_linalg.TANGENTS.items():
        monkeypatch.setitem(forward_ad.TANGENTS, name, rule)


@pytest.mark.parametrize("case", sorted(JVP_CASES))
def test_forward_mode_matches_torch(case, linalg_tangents):
    torch = pytest.importorskip("torch")
    from flambeau.autograd import forward_ad as fwad

    fn, arrays = JVP_CASES[case]
    tangents = [RNG.standard_normal(a.shape) for a in arrays]
    with fwad.dual_level():
        duals = [fwad.make_dual(fl.tensor(a), fl.tensor(t)) for a, t in zip(arrays, tangents)]
        got = fwad.unpack_dual(fn(fl, *duals)).tangent
    import torch.autograd.forward_ad as tfwad  # lighter than torch.func

    with tfwad.dual_level():
        duals = [tfwad.make_dual(torch.tensor(a), torch.tensor(t)) for a, t in zip(arrays, tangents)]
        want = tfwad.unpack_dual(fn(torch, *duals)).tangent
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-8, atol=1e-8)


def test_det_forward_mode_at_a_singular_matrix(linalg_tangents):
    from flambeau.autograd import forward_ad as fwad

    a = fl.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype=fl.float64)
    da = fl.tensor(RNG.standard_normal((3, 3)))
    with fwad.dual_level():
        got = fwad.unpack_dual(fl.linalg.det(fwad.make_dual(a, da))).tangent
    cofactor = np.array([[4.0, 4.0, -4.0], [-2.0, -2.0, 2.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(got.item(), (cofactor * da.numpy()).sum(), atol=1e-12)


def test_linear_gradients_of_complex_tensors_match_torch():
    """linear's fused backward (``linear_backward``) takes real dtypes; complex inputs keep the products that
    conjugate the other operand, as torch's gradients do."""
    import torch

    rng = np.random.default_rng(7)
    x = (rng.standard_normal((2, 3, 4)) + 1j * rng.standard_normal((2, 3, 4))).astype(np.complex64)
    w = (rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))).astype(np.complex64)
    b = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex64)
    ours = [fl.from_numpy(a.copy()).requires_grad_() for a in (x, w, b)]
    theirs = [torch.from_numpy(a.copy()).requires_grad_() for a in (x, w, b)]
    fl.nn.functional.linear(*ours).abs().sum().backward()
    torch.nn.functional.linear(*theirs).abs().sum().backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="expected input of a real floating point dtype, got flambeau.complex64"):
        fl._ops.OPS["linear_backward"].fn(ours[0].detach(), ours[0].detach(), ours[1].detach(), (True, True, True))
