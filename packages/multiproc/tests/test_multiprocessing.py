"""Tensors between processes: every channel, both start methods, both strategies, lifetimes and leaks.

Tests ``flambeau/multiprocessing`` (reducers, the manager daemon, spawn). The autouse fixture of
conftest.py checks after every test that no /dev/shm name, no segment held by the manager, no
handle in flight and no descriptor of this process is left.
"""

from __future__ import annotations

import os
import signal
import time

import multiproc_workers as W
import numpy as np
import pytest

import flambeau as fl
import flambeau.multiprocessing as mp
from flambeau import _sharing
from flambeau.multiprocessing import _client

STRATEGIES = ["file_descriptor", "file_system"]
SMALL, LARGE = 8, _sharing.SMALL_BYTES // 4 + 16  # float32 elements: in an arena / a segment of its own


def _close(*objs):
    for o in objs:
        if hasattr(o, "join_thread"):
            o.close()
            o.join_thread()
        else:
            o.close()


def _finish(p):
    p.join(60)
    assert p.exitcode == 0, f"child exited with {p.exitcode}"
    p.close()


def _channel(kind, ctx):
    """(parent send end, parent recv end, child inbox, child outbox, things to close)."""
    if kind == "pipe":
        parent, child = ctx.Pipe()
        return parent, parent, child, child, (parent, child)
    make = {"queue": ctx.Queue, "joinable_queue": ctx.JoinableQueue, "simple_queue": ctx.SimpleQueue}[kind]
    to_child, to_parent = make(), make()
    return to_child, to_parent, to_child, to_parent, (to_child, to_parent)


def _get(ch):
    return ch.recv() if hasattr(ch, "recv") else ch.get()


def _put(ch, obj):
    if hasattr(ch, "send"):
        ch.send(obj)
    else:
        ch.put(obj)


def _check_echo(a, numel, out, inp):
    """Parent side of W.echo: the child's write is seen here, ours is seen there."""
    b = _get(inp)
    np.testing.assert_array_equal(a.numpy(), np.arange(numel, dtype=np.float32) + 1)
    assert b._storage is a._storage and b.storage_offset() == 1 and b.shape == (numel - 1,)
    a.mul_(2)
    _put(out, "check")
    assert _get(inp) == float(a.sum())
    _put(out, "bye")


CASES = [(kind, method, strategy, numel)
         for method in ("fork", "spawn")
         for kind in ("queue", "joinable_queue", "simple_queue", "pipe")
         for strategy in STRATEGIES
         for numel in (SMALL, LARGE)
         if (method == "fork" and (kind != "joinable_queue" or numel == SMALL))
         or (numel == SMALL and (kind == "queue" or strategy == "file_descriptor") and kind != "joinable_queue")]


@pytest.mark.parametrize("kind,method,strategy,numel", CASES)
def test_channel_shares_both_ways(kind, method, strategy, numel):
    mp.set_sharing_strategy(strategy)
    ctx = mp.get_context(method)
    out, inp, child_in, child_out, closers = _channel(kind, ctx)
    p = ctx.Process(target=W.echo, args=(child_in, child_out, strategy))
    p.start()
    a = fl.arange(numel, dtype=fl.float32)
    _put(out, a)
    _check_echo(a, numel, out, inp)
    assert a.is_shared() and a._storage._shared.strategy == strategy
    _finish(p)
    _close(*closers)


@pytest.mark.parametrize("method,strategy", [("fork", "file_descriptor"), ("fork", "file_system"),
                                             ("spawn", "file_descriptor"), ("spawn", "file_system")])
def test_process_argument_shares_both_ways(method, strategy):
    mp.set_sharing_strategy(strategy)
    ctx = mp.get_context(method)
    out, inp = ctx.SimpleQueue(), ctx.SimpleQueue()
    a = fl.arange(SMALL, dtype=fl.float32)
    if method == "fork":
        a.share_memory_()  # fork copies the parent's memory: only shared memory stays shared (as in torch)
    p = ctx.Process(target=W.echo_arg, args=(a, inp, out, strategy))
    p.start()
    _check_echo(a, SMALL, out, inp)
    _finish(p)
    _close(out, inp)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pool_shares(method):
    ctx = mp.get_context(method)
    a = fl.arange(SMALL, dtype=fl.float32)
    pool = ctx.Pool(1)
    try:
        b = pool.apply(W.pool_add, (a,))
        np.testing.assert_array_equal(a.numpy(), np.arange(SMALL) + 1)
        assert b._storage is a._storage and b.storage_offset() == 1
        a.mul_(2)
        assert pool.apply(W.pool_sum, (a,)) == float(a.sum())
        assert pool.map(W.pool_sum, [a, a[1:]]) == [float(a.sum()), float(a[1:].sum())]
    finally:
        pool.close()
        pool.join()


DTYPES = [fl.bool, fl.uint8, fl.int8, fl.int16, fl.int32, fl.int64, fl.float16, fl.float32, fl.float64]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_views_dtypes_and_autograd_arrive_intact(strategy):
    """Views sent separately share one storage in the receiver, with their geometry; every dtype;
    leaves that require grad; Parameters. The child's writes are seen here."""
    mp.set_sharing_strategy(strategy)
    ctx = mp.get_context("fork")
    to_child, to_parent = ctx.SimpleQueue(), ctx.SimpleQueue()
    p = ctx.Process(target=W.describe, args=(to_child, to_parent))
    p.start()
    base = fl.arange(24, dtype=fl.float64).reshape(4, 6)
    views = [base, base[1:, ::2], base.t(), base[3, 2:], base[1:3, 1:5].t()]
    typed = [fl.tensor((np.arange(12) % 3).astype(d.np)).reshape(3, 4)[:, 1:] for d in DTYPES]
    leaf = fl.ones(3, requires_grad=True)
    sent = views + typed + [leaf]
    values = [t.tolist() for t in sent]  # before the child writes
    to_child.put(len(sent))
    for t in sent:
        to_child.put(t)
    info = to_parent.get()
    assert info["same_storage"] is False  # the typed tensors have their own storages
    assert info["shapes"] == [tuple(t.shape) for t in sent]
    assert info["strides"] == [t.stride() for t in sent]
    assert info["offsets"] == [t.storage_offset() for t in sent]
    assert info["dtypes"] == [t.dtype.name for t in sent]
    assert info["values"] == values
    assert all(info["shared"])
    assert info["requires_grad"] == [False] * (len(sent) - 1) + [True] and all(info["is_leaf"])
    assert to_parent.get() == "written"
    assert (base.numpy() == 3).all()
    for t in typed:
        assert (t.numpy() == (1 if t.dtype is fl.bool else 3)).all()
    assert leaf.tolist() == [3.0, 3.0, 3.0]
    to_child.put("bye")
    _finish(p)
    _close(to_child, to_parent)


def test_views_sent_separately_share_one_storage_in_receiver():
    ctx = mp.get_context("fork")
    to_child, to_parent = ctx.SimpleQueue(), ctx.SimpleQueue()
    p = ctx.Process(target=W.describe, args=(to_child, to_parent))
    p.start()
    base = fl.zeros(LARGE)
    to_child.put(3)
    for t in (base, base[5:], base[::3]):
        to_child.put(t)
    info = to_parent.get()
    assert info["same_storage"] and info["offsets"] == [0, 5, 0]
    assert to_parent.get() == "written"
    to_child.put("bye")
    _finish(p)
    _close(to_child, to_parent)


def test_parameter_crosses_processes():
    nn = pytest.importorskip("flambeau.nn")
    ctx = mp.get_context("spawn")
    to_child, to_parent = ctx.SimpleQueue(), ctx.SimpleQueue()
    p = ctx.Process(target=W.describe, args=(to_child, to_parent))
    p.start()
    w = nn.Parameter(fl.zeros(2, 3))
    to_child.put(1)
    to_child.put(w)
    info = to_parent.get()
    assert info["types"] == ["Parameter"] and info["requires_grad"] == [True] and info["is_leaf"] == [True]
    assert to_parent.get() == "written"
    assert w.tolist() == [[3.0] * 3] * 2
    to_child.put("bye")
    _finish(p)
    _close(to_child, to_parent)


# --- lifetimes ---------------------------------------------------------------------------------------
def _wait(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _held(key) -> bool:
    return key in mp.shared_memory_manager_stats()["segments"]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_segment_outlives_its_producer(strategy, ending):
    """A producer sends a tensor then dies: our tensor stays valid; the memory goes when we let go."""
    ctx = mp.get_context("fork")
    out, inbox = ctx.SimpleQueue(), ctx.SimpleQueue()
    numel = LARGE
    p = ctx.Process(target=W.produce_and_wait, args=(out, inbox, strategy, numel))
    p.start()
    t = out.get()
    pid = out.get()
    if ending == "sigkill":
        os.kill(pid, signal.SIGKILL)
    else:
        inbox.put("go")
    p.join(30)
    assert p.exitcode == (-signal.SIGKILL if ending == "sigkill" else 0)
    p.close()
    seg = t._storage._shared
    key, name = seg.key, seg.name
    np.testing.assert_array_equal(t.numpy(), np.arange(numel, dtype=np.float64))
    t.add_(1)
    assert _held(key)
    if name:
        assert name in _sharing.shm_names()
    del t, seg
    assert _wait(lambda: not _held(key)), "the segment outlived its last holder"
    if name:
        assert name not in _sharing.shm_names()
    _close(out, inbox)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_segment_released_when_sigkilled_consumer_was_last_holder(strategy):
    mp.set_sharing_strategy(strategy)
    ctx = mp.get_context("fork")
    q, back = ctx.SimpleQueue(), ctx.SimpleQueue()
    p = ctx.Process(target=W.consume_and_wait, args=(q, back))
    p.start()
    a = fl.arange(LARGE, dtype=fl.float32)
    q.put(a)
    assert back.get() == LARGE - 1
    seg = a._storage._shared
    key, name = seg.key, seg.name
    del a, seg
    time.sleep(0.2)
    assert _held(key), "the consumer holds it still"
    if name:
        assert name in _sharing.shm_names()
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    p.close()
    assert _wait(lambda: not _held(key)), "a SIGKILLed consumer's hold was not released"
    if name:
        assert name not in _sharing.shm_names()
    _close(q, back)


@pytest.mark.slow  # 10-40 s on 2 busy cores
def test_100k_small_tensors_through_a_queue_with_few_descriptors():
    """100,000 tensors through a Queue, producer and consumer limited to 64 open descriptors."""
    n = 100_000
    ctx = mp.get_context("fork")
    q, out = ctx.Queue(), ctx.SimpleQueue()
    producer = ctx.Process(target=W.produce_many, args=(q, n, 64))
    consumer = ctx.Process(target=W.consume_many, args=(q, out, n, 64))
    producer.start()
    consumer.start()
    assert out.get() == n * (n - 1) / 2
    _finish(producer)
    _finish(consumer)
    _close(q, out)


# --- the manager daemon ------------------------------------------------------------------------------
def test_daemon_unlinks_stale_names_and_what_is_left_when_its_clients_go():
    ctx = mp.get_context("fork")
    p = ctx.Process(target=int)
    p.start()
    p.join()
    dead = p.pid
    p.close()
    stale = f"flambeau_{dead}_{dead}_0"
    with open(f"/dev/shm/{stale}", "wb"):
        pass
    address, pid = _client._start_daemon()
    client = _client.ManagerClient(address, pid)
    try:
        assert _wait(lambda: stale not in _sharing.shm_names()), "a dead owner's name was not swept"
        held = f"flambeau_{pid}_{os.getpid()}_0"
        client.hold("fs:" + held)
        with open(f"/dev/shm/{held}", "wb"):
            pass
        assert client.query()["names"] == [held]
    finally:
        client.close()
    assert _wait(lambda: held not in _sharing.shm_names()), "the last client left, the name stayed"

    def gone():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    assert _wait(gone), "the daemon did not exit when its last client left"


def test_unknown_daemon_address_is_reported():
    with pytest.raises(RuntimeError, match="cannot reach the shared-memory manager"):
        _client.ManagerClient(f"@flambeau-shm-none-{os.getpid()}", 1)


def test_other_daemon_is_left_when_nothing_is_held_there(monkeypatch):
    """A spawned child that knows no daemon starts its own; we disconnect from it once we hold
    nothing there, so it exits with its tree."""
    ctx = mp.get_context("spawn")
    out, inbox = ctx.SimpleQueue(), ctx.SimpleQueue()
    monkeypatch.delenv(_client.ENV)
    p = ctx.Process(target=W.produce_with_own_daemon, args=(out, inbox, LARGE))
    p.start()
    monkeypatch.undo()
    t = out.get()
    other = out.get()
    assert other != mp.shared_memory_manager_stats()["pid"]
    inbox.put("go")
    _finish(p)
    np.testing.assert_array_equal(t.numpy(), np.arange(LARGE, dtype=np.float64))
    del t

    def gone():
        try:
            os.kill(other, 0)
        except ProcessLookupError:
            return True
        return False

    assert _wait(gone), "the other tree's daemon stayed alive"
    _close(out, inbox)


# --- spawn ---------------------------------------------------------------------------------------------
def test_spawn_runs_ranks_on_a_shared_tensor():
    t = fl.zeros(3)
    assert mp.spawn(W.rank_writes, args=(t,), nprocs=3) is None
    assert t.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_spawn_reraises_child_exception_with_traceback(method):
    with pytest.raises(mp.ProcessRaisedException, match="bad thing in rank 1") as info:
        mp.spawn(W.rank_raises, nprocs=2, start_method=method)
    msg = str(info.value)
    assert "-- Process 1 terminated with the following error:" in msg
    assert "Traceback (most recent call last)" in msg and "in rank_raises" in msg and "ValueError" in msg
    assert info.value.error_index == 1 and info.value.pid > 0


def test_spawn_reports_signal_and_exit_code():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with signal SIGKILL") as info:
        mp.spawn(W.rank_killed, nprocs=2, start_method="fork")
    assert info.value.signal_name == "SIGKILL" and info.value.exit_code == -signal.SIGKILL
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3"):
        mp.spawn(W.rank_exits, nprocs=1, start_method="fork")


def test_spawn_without_join_returns_context():
    t = fl.zeros(2).share_memory_()
    ctx = mp.spawn(W.rank_writes, args=(t,), nprocs=2, join=False, start_method="fork")
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    while not ctx.join(timeout=30):
        pass
    assert t.tolist() == [1.0, 2.0]


# --- CUDA ---------------------------------------------------------------------------------------------
def _cuda_available() -> bool:
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="CUDA IPC needs a real GPU (numba.cuda.is_available() is false)")
def test_cuda_tensor_travels_as_ipc_handle():
    ctx = mp.get_context("spawn")
    to_child, to_parent = ctx.SimpleQueue(), ctx.SimpleQueue()
    p = ctx.Process(target=W.describe, args=(to_child, to_parent))
    p.start()
    a = fl.arange(12.0, device="cuda").reshape(3, 4)
    to_child.put(2)
    to_child.put(a)
    to_child.put(a[1:, ::2])
    info = to_parent.get()
    assert info["same_storage"] and info["offsets"] == [0, 4]
    assert to_parent.get() == "written"
    assert (a.cpu().numpy() == 3).all()
    to_child.put("bye")
    _finish(p)
    _close(to_child, to_parent)
    assert _wait(lambda: mp.cuda_ipc_collect() == 0)
