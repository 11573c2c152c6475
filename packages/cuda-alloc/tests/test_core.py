"""The allocator's cores: the fit policy against a plain reference model, the C core against the
Python core operation for operation, and the build of the C core with its fallback."""

from __future__ import annotations

import importlib.util
import random
import shutil
import sysconfig
import threading

import pytest
from invariants import MiB, c_core_available, check_invariants, using_core

from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice, _ccore, round_size
from flambeau.cuda_alloc._allocator import segment_size
from flambeau.cuda_alloc._config import AllocatorConfig
from flambeau.cuda_alloc._core import ALLOCATED, INACTIVE, PyCore
from flambeau.cuda_alloc._stats import ALLOC_BYTES

SMALL_SIZE = 1 << 20


class ReferenceModel:
    """The policy written as plainly as possible: every free block of a pool is a candidate
    (PyTorch's sizes and limits); in the small pool the smallest wins, then the one of the older
    segment, then the lower address; in the large pool the one of the oldest segment, then the
    lowest address (Note [First fit in segment order])."""

    def __init__(self, max_split: int | None) -> None:
        self.max_split = max_split or 1 << 62
        self.segments: dict[int, tuple[tuple[int, bool], list[list]]] = {}  # address -> (pool, blocks)
        self.serials: dict[int, int] = {}  # segment address -> the order in which it was made
        self.made = 0

    def choose(self, pool: tuple[int, bool], rounded: int) -> int | None:
        fits = []
        for segment, (segment_pool, blocks) in self.segments.items():
            if segment_pool != pool:
                continue
            for address, size, live in blocks:
                if live or size < rounded:
                    continue
                if rounded < self.max_split and size >= self.max_split:
                    continue  # no oversize block for a small request
                if rounded >= self.max_split and size >= rounded + 20 * MiB:
                    continue  # an oversize request takes an oversize block only if it nearly fits
                # the small pool: best fit (ties: older segment); the large: the oldest segment's first
                serial = self.serials[segment]
                fits.append((size, serial, address) if pool[1] else (serial, address))
        return min(fits)[-1] if fits else None

    def add_segment(self, pool: tuple[int, bool], address: int, size: int) -> None:
        self.segments[address] = (pool, [[address, size, False]])
        self.serials[address] = self.made
        self.made += 1

    def take(self, address: int, rounded: int) -> None:
        for (_, small), blocks in self.segments.values():
            for i, block in enumerate(blocks):
                if block[0] != address:
                    continue
                remaining = block[1] - rounded
                split = remaining >= 512 if small else remaining > SMALL_SIZE and rounded < self.max_split
                if split:
                    blocks.insert(i + 1, [address + rounded, remaining, False])
                    block[1] = rounded
                block[2] = True
                return
        raise AssertionError(f"no block at {address:#x}")

    def free(self, address: int) -> None:
        for _, blocks in self.segments.values():
            for block in blocks:
                if block[0] == address:
                    block[2] = False
                    merged = [blocks[0]]
                    for b in blocks[1:]:
                        if not b[2] and not merged[-1][2]:
                            merged[-1][1] += b[1]
                        else:
                            merged.append(b)
                    blocks[:] = merged
                    return
        raise AssertionError(f"no block at {address:#x}")

    def layout(self) -> list[tuple[int, int, bool]]:
        return sorted((a, s, live) for _, blocks in self.segments.values() for a, s, live in blocks)

    def inactive_split_bytes(self) -> int:
        split = [blocks for _, blocks in self.segments.values() if len(blocks) > 1]
        return sum(s for blocks in split for _, s, live in blocks if not live)


def _random_size(rng: random.Random) -> int:
    kind = rng.random()
    if kind < 0.5:
        return rng.randrange(0, SMALL_SIZE + 1)
    if kind < 0.8:
        return rng.randrange(SMALL_SIZE + 1, 10 * MiB)
    if kind < 0.95:
        return rng.randrange(10 * MiB, 60 * MiB)
    return rng.choice([0, 512, SMALL_SIZE, 2 * MiB, 20 * MiB])


@pytest.mark.parametrize("seed", range(6))
def test_first_fit_matches_the_reference_model(seed):
    rng = random.Random(seed)
    max_split = [None, 40 * MiB][seed % 2]
    divisions = [1, 4][seed // 2 % 2]
    device = SimulatedDevice(capacity=64 << 30)
    config = AllocatorConfig(max_split_size=max_split, roundup_power2_divisions=divisions)
    alloc = CachingAllocator(device, config)
    streams = [device.default_stream(), device.new_stream()]
    model = ReferenceModel(max_split)
    live: list[int] = []
    for step in range(600):
        if live and (rng.random() < 0.45 or len(live) > 60):
            address = live.pop(rng.randrange(len(live)))
            alloc.free(address)
            model.free(address)
        else:
            size = _random_size(rng)
            stream = rng.randrange(2)
            rounded = round_size(size, divisions)
            pool = (stream, rounded <= SMALL_SIZE)
            expected = model.choose(pool, rounded)
            mallocs = device.num_mallocs
            address = alloc.malloc(size, streams[stream])
            if expected is None:
                assert device.num_mallocs == mallocs + 1, "a new segment only when no cached block fits"
                model.add_segment(pool, address, segment_size(rounded))
            else:
                assert device.num_mallocs == mallocs, "no new segment while a cached block fits"
                assert address == expected, f"step {step}: chose {address:#x}, expected {expected:#x}"
            model.take(address, rounded)
            live.append(address)
        if step % 50 == 0:
            snapshot = [(b["address"], b["size"], b["state"] == "active_allocated")
                        for seg in alloc.memory_snapshot() for b in seg["blocks"]]
            assert snapshot == model.layout()
            assert alloc.memory_stats()["inactive_split_bytes.all.current"] == model.inactive_split_bytes()
            check_invariants(alloc, device)


def _drive(core: str, seed: int) -> list:
    """The same random program on a fresh allocator with ``core``: its observations."""
    rng = random.Random(seed)
    device = SimulatedDevice(capacity=256 * MiB)
    with using_core(core):
        alloc = CachingAllocator(device, AllocatorConfig(max_split_size=[None, 32 * MiB][seed % 2]))
    assert alloc._core.name == core
    streams = [device.default_stream(), device.new_stream()]
    live: list[int] = []
    seen: list = []
    for step in range(500):
        action = rng.random()
        if live and action < 0.35:
            alloc.free(live.pop(rng.randrange(len(live))))
        elif live and action < 0.45:
            address = live.pop(rng.randrange(len(live)))
            alloc.record_stream(address, streams[1])
            device.launch(streams[1], 1e-4)
            alloc.free(address)
        elif action < 0.5:
            device.advance(rng.choice([1e-5, 1e-4, 1e-3]))
        elif action < 0.52:
            alloc.empty_cache()
        elif action < 0.53:
            alloc.reset_peak_memory_stats()
        else:
            try:
                live.append(alloc.malloc(_random_size(rng) // 4, streams[rng.randrange(2)]))
            except MemoryError as exc:
                seen.append(type(exc).__name__)
                continue
            seen.append(live[-1])
        if step % 25 == 0:
            seen.append(alloc.memory_stats())
            seen.append(alloc.memory_snapshot())
    seen.append(alloc.memory_stats())
    check_invariants(alloc, device)
    return seen


@pytest.mark.own_cores
@pytest.mark.parametrize("seed", range(4))
def test_the_c_core_behaves_exactly_like_the_python_core(seed):
    if not c_core_available():
        pytest.skip("the C core cannot be built here")
    c, python = _drive("c", seed), _drive("python", seed)
    assert len(c) == len(python)
    for i, (a, b) in enumerate(zip(c, python)):
        assert a == b, f"observation {i} differs"


@pytest.mark.own_cores
def test_the_c_core_builds_where_a_compiler_is_at_hand(tmp_path, monkeypatch):
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if importlib.util.find_spec("cffi") is None or shutil.which(compiler) is None:
        pytest.skip("no cffi or no C compiler: the Python core serves")
    # A fresh cache: the source is compiled there, then loaded.
    monkeypatch.setenv(_ccore.CACHE_VAR, str(tmp_path))
    ffi, lib = _ccore._library()
    assert any(p.name.startswith("_flambeau_cuda_alloc_core_") for p in tmp_path.iterdir())
    assert not list(tmp_path.glob("tmp*")), "the temporary build directory is removed"
    ptr = ffi.gc(lib.ca_new(), lib.ca_delete)
    pool = lib.ca_new_pool(ptr, 1)
    assert lib.ca_malloc(ptr, pool, 512, 1) == 0  # nothing cached yet
    assert lib.ca_malloc_segment(ptr, pool, 1 << 40, 2 * MiB, 512, 1) == 1 << 40
    assert lib.ca_malloc(ptr, pool, 512, 1) == (1 << 40) + 512
    assert lib.ca_free(ptr, 1 << 40) == 0 and lib.ca_free(ptr, 1 << 40) == -1


@pytest.mark.own_cores
def test_without_the_c_core_the_python_core_serves(monkeypatch):
    def broken() -> None:
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(_ccore, "_library", broken)
    monkeypatch.setattr(_ccore, "_loaded", None)
    monkeypatch.setattr(_ccore, "load_error", None)
    monkeypatch.delenv("FLAMBEAU_CUDA_ALLOC_PURE_PYTHON", raising=False)
    assert _ccore.load_core() is None
    assert "no compiler here" in str(_ccore.load_error)
    alloc = CachingAllocator(SimulatedDevice(capacity=1 << 30), AllocatorConfig())
    assert alloc._core.name == "python"
    p = alloc.malloc(1000)
    alloc.free(p)
    assert alloc.malloc(1000) == p


@pytest.mark.own_cores
def test_the_python_core_defers_a_free_reentered_from_a_finalizer():
    core = PyCore()
    pool = core.new_pool(True)
    a = core.malloc_segment(pool, 1 << 40, 2 * MiB, 4096, 4096)
    b = core.malloc(pool, 4096, 4096)
    # As if the garbage collector ran a finalizer in the middle of a core operation on
    # this thread: the free must neither deadlock nor touch the half-updated blocks.
    core._lock.acquire()
    core._owner = threading.get_ident()
    try:
        assert core.free(a) == 0
        assert core.block_info(a)[2] == ALLOCATED  # deferred
        core._deferred.append(12345)  # and a bad one, from a buggy finalizer
    finally:
        core._owner = None
        core._lock.release()
    with pytest.warns(RuntimeWarning, match="deferred free of 0x3039 failed"):
        core._release_deferred()
    assert core.block_info(a)[2] == INACTIVE
    assert core.current(ALLOC_BYTES) == 4096 and core.free(b) == 0 and core.current(ALLOC_BYTES) == 0
