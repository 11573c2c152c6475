"""Real-GPU paths: the numba driver backend and the plugin installed into numba-cuda.

Marked ``gpu``; skipped with the reason when no CUDA GPU is available.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _gpu_reason() -> str | None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return "numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1): no memory-manager plugins"
    try:
        from numba import cuda
    except ImportError:
        return "numba-cuda is not installed"
    try:
        if not cuda.is_available():
            return "no CUDA GPU available (numba.cuda.is_available() is False)"
    except Exception as exc:  # noqa: BLE001 - any driver failure means no usable GPU
        return f"CUDA driver unavailable: {exc}"
    return None


_REASON = _gpu_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

MiB = 1 << 20


def test_numba_backend_malloc_free_events():
    from numba import cuda

    from flambeau.cuda_alloc import CachingAllocator, NumbaDriverBackend
    from flambeau.cuda_alloc._config import AllocatorConfig

    backend = NumbaDriverBackend(0)
    alloc = CachingAllocator(backend, AllocatorConfig())
    free0, total = backend.mem_get_info()
    assert 0 < free0 <= total
    p = alloc.malloc(1000)
    q = alloc.malloc(5 * MiB)
    assert q != p
    stream = cuda.stream()
    alloc.record_stream(p, stream)
    alloc.free(p)
    alloc.free(q)
    stream.synchronize()
    assert alloc.malloc(5 * MiB) == q
    assert alloc.memory_stats()["num_device_alloc"] == 2
    alloc.free(q)
    alloc.empty_cache()
    assert alloc.memory_reserved() == 0
    event = backend.record_event(stream)
    backend.event_synchronize(event)
    assert backend.event_query(event)


_SCRIPT = r"""
import numpy as np
import flambeau.cuda_alloc as ca
ca.install()
from numba import cuda
a = cuda.to_device(np.arange(1000, dtype=np.float32))
alloc = ca.get_allocator(0)  # the one the plugin made for the context
assert type(alloc.backend).__name__ == "NumbaDriverBackend"
assert alloc.memory_allocated() == 4096, alloc.memory_allocated()
@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2
double[4, 256](a)
assert (a.copy_to_host() == 2 * np.arange(1000, dtype=np.float32)).all()
del a
assert alloc.memory_allocated() == 0
b = cuda.device_array(250_000, dtype=np.float32)
del b
before = alloc.memory_stats()["num_device_alloc"]
for _ in range(20):
    b = cuda.device_array(250_000, dtype=np.float32)
    del b
after = alloc.memory_stats()["num_device_alloc"]
assert after == before, (before, after)  # served from the cache after the first
assert alloc.memory_allocated() == 0
h = cuda.pinned_array(1000, dtype=np.float32)
del h
info = cuda.current_context().get_memory_info()
assert info.total > 0
print("ok")
"""


def test_plugin_installed_into_numba():
    # A fresh process: the plugin must be set before numba creates its context.
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("ok")
