"""PyTorch's CUDA caching allocator for numba-cuda.

``cudaMalloc`` is slow and ``cudaFree`` may wait for every queued kernel on the device,
so a program that allocates an output per operator spends its time in the driver. A
:class:`CachingAllocator` keeps freed device memory and hands it out again with PyTorch's
policy: 512-byte rounding, small and large pools, splitting and merging (best fit in the
small pool; first fit in the order segments were made in the large pool, so that a
repeated training step makes no raw allocation), one pool per stream, events for memory
used on several streams (section 5.3 of the PyTorch paper).

It works over a small raw-device interface (:class:`Backend`): numba-cuda's driver API on
a GPU (:class:`NumbaDriverBackend`) or a :class:`SimulatedDevice` that models memory,
streams and the cost of ``cudaFree`` anywhere. :func:`install` plugs it into numba-cuda
as an External Memory Manager, so every numba device array uses the cache. It does not
depend on the rest of flambeau.

Settings come from ``FLAMBEAU_CUDA_ALLOC_CONF`` (``max_split_size_mb``,
``garbage_collection_threshold``, ``roundup_power2_divisions``) or
:meth:`CachingAllocator.set_config`.
"""

from __future__ import annotations

from typing import Any

from ._allocator import CachingAllocator, OutOfMemoryError, round_size
from ._backend import Backend, DeviceOutOfMemory
from ._config import ENV_VAR, AllocatorConfig, parse_config
from ._emm import install, memory_manager_class
from ._pinned import PinnedMemoryAllocator
from ._registry import (
    empty_cache,
    get_allocator,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_peak_memory_stats,
    set_allocator,
)
from ._sim import SimEvent, SimStream, SimulatedDevice

__all__ = [
    "ENV_VAR",
    "AllocatorConfig",
    "Backend",
    "CachingAllocator",
    "CachingMemoryManager",
    "DeviceOutOfMemory",
    "NumbaDriverBackend",
    "OutOfMemoryError",
    "PinnedMemoryAllocator",
    "SimEvent",
    "SimStream",
    "SimulatedDevice",
    "empty_cache",
    "get_allocator",
    "install",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_manager_class",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "parse_config",
    "reset_peak_memory_stats",
    "round_size",
    "set_allocator",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # numba-cuda is imported only when its pieces are asked for. ``_numba_memory_manager``
    # lets ``NUMBA_CUDA_MEMORY_MANAGER=flambeau.cuda_alloc`` select the plugin.
    if name in ("CachingMemoryManager", "_numba_memory_manager"):
        return memory_manager_class()
    if name == "NumbaDriverBackend":
        from ._numba_backend import NumbaDriverBackend

        return NumbaDriverBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
