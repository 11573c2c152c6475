"""The allocator seam (DESIGN.md, seam 3): where CUDA storages get their device memory.

An allocator is any object with these methods (duck-typed; :class:`Allocator` documents them)::

    malloc(size: int, stream) -> int        # address of >= size bytes usable on ``stream``
    free(address: int) -> None              # the block's last reference went away
    record_stream(address: int, stream)     # the block is also used on ``stream``
    empty_cache() -> None                   # give cached, unused memory back to the device
    memory_allocated() -> int               # bytes in live blocks
    memory_reserved() -> int                # bytes held from the device (live + cached)
    memory_stats() -> dict                  # optional: more counters

``stream`` is a numba-cuda stream object. :class:`flambeau.cuda_alloc.CachingAllocator` has
exactly this interface; core never imports that package. Selection, first match wins:

1. :func:`set_allocator` (explicit, per device);
2. the environment variable ``FLAMBEAU_CUDA_ALLOCATOR``: ``native`` for plain numba
   allocation, or the name of an entry point of the ``flambeau.cuda_allocators`` group;
3. the first entry point (by name) of the ``flambeau.cuda_allocators`` group;
4. :class:`NativeAllocator`, plain numba device allocation.

An entry point loads to a callable ``factory(device_index) -> allocator`` (for example
``flambeau.cuda_alloc:get_allocator``). Under numba's CUDA simulator device memory is numpy memory
and the seam is bypassed: plain allocation is all that works there.

Memory is released when the last reference to a storage goes (reference counting): the numba
``MemoryPointer`` that wraps the address calls ``allocator.free(address)`` from its finalizer.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Protocol, runtime_checkable

__all__ = ["Allocator", "NativeAllocator", "set_allocator", "get_allocator", "ENTRY_POINT_GROUP", "ENV_VAR",
           "OutOfMemoryError", "device_malloc"]

ENTRY_POINT_GROUP = "flambeau.cuda_allocators"
ENV_VAR = "FLAMBEAU_CUDA_ALLOCATOR"

_lock = threading.Lock()
_allocators: dict[int, Any] = {}


class OutOfMemoryError(RuntimeError, MemoryError):
    """A device could not provide the memory asked for (``flambeau.OutOfMemoryError``, also
    ``flambeau.cuda.OutOfMemoryError``, as torch's): a :class:`RuntimeError`, and a :class:`MemoryError`."""


OutOfMemoryError.__module__ = "flambeau.cuda"  # its public home (and the documentation's)


def device_malloc(alloc, nbytes: int, stream) -> int:
    """``alloc.malloc(nbytes, stream)`` with an allocator's out-of-memory error (flambeau-cuda-alloc's own class,
    numba's) raised as :class:`OutOfMemoryError`, its message kept: ``except`` clauses match real subclasses
    only, so the error a program catches as torch's must be this class."""
    try:
        return alloc.malloc(nbytes, stream)
    except OutOfMemoryError:
        raise
    except Exception as e:
        said = str(e)
        if isinstance(e, MemoryError) or "OUT_OF_MEMORY" in said or "out of memory" in said.lower():
            raise OutOfMemoryError(said if "out of memory" in said.lower() else
                                   f"CUDA out of memory: tried to allocate {nbytes} bytes ({said})") from e
        raise


@runtime_checkable
class Allocator(Protocol):
    """The interface a CUDA allocator implements (structural: no need to subclass)."""

    def malloc(self, size: int, stream: Any) -> int:
        """Return the address of at least ``size`` bytes to be used on ``stream``."""

    def free(self, address: int) -> None:
        """Release the block at ``address`` (its last user is gone)."""

    def record_stream(self, address: int, stream: Any) -> None:
        """Note that the block at ``address`` is also used on ``stream``."""

    def empty_cache(self) -> None:
        """Release cached memory that no tensor uses."""

    def memory_allocated(self) -> int:
        """Bytes held by live blocks."""

    def memory_reserved(self) -> int:
        """Bytes reserved from the device (live blocks and cache)."""


class NativeAllocator:
    """Plain numba device allocation: ``malloc`` is ``cudaMalloc``, ``free`` is ``cudaFree``.

    It keeps the numba ``MemoryPointer`` of each live block until :meth:`free`, and counts
    bytes. ``memalloc`` is a callable ``size -> MemoryPointer`` (the current numba context's by
    default; tests pass a fake one).
    """

    def __init__(self, device_index: int = 0, memalloc=None):
        self.device_index = device_index
        self._memalloc = memalloc
        self._live: dict[int, tuple[Any, int]] = {}
        self._allocated = 0
        self._peak = 0
        self._count = 0
        self._lock = threading.Lock()

    def _alloc_fn(self):
        if self._memalloc is None:
            from numba import cuda

            ctx = cuda.current_context()
            self._memalloc = ctx.memalloc
        return self._memalloc

    def malloc(self, size: int, stream: Any = None) -> int:
        """Allocate ``size`` bytes (``stream`` is ignored: cudaMalloc is stream-less)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size: expected a non-negative int number of bytes, got {size!r}")
        mem = self._alloc_fn()(max(size, 1))
        address = _address_of(mem)
        self._track(address, mem, size)
        return address

    def _track(self, address: int, keep: Any, size: int) -> None:
        """Count a new block of ``size`` bytes at ``address``; ``keep`` is what :meth:`_untrack` gives back."""
        with self._lock:
            self._live[address] = (keep, size)
            self._allocated += size
            self._count += 1
            self._peak = max(self._peak, self._allocated)

    def _untrack(self, address: int) -> tuple[Any, int]:
        """Forget the block at ``address``: ``(keep, size)`` as given to :meth:`_track`."""
        with self._lock:
            entry = self._live.pop(address, None)
            if entry is None:
                raise ValueError(f"free: address {address:#x} was not allocated by this allocator")
            self._allocated -= entry[1]
        return entry

    def free(self, address: int) -> None:
        """Drop the block at ``address``; numba frees the device memory."""
        self._untrack(address)

    def record_stream(self, address: int, stream: Any) -> None:
        """Nothing to do: blocks are not reused, so no other stream can see stale data."""

    def empty_cache(self) -> None:
        """Nothing is cached."""

    def memory_allocated(self) -> int:
        return self._allocated

    def memory_reserved(self) -> int:
        return self._allocated

    def max_memory_allocated(self) -> int:
        return self._peak

    max_memory_reserved = max_memory_allocated  # nothing is cached: reserved is allocated

    def reset_peak_memory_stats(self) -> None:
        with self._lock:
            self._peak = self._allocated

    def reset_accumulated_memory_stats(self) -> None:
        """Zero the count of cudaMalloc calls (the running total; current and peak bytes stay)."""
        with self._lock:
            self._count = 0

    def memory_stats(self) -> dict:
        # "num_device_alloc" is cudaMalloc calls, as the caching allocator's key (every malloc here)
        return {"allocated_bytes.all.current": self._allocated, "allocated_bytes.all.peak": self._peak,
                "allocation.all.allocated": self._count, "reserved_bytes.all.current": self._allocated,
                "reserved_bytes.all.peak": self._peak, "num_device_alloc": self._count}

    def memory_summary(self) -> str:
        return (f"NativeAllocator (cudaMalloc per tensor, nothing cached) on cuda:{self.device_index}: "
                f"{self._allocated} bytes allocated, peak {self._peak}, {self._count} cudaMalloc calls")


def _address_of(mem) -> int:
    ptr = getattr(mem, "device_pointer_value", None)
    if ptr is None:
        ptr = int(getattr(mem, "device_pointer", 0) or 0)
    return int(ptr or 0)


def _check(obj) -> None:
    missing = [m for m in ("malloc", "free", "record_stream", "empty_cache", "memory_allocated",
                           "memory_reserved") if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(f"set_allocator(): allocator must have methods {', '.join(missing)}; "
                        f"got {type(obj).__name__}")


def set_allocator(allocator, device: int | None = None) -> None:
    """Use ``allocator`` for CUDA storages of ``device`` (default: the current device).

    ``allocator`` is an object with the :class:`Allocator` methods, or None to go back to the
    automatic choice (environment variable, entry point, plain allocation). Set it before
    allocating: blocks already allocated are freed by the allocator that made them.
    """
    index = _index(device)
    with _lock:
        if allocator is None:
            _allocators.pop(index, None)
            return
        _check(allocator)
        _allocators[index] = allocator


def get_allocator(device: int | None = None):
    """The allocator serving ``device`` (default: the current device), chosen on first use."""
    if device.__class__ is int:  # a device index, as every allocation passes: one lookup once chosen
        alloc = _allocators.get(device)
        if alloc is not None:
            return alloc
    index = _index(device)
    alloc = _allocators.get(index)
    if alloc is None:
        with _lock:
            alloc = _allocators.get(index)
            if alloc is None:
                alloc = _allocators[index] = _select(index)
    return alloc


def _index(device) -> int:
    if device is None:
        from flambeau.cuda._streams import current_device

        return current_device()
    if isinstance(device, str):  # "cuda", "cuda:1" (a str's own ``index`` is a method)
        from flambeau._device import device as to_device

        device = to_device(device)
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
    index = getattr(device, "index", device)
    if index is None:
        from flambeau.cuda._streams import current_device

        return current_device()
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"device: expected None, a CUDA device or a non-negative index, got {device!r}")
    return index


def _entry_points() -> list:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def _select(index: int, entry_points=None):
    """The allocator for device ``index`` by the selection rules of the module docstring."""
    wanted = os.environ.get(ENV_VAR, "").strip()
    if wanted == "native":
        return NativeAllocator(index)
    eps = _entry_points() if entry_points is None else list(entry_points)
    if wanted:
        chosen = [ep for ep in eps if ep.name == wanted]
        if not chosen:
            raise RuntimeError(f"{ENV_VAR}={wanted!r}: no entry point of that name in group "
                               f"{ENTRY_POINT_GROUP!r} (installed: {', '.join(ep.name for ep in eps) or 'none'})")
        eps = chosen
    for ep in eps:
        try:
            factory = ep.load()
            alloc = factory(index) if callable(factory) and not hasattr(factory, "malloc") else factory
            _check(alloc)
            return alloc
        except Exception as e:  # a broken plugin must not make CUDA unusable
            if wanted:
                raise
            warnings.warn(f"flambeau.cuda: allocator entry point {ep.name!r} failed ({e}); "
                          "using plain device allocation", RuntimeWarning, stacklevel=3)
    return NativeAllocator(index)


def _reset() -> None:
    """Forget every chosen allocator (tests)."""
    with _lock:
        _allocators.clear()
