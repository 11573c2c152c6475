"""Reductions (``flambeau/_ops/reduction.py``) against torch and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import flambeau as fl
from flambeau import _grad_mode

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")  # torch's own

SHAPES = [(), (5,), (3, 4), (2, 3, 4)]
LAYOUTS = ["contiguous", "transposed", "strided"]


def make(rng, shape, dtype=np.float32, layout="contiguous"):
    """(numpy array, flambeau tensor sharing it, torch tensor) with the requested memory layout."""
    if layout == "transposed" and len(shape) >= 2:
        base = rng.standard_normal(shape[::-1]).astype(dtype) if dtype != np.bool_ else rng.random(shape[::-1]) > 0.5
        a = base.T
    elif layout == "strided" and len(shape) >= 1:
        big = shape[:-1] + (shape[-1] * 2,)
        base = rng.standard_normal(big).astype(dtype) if dtype != np.bool_ else rng.random(big) > 0.5
        a = base[..., ::2]
    else:
        a = rng.standard_normal(shape).astype(dtype) if dtype != np.bool_ else rng.random(shape) > 0.5
        a = np.asarray(a)
    if np.dtype(dtype).kind in "iu":
        a = (np.asarray(a) * 3).astype(dtype) if layout == "contiguous" else a
    t = fl.from_numpy(a)
    if layout != "contiguous" and a.ndim >= 1 and a.size > 1 and layout == "transposed" and a.ndim >= 2:
        assert not t.is_contiguous()
    return a, t, torch.from_numpy(np.ascontiguousarray(a))


def dims_for(shape):
    n = len(shape)
    out = [None]
    if n >= 1:
        out += [0, -1]
    if n >= 2:
        out += [(0, -1), [1, 0]]
    return out


def check(out, ref, rtol=1e-5, atol=1e-5, dtype=True):
    assert isinstance(out, fl.Tensor)
    ref = ref.detach()
    assert tuple(out.shape) == tuple(ref.shape), (out.shape, ref.shape)
    if dtype:
        assert str(out.dtype).split(".")[1] == str(ref.dtype).split(".")[1], (out.dtype, ref.dtype)
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


# --- simple reductions over shapes, dims, keepdim and layouts ------------------------------------------
SIMPLE = {
    "sum": lambda x, d, k: x.sum() if d is None else x.sum(d, keepdim=k),
    "nansum": lambda x, d, k: x.nansum() if d is None else x.nansum(d, keepdim=k),
    "mean": lambda x, d, k: x.mean() if d is None else x.mean(d, keepdim=k),
    "nanmean": lambda x, d, k: x.nanmean() if d is None else x.nanmean(d, keepdim=k),
    "amax": lambda x, d, k: x.amax() if d is None else x.amax(d, keepdim=k),
    "amin": lambda x, d, k: x.amin() if d is None else x.amin(d, keepdim=k),
    "var": lambda x, d, k: x.var() if d is None else x.var(d, keepdim=k),
    "std": lambda x, d, k: x.std(d, keepdim=k),
    "logsumexp": lambda x, d, k: x.logsumexp(tuple(range(x.dim())) if d is None else d, keepdim=k),
    "norm": lambda x, d, k: x.norm(dim=d, keepdim=k),
    "all": lambda x, d, k: x.all() if d is None else x.all(d, keepdim=k),
    "any": lambda x, d, k: x.any() if d is None else x.any(d, keepdim=k),
    "count_nonzero": lambda x, d, k: x.count_nonzero(d),
}


@pytest.mark.parametrize("name", sorted(SIMPLE))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_simple_reductions_match_torch(rng, name, shape, layout):
    a, t, r = make(rng, shape, np.float32, layout)
    f = SIMPLE[name]
    for d in dims_for(shape):
        for k in (False, True):
            if len(shape) == 0 and (name == "logsumexp" or (k and name in ("norm", "std", "var"))):
                continue  # torch gives var(0-dim, keepdim=True) shape (1,): a quirk we don't copy
            check(f(t, d, k), f(r, d, k), rtol=1e-4)


@pytest.mark.parametrize("name", ["sum", "amax", "amin", "all", "any", "count_nonzero", "nansum"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_, np.float64, np.float16])
def test_reductions_over_dtypes(rng, name, dtype):
    a = (rng.standard_normal((3, 5)) * 4).astype(dtype)
    t, r = fl.from_numpy(a), torch.from_numpy(a)
    f = SIMPLE[name]
    for d in (None, 1, (0, 1)):
        check(f(t, d, False), f(r, d, False), rtol=1e-2 if dtype == np.float16 else 1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.bool_, np.uint8])
def test_integer_sum_and_prod_give_int64(dtype):
    a = np.arange(1, 7).reshape(2, 3).astype(dtype)
    t = fl.from_numpy(a)
    assert t.sum().dtype is fl.int64
    assert t.prod().dtype is fl.int64
    assert t.sum(0).tolist() == torch.from_numpy(a).sum(0).tolist()
    assert t.prod(1).tolist() == torch.from_numpy(a).prod(1).tolist()
    assert t.cumsum(0).dtype is fl.int64
    assert t.sum(dtype=fl.int32).dtype is fl.int32
    assert t.sum(dtype=fl.float64).dtype is fl.float64


def test_sum_dtype_argument_and_half_accumulation():
    a = np.full(10000, 0.1, np.float16)
    t = fl.from_numpy(a)
    assert t.sum().dtype is fl.float16
    assert abs(t.sum().item() - 1000) < 1  # float16 accumulation alone would stall near 256
    assert t.sum(dtype=fl.float64).dtype is fl.float64
    assert t.mean(dtype=fl.float64).dtype is fl.float64


def test_prod_matches_torch(rng):
    a, t, r = make(rng, (3, 4), np.float32, "transposed")
    check(t.prod(), r.prod())
    for d in (0, 1, -1):
        check(t.prod(d), r.prod(d))
        check(t.prod(d, keepdim=True), r.prod(d, keepdim=True))
    with pytest.raises(TypeError, match="prod\\(\\): argument 'dim' must be int"):
        t.prod((0, 1))


def test_mean_and_var_refuse_integers():
    i = fl.arange(6)
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype. .* Got: Long"):
        i.mean()
    assert i.mean(dtype=fl.float64).item() == 2.5
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        i.var()
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        fl.std(i)
    with pytest.raises(RuntimeError, match="nanmean\\(\\): expected input to have floating point"):
        i.nanmean()
    with pytest.raises(RuntimeError, match="linalg.vector_norm: Expected a floating point"):
        i.norm()


def test_empty_tuple_dim_reduces_everything(rng):
    a, t, r = make(rng, (3, 4))
    check(t.sum(()), r.sum(()))
    check(t.sum([]), r.sum([]))
    check(t.amax(()), r.amax(()))


def test_bad_dims():
    t = fl.ones(2, 3)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)"):
        t.sum(5)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        t.sum((0, 0))
    with pytest.raises(RuntimeError, match="appears multiple times"):
        t.mean((1, -1))
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.max(2)
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.argmax(-3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.cumsum(2)
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        fl.sum([1, 2])


def test_zero_dim_inputs():
    s = fl.tensor(5.0)
    assert s.sum().item() == 5.0 and s.sum().shape == ()
    assert s.sum(0).item() == 5.0 and s.sum(-1, keepdim=True).shape == ()
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1"):
        s.sum(1)
    assert s.max(0).values.item() == 5.0 and s.max(0).indices.item() == 0
    assert s.argmax(0, keepdim=True).shape == ()
    assert s.cumsum(0).item() == 5.0
    assert s.median().item() == 5.0
    assert s.var(correction=0).item() == 0.0


# --- empty inputs --------------------------------------------------------------------------------
def test_empty_reductions_follow_torch():
    e, te = fl.empty(0, 3), torch.empty(0, 3)
    check(e.sum(), te.sum())
    check(e.sum(0), te.sum(0))
    check(e.prod(), te.prod())
    check(e.mean(0), te.mean(0))
    check(e.amax(1), te.amax(1))
    check(e.logsumexp(0), te.logsumexp(0))
    check(e.max(1).values, te.max(1).values)
    assert e.count_nonzero().item() == 0
    assert e.all().item() is True and e.any().item() is False
    assert math.isnan(e.median().item())
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified for input.numel\(\) == 0"):
        e.max()
    with pytest.raises(RuntimeError, match=r"min\(\): Expected reduction dim to be specified"):
        fl.min(e)
    with pytest.raises(IndexError, match=r"max\(\): Expected reduction dim 0 to have non-zero size."):
        e.max(0)
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0 to have non-zero size."):
        e.amax(0)
    with pytest.raises(RuntimeError, match=r"amax\(\): Expected reduction dim to be specified"):
        e.amax()
    with pytest.raises(IndexError, match=r"argmax\(\): Expected reduction dim to be specified"):
        e.argmax()
    with pytest.raises(IndexError, match=r"argmin\(\): Expected reduction dim 0 to have non-zero size"):
        e.argmin(0)
    with pytest.raises(RuntimeError, match=r"aminmax\(\): cannot compute aminmax over an empty dimension"):
        fl.aminmax(e)


# --- max / min / argmax / argmin / aminmax -----------------------------------------------------------
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_max_min(rng, name, layout):
    a, t, r = make(rng, (3, 4, 5), np.float32, layout)
    check(getattr(t, name)(), getattr(r, name)())
    for d in (0, 1, -1):
        for k in (False, True):
            res, ref = getattr(fl, name)(t, d, k), getattr(torch, name)(r, d, k)
            assert type(res).__name__ == name and res._fields == ("values", "indices")
            check(res.values, ref.values)
            check(res.indices, ref.indices)
            v, i = getattr(t, name)(dim=d, keepdim=k)  # unpacks like torch
            assert i.dtype is fl.int64


def test_max_min_propagate_nan_and_take_other():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
    t, r = fl.from_numpy(x), torch.from_numpy(x)
    check(t.max(), r.max())
    check(t.max(1).values, r.max(1).values)
    check(t.max(1).indices, r.max(1).indices)
    check(t.min(1).indices, r.min(1).indices)
    check(t.argmax(1), r.argmax(1))
    check(t.amax(1), r.amax(1))
    o = fl.from_numpy(np.array([2.0, 2.0, 2.0], np.float32))
    check(fl.max(t, o), torch.max(r, torch.from_numpy(o.numpy())))
    check(fl.min(t, o), torch.min(r, torch.from_numpy(o.numpy())))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_argmax_argmin(rng, name, layout, dtype):
    a, t, r = make(rng, (4, 6), dtype, layout)
    if dtype == np.bool_:
        with pytest.raises(RuntimeError, match=f"{name}\\(\\): does not support bool input"):
            getattr(t, name)()
        return
    if dtype == np.float32:  # distinct values: indices are unique
        check(getattr(t, name)(), getattr(r, name)())
        check(getattr(t, name)(keepdim=True), getattr(r, name)(keepdim=True))
    for d in (0, 1, -1):
        for k in (False, True):
            res = getattr(t, name)(d, keepdim=k)
            assert res.dtype is fl.int64
            assert tuple(res.shape) == tuple(getattr(r, name)(d, keepdim=k).shape)
            idx = res.numpy() if k else np.expand_dims(res.numpy(), d)
            vals = np.take_along_axis(a, idx, axis=d)
            best = (a.max if name == "argmax" else a.min)(axis=d, keepdims=True)
            np.testing.assert_array_equal(vals, best)


def test_aminmax(rng):
    a, t, r = make(rng, (3, 4), np.float32, "transposed")
    res, ref = fl.aminmax(t), torch.aminmax(r)
    assert res._fields == ("min", "max")
    check(res.min, ref.min)
    check(res.max, ref.max)
    res, ref = t.aminmax(dim=1, keepdim=True), r.aminmax(dim=1, keepdim=True)
    check(res.min, ref.min)
    check(res.max, ref.max)


# --- var / std -------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
def test_var_std_corrections(rng, layout):
    a, t, r = make(rng, (4, 6), np.float64, layout)
    for fn in ("var", "std"):
        f, g = getattr(fl, fn), getattr(torch, fn)
        check(f(t), g(r))
        check(f(t, 1), g(r, 1))
        check(f(t, (0, 1), keepdim=True), g(r, (0, 1), keepdim=True))
        check(f(t, 1, correction=0), g(r, 1, correction=0))
        check(f(t, 1, correction=3), g(r, 1, correction=3))
        check(f(t, 0, unbiased=False), g(r, 0, unbiased=False))
        check(f(t, False), g(r, False))  # legacy var(input, unbiased)
        check(f(t, 0, True, True), g(r, 0, True, True))
    one = fl.ones(1, 3)
    assert np.isnan(one.var(0).numpy()).all()  # N - correction = 0


def test_var_mean_std_mean(rng):
    a, t, r = make(rng, (3, 5), np.float32)
    for f, g in ((fl.var_mean, torch.var_mean), (fl.std_mean, torch.std_mean)):
        res, ref = f(t, 1), g(r, 1)
        assert isinstance(res, tuple) and len(res) == 2
        check(res[0], ref[0])
        check(res[1], ref[1])
        res, ref = f(t, correction=0, keepdim=True), g(r, correction=0, keepdim=True)
        check(res[0], ref[0])
        check(res[1], ref[1])


# --- logsumexp, norm ----------------------------------------------------------------------------------
def test_logsumexp_numerics():
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [-np.inf, 0.0], [np.inf, 1.0]], np.float32)
    t, r = fl.from_numpy(x), torch.from_numpy(x)
    check(t.logsumexp(1), r.logsumexp(1))
    check(t.logsumexp(1, keepdim=True), r.logsumexp(1, keepdim=True))
    i = fl.arange(4)
    check(i.logsumexp(0), torch.arange(4).logsumexp(0))


@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, 0, 3, 0.5, "fro"])
def test_norm_orders(rng, p):
    a, t, r = make(rng, (3, 4), np.float64, "transposed")
    check(t.norm(p), r.norm(p))
    if p != "fro":
        check(fl.norm(t, p, 1), torch.norm(r, p, 1))
        check(t.norm(p, dim=(0, 1), keepdim=True), r.norm(p, dim=(0, 1), keepdim=True))
    t32, r32 = t.to(fl.float32), r.float()
    check(t32.norm(dim=0, dtype=fl.float64), r32.norm(dim=0, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"input \(Double\) should be convertible without narrowing"):
        t.norm(dtype=fl.float32)


# --- cumulative ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_cumsum_cumprod(rng, layout, dtype):
    a, t, r = make(rng, (3, 4), dtype, layout)
    for d in (0, 1, -1):
        check(t.cumsum(d), r.cumsum(d), rtol=1e-4)
        check(fl.cumprod(t, d), torch.cumprod(r, d), rtol=1e-4)
        check(t.cumsum(d, dtype=fl.float64), r.cumsum(d, dtype=torch.float64), rtol=1e-4)
    with pytest.raises(TypeError):
        fl.cumsum(t)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_ties_and_nan(name):
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, 0.0], [2.0, np.nan, 1.0, np.nan, 5.0, -1.0]], np.float32)
    t, r = fl.from_numpy(x), torch.from_numpy(x)
    res, ref = getattr(t, name)(1), getattr(r, name)(1)
    assert type(res).__name__ == name and res._fields == ("values", "indices")
    check(res.values, ref.values)
    check(res.indices, ref.indices)
    res, ref = getattr(fl, name)(t, 0), getattr(torch, name)(r, 0)
    check(res.values, ref.values)
    check(res.indices, ref.indices)
    b = fl.tensor([True, False, True])
    check(getattr(b, name)(0).values, getattr(torch.tensor([True, False, True]), name)(0).values)


# --- median, mode ----------------------------------------------------------------------------------------
def test_median():
    check(fl.tensor([1.0, 2, 3, 4]).median(), torch.tensor([1.0, 2, 3, 4]).median())  # lower of the two
    check(fl.tensor([3.0, 1, 2]).median(), torch.tensor([3.0, 1, 2]).median())
    assert math.isnan(fl.tensor([1.0, float("nan"), 2.0]).median().item())
    x = np.array([[4.0, 1.0, 3.0, 2.0], [1.0, np.nan, 0.0, 7.0], [5.0, 5.0, 5.0, 1.0]], np.float32)
    t, r = fl.from_numpy(x), torch.from_numpy(x)
    res, ref = t.median(1), r.median(1)
    assert type(res).__name__ == "median"
    check(res.values, ref.values)
    check(res.indices[:2], ref.indices[:2])  # the third row has ties: any index of a 5 will do
    assert x[2, res.indices[2].item()] == 5.0
    res, ref = fl.median(t, 0, keepdim=True), torch.median(r, 0, keepdim=True)
    check(res.values, ref.values)
    iv = fl.tensor([[3, 1, 2, 9]])
    check(iv.median(1).values, torch.tensor([[3, 1, 2, 9]]).median(1).values)


def test_mode():
    x = fl.tensor([[1, 2, 2, 3, 3], [5, 4, 4, 5, 1]])
    res, ref = fl.mode(x, 1), torch.mode(torch.tensor([[1, 2, 2, 3, 3], [5, 4, 4, 5, 1]]), 1)
    check(res.values, ref.values)
    check(res.indices, ref.indices)
    assert x.mode(0, keepdim=True).values.shape == (1, 5)


# --- autograd seam: what reductions hand to the engine ------------------------------------------------
class _Recorder:
    def __init__(self):
        self.calls = []

    def record(self, op, inputs, attrs, outputs):
        self.calls.append((op.name, inputs, attrs, outputs))


@pytest.fixture
def engine():
    saved = _grad_mode._engine[0]
    eng = _Recorder()
    _grad_mode.install_engine(eng)
    yield eng
    _grad_mode.install_engine(saved)


def test_recording(engine):
    x = fl.ones(2, 3)
    x.requires_grad_(True)
    x.sum(-1, keepdim=True)
    name, inputs, attrs, out = engine.calls[-1]
    assert name == "sum" and inputs[0] is x and inputs[1:] == ((1,), True) and attrs == {"dtype": fl.float32}
    res = x.max(1)
    name, inputs, attrs, out = engine.calls[-1]
    assert name == "max" and inputs[1:] == (1, False) and out is res
    x.var(0, correction=0)
    assert engine.calls[-1][2] == {"correction": 0, "keepdim": False}
    n = len(engine.calls)
    x.argmax()
    x.all()
    assert len(engine.calls) == n  # not differentiable: nothing recorded
    with fl.no_grad():
        x.sum()
    assert len(engine.calls) == n


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_full_sum_and_mean(rng, dtype):
    """Large contiguous sums take the parallel blocked kernel (Note [Parallel full sums])."""
    a = rng.standard_normal(1_000_003).astype(dtype) + 1
    exact = a.astype(np.float64).sum()
    t = fl.from_numpy(a)
    assert t.sum().dtype is t.dtype and t.sum().shape == ()
    np.testing.assert_allclose(t.sum().item(), exact, rtol=1e-6)
    np.testing.assert_allclose(t.mean().item(), exact / a.size, rtol=1e-6)
    m = fl.from_numpy(a[:1_000_000].reshape(1000, 1000))
    assert m.sum((0, 1), keepdim=True).shape == (1, 1) and m.mean(keepdim=True).shape == (1, 1)
    np.testing.assert_allclose(fl.from_numpy(a[:1_000_000].reshape(1000, 1000).T).sum().item(),
                               a[:1_000_000].astype(np.float64).sum(), rtol=1e-6)  # F-ordered: numpy path
    b = a.copy()
    b[123_456] = np.inf
    assert fl.from_numpy(b).sum().item() == np.inf
    b[654_321] = -np.inf
    assert np.isnan(fl.from_numpy(b).sum().item())
    b[7] = np.nan
    assert np.isnan(fl.from_numpy(b).mean().item())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, dims", [((40, 24, 17, 19), (0, 2, 3)), ((3001, 97), (0,)), ((9, 5, 120, 61), (0, 1)),
                                         ((7, 11, 13, 300), (0, 3)), ((5, 6, 7, 2000), (0, 1, 2))])
def test_large_sums_keeping_a_block_of_dims(rng, dtype, shape, dims):
    """Bias-gradient sums (Note [Parallel sums that keep a block of dims]) against float64 numpy; keepdim,
    infinities and NaN; a transposed input keeps numpy's path."""
    a = rng.standard_normal(shape).astype(dtype) + 0.5
    exact = a.astype(np.float64).sum(dims)
    t = fl.from_numpy(a)
    r = t.sum(dims)
    assert r.dtype is t.dtype and tuple(r.shape) == exact.shape
    np.testing.assert_allclose(r.numpy(), exact, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-3)
    assert tuple(t.sum(dims, keepdim=True).shape) == tuple(1 if d in dims else n for d, n in enumerate(shape))
    b = a.copy()
    b.reshape(-1)[[5, -1]] = np.inf, np.nan
    want = b.astype(np.float64).sum(dims)
    np.testing.assert_array_equal(np.isinf(fl.from_numpy(b).sum(dims).numpy()), np.isinf(want))
    np.testing.assert_array_equal(np.isnan(fl.from_numpy(b).sum(dims).numpy()), np.isnan(want))
    if len(shape) == 2:
        np.testing.assert_allclose(fl.from_numpy(a.T.copy()).t().sum(dims).numpy(), exact, rtol=1e-5, atol=1e-3)


# --- properties -----------------------------------------------------------------------------------------
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), data=st.data())
def test_sum_mean_amax_match_numpy(shape, data):
    a = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) % 7 - 3
    dims = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda d: d % len(shape)))
    keep = data.draw(st.booleans())
    t = fl.from_numpy(a)
    axis = tuple(d % len(shape) for d in dims) or None
    np.testing.assert_allclose(t.sum(dims, keepdim=keep).numpy(), a.sum(axis=axis, keepdims=keep))
    if a.size and all(shape[d] for d in (axis or range(len(shape)))):
        np.testing.assert_allclose(t.amax(dims, keepdim=keep).numpy(), a.max(axis=axis, keepdims=keep))
        np.testing.assert_allclose(t.mean(dims, keepdim=keep).numpy(), a.mean(axis=axis, keepdims=keep))


# --- diff (composite) ----------------------------------------------------------------------------
@pytest.mark.parametrize("n, dim", [(1, -1), (2, 0), (0, 1), (3, 1), (5, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_diff_matches_torch(n, dim, dtype):
    torch = pytest.importorskip("torch")
    a = (np.arange(12).reshape(3, 4) ** 2 % 7).astype(dtype)
    np.testing.assert_array_equal(fl.diff(fl.tensor(a), n, dim).numpy(), torch.diff(torch.tensor(a), n, dim).numpy())


def test_diff_prepend_append():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 4.0, 9.0], [2.0, 3.0, 7.0]], np.float32)
    got = fl.diff(fl.tensor(a), dim=1, prepend=fl.zeros(2, 1), append=5.0)
    want = torch.diff(torch.tensor(a), dim=1, prepend=torch.zeros(2, 1), append=torch.full((2, 1), 5.0))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_diff_errors():
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        fl.diff(fl.tensor(1.0))
    with pytest.raises(RuntimeError, match="order must be non-negative"):
        fl.diff(fl.ones(3), -1)
