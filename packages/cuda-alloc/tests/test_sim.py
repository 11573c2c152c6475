"""The simulated device: address bookkeeping, capacity, streams, events and costs."""

from __future__ import annotations

import pytest

from flambeau.cuda_alloc import DeviceOutOfMemory, SimulatedDevice

MiB = 1 << 20


def test_ranges_do_not_overlap_and_are_reused():
    dev = SimulatedDevice(capacity=100 * MiB)
    a = dev.malloc(3 * MiB)
    b = dev.malloc(MiB)
    assert b >= a + 3 * MiB
    dev.free(a)
    c = dev.malloc(2 * MiB)
    assert c == a  # first fit into the freed range
    assert dev.used == 3 * MiB
    assert dev.live_allocations() == {b: MiB, c: 2 * MiB}
    assert dev.mem_get_info() == (97 * MiB, 100 * MiB)


def test_capacity_is_enforced():
    dev = SimulatedDevice(capacity=10 * MiB)
    dev.malloc(8 * MiB)
    with pytest.raises(DeviceOutOfMemory, match="cannot allocate"):
        dev.malloc(4 * MiB)


def test_free_checks_address():
    dev = SimulatedDevice()
    with pytest.raises(ValueError, match="address: expected a live allocation"):
        dev.free(0x1234)


def test_free_waits_for_all_streams_and_malloc_does_not():
    dev = SimulatedDevice(malloc_cost=1e-5, free_cost=2e-5)
    s1 = dev.new_stream()
    p = dev.malloc(MiB)
    assert dev.clock == pytest.approx(1e-5)
    dev.launch(s1, 5e-3)
    q = dev.malloc(MiB)
    assert dev.clock == pytest.approx(2e-5)  # asynchronous: the host did not wait
    dev.free(p)
    assert dev.clock == pytest.approx(1e-5 + 5e-3 + 2e-5)
    assert dev.stall_time == pytest.approx(5e-3 - 1e-5)
    assert dev.num_syncs == 1 and dev.num_frees == 1 and dev.num_mallocs == 2
    dev.free(q)


def test_events_complete_in_stream_order():
    dev = SimulatedDevice()
    s = dev.new_stream()
    dev.launch(s, 1.0)
    e1 = dev.record_event(s)
    dev.launch(s, 1.0)
    e2 = dev.record_event(s)
    assert not dev.event_query(e1)
    dev.advance(1.5)
    assert dev.event_query(e1) and not dev.event_query(e2)
    dev.event_synchronize(e2)
    assert dev.event_query(e2) and dev.clock == pytest.approx(2.0)


def test_bad_stream_and_capacity():
    with pytest.raises(TypeError, match="stream: expected a SimStream"):
        SimulatedDevice().stream_key(3)
    with pytest.raises(ValueError, match="capacity: expected a positive int"):
        SimulatedDevice(capacity=0)
