"""A caching allocator of page-locked (pinned) host memory.

Pinning memory (``cudaHostAlloc``) is slow and freeing it synchronises the device, so a
data loader that pins every batch would stall the GPU. Like PyTorch's
``CachingHostAllocator``, blocks are rounded up to powers of two and kept for reuse. A
block copied from asynchronously on a stream must not be overwritten before the copy has
run: :meth:`PinnedMemoryAllocator.record_stream` makes its free wait for that stream.
"""

from __future__ import annotations

import collections
import ctypes
import threading
from collections.abc import Hashable
from typing import Any

from ._backend import Backend

__all__ = ["PinnedMemoryAllocator"]

_MIN_SIZE = 512


def _bucket(size: int) -> int:
    # Power-of-two buckets: at most 2x waste, and a freed block fits any later request of
    # the same bucket, so a steady stream of similar batches reuses blocks.
    return max(_MIN_SIZE, 1 << (size - 1).bit_length())


class PinnedMemoryAllocator:
    """Caches pinned host blocks of a backend (see the module docstring).

    Args:
        backend: Provides ``host_malloc``/``host_free``, events and streams.

    Attributes read as statistics: ``num_host_alloc`` and ``num_host_free`` (raw calls).
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        self._sizes: dict[int, int] = {}  # address -> bucket size of every block it owns
        self._live: set[int] = set()
        self._uses: dict[int, set[Hashable]] = {}
        self._streams: dict[Hashable, Any] = {}
        self._free: dict[int, list[int]] = collections.defaultdict(list)  # size -> addresses
        self._pending: collections.deque = collections.deque()  # (events, address)
        self.num_host_alloc = 0
        self.num_host_free = 0

    def malloc(self, size: int) -> int:
        """Return the address of a pinned block of at least ``size`` bytes."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size: expected a non-negative int number of bytes, got {size!r}")
        bucket = _bucket(size)
        with self._lock:
            self._process_events()
            free = self._free.get(bucket)
            if free:
                address = free.pop()
            else:
                address = self.backend.host_malloc(bucket)
                self.num_host_alloc += 1
                self._sizes[address] = bucket
            self._live.add(address)
            return address

    def block_size(self, address: int) -> int:
        """The size in bytes of the block at ``address`` (a power of two)."""
        return self._sizes[address]

    def buffer(self, address: int) -> memoryview:
        """A writable byte view of the live block at ``address`` (e.g. for ``numpy.frombuffer``)."""
        if address not in self._live:
            raise ValueError(f"address: expected a live pinned block, got {address:#x}")
        return memoryview((ctypes.c_char * self._sizes[address]).from_address(address)).cast("B")

    def record_stream(self, address: int, stream: Any) -> None:
        """Keep the block at ``address`` from reuse until work queued on ``stream`` up to its
        free has completed."""
        key = self.backend.stream_key(stream)
        with self._lock:
            if address not in self._live:
                raise ValueError(f"address: expected a live pinned block, got {address:#x}")
            self._streams.setdefault(key, stream)
            self._uses.setdefault(address, set()).add(key)

    def free(self, address: int) -> None:
        """Return the block at ``address`` to the cache."""
        with self._lock:
            if address not in self._live:
                raise ValueError(f"address: expected a live pinned block, got {address:#x}")
            self._live.discard(address)
            uses = self._uses.pop(address, None)
            if uses:
                events = [self.backend.record_event(self._streams[key]) for key in uses]
                self._pending.append((events, address))
            else:
                self._free[self._sizes[address]].append(address)

    def _process_events(self) -> None:
        still = collections.deque()
        for events, address in self._pending:
            if all(self.backend.event_query(e) for e in events):
                self._free[self._sizes[address]].append(address)
            else:
                still.append((events, address))
        self._pending = still

    def cached_bytes(self) -> int:
        """Bytes of pinned memory held, live or cached."""
        return sum(self._sizes.values())

    def empty_cache(self) -> None:
        """Wait for pending events, then release every cached block to the host."""
        with self._lock:
            for events, _ in self._pending:
                for event in events:
                    self.backend.event_synchronize(event)
            self._process_events()
            for free in self._free.values():
                for address in free:
                    self.backend.host_free(address)
                    del self._sizes[address]
                    self.num_host_free += 1
            self._free.clear()
