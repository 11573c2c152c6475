"""CUDA reductions beyond their samples: strided inputs, long rows (partial blocks, scan carries),
NaN/inf and ties, float16, empty and 0-dim inputs, backward, errors, no host synchronisation.

Runs under numba's simulator (block size 8 there, so rows of a few dozen elements already take the
two-launch path) and on a GPU. CPU results are the reference.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import flambeau as fl

RNG = np.random.default_rng(7)


def _pair(h):
    c = fl.tensor(h)
    return c, c.to("cuda")


def _same(got, want, rtol=1e-5, atol=1e-6):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, rtol, atol)
        return
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    g, w = got.cpu().numpy(), want.numpy()
    if want.dtype.is_floating_point:
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


def _both(h, fn, **tol):
    c, g = _pair(h)
    _same(fn(g), fn(c), **tol)


REDUCTIONS = {
    "sum": lambda x, d: fl.sum(x, d), "mean": lambda x, d: fl.mean(x, d), "prod": lambda x, d: fl.prod(x, d),
    "amax": lambda x, d: fl.amax(x, d), "max": lambda x, d: fl.max(x, d), "argmin": lambda x, d: fl.argmin(x, d),
    "var": lambda x, d: fl.var(x, d), "std": lambda x, d: fl.std(x, d, correction=0),
    "logsumexp": lambda x, d: fl.logsumexp(x, d), "norm": lambda x, d: fl.norm(x, 1.5, d),
    "all": lambda x, d: fl.all(x > 0, d), "count_nonzero": lambda x, d: fl.count_nonzero(x > 0, d),
    "cumsum": lambda x, d: fl.cumsum(x, d), "cummin": lambda x, d: fl.cummin(x, d),
    "median": lambda x, d: fl.median(x, d), "mode": lambda x, d: fl.mode(x.round(), d),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_transposed_and_sliced_inputs(name):
    fn = REDUCTIONS[name]
    c, g = _pair(RNG.uniform(0.5, 1.5, (6, 4)))
    _same(fn(g.T[:, ::2], 1), fn(c.T[:, ::2], 1))


def test_long_rows_take_the_two_launch_path():
    # 70 > 8 * 8 elements per row: two blocks per output and a second launch under the simulator
    c, g = _pair(RNG.uniform(-4, 4, (2, 70)).astype(np.float32))
    for fn in (lambda x: x.sum(), lambda x: fl.max(x, 1), lambda x: fl.argmax(x), lambda x: fl.var(x, 1),
               lambda x: fl.logsumexp(x, 1), lambda x: fl.norm(x, 3, 1), lambda x: fl.cummax(x, 1),
               lambda x: fl.median(x, 1), lambda x: fl.mode(x.round(), 1)):
        _same(fn(g), fn(c), rtol=1e-4)
    c, g = _pair(RNG.permutation(140).reshape(2, 70) - 70)
    for fn in (lambda x: x.sum(1), lambda x: fl.argmin(x, 1), lambda x: fl.cumsum(x, 1)):
        _same(fn(g), fn(c))
    c, g = _pair(RNG.uniform(-4, 4, (70, 5)))  # many adjacent outputs: one thread per output
    for fn in (lambda x: x.sum(0), lambda x: fl.argmax(x, 0), lambda x: fl.var(x, 0), lambda x: fl.logsumexp(x, 0)):
        _same(fn(g), fn(c))


def test_ties_pick_torch_indices():
    h = np.array([[1.0, 3.0, 3.0, 0.0, 3.0] * 14, [2.0] * 70])  # ties across partial blocks too
    c, g = _pair(h)
    _same(fl.max(g, 1), fl.max(c, 1))  # first occurrence
    _same(fl.argmax(g), fl.argmax(c))
    _same(fl.argmin(g, 1), fl.argmin(c, 1))
    _same(fl.cummax(g[:, :12], 1), fl.cummax(c[:, :12], 1))  # the latest occurrence
    _same(fl.cummin(g[:, :12], 1), fl.cummin(c[:, :12], 1))
    m = fl.tensor([[1.0, 2.0, 2.0, 1.0, 3.0], [5.0, 4.0, 4.0, 5.0, 6.0], [0.0, -0.0, 1.0, 1.0, 7.0]])
    _same(fl.mode(m.cuda(), 1), fl.mode(m, 1))  # the smallest most frequent value, its last index


def test_nan_and_inf():
    nan, inf = math.nan, math.inf
    h = np.array([[1.0, nan, 3.0, nan], [1.0, 2.0, -inf, 0.5], [inf, 1.0, 2.0, 3.0], [-inf, -inf, -inf, -inf]])
    c, g = _pair(h)
    for fn in (lambda x: fl.amax(x, 1), lambda x: fl.amin(x, 1), lambda x: fl.max(x, 1), lambda x: fl.min(x, 1),
               lambda x: fl.argmax(x, 1), lambda x: fl.argmin(x, 1), lambda x: fl.max(x), lambda x: fl.argmax(x),
               lambda x: fl.logsumexp(x, 1), lambda x: fl.nansum(x, 1), lambda x: fl.nanmean(x, 1),
               lambda x: fl.sum(x, 1), lambda x: fl.var(x, 1), lambda x: fl.norm(x, math.inf, 1),
               lambda x: fl.norm(x, -math.inf, 1), lambda x: fl.cummax(x, 1), lambda x: fl.cummin(x, 1),
               lambda x: fl.cumsum(x, 1), lambda x: fl.median(x, 1), lambda x: fl.median(x),
               lambda x: fl.aminmax(x, dim=1), lambda x: fl.count_nonzero(x, 1), lambda x: fl.any(x, 1)):
        _same(fn(g), fn(c))


@pytest.mark.parametrize("p", [0, 1, 2, 0.5, -1.5, math.inf, -math.inf, "fro"])
def test_norm_orders(p):
    h = RNG.uniform(-2, 2, (3, 5))
    h[0, 1] = 0.0
    _both(h, lambda x: fl.norm(x, p, 1, keepdim=True))
    _both(h.astype(np.float32), lambda x: fl.norm(x, p), rtol=1e-4)


def test_var_corrections():
    h = RNG.normal(size=(3, 4))
    for corr in (0, 1, 2.5, 4, 6):
        _both(h, lambda x, corr=corr: fl.var(x, 1, correction=corr))
        _both(h, lambda x, corr=corr: fl.std(x, (0, 1), correction=corr, keepdim=True))
    # a large mean over a small spread: one-pass formulas cancel catastrophically (errors of 100% and more);
    # a stable float32 one stays within float32's rounding of the deviations (the CPU's and the device's
    # differ by up to 3e-3 relative, so each is compared with float64 on its own data, seeded)
    big = (np.full((2, 3), 1e4) + np.random.default_rng(0).normal(size=(2, 3))).astype(np.float32)
    got = fl.var(fl.tensor(big).to("cuda"), 1).cpu().numpy()
    np.testing.assert_allclose(got, big.astype(np.float64).var(1, ddof=1), rtol=1e-2)


def test_float16_accumulates_in_float32():
    h = RNG.uniform(0.5, 1.5, (3, 40)).astype(np.float16)
    c, g = _pair(h)
    for fn in (lambda x: x.sum(), lambda x: x.sum(1), lambda x: x.mean(1), lambda x: fl.prod(x[:, :6], 1),
               lambda x: fl.amax(x, 1), lambda x: fl.max(x, 1), lambda x: fl.var(x, 1), lambda x: fl.norm(x, 2, 1),
               lambda x: fl.logsumexp(x, 1), lambda x: fl.cumsum(x, 1), lambda x: fl.nansum(x, 1),
               lambda x: fl.median(x, 1)):
        _same(fn(g), fn(c), rtol=2e-3, atol=1e-3)


def test_integer_and_bool_dtypes():
    h = RNG.integers(-5, 5, (3, 7)).astype(np.int32)
    c, g = _pair(h)
    for fn in (lambda x: x.sum(1), lambda x: fl.prod(x, 1), lambda x: fl.amax(x), lambda x: fl.max(x, 0),
               lambda x: fl.cumsum(x, 1), lambda x: fl.cumprod(x, 0), lambda x: fl.all(x, 1), lambda x: fl.any(x),
               lambda x: fl.count_nonzero(x, 0), lambda x: fl.sum(x > 0, 1), lambda x: fl.amax(x > 0, 1),
               lambda x: fl.cumsum(x > 0, 1), lambda x: fl.mean(x, 1, dtype=fl.float32)):
        _same(fn(g), fn(c))
    u = fl.tensor(np.array([[0, 3], [2, 1]], np.uint8))
    _same(fl.all(u.cuda(), 1), fl.all(u, 1))
    _same(fl.any(u.cuda()), fl.any(u))


def test_empty_and_zero_dim():
    e_c, e_g = _pair(np.zeros((0, 3)))
    for fn in (lambda x: x.sum(0), lambda x: fl.prod(x, 0), lambda x: x.mean(0), lambda x: fl.all(x, 0),
               lambda x: fl.any(x), lambda x: fl.count_nonzero(x), lambda x: fl.logsumexp(x, 0),
               lambda x: fl.norm(x, 2, 0), lambda x: fl.norm(x, -math.inf, 0), lambda x: fl.var(x, 0),
               lambda x: fl.median(x), lambda x: fl.cumsum(x, 0), lambda x: fl.cummax(x, 1), lambda x: fl.nansum(x, 0)):
        _same(fn(e_g), fn(e_c))
    s_c, s_g = _pair(np.array(2.5))
    for fn in (lambda x: fl.max(x, 0), lambda x: fl.argmax(x, 0, keepdim=True), lambda x: fl.cumsum(x, 0),
               lambda x: fl.cummin(x, 0), lambda x: fl.median(x, 0), lambda x: fl.mode(x, 0), lambda x: fl.sum(x),
               lambda x: fl.amax(x, 0), lambda x: fl.logsumexp(x, 0), lambda x: fl.argmax(x)):
        _same(fn(s_g), fn(s_c))
    i_c, i_g = _pair(np.arange(6).reshape(2, 3))
    _same(fl.logsumexp(i_g, 1), fl.logsumexp(i_c, 1))


def test_keepdim_and_dim_lists():
    c, g = _pair(RNG.normal(size=(2, 3, 4)))
    for fn in (lambda x: fl.sum(x, (0, 2), keepdim=True), lambda x: fl.amin(x, (-1, 0)),
               lambda x: fl.argmax(x, 1, True), lambda x: fl.argmin(x, keepdim=True),
               lambda x: fl.max(x, -1, keepdim=True),
               lambda x: fl.median(x, 1, keepdim=True), lambda x: fl.var(x, (0, 1), keepdim=True),
               lambda x: fl.aminmax(x, dim=0, keepdim=True), lambda x: fl.all(x > -1, (1, 2), True)):
        _same(fn(g), fn(c))


GRAD = {
    "sum": lambda x: x.sum(1), "mean": lambda x: x.mean(), "prod": lambda x: fl.prod(x, 1),
    "amax": lambda x: fl.amax(x, 1), "max": lambda x: fl.max(x, 0).values, "var": lambda x: fl.var(x, 1),
    "std": lambda x: fl.std(x), "logsumexp": lambda x: fl.logsumexp(x, 1), "norm": lambda x: fl.norm(x, 3, 1),
    "cumsum": lambda x: fl.cumsum(x.T, 1), "cumprod": lambda x: fl.cumprod(x, 0),
    "cummax": lambda x: fl.cummax(x, 1).values, "median": lambda x: fl.median(x, 1).values,
    "nanmean": lambda x: fl.nanmean(x, 0),
}


@pytest.mark.parametrize("name", list(GRAD))
def test_backward_matches_cpu(name):
    h = RNG.uniform(0.5, 2.0, (3, 4))
    grads = []
    for dev in ("cpu", "cuda"):
        x = fl.tensor(h, device=dev, requires_grad=True)
        GRAD[name](x).sum().backward()
        assert x.grad.device.type == dev
        grads.append(x.grad.cpu().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-9)


def test_errors_match_cpu():
    for dev in ("cpu", "cuda"):
        i = fl.tensor([[1, 2], [3, 4]], device=dev)
        with pytest.raises(RuntimeError, match="floating point"):
            fl.var(i)
        with pytest.raises(RuntimeError, match="mean"):
            fl.mean(i)
        with pytest.raises(RuntimeError, match="bool"):
            fl.argmax(i > 1)
        e = fl.zeros(0, 2, device=dev)
        with pytest.raises(IndexError):
            fl.max(e, 0)
        with pytest.raises(RuntimeError):
            fl.amax(e)
        with pytest.raises(RuntimeError, match="aminmax"):
            fl.aminmax(e)
        with pytest.raises(IndexError):
            fl.sum(i, 2)


def test_no_host_synchronisation():
    g = fl.tensor(RNG.normal(size=(3, 20)), device="cuda")
    before = fl.cuda.host_sync_count()
    outs = [g.sum(), fl.max(g, 1), fl.argmax(g), fl.var(g, 1), fl.logsumexp(g, 1), fl.norm(g, 3), fl.cumsum(g, 1),
            fl.cummax(g, 0), fl.median(g), fl.median(g, 1), fl.mode(g, 1), fl.all(g, 1), fl.aminmax(g),
            fl.nanmean(g, 1), fl.prod(g, 1), fl.count_nonzero(g)]
    assert fl.cuda.host_sync_count() == before
    assert len(outs) == 16


# --- column tiles (Note [Column tiles]) ------------------------------------------------------------------
def _record_columns(monkeypatch) -> list:
    from flambeau._kernels.cuda import reduction

    modes = []
    kernel = reduction.columns_kernel

    def recording(name, acc, mode, two=False, tile=reduction.COLUMN_TILE):
        modes.append(mode)
        return kernel(name, acc, mode, two, tile)

    monkeypatch.setattr(reduction, "columns_kernel", recording)
    # plans made before kept their kernels (Note [Reduction plans]): a cache of this test's own
    monkeypatch.setattr(reduction, "_plan", functools.lru_cache(maxsize=None)(reduction._plan.__wrapped__))
    return modes


@pytest.mark.cudasim(reason="tiny shapes take this path with the simulator's blocks of 2 to 8 threads (a GPU's take "
                            "it in test_large_shapes_gpu.py)")
@pytest.mark.parametrize("shape, dims", [((70, 3), 0), ((70, 3, 1), 0), ((9, 10, 3), (0, 1))])
def test_column_tiles_match_cpu(shape, dims, monkeypatch):
    """Reductions over more leading rows than the tree reduction takes in one launch (64 under the simulator),
    whose outputs lie side by side, reduce in column tiles (2 x 2 threads under the simulator, where 4 outputs
    or more take one thread each), split over partial tiles: every kind of op state, NaN, ties to the first
    index, integers."""
    modes = _record_columns(monkeypatch)
    h = RNG.integers(-3, 4, shape).astype(np.float32)  # small integers: ties for max/argmax
    h.reshape(-1)[5] = np.nan
    c, d = _pair(h)
    ci, di = _pair(np.nan_to_num(h).astype(np.int64))
    for fn in (lambda t: t.sum(dims), lambda t: t.mean(dims), lambda t: t.nansum(dims), lambda t: t.amax(dims),
               lambda t: t.var(dims), lambda t: t.logsumexp(dims)):
        _same(fn(d), fn(c))
    if not isinstance(dims, tuple):
        _same((d / 4).prod(dims), (c / 4).prod(dims))
        _same(tuple(d.max(dims)), tuple(c.max(dims)))
        _same(di.argmax(dims), ci.argmax(dims))
        _same(di.min(dims)[1], ci.min(dims)[1])
    _same(di.sum(dims), ci.sum(dims))
    assert modes and set(modes) == {"partial", "parts"}, modes


@pytest.mark.cudasim(reason="tiny shapes take this path with the simulator's blocks of 2 to 8 threads (a GPU's take "
                            "it in test_large_shapes_gpu.py)")
def test_column_tiles_keep_their_partial_states_bounded(monkeypatch):
    """A split column reduction holds at most ``MAX_PARTIALS`` partial states: with many columns it splits
    less (here 2 parts instead of 5, or none: one launch in mode "final"), and the result is the same."""
    from flambeau._kernels.cuda import _launch, reduction

    modes = _record_columns(monkeypatch)
    grids = []
    launch = reduction.launch_keyed

    def spy(kernel, config, key, *args):
        grids.append(config[0])
        return launch(kernel, config, key, *args)

    monkeypatch.setattr(reduction, "launch_keyed", spy)
    c, d = _pair(RNG.standard_normal((70, 3)).astype(np.float32))
    ci, di = _pair(RNG.integers(-3, 4, (70, 3)))
    for bound, want in ((6, [(2, 2), (2, 1)]), (3, [(2, 1)])):
        monkeypatch.setattr(_launch, "MAX_PARTIALS", bound)
        reduction._plan.cache_clear()  # (a plan keeps the split it was made with)
        grids.clear()
        _same(d.sum(0), c.sum(0))
        assert grids == want, (bound, grids)  # 2 tiles of 2 columns; 2 parts, then 1 (5 without the bound)
        _same(di.argmax(0), ci.argmax(0))
    assert "final" in modes
