"""nn.Embedding / EmbeddingBag with sparse=True: sparse weight gradients equal torch's (coalesced), and
training steps with SparseAdam (and a sparse SGD update) match torch's."""

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn.functional as F
from flambeau import nn
from flambeau._sparse import sparse_add_

torch = pytest.importorskip("torch")

IDX = np.array([[1, 3, 1, 0], [4, 1, 9, 3]])


def _weights(n=10, d=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


def _embedding_pair(seed, **kw):
    """An nn.Embedding and a torch.nn.Embedding with the same float64 weights."""
    w = _weights(seed=seed)
    ef = nn.Embedding(10, 3, sparse=True, dtype=fl.float64, **kw)
    et = torch.nn.Embedding(10, 3, sparse=True, dtype=torch.float64, **kw)
    with fl.no_grad():
        ef.weight.copy_(fl.tensor(w))
    with torch.no_grad():
        et.weight.copy_(torch.tensor(w))
    return ef, et


def _same_sparse(a, b):
    assert a.is_sparse and b.is_sparse
    a, b = a.coalesce(), b.coalesce()
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.indices().numpy(), b.indices().numpy())
    np.testing.assert_allclose(a.values().numpy(), b.values().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kw", [{}, {"padding_idx": 1}, {"padding_idx": -1},
                                {"max_norm": 1.0}])
def test_embedding_sparse_grad_matches_torch(kw):
    ef, et = _embedding_pair(0, **kw)
    go = np.random.default_rng(1).standard_normal((2, 4, 3))
    ef(fl.tensor(IDX)).backward(fl.tensor(go))
    et(torch.tensor(IDX)).backward(torch.tensor(go))
    assert ef.weight.grad.is_sparse and ef.weight.grad.layout is fl.sparse_coo
    assert ef.weight.grad._nnz() == et.weight.grad._nnz()  # one entry per looked-up index, as torch
    _same_sparse(ef.weight.grad, et.weight.grad)
    np.testing.assert_allclose(ef.weight.detach().numpy(), et.weight.detach().numpy(), rtol=1e-12)


def test_scale_grad_by_freq_refused_as_torch():
    for lib, fn in ((fl, F.embedding), (torch, torch.nn.functional.embedding)):
        w = lib.tensor(_weights(), requires_grad=True)
        out = fn(lib.tensor(IDX), w, scale_grad_by_freq=True, sparse=True).sum()
        with pytest.raises(RuntimeError, match="embedding_backward: scale_grad_by_freq not supported with sparse"):
            out.backward()


def test_functional_embedding_sparse_and_accumulation():
    w = _weights()
    wf, wt = fl.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    for idx in (IDX, IDX[:, ::-1].copy()):
        F.embedding(fl.tensor(idx), wf, sparse=True).sum().backward()
        torch.nn.functional.embedding(torch.tensor(idx), wt, sparse=True).sum().backward()
    _same_sparse(wf.grad, wt.grad)


def test_embedding_sparse_without_grad_is_dense_lookup():
    e = nn.Embedding(10, 3, sparse=True)
    with fl.no_grad():
        out = e(fl.tensor(IDX))
    np.testing.assert_array_equal(out.numpy(), e.weight.detach().numpy()[IDX])


def test_embedding_bag_sparse_max_refused_as_torch():
    for lib, fn in ((fl, F.embedding_bag), (torch, torch.nn.functional.embedding_bag)):
        with pytest.raises(ValueError, match="max mode does not support sparse weights"):
            fn(lib.tensor([[0, 1]]), lib.zeros(3, 2), mode="max", sparse=True)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_sparse_grad_matches_torch(mode):
    w = _weights()
    inp, offsets = np.array([1, 3, 1, 0, 4, 9, 3]), np.array([0, 3, 3])
    bf = nn.EmbeddingBag(10, 3, mode=mode, sparse=True)
    bt = torch.nn.EmbeddingBag(10, 3, mode=mode, sparse=True)
    with fl.no_grad():
        bf.weight.copy_(fl.tensor(w))
    with torch.no_grad():
        bt.weight.copy_(torch.tensor(w))
    go = np.random.default_rng(2).standard_normal((3, 3))
    of = bf(fl.tensor(inp), fl.tensor(offsets))
    ot = bt(torch.tensor(inp), torch.tensor(offsets))
    np.testing.assert_allclose(of.detach().numpy(), ot.detach().numpy(), rtol=1e-6)
    of.backward(fl.tensor(go, dtype=fl.float32))
    ot.backward(torch.tensor(go, dtype=torch.float32))
    assert bf.weight.grad.is_sparse and bf.weight.grad.dtype is fl.float32
    np.testing.assert_allclose(bf.weight.grad.to_dense().numpy(), bt.weight.grad.to_dense().numpy(), rtol=1e-6,
                               atol=1e-7)


def test_embedding_bag_sparse_per_sample_weights_and_padding():
    w = _weights()
    inp = np.array([[1, 3, 2], [2, 4, 4]])
    psw = np.random.default_rng(4).standard_normal((2, 3))
    grads = []
    for lib, fn in ((fl, F.embedding_bag), (torch, torch.nn.functional.embedding_bag)):
        wt = lib.tensor(w, requires_grad=True)
        fn(lib.tensor(inp), wt, mode="sum", sparse=True, per_sample_weights=lib.tensor(psw), padding_idx=2).sum() \
            .backward()
        grads.append(wt.grad.to_dense().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12)


def test_sparse_adam_steps_match_torch():
    ef, et = _embedding_pair(5)
    from flambeau.optim.sparse_adam import SparseAdam

    of, ot = SparseAdam(ef.parameters(), lr=0.05), torch.optim.SparseAdam(et.parameters(), lr=0.05)
    rng = np.random.default_rng(6)
    for _ in range(4):
        idx = rng.integers(0, 10, (3, 5))
        tgt = rng.standard_normal((3, 5, 3))
        for e, o, lib in ((ef, of, fl), (et, ot, torch)):
            o.zero_grad()
            ((e(lib.tensor(idx)) - lib.tensor(tgt)) ** 2).mean().backward()
            o.step()
    np.testing.assert_allclose(ef.weight.detach().numpy(), et.weight.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_sparse_adam_refuses_dense_gradients():
    from flambeau.optim.sparse_adam import SparseAdam

    p = fl.zeros(3, requires_grad=True)
    opt = SparseAdam([p])
    p.sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        opt.step()


def test_sgd_style_update_with_sparse_grad_matches_torch_sgd():
    """What optim.SGD does with a sparse gradient (p -= lr * grad), through flambeau._sparse.sparse_add_."""
    ef, et = _embedding_pair(7)
    ot = torch.optim.SGD(et.parameters(), lr=0.3)
    rng = np.random.default_rng(8)
    for _ in range(3):
        idx = rng.integers(0, 10, (4,))
        ef.weight.grad = None
        ot.zero_grad()
        (ef(fl.tensor(idx)) ** 2).sum().backward()
        (et(torch.tensor(idx)) ** 2).sum().backward()
        with fl.no_grad():
            sparse_add_(ef.weight, ef.weight.grad, alpha=-0.3)
        ot.step()
    np.testing.assert_allclose(ef.weight.detach().numpy(), et.weight.detach().numpy(), rtol=1e-12)
