"""The caching allocator: PyTorch's policy for reusing device memory without ``cudaFree``.

Note [Caching allocator policy]
    Raw device allocations ("segments") are never returned to the device on ``free``;
    they are carved into blocks and the blocks reused. Requests are rounded up to 512
    bytes. Requests up to 1 MiB come from the small pool, whose segments are 2 MiB;
    larger ones come from the large pool, whose segments are 20 MiB for requests under
    10 MiB and otherwise the request rounded up to 2 MiB. A request takes the smallest
    free block that fits (best fit, ties broken by address) and splits off the rest when
    at least 512 B (small pool) or more than 1 MiB (large pool) would remain. A freed
    block merges with free neighbours of its segment.

Note [One pool per stream]
    Each block belongs to the stream it was allocated on, and only allocations on that
    stream reuse it. Streams execute in order, so a block freed on the host while its
    last kernel is still queued can be handed out at once to the next allocation on the
    same stream: that allocation's kernels run after it. If the block was also used on
    other streams (``record_stream``), freeing it records an event on each of them and
    the block returns to its pool only once they all completed; pending events are
    polled at every allocation.

Note [Out of memory]
    When the device refuses a segment we first free cached oversize blocks (blocks of
    at least ``max_split_size``) of the pool and retry, then wait for every pending
    event, free every cached segment that holds no live block, and retry once more.
    Only then is :class:`OutOfMemoryError` raised, with the numbers a user needs.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import warnings
from bisect import bisect_left, insort
from collections.abc import Hashable, Iterator
from typing import Any

from ._backend import Backend, DeviceOutOfMemory
from ._config import AllocatorConfig, check_divisions, check_gc_threshold, check_max_split_size
from ._stats import (
    ALLOC_BYTES,
    ALLOC_COUNT,
    LARGE,
    PEND_BYTES,
    PEND_COUNT,
    REQ_BYTES,
    SMALL,
    SPLIT_BYTES,
    SPLIT_COUNT,
    DeviceStats,
    format_bytes,
    format_summary,
)

__all__ = ["CachingAllocator", "OutOfMemoryError", "round_size"]

MIN_BLOCK_SIZE = 512  # every size is rounded up to a multiple of this
SMALL_SIZE = 1 << 20  # largest request served by the small pool
SMALL_BUFFER = 2 << 20  # small-pool segment size
LARGE_BUFFER = 20 << 20  # large-pool segment size for requests under MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20  # larger segments are rounded up to this
_NO_LIMIT = 1 << 62  # max_split_size when unset: keeps the hot path free of None checks
# A free block's sort key is size << _KEY_SHIFT | address: one int orders by (size,
# address) and compares faster than a tuple. Device addresses fit in 64 bits.
_KEY_SHIFT = 64
_ADDRESS_MASK = (1 << _KEY_SHIFT) - 1
_get_ident = threading.get_ident


assert (ALLOC_BYTES, ALLOC_COUNT, REQ_BYTES) == (0, 3, 6)  # unrolled in CachingAllocator.malloc


class OutOfMemoryError(RuntimeError, MemoryError):
    """The device has not enough memory for a request, even after freeing the cache.

    Like ``torch.OutOfMemoryError`` it is a :class:`RuntimeError` (and a
    :class:`MemoryError`). The message gives the requested size, the device's total and
    free memory, what the allocator has allocated and what it holds reserved but unused.
    """


def round_size(size: int, divisions: int = 1) -> int:
    """Round a request of ``size`` bytes up to the size of the block that serves it.

    Sizes become multiples of 512 bytes. With ``divisions`` > 1, sizes above
    ``512 * divisions`` are instead rounded up to the next of ``divisions`` equal steps
    between consecutive powers of two (PyTorch's ``roundup_power2_divisions``).
    """
    if size <= MIN_BLOCK_SIZE:
        return MIN_BLOCK_SIZE
    if divisions > 1 and size > MIN_BLOCK_SIZE * divisions:
        floor = 1 << (size.bit_length() - 1)
        if floor == size:
            return size
        step = floor // divisions
        return -(-size // step) * step
    return -(-size // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE


def segment_size(size: int) -> int:
    """Bytes of the raw allocation made for a rounded request of ``size`` bytes."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


class _Block:
    """A run of bytes inside a segment; ``prev``/``next`` link the segment's blocks."""

    __slots__ = (
        "address", "size", "requested", "stream", "small", "free_list", "allocated",
        "prev", "next", "stream_uses", "event_count", "gc_stamp",
    )

    def __init__(self, address: int, size: int, stream: Hashable, small: bool, free_list: list[int]) -> None:
        self.address = address
        self.size = size
        self.requested = 0
        self.stream = stream
        self.small = small
        self.free_list = free_list  # the sorted free list of its (stream, pool), when free
        self.allocated = False
        self.prev: _Block | None = None
        self.next: _Block | None = None
        self.stream_uses: set[Hashable] | None = None
        self.event_count = 0
        self.gc_stamp = 0

    def state(self) -> str:
        if self.allocated:
            return "active_allocated"
        return "active_pending_free" if self.event_count else "inactive"


def _bump(cur: list[int], tot: list[int], peak: list[int], base: int, pool: int, amount: int) -> None:
    """Change counter ``base`` of ``pool`` by ``amount``; see FastCounters."""
    i = base + pool
    cur[i] += amount
    cur[base] += amount
    if amount > 0:
        tot[i] += amount
        if cur[i] > peak[i]:
            peak[i] = cur[i]
        if cur[base] > peak[base]:
            peak[base] = cur[base]


def _index_of(free: list[int], block: _Block) -> int:
    """Position of ``block`` in the sorted free list ``free``."""
    entry = block.size << _KEY_SHIFT | block.address
    i = bisect_left(free, entry)
    if i == len(free) or free[i] != entry:
        raise AssertionError(f"free list lost block {block.address:#x}")  # internal invariant
    return i


class CachingAllocator:
    """Caches device memory of one device and hands it out in blocks, per stream.

    See Note [Caching allocator policy], Note [One pool per stream] and Note [Out of
    memory] in this module's source. All methods are thread-safe (one lock per device).

    Args:
        backend: The raw device (:class:`SimulatedDevice`, :class:`NumbaDriverBackend`).
        config: Policy settings; by default parsed from ``FLAMBEAU_CUDA_ALLOC_CONF``.

    Example:
        >>> from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice
        >>> alloc = CachingAllocator(SimulatedDevice(capacity=1 << 30))
        >>> ptr = alloc.malloc(1000)  # a 1024-byte block of a 2 MiB segment
        >>> alloc.free(ptr)
        >>> alloc.memory_allocated(), alloc.memory_reserved()
        (0, 2097152)
    """

    def __init__(self, backend: Backend, config: AllocatorConfig | None = None) -> None:
        if not isinstance(backend, Backend):
            raise TypeError(f"backend: expected a flambeau.cuda_alloc Backend, got {type(backend).__name__}")
        if config is None:
            from ._config import config_from_env

            config = config_from_env()
        self.backend = backend
        self.device = backend.device
        # A plain Lock is much cheaper than an RLock; _owner (the holding thread's id)
        # lets free() notice that it re-entered from a finalizer on the same thread.
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._deferred: list[int] = []
        self._tls = threading.local()
        self._stats = DeviceStats()
        self._fast = self._stats.fast
        # (stream, key) of the last stream seen: a memo of backend.stream_key, one tuple so
        # that threads read a consistent pair.
        self._last_stream: tuple[Any, Hashable] = (None, None)
        self._blocks: dict[int, _Block] = {}  # start address -> block, live or free
        self._segments: dict[int, _Block] = {}  # segment address -> its first block
        # (stream key, small?) -> sorted keys (see _KEY_SHIFT) of free blocks; see malloc
        self._free: dict[tuple[Hashable, bool], list[int]] = {}
        self._streams: dict[Hashable, Any] = {}  # stream key -> stream object
        self._pending: dict[Hashable, collections.deque] = {}  # stream key -> (event, block)
        self._gc_clock = 0
        self._apply_config(config)

    # -- settings -------------------------------------------------------------------------

    def _apply_config(self, config: AllocatorConfig) -> None:
        self.config = config
        self._max_split = _NO_LIMIT if config.max_split_size is None else config.max_split_size
        self._divisions = config.roundup_power2_divisions

    def set_config(
        self,
        *,
        max_split_size_mb: Any = ...,
        garbage_collection_threshold: Any = ...,
        roundup_power2_divisions: Any = ...,
    ) -> None:
        """Change settings at run time; arguments left out keep their value.

        Args:
            max_split_size_mb: Never split blocks of at least this many MiB (``None``: no
                limit; at least 20).
            garbage_collection_threshold: Fraction of device memory in (0, 1) above which
                cached segments unused the longest are freed before growing (``None``: off).
            roundup_power2_divisions: A power of two; see :func:`round_size`.
        """
        new = AllocatorConfig(**vars(self.config))
        if max_split_size_mb is not ...:
            size = None if max_split_size_mb is None else max_split_size_mb << 20
            if max_split_size_mb is not None and not isinstance(max_split_size_mb, int):
                raise ValueError(f"max_split_size_mb: expected None or an int, got {max_split_size_mb!r}")
            check_max_split_size(size)
            new.max_split_size = size
        if garbage_collection_threshold is not ...:
            check_gc_threshold(garbage_collection_threshold)
            new.garbage_collection_threshold = garbage_collection_threshold
        if roundup_power2_divisions is not ...:
            check_divisions(roundup_power2_divisions)
            new.roundup_power2_divisions = roundup_power2_divisions
        with self._locked():
            self._apply_config(new)

    # -- streams --------------------------------------------------------------------------

    def current_stream(self) -> Any:
        """The calling thread's current stream for this allocator (default: the backend's)."""
        stream = getattr(self._tls, "stream", None)
        return self.backend.default_stream() if stream is None else stream

    @contextlib.contextmanager
    def stream(self, stream: Any) -> Iterator[Any]:
        """Context manager making ``stream`` the calling thread's current stream.

        The numba-cuda plugin interface passes no stream to ``memalloc``; allocations made
        inside this block are served from ``stream``'s pool.
        """
        previous = getattr(self._tls, "stream", None)
        self._tls.stream = stream
        try:
            yield stream
        finally:
            self._tls.stream = previous

    # -- allocation -----------------------------------------------------------------------

    def malloc(self, size: int, stream: Any = None) -> int:
        """Allocate at least ``size`` bytes for use on ``stream`` and return the address.

        Args:
            size: Bytes requested (a non-negative int).
            stream: The stream the memory will be used on; ``None`` for the calling
                thread's current stream.

        Raises:
            OutOfMemoryError: the device cannot provide the memory even after the cache
                was freed.
        """
        if size.__class__ is not int:
            if isinstance(size, bool) or not isinstance(size, int):
                raise TypeError(f"size: expected an int number of bytes, got {size!r}")
        if size < 0:
            raise ValueError(f"size: expected a non-negative number of bytes, got {size}")
        if stream is None:
            stream = self.current_stream()
        last = self._last_stream
        if stream is last[0]:
            key = last[1]
        else:
            key = self.backend.stream_key(stream)
            self._last_stream = (stream, key)
        if self._divisions == 1:
            rounded = -(-size // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE or MIN_BLOCK_SIZE
        else:
            rounded = round_size(size, self._divisions)
        small = rounded <= SMALL_SIZE
        lock = self._lock
        lock.acquire()
        self._owner = _get_ident()
        try:
            if self._pending:
                self._process_events()
            # Best fit: bisect finds the smallest free block at least this big, lowest
            # address first (see _KEY_SHIFT).
            block = None
            free = self._free.get((key, small))
            if free:
                i = bisect_left(free, rounded << _KEY_SHIFT)
                if i < len(free):
                    entry = free[i]
                    found = entry >> _KEY_SHIFT
                    max_split = self._max_split
                    # Don't carve an oversize block for a small request; give an oversize
                    # request an oversize block only if it nearly fits.
                    if found < max_split if rounded < max_split else found < rounded + LARGE_BUFFER:
                        del free[i]
                        block = self._blocks[entry & _ADDRESS_MASK]
            if block is None:
                block = self._new_segment(key, small, rounded, size)
                free = block.free_list
            # Statistics are updated inline on this path: see FastCounters.
            fast = self._fast
            cur = fast.cur
            pool = SMALL if small else LARGE
            # Free bytes inside partly used segments ("inactive split") change by the
            # block leaving them, if its segment was split, and by the rest it leaves.
            was_split = block.prev is not None or block.next is not None
            remaining = block.size - rounded
            if remaining >= MIN_BLOCK_SIZE if small else remaining > SMALL_SIZE and rounded < self._max_split:
                rest = _Block(block.address + rounded, remaining, key, small, free)
                rest.prev = block
                nxt = rest.next = block.next
                if nxt is not None:
                    nxt.prev = rest
                block.next = rest
                block.size = rounded
                self._blocks[rest.address] = rest
                rest.gc_stamp = self._gc_clock
                insort(free, remaining << _KEY_SHIFT | rest.address)
                if was_split:  # net change: -(rest + rounded) + rest, one block for another
                    cur[SPLIT_BYTES + pool] -= rounded
                    cur[SPLIT_BYTES] -= rounded
                else:  # a whole segment becomes split: one more inactive split block
                    tot, peak = fast.tot, fast.peak
                    i = SPLIT_BYTES + pool
                    cur[i] += remaining
                    cur[SPLIT_BYTES] += remaining
                    tot[i] += remaining
                    if cur[i] > peak[i]:
                        peak[i] = cur[i]
                    if cur[SPLIT_BYTES] > peak[SPLIT_BYTES]:
                        peak[SPLIT_BYTES] = cur[SPLIT_BYTES]
                    i = SPLIT_COUNT + pool
                    cur[i] += 1
                    cur[SPLIT_COUNT] += 1
                    tot[i] += 1
                    if cur[i] > peak[i]:
                        peak[i] = cur[i]
                    if cur[SPLIT_COUNT] > peak[SPLIT_COUNT]:
                        peak[SPLIT_COUNT] = cur[SPLIT_COUNT]
            elif was_split:
                cur[SPLIT_BYTES + pool] -= block.size
                cur[SPLIT_BYTES] -= block.size
                cur[SPLIT_COUNT + pool] -= 1
                cur[SPLIT_COUNT] -= 1
            block.allocated = True
            block.requested = size
            # Unrolled for speed: allocated bytes (0), allocations (3), requested (6).
            tot, peak = fast.tot, fast.peak
            amount = block.size
            cur[pool] += amount
            cur[0] += amount
            tot[pool] += amount
            if cur[pool] > peak[pool]:
                peak[pool] = cur[pool]
            if cur[0] > peak[0]:
                peak[0] = cur[0]
            i = 3 + pool
            cur[i] += 1
            cur[3] += 1
            tot[i] += 1
            if cur[i] > peak[i]:
                peak[i] = cur[i]
            if cur[3] > peak[3]:
                peak[3] = cur[3]
            i = 6 + pool
            cur[i] += size
            cur[6] += size
            tot[i] += size
            if cur[i] > peak[i]:
                peak[i] = cur[i]
            if cur[6] > peak[6]:
                peak[6] = cur[6]
            if cur[PEND_COUNT]:
                fast.note_active(pool)
            return block.address
        finally:
            self._owner = None
            lock.release()
            if self._deferred:
                self._release_deferred()

    def _remove_free(self, block: _Block) -> None:
        free = block.free_list
        del free[_index_of(free, block)]

    # -- growing ----------------------------------------------------------------------------

    def _new_segment(self, key: Hashable, small: bool, size: int, requested: int) -> _Block:
        alloc_size = segment_size(size)
        if self.config.garbage_collection_threshold is not None:
            self._gc_clock += 1
            self._garbage_collect(alloc_size)
        address = self._raw_malloc(alloc_size)
        if address is None and self._release_oversize(key, size):
            address = self._raw_malloc(alloc_size)
        if address is None:
            self._stats.num_alloc_retries += 1
            self._synchronize_events()
            self._release_cached()
            address = self._raw_malloc(alloc_size)
        if address is None:
            self._stats.num_ooms += 1
            raise OutOfMemoryError(self._oom_message(requested, alloc_size))
        free = self._free.get((key, small))
        if free is None:
            free = self._free[(key, small)] = []
        block = _Block(address, alloc_size, key, small, free)
        self._blocks[address] = block
        self._segments[address] = block
        pool = SMALL if small else LARGE
        stats = self._stats
        stats.reserved_bytes[0].increase(alloc_size)
        stats.reserved_bytes[pool].increase(alloc_size)
        stats.segment[0].increase(1)
        stats.segment[pool].increase(1)
        stats.num_device_alloc += 1
        return block

    def _raw_malloc(self, size: int) -> int | None:
        try:
            return self.backend.malloc(size)
        except DeviceOutOfMemory:
            return None

    def _release_oversize(self, key: Hashable, size: int) -> bool:
        """Free cached oversize segments of the stream's large pool; True if enough went."""
        if self._max_split == _NO_LIMIT:
            return False
        target = max(size, self._max_split)
        free = self._free.get((key, False), [])
        limit = self._max_split << _KEY_SHIFT
        oversize = [self._blocks[k & _ADDRESS_MASK] for k in reversed(free) if k >= limit]
        released = 0
        for block in oversize:  # largest first
            if released >= target:
                break
            if block.prev is None and block.next is None:
                released += block.size
                self._release_segment(block)
        return released >= target

    def _release_cached(self) -> None:
        """Free every cached segment that holds no live block, on every stream."""
        for free in self._free.values():
            for entry in list(free):
                block = self._blocks[entry & _ADDRESS_MASK]
                if block.prev is None and block.next is None:  # a whole segment
                    self._release_segment(block)

    def _release_segment(self, block: _Block) -> None:
        self._remove_free(block)
        del self._blocks[block.address]
        del self._segments[block.address]
        self.backend.free(block.address)
        pool = SMALL if block.small else LARGE
        stats = self._stats
        stats.reserved_bytes[0].decrease(block.size)
        stats.reserved_bytes[pool].decrease(block.size)
        stats.segment[0].decrease(1)
        stats.segment[pool].decrease(1)
        stats.num_device_free += 1

    def _garbage_collect(self, alloc_size: int) -> None:
        """Free whole cached large segments, least recently freed first, until growing by
        ``alloc_size`` stays under the threshold (see ``garbage_collection_threshold``)."""
        _, total = self.backend.mem_get_info()
        limit = self.config.garbage_collection_threshold * total
        excess = self._stats.reserved_bytes[0].current + alloc_size - limit
        if excess <= 0:
            return
        candidates = [
            self._blocks[entry & _ADDRESS_MASK]
            for (_, small), free in self._free.items()
            if not small
            for entry in free
        ]
        candidates = [b for b in candidates if b.prev is None and b.next is None]
        candidates.sort(key=lambda b: b.gc_stamp)  # oldest first
        for block in candidates:
            if excess <= 0:
                break
            excess -= block.size
            self._release_segment(block)

    # -- freeing --------------------------------------------------------------------------

    def free(self, address: int) -> None:
        """Return the block at ``address`` to the cache of its stream.

        Raises:
            ValueError: ``address`` is not a live block of this allocator.
        """
        lock = self._lock
        if not lock.acquire(False):
            if self._owner == _get_ident():
                # Re-entered from a finalizer run by the garbage collector in the middle of
                # an operation on this thread; free once that operation is done.
                self._deferred.append(address)
                return
            lock.acquire()
        self._owner = _get_ident()
        try:
            block = self._blocks.get(address)
            if block is None or not block.allocated:
                raise ValueError(f"address: expected a live block of this allocator, got {address:#x}")
            block.allocated = False
            cur = self._fast.cur
            pool = SMALL if block.small else LARGE
            size = block.size
            cur[ALLOC_BYTES + pool] -= size
            cur[ALLOC_BYTES] -= size
            cur[ALLOC_COUNT + pool] -= 1
            cur[ALLOC_COUNT] -= 1
            cur[REQ_BYTES + pool] -= block.requested
            cur[REQ_BYTES] -= block.requested
            if block.stream_uses:
                self._insert_events(block)
            else:
                self._free_block(block)
        finally:
            self._owner = None
            lock.release()
            if self._deferred:
                self._release_deferred()

    def _release_deferred(self) -> None:
        # These frees came from finalizers; like an exception in a finalizer, a failure
        # is reported, not raised into the operation that happened to run them.
        while self._deferred:
            address = self._deferred.pop()
            try:
                self.free(address)
            except Exception as exc:  # noqa: BLE001
                warnings.warn(f"flambeau.cuda_alloc: deferred free of {address:#x} failed: {exc}",
                              RuntimeWarning, stacklevel=2)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The lock, for the methods off the hot path (malloc and free inline it)."""
        self._lock.acquire()
        self._owner = _get_ident()
        try:
            yield
        finally:
            self._owner = None
            self._lock.release()
            if self._deferred:
                self._release_deferred()

    def free_entries(self) -> list[tuple[Hashable, bool, int, int]]:
        """``(stream key, small pool?, size, address)`` of every cached free block, each
        pool in best-fit order (for tests and debugging)."""
        with self._locked():
            return [
                (key, small, entry >> _KEY_SHIFT, entry & _ADDRESS_MASK)
                for (key, small), free in self._free.items()
                for entry in free
            ]

    def _free_block(self, block: _Block) -> None:
        """Merge a block no stream still uses with its free neighbours and cache it."""
        free = block.free_list  # neighbours share it: same stream, same pool
        blocks = self._blocks
        # Split statistics move by the net change: merged neighbours leave the count.
        split_bytes = split_count = 0
        nxt = block.next
        if nxt is not None and not nxt.allocated and not nxt.event_count:
            entry = nxt.size << _KEY_SHIFT | nxt.address
            i = bisect_left(free, entry)
            if free[i] != entry:
                raise AssertionError(f"free list lost block {nxt.address:#x}")  # internal invariant
            del free[i]
            del blocks[nxt.address]
            split_bytes -= nxt.size
            split_count -= 1
            block.size += nxt.size
            block.next = after = nxt.next
            if after is not None:
                after.prev = block
        prev = block.prev
        if prev is not None and not prev.allocated and not prev.event_count:
            entry = prev.size << _KEY_SHIFT | prev.address
            i = bisect_left(free, entry)
            if free[i] != entry:
                raise AssertionError(f"free list lost block {prev.address:#x}")  # internal invariant
            del free[i]
            del blocks[block.address]
            split_bytes -= prev.size
            split_count -= 1
            prev.size += block.size
            prev.next = after = block.next
            if after is not None:
                after.prev = prev
            block = prev
        if block.prev is not None or block.next is not None:
            split_bytes += block.size
            split_count += 1
        if split_bytes > 0:  # the block stays inside a partly used segment
            pool = SMALL if block.small else LARGE
            fast = self._fast
            _bump(fast.cur, fast.tot, fast.peak, SPLIT_BYTES, pool, split_bytes)
            if split_count:
                _bump(fast.cur, fast.tot, fast.peak, SPLIT_COUNT, pool, split_count)
        elif split_bytes:  # the segment is whole again: a decrease needs no peak
            pool = SPLIT_BYTES + (SMALL if block.small else LARGE)
            cur = self._fast.cur
            cur[pool] += split_bytes
            cur[SPLIT_BYTES] += split_bytes
            cur[pool + SPLIT_COUNT - SPLIT_BYTES] += split_count
            cur[SPLIT_COUNT] += split_count
        block.gc_stamp = self._gc_clock
        insort(free, block.size << _KEY_SHIFT | block.address)

    # -- cross-stream use ------------------------------------------------------------------

    def record_stream(self, address: int, stream: Any) -> None:
        """Mark the block at ``address`` as used on ``stream`` too.

        When the block is freed, it is reused only after the work queued on ``stream`` up
        to the free has completed (like ``Tensor.record_stream`` in PyTorch).
        """
        key = self.backend.stream_key(stream)
        with self._locked():
            block = self._blocks.get(address)
            if block is None or not block.allocated:
                raise ValueError(f"address: expected a live block of this allocator, got {address:#x}")
            if key == block.stream:
                return  # its own stream orders the uses already
            self._streams.setdefault(key, stream)
            if block.stream_uses is None:
                block.stream_uses = set()
            block.stream_uses.add(key)

    def _insert_events(self, block: _Block) -> None:
        for key in block.stream_uses:
            event = self.backend.record_event(self._streams[key])
            queue = self._pending.get(key)
            if queue is None:
                queue = self._pending[key] = collections.deque()
            queue.append((event, block))
            block.event_count += 1
        block.stream_uses = None
        pool = SMALL if block.small else LARGE
        self._fast.add(PEND_BYTES, pool, block.size)
        self._fast.add(PEND_COUNT, pool, 1)
        self._fast.note_active(pool)

    def _process_events(self) -> None:
        """Return blocks whose recorded events have all completed to their pools."""
        query = self.backend.event_query
        for key in list(self._pending):
            queue = self._pending[key]
            # Events of one stream complete in the order they were recorded.
            while queue and query(queue[0][0]):
                _, block = queue.popleft()
                block.event_count -= 1
                if block.event_count == 0:
                    pool = SMALL if block.small else LARGE
                    self._fast.add(PEND_BYTES, pool, -block.size)
                    self._fast.add(PEND_COUNT, pool, -1)
                    self._free_block(block)
            if not queue:
                del self._pending[key]

    def _synchronize_events(self) -> None:
        """Wait for every pending event and return their blocks to the pools."""
        self._stats.num_sync_all_streams += 1
        for queue in self._pending.values():
            for event, _ in queue:
                self.backend.event_synchronize(event)
        self._process_events()

    # -- cache control and statistics -----------------------------------------------------

    def empty_cache(self) -> None:
        """Wait for pending cross-stream events, then return every cached segment that
        holds no live block to the device. Live blocks are untouched."""
        with self._locked():
            self._synchronize_events()
            self._release_cached()

    def memory_allocated(self) -> int:
        """Bytes in live blocks (rounded sizes)."""
        return self._fast.cur[ALLOC_BYTES]

    def max_memory_allocated(self) -> int:
        """Peak of :meth:`memory_allocated` since start or the last peak reset."""
        return self._fast.peak[ALLOC_BYTES]

    def memory_reserved(self) -> int:
        """Bytes held from the device in segments, live or cached."""
        return self._stats.reserved_bytes[0].current

    def max_memory_reserved(self) -> int:
        """Peak of :meth:`memory_reserved` since start or the last peak reset."""
        return self._stats.reserved_bytes[0].peak

    def reset_peak_memory_stats(self) -> None:
        """Set every peak statistic to its current value."""
        with self._locked():
            self._stats.reset_peak()

    def reset_accumulated_memory_stats(self) -> None:
        """Zero the running totals (``*.allocated``, ``*.freed``, retries, OOMs, mallocs)."""
        with self._locked():
            self._stats.reset_accumulated()

    def memory_stats(self) -> dict[str, int]:
        """Statistics under ``torch.cuda.memory_stats()`` key names.

        ``{stat}.{pool}.{field}`` for stat in allocation, segment, active, inactive_split,
        allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes,
        requested_bytes; pool in all, small_pool, large_pool; field in current, peak,
        allocated, freed; and ``num_alloc_retries``, ``num_ooms``,
        ``num_sync_all_streams``, ``num_device_alloc``, ``num_device_free`` (raw
        mallocs and frees). Sizes are in bytes.
        """
        with self._locked():
            return dict(self._stats.as_dict())

    def memory_summary(self) -> str:
        """A readable table of :meth:`memory_stats`, like ``torch.cuda.memory_summary()``."""
        with self._locked():
            return format_summary(self._stats, self.device)

    def memory_snapshot(self) -> list[dict[str, Any]]:
        """Every segment with its blocks, ordered by address.

        Returns:
            A list of dicts with ``device``, ``address``, ``total_size``,
            ``allocated_size``, ``active_size``, ``requested_size``, ``stream`` (the
            stream's key), ``segment_type`` (``"small"`` or ``"large"``) and ``blocks``:
            dicts with ``address``, ``size``, ``requested_size``, ``state``
            (``"active_allocated"``, ``"active_pending_free"`` or ``"inactive"``) and
            ``stream``.
        """
        with self._locked():
            segments = []
            for address in sorted(self._segments):
                head = self._segments[address]
                blocks = []
                block: _Block | None = head
                while block is not None:
                    blocks.append({
                        "address": block.address,
                        "size": block.size,
                        "requested_size": block.requested if block.allocated else 0,
                        "state": block.state(),
                        "stream": block.stream,
                    })
                    block = block.next
                segments.append({
                    "device": self.device,
                    "address": address,
                    "total_size": sum(b["size"] for b in blocks),
                    "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
                    "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                    "requested_size": sum(b["requested_size"] for b in blocks),
                    "stream": head.stream,
                    "segment_type": "small" if head.small else "large",
                    "blocks": blocks,
                })
            return segments

    def block_size(self, address: int) -> int:
        """Size in bytes of the live block at ``address`` (its rounded size)."""
        with self._locked():
            block = self._blocks.get(address)
            if block is None or not block.allocated:
                raise ValueError(f"address: expected a live block of this allocator, got {address:#x}")
            return block.size

    def segment_of(self, address: int) -> tuple[int, int]:
        """``(address, size)`` in bytes of the segment holding ``address``, which may lie
        anywhere inside a live block (a view's pointer, say)."""
        with self._locked():
            block = self._blocks.get(address)
            if block is None:
                block = self._block_containing(address)
            if block is None or not block.allocated:
                raise ValueError(
                    f"address: expected an address in a live block of this allocator, got {address:#x}"
                )
            while block.prev is not None:
                block = block.prev
            size = 0
            tail: _Block | None = block
            while tail is not None:
                size += tail.size
                tail = tail.next
            return block.address, size

    def _block_containing(self, address: int) -> _Block | None:
        # Rare path (IPC of a view): a scan over segments is fine.
        for head in self._segments.values():
            block: _Block | None = head
            while block is not None:
                if block.address <= address < block.address + block.size:
                    return block
                block = block.next
        return None

    def _oom_message(self, requested: int, alloc_size: int) -> str:
        free, total = self.backend.mem_get_info()
        allocated = self._fast.cur[ALLOC_BYTES]
        reserved = self._stats.reserved_bytes[0].current
        return (
            f"CUDA out of memory. Tried to allocate {format_bytes(requested)} "
            f"({requested} bytes; a new segment of {format_bytes(alloc_size)}). "
            f"Device {self.device} has a total capacity of {format_bytes(total)} of which "
            f"{format_bytes(free)} is free. Of the memory reserved by this allocator, "
            f"{format_bytes(allocated)} is allocated and {format_bytes(reserved - allocated)} "
            "is reserved but unallocated. If reserved but unallocated memory is large, set "
            "max_split_size_mb (FLAMBEAU_CUDA_ALLOC_CONF) to avoid fragmentation; if other "
            "libraries need the memory, call empty_cache()."
        )
