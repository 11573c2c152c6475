"""Pinned (page-locked) host memory for loaded batches, so that ``.to('cuda', non_blocking=True)``
can overlap the copy with compute.

:func:`pin_memory` walks a batch and pins every tensor (``Tensor.pin_memory()``, which takes its
memory from flambeau.cuda's pinned allocation). With workers, :func:`_pin_memory_loop` runs in a
thread of the main process between the workers' result queue and the iterator, as torch's
``_utils.pin_memory`` does.
"""

from __future__ import annotations

import queue

import flambeau as fl
from flambeau.data._collate import map_containers
from flambeau.data._worker import ExceptionWrapper

_POLL = 0.1


def pin_memory(data):
    """``data`` with every tensor replaced by its pinned copy (structure kept as in :func:`default_convert`)."""
    if isinstance(data, fl.Tensor):
        return data.pin_memory()
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    return map_containers(data, pin_memory, tuple_to_list=False)


def _pin_memory_loop(in_queue, out_queue, done_event) -> None:
    """Thread body: move ``(idx, batch)`` from ``in_queue`` to ``out_queue``, pinning the batch."""
    while not done_event.is_set():
        try:
            r = in_queue.get(timeout=_POLL)
        except queue.Empty:
            continue
        except (OSError, EOFError, ValueError):  # the queue was closed under us: shutting down
            return
        idx, data = r
        if not done_event.is_set() and not isinstance(data, ExceptionWrapper):
            try:
                data = pin_memory(data)
            except Exception:
                data = ExceptionWrapper(where="in pin memory thread")
            r = (idx, data)
        while not done_event.is_set():
            try:
                out_queue.put(r, timeout=_POLL)
                break
            except queue.Full:
                continue
        del r, idx, data
