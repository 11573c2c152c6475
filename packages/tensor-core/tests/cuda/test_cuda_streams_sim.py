"""Streams, events, synchronisation and the allocator seam on a CUDA device (simulator or GPU)."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl


def test_is_available_and_device_queries():
    assert fl.cuda.is_available() is True
    assert fl.cuda.device_count() >= 1
    assert fl.cuda.current_device() == 0
    with fl.cuda.device(0):
        assert fl.cuda.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        fl.cuda.set_device(fl.cuda.device_count())


def test_work_on_a_side_stream():
    s = fl.cuda.Stream()
    assert fl.cuda.current_stream() is fl.cuda.default_stream()
    x = fl.arange(12, dtype=fl.float32, device="cuda").reshape(3, 4)
    with fl.cuda.stream(s):
        assert fl.cuda.current_stream() is s
        y = (x * 2 + 1).sum(1)
    s.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), (np.arange(12, dtype=np.float32).reshape(3, 4) * 2 + 1).sum(1))
    assert fl.cuda.current_stream() is fl.cuda.default_stream()


def test_wait_stream_orders_work():
    s = fl.cuda.Stream()
    x = fl.ones(8, device="cuda")
    with fl.cuda.stream(s):
        s.wait_stream(fl.cuda.default_stream())
        y = x + 1
    fl.cuda.current_stream().wait_stream(s)
    assert y.sum().item() == 16.0


def test_events_record_and_time():
    start = fl.cuda.Event(enable_timing=True)
    end = fl.cuda.Event(enable_timing=True)
    start.record()
    x = fl.ones(16, device="cuda") * 3
    end.record()
    end.synchronize()
    assert end.query() is True
    assert isinstance(start.elapsed_time(end), float)
    assert x.sum().item() == 48.0


def test_synchronize_and_item_read_values():
    x = fl.full((4,), 2.5, device="cuda")
    fl.cuda.synchronize()
    assert x.sum().item() == 10.0
    assert float(x[0]) == 2.5
    assert bool((x > 2).sum() == 4)


def test_cuda_array_interface_shape():
    # The simulator lacks __cuda_array_interface__ consumers; the dict itself is checked here,
    # its use by other libraries in the GPU tests.
    x = fl.ones(2, 3, device="cuda")
    cai = x.__cuda_array_interface__
    assert cai["shape"] == (2, 3) and cai["typestr"] == "<f4" and cai["version"] == 3
    assert cai["strides"] is None
    assert cai["stream"] == 1  # the legacy default stream
    assert x.T.__cuda_array_interface__["strides"] == (4, 12)
    s = fl.cuda.Stream()
    with fl.cuda.stream(s):
        assert x.__cuda_array_interface__["stream"] == s._cai_stream() != 1
    with pytest.raises(AttributeError, match="non-CUDA"):
        _ = fl.ones(2).__cuda_array_interface__
    with pytest.raises(RuntimeError, match="requires grad"):
        _ = fl.ones(2, device="cuda", requires_grad=True).__cuda_array_interface__


def test_memory_functions_forward_to_allocator():
    assert isinstance(fl.cuda.memory_allocated(), int)
    assert isinstance(fl.cuda.memory_reserved(), int)
    fl.cuda.empty_cache()
    assert isinstance(fl.cuda.memory_stats(), dict)


def test_record_stream_validates():
    s = fl.cuda.Stream()
    fl.cuda.record_stream(fl.ones(2, device="cuda"), s)
    with pytest.raises(RuntimeError, match="expected a CUDA tensor"):
        fl.cuda.record_stream(fl.ones(2), s)
    with pytest.raises(TypeError, match="flambeau.cuda.Stream"):
        fl.cuda.record_stream(fl.ones(2, device="cuda"), 3)
