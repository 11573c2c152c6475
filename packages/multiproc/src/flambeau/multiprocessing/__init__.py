"""A drop-in replacement for :mod:`multiprocessing` that moves tensors through shared memory.

Every name of the standard module is here (``Process``, ``Queue``, ``SimpleQueue``,
``JoinableQueue``, ``Pipe``, ``Pool``, ``get_context``, ``set_start_method``, ``cpu_count`` ...)
and is the standard object itself, as in ``torch.multiprocessing``. What importing this module
adds is a set of pickling reducers (:mod:`.reductions`): a tensor put on a queue, sent through a
pipe or passed to a process moves its storage into shared memory (once, in place) and travels as
a handle, so the receiver's tensor views the same memory and writes are visible both ways.
CUDA tensors travel as CUDA IPC handles.

Two sharing strategies, as in torch (:func:`set_sharing_strategy`):

``file_descriptor`` (default)
    Anonymous memory (memfd); descriptors are handed over through a small manager daemon, and
    the memory is freed by the kernel once no process maps it or holds its descriptor.
``file_system``
    Named segments in /dev/shm; the manager daemon unlinks a name when no process holds it any
    more, also when processes are killed by SIGKILL, and everything left when the last process
    of the tree has gone.

See ``packages/multiproc/README.md`` for the design and its limits.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import *  # noqa: F401,F403 - the drop-in: every standard name

from flambeau import _sharing

from . import reductions
from ._cuda import ipc_collect as cuda_ipc_collect
from .spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    SpawnContext,
    spawn,
    start_processes,
)

__all__ = [
    "set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies", "spawn", "start_processes",
    "ProcessContext", "SpawnContext", "ProcessException", "ProcessRaisedException", "ProcessExitedException",
    "cuda_ipc_collect", "shared_memory_manager_stats",
] + list(multiprocessing.__all__)


def set_sharing_strategy(new_strategy: str) -> None:
    """Set the strategy used for the tensors moved into shared memory from now on.

    Args:
        new_strategy: ``"file_descriptor"`` or ``"file_system"`` (see :func:`get_all_sharing_strategies`).

    Storages already shared keep their kind of memory. Set it in each process that sends
    (children started with ``fork`` inherit it; ``spawn`` children start with the default).
    """
    if new_strategy not in _sharing.STRATEGIES:
        raise ValueError(f"set_sharing_strategy(): strategy must be one of {list(_sharing.STRATEGIES)}, "
                         f"got {new_strategy!r}")
    _sharing.set_strategy(new_strategy)


def get_sharing_strategy() -> str:
    """The current sharing strategy: ``"file_descriptor"`` (default) or ``"file_system"``."""
    return _sharing.get_strategy()


def get_all_sharing_strategies() -> set[str]:
    """The sharing strategies this system supports: ``{"file_descriptor", "file_system"}``."""
    return set(_sharing.STRATEGIES)


def shared_memory_manager_stats() -> dict:
    """Counters of this process tree's shared-memory manager daemon (starting it if needed).

    Returns:
        dict with ``pid``, ``clients`` (connected processes), ``segments`` (keys of the segments
        held), ``names`` (file_system segments alive), ``inflight`` (handles sent and not yet
        received), ``fds`` (descriptors waiting to be fetched), ``waiting`` and ``watched`` (pids
        of the processes that keep handles in flight alive besides the connected ones).
    """
    from ._client import default_client

    return default_client().query()


reductions.init_reductions()
