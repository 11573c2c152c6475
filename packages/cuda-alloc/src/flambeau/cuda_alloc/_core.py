"""The block bookkeeping of the caching allocator, in pure Python.

A core owns the blocks of one device: which addresses are live, the free lists of each
pool, the segments' chains of blocks, and the hot statistics (:class:`FastCounters`). It
knows nothing of streams, events, backends or settings other than ``max_split_size``:
:class:`~flambeau.cuda_alloc.CachingAllocator` maps each (stream, small/large) pair to a
pool number and does everything else. Two cores implement the same interface:
:class:`PyCore` here, and ``_ccore.CCore`` in C (through cffi), which the allocator uses
when it can be compiled (see ``_ccore.py``); this one is its reference and fallback.

Every method is atomic: a core has its own lock and never calls out while holding it.

Note [Core interface]
    ``new_pool(small) -> int``; ``malloc(pool, rounded, requested) -> address`` (0 when no
    cached block fits: the allocator then grows with ``malloc_segment``);
    ``malloc_segment(pool, address, size, rounded, requested) -> address``;
    ``free(address) -> 0`` (or -1: not a live block); ``mark_pending(address)`` and
    ``release_pending(address)`` for blocks waiting on other streams' events;
    ``block_info(address) -> (pool, size, state) | None``; ``remove_segment(address) ->
    size`` (-1 if it is no longer a cached whole segment); ``blocks()`` (every block:
    ``(segment, address, size, requested, pool, state, stamp)``, segments in address
    order); ``free_list(pool)`` (``(size, address)`` by size, segment age, address); ``counters() ->
    FastCounters``; ``current(i)``, ``peak(i)``, ``reset_peak()``,
    ``reset_accumulated()``; ``set_max_split(bytes)``, ``set_gc_clock(tick)``. Block
    states: 0 inactive (cached), 1 allocated, 2 pending.
"""

from __future__ import annotations

import threading
import warnings
from bisect import bisect_left

from ._stats import (
    ALLOC_BYTES,
    ALLOC_COUNT,
    PEND_BYTES,
    PEND_COUNT,
    REQ_BYTES,
    SPLIT_BYTES,
    SPLIT_COUNT,
    FastCounters,
)

__all__ = ["INACTIVE", "ALLOCATED", "PENDING", "PyCore"]

MIN_BLOCK_SIZE = 512
SMALL_SIZE = 1 << 20
LARGE_BUFFER = 20 << 20
NO_LIMIT = 1 << 62  # max_split_size when unset
INACTIVE, ALLOCATED, PENDING = 0, 1, 2
# A free block's sort key is size << _KEY_SHIFT | place, its place serial << 64 | address
# (serial: its segment's number, segments numbered in the order they were made): one int
# orders by size, then by place, which orders the keys that fit for first fit (Note [First
# fit in segment order] in _allocator); ints compare faster than tuples. Device addresses
# fit in 64 bits.
_KEY_SHIFT = 128
_ADDRESS_MASK = (1 << 64) - 1
# Ends every free list: bigger than any key, so a search always lands on an entry; it is
# above every size limit of a fit, so it never fits.
_SENTINEL = 1 << 250
_get_ident = threading.get_ident

# Note [Packed statistics]
#     The hot counters of a pool (allocations, allocated bytes, requested bytes, inactive
#     split blocks and bytes) are fields of 64 bits of one int, so that an operation
#     updates all of them with one addition. ``slack`` holds, per field, 2**63 + peak -
#     current: an increase past the peak borrows the field's top bit (the "guard"), which
#     one test of all guards at once detects (then the peaks are raised). ``tot`` packs the
#     sums of increases the same way. Fields never carry into each other: each stays in
#     [0, 2**64) since counters are non-negative and below 2**63. A block keeps its packed
#     allocation (count 1, its size, the requested bytes) for its free.
_N, _A, _R, _SN, _SB = 0, 64, 128, 192, 256  # field offsets
_FIELDS = ((ALLOC_COUNT, _N), (ALLOC_BYTES, _A), (REQ_BYTES, _R), (SPLIT_COUNT, _SN), (SPLIT_BYTES, _SB))
_SHIFT_OF = dict(_FIELDS)
_GUARD = 1 << 63
_GUARDS = sum(_GUARD << shift for _, shift in _FIELDS)
_MASK = (1 << 64) - 1


class _Block:
    """A run of bytes inside a segment; ``prev``/``next`` link the segment's blocks."""

    __slots__ = ("address", "place", "size", "stat", "pool", "state", "prev", "next", "stamp")

    def __init__(self, address: int, serial: int, size: int, pool: _Pool, stamp: int) -> None:
        self.address = address
        self.place = serial << 64 | address  # the low bits of its free-list key
        self.size = size
        self.stat = 0  # packed (1, size, requested) while allocated; see Note [Packed statistics]
        self.pool = pool
        self.state = INACTIVE
        self.prev: _Block | None = None
        self.next: _Block | None = None
        self.stamp = stamp  # the core's gc clock when the block was last cached


class _Counters:
    """The packed counters of the small pool, the large pool or all; see Note [Packed statistics]."""

    __slots__ = ("slack", "peak", "tot")

    def __init__(self) -> None:
        self.slack = _GUARDS
        self.peak = {base: 0 for base, _ in _FIELDS}
        self.tot = 0

    def current(self, base: int, shift: int) -> int:
        return self.peak[base] - ((self.slack >> shift & _MASK) - _GUARD)

    def raise_peaks(self) -> None:
        """Make every current value above its peak the new peak."""
        slack = self.slack
        for base, shift in _FIELDS:
            field = slack >> shift & _MASK
            if field < _GUARD:
                self.peak[base] += _GUARD - field
                slack += (_GUARD - field) << shift
        self.slack = slack


class _Pool:
    """The sorted free list of one (stream, small/large) pair; ``places`` holds the place of each entry of
    ``free`` at the same index (first fit takes the least place of a range of them without making ints)."""

    __slots__ = ("index", "small", "free", "places", "counters")

    def __init__(self, index: int, small: bool, counters: _Counters) -> None:
        self.index = index
        self.small = small
        self.free = [_SENTINEL]
        self.places = [_SENTINEL]
        self.counters = counters

    def insert(self, size: int, place: int) -> None:
        """Add the free block of ``size`` bytes at ``place`` (its key and its place at one index)."""
        key = size << _KEY_SHIFT | place
        i = bisect_left(self.free, key)
        self.free.insert(i, key)
        self.places.insert(i, place)

    def remove_at(self, i: int) -> None:
        """Take entry ``i`` off the free list."""
        del self.free[i]
        del self.places[i]


class PyCore:
    """The blocks of one device, in Python; see Note [Core interface]."""

    name = "python"

    def __init__(self) -> None:
        # A plain Lock is much cheaper than an RLock; _owner (the holding thread's id) lets
        # free() notice that it re-entered from a finalizer on the same thread.
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._deferred: list[int] = []
        self._all = _Counters()
        self._by_stat = (self._all, _Counters(), _Counters())  # all, small, large (see _stats)
        # Pending blocks and active peaks change off the hot path: plain counters (only
        # their PEND_* and active_* entries are used).
        self._rare = FastCounters()
        self._pending_blocks = 0  # = self._rare.cur[PEND_COUNT], read on the hot path
        self._off = [0] * 21  # current values at the last reset_accumulated
        self._blocks: dict[int, _Block] = {}  # start address -> block, live or free
        self._segments: dict[int, _Block] = {}  # segment address -> its first block
        self._pools: list[_Pool] = []
        self._max_split = NO_LIMIT
        self._gc_clock = 0
        self._next_serial = 0  # the serial number of the next segment

    # -- settings and pools ---------------------------------------------------------------

    def new_pool(self, small: bool) -> int:
        with self._lock:
            self._pools.append(_Pool(len(self._pools), small, self._by_stat[1 if small else 2]))
            return len(self._pools) - 1

    def set_max_split(self, size: int) -> None:
        self._max_split = size

    def set_gc_clock(self, tick: int) -> None:
        self._gc_clock = tick

    # -- allocation -----------------------------------------------------------------------

    def malloc(self, pool_index: int, rounded: int, requested: int) -> int:
        pool = self._pools[pool_index]
        lock = self._lock
        lock.acquire()
        self._owner = _get_ident()
        try:
            # The blocks that fit are free[i:j]: at least this big, and below the oversize
            # limit (don't carve an oversize block for a small request; give an oversize
            # request an oversize block only if it nearly fits). The small pool takes the
            # first, the smallest (ties: older segment, lower address); the large pool the
            # one of the oldest segment, lowest address first: the least place (see
            # _KEY_SHIFT and Note [First fit in segment order] in _allocator).
            free = pool.free
            max_split = self._max_split
            i = bisect_left(free, rounded << _KEY_SHIFT)
            limit = max_split if rounded < max_split else rounded + LARGE_BUFFER
            j = bisect_left(free, limit << _KEY_SHIFT, i)
            if i == j:
                return 0
            places = pool.places
            if j - i > 1 and not pool.small:
                i = places.index(min(places[i:j]), i, j)
            block = self._blocks[places[i] & _ADDRESS_MASK]
            pool.remove_at(i)
            # The same as _allocate, inlined: this is the hot path.
            nxt = block.next
            was_split = block.prev is not None or nxt is not None
            remaining = block.size - rounded
            if remaining >= MIN_BLOCK_SIZE if pool.small else remaining > SMALL_SIZE and rounded < max_split:
                rest = _Block(block.address + rounded, block.place >> 64, remaining, pool, self._gc_clock)
                rest.prev = block
                rest.next = nxt
                if nxt is not None:
                    nxt.prev = rest
                block.next = rest
                block.size = rounded
                self._blocks[rest.address] = rest
                pool.insert(remaining, rest.place)
                stat = block.stat = (requested << 64 | rounded) << 64 | 1
                if was_split:  # net change: -(rest + rounded) + rest, one block for another
                    change = stat - (rounded << _SB)
                    tot = stat
                else:  # a whole segment becomes split: one more inactive split block
                    change = tot = stat + (remaining << _SB) + (1 << _SN)
            else:
                size = block.size
                change = tot = block.stat = (requested << 64 | size) << 64 | 1
                if was_split:  # the block leaves the inactive split blocks
                    change -= (size << _SB) + (1 << _SN)
            block.state = ALLOCATED
            counters = pool.counters
            counters.tot += tot
            s = counters.slack = counters.slack - change
            everything = self._all
            a = everything.slack = everything.slack - change
            if s & a & _GUARDS != _GUARDS:
                counters.raise_peaks()
                everything.raise_peaks()
            if self._pending_blocks:
                self._note_active(pool)
            return block.address
        finally:
            self._owner = None
            lock.release()
            if self._deferred:
                self._release_deferred()

    def malloc_segment(self, pool_index: int, address: int, size: int, rounded: int, requested: int) -> int:
        pool = self._pools[pool_index]
        with self._lock:
            block = _Block(address, self._next_serial, size, pool, self._gc_clock)
            self._next_serial += 1
            self._blocks[address] = block
            self._segments[address] = block
            return self._allocate(block, pool, rounded, requested)

    def _allocate(self, block: _Block, pool: _Pool, rounded: int, requested: int) -> int:
        """Hand out ``block`` (taken off its free list) for ``rounded`` bytes, splitting
        off the rest by the policy, and count it (malloc inlines this)."""
        nxt = block.next
        was_split = block.prev is not None or nxt is not None
        remaining = block.size - rounded
        change = 0
        tot = 0
        max_split = self._max_split
        if remaining >= MIN_BLOCK_SIZE if pool.small else remaining > SMALL_SIZE and rounded < max_split:
            rest = _Block(block.address + rounded, block.place >> 64, remaining, pool, self._gc_clock)
            rest.prev = block
            rest.next = nxt
            if nxt is not None:
                nxt.prev = rest
            block.next = rest
            block.size = rounded
            self._blocks[rest.address] = rest
            pool.insert(remaining, rest.place)
            if was_split:
                change = -(rounded << _SB)
            else:
                change = tot = (remaining << _SB) + (1 << _SN)
        elif was_split:
            change = -(block.size << _SB) - (1 << _SN)
        stat = block.stat = (requested << 64 | block.size) << 64 | 1
        block.state = ALLOCATED
        self._count(pool.counters, stat + change, stat + tot)
        if self._pending_blocks:
            self._note_active(pool)
        return block.address

    def _count(self, counters: _Counters, change: int, tot: int) -> None:
        """Apply a packed change of current values (and ``tot`` of increases)."""
        counters.tot += tot
        s = counters.slack = counters.slack - change
        a = self._all.slack = self._all.slack - change
        if s & a & _GUARDS != _GUARDS:
            counters.raise_peaks()
            self._all.raise_peaks()

    def _note_active(self, pool: _Pool) -> None:
        """Record the active peaks while some blocks are pending (see FastCounters)."""
        stat = 1 if pool.small else 2
        rare = self._rare
        for p in (0, stat):
            counters = self._by_stat[p]
            values = (counters.current(ALLOC_BYTES, _A) + rare.cur[PEND_BYTES + p],
                      counters.current(ALLOC_COUNT, _N) + rare.cur[PEND_COUNT + p])
            for j, value in enumerate(values):
                if value > rare.active_peak[3 * j + p]:
                    rare.active_peak[3 * j + p] = value

    # -- freeing --------------------------------------------------------------------------

    def free(self, address: int) -> int:
        lock = self._lock
        if not lock.acquire(False):
            if self._owner == _get_ident():
                # Re-entered from a finalizer run by the garbage collector in the middle of
                # an operation on this thread; free once that operation is done.
                self._deferred.append(address)
                return 0
            lock.acquire()
        self._owner = _get_ident()
        try:
            block = self._blocks.get(address)
            if block is None or block.state != ALLOCATED:
                return -1
            self._free_block(block, block.stat)
            return 0
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
            if self.free(address):
                warnings.warn(f"flambeau.cuda_alloc: deferred free of {address:#x} failed: not a live block",
                              RuntimeWarning, stacklevel=2)

    def _free_block(self, block: _Block, released: int) -> None:
        """Merge a block no stream still uses with its free neighbours and cache it;
        ``released`` is the packed allocation it gives back (0 if counted already)."""
        pool = block.pool
        free = pool.free  # neighbours share it: same stream, same pool
        blocks = self._blocks
        block.state = INACTIVE
        size = block.size
        # Split statistics move by the net change: merged neighbours leave the count.
        split_bytes = split_count = 0
        nxt = block.next
        if nxt is not None and nxt.state == INACTIVE:
            n = nxt.size
            entry = n << _KEY_SHIFT | nxt.place
            i = bisect_left(free, entry)
            if free[i] != entry:
                raise AssertionError(f"free list lost block {nxt.address:#x}")  # internal invariant
            pool.remove_at(i)
            del blocks[nxt.address]
            split_bytes = -n
            split_count = -1
            block.size = size = size + n
            block.next = nxt = nxt.next
            if nxt is not None:
                nxt.prev = block
        prev = block.prev
        if prev is not None and prev.state == INACTIVE:
            n = prev.size
            entry = n << _KEY_SHIFT | prev.place
            i = bisect_left(free, entry)
            if free[i] != entry:
                raise AssertionError(f"free list lost block {prev.address:#x}")  # internal invariant
            pool.remove_at(i)
            del blocks[block.address]
            split_bytes -= n
            split_count -= 1
            prev.size = size = size + n
            prev.next = nxt
            if nxt is not None:
                nxt.prev = prev
            block = prev
            prev = prev.prev
        block.stamp = self._gc_clock
        pool.insert(size, block.place)
        counters = pool.counters
        if prev is not None or nxt is not None:  # the block stays inside a partly used segment
            split_bytes += size
            split_count += 1
            change = (split_bytes << _SB) + (split_count << _SN) - released
            counters.tot += split_bytes << _SB | (split_count << _SN if split_count > 0 else 0)
            s = counters.slack = counters.slack - change
            everything = self._all
            a = everything.slack = everything.slack - change
            if s & a & _GUARDS != _GUARDS:
                counters.raise_peaks()
                everything.raise_peaks()
        else:  # the segment is whole again: only decreases, which need no peak
            change = (split_bytes << _SB) + (split_count << _SN) - released
            counters.slack -= change
            self._all.slack -= change

    # -- blocks waiting for other streams ----------------------------------------------------

    def mark_pending(self, address: int) -> int:
        with self._lock:
            block = self._blocks.get(address)
            if block is None or block.state != ALLOCATED:
                return -1
            self._count(block.pool.counters, -block.stat, 0)
            block.state = PENDING
            stat = 1 if block.pool.small else 2
            self._rare.add(PEND_BYTES, stat, block.size)
            self._rare.add(PEND_COUNT, stat, 1)
            self._pending_blocks += 1
            self._note_active(block.pool)
            return 0

    def release_pending(self, address: int) -> int:
        with self._lock:
            block = self._blocks.get(address)
            if block is None or block.state != PENDING:
                return -1
            stat = 1 if block.pool.small else 2
            self._rare.add(PEND_BYTES, stat, -block.size)
            self._rare.add(PEND_COUNT, stat, -1)
            self._pending_blocks -= 1
            self._free_block(block, 0)
            return 0

    # -- inspection and segments --------------------------------------------------------------

    def block_info(self, address: int) -> tuple[int, int, int] | None:
        block = self._blocks.get(address)
        if block is None:
            return None
        return block.pool.index, block.size, block.state

    def remove_segment(self, address: int) -> int:
        """Forget the cached whole segment at ``address``; return its size, or -1 when it
        is no longer a cached whole segment (another thread took a block of it)."""
        with self._lock:
            block = self._segments.get(address)
            if block is None or block.state != INACTIVE or block.next is not None:
                return -1
            pool = block.pool
            pool.remove_at(bisect_left(pool.free, block.size << _KEY_SHIFT | block.place))
            del self._blocks[address]
            del self._segments[address]
            return block.size

    def blocks(self) -> list[tuple[int, int, int, int, int, int, int]]:
        with self._lock:
            out = []
            for segment in sorted(self._segments):
                block: _Block | None = self._segments[segment]
                while block is not None:
                    out.append((segment, block.address, block.size, block.stat >> _R, block.pool.index,
                                block.state, block.stamp))
                    block = block.next
            return out

    def free_list(self, pool_index: int) -> list[tuple[int, int]]:
        with self._lock:
            free = self._pools[pool_index].free
            return [(entry >> _KEY_SHIFT, entry & _ADDRESS_MASK) for entry in free[:-1]]

    # -- statistics -----------------------------------------------------------------------------

    def _unpacked(self) -> FastCounters:
        out = FastCounters()
        rare = self._rare
        for name in ("cur", "tot", "peak", "off"):  # the PEND_* counters, last in the lists
            getattr(out, name)[PEND_BYTES:] = getattr(rare, name)[PEND_BYTES:]
        out.active_peak[:] = rare.active_peak
        out.active_off[:] = rare.active_off
        for p, counters in enumerate(self._by_stat):
            for base, shift in _FIELDS:
                out.cur[base + p] = counters.current(base, shift)
                out.peak[base + p] = counters.peak[base]
                out.tot[base + p] = counters.tot >> shift & _MASK if p else 0
        out.off[:PEND_BYTES] = self._off[:PEND_BYTES]
        return out

    def counters(self) -> FastCounters:
        """A copy of the core's counters."""
        with self._lock:
            return self._unpacked()

    def current(self, i: int) -> int:
        base, p = i - i % 3, i % 3
        with self._lock:
            if base >= PEND_BYTES:
                return self._rare.cur[i]
            return self._by_stat[p].current(base, _SHIFT_OF[base])

    def peak(self, i: int) -> int:
        base, p = i - i % 3, i % 3
        with self._lock:
            return self._rare.peak[i] if base >= PEND_BYTES else self._by_stat[p].peak[base]

    def reset_peak(self) -> None:
        with self._lock:
            unpacked = self._unpacked()
            unpacked.reset_peak()
            for p, counters in enumerate(self._by_stat):
                for base, _ in _FIELDS:
                    counters.peak[base] = unpacked.cur[base + p]
                counters.slack = _GUARDS
            self._rare.peak[:] = unpacked.peak
            self._rare.active_peak[:] = unpacked.active_peak

    def reset_accumulated(self) -> None:
        with self._lock:
            unpacked = self._unpacked()
            unpacked.reset_accumulated()
            for counters in self._by_stat:
                counters.tot = 0
            self._rare.tot[:] = unpacked.tot
            self._off[:] = unpacked.off
            self._rare.off[:] = unpacked.off
            self._rare.active_off[:] = unpacked.active_off
