"""Pickling reducers that make tensors and storages travel as handles to shared memory.

:func:`init_reductions` registers them with :class:`multiprocessing.reduction.ForkingPickler`,
the pickler behind every queue, pipe, pool and spawned process argument of
:mod:`multiprocessing` (so of ``flambeau.multiprocessing`` too). Plain :mod:`pickle` is not
affected: ``pickle.dumps(tensor)`` still copies the data.

A CPU tensor is reduced to its storage (moved into shared memory first, in place, if it is not
there yet) plus its view: dtype, shape, strides and byte offset. The storage is reduced to a
handle of its segment (``flambeau._sharing``): the segment's key (a memfd's identity or a
/dev/shm name), the geometry of the buffer in it, the address of the shared-memory manager
daemon (:mod:`._shm_manager`) and a token under which the daemon holds the segment in flight
until the receiver holds it. A receiver opens a segment once (a memfd's descriptor comes from the
daemon) and rebuilds each storage once (both cached weakly), so views of one storage arrive as
views of one storage; pickle's memo makes one message carry each storage once. CUDA tensors
travel as CUDA IPC handles (:mod:`._cuda`).

Tensors that require grad arrive as leaves that require grad; a non-leaf that requires grad is
refused, as torch refuses it (autograd does not cross processes). Tensor subclasses (such as
``flambeau.nn.Parameter``, whenever they are defined) arrive as the same subclass: besides the
exact-type table of ``ForkingPickler``, a ``reducer_override`` hook catches them (chained to any
hook installed before).
"""

from __future__ import annotations

import os
from multiprocessing.reduction import ForkingPickler

from flambeau import _dtype as dt
from flambeau import _sharing
from flambeau._storage import Storage
from flambeau._tensor import Tensor, _wrap

from . import _client

__all__ = ["init_reductions", "reduce_tensor", "reduce_storage", "rebuild_tensor", "rebuild_storage"]

_NON_LEAF = (
    "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not support "
    "crossing process boundaries.  If you just want to transfer the data, call detach() on the tensor "
    "before serializing (e.g., putting it on the queue)."
)


# --- storages ---------------------------------------------------------------------------------------
def reduce_storage(storage: Storage):
    """Reduce ``storage`` to a handle of its shared segment (moving it there first)."""
    if storage.device.type == "cuda":
        from . import _cuda

        return _cuda.reduce_storage(storage)
    seg = _sharing.share_storage_(storage)
    client = _sending_client(seg)
    token = client.send(seg.key)
    return rebuild_storage, (client.address, client.pid, token, seg.key, seg.nbytes,
                             _sharing.geometry(storage._buffer, seg))


def _sending_client(seg) -> _client.ManagerClient:
    """The daemon connection on which this process holds ``seg``; a segment made before the
    daemon's tracker was installed, or inherited through fork, is handed over to it first."""
    tracker = seg.tracker
    if seg._pid == os.getpid():
        if isinstance(tracker, _client.ManagerClient):
            return tracker
        if isinstance(tracker, _client.DefaultTracker):
            client = tracker.client_of(seg.key)
            if client is not None:
                return client
    client = _client.default_client()
    with _sharing._lock:
        if seg.fd >= 0:
            client.hold(seg.key, seg.fd)
            os.close(seg.fd)
            seg.fd = -1
        else:
            client.hold(seg.key)
        if seg.name is not None:
            _sharing._LOCAL_NAMES.discard(seg.name)
        seg.tracker, seg._pid = client, os.getpid()
    return client


def rebuild_storage(address, pid, token, key, nbytes, buffer_geom) -> Storage:
    """Receiver side of :func:`reduce_storage`: the storage, mapped once per process."""
    client = _client.client_for(address, pid)
    storage = _sharing.cached_storage(key, buffer_geom)
    if storage is not None:
        client.release_inflight(token)
        return storage
    seg = _sharing.cached_segment(key)
    if seg is not None:  # an arena this process maps already: nothing to open (Note [Arenas])
        client.release_inflight(token)
    elif key.startswith("fs:"):
        seg, new = _sharing.open_named_segment(key[3:], nbytes, client)
        if new:
            client.claim(token, key)
        else:
            client.release_inflight(token)
    else:
        seg, new = _sharing.open_fd_segment(client.get_fd(token, key), nbytes, client)
        if not new:  # mapped meanwhile by another thread: one hold per mapping
            client.release(key)
    return _sharing.storage_on(seg, buffer_geom)


# --- tensors ----------------------------------------------------------------------------------------
def reduce_tensor(tensor: Tensor):
    """Reduce ``tensor`` to its (shared) storage and its view."""
    if tensor._requires_grad and tensor.grad_fn is not None:
        raise RuntimeError(_NON_LEAF)
    cls = type(tensor)
    state = dict(tensor.__dict__) if hasattr(tensor, "__dict__") else None
    if tensor._device.type == "cuda":
        view = ("cuda", tensor.shape, tensor.stride(), tensor.storage_offset())
    else:
        seg = _sharing.share_tensor_storage_(tensor)
        view = ("cpu", *_sharing.geometry(tensor._data, seg))
    return rebuild_tensor, (cls, tensor._storage, tensor.dtype.name, view, tensor.requires_grad, state)


def rebuild_tensor(cls, storage: Storage, dtype_name: str, view: tuple, requires_grad: bool, state):
    """Receiver side of :func:`reduce_tensor`: a view on the rebuilt storage."""
    dtype = dt._BY_NAME[dtype_name]
    if view[0] == "cuda":
        from . import _cuda

        data = _cuda.view_on(storage, *view[1:])
    else:
        data = _sharing.view_on(storage._shared, view[1:])
    if cls is Tensor:
        t = _wrap(data, storage.device, storage, dtype)
    else:
        t = object.__new__(cls)
        src = _wrap(data, storage.device, storage, dtype)
        for slot in ("_data", "_storage", "_device", "dtype", "_requires_grad", "_grad", "grad_fn", "_base",
                     "_autograd_meta"):
            setattr(t, slot, getattr(src, slot))
        if state:
            t.__dict__.update(state)
    if requires_grad:
        t.requires_grad_(True)
    return t


# --- registration -----------------------------------------------------------------------------------
def _reducer_override(pickler, obj):
    # ForkingPickler finds reducers by exact type; tensor subclasses (flambeau.nn.Parameter, a user's)
    # may be defined after this module is imported, so they are caught here (pickle calls this hook for
    # every object that is not a plain int, float, str, bytes, list, tuple, dict or set).
    if isinstance(obj, Tensor):
        return reduce_tensor(obj)
    if _previous_override is not None:
        return _previous_override(pickler, obj)
    return NotImplemented


_previous_override = None


def init_reductions() -> None:
    """Register the reducers of Tensor (and its subclasses) and Storage with ``ForkingPickler``."""
    global _previous_override
    ForkingPickler.register(Storage, reduce_storage)
    ForkingPickler.register(Tensor, reduce_tensor)
    current = getattr(ForkingPickler, "reducer_override", None)
    if current is not _reducer_override:
        _previous_override = current
        ForkingPickler.reducer_override = _reducer_override
    if not isinstance(_sharing.get_tracker(), _client.DefaultTracker):
        _sharing.set_tracker(_client.DefaultTracker())
