"""NN primitives (``flambeau/_ops/nn_ops.py``): softmax, log_softmax, embedding, dropout."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau import _grad_mode
from flambeau._kernels.cpu import nn_ops

torch = pytest.importorskip("torch")
F = torch.nn.functional


def check(out, ref, rtol=1e-5, atol=1e-6):
    assert isinstance(out, fl.Tensor)
    assert tuple(out.shape) == tuple(ref.shape), (out.shape, ref.shape)
    assert str(out.dtype).split(".")[1] == str(ref.dtype).split(".")[1], (out.dtype, ref.dtype)
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


# --- softmax / log_softmax -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 7), -1), ((3, 7), 0), ((2, 3, 4), 1), ((2, 3, 4), -1),
                                       ((), 0), ((0, 4), 1), ((4, 0), 1),
                                       ((64, 1024), -1), ((64, 1024), 0), ((8, 16, 512), -1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_matches_torch(rng, name, shape, dim, dtype):
    a = np.asarray((np.asarray(rng.standard_normal(shape)) * 5).astype(dtype))
    ours = getattr(fl, name)(fl.from_numpy(a), dim)
    check(ours, getattr(torch, name)(torch.from_numpy(a), dim), rtol=1e-5 if dtype == np.float32 else 1e-10)
    check(getattr(fl.from_numpy(a), name)(dim), getattr(torch.from_numpy(a), name)(dim),
          rtol=1e-5 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("cols", [7, 4096])  # numpy path and fused numba path
def test_softmax_extreme_values(name, cols):
    x = np.random.default_rng(1).standard_normal((9, cols)).astype(np.float32)
    x[0] += 1e4                     # large values: no overflow
    x[1, : cols // 2] = -np.inf     # masked positions give exactly 0 (or -inf)
    x[2] = -np.inf                  # fully masked row: NaN, as torch
    x[3, 3] = np.nan                # NaN propagates to its row
    x[4, 1] = np.inf                # +inf: NaN row, as torch
    x[5] *= 100                     # very peaked
    x[6, 0] = x[7, cols // 2 + 1] = x[8, -1] = np.nan  # NaN first, in the middle, last (the maxima's lanes and tail)
    ours = getattr(fl, name)(fl.from_numpy(x), -1)
    ref = getattr(torch, name)(torch.from_numpy(x), -1)
    check(ours, ref, rtol=1e-5, atol=1e-6)
    if name == "softmax":
        assert (ours.numpy()[1, : cols // 2] == 0).all()
        np.testing.assert_allclose(ours.numpy()[[0, 1, 5]].sum(-1), 1.0, rtol=1e-5)


def test_softmax_non_contiguous_and_half(rng):
    base = rng.standard_normal((300, 200)).astype(np.float32)
    t = fl.from_numpy(base.T)  # last dim strided: numpy path
    check(fl.softmax(t, -1), torch.softmax(torch.from_numpy(base.T.copy()), -1))
    check(fl.log_softmax(t, 0), torch.log_softmax(torch.from_numpy(base.T.copy()), 0))
    h = base[:4, :6].astype(np.float16)
    check(fl.softmax(fl.from_numpy(h), 1), torch.softmax(torch.from_numpy(h), 1), rtol=1e-3, atol=1e-3)


def test_softmax_dtype_argument_and_errors():
    i = fl.arange(3)
    check(fl.softmax(i, 0, dtype=fl.float64), torch.softmax(torch.arange(3), 0, dtype=torch.float64))
    check(fl.log_softmax(fl.ones(2, 3), 1, dtype=fl.float64), torch.log_softmax(torch.ones(2, 3), 1,
                                                                                  dtype=torch.float64))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        fl.softmax(i, 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        fl.softmax(fl.ones(2, 3), 2)
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        fl.softmax([1.0, 2.0], 0)


def test_fused_kernel_is_used_for_large_last_dim(monkeypatch):
    calls = []
    real = nn_ops._numba_softmax

    def spy():
        calls.append(1)
        return real()

    monkeypatch.setattr(nn_ops, "_numba_softmax", spy)
    fl.softmax(fl.ones(64, 1024), -1)
    assert calls
    calls.clear()
    fl.softmax(fl.ones(4, 8), -1)
    fl.softmax(fl.ones(64, 1024), 0)
    assert not calls


# --- embedding -------------------------------------------------------------------------------------
def test_embedding_matches_torch(rng):
    w = rng.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([[1, 2, 4], [9, 0, 1]])
    check(fl.embedding(fl.from_numpy(idx), fl.from_numpy(w)), F.embedding(torch.from_numpy(idx), torch.from_numpy(w)))
    i32 = idx.astype(np.int32)
    check(fl.embedding(fl.from_numpy(i32), fl.from_numpy(w)), F.embedding(torch.from_numpy(i32), torch.from_numpy(w)))
    check(fl.embedding(fl.tensor(3), fl.from_numpy(w)), F.embedding(torch.tensor(3), torch.from_numpy(w)))
    check(fl.embedding(fl.tensor([1, 2]), fl.from_numpy(w), padding_idx=-1),
          F.embedding(torch.tensor([1, 2]), torch.from_numpy(w), padding_idx=-1))


def test_embedding_max_norm_renormalises_weight_in_place(rng):
    w = (rng.standard_normal((6, 3)) * 3).astype(np.float32)
    ours, ref = fl.from_numpy(w.copy()), torch.from_numpy(w.copy())
    v0 = ours._version
    out = fl.embedding(fl.tensor([1, 1, 3]), ours, max_norm=1.0)
    tout = F.embedding(torch.tensor([1, 1, 3]), ref, max_norm=1.0)
    check(out, tout)
    check(ours, ref)  # rows 1 and 3 rescaled in the weight itself, the others untouched
    assert ours._version > v0


def test_embedding_errors():
    w = fl.ones(5, 3)
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices' to have one of the following "
                                           "scalar types: Long, Int"):
        fl.embedding(fl.tensor([1.0]), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        fl.embedding(fl.tensor([5]), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        fl.embedding(fl.tensor([-1]), w)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        fl.embedding(fl.tensor([1]), w, padding_idx=5)


# --- dropout ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_statistics(p):
    x = fl.ones(200, 500)
    y = fl.dropout(x, p)
    a = y.numpy()
    zeros = (a == 0).mean()
    assert abs(zeros - p) < 0.01
    np.testing.assert_allclose(a[a != 0], 1.0 / (1.0 - p), rtol=1e-6)
    assert abs(a.mean() - 1.0) < 0.03  # the expectation is preserved
    assert x.numpy().min() == 1.0  # input untouched


def test_dropout_edge_cases():
    x = fl.ones(10, 10)
    assert fl.dropout(x, 0.5, training=False) is x
    assert fl.dropout(x, 0.0) is x
    y = fl.dropout(x, 1.0)
    assert y.shape == x.shape and (y.numpy() == 0).all()
    e = fl.dropout(fl.ones(0, 3), 0.5)
    assert e.shape == (0, 3)
    d = fl.dropout(fl.ones(1000, dtype=fl.float64), 0.3)
    assert d.dtype is fl.float64
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        fl.dropout(x, 1.5)
    with pytest.raises(ValueError, match="but got -0.1"):
        fl.dropout(x, -0.1)


def test_dropout_inplace_and_seeded():
    x = fl.ones(50, 40)
    v0 = x._version
    y = fl.dropout(x, 0.5, inplace=True)
    assert y is x and x._version == v0 + 1
    vals = set(np.unique(x.numpy()).tolist())
    assert vals == {0.0, 2.0}
    fl.manual_seed(123)  # the mask comes from flambeau's default generator
    a = fl.dropout(fl.ones(100), 0.5).numpy()
    fl.manual_seed(123)
    b = fl.dropout(fl.ones(100), 0.5).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, fl.dropout(fl.ones(100), 0.5).numpy())


def test_dropout_records_its_mask():
    saved = _grad_mode._engine[0]
    calls = []

    class Recorder:
        def record(self, op, inputs, attrs, outputs):
            calls.append((op.name, inputs, attrs, outputs))

    _grad_mode.install_engine(Recorder())
    try:
        x = fl.ones(20, 30).requires_grad_()
        y = fl.dropout(x, 0.25)
        name, inputs, attrs, out = calls[-1]
        assert name == "dropout" and inputs == (x, 0.25, True, False) and out is y
        np.testing.assert_array_equal(attrs["mask"].numpy(), y.detach().numpy())  # x is ones: y is the mask
        s = fl.softmax(x, 1)
        assert calls[-1][:2] == ("softmax", (x, 1, None)) and calls[-1][3] is s
    finally:
        _grad_mode.install_engine(saved)
