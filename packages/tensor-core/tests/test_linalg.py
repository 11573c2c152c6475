"""Linear algebra (``flambeau/_ops/linalg.py``) against torch and numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import flambeau as fl
from flambeau import _grad_mode

torch = pytest.importorskip("torch")

NP_TO_TORCH = {np.float32: torch.float32, np.float64: torch.float64, np.float16: torch.float16,
               np.int64: torch.int64, np.int32: torch.int32}


def pair(rng, shape, dtype=np.float32, layout="contiguous"):
    """(flambeau tensor, torch tensor) holding the same values; ``layout`` picks the strides."""
    if layout == "transposed" and len(shape) >= 2:
        a = rng.standard_normal(shape[:-2] + shape[-2:][::-1]).astype(dtype)
        a = np.swapaxes(a, -1, -2)
    elif layout == "strided" and len(shape) >= 1:
        a = rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(dtype)[..., ::2]
    else:
        a = np.asarray(rng.standard_normal(shape)).astype(dtype)
    if np.dtype(dtype).kind == "i":
        a = (a * 3).astype(dtype)
    return fl.from_numpy(a), torch.from_numpy(np.ascontiguousarray(a))


def check(out, ref, rtol=1e-5, atol=1e-5):
    assert isinstance(out, fl.Tensor)
    assert tuple(out.shape) == tuple(ref.shape), (out.shape, ref.shape)
    assert str(out.dtype).split(".")[1] == str(ref.dtype).split(".")[1], (out.dtype, ref.dtype)
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=rtol, atol=atol)


# Every torch.matmul broadcasting case: (shape of a, shape of b).
MATMUL_CASES = [
    ((3,), (3,)),              # dot
    ((2, 3), (3, 4)),          # mm
    ((3,), (3, 4)),            # vector @ matrix
    ((2, 3), (3,)),            # matrix @ vector
    ((5, 2, 3), (3,)),         # batched matrix @ vector
    ((3,), (5, 3, 4)),         # vector @ batched matrix
    ((5, 2, 3), (3, 4)),       # batched @ matrix
    ((2, 3), (5, 3, 4)),       # matrix @ batched
    ((5, 2, 3), (5, 3, 4)),    # bmm
    ((7, 1, 2, 3), (5, 3, 4)),  # broadcast batch dims
    ((1, 2, 3), (6, 3, 4)),
    ((2, 1, 4, 3), (1, 5, 3, 2)),
    ((0, 2, 3), (3, 4)),       # empty batch
    ((2, 0), (0, 4)),          # empty inner dim: zeros
    ((2, 3, 0), (0, 4)),       # empty inner dim, folded batch
]


@pytest.mark.parametrize("sa,sb", MATMUL_CASES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_matmul_broadcasting_matches_torch(rng, sa, sb, layout):
    a, ta = pair(rng, sa, np.float32, layout)
    b, tb = pair(rng, sb, np.float32, layout)
    check(fl.matmul(a, b), torch.matmul(ta, tb), rtol=1e-4)
    check(a @ b, ta @ tb, rtol=1e-4)
    check(a.matmul(b), ta.matmul(tb), rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.int32])
def test_matmul_dtypes(rng, dtype):
    a, ta = pair(rng, (4, 5), dtype)
    b, tb = pair(rng, (5, 3), dtype)
    check(a @ b, ta @ tb, rtol=1e-2 if dtype == np.float16 else 1e-6, atol=1e-2 if dtype == np.float16 else 1e-6)
    v = fl.from_numpy(a.numpy()[0])
    check(v @ b, ta[0] @ tb, rtol=1e-2 if dtype == np.float16 else 1e-6, atol=1e-2 if dtype == np.float16 else 1e-6)


def test_rmatmul_with_numpy_free_operands(rng):
    a, ta = pair(rng, (2, 3))
    b, tb = pair(rng, (3, 2))
    assert fl.Tensor.__rmatmul__(b, a).shape == (2, 2)
    check(fl.Tensor.__rmatmul__(b, a), ta @ tb)


def test_matmul_transposed_views_are_not_copied(rng, monkeypatch):
    """Transposed operands reach np.matmul as views (BLAS reads them with a transpose flag)."""
    from flambeau._kernels.cpu import linalg

    seen = []
    real = np.matmul

    def spy(x, y, *args, **kwargs):
        seen.append((x, y))
        return real(x, y, *args, **kwargs)

    monkeypatch.setattr(linalg.np, "matmul", spy)
    base = np.asarray(rng.standard_normal((64, 32)), np.float32)
    a = fl.from_numpy(base.T)  # (32, 64), F-ordered
    b = fl.from_numpy(base)
    out = a @ b
    x, y = seen[-1]
    assert np.shares_memory(x, base) and np.shares_memory(y, base)
    np.testing.assert_allclose(out.numpy(), base.T @ base, rtol=1e-5)


def test_matmul_errors():
    a, b = fl.ones(2, 3), fl.ones(4, 5)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        a @ b
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        fl.mm(a, b)
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D, but they are 0D and 2D"):
        fl.matmul(fl.tensor(1.0), a)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: float != double"):
        a @ fl.ones(3, 2, dtype=fl.float64)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: float != long int"):
        a @ fl.ones(3, 2, dtype=fl.int64)
    with pytest.raises(RuntimeError, match=r"inconsistent tensor size, expected tensor \[3\] and src \[4\]"):
        fl.ones(3) @ fl.ones(4)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(1x3 and 4x5\)"):
        fl.ones(3) @ b
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"):
        a @ fl.ones(4)
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(10\), mat \(10x3\), vec \(4\)"):
        fl.ones(5, 2, 3) @ fl.ones(4)
    with pytest.raises(RuntimeError, match=r"shapes cannot be multiplied \(10x3 and 4x2\)"):
        fl.ones(5, 2, 3) @ fl.ones(4, 2)
    with pytest.raises(RuntimeError, match=r"batch2 tensor to be: \[5, 3\] but got: \[5, 4\]"):
        fl.ones(5, 2, 3) @ fl.ones(5, 4, 2)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(5\) must match the size of tensor b \(4\)"):
        fl.ones(5, 2, 3) @ fl.ones(4, 3, 2)
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        fl.ones(2, 2, dtype=fl.bool) @ fl.ones(2, 2, dtype=fl.bool)
    with pytest.raises(TypeError, match="argument 'other' must be Tensor"):
        fl.matmul(a, [[1.0]])


# --- mm, bmm, mv, dot, vdot, inner, outer, kron -------------------------------------------------------
def test_mm_bmm_mv(rng):
    a, ta = pair(rng, (3, 4), layout="transposed")
    b, tb = pair(rng, (4, 5), layout="strided")
    check(fl.mm(a, b), torch.mm(ta, tb))
    check(a.mm(b), ta.mm(tb))
    x, tx = pair(rng, (2, 3, 4), layout="transposed")
    y, ty = pair(rng, (2, 4, 5))
    check(fl.bmm(x, y), torch.bmm(tx, ty))
    v, tv = pair(rng, (4,), layout="strided")
    check(fl.mv(a, v), torch.mv(ta, tv))
    check(a.mv(v), ta.mv(tv))
    with pytest.raises(RuntimeError, match="self must be a matrix"):
        fl.mm(v, b)
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        fl.bmm(a, y)
    with pytest.raises(RuntimeError, match=r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\]"):
        fl.bmm(x, fl.ones(3, 4, 5))
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        fl.bmm(x, y.to(fl.float64))
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(3\), mat \(3x4\), vec \(5\)"):
        fl.mv(a, fl.ones(5))
    with pytest.raises(RuntimeError, match="vector \\+ matrix @ vector expected, got 1, 2, 2"):
        fl.mv(a, b)


def test_dot_vdot_inner_outer_kron(rng):
    a, ta = pair(rng, (5,), layout="strided")
    b, tb = pair(rng, (5,))
    check(fl.dot(a, b), torch.dot(ta, tb))
    check(a.dot(b), ta.dot(tb))
    check(fl.vdot(a, b), torch.vdot(ta, tb))
    check(fl.outer(a, b), torch.outer(ta, tb))
    check(fl.ger(a, b), torch.ger(ta, tb))
    check(fl.outer(a, b.to(fl.float64)), torch.outer(ta, tb.double()))  # outer promotes
    m, tm = pair(rng, (3, 5), layout="transposed")
    n, tn = pair(rng, (2, 4, 5))
    check(fl.inner(m, n), torch.inner(tm, tn))
    check(fl.inner(fl.tensor(2.0), m), torch.inner(torch.tensor(2.0), tm))
    k1, tk1 = pair(rng, (2, 3))
    k2, tk2 = pair(rng, (2,))
    check(fl.kron(k1, k2), torch.kron(tk1, tk2))
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 1D tensors"):
        fl.dot(m, a)
    with pytest.raises(RuntimeError, match=r"inconsistent tensor size, expected tensor \[5\] and src \[4\]"):
        fl.dot(a, fl.ones(4))
    with pytest.raises(RuntimeError, match="dot : expected both vectors to have same dtype, but found Float and Dou"):
        fl.dot(a, b.to(fl.float64))
    with pytest.raises(RuntimeError, match="outer: Expected 1-D argument self, but got 2-D"):
        fl.outer(m, a)
    with pytest.raises(RuntimeError, match=r"inner\(\) the last dimension must match on both input tensors"):
        fl.inner(m, fl.ones(4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_batched_products_split_over_threads(rng, dtype):
    # Note [Heads in parallel]: batches of 2M multiply-adds or more run a single-threaded GEMM per matrix
    # on flambeau's threads; transposed operands, 4-d batches, bmm and odd batch counts against numpy
    a = rng.standard_normal((7, 70, 80)).astype(dtype)
    b = rng.standard_normal((7, 90, 80)).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64).transpose(0, 2, 1)
    tol = dict(rtol=1e-4, atol=1e-3) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    fa, fb = fl.from_numpy(a), fl.from_numpy(b)
    np.testing.assert_allclose((fa @ fb.transpose(1, 2)).numpy(), want, **tol)
    np.testing.assert_allclose(fl.bmm(fa, fb.transpose(1, 2)).numpy(), want, **tol)
    a4 = fl.from_numpy(a[:6].reshape(2, 3, 70, 80))
    np.testing.assert_allclose((a4 @ fb[:6].transpose(1, 2).reshape(2, 3, 80, 90)).numpy(),
                               want[:6].reshape(2, 3, 70, 90), **tol)


# --- addmm and friends -------------------------------------------------------------------------------
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addmm_family(rng, beta, alpha):
    m1, tm1 = pair(rng, (2, 3), layout="transposed")
    m2, tm2 = pair(rng, (3, 4))
    inp, tinp = pair(rng, (4,))
    check(fl.addmm(inp, m1, m2, beta=beta, alpha=alpha), torch.addmm(tinp, tm1, tm2, beta=beta, alpha=alpha))
    full, tfull = pair(rng, (2, 4))
    check(full.addmm(m1, m2, beta=beta, alpha=alpha), tfull.addmm(tm1, tm2, beta=beta, alpha=alpha))
    v, tv = pair(rng, (3,))
    i2, ti2 = pair(rng, (2,))
    check(fl.addmv(i2, m1, v, beta=beta, alpha=alpha), torch.addmv(ti2, tm1, tv, beta=beta, alpha=alpha))
    b1, tb1 = pair(rng, (5, 2, 3))
    b2, tb2 = pair(rng, (5, 3, 4))
    check(fl.baddbmm(inp, b1, b2, beta=beta, alpha=alpha), torch.baddbmm(tinp, tb1, tb2, beta=beta, alpha=alpha))
    check(fl.addbmm(full, b1, b2, beta=beta, alpha=alpha), torch.addbmm(tfull, tb1, tb2, beta=beta, alpha=alpha),
          rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_linear_bias_rows(rng, dtype):
    # Note [Bias rows in parallel]: large products take the bias in a numba loop over rows; 2-D and
    # 3-D (folded) inputs, a bias of another dtype or a strided bias keep numpy's add
    tol = dict(rtol=1e-5, atol=1e-4 if dtype == np.float32 else 1e-10)  # sums of 200 products of ~1
    w, tw = pair(rng, (300, 200), dtype)
    b, tb = pair(rng, (300,), dtype)
    for shape in ((150, 200), (3, 70, 200)):
        x, tx = pair(rng, shape, dtype)
        check(fl.nn.functional.linear(x, w, b), torch.nn.functional.linear(tx, tw, tb), **tol)
    x, tx = pair(rng, (150, 200), dtype)
    check(fl.addmm(b, x, w.t(), beta=1, alpha=2.0), torch.addmm(tb, tx, tw.t(), beta=1, alpha=2.0), **tol)
    sb, tsb = pair(rng, (600,), dtype)
    check(fl.addmm(sb[::2], x, w.t()), torch.addmm(tsb[::2], tx, tw.t()), **tol)


def test_addmm_beta_zero_ignores_nan_and_errors():
    nan = fl.full((2, 2), float("nan"))
    out = fl.addmm(nan, fl.ones(2, 3), fl.ones(3, 2), beta=0)
    assert out.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    with pytest.raises(RuntimeError, match=r"expanded size of the tensor \(3\) must match the existing size \(4\)"):
        fl.addmm(fl.ones(4), fl.ones(2, 3), fl.ones(3, 3))
    with pytest.raises(RuntimeError, match="self and mat2 must have the same dtype, but got Double and Float"):
        fl.addmm(fl.ones(3, dtype=fl.float64), fl.ones(2, 3), fl.ones(3, 3))
    ints = fl.addmm(fl.ones(3, dtype=fl.int64), fl.ones(2, 3, dtype=fl.int64), fl.ones(3, 3, dtype=fl.int64))
    assert ints.dtype is fl.int64 and ints.tolist() == [[4, 4, 4], [4, 4, 4]]


# --- einsum, tensordot -------------------------------------------------------------------------------
EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->ji", [(2, 3)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 5, 2, 3), (5, 3, 4)]),
    ("b...,b->b...", [(3, 2, 4), (3,)]),
    ("ijk->", [(2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum_matches_torch(rng, eq, shapes):
    pairs = [pair(rng, s, layout="transposed" if len(s) >= 2 else "contiguous") for s in shapes]
    ours = fl.einsum(eq, *[p[0] for p in pairs])
    check(ours, torch.einsum(eq, *[p[1] for p in pairs]), rtol=1e-4)
    check(fl.einsum(eq, [p[0] for p in pairs]), torch.einsum(eq, [p[1] for p in pairs]), rtol=1e-4)


def test_einsum_errors():
    with pytest.raises(RuntimeError, match="einsum\\(\\): fewer operands were provided"):
        fl.einsum("ij,jk->ik", fl.ones(2, 3))
    with pytest.raises(RuntimeError, match="einsum\\(\\)"):
        fl.einsum("ij,jk", fl.ones(2, 3), fl.ones(4, 5))
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        fl.einsum("ij,jk", fl.ones(2, 3), fl.ones(3, 5, dtype=fl.float64))


def test_tensordot(rng):
    a, ta = pair(rng, (2, 3, 4), layout="transposed")
    b, tb = pair(rng, (3, 4, 5))
    check(fl.tensordot(a, b), torch.tensordot(ta, tb))
    check(fl.tensordot(a, b, dims=([1, 2], [0, 1])), torch.tensordot(ta, tb, dims=([1, 2], [0, 1])))
    check(fl.tensordot(a, b, 0), torch.tensordot(ta, tb, 0))
    c, tc = pair(rng, (4, 2))
    check(fl.tensordot(a, c, ([2, 0], [0, 1])), torch.tensordot(ta, tc, ([2, 0], [0, 1])))
    with pytest.raises(RuntimeError, match="contracted dimensions need to match, but first has size 4 in dim 2"):
        fl.tensordot(a, b, ([2], [0]))


# --- trace, diag, diagonal, diag_embed -------------------------------------------------------------------
def test_trace_and_diag(rng):
    m, tm = pair(rng, (3, 5), layout="transposed")
    check(fl.trace(m), torch.trace(tm))
    assert fl.trace(fl.ones(3, 3, dtype=fl.int32)).dtype is fl.int64
    for k in (0, 1, -2, 7):
        check(fl.diag(m, k), torch.diag(tm, k))
    v, tv = pair(rng, (4,))
    for k in (0, 2, -1):
        check(fl.diag(v, k), torch.diag(tv, k))
    d = fl.diag(m)
    d.fill_(0)
    assert m.numpy()[0, 0] != 0  # diag of a matrix is a copy
    with pytest.raises(RuntimeError, match="trace: expected a matrix, but got tensor with dim 3"):
        fl.trace(fl.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match=r"diag\(\): Supports 1D or 2D tensors. Got 3D"):
        fl.diag(fl.ones(2, 2, 2))


def test_diagonal_is_a_writable_view(rng):
    x, tx = pair(rng, (2, 3, 4))
    for args in [(), (1,), (-1,), (1, 0, 2), (0, -1, -2), (2, 2, 1)]:
        check(fl.diagonal(x, *args), torch.diagonal(tx, *args))
    base = fl.zeros(3, 4)
    d = base.diagonal(1)
    assert d._base is base and d.untyped_storage() is base.untyped_storage()
    d.fill_(5.0)
    assert base.tolist() == [[0, 5, 0, 0], [0, 0, 5, 0], [0, 0, 0, 5]]
    cube = fl.zeros(2, 3, 3)
    inner = cube.diagonal(0, 1, 2).diagonal(0, 0, 1)  # a view of a view keeps the root as base
    assert inner._base is cube
    inner.fill_(1.0)
    assert cube.numpy()[1, 1, 1] == 1.0 and cube.numpy().sum() == 2.0
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical 0, 0"):
        fl.diagonal(x, 0, 0, 0)


def test_diag_embed(rng):
    x, tx = pair(rng, (2, 3))
    for args in [(), (1,), (-1,), (1, 0, 2), (0, 2, 0)]:
        check(fl.diag_embed(x, *args), torch.diag_embed(tx, *args))


# --- autograd seam -----------------------------------------------------------------------------------
class _Recorder:
    def __init__(self):
        self.calls = []

    def record(self, op, inputs, attrs, outputs):
        self.calls.append((op.name, inputs, attrs, outputs))


def test_recording():
    saved = _grad_mode._engine[0]
    eng = _Recorder()
    _grad_mode.install_engine(eng)
    try:
        a = fl.ones(2, 3).requires_grad_()
        b = fl.ones(3, 2)
        out = a @ b
        assert eng.calls[-1][:3] == ("matmul", (a, b), {}) and eng.calls[-1][3] is out
        fl.addmm(fl.ones(2), a, b, beta=2, alpha=3)
        assert eng.calls[-1][0] == "addmm" and eng.calls[-1][2] == {"beta": 2, "alpha": 3}
        fl.einsum("ij,jk", a, b)
        assert eng.calls[-1][0] == "einsum" and eng.calls[-1][1][0] == "ij,jk"
        n = len(eng.calls)
        fl.ones(2, 3) @ b
        assert len(eng.calls) == n
    finally:
        _grad_mode.install_engine(saved)


@given(n=st.integers(1, 6), k=st.integers(0, 6), m=st.integers(1, 6), batch=st.integers(0, 3))
def test_matmul_property_matches_numpy(n, k, m, batch):
    rng = np.random.default_rng(n * 100 + k * 10 + m)
    shape_a = (batch, n, k) if batch else (n, k)
    a = rng.standard_normal(shape_a)
    b = rng.standard_normal((k, m))
    np.testing.assert_allclose((fl.from_numpy(a) @ fl.from_numpy(b)).numpy(), a @ b, rtol=1e-10, atol=1e-12)


# --- cross (composite) ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape_a, shape_b, dim", [((3,), (3,), None), ((4, 3), (4, 3), 1), ((3, 5), (3, 1), 0),
                                                   ((2, 3, 4), (3, 4), None)])
def test_cross_matches_torch(shape_a, shape_b, dim):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
    torch_dim = dim if dim is not None else list(np.broadcast_shapes(shape_a, shape_b)).index(3)
    expected = torch.linalg.cross(*torch.broadcast_tensors(torch.tensor(a), torch.tensor(b)), dim=torch_dim)
    np.testing.assert_allclose(fl.cross(fl.tensor(a), fl.tensor(b), dim=dim).numpy(), expected.numpy())


def test_cross_errors():
    with pytest.raises(RuntimeError, match="must have length 3"):
        fl.cross(fl.ones(4, 3), fl.ones(4, 3), dim=0)
    with pytest.raises(RuntimeError, match="no dimension of size 3"):
        fl.cross(fl.ones(2, 2), fl.ones(2, 2))


def test_einsum_result_owns_its_memory():
    # numpy's einsum returns a view for a pure permutation; torch's result never aliases its input
    a = fl.ones(2, 3)
    b = fl.einsum("ij->ji", a)
    b.fill_(5.0)
    assert a.sum().item() == 6.0
