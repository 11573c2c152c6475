"""The numeric family (flambeau._ops.numeric) against torch: values, dtypes, errors; gradients are
checked by autograd's gradcheck cases (packages/autograd/tests/cases_numeric.py)."""

import math

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(13)


def both(arr, **kw):
    """The same values as a flambeau and a torch tensor."""
    arr = np.asarray(arr)
    return fl.tensor(arr, **kw), torch.tensor(arr, **{k: getattr(torch, str(v).split(".")[-1]) for k, v in kw.items()})


def same(ours, theirs, atol=1e-6, rtol=1e-5, dtype=True):
    """``ours`` (a flambeau tensor, or a tuple/list of them) matches torch's value and dtype."""
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs, strict=True):
            same(o, t, atol, rtol, dtype)
        return
    assert isinstance(ours, fl.Tensor)
    assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    if dtype:
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], (ours.dtype, theirs.dtype)
    real = not ours.dtype.is_complex
    np.testing.assert_allclose(ours.detach().to(fl.float64).numpy() if real else ours.detach().numpy(),
                               theirs.detach().to(torch.float64).numpy() if real else theirs.detach().numpy(),
                               atol=atol, rtol=rtol, equal_nan=True)


def raises_like(fn_fl, fn_torch, exc=None):
    with pytest.raises(Exception) as theirs:
        fn_torch()
    with pytest.raises(exc or type(theirs.value)):
        fn_fl()


def rand(*shape):
    return RNG.uniform(-2, 2, size=shape)


# --- arithmetic -----------------------------------------------------------------------------------------
def test_addr_values_dtypes_inplace_and_beta_zero():
    (a, ta), (v, tv), (w, tw) = both(rand(3, 4)), both(rand(3)), both(rand(4))
    same(fl.addr(a, v, w, beta=0.5, alpha=2), torch.addr(ta, tv, tw, beta=0.5, alpha=2))
    same(a.addr(v, w), ta.addr(tv, tw))
    nan_a, nan_t = both(np.full((3, 4), np.nan))
    same(fl.addr(nan_a, v, w, beta=0), torch.addr(nan_t, tv, tw, beta=0))
    (i, ti), (iv, tiv) = both(np.arange(4)), both(np.arange(3))
    same(fl.addr(i, iv, i, alpha=3), torch.addr(ti, tiv, ti, alpha=3))
    b, tb = both(rand(4))  # broadcast input
    same(fl.addr(b, v, w), torch.addr(tb, tv, tw))
    c, tc = a.clone(), ta.clone()
    assert c.addr_(v, w, alpha=0.5) is c
    same(c, tc.addr_(tv, tw, alpha=0.5))
    raises_like(lambda: fl.addr(i, iv, i, alpha=0.5), lambda: torch.addr(ti, tiv, ti, alpha=0.5), RuntimeError)
    raises_like(lambda: fl.addr(a, a, w), lambda: torch.addr(ta, ta, tw), RuntimeError)


def test_bincount():
    x, tx = both([0, 3, 1, 1, 5])
    same(fl.bincount(x), torch.bincount(tx))
    same(x.bincount(minlength=8), tx.bincount(minlength=8))
    for w in ([0.5, 1.0, 2.0, 1.5, 3.0], np.arange(5)):
        fw, tw = both(w)
        same(fl.bincount(x, fw), torch.bincount(tx, tw))
    for d in ("float32", "float16", "int32"):
        fw, tw = both(np.ones(5), dtype=getattr(fl, d))
        same(fl.bincount(x, fw), torch.bincount(tx, tw))
    e, te = both(np.zeros(0, dtype=np.int64))
    same(fl.bincount(e), torch.bincount(te))
    for bad in ([-1, 2], [[1, 2]], [0.5]):
        b, tb = both(bad)
        raises_like(lambda b=b: fl.bincount(b), lambda tb=tb: torch.bincount(tb), RuntimeError)
    raises_like(lambda: fl.bincount(x, minlength=-1), lambda: torch.bincount(tx, minlength=-1), RuntimeError)


def test_gcd_lcm():
    a, ta = both([-4, 0, 6, 12, 35, 7, -9])
    b, tb = both([6, 0, -9, 18, 49, 0, 3])
    same(fl.gcd(a, b), torch.gcd(ta, tb))
    same(fl.lcm(a, b), torch.lcm(ta, tb))
    c, tc = both(np.array([[3], [8]], dtype=np.int32))
    same(fl.gcd(a, c), torch.gcd(ta, tc))  # broadcast and promotion
    same(a.clone().gcd_(b), ta.clone().gcd_(tb))
    same(a.clone().lcm_(b), ta.clone().lcm_(tb))
    big, tbig = both(RNG.integers(-10**12, 10**12, size=50))
    big2, tbig2 = both(RNG.integers(-10**6, 10**6, size=50))
    same(fl.gcd(big, big2), torch.gcd(tbig, tbig2))
    f, tf = both([1.0])
    raises_like(lambda: fl.gcd(f, f), lambda: torch.gcd(tf, tf), RuntimeError)


def test_heaviside():
    x, tx = both([-1.5, 0.0, 2.0, 0.0])
    v, tv = both([0.5])
    same(fl.heaviside(x, v), torch.heaviside(tx, tv))
    i, ti = both([1, 0, -1])
    same(i.heaviside(fl.tensor([5])), ti.heaviside(torch.tensor([5])))
    same(x.clone().heaviside_(v), tx.clone().heaviside_(tv))
    raises_like(lambda: fl.heaviside(x, fl.tensor([1])), lambda: torch.heaviside(tx, torch.tensor([1])),
                RuntimeError)


def test_frexp_ldexp_nextafter():
    values = [0.0, -0.0, 1.0, -3.5, 0.75, 1e-40, 3e38, float("inf"), float("-inf"), float("nan"), 0.1, 2.0 ** -149]
    for dtype in (fl.float32, fl.float64, fl.float16):
        vals = values if dtype is not fl.float16 else [0.0, 1.0, -3.5, 1e-6, 6e4, 0.1]
        x, tx = both(vals, dtype=dtype)
        m, e = fl.frexp(x)
        tm, te = torch.frexp(tx)
        same(m, tm, atol=0, rtol=0)
        same(e, te, atol=0, rtol=0)
        assert x.frexp().mantissa.dtype is dtype
    d, td = both(1e-310 * np.arange(1, 4))  # float64 subnormals
    same(fl.frexp(d), torch.frexp(td), atol=0, rtol=0)
    raises_like(lambda: fl.frexp(fl.tensor([1])), lambda: torch.frexp(torch.tensor([1])), RuntimeError)

    for da, db in (("float16", "int64"), ("int64", "int64"), ("float32", "float64"), ("int32", "float16")):
        a, ta = both([1, 2, 3], dtype=getattr(fl, da))
        b, tb = both([1, -2, 3], dtype=getattr(fl, db))
        same(fl.ldexp(a, b), torch.ldexp(ta, tb))
    a, ta = both(rand(4))
    b, tb = both([1, 2, -3, 0])
    same(a.clone().ldexp_(b), ta.clone().ldexp_(tb))

    for dtype in (fl.float32, fl.float64, fl.bfloat16):
        a, ta = both([1.0, 0.0, -2.0, 5.0, float("nan")], dtype=dtype)
        b, tb = both([2.0, -1.0, -2.0, 0.0, 1.0], dtype=dtype)
        same(fl.nextafter(a, b), torch.nextafter(ta, tb), atol=0, rtol=0)
    a, ta = both([1.0, 2.0], dtype=fl.float32)
    b, tb = both([0.0], dtype=fl.float64)
    same(a.nextafter(b), ta.nextafter(tb), atol=0, rtol=0)
    same(a.clone().nextafter_(b), ta.clone().nextafter_(tb), atol=0, rtol=0)


def test_isin_isreal_predicates():
    e, te = both([[1, 2, 3], [4, 5, 6]])
    t, tt = both([2, 6, 9, 2])
    same(fl.isin(e, t), torch.isin(te, tt))
    same(fl.isin(e, t, invert=True), torch.isin(te, tt, invert=True))
    same(fl.isin(e, 5), torch.isin(te, 5))
    same(fl.isin(3, t), torch.isin(3, tt))
    f, tf = both([1.5, 2.0])
    same(fl.isin(e, f), torch.isin(te, tf))
    same(fl.isin(e, fl.tensor([], dtype=fl.int64)), torch.isin(te, torch.tensor([], dtype=torch.int64)))
    c = fl.tensor([1 + 0j, 1j, 2 + 0j])
    same(fl.isreal(c), torch.isreal(torch.tensor([1 + 0j, 1j, 2 + 0j])))
    same(e.isreal(), te.isreal())
    assert fl.is_same_size(e, e) and not e.is_same_size(t)
    for d in ("uint8", "bool", "int8", "float32", "complex64"):
        assert fl.is_signed(fl.zeros(1, dtype=getattr(fl, d))) == torch.zeros(1, dtype=getattr(torch, d)).is_signed()
    assert fl.is_neg(e) is False and e.is_neg() is False
    assert fl.tensor([2.0]).is_nonzero() is True and fl.tensor(0).is_nonzero() is False
    raises_like(lambda: e.is_nonzero(), lambda: te.is_nonzero(), RuntimeError)


# --- scans and order statistics -------------------------------------------------------------------------
def test_logcumsumexp():
    for shape, dim in (((7,), 0), ((3, 5), 1), ((4, 3, 2), 0), ((), 0), ((1,), -1)):
        x, tx = both(RNG.normal(size=shape) * 5)
        same(fl.logcumsumexp(x, dim), torch.logcumsumexp(tx, dim))
    x, tx = both([-1000.0, 0.0, 1000.0, -1e4, float("-inf")])
    same(x.logcumsumexp(0), tx.logcumsumexp(0))
    raises_like(lambda: fl.logcumsumexp(fl.tensor([1]), 0), lambda: torch.logcumsumexp(torch.tensor([1]), 0),
                RuntimeError)


def test_nanmedian():
    a = RNG.permutation(24).reshape(4, 6).astype(np.float64)
    a[0, 1] = a[2, :] = a[3, 4] = np.nan
    x, tx = both(a)
    same(fl.nanmedian(x), torch.nanmedian(tx))
    for dim, keepdim in ((0, False), (1, True), (-1, False)):
        ours, theirs = fl.nanmedian(x, dim, keepdim), torch.nanmedian(tx, dim, keepdim)
        same(ours.values, theirs.values)
        valid = ~torch.isnan(theirs.values)  # an all-NaN row's index is unspecified
        np.testing.assert_array_equal(ours.indices.numpy()[valid.numpy()], theirs.indices.numpy()[valid.numpy()])
        assert ours.indices.dtype is fl.int64
    i, ti = both([[3, 1, 2, 7]])
    same(i.nanmedian(1).values, ti.nanmedian(1).values)
    same(fl.nanmedian(fl.tensor(2.0)), torch.nanmedian(torch.tensor(2.0)))
    same(fl.nanmedian(fl.tensor([])), torch.nanmedian(torch.tensor([])))


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(interpolation):
    a = RNG.normal(size=(4, 7))
    a[1, 3] = np.nan
    x, tx = both(a)
    q, tq = both([0.0, 0.25, 0.5, 0.9, 1.0])
    kw = {"interpolation": interpolation}
    for fn, tfn in ((fl.quantile, torch.quantile), (fl.nanquantile, torch.nanquantile)):
        same(fn(x, 0.3, **kw), tfn(tx, 0.3, **kw))
        same(fn(x, q, **kw), tfn(tx, tq, **kw))
        same(fn(x, q, 1, **kw), tfn(tx, tq, 1, **kw))
        same(fn(x, 0.5, 0, True, **kw), tfn(tx, 0.5, 0, True, **kw))
        same(fn(x, q, None, True, **kw), tfn(tx, tq, None, True, **kw))
        same(fn(x, q, -1, True, **kw), tfn(tx, tq, -1, True, **kw))
    all_nan, t_all_nan = both(np.full((2, 3), np.nan))
    same(fl.nanquantile(all_nan, 0.5, 1), torch.nanquantile(t_all_nan, 0.5, 1))
    same(x.quantile(0.5, 0), tx.quantile(0.5, 0))
    f, tf = both(RNG.normal(size=5), dtype=fl.float32)
    same(fl.quantile(f, fl.tensor(0.5)), torch.quantile(tf, torch.tensor(0.5)))


def test_quantile_errors():
    x, tx = both(rand(5))
    for args in ((1.5,), (both([0.5], dtype=fl.float32),)):
        ours = args[0][0] if isinstance(args[0], tuple) else args[0]
        theirs = args[0][1] if isinstance(args[0], tuple) else args[0]
        raises_like(lambda ours=ours: fl.quantile(x, ours), lambda theirs=theirs: torch.quantile(tx, theirs),
                    RuntimeError)
    raises_like(lambda: fl.quantile(fl.tensor([1, 2]), 0.5), lambda: torch.quantile(torch.tensor([1, 2]), 0.5),
                RuntimeError)
    raises_like(lambda: fl.quantile(x, 0.5, interpolation="cubic"),
                lambda: torch.quantile(tx, 0.5, interpolation="cubic"))
    raises_like(lambda: fl.quantile(fl.tensor([]), 0.5), lambda: torch.quantile(torch.tensor([]), 0.5), RuntimeError)


# --- indexing -------------------------------------------------------------------------------------------
def test_take_along_dim():
    x, tx = both(rand(3, 4))
    i, ti = both(RNG.integers(0, 4, size=(3, 2)))
    same(fl.take_along_dim(x, i, 1), torch.take_along_dim(tx, ti, 1))
    same(x.take_along_dim(i), tx.take_along_dim(ti))
    j, tj = both(RNG.integers(0, 3, size=(2, 1)))
    same(fl.take_along_dim(x, j, 0), torch.take_along_dim(tx, tj, 0))  # broadcast
    raises_like(lambda: fl.take_along_dim(x, i.int(), 1), lambda: torch.take_along_dim(tx, ti.int(), 1),
                RuntimeError)
    raises_like(lambda: fl.take_along_dim(x, i[0], 1), lambda: torch.take_along_dim(tx, ti[0], 1), RuntimeError)


def test_unravel_index_diagflat_dist():
    i, ti = both([3, 5, 0, 7])
    same(fl.unravel_index(i, (2, 3)), torch.unravel_index(ti, (2, 3)))
    same(fl.unravel_index(fl.tensor(17), (2, 3, 4)), torch.unravel_index(torch.tensor(17), (2, 3, 4)))
    same(fl.unravel_index(i, 4), torch.unravel_index(ti, 4))
    raises_like(lambda: fl.unravel_index(fl.tensor([1.0]), (2,)),
                lambda: torch.unravel_index(torch.tensor([1.0]), (2,)), TypeError)
    x, tx = both(rand(2, 2))
    same(fl.diagflat(x), torch.diagflat(tx))
    same(x.diagflat(-1), tx.diagflat(-1))
    y, ty = both(rand(2))
    for p in (2, 1, 0, float("inf"), 3.5):
        same(fl.dist(x, y, p), torch.dist(tx, ty, p))
    same(x.dist(y), tx.dist(ty))


def test_combinations_pdist():
    x, tx = both([1.5, 2.0, 3.0, 4.0])
    for r, rep in ((2, False), (3, False), (2, True), (0, False), (5, False), (1, True)):
        same(fl.combinations(x, r, rep), torch.combinations(tx, r, rep))
    raises_like(lambda: fl.combinations(fl.ones(2, 2)), lambda: torch.combinations(torch.ones(2, 2)), RuntimeError)
    m, tm = both(rand(5, 3))
    for p in (2, 1, 0, float("inf"), 1.5):
        same(fl.pdist(m, p), torch.pdist(tm, p))
    raises_like(lambda: fl.pdist(fl.ones(2)), lambda: torch.pdist(torch.ones(2)), RuntimeError)


def test_histogramdd():
    pts = RNG.normal(size=(40, 3))
    pts[0] = [5.0, 5.0, 5.0]  # beyond range below
    x, tx = both(pts, dtype=fl.float32)
    w, tw = both(RNG.uniform(0, 2, size=40), dtype=fl.float32)
    same(fl.histogramdd(x, 10), torch.histogramdd(tx, 10))
    same(fl.histogramdd(x, [2, 3, 4], weight=w, density=True),
         torch.histogramdd(tx, [2, 3, 4], weight=tw, density=True))
    rng = [-1.0, 1.0, -0.5, 2.0, 0.0, 1.0]
    same(fl.histogramdd(x, 3, range=rng), torch.histogramdd(tx, 3, range=rng))
    e = [np.array([-3.0, 0.0, 0.5, 3.0]), np.array([-1.0, 1.0]), np.array([-2.0, 0.0, 2.0])]
    same(fl.histogramdd(x, [fl.tensor(a, dtype=fl.float32) for a in e]),
         torch.histogramdd(tx, [torch.tensor(a, dtype=torch.float32) for a in e]))
    g, tg = both(np.array([[1.0, 1.0], [1.0, 1.0]]))  # one point value: a unit-wide range around it
    same(fl.histogramdd(g, 2), torch.histogramdd(tg, 2))
    raises_like(lambda: fl.histogramdd(fl.ones(3, 2, dtype=fl.int64), 2),
                lambda: torch.histogramdd(torch.ones(3, 2, dtype=torch.int64), 2), NotImplementedError)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce(reduce):
    d, td = both(rand(6, 2))
    lengths, tl = both([1, 0, 3, 2])
    same(fl.segment_reduce(d, reduce, lengths=lengths), torch.segment_reduce(td, reduce, lengths=tl))
    same(fl.segment_reduce(d, reduce, lengths=lengths, initial=0.5),
         torch.segment_reduce(td, reduce, lengths=tl, initial=0.5))
    offsets, to = both([0, 2, 2, 6])
    same(fl.segment_reduce(d, reduce, offsets=offsets), torch.segment_reduce(td, reduce, offsets=to))
    raises_like(lambda: fl.segment_reduce(d, reduce, lengths=lengths[:2]),
                lambda: torch.segment_reduce(td, reduce, lengths=tl[:2]), RuntimeError)


# --- integration, differentiation -----------------------------------------------------------------------
def test_trapezoid_family():
    y, ty = both(rand(3, 5))
    x, tx = both(np.sort(rand(5)))
    same(fl.trapezoid(y), torch.trapezoid(ty))
    same(fl.trapezoid(y, x), torch.trapezoid(ty, tx))
    same(fl.trapezoid(y, dx=0.5, dim=0), torch.trapezoid(ty, dx=0.5, dim=0))
    x2, tx2 = both(np.sort(rand(3, 5), axis=1))
    same(fl.trapezoid(y, x2), torch.trapezoid(ty, tx2))
    same(fl.trapz(y, x), torch.trapz(ty, tx))
    same(fl.trapz(y, dx=2.0), torch.trapz(ty, dx=2.0))
    same(fl.cumulative_trapezoid(y), torch.cumulative_trapezoid(ty))
    same(fl.cumulative_trapezoid(y, x), torch.cumulative_trapezoid(ty, tx))
    same(fl.cumulative_trapezoid(y, dx=0.3, dim=0), torch.cumulative_trapezoid(ty, dx=0.3, dim=0))
    i, ti = both([1, 2, 4])
    same(fl.trapezoid(i), torch.trapezoid(ti))
    same(fl.cumulative_trapezoid(i), torch.cumulative_trapezoid(ti))
    e, te = both(np.zeros((2, 0)))
    same(fl.trapezoid(e), torch.trapezoid(te))


def test_gradient():
    f, tf = both(rand(4, 5))
    for kw in ({}, {"spacing": 2.0}, {"dim": 1}, {"spacing": [0.5, 2.0]}, {"edge_order": 2},
               {"spacing": 0.5, "dim": [1], "edge_order": 2}):
        same(fl.gradient(f, **kw), torch.gradient(tf, **kw))
    c1, tc1 = both(np.cumsum(RNG.uniform(0.5, 2, size=4)))
    c2, tc2 = both(np.cumsum(RNG.uniform(0.5, 2, size=5)))
    for order in (1, 2):
        same(fl.gradient(f, spacing=[c1, c2], edge_order=order),
             torch.gradient(tf, spacing=[tc1, tc2], edge_order=order), atol=1e-5)
    i, ti = both([1, 2, 4, 8])
    same(fl.gradient(i), torch.gradient(ti))
    raises_like(lambda: fl.gradient(fl.ones(2), edge_order=2), lambda: torch.gradient(torch.ones(2), edge_order=2),
                RuntimeError)


# --- scatters -------------------------------------------------------------------------------------------
def test_scatters():
    a, ta = both(rand(3, 4, 5))
    s, ts = both(rand(3, 5))
    same(fl.select_scatter(a, s, 1, -1), torch.select_scatter(ta, ts, 1, -1))
    same(a.select_scatter(s, 1, 2), ta.select_scatter(ts, 1, 2))
    s, ts = both(rand(3, 2, 5))
    same(fl.slice_scatter(a, s, 1, 1, None, 2), torch.slice_scatter(ta, ts, 1, 1, None, 2))
    s, ts = both(rand(1, 4, 5))
    same(a.slice_scatter(s, end=1), ta.slice_scatter(ts, end=1))
    s, ts = both(rand(5, 3))
    same(fl.diagonal_scatter(a, s, 0, 0, 1), torch.diagonal_scatter(ta, ts, 0, 0, 1))
    s, ts = both(rand(3, 4))
    same(a.diagonal_scatter(s, 1, 1, 2), ta.diagonal_scatter(ts, 1, 1, 2))
    s, ts = both(rand(2, 3))
    same(fl.as_strided_scatter(a, s, (2, 3), (20, 2), 1), torch.as_strided_scatter(ta, ts, (2, 3), (20, 2), 1))
    same(a.as_strided_scatter(s, (2, 3), (3, 1)), ta.as_strided_scatter(ts, (2, 3), (3, 1)))
    i, ti = both(np.zeros((2, 2), dtype=np.int64))
    s, ts = both([1.7, 2.2])
    same(fl.select_scatter(i, s, 0, 0), torch.select_scatter(ti, ts.long(), 0, 0))
    raises_like(lambda: fl.select_scatter(a, fl.ones(2), 0, 0), lambda: torch.select_scatter(ta, torch.ones(2), 0, 0),
                RuntimeError)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce(reduce):
    x, tx = both(rand(5, 3))
    src, tsrc = both(rand(4, 3))
    idx, tidx = both([0, 4, 0, 2])
    for include_self in (True, False):
        same(fl.index_reduce(x, 0, idx, src, reduce, include_self=include_self),
             torch.index_reduce(tx, 0, tidx, tsrc, reduce, include_self=include_self))
    src2, tsrc2 = both(rand(5, 2))
    same(x.index_reduce(1, fl.tensor([2, 2]), src2, reduce), tx.index_reduce(1, torch.tensor([2, 2]), tsrc2, reduce))
    y, ty = x.clone(), tx.clone()
    assert y.index_reduce_(0, idx, src, reduce) is y
    same(y, ty.index_reduce_(0, tidx, tsrc, reduce))
    raises_like(lambda: fl.index_reduce(x, 0, idx, src, "sum"), lambda: torch.index_reduce(tx, 0, tidx, tsrc, "sum"),
                RuntimeError)


# --- windows --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bartlett_window", "blackman_window", "hamming_window", "hann_window",
                                  "kaiser_window"])
def test_windows(name):
    ours, theirs = getattr(fl, name), getattr(torch, name)
    for n in (0, 1, 2, 5, 8):
        for periodic in (True, False):
            same(ours(n, periodic), theirs(n, periodic), atol=1e-6)
    same(ours(6, dtype=fl.float64), theirs(6, dtype=torch.float64), atol=1e-12)
    assert ours(4, requires_grad=True).requires_grad
    raises_like(lambda: ours(4, dtype=fl.int64), lambda: theirs(4, dtype=torch.int64), RuntimeError)


def test_window_parameters():
    same(fl.hamming_window(7, False, alpha=0.5, beta=0.3), torch.hamming_window(7, False, alpha=0.5, beta=0.3))
    same(fl.hamming_window(7, True, 0.6), torch.hamming_window(7, True, 0.6))
    same(fl.kaiser_window(9, True, beta=3.0), torch.kaiser_window(9, True, beta=3.0), atol=1e-6)
    same(fl.kaiser_window(9, False, 5.0, dtype=fl.float64), torch.kaiser_window(9, False, 5.0, dtype=torch.float64),
         atol=1e-12)


# --- shapes and aliases ---------------------------------------------------------------------------------
def test_shape_helpers():
    x, tx = both(rand(2, 3, 4))
    same(fl.ravel(x.transpose(0, 2)), torch.ravel(tx.transpose(0, 2)))
    same(x.ravel(), tx.ravel())
    assert fl.broadcast_shapes((2, 1), (3,), 1) == torch.broadcast_shapes((2, 1), (3,), 1)
    assert isinstance(fl.broadcast_shapes((2,)), fl.Size)
    raises_like(lambda: fl.broadcast_shapes((2,), (3,)), lambda: torch.broadcast_shapes((2,), (3,)), RuntimeError)
    same(fl.fill(x, 2.5), torch.fill(tx, 2.5))
    same(fl.fill(x, fl.tensor(3)), torch.fill(tx, torch.tensor(3)))
    d = fl.detach(x.requires_grad_())
    assert not d.requires_grad and x.requires_grad
    x = x.detach()
    same(fl.unsafe_chunk(x, 2, 2), torch.unsafe_chunk(tx, 2, 2))
    same(x.unsafe_split(2, 1), tx.unsafe_split(2, 1))
    same(fl.unsafe_split_with_sizes(x, [1, 3], 2), torch.unsafe_split_with_sizes(tx, [1, 3], 2))
    for pad in ((1, 2), (0, -1, 2, 0), (1, 1, -1, 1, 0, 2)):
        same(fl.constant_pad_nd(x, pad, 1.5), torch.constant_pad_nd(tx, pad, 1.5))
    raises_like(lambda: fl.constant_pad_nd(x, (1,)), lambda: torch.constant_pad_nd(tx, (1,)), RuntimeError)
    for size in ((1, 3, 1), (4,), (3, 4), (2, 3, 4), (1,)):
        same(x.sum_to_size(size), tx.sum_to_size(size))
    same(x.sum_to_size(3, 1), tx.sum_to_size(3, 1))
    raises_like(lambda: x.sum_to_size(2), lambda: tx.sum_to_size(2), RuntimeError)


def test_distances_and_bilinear():
    a, ta = both(rand(4, 5))
    b, tb = both(rand(5))
    same(fl.pairwise_distance(a, b), torch.pairwise_distance(ta, tb))
    same(fl.pairwise_distance(a, b, 1.0, 1e-3, True), torch.pairwise_distance(ta, tb, 1.0, 1e-3, True))
    same(fl.cosine_similarity(a, b, dim=-1), torch.cosine_similarity(ta, tb, dim=-1))
    same(fl.cosine_similarity(a, a * 2, 0), torch.cosine_similarity(ta, ta * 2, 0))
    x1, tx1 = both(rand(3, 2))
    x2, tx2 = both(rand(3, 4))
    w, tw = both(rand(5, 2, 4))
    bias, tbias = both(rand(5))
    same(fl.bilinear(x1, x2, w, bias), torch.bilinear(tx1, tx2, tw, tbias))
    same(fl.bilinear(x1, x2, w), torch.bilinear(tx1, tx2, tw, None))


def test_norms_and_removed_matrix_rank():
    a, ta = both(rand(3, 4))
    same(fl.nuclear_norm(a), torch.nuclear_norm(ta))
    same(fl.nuclear_norm(a, True), torch.nuclear_norm(ta, True))
    b, tb = both(rand(2, 3, 4))
    same(fl.nuclear_norm(b, (1, 2)), torch.nuclear_norm(tb, (1, 2)))
    same(fl.nuclear_norm(b, (0, 2), keepdim=True), torch.nuclear_norm(tb, (0, 2), keepdim=True))
    same(fl.frobenius_norm(b, (1, 2)), torch.frobenius_norm(tb, (1, 2)))
    same(fl.frobenius_norm(b, [0], True), torch.frobenius_norm(tb, [0], True))
    same(fl.nuclear_norm(b), torch.nuclear_norm(tb))
    raises_like(lambda: fl.matrix_rank(a), lambda: torch.matrix_rank(ta), RuntimeError)


# --- in-place twins -------------------------------------------------------------------------------------
def test_inplace_twins():
    x, tx = both(rand(3, 4))
    for name, args in (("cumsum_", (1,)), ("cumprod_", (0,)), ("renorm_", (2, 0, 1.0))):
        y, ty = x.clone(), tx.clone()
        assert getattr(y, name)(*args) is y
        same(y, getattr(ty, name)(*args))
    m1, tm1 = both(rand(3, 2))
    m2, tm2 = both(rand(2, 4))
    same(x.clone().addmm_(m1, m2, beta=0.5, alpha=2), tx.clone().addmm_(tm1, tm2, beta=0.5, alpha=2))
    b1, tb1 = both(rand(2, 3, 5))
    b2, tb2 = both(rand(2, 5, 4))
    same(x.clone().addbmm_(b1, b2), tx.clone().addbmm_(tb1, tb2))
    z, tz = both(rand(2, 3, 4))
    same(z.baddbmm_(b1, b2, alpha=0.5), tz.baddbmm_(tb1, tb2, alpha=0.5))
    v, tv = both(rand(3))
    w, tw = both(rand(4))
    same(v.clone().addmv_(x, w), tv.clone().addmv_(tx, tw))
    same(fl.addmv_(v.clone(), x, w, beta=2), torch.addmv_(tv.clone(), tx, tw, beta=2))
    i, ti = both([[1, 2], [3, 4]])
    same(i.clone().cumsum_(0), ti.clone().cumsum_(0))
    c = fl.tensor([1 + 2j, 3 - 1j])
    tc = torch.tensor([1 + 2j, 3 - 1j])
    same(fl.conj_physical_(c.clone()), torch.conj_physical_(tc.clone()))
    same(c.conj_physical_(), tc.conj_physical_())
    same(x.clone().conj_physical_(), tx.clone().conj_physical_())


@pytest.mark.parametrize("shape, wrap", [((3, 3), False), ((7, 3), False), ((7, 3), True), ((3, 5), True),
                                         ((3, 3, 3), False)])
def test_fill_diagonal_(shape, wrap):
    x, tx = both(rand(*shape))
    assert x.fill_diagonal_(-1.5, wrap) is x
    same(x, tx.fill_diagonal_(-1.5, wrap))


def test_fill_diagonal_errors():
    raises_like(lambda: fl.ones(3).fill_diagonal_(1), lambda: torch.ones(3).fill_diagonal_(1), RuntimeError)
    raises_like(lambda: fl.ones(2, 3, 3).fill_diagonal_(1), lambda: torch.ones(2, 3, 3).fill_diagonal_(1),
                RuntimeError)


def test_nanmedian_nan_index_and_nan_input_quantile_is_nan():
    x = fl.tensor([1.0, math.nan, 3.0])
    assert math.isnan(float(fl.quantile(x, 0.5)))
    assert float(fl.nanquantile(x, 0.5)) == 2.0
