"""Counters of a caching allocator, under PyTorch's ``memory_stats()`` key names.

Each :class:`Stat` keeps current, peak, allocated (sum of increases) and freed (sum of
decreases). Most statistics exist three times: for all blocks, the small pool (requests up
to 1 MiB) and the large pool. The allocator updates them inline on its hot path, so they
are plain attributes; :meth:`DeviceStats.as_dict` builds the flat dictionary on demand.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["DeviceStats", "Stat", "format_bytes", "format_summary"]

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


class DeviceStats:
    """All counters of one device's allocator.

    Attributes named in ``ARRAY_STATS`` are triples of :class:`Stat` indexed by pool
    (0 all, 1 small, 2 large). Scalar counters: ``num_alloc_retries``, ``num_ooms``,
    ``num_sync_all_streams``, ``num_device_alloc``, ``num_device_free``.
    """

    def __init__(self) -> None:
        for name in ARRAY_STATS:
            setattr(self, name, (Stat(), Stat(), Stat()))
        self.num_alloc_retries = 0
        self.num_ooms = 0
        self.num_sync_all_streams = 0
        self.num_device_alloc = 0
        self.num_device_free = 0

    def reset_peak(self) -> None:
        """Set every peak to its current value."""
        for name in ARRAY_STATS:
            for stat in getattr(self, name):
                stat.peak = stat.current

    def reset_accumulated(self) -> None:
        """Zero the running sums and the scalar counters; keep current values and peaks."""
        for name in ARRAY_STATS:
            for stat in getattr(self, name):
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
            for pool, stat in zip(POOL_NAMES, getattr(self, name)):
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
        for pool, stat in zip(("", "  from large pool", "  from small pool"), _reorder(getattr(stats, name))):
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
