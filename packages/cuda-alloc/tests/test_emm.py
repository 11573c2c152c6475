"""The numba-cuda EMM plugin's methods, over the simulated device (no GPU needed)."""

from __future__ import annotations

import gc

import pytest

driver = pytest.importorskip("numba.cuda.cudadrv.driver", reason="numba-cuda is not installed")
if not hasattr(driver, "HostOnlyCUDAMemoryManager"):
    pytest.skip("numba's CUDA simulator has no memory-manager plugins", allow_module_level=True)

import flambeau.cuda_alloc as ca  # noqa: E402
from flambeau.cuda_alloc import (  # noqa: E402
    CachingAllocator,
    PinnedMemoryAllocator,
    SimulatedDevice,
    _emm,  # noqa: E402
)
from flambeau.cuda_alloc._config import AllocatorConfig  # noqa: E402


class FakeDevice:
    id = 0


class FakeContext:
    """Stands for a numba Context: the plugin only keeps a weak proxy and the device."""

    device = FakeDevice()


@pytest.fixture
def setup():
    device = SimulatedDevice(capacity=1 << 30)
    alloc = CachingAllocator(device, AllocatorConfig())
    pinned = PinnedMemoryAllocator(device)
    cls = ca.memory_manager_class(alloc, pinned)
    context = FakeContext()
    manager = cls(context=context)
    manager.initialize()
    return device, alloc, pinned, manager, context


def test_constructor_without_context_touches_nothing():
    cls = ca.memory_manager_class()
    dummy = cls(context=None)  # what numba.cuda.set_memory_manager does
    assert dummy.interface_version == 1
    assert dummy.allocator is None
    assert issubclass(cls, driver.HostOnlyCUDAMemoryManager)
    assert ca.CachingMemoryManager is cls
    assert ca._numba_memory_manager is cls  # NUMBA_CUDA_MEMORY_MANAGER=flambeau.cuda_alloc


def test_set_memory_manager_accepts_the_plugin():
    previous = driver._memory_manager
    try:
        from numba import cuda

        cuda.set_memory_manager(ca.memory_manager_class())
        assert driver._memory_manager is ca.memory_manager_class()
    finally:
        driver._memory_manager = previous


def test_memalloc_returns_pointer_freed_when_last_reference_goes(setup):
    device, alloc, _, manager, _ = setup
    mem = manager.memalloc(1000)
    assert isinstance(mem, driver.MemoryPointer)
    assert mem.size == 1000
    assert int(mem.device_pointer) == alloc.memory_snapshot()[0]["blocks"][0]["address"]
    assert alloc.memory_allocated() == 1024
    view = mem.view(100, 200)
    del mem
    assert alloc.memory_allocated() == 1024  # the view keeps its parent alive
    del view
    assert alloc.memory_allocated() == 0  # at once, by reference counting, without gc
    assert device.num_frees == 0  # cached, not returned to the device
    again = manager.memalloc(1000)
    assert device.num_mallocs == 1
    del again


def test_memalloc_uses_the_current_stream(setup):
    device, alloc, _, manager, _ = setup
    side = device.new_stream()
    with alloc.stream(side):
        mem = manager.memalloc(4096)
    assert alloc.memory_snapshot()[0]["stream"] == side.id
    del mem
    gc.collect()


def test_get_memory_info(setup):
    device, _, _, manager, _ = setup
    keep = manager.memalloc(3 << 20)
    info = manager.get_memory_info()
    assert isinstance(info, driver.MemoryInfo)
    assert info.total == 1 << 30 and info.free == (1 << 30) - (20 << 20)
    del keep


def test_get_ipc_handle_names_segment_and_offset(setup):
    _, alloc, _, manager, _ = setup
    first = manager.memalloc(4096)
    second = manager.memalloc(4096)
    handle = manager.get_ipc_handle(second)
    assert isinstance(handle, driver.IpcHandle)
    base = int(first.device_pointer)
    assert handle.offset == 4096 and handle.size == 4096
    assert handle.handle.rstrip(b"\0") == f"flambeau-sim:0:{base:x}".encode()
    assert handle.base is second


def test_memhostalloc_caches_pinned_blocks(setup):
    device, _, pinned, manager, _ = setup
    host = manager.memhostalloc(1000)
    assert isinstance(host, driver.PinnedMemory)
    address = host.host_pointer
    buffer = pinned.buffer(address)
    buffer[:3] = b"abc"
    assert bytes(pinned.buffer(address)[:3]) == b"abc"
    del host, buffer
    again = manager.memhostalloc(900)
    assert again.host_pointer == address  # reused from the cache
    assert pinned.num_host_alloc == 1
    del again


def test_reset_and_defer_cleanup(setup):
    device, alloc, _, manager, _ = setup
    with manager.defer_cleanup():
        mem = manager.memalloc(5 << 20)
    del mem
    assert alloc.memory_reserved() == 20 << 20
    manager.reset()
    assert alloc.memory_reserved() == 0 and device.used == 0


def test_initialize_without_bound_allocator_uses_the_context():
    class Device7:
        id = 7

    class Context7:
        device = Device7()

    context = Context7()
    manager = ca.memory_manager_class()(context=context)
    try:
        manager.initialize()  # builds the device's allocator without touching CUDA yet
        assert manager.allocator is ca.get_allocator(7)
        backend = manager.allocator.backend
        assert type(backend).__name__ == "NumbaDriverBackend"
        assert backend.device == 7 and backend._context is context
        assert manager.pinned.backend is backend
    finally:
        ca.set_allocator(None, device=7)
        _emm._pinned_allocators.pop(7, None)
