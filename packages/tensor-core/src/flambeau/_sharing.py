"""The sharing seam (DESIGN.md, seam 4): a storage moves itself into shared memory and is rebuilt
from a handle in another process.

A shared CPU storage's buffer lives in a :class:`Segment`, an ``mmap`` of one of two kinds
(the sharing strategies of ``torch.multiprocessing``):

``file_descriptor``
    An anonymous ``memfd`` (no name in /dev/shm, ever); the kernel frees the memory when the
    last descriptor and the last mapping are gone, in whatever way the processes ended.
``file_system``
    A POSIX shared-memory object ``/dev/shm/flambeau_<owner>_<pid>_<n>``. Names outlive the
    processes that map them, so someone must unlink them (the *tracker*, below).

Small storages (up to :data:`SMALL_BYTES`) are carved from *arenas*, segments of
:data:`ARENA_BYTES` that a process fills one after the other (see Note [Arenas]); larger ones get
a segment each. A storage's handle is its segment's identity (:attr:`Segment.key`) plus the
geometry of its buffer in the segment (:func:`geometry`).

A *tracker* (:func:`set_tracker`) is told when this process starts and stops holding a segment.
The default one keeps each memfd's descriptor in its segment and unlinks the names this process
made when it lets go of them. flambeau.multiprocessing installs a tracker backed by a manager
daemon that holds descriptors and names for the whole process tree, so that receivers can open
them and they go away when no process holds them, also after SIGKILLs.

This module knows nothing of pickling or of how handles travel: flambeau.multiprocessing
registers the reducers that call :func:`share_storage_` on send and :func:`storage_on` on
receipt. It builds on Storage and Tensor and binds their ``share_memory_`` methods (Note [Tensor
methods from the layers above] in ``_tensor.py``); ``flambeau._factories`` imports it, so that
``import flambeau`` does. Segments and storages are cached weakly by identity, so views of one storage sent
separately arrive viewing one storage, and a segment is mapped once per process.

Note [Moving a storage in place]
    ``Tensor.share_memory_()`` must keep every existing view valid, as torch's does. A CPU
    tensor's ``_data`` is a numpy view on its storage's buffer, so after the bytes are copied into
    the segment the storage's ``_buffer`` and the ``_data`` of every tensor viewing the storage
    are rebuilt on the segment, with the same shape, strides, dtype and offset. Those tensors are
    found through the storage's referrers (``gc.get_referrers``, a scan of the heap); when the
    storage's reference count shows that the tensor being shared is its only holder (the common
    case: a fresh tensor put on a queue, a parameter) the scan is skipped. numpy arrays obtained
    earlier with ``Tensor.numpy()`` keep viewing the old, private memory.

Note [Arenas]
    A segment costs system calls to make and to map, a daemon round trip for a receiver to open,
    and a memory mapping (a process may have at most ``vm.max_map_count``, 65530 by default). For
    many small tensors (a data loader's labels, a stream of scalars) that dominates, so storages
    of at most :data:`SMALL_BYTES` are placed, 64-byte aligned, in the process's current arena of
    the current strategy, and a receiver that maps an arena already rebuilds further storages in
    it without opening anything. The price: an arena's memory is freed only when no process holds
    any storage in it, and a process keeps its current arena (at most :data:`ARENA_BYTES`) until
    it is full or :func:`release_arenas` is called.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import itertools
import mmap
import os
import sys
import threading
import weakref

import numpy as np

from flambeau._device import CPU
from flambeau._storage import Storage
from flambeau._tensor import Tensor, _wrap

__all__ = [
    "Segment", "STRATEGIES", "PREFIX", "SMALL_BYTES", "ARENA_BYTES", "get_strategy", "set_strategy", "set_tracker",
    "get_tracker", "share_storage_", "share_tensor_storage_", "empty_shared", "geometry", "view_on", "cached_storage",
    "cached_segment", "open_fd_segment", "open_named_segment", "storage_on", "release_arenas", "shm_names",
]

STRATEGIES = ("file_descriptor", "file_system")
PREFIX = "flambeau_"
SMALL_BYTES = 1 << 16
ARENA_BYTES = 1 << 20
_ALIGN = 64
_strategy = ["file_descriptor"]
_lock = threading.RLock()
_counter = itertools.count()
# Weak caches: one Segment per segment key, one Storage per (segment key, buffer offset) and process.
_segments: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_storages: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_arenas: dict[str, list] = {}  # strategy -> [Segment, bytes used]

try:  # POSIX shared memory objects, as multiprocessing.shared_memory uses them
    import _posixshmem
except ImportError:  # pragma: no cover - not POSIX
    _posixshmem = None


def get_strategy() -> str:
    """The strategy used by the next storage moved into shared memory."""
    return _strategy[0]


def set_strategy(name: str) -> None:
    """Set the strategy of the storages moved into shared memory from now on."""
    if name not in STRATEGIES:
        raise ValueError(f"sharing strategy must be one of {list(STRATEGIES)}, got {name!r}")
    _strategy[0] = name


def shm_names() -> list[str]:
    """Names of flambeau's file_system segments present in /dev/shm (of any process)."""
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(PREFIX))
    except FileNotFoundError:  # pragma: no cover - no /dev/shm
        return []


def release_arenas() -> None:
    """Stop filling this process's current arenas (Note [Arenas]); their memory goes with their storages."""
    with _lock:
        _arenas.clear()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()
    _arenas.clear()  # the parent keeps filling them: a child must never allocate from them


os.register_at_fork(after_in_child=_after_fork_in_child)


# --- trackers --------------------------------------------------------------------------------------
def _unlink(name: str) -> None:
    try:
        _posixshmem.shm_unlink("/" + name)
    except FileNotFoundError:
        pass


class _LocalTracker:
    """The default tracker: memfds keep their descriptor; this process unlinks the names it made."""

    def owner(self) -> int:
        return os.getpid()

    def hold(self, key: str, fd: int = -1) -> bool:
        if key.startswith("fs:"):
            _LOCAL_NAMES.add(key[3:])
        return False  # the segment keeps its descriptor

    def release(self, key: str) -> None:
        name = key[3:]
        if key.startswith("fs:") and name in _LOCAL_NAMES:
            _LOCAL_NAMES.discard(name)
            _unlink(name)


_LOCAL_NAMES: set[str] = set()
_tracker = [_LocalTracker()]


@atexit.register
def _unlink_local_names() -> None:
    for name in list(_LOCAL_NAMES):
        _unlink(name)
    _LOCAL_NAMES.clear()


def set_tracker(tracker) -> None:
    """Install the object told when this process starts and stops holding a segment.

    It has ``owner() -> int`` (a pid put in names, so that leftovers of a dead owner can be
    recognised), ``hold(key, fd=-1) -> bool`` (this process made segment ``key``, with its
    descriptor ``fd`` for a memfd; called for a name *before* the name exists, so that a tracker
    outliving this process unlinks it even if we die at once; returns True when the tracker keeps
    its own reference to ``fd``, so the segment may close it) and ``release(key)``. Receivers
    register their holds through the tracker's own API.
    """
    _tracker[0] = tracker


def get_tracker():
    """The installed tracker."""
    return _tracker[0]


# --- segments --------------------------------------------------------------------------------------
class Segment:
    """A mapping of shared memory holding the bytes of one or more storages.

    Attributes:
        mm: the ``mmap`` (views are numpy arrays over it; it is unmapped when the last goes).
        nbytes: the size of the segment in bytes (the mapping has at least one byte).
        key: the identity of the memory across processes: ``"fd:<st_dev>:<st_ino>"`` or ``"fs:<name>"``.
        fd: the descriptor of a memfd when this process keeps it (the default tracker), else -1.
        name: the shm name of a file_system segment, else None.
        base: the address of the mapping's first byte in this process.
    """

    __slots__ = ("mm", "nbytes", "fd", "name", "key", "base", "tracker", "_pid", "__weakref__")

    def __init__(self, mm, nbytes: int, key: str, fd: int = -1, tracker=None):
        self.mm = mm
        self.nbytes = nbytes
        self.key = key
        self.fd = fd
        self.name = key[3:] if key.startswith("fs:") else None
        self.tracker = tracker
        self._pid = os.getpid()
        self.base = np.frombuffer(mm, np.uint8, 1).__array_interface__["data"][0]

    @property
    def strategy(self) -> str:
        return "file_descriptor" if self.name is None else "file_system"

    def __repr__(self) -> str:
        return f"<flambeau shared Segment {self.key} of {self.nbytes} bytes>"

    def __del__(self):
        try:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
            if self.tracker is not None and self._pid == os.getpid():  # a forked child never held it
                self.tracker.release(self.key)
        except Exception:  # noqa: BLE001 - never raise from a finaliser (also at interpreter exit)
            pass


def _fd_key(fd: int) -> str:
    st = os.fstat(fd)
    return f"fd:{st.st_dev}:{st.st_ino}"


def _new_segment(nbytes: int, strategy: str) -> Segment:
    size = max(nbytes, 1)
    tracker = _tracker[0]
    if strategy == "file_system":
        name = f"{PREFIX}{tracker.owner()}_{os.getpid()}_{next(_counter)}"
        key = "fs:" + name
        tracker.hold(key)  # first, so that the name never exists untracked
        try:
            fd = _posixshmem.shm_open("/" + name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
                mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
        except BaseException:
            tracker.release(key)
            raise
        return Segment(mm, nbytes, key, tracker=tracker)
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("flambeau", os.MFD_CLOEXEC)
    else:  # pragma: no cover - POSIX without memfd: an shm object unlinked at once
        name = f"/{PREFIX}tmp_{os.getpid()}_{next(_counter)}"
        fd = _posixshmem.shm_open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        _posixshmem.shm_unlink(name)
    try:
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size)
        key = _fd_key(fd)
        if tracker.hold(key, fd):
            os.close(fd)
            fd = -1
    except BaseException:
        os.close(fd)
        raise
    return Segment(mm, nbytes, key, fd=fd, tracker=tracker)


def open_fd_segment(fd: int, nbytes: int, tracker) -> tuple[Segment, bool]:
    """Map the memfd ``fd`` received from another process; ``fd`` is closed here.

    Returns ``(segment, new)``: ``new`` is False when this process mapped it already. ``tracker``
    (which gave the descriptor and holds the memory for this process) is told when we let go.
    """
    try:
        with _lock:
            key = _fd_key(fd)
            seg = _segments.get(key)
            if seg is not None:
                return seg, False
            seg = _segments[key] = Segment(mmap.mmap(fd, max(nbytes, 1)), nbytes, key, tracker=tracker)
            return seg, True
    finally:
        os.close(fd)


def open_named_segment(name: str, nbytes: int, tracker) -> tuple[Segment, bool]:
    """Map the file_system segment ``name``; returns ``(segment, new)`` as :func:`open_fd_segment`."""
    with _lock:
        key = "fs:" + name
        seg = _segments.get(key)
        if seg is not None:
            return seg, False
        fd = _posixshmem.shm_open("/" + name, os.O_RDWR, 0o600)
        try:
            mm = mmap.mmap(fd, max(nbytes, 1))
        finally:
            os.close(fd)
        seg = _segments[key] = Segment(mm, nbytes, key, tracker=tracker)
        return seg, True


def _allocate(nbytes: int, strategy: str) -> tuple[Segment, int]:
    """A segment and a byte offset for ``nbytes`` (Note [Arenas])."""
    if nbytes > SMALL_BYTES:
        seg = _new_segment(nbytes, strategy)
        _segments[seg.key] = seg
        return seg, 0
    arena = _arenas.get(strategy)
    if arena is None or arena[1] + nbytes > arena[0].nbytes:
        seg = _new_segment(ARENA_BYTES, strategy)
        _segments[seg.key] = seg
        arena = _arenas[strategy] = [seg, 0]
    off = arena[1]
    arena[1] = off + (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
    return arena[0], off


# --- moving a storage in place (Note [Moving a storage in place]) ---------------------------------
_bounds = np.lib.array_utils.byte_bounds


def _ptr(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def _remap(arr: np.ndarray, mm, delta: int) -> np.ndarray:
    """``arr``'s geometry (shape, strides, dtype) at offset ``address - delta`` of mapping ``mm``."""
    off = _ptr(arr) - delta
    if arr.size == 0:
        off = min(max(off, 0), len(mm))
    new = np.ndarray(arr.shape, arr.dtype, buffer=mm, offset=off, strides=arr.strides)
    if not arr.flags.writeable:
        new.flags.writeable = False
    return new


class _Holder:
    __slots__ = ("s",)


def _one_holder_refcount() -> int:
    # What sys.getrefcount(t._storage) reports when t is the storage's only holder, measured on this
    # interpreter (borrowed references of newer CPythons change it).
    h = _Holder()
    h.s = object()
    return sys.getrefcount(h.s)


_ONE_HOLDER = _one_holder_refcount()


def _tensors_viewing(storage) -> list:
    return [r for r in gc.get_referrers(storage) if isinstance(r, Tensor) and r._storage is storage]


def share_tensor_storage_(tensor) -> Segment:
    """Move ``tensor``'s CPU storage into shared memory in place (no-op if it is already there).

    Every tensor viewing the storage is rebuilt on the segment (Note [Moving a storage in place]).
    """
    if tensor._storage._shared is not None:
        return tensor._storage._shared
    views = [tensor] if sys.getrefcount(tensor._storage) <= _ONE_HOLDER else None
    return share_storage_(tensor._storage, views)


def share_storage_(storage, views=None, strategy: str | None = None) -> Segment:
    """Move CPU ``storage`` into shared memory in place and return its segment.

    Args:
        storage: a CPU :class:`~flambeau._storage.Storage`.
        views: the tensors viewing ``storage`` when the caller knows them all; else they are found.
        strategy: ``"file_descriptor"`` or ``"file_system"`` (default: :func:`get_strategy`).

    Returns:
        The storage's :class:`Segment` (the existing one if it was already shared).
    """
    seg = storage._shared
    if seg is not None:
        return seg
    if storage.device.type != "cpu":
        raise ValueError(f"only CPU storages move into shared memory, got a storage on {storage.device}")
    with _lock:
        if storage._shared is not None:
            return storage._shared
        if views is None:
            views = _tensors_viewing(storage)
        buf = storage._buffer
        flags = buf.flags
        if flags.c_contiguous or flags.f_contiguous:
            lo = _ptr(buf)
            hi = lo + buf.nbytes
        else:
            lo, hi = _bounds(buf)
        for t in views:
            if t._data is not buf and t._data.size:
                a, b = _bounds(t._data)
                lo, hi = min(lo, a), max(hi, b)
        n = hi - lo
        seg, off = _allocate(n, strategy or _strategy[0])
        if n:
            src = np.ctypeslib.as_array((ctypes.c_ubyte * n).from_address(lo))
            np.frombuffer(seg.mm, np.uint8, n, off)[:] = src
        delta = lo - off
        new_buf = storage._buffer = _remap(buf, seg.mm, delta)
        for t in views:
            t._data = new_buf if t._data is buf else _remap(t._data, seg.mm, delta)
        storage._shared = seg
        _storages[(seg.key, _ptr(new_buf) - seg.base)] = storage
        return seg


def empty_shared(shape, dtype, strategy: str | None = None):
    """An uninitialised C-contiguous CPU tensor made directly in shared memory (nothing is copied).

    Args:
        shape: the sizes (a tuple of ints).
        dtype: a :class:`flambeau.dtype`.
        strategy: ``"file_descriptor"`` or ``"file_system"`` (default: :func:`get_strategy`).

    Returns:
        A tensor whose storage is shared (``is_shared()``), as a data loader's worker builds batches.
    """
    shape = tuple(int(n) for n in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    with _lock:
        seg, off = _allocate(nbytes, strategy or _strategy[0])
        arr = np.ndarray(shape, dtype.np, buffer=seg.mm, offset=off)
        storage = Storage(arr, CPU)
        storage._shared = seg
        _storages[(seg.key, off)] = storage
    return _wrap(arr, CPU, storage, dtype)


def geometry(arr: np.ndarray, seg: Segment) -> tuple:
    """``(np dtype str, shape, byte strides, byte offset)`` of ``arr`` within segment ``seg``."""
    return (arr.dtype.str, arr.shape, arr.strides, _ptr(arr) - seg.base)


def view_on(seg: Segment, geom: tuple) -> np.ndarray:
    """The numpy view of :func:`geometry` ``geom`` on segment ``seg``."""
    dtype, shape, strides, offset = geom
    return np.ndarray(shape, np.dtype(dtype), buffer=seg.mm, offset=offset, strides=strides)


# --- rebuilding from handles -------------------------------------------------------------------------
def cached_segment(key: str):
    """This process's live mapping of segment ``key``, or None."""
    return _segments.get(key)


def cached_storage(key: str, buffer_geom: tuple):
    """This process's live storage whose buffer has geometry ``buffer_geom`` in segment ``key``, or None."""
    return _storages.get((key, buffer_geom[3]))


def storage_on(seg: Segment, buffer_geom: tuple):
    """The storage of buffer geometry ``buffer_geom`` in ``seg`` (the cached one if alive)."""
    with _lock:
        k = (seg.key, buffer_geom[3])
        s = _storages.get(k)
        if s is None:
            s = Storage(view_on(seg, buffer_geom), CPU)
            s._shared = seg
            _storages[k] = s
        return s


# --- the methods of Storage and Tensor that move them into shared memory -----------------------------
# Storage and Tensor are defined below this module, which builds on them: it binds their
# ``share_memory_`` methods here (Note [Tensor methods from the layers above] in _tensor.py).
def _storage_share_memory_(self: Storage) -> Storage:
    """Move the buffer into shared memory in place (every tensor viewing it follows); return self.

    A no-op when already shared and for CUDA storages. The segment kind is the current sharing
    strategy (``flambeau.multiprocessing.set_sharing_strategy``).
    """
    if self._shared is None and self.device.type == "cpu":
        share_storage_(self)
    return self


def _tensor_share_memory_(self: Tensor) -> Tensor:
    """Move this tensor's storage into shared memory, in place, and return self.

    Every tensor viewing the same storage keeps its shape, strides, offset and values and now
    reads and writes the shared memory, which other processes can map (tensors sent through
    ``flambeau.multiprocessing`` are moved this way). The kind of memory follows the current
    sharing strategy. A no-op when the storage is already shared, and for CUDA tensors (CUDA
    memory is shared through IPC handles).
    """
    if self._storage._shared is None and self._device.type == "cpu":
        share_tensor_storage_(self)
    return self


_storage_share_memory_.__name__ = _tensor_share_memory_.__name__ = "share_memory_"
_storage_share_memory_.__qualname__ = "Storage.share_memory_"
_tensor_share_memory_.__qualname__ = "Tensor.share_memory_"
Storage.share_memory_ = _storage_share_memory_
Tensor.share_memory_ = _tensor_share_memory_
