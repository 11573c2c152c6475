"""DataLoader: batches from a dataset, in the main process or in parallel worker processes.

This is ``torch.utils.data.DataLoader`` with the same arguments, checks and messages. With
``num_workers=0`` batches are fetched in the main process. Otherwise (Note [Worker protocol]) each
worker process has its own index queue and all of them share one result queue; the main process
keeps ``prefetch_factor * num_workers`` tasks outstanding and reorders the results.

Note [Worker protocol]
    The main process sends ``(task_idx, keys)`` to the workers round-robin. A worker puts
    ``(task_idx, batch)`` on the result queue; batches are tensors collated straight into shared
    memory, and the queue (a :mod:`flambeau.multiprocessing` queue) sends them as handles. Results
    that arrive early wait in a reorder buffer (``_task_info``) until their turn, unless
    ``in_order=False``. The main process never blocks on the result queue for more than
    :data:`_POLL_INTERVAL` seconds: each time it comes back empty-handed it checks that every
    worker is alive, so a worker that dies (SIGKILL, segfault) makes ``next()`` raise promptly
    instead of waiting forever for its batch.

Note [Worker shutdown]
    When an iterator ends, is garbage collected, or the program exits (an ``atexit`` hook shuts
    down every live iterator), the main process sets the done event, sends ``None`` to every
    index queue and waits for the workers to exit while it keeps reading (and dropping) results,
    so that no worker is stuck flushing a batch into a full pipe. A worker still alive after
    :data:`_JOIN_TIMEOUT` seconds is terminated. The dropped batches, the reorder buffer and the
    queues go, and with them the shared memory of the batches.
"""

from __future__ import annotations

import atexit
import itertools
import math
import os
import queue
import signal
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterable

import flambeau as fl
from flambeau.data import _worker
from flambeau.data._collate import default_collate, default_convert
from flambeau.data._fetch import ITERABLE, MAP, create_fetcher
from flambeau.data._pin_memory import _pin_memory_loop, pin_memory
from flambeau.data._worker import ExceptionWrapper, get_worker_info
from flambeau.data.dataset import Dataset, IterableDataset
from flambeau.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]

_POLL_INTERVAL = 0.1  # longest wait on the result queue between two checks that the workers live
_JOIN_TIMEOUT = 5.0  # how long a shutdown waits for workers to exit before terminating them

_python_exiting = False
_live_iterators: weakref.WeakSet = weakref.WeakSet()


def _at_exit() -> None:
    """Shut down the workers of every live iterator before multiprocessing's own exit hook runs."""
    global _python_exiting
    for it in list(_live_iterators):
        it._shutdown_workers()
    _python_exiting = True


atexit.register(_at_exit)


def _default_mp_context():
    """flambeau.multiprocessing once it provides processes, the standard library's module until then."""
    try:
        import flambeau.multiprocessing as mp

        if hasattr(mp, "Process") and hasattr(mp, "Queue"):
            return mp
    except ImportError:
        pass
    import multiprocessing

    return multiprocessing


_manager_started_in: list = []


def _start_shared_memory_manager() -> None:
    """Start flambeau.multiprocessing's shared-memory manager in this process, once, before the
    workers are forked, so that they share it instead of each starting its own on its first batch."""
    if _manager_started_in == [os.getpid()]:
        return
    try:
        import flambeau.multiprocessing as mp

        mp.shared_memory_manager_stats()  # starts the daemon if needed
    except Exception:  # noqa: BLE001 - without it each worker starts one: slower, not wrong
        pass
    _manager_started_in[:] = [os.getpid()]


def _accelerator_available() -> bool:
    """Whether a CUDA device is there to make pinned memory worthwhile."""
    try:
        from flambeau import cuda

        return cuda.is_available() and not cuda.is_simulator()
    except Exception:
        return False


class _InfiniteConstantSampler(Sampler):
    """The sampler of an iterable dataset: ``None`` forever (the dataset decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Iterates over batches of a dataset, loaded in the main process or in worker processes.

    Args:
        dataset: a map-style :class:`~flambeau.data.Dataset` or an
            :class:`~flambeau.data.IterableDataset`.
        batch_size: samples per batch (default 1); None disables automatic batching (each
            sample is passed through ``collate_fn``, by default :func:`default_convert`).
        shuffle: reshuffle the data at every epoch (a :class:`RandomSampler` with
            ``generator``); not with ``sampler`` or an iterable dataset.
        sampler: the keys to load (any iterable with ``__len__`` for ``len()``).
        batch_sampler: yields lists of keys; mutually exclusive with ``batch_size``,
            ``shuffle``, ``sampler`` and ``drop_last``.
        num_workers: number of worker processes (0 loads in the main process).
        collate_fn: merges a list of samples into a batch (default :func:`default_collate`).
        pin_memory: copy batches into page-locked memory (needs CUDA; without it a warning is
            issued once and batches are returned unpinned).
        drop_last: drop the last incomplete batch.
        timeout: seconds to wait for a batch from the workers before raising
            ``RuntimeError("DataLoader timed out after N seconds")`` (0: wait for ever; only
            with workers).
        worker_init_fn: called as ``worker_init_fn(worker_id)`` in each worker after seeding,
            before loading.
        multiprocessing_context: a start method name (``'fork'``, ``'spawn'``,
            ``'forkserver'``) or a multiprocessing context (default: flambeau.multiprocessing).
        generator: the :class:`flambeau.Generator` of the ``RandomSampler`` and of the workers'
            base seed.
        prefetch_factor: batches loaded in advance by each worker (default 2 with workers; must
            be None without).
        persistent_workers: keep the workers alive between epochs (needs ``num_workers > 0``).
        pin_memory_device: deprecated, ignored (as in torch).
        in_order: return batches in sampler order; with False a batch is returned as soon as it
            is ready (faster with uneven samples, not reproducible).

    A worker's exception is raised again in the main process, with its type, the worker id and
    the original traceback in the message. Iterate with ``for batch in loader``; ``len(loader)``
    is the number of batches (for an iterable dataset, computed from ``len(dataset)``).
    """

    _initialized = False

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable | None = None, batch_sampler: Sampler | Iterable | None = None,
                 num_workers: int = 0, collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable | None = None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = ITERABLE
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = MAP

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        if sampler is None:
            if self._dataset_kind == ITERABLE:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None
        self._iterator = None
        self._pin_memory_warned = False
        self._initialized = True
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self):
        """The multiprocessing context the workers are started from (None: the default)."""
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx) -> None:
        import multiprocessing as std_mp

        if ctx is not None:
            if self.num_workers <= 0:
                raise ValueError("multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            mp = _default_mp_context()
            if isinstance(ctx, str):
                valid = mp.get_all_start_methods()
                if ctx not in valid:
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{valid!r}, but got multiprocessing_context={ctx!r}")
                ctx = mp.get_context(ctx)
            if not isinstance(ctx, std_mp.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got multiprocessing_context={ctx}")
        self._multiprocessing_context = ctx

    def __setattr__(self, attr, val) -> None:
        if self._initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                          "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        """A new iterator over the batches (with persistent workers: the same one, reset)."""
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._shutdown:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self) -> int:
        """The number of batches (of samples without automatic batching) one epoch yields."""
        if self._dataset_kind == ITERABLE:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self) -> None:
        """Warn when more workers are requested than the CPUs this process may use."""
        if not self.num_workers:
            return
        try:
            cpus = len(os.sched_getaffinity(0))
            checked = True
        except AttributeError:
            cpus, checked = os.cpu_count(), False
        if cpus is None or self.num_workers > cpus:
            suggest = ("DataLoader is not able to compute a suggested max number of worker in current system."
                       if cpus is None else
                       f"Our suggested max number of worker in current system is {cpus}"
                       f"{'' if checked else ' (`cpuset` is not taken into account)'}, which is smaller than what "
                       "this DataLoader is going to create.")
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. {suggest} "
                          "Please be aware that excessive worker creation might get DataLoader running slow or even "
                          "freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
                          stacklevel=2)


class _BaseDataLoaderIter:
    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        if loader.pin_memory and loader.pin_memory_device:
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                          f"ignore pin_memory_device='{loader.pin_memory_device}'.", stacklevel=3)
        available = loader.pin_memory and _accelerator_available()  # asking imports numba.cuda: only if needed
        if loader.pin_memory and not available and not loader._pin_memory_warned:
            loader._pin_memory_warned = True
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                          "memory won't be used.", stacklevel=3)
        self._pin_memory = loader.pin_memory and available
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = int(fl.empty((), dtype=fl.int64).random_(generator=loader.generator).item())
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter: bool = False) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if (self._dataset_kind == ITERABLE and self._IterableDataset_len_called is not None
                and self._num_yielded > self._IterableDataset_len_called):
            msg = (f"Length of IterableDataset {self._dataset} was reported to be {self._IterableDataset_len_called}"
                   f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. ")
            if self._num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly configuring the "
                        "IterableDataset replica at each worker. Please see the flambeau.data.IterableDataset "
                        "documentation for examples.")
            warnings.warn(msg, stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{self.__class__.__name__} cannot be pickled")


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0: timeout only applies to "
                                 "multi-process loading (num_workers > 0)")
        self._fetcher = create_fetcher(self._dataset_kind, self._dataset, self._auto_collation, self._collate_fn,
                                       self._drop_last)

    def _next_data(self):
        index = self._next_index()
        data = self._fetcher.fetch(index)
        if self._pin_memory:
            data = pin_memory(data)
        return data


def _death_message(w) -> str:
    code = w.exitcode
    if code is not None and code < 0:
        try:
            name = signal.strsignal(-code) or f"signal {-code}"
        except ValueError:
            name = f"unknown signal {-code}"
        return f"DataLoader worker (pid {w.pid}) is killed by signal: {name}."
    return (f"DataLoader worker (pid {w.pid}) exited unexpectedly with exit code {code}. Details are lost due to "
            "multiprocessing. Rerunning with num_workers=0 may give better error trace.")


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Loads batches in worker processes (Note [Worker protocol], Note [Worker shutdown])."""

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._shutdown = True  # until the workers exist, there is nothing to shut down
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        if self._prefetch_factor <= 0:
            raise ValueError("prefetch_factor must be positive with num_workers > 0, "
                             f"got prefetch_factor={self._prefetch_factor}")
        ctx = loader.multiprocessing_context or _default_mp_context()
        _start_shared_memory_manager()
        self._worker_result_queue = ctx.Queue()
        self._workers_done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        self._shutdown = False
        _live_iterators.add(self)
        try:
            for i in range(self._num_workers):
                index_queue = ctx.Queue()
                index_queue.cancel_join_thread()  # never block the main process's exit on undelivered keys
                w = ctx.Process(target=_worker._worker_loop,
                                args=(self._dataset_kind, self._dataset, index_queue, self._worker_result_queue,
                                      self._workers_done_event, self._auto_collation, self._collate_fn,
                                      self._drop_last, self._base_seed, loader.worker_init_fn, i,
                                      self._num_workers))
                w.daemon = True
                w.start()
                self._index_queues.append(index_queue)
                self._workers.append(w)
        except BaseException:
            self._shutdown_workers(failed=True)
            raise
        if self._pin_memory:
            self._pin_memory_thread_done_event = threading.Event()
            self._data_queue = queue.Queue()
            t = threading.Thread(target=_pin_memory_loop, daemon=True, name="flambeau_data_pin",
                                 args=(self._worker_result_queue, self._data_queue,
                                       self._pin_memory_thread_done_event))
            t.start()
            self._pin_memory_thread = t
        else:
            self._data_queue = self._worker_result_queue
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter: bool = False) -> None:
        super()._reset(loader, first_iter)
        self._send_idx = 0  # index of the next task to send
        self._rcvd_idx = 0  # index of the next task to return
        self._task_info = {}  # task -> (worker,) while outstanding, (worker, data) once arrived early
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._workers_num_tasks = [0] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            for q in self._index_queues:
                q.put(_worker._ResumeIteration())
            remaining = self._num_workers
            while remaining > 0:  # results of an abandoned epoch arrive first and are dropped
                idx, _ = self._get_data()
                if isinstance(idx, _worker._ResumeIteration):
                    remaining -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    # --- receiving -----------------------------------------------------------------------
    def _check_workers(self) -> None:
        for worker_id, w in enumerate(self._workers):
            if self._workers_status[worker_id] and not w.is_alive():
                msg = _death_message(w)
                self._workers_status[worker_id] = False
                self._shutdown_workers(failed=True)
                raise RuntimeError(msg)

    def _get_data(self):
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            if self._shutdown:
                raise RuntimeError("DataLoader iterator was shut down (a worker failed or the program is exiting)")
            wait = _POLL_INTERVAL if deadline is None else max(0.0, min(_POLL_INTERVAL, deadline - time.monotonic()))
            try:
                return self._data_queue.get(timeout=wait)
            except queue.Empty:
                pass
            self._check_workers()
            if self._pin_memory and not self._pin_memory_thread.is_alive():
                raise RuntimeError("Pin memory thread exited unexpectedly")
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info:
                    if len(info) == 2 or self._workers_status[info[0]]:  # arrived, or its worker still runs
                        break
                    del self._task_info[self._rcvd_idx]  # its worker's stream ended: skip
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                worker_id, data = self._task_info.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if self._dataset_kind == ITERABLE and isinstance(data, _worker._IterableDatasetStopIteration):
                self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                if not self._in_order:
                    worker_id = self._task_info.pop(idx)[0]
                    return self._process_data(data, worker_id)
                self._task_info[idx] += (data,)
            else:
                worker_id = self._task_info.pop(idx)[0]
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)

    def __next__(self):
        try:
            return super().__next__()
        except KeyboardInterrupt:
            self._shutdown_workers(failed=True)
            raise

    def _try_put_index(self) -> None:
        max_tasks = self._prefetch_factor * self._num_workers
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):  # the next active worker, if any
            worker_queue_idx = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_queue_idx]:
                if self._in_order:
                    break
                if self._workers_num_tasks[worker_queue_idx] < max_tasks // sum(self._workers_status):
                    break
        else:
            return
        self._index_queues[worker_queue_idx].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_queue_idx,)
        self._workers_num_tasks[worker_queue_idx] += 1
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _process_data(self, data, worker_id: int):
        self._workers_num_tasks[worker_id] -= 1
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _mark_worker_as_unavailable(self, worker_id: int) -> None:
        self._workers_status[worker_id] = False
        if not self._persistent_workers:
            self._index_queues[worker_id].put(None)  # its stream ended: let the worker exit

    # --- shutdown (Note [Worker shutdown]) -------------------------------------------------
    def _shutdown_workers(self, failed: bool = False) -> None:
        if _python_exiting or self._shutdown:
            return
        self._shutdown = True
        _live_iterators.discard(self)
        workers = self._workers
        try:
            if hasattr(self, "_pin_memory_thread"):
                self._pin_memory_thread_done_event.set()
                if threading.current_thread() is not self._pin_memory_thread:  # __del__ may run there
                    self._pin_memory_thread.join(timeout=_JOIN_TIMEOUT)
            self._workers_done_event.set()
            for q in self._index_queues:
                q.put(None)
            deadline = time.monotonic() + (1.0 if failed else _JOIN_TIMEOUT)
            while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
                if failed:  # the result queue may hold a half-written message: do not read it
                    workers[0].join(timeout=0.02)
                    continue
                try:
                    self._worker_result_queue.get(timeout=0.02)
                except (queue.Empty, OSError, EOFError, ValueError):
                    pass
        finally:
            for w in workers:
                if w.is_alive():
                    w.terminate()
            for w in workers:
                w.join(timeout=_JOIN_TIMEOUT)
            if not failed and all(w.exitcode == 0 for w in workers):
                # every feeder thread flushed whole messages: drop what is left (and its shared memory)
                while True:
                    try:
                        self._worker_result_queue.get(block=False)
                    except Exception:
                        break
            self._task_info = {}
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._worker_result_queue.cancel_join_thread()
            self._worker_result_queue.close()

    def __del__(self) -> None:
        if getattr(self, "_shutdown", True):
            return
        self._shutdown_workers()


def _profiled_methods() -> list:
    """What the profiler records of the loaders (``flambeau.profiler.trace_attributes``): each batch
    (torch's ``enumerate(DataLoader)#<Iter>.__next__`` spans) and each wait for a worker's batch."""
    # (the base class's __next__ only: the multi-process one calls it)
    return [(_BaseDataLoaderIter, "__next__", "dataloader",
             lambda it: f"enumerate(DataLoader)#{type(it).__name__}.__next__"),
            (_MultiProcessingDataLoaderIter, "_get_data", "dataloader", "DataLoader worker wait")]


def _register_profiling() -> None:
    from flambeau.profiler import trace_attributes

    trace_attributes("flambeau.data", _profiled_methods)


_register_profiling()
