"""The distribution registers its allocator factory in tensor-core's allocator seam."""

from __future__ import annotations

from importlib.metadata import entry_points

import flambeau.cuda_alloc as cuda_alloc


def test_entry_point_loads_the_allocator_factory():
    (ep,) = [e for e in entry_points(group="flambeau.cuda_allocators") if e.name == "caching"]
    assert ep.value == "flambeau.cuda_alloc:get_allocator"
    assert ep.load() is cuda_alloc.get_allocator


def test_allocator_has_the_seam_interface():
    # The methods tensor-core's seam calls (flambeau.cuda._allocator.Allocator), checked without core.
    for name in ("malloc", "free", "record_stream", "empty_cache", "memory_allocated", "memory_reserved",
                 "memory_stats"):
        assert callable(getattr(cuda_alloc.CachingAllocator, name)), name
