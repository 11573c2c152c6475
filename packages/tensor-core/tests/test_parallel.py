"""Intra-op parallelism: thread settings, chunked elementwise results, and the pool across fork."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
from importlib import metadata

import numpy as np
import pytest

import flambeau as fl
from flambeau._parallel import PARALLEL_MIN_ELEMENTS
from flambeau._threading_layer import FORK_SAFE_LAYERS

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


# --- numba's threading layer (Note [numba's threading layer]) -------------------------------------
LAYER_PROBE = """
import json, os, sys
if {numba_first}:
    import numba
import flambeau as fl
import numba
fl.exp(fl.ones(10**6))  # a parallel numba kernel starts numba's threads
layer = numba.threading_layer()
pid = os.fork() if hasattr(os, "fork") else None
if pid == 0:  # a forked child runs a parallel kernel too (GNU OpenMP's layer aborts it here)
    os._exit(0 if float(fl.exp(fl.ones(10**6)).sum()) > 0 else 3)
status = os.waitpid(pid, 0)[1] if pid else 0
print(json.dumps({{"layer": layer, "child": status, "tbb": fl._threading_layer.tbb_library()}}))
"""


def _probe_layer(numba_first: bool, **env_overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING_LAYER")}
    env.update(env_overrides)
    proc = subprocess.run([sys.executable, "-c", LAYER_PROBE.format(numba_first=numba_first)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _tbb_declared() -> bool:
    """Whether tensor-core installs the tbb wheel on this platform (its pyproject's marker)."""
    try:
        metadata.distribution("tbb")
    except metadata.PackageNotFoundError:
        return platform.machine().lower() in ("x86_64", "amd64")  # declared there, so it must be installed
    return True


@pytest.mark.parametrize("numba_first", [False, True], ids=["flambeau-first", "numba-first"])
def test_parallel_kernels_run_on_a_fork_safe_layer(numba_first):
    """In a fresh interpreter, with no variable set: TBB where its wheel installs, and fork works."""
    result = _probe_layer(numba_first)
    assert result["layer"] in FORK_SAFE_LAYERS, result
    if _tbb_declared():
        assert result["layer"] == "tbb", f"tbb is installed but numba runs on {result['layer']}"
        assert result["tbb"] and os.path.isfile(result["tbb"])
    assert result["child"] == 0, f"the forked child died (wait status {result['child']})"


@pytest.mark.parametrize("value, expected", [("1", 1), ("3", 3), ("", None), ("0", None), ("x", None)])
def test_default_threads_follow_omp_num_threads(value, expected):
    """As torch: a launcher's OMP_NUM_THREADS=1 per process must not be oversubscribed by flambeau's pool."""
    env = dict(os.environ, OMP_NUM_THREADS=value)
    code = "import os, flambeau as fl; print(fl.get_num_threads(), min(os.cpu_count() or 1, 16))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    got, cpus = map(int, proc.stdout.split())
    assert got == (expected or cpus)


def test_warns_when_numba_started_unsafe_threads_before_flambeau():
    """numba.set_num_threads before import flambeau fixes the layer: say so rather than abort children later."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING_LAYER")}
    env["NUMBA_THREADING_LAYER"] = "omp"  # the layer a plain venv would pick without flambeau
    code = "import numba; numba.set_num_threads(1); import flambeau"
    proc = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "threads were started on its 'omp' threading layer before flambeau was imported" in proc.stderr


def test_threading_layer_the_user_names_is_kept():
    assert _probe_layer(False, NUMBA_THREADING_LAYER="workqueue")["layer"] == "workqueue"


# --- the vectorised float32 exp (flambeau._kernels.cpu._fast_exp) ----------------------------------
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
