"""One worker thread per CUDA device runs backward passes on that device (paper, section 5.2).

CPU backward runs in the calling thread. When the roots of a backward live on a CUDA device,
the graph is executed by that device's worker thread, so device work from several callers is
serialised on one thread that keeps the device's queue fed, while the caller waits. A backward
started from the worker itself (reentrant backward inside a custom Function) runs inline.
"""

from __future__ import annotations

import queue
import threading

from flambeau.autograd import _anomaly

__all__ = ["run_on_device"]

_workers: dict = {}
_lock = threading.Lock()


class _Worker(threading.Thread):
    def __init__(self, device):
        super().__init__(name=f"flambeau-autograd-{device}", daemon=True)
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            fn, anomaly, box, done = self.tasks.get()
            _anomaly._state.enabled, _anomaly._state.check_nan = anomaly
            try:
                box.append((True, fn()))
            except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
                box.append((False, e))
            finally:
                done.set()


def _worker_for(device) -> _Worker:
    with _lock:
        w = _workers.get(device)
        if w is None or not w.is_alive():
            w = _workers[device] = _Worker(device)
            w.start()
        return w


def run_on_device(device, fn):
    """Run ``fn()`` on ``device``'s worker thread and return its result (re-raising its exception)."""
    worker = _worker_for(device)
    if threading.current_thread() is worker:
        return fn()  # reentrant backward
    box: list = []
    done = threading.Event()
    worker.tasks.put((fn, (_anomaly._state.enabled, _anomaly._state.check_nan), box, done))
    done.wait()
    ok, value = box[0]
    if not ok:
        raise value
    return value
