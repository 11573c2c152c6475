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
