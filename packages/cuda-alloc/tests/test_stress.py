"""Randomised multi-threaded stress test and a hypothesis state machine against a model."""

from __future__ import annotations

import bisect
import random
import threading

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from invariants import check_invariants, using_core

from flambeau.cuda_alloc import CachingAllocator, OutOfMemoryError, SimulatedDevice, round_size
from flambeau.cuda_alloc._allocator import segment_size
from flambeau.cuda_alloc._config import AllocatorConfig

MiB = 1 << 20
SIZES = [1, 512, 700, 4096, 100_000, MiB, MiB + 1, 3 * MiB, 9 * MiB, 12 * MiB, 30 * MiB]


def test_threads_never_get_overlapping_blocks():
    device = SimulatedDevice(capacity=2 << 30)
    alloc = CachingAllocator(device, AllocatorConfig(max_split_size=64 * MiB))
    streams = [device.default_stream(), device.new_stream()]
    live_lock = threading.Lock()
    starts: list[int] = []
    ends: dict[int, int] = {}
    errors: list[BaseException] = []

    def claim(address: int, size: int) -> None:
        with live_lock:
            i = bisect.bisect_left(starts, address)
            assert i == len(starts) or starts[i] >= address + size, "overlaps the next live block"
            assert i == 0 or ends[starts[i - 1]] <= address, "overlaps the previous live block"
            starts.insert(i, address)
            ends[address] = address + size

    def release(address: int) -> None:
        with live_lock:
            starts.remove(address)
            del ends[address]

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        mine: list[int] = []
        try:
            for _ in range(1500):
                if mine and (rng.random() < 0.45 or len(mine) > 40):
                    address = mine.pop(rng.randrange(len(mine)))
                    release(address)
                    alloc.free(address)
                else:
                    size = rng.choice(SIZES)
                    stream = rng.choice(streams)
                    address = alloc.malloc(size, stream=stream)
                    claim(address, round_size(size))
                    mine.append(address)
                    if rng.random() < 0.05:
                        alloc.record_stream(address, streams[0] if stream != streams[0] else streams[1])
                if rng.random() < 0.01:
                    device.advance(1e-3)
                if rng.random() < 0.004:  # races the other threads' mallocs and frees
                    alloc.empty_cache()
            for address in mine:
                release(address)
                alloc.free(address)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    device.advance(1.0)
    alloc.malloc(512)  # polls the pending events
    check_invariants(alloc, device)
    assert alloc.memory_stats()["allocation.all.current"] == 1
    assert alloc.memory_stats()["allocation.all.allocated"] > 3000


class AllocatorMachine(RuleBasedStateMachine):
    """Drives an allocator on a small device and compares it with a model: the set of
    live requests, their rounded sizes, and the peak of their sum."""

    core = "c"

    def __init__(self) -> None:
        super().__init__()
        self.device = SimulatedDevice(capacity=96 * MiB)
        with using_core(self.core):
            self.alloc = CachingAllocator(self.device, AllocatorConfig())
        assert self.alloc._core.name == self.core or self.core == "c"  # "c" falls back without a compiler
        self.streams = [self.device.default_stream(), self.device.new_stream()]
        self.live: dict[int, tuple[int, int]] = {}  # address -> (rounded size, stream index)
        self.peak = 0

    def add(self, address: int, stream: int) -> None:
        self.live[address] = (self.alloc.block_size(address), stream)
        self.peak = max(self.peak, self.model_allocated())

    def model_allocated(self) -> int:
        return sum(size for size, _ in self.live.values())

    @rule(size=st.sampled_from(SIZES) | st.integers(0, 3 * MiB), stream=st.integers(0, 1))
    def malloc(self, size, stream):
        mallocs = self.device.num_mallocs
        try:
            address = self.alloc.malloc(size, stream=self.streams[stream])
        except OutOfMemoryError:
            # Only legitimate when, with every releasable segment freed, the device has no
            # room for the new segment.
            assert self.device.mem_get_info()[0] < segment_size(round_size(size))
            return
        rounded = round_size(size)
        assert self.alloc.block_size(address) >= rounded
        for other, (other_size, _) in self.live.items():
            assert address + rounded <= other or other + other_size <= address
        self.add(address, stream)
        assert self.device.num_mallocs - mallocs <= 1

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free_then_reuse(self, data):
        address = data.draw(st.sampled_from(sorted(self.live)))
        size, stream = self.live.pop(address)
        self.alloc.free(address)
        # One pool per stream: the same request on the same stream is served at once
        # from the cache, without a raw allocation.
        if data.draw(st.booleans()):
            mallocs = self.device.num_mallocs
            again = self.alloc.malloc(size, stream=self.streams[stream])
            assert self.device.num_mallocs == mallocs
            self.add(again, stream)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def record_other_stream_and_free(self, data):
        address = data.draw(st.sampled_from(sorted(self.live)))
        size, stream = self.live.pop(address)
        self.alloc.record_stream(address, self.streams[1 - stream])
        self.device.launch(self.streams[1 - stream], 1e-3)
        self.alloc.free(address)
        # Pending until the other stream passes the event: the address is not handed out
        # (unless running out of memory made the allocator wait for the events).
        retries = self.alloc.memory_stats()["num_alloc_retries"]
        try:
            again = self.alloc.malloc(size, stream=self.streams[stream])
        except OutOfMemoryError:
            return
        if self.alloc.memory_stats()["num_alloc_retries"] == retries:
            assert again != address
        self.add(again, stream)

    @rule()
    def advance(self):
        self.device.advance(2e-3)

    @rule()
    def empty_cache(self):
        self.alloc.empty_cache()
        live_segments = {self.alloc.segment_of(a)[0] for a in self.live}
        assert set(self.device.live_allocations()) == live_segments

    @rule()
    def reset_peak(self):
        self.alloc.reset_peak_memory_stats()
        self.peak = self.model_allocated()

    @invariant()
    def agrees_with_model(self):
        assert self.alloc.memory_allocated() == self.model_allocated()
        assert self.alloc.max_memory_allocated() == self.peak
        assert self.alloc.memory_stats()["allocation.all.current"] == len(self.live)
        check_invariants(self.alloc, self.device)


class PythonCoreMachine(AllocatorMachine):
    core = "python"


TestAllocatorMachine = AllocatorMachine.TestCase
TestAllocatorMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestPythonCoreMachine = PythonCoreMachine.TestCase
TestPythonCoreMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
