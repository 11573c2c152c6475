"""flambeau.linalg (``flambeau/_ops/linalg_solvers.py``) against torch.linalg: values, dtypes, batches, errors.

Factorizations are unique only up to signs, so they are checked by what does not depend on them:
the reconstruction, orthonormality, triangularity and ``|singular vectors|``/projectors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops._registry import OPS

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(13)
DTYPES = [(fl.float32, torch.float32, 1e-4), (fl.float64, torch.float64, 1e-10)]
SHAPES = [(3, 3), (2, 4, 4), (2, 1, 3, 3)]


def _pair(a, d, td):
    return fl.tensor(a, dtype=d), torch.tensor(a, dtype=td)


def _close(x, tx, tol):
    assert x.dtype.name == str(tx.dtype).split(".")[-1], (x.dtype, tx.dtype)
    assert tuple(x.shape) == tuple(tx.shape)
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=tol, atol=tol)


def _spd(shape):
    a = RNG.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["inv", "det", "matrix_exp", "eigvalsh", "svdvals", "pinv"])
def test_square_functions_match_torch(name, shape, d, td, tol):
    a, ta = _pair(RNG.standard_normal(shape), d, td)
    _close(getattr(fl.linalg, name)(a), getattr(torch.linalg, name)(ta), tol)


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
def test_slogdet_logdet_and_top_level_aliases(d, td, tol):
    a, ta = _pair(RNG.standard_normal((3, 4, 4)), d, td)
    sign, logabsdet = fl.linalg.slogdet(a)
    tsign, tlog = torch.linalg.slogdet(ta)
    _close(sign, tsign, tol)
    _close(logabsdet, tlog, tol)
    assert fl.slogdet(a).logabsdet is not None and type(fl.slogdet(a)).__name__ == "slogdet"
    p, tp = _pair(_spd((2, 3, 3)), d, td)
    _close(fl.logdet(p), torch.logdet(tp), tol)
    _close(a.det(), ta.det(), tol)
    _close(fl.inverse(a), torch.inverse(ta), tol * 10)
    _close(a.matrix_exp(), ta.matrix_exp(), tol * 10)
    _close(fl.matrix_power(a, 3), torch.matrix_power(ta, 3), tol * 10)
    _close(a.pinverse(), ta.pinverse(), tol * 10)
    _close(fl.cholesky(p), torch.cholesky(tp), tol)


def test_logdet_of_negative_and_singular_determinants():
    assert math.isnan(fl.logdet(-fl.eye(3, dtype=fl.float64)).item())
    assert fl.logdet(fl.zeros(2, 2)).item() == -math.inf
    sign, logabsdet = fl.linalg.slogdet(fl.tensor([[1.0, 2.0], [2.0, 4.0]]))
    assert sign.item() == 0 and logabsdet.item() == -math.inf


@pytest.mark.parametrize("d,td,tol", DTYPES)
def test_solve_shapes_as_torch(d, td, tol):
    a, ta = _pair(RNG.standard_normal((2, 3, 3)), d, td)
    for bshape in [(2, 3, 4), (3, 4), (3,), (2, 3), (5, 2, 3, 1)]:
        b, tb = _pair(RNG.standard_normal(bshape), d, td)
        _close(fl.linalg.solve(a, b), torch.linalg.solve(ta, tb), tol * 10)
    b, tb = _pair(RNG.standard_normal((2, 4, 3)), d, td)
    _close(fl.linalg.solve(a, b, left=False), torch.linalg.solve(ta, tb, left=False), tol * 10)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_solve_triangular_reads_one_triangle(upper, left, unitriangular):
    a, ta = _pair(RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3), fl.float64, torch.float64)
    bshape = (2, 3, 4) if left else (2, 4, 3)
    b, tb = _pair(RNG.standard_normal(bshape), fl.float64, torch.float64)
    kw = dict(upper=upper, left=left, unitriangular=unitriangular)
    _close(fl.linalg.solve_triangular(a, b, **kw), torch.linalg.solve_triangular(ta, tb, **kw), 1e-10)


def test_solve_triangular_with_zero_on_the_diagonal_gives_inf_not_an_error():
    a = fl.tensor([[1.0, 2.0], [0.0, 0.0]])
    x = fl.linalg.solve_triangular(a, fl.ones(2, 1), upper=True)
    assert not np.isfinite(x.numpy()).all()


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_torch_and_reads_the_lower_triangle(upper, d, td, tol):
    p = _spd((2, 4, 4))
    junk = np.triu(np.full((4, 4), 7.0), 1)  # the other triangle is never read
    p_junk = p + (junk.T if upper else junk)
    a, ta = _pair(p_junk, d, td)
    _close(fl.linalg.cholesky(a, upper=upper), torch.linalg.cholesky(ta, upper=upper), tol * 10)
    res = fl.linalg.cholesky_ex(a, upper=upper)
    assert res.info.dtype == fl.int32 and res.info.tolist() == [0, 0]


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (2, 3, 2)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_shapes_and_reconstruction(mode, shape, d, td, tol):
    a, ta = _pair(RNG.standard_normal(shape), d, td)
    q, r = fl.linalg.qr(a, mode=mode)
    tq, tr = torch.linalg.qr(ta, mode=mode)
    assert tuple(q.shape) == tuple(tq.shape) and tuple(r.shape) == tuple(tr.shape)
    np.testing.assert_allclose(np.abs(r.numpy()), np.abs(tr.numpy()), rtol=tol * 10, atol=tol * 10)
    assert np.allclose(np.tril(r.numpy(), -1), 0)
    if mode != "r":
        np.testing.assert_allclose((q @ r).numpy(), a.numpy(), atol=tol * 10)
        eye = np.eye(q.shape[-1])
        np.testing.assert_allclose((q.mT @ q).numpy(), np.broadcast_to(eye, q.shape[:-2] + eye.shape), atol=tol * 10)


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_matches_torch_up_to_signs(full_matrices, shape, d, td, tol):
    a, ta = _pair(RNG.standard_normal(shape), d, td)
    u, s, vh = fl.linalg.svd(a, full_matrices=full_matrices)
    tu, ts, tvh = torch.linalg.svd(ta, full_matrices=full_matrices)
    for x, tx in ((u, tu), (s, ts), (vh, tvh)):
        assert x.dtype == d and tuple(x.shape) == tuple(tx.shape)
    _close(s, ts, tol)
    k = min(shape[-2:])
    np.testing.assert_allclose(np.abs(u.numpy()[..., :k]), np.abs(tu.numpy()[..., :k]), atol=tol * 100)
    np.testing.assert_allclose(np.abs(vh.numpy()[..., :k, :]), np.abs(tvh.numpy()[..., :k, :]), atol=tol * 100)
    recon = (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]
    np.testing.assert_allclose(recon.numpy(), a.numpy(), atol=tol * 10)


def test_torch_svd_and_qr_conventions():
    a, ta = _pair(RNG.standard_normal((5, 3)), fl.float64, torch.float64)
    u, s, v = fl.svd(a)
    tu, ts, tv = torch.svd(ta)
    assert tuple(u.shape) == tuple(tu.shape) and tuple(v.shape) == tuple(tv.shape) == (3, 3)
    np.testing.assert_allclose(((u * s) @ v.mT).numpy(), a.numpy(), atol=1e-12)
    u, s, v = fl.svd(a, some=False)
    assert tuple(u.shape) == (5, 5)
    u, s, v = a.svd(compute_uv=False)
    assert not u.numpy().any() and tuple(v.shape) == (3, 3)
    _close(s, torch.svd(ta, compute_uv=False).S, 1e-12)
    q, r = fl.qr(a, some=False)
    assert tuple(q.shape) == (5, 5) and tuple(r.shape) == (5, 3) and type(fl.qr(a)).__name__ == "qr"


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_torch_up_to_signs(uplo, d, td, tol):
    a, ta = _pair(RNG.standard_normal((2, 4, 4)), d, td)  # not symmetric: only triangle UPLO is read
    w, v = fl.linalg.eigh(a, UPLO=uplo)
    tw, tv = torch.linalg.eigh(ta, UPLO=uplo)
    _close(w, tw, tol * 10)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), atol=tol * 100)
    _close(fl.linalg.eigvalsh(a, UPLO=uplo), torch.linalg.eigvalsh(ta, UPLO=uplo), tol * 10)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape,bshape", [((5, 3), (5, 2)), ((2, 5, 3), (2, 5)), ((3, 3), (3, 1))])
def test_lstsq_fields_as_torch(driver, shape, bshape):
    a, ta = _pair(RNG.standard_normal(shape), fl.float64, torch.float64)
    b, tb = _pair(RNG.standard_normal(bshape), fl.float64, torch.float64)
    res = fl.linalg.lstsq(a, b, driver=driver)
    tres = torch.linalg.lstsq(ta, tb, driver=driver)
    assert res._fields == ("solution", "residuals", "rank", "singular_values")
    for field in res._fields:
        _close(getattr(res, field), getattr(tres, field), 1e-9)


def test_lstsq_rank_deficient_gives_the_minimum_norm_solution():
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    b = np.array([[1.0], [2.0], [2.0]])
    res = fl.linalg.lstsq(fl.tensor(a), fl.tensor(b), driver="gelsd")
    np.testing.assert_allclose(res.solution.numpy(), np.linalg.lstsq(a, b, rcond=None)[0], atol=1e-6)
    assert res.rank.item() == 1 and res.residuals.numel() == 0


@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv_and_matrix_rank_with_tolerances(hermitian):
    a = RNG.standard_normal((2, 4, 2))
    a = a @ np.swapaxes(a, -1, -2)  # rank 2, symmetric
    x, tx = _pair(a, fl.float64, torch.float64)
    _close(fl.linalg.pinv(x, hermitian=hermitian), torch.linalg.pinv(tx, hermitian=hermitian), 1e-8)
    _close(fl.linalg.matrix_rank(x, hermitian=hermitian), torch.linalg.matrix_rank(tx, hermitian=hermitian), 0)
    for kw in ({"atol": 1.0}, {"rtol": 0.5}, {"atol": 0.1, "rtol": 0.2}):
        _close(fl.linalg.matrix_rank(x, **kw), torch.linalg.matrix_rank(tx, **kw), 0)
        _close(fl.linalg.pinv(x, **kw), torch.linalg.pinv(tx, **kw), 1e-8)


@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 5])
def test_matrix_power(n):
    a, ta = _pair(RNG.standard_normal((2, 3, 3)), fl.float64, torch.float64)
    _close(fl.linalg.matrix_power(a, n), torch.linalg.matrix_power(ta, n), 1e-9)
    i, ti = _pair(RNG.integers(-3, 3, (3, 3)), fl.int64, torch.int64)
    if n >= 0:
        _close(i.matrix_power(n), ti.matrix_power(n), 0)


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("ord", [None, 0, 1, -1, 2, -2, 3.5, math.inf, -math.inf])
def test_vector_norm_and_norm(ord, d, td, tol):
    x, tx = _pair(RNG.standard_normal((3, 4)), d, td)
    o = 2 if ord is None else ord
    _close(fl.linalg.vector_norm(x, o), torch.linalg.vector_norm(tx, o), tol)
    _close(fl.linalg.vector_norm(x, o, dim=1, keepdim=True), torch.linalg.vector_norm(tx, o, dim=1, keepdim=True), tol)
    _close(fl.linalg.norm(x, ord, dim=0), torch.linalg.norm(tx, ord, dim=0), tol)
    _close(fl.linalg.norm(x[0], ord), torch.linalg.norm(tx[0], ord), tol)


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((0, 2), True), ((2, 0), False)])
def test_matrix_norm(ord, dim, keepdim):
    x, tx = _pair(RNG.standard_normal((3, 4, 5)), fl.float64, torch.float64)
    _close(fl.linalg.matrix_norm(x, ord, dim, keepdim), torch.linalg.matrix_norm(tx, ord, dim, keepdim), 1e-10)
    _close(fl.linalg.norm(x, ord, dim, keepdim), torch.linalg.norm(tx, ord, dim, keepdim), 1e-10)
    _close(fl.linalg.norm(x[0], ord), torch.linalg.norm(tx[0], ord), 1e-10)
    _close(fl.linalg.matrix_norm(x, ord, dtype=fl.float64), torch.linalg.matrix_norm(tx, ord, dtype=torch.float64),
           1e-10)


def test_empty_and_half_inputs_as_torch():
    assert fl.linalg.det(fl.zeros(0, 0)).item() == torch.linalg.det(torch.zeros(0, 0)).item() == 1.0
    assert tuple(fl.linalg.svdvals(fl.zeros(3, 0)).shape) == (0,)
    half = fl.linalg.matrix_norm(fl.eye(2, dtype=fl.float16))
    assert half.dtype == fl.float16 and abs(half.item() - 2 ** 0.5) < 1e-3


def test_products_and_views():
    a, ta = _pair(RNG.standard_normal((2, 4, 3)), fl.float64, torch.float64)
    b, tb = _pair(RNG.standard_normal((4, 3)), fl.float64, torch.float64)
    _close(fl.linalg.cross(a, b[None]), torch.linalg.cross(ta, tb[None]), 1e-12)
    _close(fl.linalg.vecdot(a, b), torch.linalg.vecdot(ta, tb), 1e-12)
    _close(fl.linalg.vecdot(a, b, dim=1), torch.linalg.vecdot(ta, tb, dim=1), 1e-12)
    _close(fl.linalg.diagonal(a, offset=1), torch.linalg.diagonal(ta, offset=1), 0)
    ms = [RNG.standard_normal(s) for s in [(4,), (4, 10), (10, 2), (2, 7), (7,)]]
    _close(fl.linalg.multi_dot([fl.tensor(m) for m in ms]), torch.linalg.multi_dot([torch.tensor(m) for m in ms]),
           1e-10)
    ms = [RNG.standard_normal(s) for s in [(3, 10), (10, 2), (2, 7)]]
    _close(fl.linalg.multi_dot([fl.tensor(m) for m in ms]), torch.linalg.multi_dot([torch.tensor(m) for m in ms]),
           1e-10)


def test_named_tuples_as_torch():
    a = fl.tensor(_spd((3, 3)))
    assert fl.linalg.qr(a)._fields == ("Q", "R")
    assert fl.linalg.svd(a)._fields == ("U", "S", "Vh")
    assert fl.linalg.eigh(a)._fields == ("eigenvalues", "eigenvectors")
    assert fl.linalg.slogdet(a)._fields == ("sign", "logabsdet")
    assert fl.linalg.inv_ex(a)._fields == ("inverse", "info")
    assert fl.linalg.cholesky_ex(a)._fields == ("L", "info")
    assert fl.svd(a)._fields == ("U", "S", "V")


# --- errors -------------------------------------------------------------------------------------------
SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])


def _ours(torch_error) -> str:
    """torch's message as flambeau words it: the same text, naming flambeau (tests/test_messages.py)."""
    return str(torch_error).replace("torch.", "flambeau.")


def _torch_error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


@pytest.mark.parametrize("batched", [False, True])
def test_singular_matrices_raise_linalg_error_with_torch_message(batched):
    a = np.stack([np.eye(2), SINGULAR]) if batched else SINGULAR
    x, tx = fl.tensor(a), torch.tensor(a)
    b, tb = fl.ones(a.shape[:-1]), torch.ones(a.shape[:-1], dtype=torch.float64)
    for name, args, targs in (("inv", (x,), (tx,)), ("solve", (x, b.double()), (tx, tb))):
        terr = _torch_error(lambda name=name, targs=targs: getattr(torch.linalg, name)(*targs))
        with pytest.raises(fl.linalg.LinAlgError) as err:
            getattr(fl.linalg, name)(*args)
        assert isinstance(err.value, RuntimeError)
        assert str(err.value) == _ours(terr)
    res, tres = fl.linalg.inv_ex(x), torch.linalg.inv_ex(tx)
    assert res.info.tolist() == tres.info.tolist() and res.info.dtype == fl.int32
    with pytest.raises(fl.linalg.LinAlgError, match="diagonal element 2 is zero"):
        fl.linalg.inv_ex(x, check_errors=True)


@pytest.mark.parametrize("batched", [False, True])
def test_not_positive_definite_raises_with_the_minor(batched):
    m = np.diag([1.0, 2.0, -1.0])
    a = np.stack([np.eye(3), m]) if batched else m
    terr = _torch_error(lambda: torch.linalg.cholesky(torch.tensor(a)))
    with pytest.raises(fl.linalg.LinAlgError) as err:
        fl.linalg.cholesky(fl.tensor(a))
    assert str(err.value) == _ours(terr)
    assert fl.linalg.cholesky_ex(fl.tensor(a)).info.tolist() == torch.linalg.cholesky_ex(torch.tensor(a)).info.tolist()


@pytest.mark.parametrize("call", [
    lambda m: m.linalg.inv(m.ones(2, 2, dtype=m.int64)),
    lambda m: m.linalg.inv(m.ones(2, 3)),
    lambda m: m.linalg.det(m.ones(3)),
    lambda m: m.linalg.svd(m.ones(3, dtype=m.int32)),
    lambda m: m.linalg.solve(m.eye(2), m.ones(3)),
    lambda m: m.linalg.eigh(m.ones(2, 3)),
    lambda m: m.linalg.qr(m.ones(3, 3), mode="x"),
    lambda m: m.linalg.eigh(m.eye(2), UPLO="X"),
    lambda m: m.linalg.matrix_norm(m.ones(3)),
    lambda m: m.linalg.matrix_norm(m.ones(3, 3), ord=3),
    lambda m: m.linalg.vector_norm(m.ones(3), ord="fro"),
    lambda m: m.linalg.norm(m.ones(3, 3, 3), ord=2),
    lambda m: m.linalg.matrix_power(m.ones(2, 3), 2),
    lambda m: m.linalg.inv(m.eye(2, dtype=m.float16)),
    lambda m: m.linalg.solve_triangular(m.eye(2), m.ones(2), upper=True),
    lambda m: m.linalg.lstsq(m.eye(2), m.ones(2), driver="foo"),
    lambda m: m.linalg.multi_dot([m.ones(2, 2)]),
    lambda m: m.linalg.cross(m.ones(2, 2), m.ones(2, 2)),
    lambda m: m.linalg.cross(m.ones(2, 3), m.ones(3)),
    lambda m: m.linalg.solve(m.eye(2), m.ones(2, dtype=m.float64)),
    lambda m: m.linalg.solve(m.eye(2), m.ones(2, dtype=m.int64)),
    lambda m: m.linalg.lstsq(m.eye(2), m.ones(2, dtype=m.float64)),
    lambda m: m.linalg.matrix_norm(m.ones(2, 2, dtype=m.int64)),
    lambda m: m.linalg.lu_factor(m.eye(3), pivot=False),
    lambda m: m.linalg.lu_factor(m.ones(3)),
    lambda m: m.linalg.lu_solve(m.eye(2), m.ones(2, dtype=m.int32), m.ones(2)),
    lambda m: m.linalg.lu_solve(m.eye(2), m.ones(2, dtype=m.int32), m.ones(3, 1)),
    lambda m: m.lu_unpack(m.eye(2), m.ones(2, dtype=m.int64)),
    lambda m: m.linalg.solve_ex(m.eye(2), m.ones(3)),
    lambda m: m.linalg.eigvals(m.ones(2, 3)),
    lambda m: m.linalg.tensorinv(m.ones(2, 3), 1),
    lambda m: m.linalg.tensorinv(m.ones(2, 2), 0),
    lambda m: m.linalg.tensorsolve(m.ones(2, 3, 4), m.ones(2, 3)),
    lambda m: m.linalg.householder_product(m.ones(2, 3), m.ones(1)),
    lambda m: m.linalg.householder_product(m.ones(3, 2), m.ones(3)),
    lambda m: m.linalg.householder_product(m.ones(3, 2), m.ones(2, dtype=m.float64)),
    lambda m: m.linalg.vander(m.ones(3), N=1),
    lambda m: m.vander(m.ones(2, 2)),
    lambda m: m.linalg.cond(m.ones(3, 3), "x"),
    lambda m: m.block_diag(m.ones(2, 2, 2)),
    lambda m: m.cartesian_prod(m.ones(2, 2)),
    lambda m: m.cov(m.ones(2, 2, 2)),
    lambda m: m.cov(m.ones(2, 3), fweights=m.ones(3)),
    lambda m: m.cov(m.ones(2, 3), aweights=m.ones(2)),
    lambda m: m.chain_matmul(m.ones(3)),
    lambda m: m.histc(m.ones(3), min=2, max=1),
])
def test_bad_arguments_raise_as_torch(call):
    terr = _torch_error(lambda: call(torch))
    with pytest.raises(type(terr) if type(terr) in (TypeError, RuntimeError) else RuntimeError) as err:
        call(fl)
    assert str(err.value) == _ours(terr)


def test_every_primitive_has_a_cuda_kernel_and_a_device_without_one_is_named():
    from flambeau._ops.linalg_solvers import _kernel

    prims = [op for name, op in OPS.items() if name.startswith("linalg_") and "cpu" in op.kernels]
    assert prims and all("cuda" in op.kernels for op in prims), [op.name for op in prims if "cuda" not in op.kernels]
    cpu_only = type("Op", (), {"name": "linalg_cpu_only_example", "kernels": {"cpu": abs}})()  # not in the table
    with pytest.raises(NotImplementedError, match="linalg_cpu_only_example has no kernel for device type 'cuda'.*CPU"):
        _kernel(cpu_only, fl.device("cuda"))


def test_linalg_namespace_is_public_and_complete():
    names = ["norm", "vector_norm", "matrix_norm", "inv", "inv_ex", "det", "slogdet", "solve", "solve_triangular",
             "cholesky", "cholesky_ex", "qr", "svd", "svdvals", "eigh", "eigvalsh", "lstsq", "pinv", "matrix_exp",
             "matrix_power", "matrix_rank", "cross", "vecdot", "multi_dot", "diagonal", "solve_ex", "lu", "lu_factor",
             "lu_factor_ex", "lu_solve", "eig", "eigvals", "cond", "tensorinv", "tensorsolve", "householder_product",
             "vander", "matmul"]
    for n in names:
        assert hasattr(torch.linalg, n) and callable(getattr(fl.linalg, n)), n
        assert n in fl.linalg.__all__
    assert issubclass(fl.linalg.LinAlgError, RuntimeError)

    public = [n for n in dir(torch.linalg) if not n.startswith("_")]
    # absent: ldl_factor, ldl_factor_ex, ldl_solve (Bunch-Kaufman) and the docstring dict common_notes
    assert sum(hasattr(fl.linalg, n) for n in public) >= 0.9 * len(public)


# --- LU, eig and torch's other linear-algebra names ---------------------------------------------------
def _both(a, d=fl.float64, td=torch.float64):
    return fl.tensor(a, dtype=d), torch.tensor(a, dtype=td)


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 5), (2, 5, 3), (4, 4)])
def test_lu_factorizations_match_torch(shape, d, td, tol):
    a, ta = _pair(RNG.standard_normal(shape), d, td)
    lu, piv, info = fl.linalg.lu_factor_ex(a)
    tlu, tpiv, tinfo = torch.linalg.lu_factor_ex(ta)
    _close(lu, tlu, tol)
    assert piv.tolist() == tpiv.tolist() and piv.dtype is fl.int32 and info.dtype is fl.int32
    assert info.tolist() == tinfo.tolist()
    for x, tx in zip(fl.linalg.lu(a), torch.linalg.lu(ta)):
        _close(x, tx, tol)
    for x, tx in zip(fl.lu_unpack(lu, piv), torch.lu_unpack(tlu, tpiv)):
        _close(x, tx, tol)
    empty = fl.lu_unpack(lu, piv, unpack_data=False)
    assert empty.L.numel() == 0 and empty.U.numel() == 0 and empty.P.shape == (*shape[:-1], shape[-2])
    _close(fl.lu(a)[0], torch.linalg.lu_factor(ta)[0], tol)
    assert type(fl.linalg.lu_factor(a)).__name__ == "linalg_lu_factor" and type(fl.linalg.lu(a)).__name__ == "linalg_lu"


@pytest.mark.parametrize("batched", [False, True])
def test_singular_lu_reports_the_zero_pivot_as_torch(batched):
    a = np.stack([np.eye(2), SINGULAR]) if batched else SINGULAR
    x, tx = fl.tensor(a), torch.tensor(a)
    assert fl.linalg.lu_factor_ex(x).info.tolist() == torch.linalg.lu_factor_ex(tx).info.tolist()
    _close(fl.linalg.lu(x).U, torch.linalg.lu(tx).U, 1e-12)  # no error: lu works for singular matrices
    for call in (lambda m: m.linalg.lu_factor(m.tensor(a)), lambda m: m.linalg.lu_factor_ex(m.tensor(a),
                                                                                            check_errors=True)):
        terr = _torch_error(lambda call=call: call(torch))
        with pytest.raises(fl.linalg.LinAlgError) as err:
            call(fl)
        assert str(err.value) == _ours(terr)
    b = fl.ones(*a.shape[:-1], 1, dtype=fl.float64)
    assert fl.linalg.solve_ex(x, b).info.tolist() == torch.linalg.solve_ex(tx, torch.ones(*a.shape[:-1], 1,
                                                                             dtype=torch.float64)).info.tolist()
    terr = _torch_error(lambda: torch.linalg.solve_ex(tx, torch.ones(*a.shape[:-1], 1, dtype=torch.float64),
                                                      check_errors=True))
    with pytest.raises(fl.linalg.LinAlgError) as err:
        fl.linalg.solve_ex(x, b, check_errors=True)
    assert str(err.value) == _ours(terr)
    with pytest.raises(fl.linalg.LinAlgError):
        fl.lu(x)
    assert fl.lu(x, get_infos=True).info.tolist() == torch.linalg.lu_factor_ex(tx).info.tolist()


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_and_solve_ex(adjoint, left, d, td, tol):
    a, ta = _pair(RNG.standard_normal((2, 3, 3)), d, td)
    b, tb = _pair(RNG.standard_normal((2, 3, 4) if left else (2, 4, 3)), d, td)
    lu, piv = fl.linalg.lu_factor(a)
    tlu, tpiv = torch.linalg.lu_factor(ta)
    _close(fl.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint),
           torch.linalg.lu_solve(tlu, tpiv, tb, left=left, adjoint=adjoint), tol * 10)
    res, tres = fl.linalg.solve_ex(a, b, left=left), torch.linalg.solve_ex(ta, tb, left=left)
    _close(res.result, tres.result, tol * 10)
    assert res.info.tolist() == tres.info.tolist() and type(res).__name__ == "linalg_solve_ex"
    if left and not adjoint:
        _close(fl.lu_solve(b, lu, piv), torch.lu_solve(tb, tlu, tpiv), tol * 10)


@pytest.mark.parametrize("d,td,tol", DTYPES)
def test_eig_and_eigvals_are_complex_as_torch(d, td, tol):
    a, ta = _pair(RNG.standard_normal((2, 4, 4)), d, td)
    w, v = fl.linalg.eig(a)
    tw, tv = torch.linalg.eig(ta)
    assert w.dtype.name == str(tw.dtype).split(".")[-1] and v.dtype is w.dtype
    np.testing.assert_allclose(w.numpy(), tw.numpy(), rtol=tol * 10, atol=tol * 10)
    # eigenvectors: unit columns with A v = v diag(w) (their phases are LAPACK's choice)
    np.testing.assert_allclose(np.linalg.norm(v.numpy(), axis=-2), 1, rtol=tol * 10)
    np.testing.assert_allclose(a.numpy() @ v.numpy(), v.numpy() * w.numpy()[..., None, :], atol=tol * 100)
    np.testing.assert_allclose(fl.linalg.eigvals(a).numpy(), tw.numpy(), rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("d,td,tol", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_triangular_and_cholesky_solves(transpose, upper, d, td, tol):
    a, ta = _pair(RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3), d, td)
    b, tb = _pair(RNG.standard_normal((3, 2)), d, td)
    for x, tx in zip(fl.triangular_solve(b, a, upper, transpose), torch.triangular_solve(tb, ta, upper, transpose)):
        _close(x, tx, tol * 10)
    factor = np.linalg.cholesky(_spd((2, 3, 3)))
    factor = np.swapaxes(factor, -1, -2) if upper else factor
    f, tf = _pair(factor + (np.tril(np.ones((3, 3)), -1) if upper else np.triu(np.ones((3, 3)), 1)), d, td)
    _close(fl.cholesky_solve(b, f, upper), torch.cholesky_solve(tb, tf, upper), tol * 10)  # other triangle unread
    _close(f[0].cholesky_inverse(upper), torch.cholesky_inverse(tf[0], upper), tol * 10)


@pytest.mark.parametrize("d,td,tol", DTYPES)
def test_composite_matrix_functions_match_torch(d, td, tol):
    a, ta = _pair(RNG.standard_normal((2, 3, 3)), d, td)
    for p in (None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf):
        _close(fl.linalg.cond(a, p), torch.linalg.cond(ta, p), tol * 100)
    _close(fl.linalg.cond(fl.tensor(SINGULAR), 1), torch.linalg.cond(torch.tensor(SINGULAR), 1), 0)
    w, tw = _pair(RNG.standard_normal((2, 5, 3)), d, td)
    _close(fl.linalg.cond(w), torch.linalg.cond(tw), tol * 100)
    t, tt = _pair(RNG.standard_normal((2, 3, 6)), d, td)
    _close(fl.linalg.tensorinv(t), torch.linalg.tensorinv(tt), tol * 100)
    t, tt = _pair(RNG.standard_normal((6, 2, 3)), d, td)
    b, tb = _pair(RNG.standard_normal((2, 3)), d, td)
    _close(fl.linalg.tensorsolve(t, b, dims=(0,)), torch.linalg.tensorsolve(tt, tb, dims=(0,)), tol * 100)
    h, th = _pair(RNG.standard_normal((2, 5, 3)), d, td)
    tau, ttau = _pair(RNG.standard_normal((2, 2)), d, td)
    _close(fl.linalg.householder_product(h, tau), torch.linalg.householder_product(th, ttau), tol * 10)
    m = [_pair(RNG.standard_normal(s), d, td) for s in ((2, 3), (3, 4), (4, 1))]
    _close(fl.chain_matmul(*[x for x, _ in m]), torch.chain_matmul(*[x for _, x in m]), tol * 10)
    _close(fl.linalg.matmul(a, b.mT), torch.linalg.matmul(ta, tb.mT), tol)


@pytest.mark.parametrize("N,increasing", [(None, False), (2, True), (5, False), (0, True)])
def test_vander_as_torch(N, increasing):
    for x in ([0.5, 2.0, -1.0, 0.0], [1, 2, 3]):
        x_, tx = fl.tensor(x), torch.tensor(x)
        _close(fl.vander(x_, N, increasing), torch.vander(tx, N, increasing), 1e-6)
        if N != 0:
            _close(fl.linalg.vander(x_.reshape(2, 2) if len(x) == 4 else x_, N=N),
                   torch.linalg.vander(tx.reshape(2, 2) if len(x) == 4 else tx, N=N), 1e-6)


def test_products_of_sets_and_blocks():
    a, b = fl.tensor([1, 2]), fl.tensor([3, 4, 5])
    want = torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5]))
    assert fl.cartesian_prod(a, b).tolist() == want.tolist()
    assert fl.cartesian_prod(a) is a
    blocks = [RNG.standard_normal((2, 3)), np.array([1.0, 2.0]), np.array(5.0)]
    out = fl.block_diag(*[fl.tensor(x, dtype=fl.float32) for x in blocks[:2]], fl.tensor(7))
    tout = torch.block_diag(*[torch.tensor(x, dtype=torch.float32) for x in blocks[:2]], torch.tensor(7))
    _close(out, tout, 1e-6)
    assert fl.block_diag().shape == torch.block_diag().shape


@pytest.mark.parametrize("d,td,tol", DTYPES)
def test_cov_corrcoef_renorm_as_torch(d, td, tol):
    x, tx = _pair(RNG.standard_normal((3, 6)), d, td)
    fw = [1, 2, 1, 3, 1, 1]
    aw = RNG.random(6)
    for kwargs in ({}, {"correction": 0}, {"fweights": fw}, {"aweights": aw}, {"fweights": fw, "aweights": aw},
                   {"correction": 2, "fweights": fw, "aweights": aw}):
        ours = {k: (fl.tensor(v) if k != "aweights" else fl.tensor(v, dtype=d)) if k != "correction" else v
                for k, v in kwargs.items()}
        theirs = {k: (torch.tensor(v) if k != "aweights" else torch.tensor(v, dtype=td)) if k != "correction" else v
                  for k, v in kwargs.items()}
        _close(fl.cov(x, **ours), torch.cov(tx, **theirs), tol)
    _close(x[0].cov(), tx[0].cov(), tol)
    _close(fl.cov(fl.tensor([[1, 2, 4]])), torch.cov(torch.tensor([[1, 2, 4]])), 1e-6)
    _close(fl.corrcoef(x), torch.corrcoef(tx), tol)
    _close(x.corrcoef(), tx.corrcoef(), tol)
    a, ta = _pair(RNG.standard_normal((2, 3, 4)), d, td)
    for p, dim, maxnorm in ((2, 1, 1.5), (1, -1, 2.0), (3, 0, 100.0)):
        _close(fl.renorm(a, p, dim, maxnorm), torch.renorm(ta, p, dim, maxnorm), tol)
        _close(a.renorm(p, dim, maxnorm), ta.renorm(p, dim, maxnorm), tol)


@pytest.mark.parametrize("d,td,tol", DTYPES)
def test_histc_and_histogram_as_torch(d, td, tol):
    x, tx = _pair(np.concatenate([RNG.standard_normal(60), [0.0, 1.0, 1.0]]), d, td)
    for kwargs in ({}, {"bins": 7}, {"bins": 4, "min": -1, "max": 1}, {"bins": 3, "min": 0, "max": 1}):
        _close(fl.histc(x, **kwargs), torch.histc(tx, **kwargs), 0)
    _close(x.histc(5), tx.histc(5), 0)
    _close(fl.histc(fl.ones(3, dtype=d), 4), torch.histc(torch.ones(3, dtype=td), 4), 0)
    for bins, kwargs in ((5, {}), (4, {"range": (-1.0, 2.0), "density": True}),
                         ([-2.0, 0.0, 0.5, 3.0], {"weight": np.abs(RNG.standard_normal(63))})):
        ours = {k: fl.tensor(v, dtype=d) if k == "weight" else v for k, v in kwargs.items()}
        theirs = {k: torch.tensor(v, dtype=td) if k == "weight" else v for k, v in kwargs.items()}
        fb, tb = (fl.tensor(bins, dtype=d), torch.tensor(bins, dtype=td)) if isinstance(bins, list) else (bins, bins)
        for y, ty in zip(fl.histogram(x, fb, **ours), torch.histogram(tx, tb, **theirs)):
            _close(y, ty, tol)
    assert type(fl.histogram(x, 3)).__name__ == "histogram"
    with pytest.raises(RuntimeError, match="histogram_cpu"):
        fl.histc(fl.ones(3, dtype=fl.int64))
