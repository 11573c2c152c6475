"""One caching allocator per device, and ``torch.cuda``-style functions over them.

``get_allocator(i)`` builds the allocator of device ``i`` on first use, over numba-cuda's
driver API; ``set_allocator`` installs another one (a simulated device, say). The
functions below mirror ``torch.cuda.memory_allocated`` and friends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ._allocator import CachingAllocator

__all__ = [
    "empty_cache",
    "get_allocator",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "reset_peak_memory_stats",
    "set_allocator",
]

_lock = threading.Lock()
_allocators: dict[int, CachingAllocator] = {}


def _index(device: int | None) -> int:
    if device is None:
        return 0
    index = getattr(device, "id", device)  # accept numba Device objects
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"device: expected None or a non-negative device index, got {device!r}")
    return index


def get_allocator(device: int | None = None) -> CachingAllocator:
    """The caching allocator of ``device`` (default 0), created on first use.

    Unless :func:`set_allocator` installed one, it is built over
    :class:`~flambeau.cuda_alloc.NumbaDriverBackend`, which needs numba-cuda and a GPU; under
    numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), where device arrays are host memory,
    over a :class:`~flambeau.cuda_alloc.SimulatedDevice` that keeps the books (so a program's
    raw allocations can be counted without a GPU).
    """
    index = _index(device)
    allocator = _allocators.get(index)
    if allocator is not None:
        return allocator
    with _lock:
        allocator = _allocators.get(index)
        if allocator is None:
            if _numba_simulator():
                from ._sim import SimulatedDevice

                backend: Any = SimulatedDevice(device=index)
            else:
                from ._numba_backend import NumbaDriverBackend

                backend = NumbaDriverBackend(index)
            allocator = _allocators[index] = CachingAllocator(backend)
        return allocator


def _numba_simulator() -> bool:
    """Whether numba runs its CUDA simulator (without importing numba when it is not loaded)."""
    import os
    import sys

    config = getattr(sys.modules.get("numba.core.config"), "ENABLE_CUDASIM", None)
    if config is not None:
        return bool(config)
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _get_or_create(index: int, factory: Callable[[], CachingAllocator]) -> CachingAllocator:
    """The allocator of device ``index``, made by ``factory`` if there is none yet."""
    with _lock:
        allocator = _allocators.get(index)
        if allocator is None:
            allocator = _allocators[index] = factory()
        return allocator


def set_allocator(allocator: CachingAllocator | None, device: int | None = None) -> None:
    """Make ``allocator`` the one :func:`get_allocator` returns for ``device`` (default 0).

    ``None`` forgets the device's allocator (its cached memory is not freed; call
    :func:`empty_cache` first).
    """
    if allocator is not None and not isinstance(allocator, CachingAllocator):
        raise TypeError(f"allocator: expected a CachingAllocator or None, got {type(allocator).__name__}")
    index = _index(device)
    with _lock:
        if allocator is None:
            _allocators.pop(index, None)
        else:
            _allocators[index] = allocator


def memory_allocated(device: int | None = None) -> int:
    """Bytes in live blocks of ``device``'s allocator."""
    return get_allocator(device).memory_allocated()


def max_memory_allocated(device: int | None = None) -> int:
    """Peak bytes in live blocks since start or :func:`reset_peak_memory_stats`."""
    return get_allocator(device).max_memory_allocated()


def memory_reserved(device: int | None = None) -> int:
    """Bytes the allocator holds from the device (live and cached)."""
    return get_allocator(device).memory_reserved()


def max_memory_reserved(device: int | None = None) -> int:
    """Peak of :func:`memory_reserved` since start or :func:`reset_peak_memory_stats`."""
    return get_allocator(device).max_memory_reserved()


def reset_peak_memory_stats(device: int | None = None) -> None:
    """Set the peak statistics of ``device``'s allocator to their current values."""
    get_allocator(device).reset_peak_memory_stats()


def memory_stats(device: int | None = None) -> dict[str, int]:
    """``device``'s statistics under torch's key names (see
    :meth:`CachingAllocator.memory_stats`)."""
    return get_allocator(device).memory_stats()


def memory_summary(device: int | None = None) -> str:
    """A readable table of ``device``'s statistics."""
    return get_allocator(device).memory_summary()


def memory_snapshot(device: int | None = None) -> list[dict[str, Any]]:
    """Segments and blocks of ``device``'s allocator (see
    :meth:`CachingAllocator.memory_snapshot`)."""
    return get_allocator(device).memory_snapshot()


def empty_cache(device: int | None = None) -> None:
    """Return ``device``'s cached, unused segments to the device."""
    get_allocator(device).empty_cache()
