"""Counters of a caching allocator, under PyTorch's ``memory_stats()`` key names.

Each :class:`Stat` keeps current, peak, allocated (sum of increases) and freed (sum of
decreases). Most statistics exist three times: for all blocks, the small pool (requests up
to 1 MiB) and the large pool. The allocator updates them inline on its hot path, so they
are plain attributes; :meth:`DeviceStats.as_dict` builds the flat dictionary on demand.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["DeviceStats", "FastCounters", "Stat", "format_bytes", "format_summary"]

POOL_NAMES = ("all", "small_pool", "large_pool")
SMALL, LARGE = 1, 2  # indices into a statistic's triple; 0 is "all"

# The statistic triples kept per pool, in torch's order; the *_bytes ones count bytes.
ARRAY_STATS = (
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
)


class Stat:
    """One counter: ``current``, ``peak``, and the running sums ``allocated`` and ``freed``."""

    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self) -> None:
        self.current = 0
        self.peak = 0
        self.allocated = 0
        self.freed = 0

    def increase(self, amount: int) -> None:
        """Add ``amount`` to the current value and the running sum; raise the peak."""
        self.current += amount
        self.allocated += amount
        if self.current > self.peak:
            self.peak = self.current

    def decrease(self, amount: int) -> None:
        """Subtract ``amount`` from the current value and add it to ``freed``."""
        self.current -= amount
        self.freed += amount


# Counters kept in flat lists for the allocator's hot path, at ``base + pool`` with pool
# 0 (all), 1 (small) or 2 (large). Active memory is not counted: it is allocated memory
# plus memory freed but waiting for other streams' events ("pending").
ALLOC_BYTES, ALLOC_COUNT, REQ_BYTES, SPLIT_BYTES, SPLIT_COUNT, PEND_BYTES, PEND_COUNT = range(0, 21, 3)
_FAST = {
    "allocated_bytes": ALLOC_BYTES,
    "allocation": ALLOC_COUNT,
    "requested_bytes": REQ_BYTES,
    "inactive_split_bytes": SPLIT_BYTES,
    "inactive_split": SPLIT_COUNT,
}


class FastCounters:
    """Flat lists ``cur``, ``tot`` (sum of increases), ``peak`` and ``off`` (see
    :meth:`freed`) indexed by ``base + pool``; the allocator updates them inline.

    Invariants the allocator keeps: ``cur[base] == cur[base + 1] + cur[base + 2]`` and
    ``peak[base]`` is the peak of ``cur[base]``; ``tot[base]`` is unused (the sum of the
    pools' totals). ``active_peak`` holds peaks of active bytes (0-2) and active blocks
    (3-5), recorded only while blocks are pending: otherwise active equals allocated.
    """

    __slots__ = ("cur", "tot", "peak", "off", "active_peak", "active_off")

    def __init__(self) -> None:
        self.cur = [0] * 21
        self.tot = [0] * 21
        self.peak = [0] * 21
        self.off = [0] * 21
        self.active_peak = [0] * 6
        self.active_off = [0] * 6

    def add(self, base: int, pool: int, amount: int) -> None:
        """Change counter ``base`` of ``pool`` (and of all) by ``amount`` (may be negative)."""
        cur, i = self.cur, base + pool
        cur[i] += amount
        cur[base] += amount
        if amount > 0:
            self.tot[i] += amount
            peak = self.peak
            if cur[i] > peak[i]:
                peak[i] = cur[i]
            if cur[base] > peak[base]:
                peak[base] = cur[base]

    def note_active(self, pool: int) -> None:
        """Record the active peaks of ``pool`` and of all while some blocks are pending."""
        cur, peaks = self.cur, self.active_peak
        for p in (0, pool):
            for j, (alloc, pend) in enumerate(((ALLOC_BYTES, PEND_BYTES), (ALLOC_COUNT, PEND_COUNT))):
                value = cur[alloc + p] + cur[pend + p]
                if value > peaks[3 * j + p]:
                    peaks[3 * j + p] = value

    def stat(self, base: int, pool: int) -> Stat:
        """The :class:`Stat` of counter ``base`` of ``pool``."""
        i = base + pool
        out = Stat()
        out.current = self.cur[i]
        out.peak = self.peak[i]
        out.allocated = self.tot[i] if pool else self.tot[base + 1] + self.tot[base + 2]
        # freed = sum of decreases = increases - (current - current at the last reset)
        out.freed = out.allocated - out.current + self.off[i]
        return out

    def active_stat(self, count: bool, pool: int) -> Stat:
        """The :class:`Stat` of active blocks (``count``) or bytes of ``pool``."""
        alloc, pend = (ALLOC_COUNT, PEND_COUNT) if count else (ALLOC_BYTES, PEND_BYTES)
        base = self.stat(alloc, pool)
        out = Stat()
        out.current = base.current + self.cur[pend + pool]
        out.peak = max(base.peak, self.active_peak[3 * count + pool])
        out.allocated = base.allocated  # a block becomes active when it is allocated
        out.freed = out.allocated - out.current + self.active_off[3 * count + pool]
        return out

    def reset_peak(self) -> None:
        self.peak[:] = self.cur
        for p in range(3):
            self.active_peak[p] = self.cur[ALLOC_BYTES + p] + self.cur[PEND_BYTES + p]
            self.active_peak[3 + p] = self.cur[ALLOC_COUNT + p] + self.cur[PEND_COUNT + p]

    def reset_accumulated(self) -> None:
        self.tot[:] = [0] * 21
        self.off[:] = self.cur
        for p in range(3):
            self.active_off[p] = self.cur[ALLOC_BYTES + p] + self.cur[PEND_BYTES + p]
            self.active_off[3 + p] = self.cur[ALLOC_COUNT + p] + self.cur[PEND_COUNT + p]


class DeviceStats:
    """All counters of one device's allocator.

    ``fast`` holds the hot-path counters (:class:`FastCounters`); ``segment`` and
    ``reserved_bytes`` are triples of :class:`Stat` indexed by pool (0 all, 1 small,
    2 large). Scalar counters: ``num_alloc_retries``, ``num_ooms``,
    ``num_sync_all_streams``, ``num_device_alloc``, ``num_device_free``.
    """

    def __init__(self) -> None:
        self.fast = FastCounters()
        self.segment = (Stat(), Stat(), Stat())
        self.reserved_bytes = (Stat(), Stat(), Stat())
        self.num_alloc_retries = 0
        self.num_ooms = 0
        self.num_sync_all_streams = 0
        self.num_device_alloc = 0
        self.num_device_free = 0

    def triple(self, name: str) -> tuple[Stat, Stat, Stat]:
        """The (all, small, large) :class:`Stat` triple of statistic ``name``."""
        if name in ("segment", "reserved_bytes"):
            return getattr(self, name)
        if name in ("active", "active_bytes"):
            return tuple(self.fast.active_stat(name == "active", p) for p in range(3))
        return tuple(self.fast.stat(_FAST[name], p) for p in range(3))

    def reset_peak(self) -> None:
        """Set every peak of ``segment`` and ``reserved_bytes`` to its current value (the
        allocator's core resets those of ``fast``)."""
        for stat in (*self.segment, *self.reserved_bytes):
            stat.peak = stat.current

    def reset_accumulated(self) -> None:
        """Zero the running sums of ``segment`` and ``reserved_bytes`` and the scalar
        counters; keep current values and peaks (the allocator's core resets ``fast``)."""
        for stat in (*self.segment, *self.reserved_bytes):
            stat.allocated = 0
            stat.freed = 0
        self.num_alloc_retries = 0
        self.num_ooms = 0
        self.num_sync_all_streams = 0
        self.num_device_alloc = 0
        self.num_device_free = 0

    def as_dict(self) -> OrderedDict[str, int]:
        """Flat ``{"allocated_bytes.all.current": ..., ...}`` mapping, sorted by key."""
        out: dict[str, int] = {}
        for name in ARRAY_STATS:
            for pool, stat in zip(POOL_NAMES, self.triple(name)):
                for field in Stat.__slots__:
                    out[f"{name}.{pool}.{field}"] = getattr(stat, field)
        for name in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
                     "num_device_free"):
            out[name] = getattr(self, name)
        return OrderedDict(sorted(out.items()))


def format_bytes(size: int) -> str:
    """``size`` bytes as a short human string (``"1.50 MiB"``)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_summary(stats: DeviceStats, device: int) -> str:
    """A readable table of ``stats`` in the layout of ``torch.cuda.memory_summary()``."""
    width = 79
    rule = "|" + "=" * (width - 2) + "|"
    thin = "|" + "-" * (width - 2) + "|"
    lines = [
        rule,
        f"| {'flambeau CUDA memory summary, device ID ' + str(device):<{width - 4}} |",
        f"| {'num_alloc_retries: ' + str(stats.num_alloc_retries):<37}"
        f"{'num_ooms: ' + str(stats.num_ooms):<{width - 41}} |",
        f"| {'num_device_alloc: ' + str(stats.num_device_alloc):<37}"
        f"{'num_device_free: ' + str(stats.num_device_free):<{width - 41}} |",
        rule,
        f"| {'Metric':<25}| {'Cur Usage':>11} | {'Peak Usage':>11} | {'Tot Alloc':>11} | {'Tot Freed':>9} |",
    ]
    rows = (
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("GPU reserved memory", "reserved_bytes", True),
        ("Non-releasable memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("GPU reserved segments", "segment", False),
        ("Non-releasable allocs", "inactive_split", False),
    )
    for title, name, in_bytes in rows:
        lines.append(thin)
        fmt = format_bytes if in_bytes else str
        for pool, stat in zip(("", "  from large pool", "  from small pool"), _reorder(stats.triple(name))):
            label = title if not pool else pool
            lines.append(
                f"| {label:<25}| {fmt(stat.current):>11} | {fmt(stat.peak):>11} | "
                f"{fmt(stat.allocated):>11} | {fmt(stat.freed):>9} |"
            )
    lines.append(rule)
    return "\n".join(lines) + "\n"


def _reorder(triple: tuple[Stat, Stat, Stat]) -> tuple[Stat, Stat, Stat]:
    # torch lists the large pool before the small one.
    return triple[0], triple[LARGE], triple[SMALL]
