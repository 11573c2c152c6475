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
import threading

__all__ = ["blas_is_controllable", "single_threaded_blas"]

_lock = threading.Lock()
_depth = 0
_limiter = None


@functools.cache
def _controller():
    """threadpoolctl's handle on numpy's BLAS libraries, or None where none can be controlled."""
    try:
        import numpy  # noqa: F401 - loads the BLAS that threadpoolctl should find
        from threadpoolctl import ThreadpoolController

        blas = ThreadpoolController().select(user_api="blas")
    except Exception:  # threadpoolctl missing or unable to inspect this process
        return None
    return blas if blas.lib_controllers else None


def blas_is_controllable() -> bool:
    """Whether :func:`single_threaded_blas` can change numpy's BLAS thread count here."""
    return _controller() is not None


@contextlib.contextmanager
def single_threaded_blas():
    """Run the block with numpy's BLAS on one thread; nested and concurrent uses share one limit.

    The previous thread count comes back when the last block (of any thread) exits. A no-op where
    the BLAS cannot be controlled.
    """
    global _depth, _limiter
    ctl = _controller()
    if ctl is None:
        yield
        return
    with _lock:
        if _depth == 0:
            _limiter = ctl.limit(limits=1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _limiter.restore_original_limits()
                _limiter = None
