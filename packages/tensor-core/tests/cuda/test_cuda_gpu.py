"""Tier 3: a real GPU (every test is marked ``gpu``; skipped under the simulator or without CUDA).

Run: ``python -m pytest packages/tensor-core/tests/cuda -q -m gpu`` on a machine with a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(1)


def _pair(shape, np_dtype=np.float32):
    h = RNG.standard_normal(shape).astype(np_dtype)
    return h, fl.from_numpy(h).cuda()


def test_large_elementwise_and_broadcast():
    h, g = _pair((1000, 1000))
    hb, gb = _pair((1000,))
    np.testing.assert_allclose((g * gb + 1).cpu().numpy(), h * hb + 1, rtol=1e-6)
    np.testing.assert_allclose(fl.exp(g.T).cpu().numpy(), np.exp(h.T), rtol=1e-6)
    np.testing.assert_array_equal((g > gb).cpu().numpy(), h > hb)


def test_large_sum():
    h, g = _pair((1024, 2048), np.float64)
    np.testing.assert_allclose(g.sum().item(), h.sum(), rtol=1e-10)
    np.testing.assert_allclose(g.sum(0).cpu().numpy(), h.sum(0), rtol=1e-10)
    np.testing.assert_allclose(g.T.sum(1).cpu().numpy(), h.T.sum(1), rtol=1e-10)
    hi = RNG.integers(-100, 100, 1 << 20).astype(np.int32)
    assert fl.from_numpy(hi).cuda().sum().item() == int(hi.astype(np.int64).sum())


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
def test_matmul_cublas_and_fallback(np_dtype, monkeypatch):
    from flambeau._kernels.cuda import _cublas

    ha, ga = _pair((300, 200), np_dtype)
    hb, gb = _pair((200, 150), np_dtype)
    want = ha.astype(np.float64) @ hb.astype(np.float64)
    tol = 1e-3 if np_dtype == np.float32 else 1e-10
    np.testing.assert_allclose((ga @ gb).cpu().numpy(), want, rtol=tol, atol=tol)
    np.testing.assert_allclose((gb.T @ ga.T).cpu().numpy(), want.T, rtol=tol, atol=tol)
    h3, g3 = _pair((4, 300, 200), np_dtype)
    np.testing.assert_allclose(fl.bmm(g3, ga.T.unsqueeze(0).expand(4, 200, 300).contiguous()).cpu().numpy(),
                               h3 @ ha.T, rtol=tol, atol=tol)
    monkeypatch.setattr(_cublas, "available", lambda: False)  # the numba kernel
    np.testing.assert_allclose((ga @ gb).cpu().numpy(), want, rtol=tol, atol=tol)


def test_cublas_is_loaded_when_installed():
    from flambeau._kernels.cuda import _cublas

    if _cublas.find_library() is None:
        pytest.skip("libcublas not installed (pip install nvidia-cublas-cu12)")
    assert _cublas.available()


def test_cuda_array_interface_consumed_by_numba():
    from numba import cuda

    h, g = _pair((64, 32))
    s = fl.cuda.Stream()
    with fl.cuda.stream(s):
        y = g * 2
        cai = y.__cuda_array_interface__
        assert cai["stream"] == s.cuda_stream
        arr = cuda.as_cuda_array(y)
    np.testing.assert_allclose(arr.copy_to_host(), h * 2)
    assert cai["data"][0] == y.data_ptr()
    t = g.T
    assert t.__cuda_array_interface__["strides"] == (4, 128)
    np.testing.assert_allclose(cuda.as_cuda_array(t).copy_to_host(), h.T)


def test_event_timing_positive():
    start, end = fl.cuda.Event(enable_timing=True), fl.cuda.Event(enable_timing=True)
    _, g = _pair((2048, 2048))
    start.record()
    for _ in range(5):
        g = g * 1.0001
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0


def test_allocator_seam_on_gpu():
    from flambeau.cuda import _allocator

    inner = _allocator.NativeAllocator(0)

    class Recording:
        def __init__(self):
            self.events = []

        def malloc(self, size, stream):
            a = inner.malloc(size, stream)
            self.events.append(("malloc", a, size))
            return a

        def free(self, address):
            self.events.append(("free", address))
            inner.free(address)

        def record_stream(self, address, stream):
            pass

        def empty_cache(self):
            pass

        def memory_allocated(self):
            return inner.memory_allocated()

        def memory_reserved(self):
            return inner.memory_reserved()

    rec = Recording()
    old = _allocator._allocators.get(0)
    fl.cuda.set_allocator(rec, 0)
    try:
        x = fl.ones(1000, device="cuda")
        assert fl.cuda.memory_allocated() >= 4000
        address = rec.events[-1][1]
        v = x[10:20]
        del x
        assert ("free", address) not in rec.events  # a view keeps the block alive
        assert v.sum().item() == 10.0
        del v
        import gc

        gc.collect()
        fl.cuda.synchronize()
        assert ("free", address) in rec.events
    finally:
        fl.cuda.set_allocator(old, 0)


def test_async_until_read():
    # Many launches queue without the host waiting; reading a value synchronises.
    _, g = _pair((256, 256))
    acc = fl.zeros(256, 256, device="cuda")
    for _ in range(50):
        acc += g
    np.testing.assert_allclose(acc.cpu().numpy(), 50 * g.cpu().numpy(), rtol=1e-4)
