"""DataLoader (flambeau/data/dataloader.py, _worker.py, _pin_memory.py): every option with 0 and 2
workers, worker errors, deaths and timeouts, early exits, determinism, sharding, pin_memory."""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import flambeau as fl
from flambeau.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    TensorDataset,
    get_worker_info,
)
from flambeau.data import dataloader as dl_module

WORKERS = [0, 2]


# --- datasets (module level, so that spawned workers can unpickle them) ----------------------
class Range(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return fl.tensor([float(i)]), i

    def __len__(self):
        return self.n


class WorkerSeeds(Dataset):
    """Each sample reports the worker and what its random generators give."""

    def __getitem__(self, i):
        info = get_worker_info()
        return {"id": -1 if info is None else info.id, "seed": -1 if info is None else info.seed,
                "random": random.random(), "numpy": float(np.random.rand()), "fl": fl.rand(1).item()}

    def __len__(self):
        return 8


class Failing(Dataset):
    def __init__(self, bad, exc=ValueError):
        self.bad, self.exc = bad, exc

    def __getitem__(self, i):
        if i == self.bad:
            raise self.exc(f"sample {i} is broken")
        return i

    def __len__(self):
        return 8


class Suicidal(Dataset):
    """__getitem__ kills its own process at index ``bad`` (a worker dying by a signal)."""

    def __init__(self, bad, sig=signal.SIGKILL):
        self.bad, self.sig = bad, sig

    def __getitem__(self, i):
        if i == self.bad and get_worker_info() is not None:
            import faulthandler
            import resource

            faulthandler.disable()  # no traceback dump from pytest's handler, no core file
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            os.kill(os.getpid(), self.sig)
            time.sleep(10)
        return i

    def __len__(self):
        return 16


class Slow(Dataset):
    def __init__(self, delays):
        self.delays = delays

    def __getitem__(self, i):
        time.sleep(self.delays.get(i, 0.0))
        return i

    def __len__(self):
        return 12


class Stream(IterableDataset):
    """0 .. n-1, sharded between workers when ``shard`` is set."""

    def __init__(self, n, shard=True):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


def children_pids():
    return {p.pid for p in multiprocessing.active_children()}


def assert_gone(pids, within=5.0):
    """Every pid has exited and been reaped (no /proc entry, or a zombie at most briefly)."""
    deadline = time.monotonic() + within
    for pid in pids:
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not os.path.exists(f"/proc/{pid}"), f"worker {pid} is still alive"


def worker_pids(it):
    return [w.pid for w in it._workers]


def flatten(batches):
    return [int(v) for b in batches for v in (b[1].tolist() if isinstance(b, (list, tuple)) else b.tolist())]


# --- argument validation ------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, exc, msg", [
    ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
    ({"timeout": -1}, ValueError, "timeout option should be non-negative"),
    ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified in multiprocessing"),
    ({"num_workers": 1, "prefetch_factor": -1}, ValueError, "prefetch_factor option should be non-negative"),
    ({"persistent_workers": True}, ValueError, "persistent_workers option needs num_workers > 0"),
    ({"shuffle": True, "sampler": [0, 1]}, ValueError, "sampler option is mutually exclusive with shuffle"),
    ({"batch_sampler": [[0]], "batch_size": 2}, ValueError,
     "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"),
    ({"batch_sampler": [[0]], "drop_last": True}, ValueError, "batch_sampler option is mutually exclusive"),
    ({"batch_size": None, "drop_last": True}, ValueError,
     "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"),
    ({"multiprocessing_context": "fork"}, ValueError, "multiprocessing_context can only be used with multi-process"),
    ({"num_workers": 1, "multiprocessing_context": "nope"}, ValueError,
     "multiprocessing_context option should specify a valid start method in"),
    ({"num_workers": 1, "multiprocessing_context": 3}, TypeError,
     "multiprocessing_context option should be a valid context object"),
])
def test_argument_validation_like_torch(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        DataLoader(Range(4), **kwargs)
    tdata = pytest.importorskip("torch.utils.data")
    with pytest.raises(exc, match=msg.replace("(", r"\(")):
        tdata.DataLoader(list(range(4)), **kwargs)


@pytest.mark.parametrize("kwargs, msg", [({"shuffle": True}, "expected unspecified shuffle option"),
                                         ({"sampler": [0]}, "expected unspecified sampler option"),
                                         ({"batch_sampler": [[0]]}, "expected unspecified batch_sampler option")])
def test_iterable_dataset_validation(kwargs, msg):
    with pytest.raises(ValueError, match=f"DataLoader with IterableDataset: {msg}"):
        DataLoader(Stream(4), **kwargs)


def test_attributes_frozen_after_init_and_timeout_needs_workers():
    loader = DataLoader(Range(4))
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        loader.batch_size = 3
    loader.num_workers = 0  # other attributes may change
    with pytest.raises(AssertionError, match="requires timeout == 0"):
        iter(DataLoader(Range(4), timeout=1))


def test_too_many_workers_warns():
    with pytest.warns(UserWarning, match="This DataLoader will create 999 worker processes in total"):
        DataLoader(Range(4), num_workers=999)


# --- batching options ---------------------------------------------------------------------
@pytest.mark.parametrize("workers", WORKERS)
def test_batching_options(workers):
    ds = Range(10)
    # batch_size / drop_last / len
    loader = DataLoader(ds, batch_size=3, num_workers=workers)
    batches = list(loader)
    assert len(loader) == 4 and len(batches) == 4
    assert batches[0][0].shape == (3, 1) and batches[0][0].dtype is fl.float32 and batches[0][1].dtype is fl.int64
    assert flatten(batches) == list(range(10))
    loader = DataLoader(ds, batch_size=3, drop_last=True, num_workers=workers)
    assert len(loader) == 3 and flatten(list(loader)) == list(range(9))
    # sampler, batch_sampler, collate_fn, no auto-batching
    loader = DataLoader(ds, batch_size=2, sampler=[9, 8, 7], num_workers=workers)
    assert flatten(list(loader)) == [9, 8, 7] and len(loader) == 2
    loader = DataLoader(ds, batch_sampler=[[1, 2, 3], [0]], num_workers=workers)
    assert flatten(list(loader)) == [1, 2, 3, 0] and len(loader) == 2
    loader = DataLoader(ds, batch_size=4, collate_fn=lambda b: [s[1] for s in b], num_workers=workers)
    assert list(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    loader = DataLoader(ds, batch_size=None, num_workers=workers)
    items = list(loader)
    assert len(loader) == 10 and items[3][1] == 3 and items[3][0].shape == (1,)


@pytest.mark.parametrize("workers", WORKERS)
def test_shuffle_is_seeded_and_same_with_or_without_workers(workers):
    ds = Range(30)
    ref = flatten(DataLoader(ds, batch_size=4, shuffle=True, generator=fl.Generator().manual_seed(11)))
    assert sorted(ref) == list(range(30)) and ref != list(range(30))
    got = flatten(DataLoader(ds, batch_size=4, shuffle=True, num_workers=workers,
                             generator=fl.Generator().manual_seed(11)))
    assert got == ref
    g = fl.Generator().manual_seed(11)
    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=workers, generator=g)
    epoch1, epoch2 = flatten(loader), flatten(loader)
    assert epoch1 == ref and epoch2 != epoch1 and sorted(epoch2) == list(range(30))


def test_worker_seeds_are_distinct_and_reproducible():
    def run(seed):
        loader = DataLoader(WorkerSeeds(), batch_size=2, num_workers=2, generator=fl.Generator().manual_seed(seed))
        return [{k: v.tolist() for k, v in b.items()} for b in loader]

    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c
    by_worker = {}
    for batch in a:
        for i, wid in enumerate(batch["id"]):
            by_worker.setdefault(wid, []).append({k: batch[k][i] for k in ("seed", "random", "numpy", "fl")})
    assert sorted(by_worker) == [0, 1]
    # seed = base_seed + worker id, base_seed the first int64 drawn from the loader's generator
    base = int(fl.empty((), dtype=fl.int64).random_(generator=fl.Generator().manual_seed(1)).item())
    assert by_worker[0][0]["seed"] == base and by_worker[1][0]["seed"] == base + 1
    # the two workers' random, numpy and flambeau streams differ
    for key in ("random", "numpy", "fl"):
        assert by_worker[0][0][key] != by_worker[1][0][key]
    # and each is the stream seeded as torch seeds its workers
    random.seed(base + 1)
    assert by_worker[1][0]["random"] == random.random()
    fl.manual_seed(base)
    assert by_worker[0][0]["fl"] == fl.rand(1).item()
    from flambeau.data._worker import _generate_state

    np_state = np.random.get_state()
    np.random.seed(_generate_state(base, 1))
    assert by_worker[1][0]["numpy"] == float(np.random.rand())
    np.random.set_state(np_state)


def test_numpy_worker_seed_is_torchs():
    pytest.importorskip("torch")
    from torch.utils.data._utils.worker import _generate_state as torch_state

    from flambeau.data._worker import _generate_state

    for base, wid in [(0, 0), (1, 3), (2**63 - 1, 7), (123456789012345, 1)]:
        assert _generate_state(base, wid) == torch_state(base, wid)


def test_get_worker_info_and_worker_init_fn():
    assert get_worker_info() is None
    loader = DataLoader(Stream(8, shard=False), batch_size=None, num_workers=2,
                        worker_init_fn=lambda wid: setattr(get_worker_info().dataset, "n", 2 + wid))
    values = list(loader)
    assert sorted(values) == [0, 0, 1, 1, 2]  # worker 0 yields 0..1, worker 1 yields 0..2


@pytest.mark.parametrize("workers", WORKERS)
def test_iterable_dataset_sharding_and_len(workers):
    loader = DataLoader(Stream(11), batch_size=3, num_workers=workers)
    assert len(loader) == 4
    assert sorted(flatten_plain(list(loader))) == list(range(11))
    assert sorted(flatten_plain(list(DataLoader(Stream(11), batch_size=3, drop_last=True, num_workers=workers)))) \
        == sorted(flatten_plain(list(DataLoader(Stream(11), batch_size=3, drop_last=True, num_workers=workers))))
    assert sorted(DataLoader(Stream(5), batch_size=None, num_workers=workers)) == [0, 1, 2, 3, 4]


def flatten_plain(batches):
    return [int(v) for b in batches for v in b.tolist()]


def test_iterable_dataset_without_sharding_duplicates_and_len_warning():
    loader = DataLoader(Stream(4, shard=False), batch_size=None, num_workers=2)
    assert len(loader) == 4
    with pytest.warns(UserWarning, match=r"Length of IterableDataset .* was reported to be 4"):
        values = list(loader)
    assert sorted(values) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_in_order_false_delivers_ready_batches_first():
    ds = Slow({0: 1.0})
    ordered = list(DataLoader(ds, batch_size=2, num_workers=2))
    assert [b.tolist() for b in ordered] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]
    loose = [b.tolist() for b in DataLoader(ds, batch_size=2, num_workers=2, in_order=False)]
    assert sorted(loose) == [b.tolist() for b in ordered]
    assert loose[0] != [0, 1]  # the slow first batch did not hold the others back


def test_prefetch_factor_bounds_outstanding_tasks():
    loader = DataLoader(Range(40), batch_size=2, num_workers=2, prefetch_factor=3)
    it = iter(loader)
    assert it._tasks_outstanding == 6 and it._send_idx == 6
    next(it)
    assert it._tasks_outstanding <= 6 and it._send_idx == 7
    del it
    it = iter(DataLoader(Range(4), batch_size=2, num_workers=2, prefetch_factor=3))
    assert it._tasks_outstanding == 2  # only two batches exist
    assert flatten(it) == [0, 1, 2, 3]


def test_persistent_workers_survive_epochs():
    loader = DataLoader(Range(10), batch_size=3, num_workers=2, persistent_workers=True, shuffle=True,
                        generator=fl.Generator().manual_seed(0))
    it1 = iter(loader)
    e1 = flatten(it1)
    pids = worker_pids(it1)
    it2 = iter(loader)
    assert it2 is it1 and worker_pids(it2) == pids and all(w.is_alive() for w in it2._workers)
    e2 = flatten(it2)
    assert sorted(e1) == sorted(e2) == list(range(10)) and e1 != e2
    # leaving an epoch early, then starting the next one, drops the old epoch's batches
    for i, _ in enumerate(loader):
        if i == 1:
            break
    assert sorted(flatten(loader)) == list(range(10))
    # iterable datasets restart too
    sl = DataLoader(Stream(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert sorted(flatten_plain(sl)) == sorted(flatten_plain(sl)) == list(range(6))
    it = loader._iterator
    del loader, it1, it2, sl
    it._shutdown_workers()
    assert_gone(pids)


# --- errors, deaths, timeouts -----------------------------------------------------------------
@pytest.mark.parametrize("workers", WORKERS)
def test_worker_exception_is_reraised_with_traceback(workers):
    loader = DataLoader(Failing(5), batch_size=2, num_workers=workers)
    it = iter(loader)
    assert next(it).tolist() == [0, 1] and next(it).tolist() == [2, 3]
    with pytest.raises(ValueError, match="sample 5 is broken") as info:
        next(it)
    if workers:
        msg = str(info.value)
        assert "Caught ValueError in DataLoader worker process 0" in msg
        assert "Original Traceback (most recent call last)" in msg and 'raise self.exc(f"sample {i}' in msg
    assert next(it).tolist() == [6, 7]  # the loader carries on, as torch's does
    with pytest.raises(StopIteration):
        next(it)


def test_worker_key_error_and_init_fn_error():
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 1"):
        list(DataLoader(Failing(1, KeyError), batch_size=None, num_workers=2))

    def bad_init(wid):
        raise RuntimeError(f"init of {wid} failed")

    with pytest.raises(RuntimeError, match="init of 0 failed"):
        list(DataLoader(Range(4), num_workers=2, worker_init_fn=bad_init))


@pytest.mark.parametrize("sig, name", [(signal.SIGKILL, "Killed"), (signal.SIGSEGV, "Segmentation fault")])
def test_worker_killed_by_signal_fails_promptly(sig, name):
    before = children_pids()
    loader = DataLoader(Suicidal(6, sig), batch_size=2, num_workers=2)
    it = iter(loader)
    pids = worker_pids(it)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"DataLoader worker \(pid \d+\) is killed by signal: {name}\.") as info:
        for _ in it:
            pass
    assert time.monotonic() - start < 5
    assert str(pids[1]) in str(info.value)  # batch [6, 7] is task 3, worker 1's
    del it
    assert_gone(pids)
    assert children_pids() <= before


def test_timeout_raises():
    loader = DataLoader(Slow({0: 1.5}), batch_size=2, num_workers=2, timeout=0.3)
    it = iter(loader)
    pids = worker_pids(it)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0\.3 seconds"):
        next(it)
    assert time.monotonic() - start < 2.0
    del it
    gc.collect()
    assert_gone(pids, within=8)


# --- leaving early: workers and shared memory go ----------------------------------------------
def shm_entries():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def test_early_exit_shuts_workers_down():
    shm_before = shm_entries()
    before = children_pids()
    loader = DataLoader(Range(100), batch_size=2, num_workers=2)

    # break, then the iterator is collected
    seen = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == 2:
            break
    gc.collect()
    assert children_pids() <= before

    # an exception in the loop body
    def body():
        for _ in loader:
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        body()
    gc.collect()
    assert children_pids() <= before

    # del of an explicit iterator
    it = iter(loader)
    next(it)
    pids = worker_pids(it)
    del it
    assert_gone(pids)

    # KeyboardInterrupt while the main process waits for a batch
    it = iter(DataLoader(Slow({0: 2.0}), batch_size=2, num_workers=2))
    pids = worker_pids(it)
    import _thread

    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(it)
    timer.join()
    assert it._shutdown
    assert_gone(pids)
    del it
    assert children_pids() <= before
    assert shm_entries() <= shm_before  # no shared-memory segment left behind


def test_main_process_exit_with_live_iterators_does_not_hang(tmp_path):
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent("""
        import time
        import flambeau as fl
        from flambeau.data import DataLoader, TensorDataset, Dataset

        class Slow(Dataset):
            def __getitem__(self, i):
                time.sleep(0.05)
                return i
            def __len__(self):
                return 1000

        ds = TensorDataset(fl.arange(1000.0))
        a = iter(DataLoader(ds, batch_size=4, num_workers=2))
        b = iter(DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True))
        c = iter(DataLoader(Slow(), batch_size=4, num_workers=2))
        next(a), next(b), next(c)
        print(" ".join(str(w.pid) for it in (a, b, c) for w in it._workers), flush=True)
    """))
    start = time.monotonic()
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - start < 30
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 6
    assert_gone(pids)


# --- multiprocessing context ------------------------------------------------------------------
def test_spawn_context():
    loader = DataLoader(TensorDataset(fl.arange(6.0)), batch_size=2, num_workers=2,
                        multiprocessing_context="spawn")
    assert [b[0].tolist() for b in loader] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    ctx = multiprocessing.get_context("fork")  # a context object works as well as its name
    loader = DataLoader(TensorDataset(fl.arange(4.0)), batch_size=2, num_workers=2, multiprocessing_context=ctx)
    assert loader.multiprocessing_context is ctx and [b[0].tolist() for b in loader] == [[0.0, 1.0], [2.0, 3.0]]


# --- pin_memory -------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", WORKERS)
def test_pin_memory_without_accelerator_warns_once_and_carries_on(workers, monkeypatch):
    monkeypatch.setattr(dl_module, "_accelerator_available", lambda: False)
    loader = DataLoader(Range(6), batch_size=2, num_workers=workers, pin_memory=True)
    with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator is found, then "
                                         "device pinned memory won't be used"):
        first = flatten(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = flatten(loader)  # no second warning
    assert first == second == list(range(6))


class _FakePinned(fl.Tensor):
    pass


@pytest.mark.parametrize("workers", WORKERS)
def test_pin_memory_path_pins_every_tensor(workers, monkeypatch):
    """With an accelerator, every tensor of every batch goes through Tensor.pin_memory (here a fake)."""
    pinned = []
    monkeypatch.setattr(dl_module, "_accelerator_available", lambda: True)
    monkeypatch.setattr(fl.Tensor, "pin_memory", lambda self, device=None: pinned.append(self.shape) or self,
                        raising=False)
    loader = DataLoader(Range(6), batch_size=2, num_workers=workers, pin_memory=True)
    batches = list(loader)
    assert flatten(batches) == list(range(6))
    assert len(pinned) == 6  # 3 batches x 2 tensors
    if workers:
        failing = DataLoader(Failing(3), batch_size=2, num_workers=workers, pin_memory=True)
        with pytest.raises(ValueError, match="sample 3 is broken"):
            list(failing)


def test_tensor_pin_memory_without_cuda():
    x = fl.arange(4.0)
    assert not x.is_pinned() and not x[1:].is_pinned()

    class PinnedMemory(bytearray):  # stands for numba's pinned host allocation
        pass

    pinned = fl.from_numpy(np.ndarray((4,), np.float32, buffer=PinnedMemory(16)))
    assert pinned.is_pinned() and pinned[2:].is_pinned()
    assert pinned.pin_memory() is pinned  # already pinned: no copy, no device needed
    if not fl.cuda.is_available():
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
            x.pin_memory()


def test_len_of_iterable_with_batch_size():
    assert len(DataLoader(Stream(10), batch_size=3)) == math.ceil(10 / 3)
    assert len(DataLoader(Stream(10), batch_size=3, drop_last=True)) == 3
    assert len(DataLoader(Stream(10), batch_size=None)) == 10
    assert len(DataLoader(Range(10), batch_sampler=BatchSampler(SequentialSampler(range(10)), 4, False))) == 3


def shared_mappings():
    """This process's mappings of shared memory made by flambeau (memfd or /dev/shm segments)."""
    with open("/proc/self/maps") as f:
        return [line.split()[-1] for line in f if "memfd:flambeau" in line or "/dev/shm/flambeau" in line]


def test_batches_come_back_in_shared_memory_and_leave_nothing_behind():
    mp = pytest.importorskip("flambeau.multiprocessing")
    ds = TensorDataset(fl.arange(400.0).reshape(100, 4))
    old = mp.get_sharing_strategy()
    gc.collect()
    fds_before = len(os.listdir("/proc/self/fd"))
    maps_before = len(shared_mappings())  # batches other tests still hold (tracebacks) stay mapped
    try:
        for strategy in ("file_descriptor", "file_system"):
            mp.set_sharing_strategy(strategy)
            before = shm_entries()
            loader = DataLoader(ds, batch_size=4, num_workers=2)
            for i, (x,) in enumerate(loader):
                assert x.is_shared() and x[0, 0].item() == 16.0 * i
                if i == 3:
                    break
            del x
            gc.collect()
            deadline = time.monotonic() + 5
            while shm_entries() - before and time.monotonic() < deadline:  # the manager unlinks names
                time.sleep(0.05)
            assert not shm_entries() - before, f"{strategy}: left {shm_entries() - before}"
            assert len(shared_mappings()) <= maps_before, f"{strategy}: still mapped: {shared_mappings()}"
            assert len(os.listdir("/proc/self/fd")) <= fds_before + 2  # no descriptor leaks (+2: manager)
    finally:
        mp.set_sharing_strategy(old)


def test_workers_exit_when_the_main_process_is_killed(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent("""
        import os, signal
        import flambeau as fl
        from flambeau.data import DataLoader, TensorDataset

        it = iter(DataLoader(TensorDataset(fl.arange(1000.0)), batch_size=4, num_workers=2))
        next(it)
        print(" ".join(str(w.pid) for w in it._workers), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    assert_gone(pids, within=10)
