"""Sparse COO tensors against torch: construction, coalesce, conversions, arithmetic, sparse @ dense
(values and gradients), torch.sparse.sum / softmax, and the errors of dense-only operators."""

import numpy as np
import pytest

import flambeau as fl
import flambeau.sparse  # noqa: F401  (binds Tensor.to_sparse)
from flambeau import _sparse

torch = pytest.importorskip("torch")

# bound at the top level by flambeau/__init__.py once the lead adds it; the module's own until then
sparse_coo_tensor = getattr(fl, "sparse_coo_tensor", _sparse.sparse_coo_tensor)

IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]  # (0, 2) twice: uncoalesced
VAL = [3.0, 4.0, 5.0, -1.0, 2.0]


def _pair(idx=IDX, val=VAL, size=(3, 4), dtype=np.float64, **kw):
    s_t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(np.asarray(val, dtype)), size, check_invariants=True,
                                  **kw)
    s_f = sparse_coo_tensor(idx, np.asarray(val, dtype), size, **kw)
    return s_f, s_t


def _same(a, b, rtol=1e-12):
    if b.is_sparse:
        assert a.is_sparse and a.layout is fl.sparse_coo
        assert tuple(a.shape) == tuple(b.shape) and a.is_coalesced() == b.is_coalesced()
        np.testing.assert_array_equal(a._indices().numpy(), b._indices().numpy())
        a, b = a._values(), b._values()
    assert tuple(a.shape) == tuple(b.shape)
    assert a.dtype.name == str(b.dtype).removeprefix("torch.")
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=rtol)


def test_construction_metadata():
    s, st = _pair()
    assert isinstance(s, fl.Tensor) and s.is_sparse and not fl.zeros(2).is_sparse
    assert s.layout is fl.sparse_coo and fl.zeros(2).layout is fl.strided
    assert tuple(s.shape) == (3, 4) and s.ndim == 2 and s.dim() == 2 and s.numel() == 12 and s.size(1) == 4
    assert (s.sparse_dim(), s.dense_dim(), s._nnz()) == (st.sparse_dim(), st.dense_dim(), st._nnz())
    assert s.is_coalesced() is False and s.dtype is fl.float64
    _same(s.to_dense(), st.to_dense())


def test_size_inferred_and_hybrid():
    idx, val = [[0, 2], [1, 0]], np.arange(6.0).reshape(2, 3)
    s = sparse_coo_tensor(idx, val)
    st = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), check_invariants=True)
    assert tuple(s.shape) == tuple(st.shape) == (3, 2, 3)
    assert (s.sparse_dim(), s.dense_dim()) == (2, 1)
    _same(s.to_dense(), st.to_dense())


def test_dtype_device_and_int_values():
    s = sparse_coo_tensor(IDX, [1, 2, 3, 4, 5], (3, 4))
    assert s.dtype is fl.int64
    s32 = sparse_coo_tensor(IDX, VAL, (3, 4), dtype=fl.float32, device="cpu")
    assert s32.dtype is fl.float32 and s32.device.type == "cpu"
    assert s32.double().dtype is fl.float64


def test_coalesce_indices_values():
    s, st = _pair()
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor"):
        s.indices()
    with pytest.raises(RuntimeError, match="Cannot get values on an uncoalesced tensor"):
        s.values()
    c, ct = s.coalesce(), st.coalesce()
    _same(c, ct)
    assert c.coalesce() is c
    np.testing.assert_array_equal(c.indices().numpy(), ct.indices().numpy())
    np.testing.assert_array_equal(c.values().numpy(), ct.values().numpy())


def test_to_sparse():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    _same(fl.tensor(x).to_sparse(), torch.tensor(x).to_sparse())
    _same(fl.tensor(x).to_sparse(1), torch.tensor(x).to_sparse(1))
    x3 = np.zeros((2, 3, 2))
    x3[1, 2] = [1.0, 0.0]
    _same(fl.tensor(x3).to_sparse(2), torch.tensor(x3).to_sparse(2))


def test_transpose_scale_neg_add():
    s, st = _pair()
    _same(s.t(), st.t())
    _same(s.coalesce().t(), st.coalesce().t())
    _same(s * 2.5, st * 2.5)
    _same(2.5 * s.coalesce(), 2.5 * st.coalesce())
    _same(s / 2, st / 2)
    _same(-s, -st)
    o, ot = _pair([[2, 0], [3, 2]], [7.0, 1.0])
    _same((s + o).coalesce(), (st + ot).coalesce())
    _same(s.coalesce() + o.coalesce(), st.coalesce() + ot.coalesce())
    _same((s - o).to_dense(), (st - ot).to_dense())
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        s + fl.ones(3, 4)


def test_add_shape_mismatch():
    s, _ = _pair()
    o, _ = _pair([[0], [0]], [1.0], size=(3, 5))
    with pytest.raises(RuntimeError, match="sizes"):
        s + o


@pytest.mark.parametrize("coalesce", [False, True])
def test_sparse_mm_matches_torch_values(coalesce):
    s, st = _pair()
    if coalesce:
        s, st = s.coalesce(), st.coalesce()
    d = np.random.default_rng(0).standard_normal((4, 5))
    ref = torch.sparse.mm(st, torch.tensor(d))
    for out in (fl.sparse.mm(s, fl.tensor(d)), fl.sparse.spmm(s, fl.tensor(d)), s @ fl.tensor(d), s.mm(fl.tensor(d)),
                s.matmul(fl.tensor(d))):
        _same(out, ref)
    _same(s @ fl.tensor(d[:, 0]), st @ torch.tensor(d[:, 0]))


def test_sparse_mm_gradients_dense_and_values():
    s, st = _pair(requires_grad=True)
    s, st = s.coalesce(), st.coalesce()
    d = np.random.default_rng(1).standard_normal((4, 3))
    dt_, df = torch.tensor(d, requires_grad=True), fl.tensor(d, requires_grad=True)
    go = np.random.default_rng(2).standard_normal((3, 3))
    torch.sparse.mm(st, dt_).backward(torch.tensor(go))
    fl.sparse.mm(s, df).backward(fl.tensor(go))
    _same(df.grad, dt_.grad)
    assert s.requires_grad and not s.is_leaf  # coalesce of a leaf: differentiable, like torch's


def test_leaf_sparse_grad_is_sparse():
    idx = [[0, 1, 2], [1, 0, 3]]
    s, st = _pair(idx, [1.0, 2.0, 3.0], requires_grad=True)
    d = np.random.default_rng(3).standard_normal((4, 2))
    torch.sparse.mm(st, torch.tensor(d)).sum().backward()
    fl.sparse.mm(s, fl.tensor(d)).sum().backward()
    assert s.grad is not None and s.grad.is_sparse and s.is_leaf
    _same(s.grad.coalesce(), st.grad.coalesce())


def test_values_gradient_through_to_dense_and_sum():
    v = np.array([1.0, -2.0, 0.5, 4.0, 3.0])
    vt, vf = torch.tensor(v, requires_grad=True), fl.tensor(v, requires_grad=True)
    st = torch.sparse_coo_tensor(torch.tensor(IDX), vt, (3, 4))
    sf = sparse_coo_tensor(IDX, vf, (3, 4))
    w = np.arange(12.0).reshape(3, 4)
    ((st.to_dense() * torch.tensor(w)).sum() + torch.sparse.sum(st) * 2).backward()
    ((sf.to_dense() * fl.tensor(w)).sum() + fl.sparse.sum(sf) * 2).backward()
    _same(vf.grad, vt.grad)


def test_sparse_sum_dims():
    s, st = _pair()
    _same(fl.sparse.sum(s), torch.sparse.sum(st))
    _same(fl.sparse.sum(s, 0), torch.sparse.sum(st, 0))
    _same(fl.sparse.sum(s, 1), torch.sparse.sum(st, 1))
    _same(fl.sparse.sum(s, (0, 1)), torch.sparse.sum(st, (0, 1)))
    h = sparse_coo_tensor([[0, 2]], np.arange(6.0).reshape(2, 3))
    ht = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor(np.arange(6.0).reshape(2, 3)))
    _same(fl.sparse.sum(h, 1), torch.sparse.sum(ht, 1))
    _same(fl.sparse.sum(h, 0), torch.sparse.sum(ht, 0))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sparse_softmax(dim):
    s, st = _pair()
    _same(fl.sparse.softmax(s, dim), torch.sparse.softmax(st, dim))


def test_construction_errors_match_torch():
    cases = [
        (lambda m: m([[0, 1, 1], [2, 0, 2]], [3.0, 4.0], (2, 3))),
        (lambda m: m([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3, 4))),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as et:
            case(lambda i, v, size: torch.sparse_coo_tensor(torch.tensor(i), torch.tensor(v), size))
        with pytest.raises(RuntimeError) as ef:
            case(sparse_coo_tensor)
        assert str(ef.value) == str(et.value)


def test_out_of_range_indices_are_refused():
    # torch only checks with check_invariants=True; flambeau always does (its kernels index memory with them)
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size is 1 but found index 1"):
        sparse_coo_tensor([[0, 1], [0, 0]], [1.0, 2.0], (1, 3))
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 1"):
        sparse_coo_tensor([[0, 1], [0, -1]], [1.0, 2.0], (2, 3))
    with pytest.raises(RuntimeError, match="indices must be sparse_dim x nnz"):
        sparse_coo_tensor([0, 1], [1.0, 2.0], (2,))


def test_mm_errors():
    s, _ = _pair()
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x2\)"):
        fl.sparse.mm(s, fl.ones(3, 2, dtype=fl.float64))
    with pytest.raises(RuntimeError, match="same dtype"):
        fl.sparse.mm(s, fl.ones(4, 2))
    with pytest.raises(TypeError, match="sparse COO"):
        fl.sparse.mm(fl.ones(3, 4), fl.ones(4, 2))


@pytest.mark.parametrize("op", [lambda s: fl.exp(s), lambda s: s.view(-1), lambda s: s.numpy(), lambda s: s.stride(),
                                lambda s: fl.ones(3, 4) + s, lambda s: s.sum(0) + s.reshape(12)])
def test_dense_only_operators_refuse_sparse(op):
    s, _ = _pair()
    with pytest.raises(NotImplementedError, match=r"sparse COO tensors \(layout=flambeau.sparse_coo\).*to_dense"):
        op(s)


def test_detach_clone_zero_and_repr():
    s, _ = _pair(requires_grad=True)
    d = s.detach()
    assert not d.requires_grad and d._values() is not s._values()
    c = s.clone()
    np.testing.assert_array_equal(c.to_dense().detach().numpy(), s.to_dense().detach().numpy())
    z = s.detach().clone().zero_()
    assert z._nnz() == 0 and z.is_coalesced() and float(z.to_dense().abs().sum()) == 0.0
    assert "layout=flambeau.sparse_coo" in repr(s) and "nnz=5" in str(s)


def test_sparse_add_into_dense():
    s, st = _pair()
    p = fl.zeros(3, 4, dtype=fl.float64)
    _sparse.sparse_add_(p, s, alpha=-0.5)
    np.testing.assert_allclose(p.numpy(), (st.to_dense() * -0.5).numpy())


def test_cpu_kernel_matches_composite():
    rng = np.random.default_rng(5)
    idx = np.stack([rng.integers(0, 50, 400), rng.integers(0, 30, 400)])
    s = sparse_coo_tensor(idx, rng.standard_normal(400), (50, 30))
    d = fl.tensor(rng.standard_normal((30, 7)), requires_grad=True)
    fast = fl.sparse.mm(s, d.detach())                  # numba CSR kernel
    slow = fl.sparse.mm(s, d)                           # composite (autograd path)
    np.testing.assert_allclose(fast.numpy(), slow.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fast.numpy(), s.to_dense().numpy() @ d.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_deepcopy_and_pickle_keep_the_sparse_tensor():
    import copy
    import pickle

    s, st = _pair()
    for other in (copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert isinstance(other, _sparse.SparseTensor) and other._values() is not s._values()
        _same(other, st)
