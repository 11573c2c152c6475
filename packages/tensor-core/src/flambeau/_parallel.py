"""Intra-op parallelism on the CPU: ``get_num_threads``/``set_num_threads`` and chunked execution.

numpy's ufuncs run on one thread but release the GIL, so a large elementwise operation can be
split into contiguous chunks computed by a small pool of threads at once (torch parallelises the
same operators with OpenMP). numba kernels use numba's own threads, which ``set_num_threads``
configures too. The pool is rebuilt in a forked child, whose copy of the parent's pool has no
threads behind it; numba's threads survive a fork only with its TBB threading layer (GNU OpenMP
aborts the child), which is why tensor-core depends on ``tbb``.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["get_num_threads", "set_num_threads"]

# Below this many elements, handing chunks to threads costs more than it saves (measured: ~20 µs
# per hand-off against ~0.2 ns per element of an add).
PARALLEL_MIN_ELEMENTS = 1 << 18

def _default_threads() -> int:
    """``OMP_NUM_THREADS`` when set to a positive integer (as torch's intra-op default), else the CPU count.

    Launchers that start one process per core (``flambeau.distributed.run``, torchrun, mpiexec
    scripts) set it so that the processes do not oversubscribe the cores.
    """
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.strip().isdigit() and int(value) > 0:
        return int(value)
    return max(1, min(os.cpu_count() or 1, 16))


_state = {"threads": _default_threads(), "pool": None}
_lock = threading.Lock()


def get_num_threads() -> int:
    """Number of threads flambeau's CPU operators use (``OMP_NUM_THREADS`` if set, else the CPU count)."""
    return _state["threads"]


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for CPU operators (chunked elementwise operations and numba kernels)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {n!r}")
    with _lock:
        _state["threads"] = n
        _shutdown_pool()
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def _shutdown_pool() -> None:
    pool = _state["pool"]
    _state["pool"] = None
    if pool is not None:
        pool.shutdown(wait=False)


def _pool() -> ThreadPoolExecutor:
    pool = _state["pool"]
    if pool is None:
        with _lock:
            pool = _state["pool"]
            if pool is None:
                pool = _state["pool"] = ThreadPoolExecutor(max_workers=_state["threads"] - 1,
                                                           thread_name_prefix="flambeau-cpu")
    return pool


def _forget_pool_in_child() -> None:
    _state["pool"] = None  # the parent's threads do not exist in a forked child


os.register_at_fork(after_in_child=_forget_pool_in_child)


def run_chunks(work, n_items: int) -> None:
    """Call ``work(start, stop)`` over ``[0, n_items)`` split into one chunk per thread.

    The calling thread computes the first chunk; exceptions of any chunk propagate. Each worker's chunk runs in
    a copy of the caller's context (its context variables: numpy's error state among them, which the CPU
    kernels set to "ignore", Note [Quiet floating-point errors]); a pool thread's own context is not the
    caller's.
    """
    n = _state["threads"]
    bounds = [n_items * i // n for i in range(n + 1)]
    pool = _pool()
    futures = [pool.submit(contextvars.copy_context().run, work, bounds[i], bounds[i + 1]) for i in range(1, n)]
    try:
        work(bounds[0], bounds[1])
    finally:
        for f in futures:
            f.result()
