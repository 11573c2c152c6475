"""Checks of a CachingAllocator's internal consistency, shared by the stress tests."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice
from flambeau.cuda_alloc._allocator import PURE_PYTHON_VAR
from flambeau.cuda_alloc._ccore import load_core

MiB = 1 << 20


def c_core_available() -> bool:
    """Whether allocators made now get the C core."""
    return os.environ.get(PURE_PYTHON_VAR, "") in ("", "0") and load_core() is not None


@contextlib.contextmanager
def using_core(name: str) -> Iterator[None]:
    """Allocators made inside use the ``"c"`` or the ``"python"`` core."""
    saved = os.environ.get(PURE_PYTHON_VAR)
    os.environ[PURE_PYTHON_VAR] = "1" if name == "python" else "0"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[PURE_PYTHON_VAR]
        else:
            os.environ[PURE_PYTHON_VAR] = saved


def check_invariants(alloc: CachingAllocator, device: SimulatedDevice) -> None:
    """Assert that blocks tile their segments, live blocks are disjoint, free lists hold
    exactly the free blocks, no two free blocks sit side by side, and the statistics
    equal the sums over the blocks."""
    snapshot = alloc.memory_snapshot()
    stats = alloc.memory_stats()
    raw = device.live_allocations()
    assert {s["address"]: s["total_size"] for s in snapshot} == raw
    allocated = active = requested = inactive_split = 0
    free_entries = set()
    for segment in snapshot:
        address = segment["address"]
        previous_state = None
        for block in segment["blocks"]:
            assert block["address"] == address, "blocks must tile the segment without gaps"
            assert block["size"] > 0 and block["size"] % 512 == 0
            address += block["size"]
            state = block["state"]
            if state == "active_allocated":
                allocated += block["size"]
                requested += block["requested_size"]
            if state != "inactive":
                active += block["size"]
            else:
                assert previous_state != "inactive", "two neighbouring free blocks were not merged"
                free_entries.add((segment["stream"], segment["segment_type"] == "small",
                                  block["size"], block["address"]))
                if len(segment["blocks"]) > 1:
                    inactive_split += block["size"]
            previous_state = state
        assert address == segment["address"] + segment["total_size"]
    listed = {(key, small, size, addr) for key, small, size, addr in alloc.free_entries()}
    assert listed == free_entries
    entries = alloc.free_entries()
    for pool in {(key, small) for key, small, _, _ in entries}:
        sizes = [size for key, small, size, addr in entries if (key, small) == pool]
        assert sizes == sorted(sizes), "a free list is out of size order"
    assert stats["allocated_bytes.all.current"] == allocated == alloc.memory_allocated()
    assert stats["active_bytes.all.current"] == active
    assert stats["requested_bytes.all.current"] == requested
    assert stats["reserved_bytes.all.current"] == sum(raw.values()) == alloc.memory_reserved()
    assert stats["segment.all.current"] == len(snapshot)
    assert stats["inactive_split_bytes.all.current"] == inactive_split
    for name in ("allocated_bytes", "reserved_bytes", "active_bytes", "allocation", "segment"):
        assert stats[f"{name}.all.current"] == (
            stats[f"{name}.small_pool.current"] + stats[f"{name}.large_pool.current"]
        )
        assert stats[f"{name}.all.peak"] >= stats[f"{name}.all.current"]
