"""numpy's BLAS on one thread for the duration of a block.

Note [Threads over work items, not inside BLAS]: a loop of small GEMMs (one per image of a
convolution, per attention head, per recurrent step) with a multi-threaded BLAS pays a thread
hand-off on every call and stalls each GEMM on its slowest thread; alternating with numba's threads
for the work in between, OpenBLAS's spinning threads and numba's fight over the cores. On a busy
2-core machine that made convolutions 4-20x and attention 10-100x slower. Like torch's CPU
kernels, flambeau splits such loops over its own threads (``_parallel.run_chunks``) with BLAS on one
thread meanwhile. threadpoolctl finds and sets the thread count of whichever BLAS numpy loaded.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading

__all__ = ["blas_is_controllable", "shorten_openblas_spin", "single_threaded_blas"]

# Note [OpenBLAS's idle threads]: after each multi-threaded call OpenBLAS's worker threads keep
# spinning for 2**28 cycles (about 0.1 s) before they sleep. Every numba kernel and every chunk of
# flambeau's thread pool that runs in that window shares the cores with them: a LeNet training step
# on 2 cores took 110-126 ms against 73-93 ms with the spin cut to 2**4 cycles (and the spinning
# threads slowed the next library in the process as much: torch's steps after flambeau's were up to
# 1.7x slower). OpenBLAS reads OPENBLAS_THREAD_TIMEOUT (log2 of the cycles) when it loads, and again
# when its threads restart; flambeau sets it unless the user already has. Large GEMMs lose nothing
# (waking a sleeping thread costs microseconds; their calls take milliseconds) and small ones run
# on one BLAS thread anyway (Note [Threads over work items, not inside BLAS]).
_SPIN_LOG2_CYCLES = "4"

_lock = threading.Lock()
_depth = 0
_saved: list = []  # (library controller, its thread count before the outermost block)


@functools.cache
def _controllers() -> tuple:
    """threadpoolctl's handles on numpy's BLAS (empty where it cannot be controlled).

    Only the library numpy links (the one in numpy's wheel directories when there is one): other
    BLAS copies load later and at times that vary (numba's compiler brings scipy's), and flambeau
    calls BLAS through numpy alone.
    """
    try:
        import numpy
        from threadpoolctl import ThreadpoolController

        found = ThreadpoolController().select(user_api="blas").lib_controllers
    except Exception:  # threadpoolctl missing or unable to inspect this process
        return ()
    here = os.path.dirname(numpy.__file__)
    numpy_dirs = (here + os.sep, os.path.join(os.path.dirname(here), "numpy.libs") + os.sep)
    own = [c for c in found if c.filepath and c.filepath.startswith(numpy_dirs)]
    return tuple(own or found)


def blas_is_controllable() -> bool:
    """Whether :func:`single_threaded_blas` can change numpy's BLAS thread count here."""
    return bool(_controllers())


@contextlib.contextmanager
def single_threaded_blas():
    """Run the block with numpy's BLAS on one thread; nested and concurrent uses share one limit.

    The previous thread count comes back when the last block (of any thread) exits. A no-op where
    the BLAS cannot be controlled. Each library's own get/set calls are used directly (about 1 µs
    each; a ``threadpoolctl`` limiter object costs several times that, on every convolution).
    """
    global _depth, _saved
    controllers = _controllers()
    if not controllers:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = [(c, c.get_num_threads()) for c in controllers]
            for c, n in _saved:
                if n != 1:
                    c.set_num_threads(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for c, n in _saved:
                    if n != 1:
                        c.set_num_threads(n)
                _saved = []


def shorten_openblas_spin() -> None:
    """Make OpenBLAS's idle threads sleep at once (Note [OpenBLAS's idle threads]); called at import.

    Before numpy is loaded the environment variable is enough. When numpy (and its OpenBLAS) is
    loaded already, the library re-reads its environment and restarts its threads, which is what
    its own fork handler does; a library without those entry points is left as it is.
    """
    if "OPENBLAS_THREAD_TIMEOUT" in os.environ:
        return  # the user's choice
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = _SPIN_LOG2_CYCLES
    if "numpy" not in sys.modules:
        return
    try:
        with open("/proc/self/maps") as maps:
            paths = {fields[-1] for fields in map(str.split, maps)
                     if len(fields) == 6 and "openblas" in fields[-1].lower() and ".so" in fields[-1]}
    except OSError:  # not Linux
        return
    import ctypes

    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            read_env, restart = lib.openblas_read_env, lib.blas_thread_shutdown_
        except (OSError, AttributeError):
            continue
        read_env()
        restart()  # the threads start again, with the new timeout, at the next threaded call
