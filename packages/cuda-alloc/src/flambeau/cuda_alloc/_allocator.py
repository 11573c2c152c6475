"""The caching allocator: PyTorch's policy for reusing device memory without ``cudaFree``.

Note [Caching allocator policy]
    Raw device allocations ("segments") are never returned to the device on ``free``;
    they are carved into blocks and the blocks reused. Requests are rounded up to 512
    bytes. Requests up to 1 MiB come from the small pool, whose segments are 2 MiB;
    larger ones come from the large pool, whose segments are 20 MiB for requests under
    10 MiB and otherwise the request rounded up to 2 MiB. A small request takes the
    smallest free block that fits (best fit, ties to the older segment, then the lower
    address); a large one the first that fits in the order the segments were made, lowest
    address first (Note [First fit in segment order]). The block splits off the rest when
    at least 512 B (small pool) or more than 1 MiB (large pool) would remain. A freed
    block merges with free neighbours of its segment. All of it is PyTorch's, but the
    large pool's choice and the ties (PyTorch: best fit everywhere, ties to the lower
    address).

Note [First fit in segment order]
    A training step repeats the step before: the same requests and frees, in the same
    order, from the same live blocks (the parameters, the optimizer's state). Best fit
    does not promise that the second step fits where the first did: the first made its
    segments as it went, while the second finds all of them free from its start, and a
    segment the first made late (an exact-size one of a 12 MiB request, say) can be a
    tighter fit for an earlier request than the block the first step gave it; that
    request takes it, and the 12 MiB request later finds no room and makes a segment.
    The ResNet-18 of ``benchmarks/train.py`` at its GPU size did so in its second step (a
    32 MiB gradient): a ``cudaMalloc`` inside training, on a simulated device.

    The order the segments were made removes it. A request takes a block of the oldest
    segment that has one that fits: when the first step took a block of an older segment,
    that segment is in the same state at the same point of the second step (by induction
    over the requests) and fits again, and the segments made later are never preferred to
    it; when the first step made a segment, the second finds the segments before it as
    full as they were, and that segment, the oldest of those made later, still whole. So
    a repeated step makes no raw allocation. In the small pool every segment is 2 MiB, the
    largest block there is: a segment made later is never a tighter fit than a block the
    first step took, so best fit with ties to the older segment keeps the same promise and
    its tighter packing. The price of first fit in the large pool is memory on some
    sequences (``benchmarks/alloc.py``'s ResNet-50 trace reserves 4.8% more at its peak;
    the models above within -4% to +1%). The promise holds for steps that start from the
    same live blocks: what a step keeps into the next (tables the optimizers upload each
    step: Note [Uploaded tables in a pool of their own] in flambeau's optimizers) can still
    move the next step's blocks, as can blocks freed on other streams, whose events
    complete when they do.

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

Note [Two cores]
    The blocks themselves (free lists, splitting, merging, the hot statistics) live in a
    core (``_core.py``): a C one built with cffi on first use (``_ccore.py``), or the
    pure-Python reference when no compiler or cffi is at hand or
    ``FLAMBEAU_CUDA_ALLOC_PURE_PYTHON=1``. Both follow the same policy block for block.
    ``malloc`` and ``free`` cross into the core once each; only growing, out-of-memory,
    events and inspection take the allocator's own lock.

Note [Memory pools]
    A memory pool (``torch.cuda.MemPool``) is a separate set of segments: while a thread
    routes its allocations to pool ``p`` (:meth:`CachingAllocator.use_pool`), its blocks
    come from segments reserved for ``p`` (one small and one large free list per stream,
    as for the default pools), and freed blocks go back to ``p`` only. The pools of a
    stream are keyed ``("mempool", p, stream key)``. While ``p`` is alive,
    :meth:`CachingAllocator.empty_cache` keeps its cached segments (as torch keeps a live
    pool's memory); :meth:`CachingAllocator.release_pool` ends it and frees them. The
    routing check costs the hot path one integer test (``_routing``, the number of open
    ``use_pool`` blocks) when no pool is in use.

Note [Memory fraction]
    :meth:`CachingAllocator.set_memory_fraction` caps the bytes reserved from the device at
    ``fraction * total`` (``torch.cuda.set_per_process_memory_fraction``): a new segment
    that would cross the cap is refused as if the device were full, so the usual retries
    (free cached segments) run first and the error is :class:`OutOfMemoryError`, whose
    message then says how much is allowed.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import warnings
from collections.abc import Hashable, Iterator
from typing import Any

from ._backend import Backend, DeviceOutOfMemory
from ._config import AllocatorConfig, check_divisions, check_gc_threshold, check_max_split_size
from ._core import ALLOCATED, INACTIVE, NO_LIMIT, PENDING, PyCore
from ._stats import ALLOC_BYTES, DeviceStats, format_bytes, format_summary

__all__ = ["CachingAllocator", "OutOfMemoryError", "round_size"]

MIN_BLOCK_SIZE = 512  # every size is rounded up to a multiple of this
SMALL_SIZE = 1 << 20  # largest request served by the small pool
SMALL_BUFFER = 2 << 20  # small-pool segment size
LARGE_BUFFER = 20 << 20  # large-pool segment size for requests under MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20  # larger segments are rounded up to this
PURE_PYTHON_VAR = "FLAMBEAU_CUDA_ALLOC_PURE_PYTHON"
_STATE_NAMES = {ALLOCATED: "active_allocated", PENDING: "active_pending_free", INACTIVE: "inactive"}
_get_ident = threading.get_ident


def _make_core() -> Any:
    """The C core when it can be built and loaded (see _ccore), else the Python one."""
    if os.environ.get(PURE_PYTHON_VAR, "") not in ("", "0"):
        return PyCore()
    from ._ccore import load_core

    core = load_core()
    return PyCore() if core is None else core


def _free_failed(address: Any, code: int) -> None:
    if code == -2:
        raise MemoryError("flambeau.cuda_alloc: out of host memory for the allocator's free lists")
    shown = f"{address:#x}" if isinstance(address, int) else repr(address)
    raise ValueError(f"address: expected a live block of this allocator, got {shown}")


def _checked_size(size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"size: expected an int number of bytes, got {size!r}")
    if size < 0:
        raise ValueError(f"size: expected a non-negative number of bytes, got {size}")
    return int(size)


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
        # The lock of everything but the core's own work (growing, events, inspection);
        # _owner (the holding thread's id) lets free() notice that it re-entered from a
        # finalizer on the same thread.
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._deferred: list[int] = []
        self._tls = threading.local()
        self._core = _make_core()
        self._core_malloc = self._core.malloc
        self._core_free = self._core.free
        self._stats = DeviceStats()
        # (stream, small pool, large pool) of the last stream seen: a memo of _pools_of,
        # one tuple so that threads read a consistent triple.
        self._last: tuple[Any, int, int] = (object(), -1, -1)
        self._pools: dict[Hashable, tuple[int, int]] = {}  # stream key -> (small, large) pool
        self._pool_keys: list[tuple[Hashable, bool]] = []  # pool -> (stream key, small?)
        self._streams: dict[Hashable, Any] = {}  # stream key -> stream object
        self._uses: dict[int, set[Hashable]] = {}  # live block -> other streams using it
        self._pending: dict[Hashable, collections.deque] = {}  # stream key -> (event, address)
        self._event_counts: dict[int, int] = {}  # pending block -> events not yet completed
        self._gc_clock = 0
        self._limit: int | None = None  # reserved bytes allowed (Note [Memory fraction])
        self._fraction = 1.0
        self._caching = True
        self._routing = 0  # open use_pool blocks, all threads (Note [Memory pools])
        self._next_pool_id = 1
        self._live_pools: set[int] = set()
        self._mempool_of: dict[Hashable, tuple[int, Hashable]] = {}  # pool key -> (pool id, stream key)
        self._apply_config(config)

    # -- settings -------------------------------------------------------------------------

    def _apply_config(self, config: AllocatorConfig) -> None:
        self.config = config
        self._max_split = NO_LIMIT if config.max_split_size is None else config.max_split_size
        self._core.set_max_split(self._max_split)
        self._divisions = config.roundup_power2_divisions
        # Requests rounded above this take the power-of-two divisions (see round_size).
        self._divisions_above = MIN_BLOCK_SIZE * self._divisions if self._divisions > 1 else NO_LIMIT

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

    def _pools_of(self, stream: Any, mempool: int | None = None) -> tuple[Any, int, int]:
        """The (stream, small pool, large pool) triple of ``stream`` (in memory pool
        ``mempool`` if given), remembered in _last for the default pools."""
        key = stream_key = self.backend.stream_key(stream)
        if mempool is not None:
            key = ("mempool", mempool, stream_key)
        pools = self._pools.get(key)
        if pools is None:
            with self._locked():
                pools = self._pools.get(key)
                if pools is None:
                    pools = (self._core.new_pool(True), self._core.new_pool(False))
                    self._pool_keys += [(key, True), (key, False)]
                    self._pools[key] = pools
                    if mempool is not None:
                        self._mempool_of[key] = (mempool, stream_key)
        last = (stream, pools[0], pools[1])
        if mempool is None:
            self._last = last
        return last

    # -- memory pools (Note [Memory pools]) -------------------------------------------------

    def create_pool(self) -> int:
        """A new memory pool's id (1, 2, ...); its segments are made on first use."""
        with self._locked():
            pool_id = self._next_pool_id
            self._next_pool_id += 1
            self._live_pools.add(pool_id)
            return pool_id

    @contextlib.contextmanager
    def use_pool(self, pool_id: int) -> Iterator[int]:
        """Context manager routing the calling thread's allocations to memory pool ``pool_id``.

        Raises:
            ValueError: ``pool_id`` is not a live pool of this allocator.
        """
        if pool_id not in self._live_pools:
            raise ValueError(f"pool_id: expected a live memory pool of this allocator, got {pool_id!r}")
        previous = getattr(self._tls, "mempool", None)
        with self._locked():
            self._routing += 1
        self._tls.mempool = pool_id
        try:
            yield pool_id
        finally:
            self._tls.mempool = previous
            with self._locked():
                self._routing -= 1

    def current_pool(self) -> int | None:
        """The memory pool the calling thread allocates from (None: the default pools)."""
        return getattr(self._tls, "mempool", None)

    def release_pool(self, pool_id: int) -> None:
        """End memory pool ``pool_id``: its cached segments go back to the device now, and
        those of its blocks still live go back when they are freed and the cache emptied."""
        with self._locked():
            self._live_pools.discard(pool_id)
            for pool, address, _, _ in self._cached_segments():
                if self._pool_id_of(pool) == pool_id:
                    self._release_segment(pool, address)

    def _pool_id_of(self, pool: int) -> int:
        """The memory pool id of core pool ``pool`` (0: a default pool)."""
        return self._mempool_of.get(self._pool_keys[pool][0], (0,))[0]

    # -- memory fraction (Note [Memory fraction]) -------------------------------------------

    def set_memory_fraction(self, fraction: float) -> None:
        """Cap the memory reserved from the device at ``fraction`` of its total (0 to 1).

        Raises:
            ValueError: ``fraction`` is not a number in [0, 1].
        """
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise ValueError(f"fraction: expected a number in [0, 1], got {fraction!r}")
        _, total = self.backend.mem_get_info()
        with self._locked():
            self._fraction = float(fraction)
            self._limit = None if fraction == 1 else int(fraction * total)

    def get_memory_fraction(self) -> float:
        """The fraction of the device's memory this allocator may reserve (1.0: no cap)."""
        return self._fraction

    # -- caching on and off ----------------------------------------------------------------

    def set_caching_enabled(self, enabled: bool) -> None:
        """Turn caching on or off. Off, a freed block's segment goes back to the device as
        soon as no live block is left in it (``torch.cuda.caching_allocator_enable``);
        turning it off also frees what is cached now."""
        self._caching = bool(enabled)
        if not enabled:
            self.empty_cache()

    def caching_enabled(self) -> bool:
        """Whether freed memory is kept for reuse (see :meth:`set_caching_enabled`)."""
        return self._caching

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
        if size.__class__ is not int or size < 0:
            size = _checked_size(size)
        if stream is None:
            stream = self.current_stream()
        if self._routing and getattr(self._tls, "mempool", None) is not None:
            last = self._pools_of(stream, self._tls.mempool)
        else:
            last = self._last
            if stream is not last[0]:
                last = self._pools_of(stream)
        rounded = (size + 511) & -512 or MIN_BLOCK_SIZE
        if rounded > self._divisions_above:
            rounded = self._round_large(size)
        if self._pending:
            self._poll_events()
        pool = last[1] if rounded <= SMALL_SIZE else last[2]
        address = self._core_malloc(pool, rounded, size)
        if address:
            return address
        return self._grow(pool, rounded, size)

    def _round_large(self, size: int) -> int:
        """Round a request above ``_divisions_above``: by the power-of-two divisions, and
        no request of 4 EiB or more reaches the core (its sizes are 64-bit)."""
        rounded = round_size(size, self._divisions)
        if rounded >= NO_LIMIT:
            with self._locked():
                self._stats.num_ooms += 1
                raise OutOfMemoryError(self._oom_message(size, rounded))
        return rounded

    # -- growing ----------------------------------------------------------------------------

    def _grow(self, pool: int, size: int, requested: int) -> int:
        """Serve a request no cached block fits from a new segment."""
        with self._locked():
            # Another thread may have cached a block that fits since the core said no.
            address = self._core_malloc(pool, size, requested)
            if address:
                return address
            key = self._pool_keys[pool][0]
            alloc_size = segment_size(size)
            if self.config.garbage_collection_threshold is not None:
                self._gc_clock += 1
                self._core.set_gc_clock(self._gc_clock)
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
            stat = 1 if self._pool_keys[pool][1] else 2
            stats = self._stats
            stats.reserved_bytes[0].increase(alloc_size)
            stats.reserved_bytes[stat].increase(alloc_size)
            stats.segment[0].increase(1)
            stats.segment[stat].increase(1)
            stats.num_device_alloc += 1
            return self._core.malloc_segment(pool, address, alloc_size, size, requested)

    def _raw_malloc(self, size: int) -> int | None:
        if self._limit is not None and self._stats.reserved_bytes[0].current + size > self._limit:
            return None  # over the memory fraction: refused as the device would (Note [Memory fraction])
        try:
            return self.backend.malloc(size)
        except DeviceOutOfMemory:
            return None

    def _cached_segments(self) -> list[tuple[int, int, int, int]]:
        """``(pool, address, size, stamp)`` of every cached segment that holds no live block."""
        whole = []
        previous = None
        for segment, address, size, _, pool, state, stamp in self._core.blocks():
            if segment == address:
                whole.append([pool, address, size, stamp] if state == INACTIVE else None)
            elif segment == previous:
                whole[-1] = None
            previous = segment
        return [tuple(w) for w in whole if w is not None]

    def _release_oversize(self, key: Hashable, size: int) -> bool:
        """Free cached oversize segments of the stream's large pool; True if enough went."""
        if self._max_split == NO_LIMIT:
            return False
        target = max(size, self._max_split)
        pool = self._pools[key][1]
        oversize = [(s, a) for p, a, s, _ in self._cached_segments() if p == pool and s >= self._max_split]
        released = 0
        for _, address in sorted(oversize, reverse=True):  # largest first
            if released >= target:
                break
            released += self._release_segment(pool, address)
        return released >= target

    def _release_cached(self) -> None:
        """Free every cached segment that holds no live block, on every stream, except those
        of live memory pools (Note [Memory pools])."""
        for pool, address, _, _ in self._cached_segments():
            if self._pool_id_of(pool) not in self._live_pools:
                self._release_segment(pool, address)

    def _release_segment(self, pool: int, address: int) -> int:
        """Return a cached whole segment to the device; its size, or 0 if a malloc on
        another thread took a block of it since it was listed."""
        size = self._core.remove_segment(address)
        if size < 0:
            return 0
        self.backend.free(address)
        stat = 1 if self._pool_keys[pool][1] else 2
        stats = self._stats
        stats.reserved_bytes[0].decrease(size)
        stats.reserved_bytes[stat].decrease(size)
        stats.segment[0].decrease(1)
        stats.segment[stat].decrease(1)
        stats.num_device_free += 1
        return size

    def _garbage_collect(self, alloc_size: int) -> None:
        """Free whole cached large segments, least recently freed first, until growing by
        ``alloc_size`` stays under the threshold (see ``garbage_collection_threshold``)."""
        _, total = self.backend.mem_get_info()
        limit = self.config.garbage_collection_threshold * total
        excess = self._stats.reserved_bytes[0].current + alloc_size - limit
        if excess <= 0:
            return
        candidates = [(stamp, address, pool, size) for pool, address, size, stamp in self._cached_segments()
                      if not self._pool_keys[pool][1]]
        candidates.sort()  # oldest first
        for _, address, pool, _ in candidates:
            if excess <= 0:
                break
            excess -= self._release_segment(pool, address)

    # -- freeing --------------------------------------------------------------------------

    def free(self, address: int) -> None:
        """Return the block at ``address`` to the cache of its stream.

        Raises:
            ValueError: ``address`` is not a live block of this allocator.
        """
        if self._uses and address in self._uses:
            self._free_used(address)
            return
        try:
            failed = self._core_free(address)
        except (OverflowError, TypeError):  # the C core takes only 64-bit unsigned ints
            failed = -1
        if failed:
            _free_failed(address, failed)
        if not self._caching:
            self._release_uncached()

    def _release_uncached(self) -> None:
        """With caching off, return the segments left without a live block to the device."""
        lock = self._lock
        if not lock.acquire(False):
            if self._owner == _get_ident():
                return  # re-entered from a finalizer mid-operation: the next free releases them
            lock.acquire()
        self._owner = _get_ident()
        try:
            self._release_cached()
        finally:
            self._owner = None
            lock.release()
            if self._deferred:
                self._release_deferred()

    def _free_used(self, address: int) -> None:
        """Free a block that other streams used: it waits for their events (see Note [One
        pool per stream])."""
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
            uses = self._uses.pop(address, None)
            if uses is None:  # freed by another thread meanwhile
                failed = self._core_free(address)
                if failed:
                    _free_failed(address, failed)
                return
            if self._core.mark_pending(address):
                _free_failed(address, -1)
            for key in uses:
                event = self.backend.record_event(self._streams[key])
                queue = self._pending.get(key)
                if queue is None:
                    queue = self._pending[key] = collections.deque()
                queue.append((event, address))
            self._event_counts[address] = len(uses)
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
        """The allocator's lock (the core takes its own for malloc and free)."""
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
        pool by size, then segment age, then address (for tests and debugging)."""
        with self._locked():
            return [
                (key, small, size, address)
                for pool, (key, small) in enumerate(self._pool_keys)
                for size, address in self._core.free_list(pool)
            ]

    # -- cross-stream use ------------------------------------------------------------------

    def record_stream(self, address: int, stream: Any) -> None:
        """Mark the block at ``address`` as used on ``stream`` too.

        When the block is freed, it is reused only after the work queued on ``stream`` up
        to the free has completed (like ``Tensor.record_stream`` in PyTorch).
        """
        key = self.backend.stream_key(stream)
        with self._locked():
            info = self._core.block_info(address)
            if info is None or info[2] != ALLOCATED:
                raise ValueError(f"address: expected a live block of this allocator, got {address:#x}")
            owner = self._pool_keys[info[0]][0]
            if key == self._mempool_of.get(owner, (0, owner))[1]:
                return  # its own stream orders the uses already
            self._streams.setdefault(key, stream)
            self._uses.setdefault(address, set()).add(key)

    def _poll_events(self) -> None:
        with self._locked():
            self._process_events()

    def _process_events(self) -> None:
        """Return blocks whose recorded events have all completed to their pools."""
        query = self.backend.event_query
        counts = self._event_counts
        for key in list(self._pending):
            queue = self._pending[key]
            # Events of one stream complete in the order they were recorded.
            while queue and query(queue[0][0]):
                _, address = queue.popleft()
                counts[address] -= 1
                if counts[address] == 0:
                    del counts[address]
                    self._core.release_pending(address)
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
        return self._core.current(ALLOC_BYTES)

    def max_memory_allocated(self) -> int:
        """Peak of :meth:`memory_allocated` since start or the last peak reset."""
        return self._core.peak(ALLOC_BYTES)

    def memory_reserved(self) -> int:
        """Bytes held from the device in segments, live or cached."""
        return self._stats.reserved_bytes[0].current

    def max_memory_reserved(self) -> int:
        """Peak of :meth:`memory_reserved` since start or the last peak reset."""
        return self._stats.reserved_bytes[0].peak

    def reset_peak_memory_stats(self) -> None:
        """Set every peak statistic to its current value."""
        with self._locked():
            self._core.reset_peak()
            self._stats.reset_peak()

    def reset_accumulated_memory_stats(self) -> None:
        """Zero the running totals (``*.allocated``, ``*.freed``, retries, OOMs, mallocs)."""
        with self._locked():
            self._core.reset_accumulated()
            self._stats.reset_accumulated()

    def _synced_stats(self) -> DeviceStats:
        self._stats.fast = self._core.counters()
        return self._stats

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
            return dict(self._synced_stats().as_dict())

    def memory_summary(self) -> str:
        """A readable table of :meth:`memory_stats`, like ``torch.cuda.memory_summary()``."""
        with self._locked():
            return format_summary(self._synced_stats(), self.device)

    def memory_snapshot(self) -> list[dict[str, Any]]:
        """Every segment with its blocks, ordered by address.

        Returns:
            A list of dicts with ``device``, ``address``, ``total_size``,
            ``allocated_size``, ``active_size``, ``requested_size``, ``stream`` (the
            stream's key), ``segment_type`` (``"small"`` or ``"large"``) and ``blocks``:
            dicts with ``address``, ``size``, ``requested_size``, ``state``
            (``"active_allocated"``, ``"active_pending_free"`` or ``"inactive"``) and
            ``stream``; ``segment_pool_id`` (``(0, 0)`` for the default pools, ``(0, p)`` for
            memory pool ``p``), ``is_expandable`` (False) and ``frames`` (``[]``: no
            stack traces are recorded) complete torch's keys.
        """
        with self._locked():
            segments: list[dict[str, Any]] = []
            for segment, address, size, requested, pool, state, _ in self._core.blocks():
                key, small = self._pool_keys[pool]
                pool_id, key = self._mempool_of.get(key, (0, key))
                if not segments or segments[-1]["address"] != segment:
                    segments.append({
                        "device": self.device, "address": segment, "stream": key,
                        "segment_type": "small" if small else "large", "segment_pool_id": (0, pool_id),
                        "is_expandable": False, "frames": [], "blocks": [],
                    })
                segments[-1]["blocks"].append({
                    "address": address,
                    "size": size,
                    "requested_size": requested if state == ALLOCATED else 0,
                    "state": _STATE_NAMES[state],
                    "stream": key,
                    "frames": [],
                })
            for seg in segments:
                blocks = seg.pop("blocks")
                seg["total_size"] = sum(b["size"] for b in blocks)
                seg["allocated_size"] = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
                seg["active_size"] = sum(b["size"] for b in blocks if b["state"] != "inactive")
                seg["requested_size"] = sum(b["requested_size"] for b in blocks)
                seg["blocks"] = blocks
            return [{k: seg[k] for k in _SEGMENT_KEYS} for seg in segments]

    def block_size(self, address: int) -> int:
        """Size in bytes of the live block at ``address`` (its rounded size)."""
        with self._locked():
            info = self._core.block_info(address)
            if info is None or info[2] != ALLOCATED:
                raise ValueError(f"address: expected a live block of this allocator, got {address:#x}")
            return info[1]

    def segment_of(self, address: int) -> tuple[int, int]:
        """``(address, size)`` in bytes of the segment holding ``address``, which may lie
        anywhere inside a live block (a view's pointer, say)."""
        with self._locked():
            found = None
            totals: dict[int, int] = {}
            for segment, start, size, _, _, state, _ in self._core.blocks():
                totals[segment] = totals.get(segment, 0) + size
                if start <= address < start + size and state == ALLOCATED:
                    found = segment
            if found is None:
                raise ValueError(
                    f"address: expected an address in a live block of this allocator, got {address:#x}"
                )
            return found, totals[found]

    def _oom_message(self, requested: int, alloc_size: int) -> str:
        free, total = self.backend.mem_get_info()
        allocated = self._core.current(ALLOC_BYTES)
        reserved = self._stats.reserved_bytes[0].current
        allowed = "" if self._limit is None else f"{format_bytes(self._limit)} allowed; "
        return (
            f"CUDA out of memory. Tried to allocate {format_bytes(requested)} "
            f"({requested} bytes; a new segment of {format_bytes(alloc_size)}). "
            f"Device {self.device} has a total capacity of {format_bytes(total)} of which "
            f"{format_bytes(free)} is free. {allowed}Of the memory reserved by this allocator, "
            f"{format_bytes(allocated)} is allocated and {format_bytes(reserved - allocated)} "
            "is reserved but unallocated. If reserved but unallocated memory is large, set "
            "max_split_size_mb (FLAMBEAU_CUDA_ALLOC_CONF) to avoid fragmentation; if other "
            "libraries need the memory, call empty_cache()."
        )


_SEGMENT_KEYS = (
    "device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
    "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks",
)
