"""Module-level torch.cuda-style functions over the per-device registry."""

from __future__ import annotations

import pytest

import flambeau.cuda_alloc as ca


@pytest.fixture
def installed():
    device = ca.SimulatedDevice(capacity=1 << 30, device=1)
    alloc = ca.CachingAllocator(device, ca.AllocatorConfig())
    ca.set_allocator(alloc, device=1)
    yield alloc
    ca.set_allocator(None, device=1)


def test_functions_use_the_registered_allocator(installed):
    assert ca.get_allocator(1) is installed
    p = installed.malloc(3 << 20)
    assert ca.memory_allocated(1) == 3 << 20
    assert ca.memory_reserved(1) == 20 << 20
    installed.free(p)
    assert ca.max_memory_allocated(1) == 3 << 20
    ca.reset_peak_memory_stats(1)
    assert ca.max_memory_allocated(1) == 0
    assert ca.max_memory_reserved(1) == 20 << 20
    assert ca.memory_stats(1)["num_device_alloc"] == 1
    assert "device ID 1" in ca.memory_summary(1)
    assert ca.memory_snapshot(1)[0]["device"] == 1
    ca.empty_cache(1)
    assert ca.memory_reserved(1) == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="device: expected None or a non-negative device index"):
        ca.get_allocator(-1)
    with pytest.raises(TypeError, match="allocator: expected a CachingAllocator"):
        ca.set_allocator(object(), device=3)
    with pytest.raises(TypeError, match="backend: expected a flambeau.cuda_alloc Backend"):
        ca.CachingAllocator(object())


def test_package_imports_without_numba():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['numba'] = None; sys.modules['numpy'] = None\n"
        "import flambeau.cuda_alloc as ca\n"
        "a = ca.CachingAllocator(ca.SimulatedDevice())\n"
        "a.free(a.malloc(10)); print(a.memory_reserved())"
    )
    import os

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    # Run against the bare namespace: cuda-alloc alone, as when installed without the rest.
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(2 << 20)


def test_numba_backend_is_lazy_and_keys_streams_by_handle():
    import ctypes

    backend = ca.NumbaDriverBackend(3)  # touches no CUDA until memory is asked for
    assert backend.device == 3 and backend._context is None

    class Handle:
        def __init__(self, value):
            self.value = value

    class Stream:
        def __init__(self, handle):
            self.handle = handle

    assert backend.stream_key(0) == 0
    assert backend.stream_key(Stream(Handle(0x1234))) == 0x1234
    assert backend.stream_key(Stream(ctypes.c_void_p(None))) == 0  # numba's default stream
    assert backend.stream_key(Stream(Handle(7))) == backend.stream_key(Stream(Handle(7)))
    with pytest.raises(TypeError, match="stream: expected a numba.cuda Stream or 0"):
        backend.stream_key(object())
