"""The raw device interface the caching allocator sits on.

A backend does the few things the allocator cannot do itself: take memory from the device
and give it back (``cudaMalloc``/``cudaFree``), record an event on a stream and ask whether
it has completed, and report the device's free and total memory. Two implementations ship:
:class:`~flambeau.cuda_alloc.SimulatedDevice` (no GPU needed) and
:class:`~flambeau.cuda_alloc.NumbaDriverBackend` (numba-cuda's driver API).
"""

from __future__ import annotations

import abc
from collections.abc import Hashable
from typing import Any

__all__ = ["Backend", "DeviceOutOfMemory"]


class DeviceOutOfMemory(Exception):
    """Raised by :meth:`Backend.malloc` when the device cannot satisfy a raw allocation.

    The allocator catches it to free cached memory and retry; users see
    :class:`~flambeau.cuda_alloc.OutOfMemoryError` instead.
    """


class Backend(abc.ABC):
    """Raw device memory, events and streams of one device.

    Streams are whatever the backend understands (numba ``Stream`` objects, simulated
    streams); the allocator only needs :meth:`stream_key` to tell them apart and
    :meth:`default_stream` when the caller names none.
    """

    device: int = 0

    @abc.abstractmethod
    def malloc(self, size: int) -> int:
        """Allocate ``size`` bytes of device memory and return its address.

        Raises:
            DeviceOutOfMemory: the device has not enough free memory.
        """

    @abc.abstractmethod
    def free(self, address: int) -> None:
        """Return a whole allocation made by :meth:`malloc` to the device."""

    @abc.abstractmethod
    def mem_get_info(self) -> tuple[int, int]:
        """Return ``(free, total)`` device memory in bytes."""

    @abc.abstractmethod
    def record_event(self, stream: Any) -> Any:
        """Record and return an event that completes when the work queued so far on
        ``stream`` has finished."""

    @abc.abstractmethod
    def event_query(self, event: Any) -> bool:
        """Whether ``event`` has completed, without waiting."""

    @abc.abstractmethod
    def event_synchronize(self, event: Any) -> None:
        """Block the host until ``event`` has completed."""

    @abc.abstractmethod
    def default_stream(self) -> Any:
        """The stream used when a caller names none."""

    def stream_key(self, stream: Any) -> Hashable:
        """A hashable identity of ``stream``: two objects for the same stream give equal
        keys. The default uses the object itself."""
        return stream

    def synchronize(self) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Block the host until all work on the device has finished."""

    def host_malloc(self, size: int) -> int:
        """Allocate ``size`` bytes of page-locked host memory and return its address.

        Only backends used under a :class:`~flambeau.cuda_alloc.PinnedMemoryAllocator`
        need it.
        """
        raise NotImplementedError(f"{type(self).__name__} does not allocate pinned host memory")

    def host_free(self, address: int) -> None:
        """Release page-locked host memory made by :meth:`host_malloc`."""
        raise NotImplementedError(f"{type(self).__name__} does not allocate pinned host memory")

    def ipc_handle(self, address: int) -> Any:
        """An IPC handle of the raw allocation starting at ``address`` (``cuIpcGetMemHandle``)."""
        raise NotImplementedError(f"{type(self).__name__} has no IPC handles")
