"""CUDA tensors through CUDA IPC handles (numba-cuda), with producer-side lifetimes.

Note [Sharing CUDA tensors]
    A CUDA storage is sent as numba's IPC handle of its device buffer (``get_ipc_handle``: the
    handle of the whole ``cudaMalloc`` block plus the buffer's offset in it, so blocks of a caching
    allocator work). The consumer opens it (``cuIpcOpenMemHandle``) once per storage (cached
    weakly, like CPU storages) and views it. The memory belongs to the producer, which must not
    free it while a consumer maps it, even if the producer's own tensors are gone. So each send
    takes a slot of a counter block (an int64 flambeau tensor in shared memory, which travels
    with the handle through the CPU sharing machinery) and sets it to 1; the producer keeps the
    sent storage in a *limbo* until the slot reads 0 again. The consumer clears the slot when its
    storage is released (its last tensor gone), after waiting for its queued work and closing the
    IPC mapping; a consumer that receives a storage it already maps clears the slot at once. The
    limbo is collected on every send and by :func:`ipc_collect`. As in torch, a consumer that dies
    without releasing leaves the producer's memory held until the producer exits, and a producer
    that exits while consumers still map its memory is warned about.

Needs a GPU: tested on one when present, skipped otherwise.
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings
import weakref

__all__ = ["reduce_storage", "rebuild_storage", "view_on", "ipc_collect"]

_BLOCK = 1024
_lock = threading.Lock()
_blocks: list = []  # counter blocks of this producer (int64 tensors in shared memory)
_free: list[tuple[int, int]] = []  # free (block, slot) pairs
_limbo: list[tuple[object, int, int]] = []  # (sent storage, block, slot) still mapped by a consumer
_sent: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # key -> storage sent by this process
_opened: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # key -> storage opened from a handle


def _collect_locked() -> None:
    keep = []
    for entry in _limbo:
        _, b, i = entry
        if _blocks[b]._data[i]:
            keep.append(entry)
        else:
            _free.append((b, i))
    _limbo[:] = keep


def ipc_collect() -> int:
    """Free the sent CUDA storages that every consumer has released; returns how many remain held."""
    with _lock:
        _collect_locked()
        return len(_limbo)


def _take_slot() -> tuple[int, int]:
    import flambeau as fl

    _collect_locked()
    if not _free:
        _blocks.append(fl.zeros(_BLOCK, dtype=fl.int64).share_memory_())
        b = len(_blocks) - 1
        _free.extend((b, i) for i in reversed(range(_BLOCK)))
    b, i = _free.pop()
    _blocks[b]._data[i] = 1
    return b, i


def reduce_storage(storage):
    """Reduce a CUDA storage to its IPC handle, keeping it alive until the receiver releases it."""
    buf = storage._buffer
    key = (os.getpid(), id(storage))
    with _lock:
        if buf.size == 0:  # nothing to map: the receiver makes an empty buffer
            ipch = None
            b = i = -1
        else:
            ipch = buf.get_ipc_handle()
            b, i = _take_slot()
            _limbo.append((storage, b, i))
        _sent[key] = storage
    block = _blocks[b] if b >= 0 else None
    desc = (tuple(buf.shape), tuple(buf.strides), buf.dtype.str)
    return rebuild_storage, (key, ipch, storage.device.index or 0, desc, block, i)


def _release(ipch, block, slot, index) -> None:
    try:
        from numba import cuda

        with cuda.gpus[index]:
            cuda.synchronize()  # our queued work on the memory is done before the producer may free it
            ipch.close()
    finally:
        if block is not None:
            block._data[slot] = 0


def rebuild_storage(key, ipch, index, desc, block, slot):
    """Receiver side: the storage on the producer's memory (opened once per process)."""
    from flambeau._device import device
    from flambeau._storage import Storage

    if key[0] == os.getpid():  # sent to ourselves: the original storage
        s = _sent.get(key)
        if s is not None:
            if block is not None:
                block._data[slot] = 0
            return s
    s = _opened.get(key)
    if s is not None:
        if block is not None:
            block._data[slot] = 0
        return s
    dev = device("cuda", index)
    if ipch is None:
        import numpy as np

        from flambeau._backends import backend

        buf = backend("cuda").empty(desc[0], np.dtype(desc[2]), dev)
        s = Storage(buf, dev)
    else:
        from numba import cuda

        with cuda.gpus[index]:
            buf = ipch.open()
        s = Storage(buf, dev)
        weakref.finalize(s, _release, ipch, block, slot, index)
    _opened[key] = s
    return s


def view_on(storage, shape, strides, offset):
    """The device array of a view (element ``strides`` and ``offset``) on a rebuilt CUDA storage."""
    from flambeau._backends import backend

    return backend("cuda").as_strided(storage._buffer, tuple(shape), tuple(strides), int(offset))


@atexit.register
def _warn_if_held() -> None:
    with _lock:
        if _blocks:
            _collect_locked()
        if _limbo:
            warnings.warn("Producer process has been terminated before all shared CUDA tensors released. "
                          "See Note [Sharing CUDA tensors] in flambeau/multiprocessing/_cuda.py", RuntimeWarning,
                          stacklevel=1)
