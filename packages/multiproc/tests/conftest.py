"""Fixtures of flambeau-multiproc's tests: every test must leave no shared memory and no descriptor behind.

The shared-memory manager daemon of this pytest process is started once per session (its client
socket is then part of the baseline of open descriptors). After each test the fixture lets go of
the current arenas, collects garbage and waits (the daemon hears releases asynchronously) until:
no flambeau name of this process tree is in /dev/shm, the daemon holds no segment and no handle
in flight, and the set of open descriptors of this process is the one before the test.
"""

from __future__ import annotations

import gc
import os
import time

import pytest

import flambeau.multiprocessing as mp
from flambeau import _sharing


def ours(daemon_pid: int) -> list[str]:
    """flambeau names in /dev/shm owned by this tree's daemon or by this process."""
    prefixes = (f"flambeau_{daemon_pid}_", f"flambeau_{os.getpid()}_")
    return [n for n in _sharing.shm_names() if n.startswith(prefixes)]


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def settle(daemon_pid: int, fds_before: set[str], timeout: float = 10.0) -> tuple:
    """Wait until nothing of ours is left; returns what is left at the deadline."""
    deadline = time.monotonic() + timeout
    _sharing.release_arenas()
    i = 0
    while True:
        stats = mp.shared_memory_manager_stats()
        names = ours(daemon_pid)
        # descriptors listed before that are gone now are fine (listdir's own fd, closed pipes)
        extra_fds = {fd for fd in open_fds() - fds_before if os.path.exists(f"/proc/self/fd/{fd}")}
        left = (names, stats["segments"], stats["inflight"], sorted(extra_fds))
        if not any(left) or time.monotonic() > deadline:
            return left
        if i % 50 == 0:
            gc.collect()  # a reference cycle may hold a tensor
        i += 1
        time.sleep(0.01)


@pytest.fixture(scope="session")
def daemon_pid() -> int:
    # Things that live as long as this process once started belong to the baseline: the stdlib's
    # resource tracker (started by spawn contexts) and our daemon connection.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    return mp.shared_memory_manager_stats()["pid"]


@pytest.fixture(autouse=True)
def no_leaks(daemon_pid):
    """Check that a test leaves no /dev/shm name, no held segment and no open descriptor behind."""
    strategy = mp.get_sharing_strategy()
    before = open_fds()
    yield
    mp.set_sharing_strategy(strategy)
    names, segments, inflight, fds = settle(daemon_pid, before)
    details = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in fds if os.path.exists(f"/proc/self/fd/{fd}")}
    assert not names, f"/dev/shm names left behind: {names}"
    assert not segments, f"the manager still holds segments: {segments}"
    assert not inflight, f"handles still in flight: {inflight}"
    assert not fds, f"descriptors leaked: {details}"
