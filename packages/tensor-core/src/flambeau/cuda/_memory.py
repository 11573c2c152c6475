"""``torch.cuda`` memory management over the allocator seam (``_allocator.py``, DESIGN.md seam 3).

Everything here asks the allocator of a device for what it can do, duck-typed: the caching
allocator of flambeau-cuda-alloc has memory pools, a memory fraction, raw blocks, snapshots and
caching on/off; flambeau's :class:`~flambeau.cuda.NativeAllocator` (plain ``cudaMalloc``) has only
counters, and the functions that need more raise ``RuntimeError`` naming the allocator. Core never
imports flambeau-cuda-alloc.

Under numba's simulator the caching allocator keeps its books over a simulated device of 16 GiB
(device memory itself is host memory): the memory fraction, pools and statistics behave as on a
GPU, and :func:`mem_get_info` reports the simulated device.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
import threading
import warnings
from typing import Any

from flambeau.cuda import _allocator
from flambeau.cuda._allocator import device_malloc, get_allocator, set_allocator
from flambeau.cuda._streams import stream_handle

__all__ = ["mem_get_info", "memory_stats_as_nested_dict", "memory_snapshot", "memory_cached", "max_memory_cached",
           "reset_accumulated_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction", "caching_allocator_alloc",
           "caching_allocator_delete", "caching_allocator_enable", "caching_allocator_disabled",
           "get_allocator_backend", "CUDAPluggableAllocator", "change_current_allocator", "MemPool",
           "use_mem_pool", "host_memory_stats", "host_memory_stats_as_nested_dict",
           "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats", "ipc_collect"]


def _cuda():
    import flambeau.cuda as cuda

    return cuda


def _index(device) -> int:
    """The device index of ``device`` (None: the current device), after checking CUDA can be used."""
    cuda = _cuda()
    cuda._lazy_init()
    if device is None:
        return cuda.current_device()
    from flambeau.cuda._streams import _device_index

    return _device_index(device)


def _needs(allocator, method: str, what: str):
    fn = getattr(allocator, method, None)
    if fn is None:
        raise RuntimeError(f"{what} needs a caching allocator (flambeau-cuda-alloc); the allocator of this device "
                           f"is {type(allocator).__name__} ({get_allocator_backend_of(allocator)!r})")
    return fn


# --- device memory and statistics ----------------------------------------------------------------------------
def mem_get_info(device=None) -> tuple[int, int]:
    """``(free, total)`` bytes of global memory of ``device``, as the driver reports them (``cudaMemGetInfo``).

    Under numba's simulator, whose driver reports infinite memory, they are the simulated device's of the
    caching allocator (16 GiB by default); ``RuntimeError`` if the device's allocator models no device.
    """
    index = _index(device)
    if _cuda().is_simulator():
        backend = getattr(get_allocator(index), "backend", None)
        if backend is None or not hasattr(backend, "mem_get_info"):
            raise RuntimeError("mem_get_info: numba's CUDA simulator reports no device memory (free=inf, "
                               "total=inf) and the allocator of this device models none")
        free, total = backend.mem_get_info()
        return int(free), int(total)
    from numba import cuda as numba_cuda

    from flambeau.cuda._streams import _on_device

    with _on_device(index):
        free, total = numba_cuda.current_context().get_memory_info()
    return int(free), int(total)


def _nest(flat: dict) -> dict:
    out: dict = {}
    for key, value in flat.items():
        *path, last = key.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def memory_stats_as_nested_dict(device=None) -> dict[str, Any]:
    """:func:`flambeau.cuda.memory_stats` as a nested dict: ``stats["allocated_bytes"]["all"]["current"]``."""
    return _nest(_cuda().memory_stats(device))


def memory_snapshot(mempool_id=None) -> list[dict[str, Any]]:
    """Segments of the caching allocators of every device used so far, with their blocks (torch's keys).

    Each segment: ``device``, ``address``, ``total_size``, ``allocated_size``, ``active_size``,
    ``requested_size``, ``stream``, ``segment_type`` (``"small"``/``"large"``), ``segment_pool_id``,
    ``is_expandable``, ``frames`` and ``blocks`` (``address``, ``size``, ``requested_size``, ``state``:
    ``"active_allocated"``, ``"active_pending_free"`` or ``"inactive"``, ``frames``). With ``mempool_id``
    (a :attr:`MemPool.id`), only that pool's segments. Allocators without segments contribute none.
    """
    segments = []
    for _, alloc in sorted(_allocator._allocators.items()):
        snapshot = getattr(alloc, "memory_snapshot", None)
        if snapshot is not None:
            segments += [s for s in snapshot() if mempool_id is None or s.get("segment_pool_id") == tuple(mempool_id)]
    return segments


def memory_cached(device=None) -> int:
    """Deprecated; see :func:`flambeau.cuda.memory_reserved` (FutureWarning, as torch)."""
    warnings.warn("`flambeau.cuda.memory_cached` has been renamed to `flambeau.cuda.memory_reserved`", FutureWarning,
                  stacklevel=2)
    return _cuda().memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated; see :func:`flambeau.cuda.max_memory_reserved` (FutureWarning, as torch)."""
    warnings.warn("`flambeau.cuda.max_memory_cached` has been renamed to `flambeau.cuda.max_memory_reserved`",
                  FutureWarning, stacklevel=2)
    return _cuda().max_memory_reserved(device)


def reset_accumulated_memory_stats(device=None) -> None:
    """Zero the running totals of ``device``'s allocator (``*.allocated``, ``*.freed``, retries, OOMs)."""
    alloc = get_allocator(_index(device))
    _needs(alloc, "reset_accumulated_memory_stats", "reset_accumulated_memory_stats")()


def reset_max_memory_allocated(device=None) -> None:
    """Deprecated: calls :func:`flambeau.cuda.reset_peak_memory_stats` (every peak), with torch's FutureWarning."""
    warnings.warn("flambeau.cuda.reset_max_memory_allocated now calls flambeau.cuda.reset_peak_memory_stats, "
                  "which resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    _cuda().reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    """Deprecated: calls :func:`flambeau.cuda.reset_peak_memory_stats` (every peak), with torch's FutureWarning."""
    warnings.warn("flambeau.cuda.reset_max_memory_cached now calls flambeau.cuda.reset_peak_memory_stats, "
                  "which resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    _cuda().reset_peak_memory_stats(device)


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Cap the memory the caching allocator of ``device`` reserves at ``fraction * total memory``.

    An allocation that would need more raises the allocator's out-of-memory error (a ``RuntimeError`` and
    ``MemoryError``, message ``CUDA out of memory. Tried to allocate ... <cap> allowed; ...``), after the
    cached memory was freed and the request retried, as in torch.

    Raises:
        TypeError: ``fraction`` is not a float. ValueError: it is outside [0, 1].
    """
    index = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _needs(get_allocator(index), "set_memory_fraction", "set_per_process_memory_fraction")(fraction)


def get_per_process_memory_fraction(device=None) -> float:
    """The memory fraction of ``device``'s allocator (1.0 unless :func:`set_per_process_memory_fraction`)."""
    alloc = get_allocator(_index(device))
    fn = getattr(alloc, "get_memory_fraction", None)
    return 1.0 if fn is None else float(fn())


# --- raw blocks and the allocator itself -----------------------------------------------------------------------
_raw_lock = threading.Lock()
_raw_blocks: dict[int, Any] = {}  # address -> allocator of blocks from caching_allocator_alloc


def caching_allocator_alloc(size, device=None, stream=None) -> int:
    """Allocate ``size`` bytes from the allocator of ``device`` for use on ``stream``; returns the address.

    ``stream`` is a :class:`flambeau.cuda.Stream`, an int ``cudaStream_t`` or None (the current stream).
    Free with :func:`caching_allocator_delete`. Under numba's simulator the address is the simulated
    device's: it keeps the allocator's books but is not memory the host can touch.
    """
    from flambeau.cuda._streams import Stream, _on_device, current_stream

    index = _index(device)
    if stream is None:
        stream = current_stream(index)
    if not isinstance(stream, (Stream, int)) or isinstance(stream, bool):
        raise TypeError("Invalid type for stream argument, must be `flambeau.cuda.Stream` or `int` representing a "
                        "pointer to an existing stream")
    alloc = get_allocator(index)
    if _cuda().is_simulator():
        numba_stream = None  # the simulated device's own stream (as storages under the simulator)
    elif isinstance(stream, Stream):
        numba_stream = stream.numba
    else:
        from numba import cuda as numba_cuda

        with _on_device(index):
            numba_stream = numba_cuda.external_stream(stream) if stream else numba_cuda.default_stream()
    with _on_device(index):
        address = device_malloc(alloc, int(size), numba_stream)
    with _raw_lock:
        _raw_blocks[address] = alloc
    return address


def caching_allocator_delete(mem_ptr: int) -> None:
    """Free a block of :func:`caching_allocator_alloc` (its device and stream are remembered)."""
    with _raw_lock:
        alloc = _raw_blocks.pop(mem_ptr, None)
    if alloc is None:
        raise RuntimeError(f"invalid device pointer: {mem_ptr:#x}" if isinstance(mem_ptr, int) else
                           f"invalid device pointer: {mem_ptr!r}")
    alloc.free(mem_ptr)


def caching_allocator_enable(value: bool = True) -> None:
    """Turn caching of freed device memory on (default) or off for every device in use.

    Off, a freed block's segment returns to the device once none of its blocks is live. Allocators that do
    not cache are unaffected. Like torch, it does nothing before CUDA is initialized.
    """
    if not _cuda().is_initialized():
        return
    for alloc in list(_allocator._allocators.values()):
        fn = getattr(alloc, "set_caching_enabled", None)
        if fn is not None:
            fn(bool(value))


@contextlib.contextmanager
def caching_allocator_disabled():
    """Context manager that turns caching off inside the block (see :func:`caching_allocator_enable`)."""
    allocs = [a for a in _allocator._allocators.values() if hasattr(a, "caching_enabled")]
    before = [a.caching_enabled() for a in allocs]
    caching_allocator_enable(False)
    try:
        yield
    finally:
        for alloc, was in zip(allocs, before):
            alloc.set_caching_enabled(was)


def get_allocator_backend_of(alloc) -> str:
    """The :func:`get_allocator_backend` name of allocator ``alloc``."""
    if hasattr(alloc, "memory_snapshot") and hasattr(alloc, "create_pool"):
        return "native"
    if isinstance(alloc, _allocator.NativeAllocator):
        return "pluggable" if isinstance(alloc, _PluggableAllocator) else "cudaMalloc"
    return str(getattr(alloc, "name", type(alloc).__name__))


def get_allocator_backend() -> str:
    """The kind of allocator serving the current device.

    ``"native"``: the caching allocator with torch's policy (flambeau-cuda-alloc, as torch's own
    ``native``); ``"pluggable"``: a :class:`CUDAPluggableAllocator`; ``"cudaMalloc"``: flambeau's
    :class:`~flambeau.cuda.NativeAllocator` (one ``cudaMalloc`` per storage, nothing cached); any other
    allocator: its ``name`` attribute or class name.
    """
    return get_allocator_backend_of(get_allocator())


class _PluggableAllocator(_allocator.NativeAllocator):
    """The :class:`~flambeau.cuda.Allocator` of one device over a :class:`CUDAPluggableAllocator`'s functions
    (the counting of :class:`~flambeau.cuda.NativeAllocator`, the memory of the library)."""

    name = "pluggable"

    def __init__(self, owner: CUDAPluggableAllocator, device_index: int):
        super().__init__(device_index)
        self.owner = owner

    def malloc(self, size: int, stream: Any = None) -> int:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size: expected a non-negative int number of bytes, got {size!r}")
        handle = stream_handle(stream)
        address = self.owner._alloc_fn(size, self.device_index, handle)
        if not address:
            raise RuntimeError(f"CUDA out of memory. Tried to allocate {size} bytes: the pluggable allocator's "
                               f"{self.owner.alloc_fn_name}() returned NULL")
        self._track(address, handle, size)
        return address

    def free(self, address: int) -> None:
        handle, size = self._untrack(address)
        self.owner._free_fn(address, size, self.device_index, handle)

    def memory_summary(self) -> str:
        return (f"CUDAPluggableAllocator ({self.owner.path}: {self.owner.alloc_fn_name}/{self.owner.free_fn_name}) "
                f"on cuda:{self.device_index}: {self._allocated} bytes allocated, peak {self._peak}")


class CUDAPluggableAllocator:
    """A device allocator whose functions come from a shared library (loaded with ctypes).

    Args:
        path_to_so_file: Path of the ``.so``.
        alloc_fn_name: ``void* alloc_fn_name(ssize_t size, int device, cudaStream_t stream)``.
        free_fn_name: ``void free_fn_name(void* ptr, size_t size, int device, cudaStream_t stream)``.

    Make it current with :func:`change_current_allocator`. ``OSError`` if the library cannot be loaded,
    ``AttributeError`` if it lacks a symbol (as torch).
    """

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str):
        lib = ctypes.CDLL(path_to_so_file)
        alloc_fn = getattr(lib, alloc_fn_name)
        free_fn = getattr(lib, free_fn_name)
        alloc_fn.argtypes, alloc_fn.restype = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p], ctypes.c_void_p
        free_fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        free_fn.restype = None
        self.path, self.alloc_fn_name, self.free_fn_name = path_to_so_file, alloc_fn_name, free_fn_name
        self._lib, self._alloc_fn, self._free_fn = lib, alloc_fn, free_fn
        self._per_device: dict[int, _PluggableAllocator] = {}

    def allocator(self, device: int = 0) -> _PluggableAllocator:
        """The :class:`~flambeau.cuda.Allocator` of device ``device`` over these functions."""
        alloc = self._per_device.get(device)
        if alloc is None:
            alloc = self._per_device[device] = _PluggableAllocator(self, device)
        return alloc


def change_current_allocator(allocator: CUDAPluggableAllocator) -> None:
    """Serve the device memory of every CUDA device from ``allocator`` (a :class:`CUDAPluggableAllocator`).

    Unlike torch, which refuses once its allocator was used, the switch may come at any time: blocks already
    allocated are freed by the allocator that made them (the allocator seam keeps that link per block).
    """
    if not isinstance(allocator, CUDAPluggableAllocator):
        raise TypeError(f"change_current_allocator(): expected a CUDAPluggableAllocator, got "
                        f"{type(allocator).__name__}")
    cuda = _cuda()
    cuda._lazy_init()
    for index in range(max(cuda.device_count(), 1)):
        set_allocator(allocator.allocator(index), index)


# --- memory pools ------------------------------------------------------------------------------------------
class MemPool:
    """A pool of the caching allocator: allocations made inside :func:`use_mem_pool` come from segments of
    their own, and blocks freed go back to this pool only.

    While the pool object lives, :func:`flambeau.cuda.empty_cache` keeps its cached segments; they go back to
    the device when it is deleted. ``allocator`` (a custom allocator for the pool), ``use_on_oom`` and
    ``no_split`` are not supported: ``NotImplementedError`` if set.
    """

    def __init__(self, allocator=None, use_on_oom: bool = False, no_split: bool = False):
        if allocator is not None or use_on_oom or no_split:
            raise NotImplementedError("MemPool: allocator, use_on_oom and no_split are not supported; flambeau's "
                                      "memory pools are pools of its caching allocator")
        self.device_index = _index(None)
        self._alloc = get_allocator(self.device_index)
        self._pool = _needs(self._alloc, "create_pool", "MemPool")()

    @property
    def id(self) -> tuple[int, int]:
        """The pool's id, ``(0, n)`` (the ``segment_pool_id`` of its segments in :func:`memory_snapshot`)."""
        return 0, self._pool

    @property
    def allocator(self):
        """None: the pool uses the caching allocator of its device."""
        return None

    def snapshot(self) -> list[dict[str, Any]]:
        """:func:`memory_snapshot` of this pool's segments."""
        return memory_snapshot(self.id)

    def __del__(self):
        alloc = getattr(self, "_alloc", None)
        if alloc is not None:
            with contextlib.suppress(Exception):  # interpreter shutdown
                alloc.release_pool(self._pool)


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device=None):
    """Context manager routing the calling thread's allocations on ``device`` to ``pool``."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool(): expected a flambeau.cuda.MemPool, got {type(pool).__name__}")
    index = _index(device)
    if index != pool.device_index:
        raise ValueError(f"use_mem_pool(): the pool belongs to cuda:{pool.device_index}, not cuda:{index}")
    with pool._alloc.use_pool(pool._pool):
        yield


# --- pinned host memory ------------------------------------------------------------------------------------
_HOST_KEYS = [f"{s}.{f}" for s in ("allocations", "allocated_bytes", "active_requests", "active_bytes")
              for f in ("current", "peak", "allocated", "freed")]
_HOST_KEYS += ["num_host_alloc", "num_host_free"]
_HOST_KEYS += [f"{s}.{f}" for s in ("host_alloc_time", "host_free_time") for f in ("total", "max", "min", "count",
                                                                                   "avg")]


def _pinned_caches() -> list:
    """The caching pinned allocators serving ``Tensor.pin_memory`` (flambeau-cuda-alloc's, when it is numba's
    memory manager, on every device used so far)."""
    cuda = _cuda()
    if not cuda.is_initialized() or cuda.is_simulator():
        return []
    from numba import cuda as numba_cuda

    from flambeau.cuda._streams import _on_device

    caches = []
    for index in sorted(_allocator._allocators):
        with _on_device(index):
            pinned = getattr(numba_cuda.current_context().memory_manager, "pinned", None)
        if pinned is not None and hasattr(pinned, "host_memory_stats") and pinned not in caches:
            caches.append(pinned)
    return caches


def host_memory_stats() -> dict[str, Any]:
    """Statistics of the pinned host allocator, under torch's keys.

    ``allocations`` / ``allocated_bytes``: pinned blocks owned (live and cached); ``active_requests`` /
    ``active_bytes``: blocks handed out; ``num_host_alloc`` / ``num_host_free``: raw pinning calls;
    ``host_alloc_time`` / ``host_free_time``: their durations (µs). They count the caching pinned
    allocator of flambeau-cuda-alloc, which serves ``Tensor.pin_memory`` when it is numba's memory
    manager; pinned memory numba allocates itself is not counted (all zeros, as before any pinning).
    """
    out: dict[str, Any] = dict.fromkeys(_HOST_KEYS, 0)
    for cache in _pinned_caches():
        for key, value in cache.host_memory_stats().items():
            if key.endswith((".max", ".peak")):
                out[key] = max(out[key], value)
            elif key.endswith(".min"):
                out[key] = value if not out[key] else min(out[key], value)
            else:
                out[key] += value
    count = out["host_alloc_time.count"], out["host_free_time.count"]
    out["host_alloc_time.avg"] = out["host_alloc_time.total"] / count[0] if count[0] else 0
    out["host_free_time.avg"] = out["host_free_time.total"] / count[1] if count[1] else 0
    return out


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """:func:`host_memory_stats` as a nested dict."""
    return _nest(host_memory_stats())


def reset_accumulated_host_memory_stats() -> None:
    """Zero the running totals, call counts and timings of the pinned host allocator."""
    for cache in _pinned_caches():
        cache.reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    """Set the peaks of the pinned host allocator's statistics to their current values."""
    for cache in _pinned_caches():
        cache.reset_peak_host_memory_stats()


def ipc_collect() -> None:
    """Free the CUDA storages this process sent to others (CUDA IPC) that every consumer has released.

    Runs a garbage collection first, so that received storages in unreachable cycles close their IPC
    mappings. A process that never sent a CUDA tensor (``flambeau.multiprocessing`` not loaded) holds none.
    """
    _cuda()._lazy_init()
    gc.collect()
    sharing = sys.modules.get("flambeau.multiprocessing._cuda")
    if sharing is not None:
        sharing.ipc_collect()
