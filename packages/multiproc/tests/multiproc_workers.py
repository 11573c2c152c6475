"""Functions run in child processes by the tests (module level, so that ``spawn`` can import them)."""

from __future__ import annotations

import os
import resource
import signal
import time

import flambeau as fl
import flambeau.multiprocessing as mp

# --- echo over a bidirectional channel ------------------------------------------------------------
# The child receives a tensor, adds 1 in place (the parent must see it), sends back a view, waits
# for the parent to write, then reports the sum it reads (the child must see the parent's write).


def _recv(ch):
    return ch.recv() if hasattr(ch, "recv") else ch.get()


def _send(ch, obj):
    if hasattr(ch, "send"):
        ch.send(obj)
    else:
        ch.put(obj)


def echo(inbox, outbox, strategy):
    mp.set_sharing_strategy(strategy)
    t = _recv(inbox)
    t.add_(1)
    _send(outbox, t[1:])
    assert _recv(inbox) == "check"
    _send(outbox, float(t.sum()))
    assert _recv(inbox) == "bye"


def echo_arg(t, outbox, inbox, strategy):
    """Like echo, the tensor coming as a Process argument."""
    mp.set_sharing_strategy(strategy)
    t.add_(1)
    _send(outbox, t[1:])
    assert _recv(inbox) == "check"
    _send(outbox, float(t.sum()))
    assert _recv(inbox) == "bye"


def pool_add(t):
    t.add_(1)
    return t[1:]


def pool_sum(t):
    return float(t.sum())


# --- structure of what arrives --------------------------------------------------------------------
def describe(inbox, outbox):
    """Receive ``n`` tensors, report their geometry and whether they share one storage."""
    n = inbox.get()
    ts = [inbox.get() for _ in range(n)]
    outbox.put({
        "shapes": [tuple(t.shape) for t in ts],
        "strides": [t.stride() for t in ts],
        "offsets": [t.storage_offset() for t in ts],
        "dtypes": [t.dtype.name for t in ts],
        "values": [t.tolist() for t in ts],
        "same_storage": all(t._storage is ts[0]._storage for t in ts),
        "shared": [t.is_shared() for t in ts],
        "requires_grad": [t.requires_grad for t in ts],
        "is_leaf": [t.is_leaf for t in ts],
        "types": [type(t).__name__ for t in ts],
    })
    # write into every tensor (visible to the parent)
    for t in ts:
        if t.numel():
            t.detach().fill_(1 if t.dtype is fl.bool else 3)
    outbox.put("written")
    assert inbox.get() == "bye"


# --- lifetimes ------------------------------------------------------------------------------------
def produce_and_wait(outbox, inbox, strategy, numel):
    """Make a tensor, send it, then wait (the parent may SIGKILL us)."""
    mp.set_sharing_strategy(strategy)
    t = fl.arange(numel, dtype=fl.float64)
    outbox.put(t)
    outbox.put(os.getpid())
    inbox.get()  # never answered when the parent kills us


def consume_and_wait(inbox, outbox):
    t = inbox.get()
    outbox.put(float(t[-1]))
    time.sleep(600)  # until SIGKILLed


def _limit_fds(nofile):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))


def produce_many(q, n, nofile):
    _limit_fds(nofile)
    for i in range(n):
        q.put(fl.full((3,), float(i)))
    q.close()
    q.join_thread()


def consume_many(q, out, n, nofile):
    _limit_fds(nofile)
    total = 0.0
    for _ in range(n):
        t = q.get()
        total += float(t._data[0])
    out.put(total)


# --- spawn ----------------------------------------------------------------------------------------
def rank_writes(rank, t):
    t[rank] = rank + 1.0


def rank_raises(rank):
    if rank == 1:
        raise ValueError(f"bad thing in rank {rank}")
    time.sleep(30)


def rank_killed(rank):
    if rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)


def rank_exits(rank):
    if rank == 0:
        raise SystemExit(3)


def produce_with_own_daemon(out, inbox, numel):
    """Started without the parent's daemon in its environment: shares through a daemon of its own."""
    t = fl.arange(numel, dtype=fl.float64)
    out.put(t)
    out.put(mp.shared_memory_manager_stats()["pid"])
    inbox.get()
