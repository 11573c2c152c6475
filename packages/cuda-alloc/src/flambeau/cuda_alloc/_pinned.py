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
import time
from collections.abc import Hashable
from typing import Any

from ._backend import Backend
from ._stats import Stat

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

    Attributes read as statistics: ``num_host_alloc`` and ``num_host_free`` (raw calls);
    :meth:`host_memory_stats` gives them all under ``torch.cuda.host_memory_stats()`` keys.
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
        # torch's host statistics: blocks owned (live + cached), blocks handed out, their bytes
        self._blocks, self._block_bytes, self._active, self._active_bytes = Stat(), Stat(), Stat(), Stat()
        self._times = _new_times()

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
                start = time.perf_counter()
                address = self.backend.host_malloc(bucket)
                self._times["host_alloc_time"].add(time.perf_counter() - start)
                self.num_host_alloc += 1
                self._sizes[address] = bucket
                self._blocks.increase(1)
                self._block_bytes.increase(bucket)
            self._live.add(address)
            self._active.increase(1)
            self._active_bytes.increase(bucket)
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
                self._reusable(address)

    def _reusable(self, address: int) -> None:
        """Put a block whose users are all done back in its bucket (it stops being active)."""
        size = self._sizes[address]
        self._free[size].append(address)
        self._active.decrease(1)
        self._active_bytes.decrease(size)

    def _process_events(self) -> None:
        still = collections.deque()
        for events, address in self._pending:
            if all(self.backend.event_query(e) for e in events):
                self._reusable(address)
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
                    start = time.perf_counter()
                    self.backend.host_free(address)
                    self._times["host_free_time"].add(time.perf_counter() - start)
                    self._blocks.decrease(1)
                    self._block_bytes.decrease(self._sizes.pop(address))
                    self.num_host_free += 1
            self._free.clear()

    def host_memory_stats(self) -> dict[str, Any]:
        """Statistics under ``torch.cuda.host_memory_stats()`` keys.

        ``allocations`` and ``allocated_bytes``: blocks owned (live and cached, rounded
        sizes); ``active_requests`` and ``active_bytes``: blocks handed out and not yet
        reusable; each with ``current``, ``peak``, ``allocated`` and ``freed``.
        ``num_host_alloc``/``num_host_free``: raw pinning calls; ``host_alloc_time`` and
        ``host_free_time``: ``total``, ``max``, ``min``, ``count``, ``avg`` of those calls in
        microseconds.
        """
        out: dict[str, Any] = {}
        with self._lock:
            for name, stat in self._named_stats():
                for field in Stat.__slots__:
                    out[f"{name}.{field}"] = getattr(stat, field)
            out["num_host_alloc"] = self.num_host_alloc
            out["num_host_free"] = self.num_host_free
            for name, timing in self._times.items():
                for field, value in timing.as_dict().items():
                    out[f"{name}.{field}"] = value
        return out

    def reset_accumulated_host_memory_stats(self) -> None:
        """Zero the running sums (``allocated``, ``freed``), the call counts and the timings."""
        with self._lock:
            for _, stat in self._named_stats():
                stat.allocated = stat.freed = 0
            self.num_host_alloc = self.num_host_free = 0
            self._times = _new_times()

    def reset_peak_host_memory_stats(self) -> None:
        """Set every peak to its current value."""
        with self._lock:
            for _, stat in self._named_stats():
                stat.peak = stat.current

    def _named_stats(self) -> tuple[tuple[str, Stat], ...]:
        """The four host statistics under their ``host_memory_stats()`` names."""
        return (("allocations", self._blocks), ("allocated_bytes", self._block_bytes),
                ("active_requests", self._active), ("active_bytes", self._active_bytes))


class _Timing:
    """Durations of raw calls: total, max, min, count (microseconds; torch's ``*_time`` keys)."""

    def __init__(self) -> None:
        self.total = self.max = self.min = 0.0
        self.count = 0

    def add(self, seconds: float) -> None:
        us = seconds * 1e6
        self.min = us if self.count == 0 else min(self.min, us)
        self.max = max(self.max, us)
        self.total += us
        self.count += 1

    def as_dict(self) -> dict[str, float]:
        return {"total": self.total, "max": self.max, "min": self.min, "count": self.count,
                "avg": self.total / self.count if self.count else 0.0}


def _new_times() -> dict[str, _Timing]:
    """Fresh timings of the raw pinning calls, under torch's key prefixes."""
    return {"host_alloc_time": _Timing(), "host_free_time": _Timing()}
