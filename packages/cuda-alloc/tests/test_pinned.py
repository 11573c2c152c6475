"""The caching pinned host allocator."""

from __future__ import annotations

import pytest

from flambeau.cuda_alloc import PinnedMemoryAllocator, SimulatedDevice


@pytest.fixture
def device():
    return SimulatedDevice()


def test_power_of_two_buckets_and_reuse(device):
    pinned = PinnedMemoryAllocator(device)
    a = pinned.malloc(3000)
    assert pinned.block_size(a) == 4096
    assert pinned.block_size(pinned.malloc(1)) == 512
    pinned.free(a)
    assert pinned.malloc(2049) == a  # same bucket: reused
    assert pinned.num_host_alloc == 2
    assert pinned.cached_bytes() == 4096 + 512


def test_buffer_is_real_memory(device):
    pinned = PinnedMemoryAllocator(device)
    a = pinned.malloc(16)
    view = pinned.buffer(a)
    view[:4] = b"\x01\x02\x03\x04"
    assert bytes(pinned.buffer(a)[:4]) == b"\x01\x02\x03\x04"
    assert len(view) == 512


def test_record_stream_delays_reuse(device):
    pinned = PinnedMemoryAllocator(device)
    copy_stream = device.new_stream()
    a = pinned.malloc(1000)
    pinned.record_stream(a, copy_stream)
    device.launch(copy_stream, 1e-3)  # an async copy out of the block is queued
    pinned.free(a)
    b = pinned.malloc(1000)
    assert b != a
    device.advance(2e-3)
    pinned.free(b)
    assert {pinned.malloc(1000), pinned.malloc(1000)} == {a, b}


def test_empty_cache_and_errors(device):
    pinned = PinnedMemoryAllocator(device)
    a = pinned.malloc(100)
    keep = pinned.malloc(100)
    pinned.free(a)
    pinned.empty_cache()
    assert pinned.num_host_free == 1 and pinned.cached_bytes() == 512
    with pytest.raises(ValueError, match="address: expected a live pinned block"):
        pinned.free(a)
    with pytest.raises(ValueError, match="size: expected a non-negative int"):
        pinned.malloc(-5)
    pinned.free(keep)


def test_host_memory_stats_count_blocks_requests_and_calls(device):
    pinned = PinnedMemoryAllocator(device)
    a = pinned.malloc(3000)  # a 4096-byte block
    b = pinned.malloc(100)  # 512
    pinned.free(a)
    stats = pinned.host_memory_stats()
    assert stats["allocations.current"] == 2 and stats["allocated_bytes.current"] == 4096 + 512
    assert stats["active_requests.current"] == 1 and stats["active_bytes.current"] == 512
    assert stats["active_bytes.peak"] == 4096 + 512 and stats["active_requests.freed"] == 1
    assert stats["num_host_alloc"] == 2 and stats["host_alloc_time.count"] == 2
    assert stats["host_alloc_time.min"] <= stats["host_alloc_time.avg"] <= stats["host_alloc_time.max"]
    pinned.free(b)
    pinned.empty_cache()
    stats = pinned.host_memory_stats()
    assert stats["allocations.current"] == 0 and stats["allocated_bytes.freed"] == 4096 + 512
    assert stats["num_host_free"] == 2 and stats["host_free_time.count"] == 2
    pinned.reset_peak_host_memory_stats()
    assert pinned.host_memory_stats()["active_bytes.peak"] == 0
    pinned.reset_accumulated_host_memory_stats()
    stats = pinned.host_memory_stats()
    assert stats["allocated_bytes.allocated"] == 0 and stats["num_host_alloc"] == 0
    assert stats["host_alloc_time.count"] == 0
