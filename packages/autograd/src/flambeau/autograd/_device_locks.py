"""Backward passes over CUDA graphs run one at a time per device, in the calling thread.

Note [Backward in the calling thread]
    torch runs a CUDA graph's backward on a worker thread per device, so that one thread keeps the device's
    queue fed and several callers' device work is serialised (paper, section 5.2). flambeau did the same
    until a GPU showed its price: Python threads take turns under the GIL, so the worker overlapped nothing,
    and handing it the graph made a ResNet-18 training step take 21.6 ms instead of 15.2 ms inline (an H200's
    host, ``tools/gpu_spy.py``). The backward's Python ran 25-50% slower on the worker, uniformly across its
    functions: its objects were made by the forward on another core, whose caches held them (the fake device
    of ``tools/host_overhead.py`` shows it as well: 5.4 ms of a ResNet-18 backward's CPU time on the worker,
    3.5 ms inline, on a Xeon).
    So the calling thread runs the backward itself, holding its device's lock: callers on several threads are
    still serialised per device, a reentrant backward (a custom Function's backward that calls backward)
    enters the lock again, and the backward runs with the graph's device current (the engine makes it so) and on
    that device's current stream of the calling thread, where its forward most often ran. It keeps the caller's
    thread-local modes (grad, anomaly, autocast, saved-tensor hooks), as the CPU's backward does.
"""

from __future__ import annotations

import threading

__all__ = ["run_serialised"]

_locks: dict = {}  # device -> its reentrant lock
_locks_guard = threading.Lock()


def _lock_for(device) -> threading.RLock:
    lock = _locks.get(device)
    if lock is None:
        with _locks_guard:
            lock = _locks.setdefault(device, threading.RLock())
    return lock


def run_serialised(device, fn):
    """``fn()`` in the calling thread, while no other thread runs a backward on ``device``; its result."""
    with _lock_for(device):
        return fn()
