"""Tests of flambeau/_interop.py and Tensor.__dlpack__: zero-copy exchange with numpy and torch."""

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")

NP_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]


def _arr(np_dtype, shape=(3, 4)):
    return (np.arange(int(np.prod(shape))) % 2 if np_dtype is np.bool_ else np.arange(int(np.prod(shape)))) \
        .astype(np_dtype).reshape(shape)


# --- numpy -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("np_dtype", NP_DTYPES)
def test_numpy_from_dlpack_of_tensor_shares_memory(np_dtype):
    t = fl.from_numpy(_arr(np_dtype))
    a = np.from_dlpack(t)
    assert a.dtype == np_dtype and a.shape == (3, 4)
    assert a.ctypes.data == t.data_ptr()
    a[0, 1] = 0
    assert t.numpy()[0, 1] == 0


@pytest.mark.parametrize("np_dtype", NP_DTYPES)
def test_from_dlpack_of_numpy_shares_memory(np_dtype):
    a = _arr(np_dtype)
    t = fl.from_dlpack(a)
    assert t.dtype is fl._dtype.from_numpy_dtype(np_dtype) and t.shape == (3, 4)
    assert t.data_ptr() == a.ctypes.data
    a[2, 3] = 1
    assert t.numpy()[2, 3] == 1


@pytest.mark.parametrize("view", [lambda a: a.T, lambda a: a[::2, 1:], lambda a: a[1], lambda a: a[0, 0, ...],
                                  lambda a: a[:0]], ids=["transposed", "strided", "row", "scalar", "empty"])
def test_non_contiguous_and_odd_shapes_round_trip(view):
    base = np.arange(24.0).reshape(4, 6)
    v = view(base)
    t = fl.from_dlpack(v)
    assert tuple(t.shape) == v.shape
    assert t.stride() == tuple(s // 8 for s in v.strides) or v.size <= 1
    np.testing.assert_array_equal(t.numpy(), v)
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back, v)
    if v.size:
        assert back.ctypes.data == np.asarray(v).ctypes.data


def test_tensor_view_exports_its_offset():
    t = fl.arange(10.0)[3:]
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, np.arange(3.0, 10.0))
    assert a.ctypes.data == t.data_ptr()


def test_dlpack_device():
    assert fl.zeros(2).__dlpack_device__() == (1, 0)


def test_export_requires_grad_raises():
    t = fl.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="require gradient"):
        np.from_dlpack(t)
    np.from_dlpack(t.detach())


# --- torch -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("np_dtype", NP_DTYPES)
def test_torch_from_dlpack_of_tensor_shares_memory(np_dtype):
    t = fl.from_numpy(_arr(np_dtype))
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == t.data_ptr() and tuple(tt.shape) == tuple(t.shape)
    np.testing.assert_array_equal(tt.numpy(), t.numpy())
    tt[1, 1] = 0
    assert t.numpy()[1, 1] == 0


def test_from_dlpack_of_torch_shares_memory_and_strides():
    tt = torch.arange(12.0).reshape(3, 4).t()
    t = fl.from_dlpack(tt)
    assert t.data_ptr() == tt.data_ptr()
    assert t.stride() == tt.stride() and tuple(t.shape) == tuple(tt.shape)
    tt[0, 0] = -5
    assert t.numpy()[0, 0] == -5
    t.numpy()[1, 2] = 42
    assert tt[1, 2].item() == 42


@pytest.mark.parametrize("tdtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                                    torch.float16, torch.float32, torch.float64])
def test_from_dlpack_torch_dtypes(tdtype):
    tt = torch.ones(3, dtype=tdtype)
    t = fl.from_dlpack(tt)
    assert str(t.dtype).split(".")[1] == str(tdtype).split(".")[1]
    np.testing.assert_array_equal(t.numpy(), tt.numpy())


def test_legacy_capsules_both_ways():
    tt = torch.arange(4.0)
    t = fl.from_dlpack(torch.utils.dlpack.to_dlpack(tt))
    assert t.data_ptr() == tt.data_ptr()
    t.numpy()[0] = 7  # writable, as torch treats capsule memory
    assert tt[0].item() == 7
    src = fl.arange(3.0)
    back = torch.from_dlpack(fl.to_dlpack(src))
    assert back.data_ptr() == src.data_ptr()


def test_from_dlpack_of_flambeau_tensor_aliases():
    a = fl.arange(5.0)
    b = fl.from_dlpack(a)
    assert b.data_ptr() == a.data_ptr()
    b.numpy()[0] = 3
    assert a.numpy()[0] == 3


def test_result_keeps_producer_alive():
    t = fl.from_dlpack(torch.arange(1000.0))
    import gc

    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(1000.0))


# --- errors ----------------------------------------------------------------------------------------
class _FakeCuda:
    def __dlpack__(self, **kwargs):  # pragma: no cover - never reached
        raise AssertionError("must not be called")

    def __dlpack_device__(self):
        return (2, 0)


def test_from_dlpack_cuda_raises_clearly():
    with pytest.raises(BufferError, match="only CPU data can be imported for now, got data on a CUDA device"):
        fl.from_dlpack(_FakeCuda())


def test_from_dlpack_rejects_non_producers():
    with pytest.raises(TypeError, match="expected an object implementing __dlpack__"):
        fl.from_dlpack([1, 2])


def test_from_dlpack_unsupported_dtypes():
    assert fl.from_dlpack(torch.ones(2, dtype=torch.complex64)).dtype is fl.complex64
    with pytest.raises((RuntimeError, TypeError, BufferError), match="from_dlpack"):
        fl.from_dlpack(torch.ones(2, dtype=torch.bfloat16))


def test_to_dlpack_type_check():
    with pytest.raises(TypeError, match="must be Tensor"):
        fl.to_dlpack(np.zeros(2))


def test_exports():
    assert fl.from_dlpack.__doc__ and fl.to_dlpack.__doc__
    assert {"from_dlpack", "to_dlpack"} <= set(fl.__all__)
