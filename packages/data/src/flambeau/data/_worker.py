"""What runs inside a DataLoader worker process, and what the worker tells the main process.

A worker (:func:`_worker_loop`) seeds its random number generators, sets :data:`_worker_info`
(read by :func:`get_worker_info`), then serves ``(task_idx, index)`` messages from its index
queue: it fetches and collates the batch and puts ``(task_idx, batch)`` on the shared result
queue. An exception becomes an :class:`ExceptionWrapper` (type and formatted traceback) that the
main process re-raises; the end of an iterable dataset becomes :class:`_IterableDatasetStopIteration`.
``None`` on the index queue stops the worker; :class:`_ResumeIteration` restarts the fetcher for
a new epoch of persistent workers. This mirrors ``torch.utils.data._utils.worker``.
"""

from __future__ import annotations

import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper"]

# How often a worker waiting for work checks that the main process is alive and has not asked the
# workers to stop (seconds). The stop request also comes as None on the index queue, but that
# message is lost when the main process's queue objects are collected before the iterator (a
# reference cycle through a traceback), so the done event is checked too.
_WORKER_POLL_INTERVAL = 0.25


@dataclass(frozen=True)
class WorkerInfo:
    """What :func:`get_worker_info` returns inside a DataLoader worker process.

    Attributes:
        id: the worker's id, in ``[0, num_workers - 1]``.
        num_workers: the number of workers of the loader.
        seed: the worker's random seed (``base_seed + id``, where the loader draws ``base_seed``
            from its ``generator`` at each new iterator); ``random``, ``flambeau``'s default
            generator and numpy's legacy global generator are seeded from it.
        dataset: the worker's copy of the dataset.
    """

    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The :class:`WorkerInfo` of the current DataLoader worker process, or None in the main process.

    Use it in an :class:`~flambeau.data.IterableDataset`'s ``__iter__`` or in ``worker_init_fn``
    to give each worker its own share of a stream, or to seed other libraries per worker.
    """
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker (or the pin-memory thread), carried as its type and traceback text.

    Args:
        exc_info: ``sys.exc_info()`` of the exception (the current one if None).
        where: where it was caught, e.g. ``"in DataLoader worker process 0"``.
    """

    def __init__(self, exc_info=None, where: str = "in background") -> None:
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        """Raise an exception of the original type whose message holds the original traceback."""
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)  # KeyError would print the message with escaped newlines
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


class _KeyErrorMessage(str):
    def __repr__(self):
        return self


@dataclass(frozen=True)
class _IterableDatasetStopIteration:
    """A worker's iterable dataset is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class _ResumeIteration:
    """Start a new epoch (persistent workers): recreate the fetcher, then acknowledge."""


def _generate_state(base_seed: int, worker_id: int) -> list[int]:
    """The 4 x 32-bit seed of numpy's legacy global generator in a worker (torch's algorithm,
    numpy's SeedSequence mixing of ``[worker_id, base_seed]``), so workers get distinct streams."""
    INIT_A, MULT_A, INIT_B, MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
    MIX_MULT_L, MIX_MULT_R, XSHIFT, MASK32 = 0xCA01F9DD, 0x4973F715, 16, 0xFFFFFFFF
    entropy = [worker_id, base_seed & MASK32, base_seed >> 32, 0]
    pool = [0] * 4
    hash_const_a = INIT_A

    def hash_(value):
        nonlocal hash_const_a
        value = (value ^ hash_const_a) & MASK32
        hash_const_a = (hash_const_a * MULT_A) & MASK32
        value = (value * hash_const_a) & MASK32
        return (value ^ (value >> XSHIFT)) & MASK32

    def mix(x, y):
        r = (((MIX_MULT_L * x) & MASK32) - ((MIX_MULT_R * y) & MASK32)) & MASK32
        return (r ^ (r >> XSHIFT)) & MASK32

    for i in range(4):
        pool[i] = hash_(entropy[i])
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hash_(pool[i_src]))
    hash_const_b = INIT_B
    state = []
    for i_dst in range(4):
        v = (pool[i_dst] ^ hash_const_b) & MASK32
        hash_const_b = (hash_const_b * MULT_B) & MASK32
        v = (v * hash_const_b) & MASK32
        state.append((v ^ (v >> XSHIFT)) & MASK32)
    return state


# Note [Worker heap]
#     A worker allocates and frees about a batch of memory per batch (the samples), and glibc's
#     default policy gives the top of the heap back to the kernel once more than a small, dynamic
#     threshold is free, so the next batch's samples page-fault all over again (measured: 3-5x
#     slower numpy copies of 600 KB samples on a VM where faults are expensive). Workers raise
#     the trim threshold to 256 MiB and fix the mmap threshold at 32 MiB, glibc's own dynamic
#     maximum, so samples come from a heap that stays mapped. Skipped where the user already set
#     MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_, or without glibc.
def _tune_worker_heap() -> None:
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 32 << 20)
        libc.mallopt(m_trim_threshold, 256 << 20)
    except (OSError, AttributeError):
        pass


def _seed_worker(base_seed: int, worker_id: int) -> int:
    import numpy as np

    import flambeau as fl

    seed = base_seed + worker_id
    random.seed(seed)
    fl.manual_seed(seed)
    np.random.seed(_generate_state(base_seed, worker_id))
    return seed


def _worker_loop(dataset_kind, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn,
                 drop_last, base_seed, init_fn, worker_id, num_workers) -> None:
    """The body of a worker process (see the module docstring)."""
    global _worker_info
    from flambeau.data._fetch import create_fetcher

    try:
        try:
            import flambeau as fl

            fl.set_num_threads(1)  # num_workers processes share the cores, as torch's workers do
        except Exception:
            pass
        _tune_worker_heap()
        seed = _seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_exception = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_exception = ExceptionWrapper(where=where)
        iteration_end = False
        manager_pid = os.getppid()
        while os.getppid() == manager_pid:  # the main process died: stop
            try:
                r = index_queue.get(timeout=_WORKER_POLL_INTERVAL)
            except queue.Empty:
                if done_event.is_set():
                    break
                continue
            if isinstance(r, _ResumeIteration):
                data_queue.put((r, None))
                iteration_end = False
                try:
                    fetcher = create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
                except Exception:
                    init_exception = ExceptionWrapper(where=where)
                continue
            if r is None:
                break
            if done_event.is_set() or iteration_end:
                continue
            idx, index = r
            if init_exception is not None:
                data, init_exception = init_exception, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if dataset_kind == 1:  # iterable: this worker's stream is exhausted
                        data = _IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                    else:
                        data = ExceptionWrapper(where=where)
                except Exception:
                    data = ExceptionWrapper(where=where)
            data_queue.put((idx, data))
            del data, idx, index, r  # do not keep a batch (and its shared memory) alive while waiting
    except KeyboardInterrupt:
        pass  # the main process handles Ctrl-C and shuts the workers down
