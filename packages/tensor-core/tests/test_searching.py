"""``flambeau._ops.searching``: searchsorted and bucketize, cdist, meshgrid and atleast_Nd, against PyTorch.

The operator-table tests (``test_op_samples.py``, ``cuda/test_op_samples_sim.py``) run the declared
samples; here are the edge cases (NaN, repeated boundaries, sorter, promotion, empty inputs), torch's
errors, and the compute modes and gradients of cdist.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flambeau as fl  # noqa: E402


def T(x):
    return torch.from_numpy(np.ascontiguousarray(x.detach().numpy()))


def F(x):
    return fl.tensor(x.detach().numpy())


def _same(got, want):
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# --- searchsorted / bucketize ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "float16"])
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d_matches_torch(rng, dtype, right):
    b = np.sort(rng.integers(0, 20, 15)).astype(dtype)  # repeated boundaries
    v = rng.integers(-2, 23, (4, 5)).astype(dtype)
    got = fl.searchsorted(fl.tensor(b), fl.tensor(v), right=right)
    _same(got, torch.searchsorted(torch.from_numpy(b), torch.from_numpy(v), right=right))


def test_searchsorted_batched_side_out_int32(rng):
    b = np.sort(rng.standard_normal((2, 3, 6)), axis=-1)
    v = rng.standard_normal((2, 3, 4))
    for kw in ({}, {"side": "right"}, {"side": "left", "out_int32": True}, {"right": True, "side": "right"}):
        _same(fl.searchsorted(fl.tensor(b), fl.tensor(v), **kw),
              torch.searchsorted(torch.from_numpy(b), torch.from_numpy(v), **kw))


def test_searchsorted_nan_goes_last():
    b = [1.0, 2.0, float("nan")]
    v = [float("nan"), 2.0, 5.0]
    for right in (False, True):
        _same(fl.searchsorted(fl.tensor(b), fl.tensor(v), right=right),
              torch.searchsorted(torch.tensor(b), torch.tensor(v), right=right))


def test_searchsorted_sorter(rng):
    seq = rng.standard_normal((3, 7))
    sorter = np.argsort(seq, axis=-1)
    v = rng.standard_normal((3, 5))
    for right in (False, True):
        _same(fl.searchsorted(fl.tensor(seq), fl.tensor(v), sorter=fl.tensor(sorter), right=right),
              torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(v), sorter=torch.from_numpy(sorter),
                                 right=right))


def test_searchsorted_scalars_promotion_and_empty():
    s = fl.tensor([1, 3, 5, 7])
    ts = torch.tensor([1, 3, 5, 7])
    _same(fl.searchsorted(s, 4), torch.searchsorted(ts, 4))
    _same(fl.searchsorted(s, 4.5, side="right"), torch.searchsorted(ts, 4.5, side="right"))
    _same(fl.searchsorted(s, fl.tensor([3.5, 7.0])), torch.searchsorted(ts, torch.tensor([3.5, 7.0])))
    _same(fl.searchsorted(fl.tensor([1, 2, 3], dtype=fl.int8), fl.tensor([300])),
          torch.searchsorted(torch.tensor([1, 2, 3], dtype=torch.int8), torch.tensor([300])))
    _same(fl.searchsorted(fl.tensor([1.0, 2.0]), fl.tensor([])), torch.searchsorted(torch.tensor([1.0, 2.0]),
                                                                                    torch.tensor([])))
    _same(fl.searchsorted(fl.tensor([]), fl.tensor([2.0])), torch.searchsorted(torch.tensor([]), torch.tensor([2.0])))
    assert not fl.searchsorted(s.float().requires_grad_(), fl.tensor([2.0])).requires_grad


def test_bucketize_matches_torch(rng):
    bnd = np.array([-1.0, 0.0, 0.0, 2.5])
    x = rng.standard_normal((3, 4)) * 2
    for kw in ({}, {"right": True}, {"out_int32": True}):
        _same(fl.bucketize(fl.tensor(x), fl.tensor(bnd), **kw),
              torch.bucketize(torch.from_numpy(x), torch.from_numpy(bnd), **kw))
    _same(fl.bucketize(3, fl.tensor(bnd)), torch.bucketize(3, torch.from_numpy(bnd)))


@pytest.mark.parametrize("call, match", [
    (lambda: fl.searchsorted(fl.tensor([1.0]), fl.tensor([1.0]), side="middle"), "side can only be 'left' or 'right'"),
    (lambda: fl.searchsorted(fl.tensor([1.0]), fl.tensor([1.0]), side="left", right=True), "can't be set to opposites"),
    (lambda: fl.searchsorted(fl.tensor([[1.0, 3], [2, 4]]), fl.tensor([[1.0], [2], [3]])),
     r"first N-1 dimensions .* \[2, 2\] and input value tensor \[3, 1\]"),
    (lambda: fl.searchsorted(fl.tensor([[1.0, 3], [2, 4]]), 2.0), "can be a scalar only when boundaries tensor dim"),
    (lambda: fl.searchsorted(fl.tensor(1.0), fl.tensor([1.0])), "should have positive dimension"),
    (lambda: fl.searchsorted(fl.tensor([5.0, 1]), fl.tensor([2.0]), sorter=fl.tensor([1, 0], dtype=fl.int32)),
     "sorter must be a tensor of long dtype but got dtype Int"),
    (lambda: fl.searchsorted(fl.tensor([5.0, 1]), fl.tensor([2.0]), sorter=fl.tensor([1, 5])),
     "sorter index out of range"),
    (lambda: fl.searchsorted(fl.tensor([5.0, 1, 3]), fl.tensor([2.0]), sorter=fl.tensor([1, 0])),
     "boundary and sorter must have the same size"),
    (lambda: fl.bucketize(fl.tensor([1.0]), fl.tensor([[1.0, 2.0]])),
     r"boundaries tensor must be 1 dimension, but got dim\(2\)"),
])
def test_searchsorted_errors_are_torchs(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


def test_searchsorted_bool_not_implemented():
    with pytest.raises(NotImplementedError, match="'Bool'"):
        fl.searchsorted(fl.tensor([True, False]), fl.tensor([True]))


# --- cdist ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, 2.0, 3.0, float("inf")])
@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_values_and_gradients(rng, p, mode):
    a = rng.standard_normal((2, 30, 3))  # 30 rows: "if necessary" takes the matmul
    b = rng.standard_normal((5, 3))
    fa, fb = fl.tensor(a, requires_grad=True), fl.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    got, want = fl.cdist(fa, fb, p, compute_mode=mode), torch.cdist(ta, tb, p, compute_mode=mode)
    assert got.shape == tuple(want.shape) and got.dtype is fl.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-10)
    if p == 0:
        return  # a count: torch gives a zero gradient, flambeau's composite none
    g = np.arange(got.numel(), dtype=np.float64).reshape(got.shape) / got.numel()
    got.backward(fl.tensor(g))
    want.backward(torch.from_numpy(g))
    np.testing.assert_allclose(fa.grad.numpy(), ta.grad.numpy(), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(fb.grad.numpy(), tb.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_cdist_broadcasts_batches_float32(rng):
    a, b = rng.standard_normal((2, 1, 3, 4)).astype(np.float32), rng.standard_normal((3, 5, 4)).astype(np.float32)
    got, want = fl.cdist(fl.tensor(a), fl.tensor(b)), torch.cdist(torch.from_numpy(a), torch.from_numpy(b))
    assert got.shape == tuple(want.shape) == (2, 3, 3, 5) and got.dtype is fl.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((fl.zeros(3, 4, dtype=fl.int64), fl.zeros(5, 4, dtype=fl.int64)), {}, RuntimeError,
     "cdist only supports floating-point dtypes, X1 got: Long"),
    ((fl.zeros(3, 4), fl.zeros(5, 4, dtype=fl.float64)), {}, RuntimeError,
     "expected scalar type Float but found Double"),
    ((fl.zeros(3, 4), fl.zeros(5, 3)), {}, RuntimeError, "X1 and X2 must have the same number of columns. X1: 4 X2: 3"),
    ((fl.zeros(4), fl.zeros(4)), {}, RuntimeError, "cdist only supports at least 2D tensors, X1 got: 1D"),
    ((fl.zeros(3, 4), fl.zeros(5, 4), -1), {}, RuntimeError, "cdist only supports non-negative p values"),
    ((fl.zeros(3, 4), fl.zeros(5, 4)), {"compute_mode": "x"}, ValueError, "x is not a valid value for compute_mode"),
])
def test_cdist_errors_are_torchs(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        fl.cdist(*args, **kwargs)


# --- meshgrid, atleast_Nd -------------------------------------------------------------------------
@pytest.mark.parametrize("indexing", [None, "ij", "xy"])
@pytest.mark.parametrize("sizes", [(3,), (3, 2), (3, 2, 4), (1, 0)])
def test_meshgrid_matches_torch(indexing, sizes):
    xs = [np.arange(n) * (i + 1) for i, n in enumerate(sizes)]
    kw = {} if indexing is None else {"indexing": indexing}
    got = fl.meshgrid(*[fl.tensor(x) for x in xs], **kw)
    with warnings.catch_warnings():  # torch warns (once) that indexing will be required
        warnings.simplefilter("ignore")
        want = torch.meshgrid(*[torch.from_numpy(x) for x in xs], **kw)
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)
    assert fl.meshgrid([fl.tensor(x) for x in xs], **kw)[0].shape == tuple(want[0].shape)


def test_meshgrid_results_are_views_and_differentiable():
    a = fl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = fl.tensor([4.0, 5.0], requires_grad=True)
    ga, gb = fl.meshgrid(a, b, indexing="xy")
    assert ga._storage is a._storage and gb._storage is b._storage
    (ga * gb).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [9.0, 9.0, 9.0])
    np.testing.assert_allclose(b.grad.numpy(), [6.0, 6.0])


@pytest.mark.parametrize("call, match", [
    (lambda: fl.meshgrid(), "meshgrid expects a non-empty TensorList"),
    (lambda: fl.meshgrid(fl.arange(3), fl.arange(2.0)), "meshgrid expects all tensors to have the same dtype"),
    (lambda: fl.meshgrid(fl.zeros(2, 2)), "Expected 0D or 1D tensor"),
    (lambda: fl.meshgrid(fl.arange(3), indexing="foo"), 'indexing must be one of "xy" or "ij", but received: foo'),
])
def test_meshgrid_errors_are_torchs(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (2, 1, 3, 1)])
def test_atleast_matches_torch(name, shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    got, want = getattr(fl, name)(fl.tensor(x)), getattr(torch, name)(torch.from_numpy(x))
    _same(got, want)
    assert got.stride() == want.stride()
    pair = getattr(fl, name)(fl.tensor(x), fl.tensor(x))
    assert isinstance(pair, tuple) and [tuple(p.shape) for p in pair] == [tuple(want.shape)] * 2
    for seq in ([fl.tensor(x)], (fl.tensor(x),)):
        out = getattr(fl, name)(seq)
        assert isinstance(out, tuple) and tuple(out[0].shape) == tuple(want.shape)


def test_atleast_rejects_numbers():
    with pytest.raises(TypeError, match="atleast_1d"):
        fl.atleast_1d(1.0)
