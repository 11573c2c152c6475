"""numba-cuda External Memory Management (EMM) plugin backed by the caching allocator.

After ``numba.cuda.set_memory_manager(CachingMemoryManager)`` (or :func:`install`, or
``NUMBA_CUDA_MEMORY_MANAGER=flambeau.cuda_alloc``) every numba device array draws its
memory from the cache. Each allocation is returned as a ``MemoryPointer`` whose finalizer
gives the block back to the cache as soon as the last reference to it goes.

The EMM interface passes no stream to ``memalloc``: blocks go to the calling thread's
current stream of the allocator (see :meth:`CachingAllocator.stream`).

numba-cuda is imported only when the class is first asked for, and ``set_memory_manager``
instantiates the class once with ``context=None`` to read its interface version, so the
constructor touches no CUDA state; the allocator is looked up in :meth:`initialize`.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from ._allocator import CachingAllocator
from ._pinned import PinnedMemoryAllocator

__all__ = ["install", "memory_manager_class"]

_pinned_allocators: dict[int, PinnedMemoryAllocator] = {}


def _free_block(allocator: CachingAllocator, address: int) -> Any:
    # A closure over the allocator and address only: holding the MemoryPointer itself
    # would keep it alive forever.
    def finalize() -> None:
        allocator.free(address)

    return finalize


def _free_pinned(pinned: PinnedMemoryAllocator, address: int) -> Any:
    def finalize() -> None:
        pinned.free(address)

    return finalize


@functools.cache
def memory_manager_class(
    allocator: CachingAllocator | None = None, pinned: PinnedMemoryAllocator | None = None
) -> type:
    """The EMM plugin class, bound to ``allocator`` and ``pinned`` if given.

    Args:
        allocator: Serve device memory from this allocator; by default from the
            allocator registered for the context's device (:func:`set_allocator`), or a new
            one over :class:`NumbaDriverBackend` in that context, registered for it.
        pinned: Serve unmapped pinned host memory from this cache; by default a
            :class:`PinnedMemoryAllocator` per device over the allocator's backend.

    Returns:
        A subclass of ``numba.cuda.HostOnlyCUDAMemoryManager`` to pass to
        ``numba.cuda.set_memory_manager``.
    """
    from numba.cuda.cudadrv import driver

    class CachingMemoryManager(driver.GetIpcHandleMixin, driver.HostOnlyCUDAMemoryManager):
        """numba-cuda EMM plugin serving memory from flambeau's caching allocator."""

        _bound_allocator = allocator
        _bound_pinned = pinned

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.allocator: CachingAllocator | None = None
            self.pinned: PinnedMemoryAllocator | None = None

        def initialize(self) -> None:
            """Look up the allocators of this context's device."""
            if self.allocator is not None:
                return
            alloc = self._bound_allocator
            if alloc is None:
                from ._numba_backend import NumbaDriverBackend
                from ._registry import _get_or_create

                context, index = self.context, self.context.device.id
                alloc = _get_or_create(index, lambda: CachingAllocator(NumbaDriverBackend(index, context)))
            cache = self._bound_pinned
            if cache is None:
                cache = _pinned_allocators.get(alloc.device)
                if cache is None:
                    cache = _pinned_allocators[alloc.device] = PinnedMemoryAllocator(alloc.backend)
            self.allocator, self.pinned = alloc, cache

        def _ready(self) -> CachingAllocator:
            if self.allocator is None:
                self.initialize()
            return self.allocator

        def memalloc(self, size: int) -> Any:
            """A ``MemoryPointer`` to ``size`` bytes from the cache, on the current stream."""
            alloc = self._ready()
            address = alloc.malloc(size)
            return driver.MemoryPointer(
                weakref.proxy(self.context),
                driver.binding.CUdeviceptr(address),
                size,
                finalizer=_free_block(alloc, address),
            )

        def memhostalloc(self, size: int, mapped: bool = False, portable: bool = False,
                         wc: bool = False) -> Any:
            """Pinned host memory; plain (unmapped) requests come from the pinned cache."""
            if mapped or portable or wc:
                return super().memhostalloc(size, mapped, portable, wc)
            self._ready()
            address = self.pinned.malloc(size)
            return driver.PinnedMemory(
                weakref.proxy(self.context), address, size, finalizer=_free_pinned(self.pinned, address)
            )

        def get_ipc_handle(self, memory: Any) -> Any:
            """An ``IpcHandle`` of the segment holding ``memory``, with the block's offset."""
            alloc = self._ready()
            address = int(memory.handle) if not hasattr(memory.handle, "value") else memory.handle.value
            base, _ = alloc.segment_of(address)
            handle = alloc.backend.ipc_handle(base)
            device = getattr(self.context, "device", None)
            source = device.get_device_identity() if hasattr(device, "get_device_identity") else None
            return driver.IpcHandle(memory, handle, memory.size, source, offset=address - base)

        def get_memory_info(self) -> Any:
            """``MemoryInfo(free, total)`` of the device in bytes."""
            free, total = self._ready().backend.mem_get_info()
            return driver.MemoryInfo(free=free, total=total)

        def reset(self) -> None:
            """Release every cached device and pinned block; live blocks are untouched."""
            super().reset()
            if self.allocator is not None:
                self.allocator.empty_cache()
                self.pinned.empty_cache()

        def defer_cleanup(self) -> Any:
            """numba's deferral of host-memory cleanup. Device blocks need none: a block
            freed while kernels still use it is only reused on the same stream, after them."""
            return super().defer_cleanup()

        @property
        def interface_version(self) -> int:
            """The EMM interface version implemented: 1."""
            return 1

    return CachingMemoryManager


def install(allocator: CachingAllocator | None = None) -> type:
    """Make numba-cuda allocate every device array from the caching allocator.

    Call it before the first CUDA context is created (numba builds the plugin with the
    context).

    Args:
        allocator: Use this allocator; by default :func:`get_allocator` of each context's
            device.

    Returns:
        The installed plugin class.
    """
    from numba import cuda

    cls = memory_manager_class(allocator)
    cuda.set_memory_manager(cls)
    return cls
