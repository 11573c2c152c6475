"""Intra-op parallelism: thread settings, chunked elementwise results, and the pool across fork."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

import flambeau as fl
from flambeau._parallel import PARALLEL_MIN_ELEMENTS

N = PARALLEL_MIN_ELEMENTS + 17  # large enough for the parallel paths, and not a multiple of the chunk count


@pytest.fixture
def threads():
    saved = fl.get_num_threads()
    yield fl.set_num_threads
    fl.set_num_threads(saved)


def test_set_num_threads_validates(threads):
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="positive integer"):
            fl.set_num_threads(bad)
    threads(3)
    assert fl.get_num_threads() == 3


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_elementwise_results_do_not_depend_on_threads(threads, n, dtype):
    threads(n)
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(N).astype(dtype), rng.standard_normal(N).astype(dtype) + 3
    x, y = fl.from_numpy(a), fl.from_numpy(b)
    np.testing.assert_array_equal((x + y).numpy(), a + b)
    np.testing.assert_array_equal((x - 2.5).numpy(), a - dtype(2.5))
    np.testing.assert_array_equal((2.5 - x).numpy(), dtype(2.5) - a)
    np.testing.assert_array_equal((x * y).numpy(), a * b)
    np.testing.assert_array_equal((x / y).numpy(), a / b)
    np.testing.assert_allclose(fl.exp(x).numpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(fl.sin(x.reshape(-1, 1)).numpy(), np.sin(a.reshape(-1, 1)), rtol=1e-6)
    out = x.clone()
    out.add_(y)
    np.testing.assert_array_equal(out.numpy(), a + b)


def test_large_non_contiguous_and_mixed_dtype_fall_back(threads):
    threads(2)
    a = np.arange(2 * N, dtype=np.float32).reshape(2, N)
    x = fl.from_numpy(a)
    np.testing.assert_array_equal((x.t() + 1).numpy(), a.T + 1)  # transposed: serial path
    np.testing.assert_array_equal((x + fl.ones(N, dtype=fl.float64)).numpy(), a + 1.0)


def test_no_warning_from_worker_threads(threads, recwarn):
    threads(2)
    x = fl.zeros(N)
    assert bool(fl.isnan(fl.log(x) - fl.log(x)).all())
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def _child(q):
    x = fl.ones(N)
    q.put(float(fl.exp(x).sum()))


def test_pool_works_in_a_forked_child(threads):
    threads(2)
    fl.exp(fl.ones(N))  # start the parent's pool before forking
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    try:
        value = q.get(timeout=60)  # a fork-unsafe threading layer hangs or aborts the child here
        p.join(timeout=60)
    finally:
        if p.is_alive():
            p.kill()
            p.join()
        q.close()
    assert p.exitcode == 0 and value == pytest.approx(N * np.e, rel=1e-5)


# --- the vectorised float32 exp (flambeau._ops._fast_exp) ------------------------------------------
SPECIALS = np.array([np.nan, np.inf, -np.inf, 88.72, 88.73, -87.5, -100.0, -103.9, -104.5, 0.0, -0.0, 1.0, -1.0],
                    np.float32)


def _ulps(got, want):
    """Distance in units in the last place between float32 arrays (finite values)."""
    g, w = got.view(np.int32).astype(np.int64), want.view(np.int32).astype(np.int64)
    return np.abs(g - w)


def test_fast_exp_accuracy_and_specials(threads):
    threads(2)
    rng = np.random.default_rng(11)
    a = np.concatenate([rng.uniform(-110, 95, N).astype(np.float32), SPECIALS])
    got = fl.exp(fl.from_numpy(a)).numpy()
    with np.errstate(all="ignore"):
        want = np.exp(a.astype(np.float64)).astype(np.float32)  # correctly rounded reference
    finite = np.isfinite(want)
    assert _ulps(got[finite], want[finite]).max() <= 2  # subnormal results included
    assert np.isnan(got[np.isnan(a)]).all()
    assert (got[np.isinf(want)] == np.inf).all()
    assert (got[(a == -np.inf) | (a < -104)] == 0).all()


def test_fast_exp_inplace_and_fallbacks(threads):
    threads(2)
    a = np.linspace(-5, 5, N, dtype=np.float32)
    x = fl.tensor(a)
    x.exp_()
    np.testing.assert_allclose(x.numpy(), np.exp(a), rtol=3e-7)
    strided = fl.tensor(np.stack([a, a], 1)).t()  # non-contiguous: numpy's exp
    np.testing.assert_allclose(fl.exp(strided).numpy(), np.exp(np.stack([a, a])), rtol=3e-7)
    np.testing.assert_allclose(fl.exp(fl.tensor(a, dtype=fl.float64)).numpy(), np.exp(a.astype(np.float64)))
