"""Tests of flambeau/_factories.py: tensor, as_tensor, from_numpy, constant fills, ranges, eye."""

import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flambeau as fl

torch = pytest.importorskip("torch")

FL_DTYPES = [fl.bool, fl.uint8, fl.int8, fl.int16, fl.int32, fl.int64, fl.float16, fl.float32, fl.float64]
TORCH_OF = {fl.bool: torch.bool, fl.uint8: torch.uint8, fl.int8: torch.int8, fl.int16: torch.int16,
            fl.int32: torch.int32, fl.int64: torch.int64, fl.float16: torch.float16, fl.float32: torch.float32,
            fl.float64: torch.float64}
FL_OF = {v: k for k, v in TORCH_OF.items()}


def same_as_torch(t, tt):
    """``t`` has ``tt``'s shape, dtype and values."""
    assert tuple(t.shape) == tuple(tt.shape)
    assert t.dtype is FL_OF[tt.dtype], (t.dtype, tt.dtype)
    np.testing.assert_array_equal(t.numpy(), tt.numpy())


# --- tensor(): dtype inference ------------------------------------------------------------------
DATA = [
    1, 2.5, True, [1, 2, 3], [1.0, 2], [True, False], [True, 1], [True, 2.5], [[1, 2], [3, 4]],
    [[1.5], [2.5]], [], [[], []], (1, 2), ((1, 2), (3, 4)), [np.float64(1.5), 2], [np.float32(1.5), 2],
    [np.int32(1), 2], [np.int32(1)], np.float64(1.5), np.int32(3), np.float32(2), [np.float16(1), 2.5],
    [np.array([1.5, 2.0]), np.array([1, 2])], [[np.int8(1), np.int8(2)]], [-0.0, 1e30], [2**62, -(2**62)],
    [[[1], [2]], [[3], [4]]], [0.1, 0.2, 0.3],
]


@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy.ndarrays")  # torch's warning
@pytest.mark.parametrize("data", DATA, ids=[repr(d)[:40] for d in DATA])
def test_tensor_infers_like_torch(data):
    same_as_torch(fl.tensor(data), torch.tensor(data))


def test_tensor_inference_with_tensor_leaves():
    same_as_torch(fl.tensor([fl.tensor(1.5, dtype=fl.float64), 2]),
                  torch.tensor([torch.tensor(1.5, dtype=torch.float64), 2]))
    same_as_torch(fl.tensor([fl.tensor(1), fl.tensor(2.0)]), torch.tensor([torch.tensor(1), torch.tensor(2.0)]))


def test_tensor_range_and_default_dtype():
    same_as_torch(fl.tensor(range(4)), torch.tensor(range(4)))
    fl.set_default_dtype(fl.float64)
    try:
        assert fl.tensor([1.5]).dtype is fl.float64
        assert fl.tensor([np.float32(1.5)]).dtype is fl.float32
        assert fl.tensor([1]).dtype is fl.int64
    finally:
        fl.set_default_dtype(fl.float32)


@pytest.mark.parametrize("dtype", FL_DTYPES, ids=str)
def test_tensor_explicit_dtype(dtype):
    data = [[0, 1.5], [2, 3]]
    same_as_torch(fl.tensor(data, dtype=dtype), torch.tensor(data, dtype=TORCH_OF[dtype]))


@pytest.mark.parametrize("dtype", [fl.float32, fl.int64, "float64", np.int16, float, int, bool],
                         ids=str)
def test_tensor_dtype_spellings(dtype):
    t = fl.tensor([1, 0], dtype=dtype)
    assert t.dtype is fl._dtype.to_dtype(dtype)


def test_tensor_from_numpy_array_copies_and_keeps_dtype():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = fl.tensor(a)
    assert t.dtype is fl.int16
    a[0, 0] = 100
    assert t.numpy()[0, 0] == 0
    t = fl.tensor(a.T)  # non-contiguous
    np.testing.assert_array_equal(t.numpy(), a.T)
    t = fl.tensor(a[:, ::-1])  # negative strides are fine for a copy
    np.testing.assert_array_equal(t.numpy(), a[:, ::-1])
    assert fl.tensor(a, dtype=fl.float32).dtype is fl.float32


def test_tensor_from_tensor_copies_with_warning():
    src = fl.tensor([1.0, 2.0])
    with pytest.warns(UserWarning, match="detach\\(\\).clone\\(\\)"):
        t = fl.tensor(src)
    t.numpy()[0] = 5
    assert src.numpy()[0] == 1
    assert t.data_ptr() != src.data_ptr()
    with pytest.warns(UserWarning):
        assert fl.tensor(src, dtype=fl.int64).dtype is fl.int64
    with pytest.warns(UserWarning):
        r = fl.tensor(src, requires_grad=True)
    assert r.requires_grad and r.is_leaf and not src.requires_grad


def test_tensor_from_objects_with_array_interface():
    tt = torch.arange(3)
    same_as_torch(fl.tensor(tt), tt)


def test_tensor_requires_grad():
    t = fl.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf
    with pytest.raises(RuntimeError, match="floating point"):
        fl.tensor([1, 2], requires_grad=True)


@pytest.mark.parametrize("data, exc, msg", [
    ([[1, 2], [3]], ValueError, r"expected sequence of length 2 at dim 1 \(got 1\)"),
    ([[[1], [2]], [[1], [2, 3]]], ValueError, r"expected sequence of length 1 at dim 2 \(got 2\)"),
    ([[1, 2], 3], TypeError, "sequence"),
    ([1, [2, 3]], TypeError, "sequence"),
    ("abc", TypeError, "new\\(\\): invalid data type 'str'"),
    ([1, "a"], TypeError, "new\\(\\): invalid data type 'str'"),
    ([1, None], RuntimeError, "Could not infer dtype of NoneType"),
    (None, RuntimeError, "Could not infer dtype of NoneType"),
    ([object()], RuntimeError, "Could not infer dtype of object"),
    (2**63, ValueError, "Overflow"),
    ([1, 2**64], ValueError, "Overflow"),
    ({1: 2}, TypeError, "invalid data type 'dict'"),
])
def test_tensor_bad_data(data, exc, msg):
    with pytest.raises(exc, match=msg):
        fl.tensor(data)


def test_ragged_messages_match_torch():
    for data in ([[1, 2], [3]], [[[1], [2]], [[1], [2, 3]]]):
        with pytest.raises(ValueError) as te:
            torch.tensor(data)
        with pytest.raises(ValueError) as fe:
            fl.tensor(data)
        assert str(fe.value) == str(te.value)


def test_tensor_large_list_is_fast():
    data = np.random.default_rng(0).random((500, 400)).tolist()
    t0 = time.perf_counter()
    t = fl.tensor(data)
    assert time.perf_counter() - t0 < 2.0
    assert t.shape == (500, 400) and t.dtype is fl.float32


# --- as_tensor / from_numpy -----------------------------------------------------------------------
@pytest.mark.parametrize("np_dtype", [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                      np.uint8, np.bool_])
def test_from_numpy_shares_memory(np_dtype):
    a = np.zeros((3, 4), np_dtype)
    t = fl.from_numpy(a)
    assert t.dtype is fl._dtype.from_numpy_dtype(np_dtype)
    assert t.data_ptr() == a.ctypes.data
    a[1, 2] = 1
    assert t.numpy()[1, 2] == 1
    t.numpy()[0, 0] = 1
    assert a[0, 0] == 1


def test_from_numpy_keeps_strides_and_offset():
    base = np.arange(60, dtype=np.float32).reshape(5, 12)
    view = base[1:, ::3].T
    t = fl.from_numpy(view)
    tt = torch.from_numpy(view)
    assert t.shape == tt.shape and t.stride() == tt.stride()
    assert not t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), view)
    view[0, 0] = -1
    assert t.numpy()[0, 0] == -1


def test_from_numpy_zero_dim_and_empty():
    t = fl.from_numpy(np.array(3.5))
    assert t.shape == () and t.item() == 3.5
    assert fl.from_numpy(np.zeros((0, 2), np.int32)).shape == (0, 2)


def test_from_numpy_is_constant_time():
    big = np.zeros(20_000_000, np.float32)
    small = np.zeros(10, np.float32)
    t0 = time.perf_counter()
    for _ in range(100):
        fl.from_numpy(big)
    t_big = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(100):
        fl.from_numpy(small)
    t_small = time.perf_counter() - t0
    assert t_big < 20 * t_small + 0.01


def test_from_numpy_reshaping_ours_leaves_users_array():
    a = np.zeros((2, 3))
    t = fl.from_numpy(a)
    t._data.shape = (3, 2)
    assert a.shape == (2, 3)


@pytest.mark.parametrize("arr, exc, msg", [
    (np.arange(4)[::-1], ValueError, "At least one stride in the given numpy array is negative"),
    (np.arange(4, dtype=np.uint16), TypeError, "can't convert np.ndarray of type numpy.uint16. The only supported"),
    (np.array(["a"]), TypeError, "can't convert np.ndarray of type numpy.str_"),
    (np.array([1 + 1j], dtype=np.clongdouble), TypeError, "can't convert np.ndarray of type numpy.clongdouble"),
    (np.array([1, 2], dtype=">i4"), ValueError, "byte order"),
    (np.float64(1.0), TypeError, r"expected np.ndarray \(got numpy.float64\)"),
    ([1, 2], TypeError, r"expected np.ndarray \(got list\)"),
])
def test_from_numpy_errors_match_torch(arr, exc, msg):
    with pytest.raises(exc, match=msg):
        fl.from_numpy(arr)
    if not (isinstance(arr, np.ndarray) and arr.dtype in (np.uint16, np.complex128)):  # torch has these dtypes
        with pytest.raises(exc, match=msg):
            torch.from_numpy(arr)


def test_from_numpy_read_only_warns():
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        t = fl.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data


def test_as_tensor_shares_numpy_memory():
    a = np.arange(5.0)
    t = fl.as_tensor(a)
    assert t.data_ptr() == a.ctypes.data and t.dtype is fl.float64
    t2 = fl.as_tensor(a, dtype=fl.float64)
    assert t2.data_ptr() == a.ctypes.data
    t3 = fl.as_tensor(a, dtype=fl.float32)
    assert t3.data_ptr() != a.ctypes.data and t3.dtype is fl.float32
    np.testing.assert_array_equal(t3.numpy(), a.astype(np.float32))


def test_as_tensor_of_tensor_and_lists():
    t = fl.tensor([1.0, 2.0])
    assert fl.as_tensor(t) is t
    assert fl.as_tensor(t, dtype=fl.float32) is t
    assert fl.as_tensor(t, dtype=fl.float64).dtype is fl.float64
    same_as_torch(fl.as_tensor([1, 2], dtype=fl.float64), torch.as_tensor([1, 2], dtype=torch.float64))
    same_as_torch(fl.as_tensor([[1, 2]]), torch.as_tensor([[1, 2]]))
    with pytest.raises(ValueError, match="negative"):
        fl.as_tensor(np.arange(3)[::-1])


# --- constant fills --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
@pytest.mark.parametrize("size", [(), (0,), (3,), (2, 3), (2, 0, 4)])
@pytest.mark.parametrize("dtype", [None, fl.int32, fl.bool, fl.float64])
def test_constant_factories(name, size, dtype):
    fn, tfn = getattr(fl, name), getattr(torch, name)
    t = fn(*size, dtype=dtype)
    tt = tfn(size, dtype=None if dtype is None else TORCH_OF[dtype])
    assert tuple(t.shape) == tuple(tt.shape) and t.dtype is FL_OF[tt.dtype]
    assert t.is_contiguous()
    if name != "empty":
        np.testing.assert_array_equal(t.numpy(), tt.numpy())
    assert tuple(fn(size, dtype=dtype).shape) == size
    assert tuple(fn(list(size), dtype=dtype).shape) == size
    assert tuple(fn(size=size).shape) == size


def test_constant_factories_errors():
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        fl.zeros(-1)
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        fl.zeros((2,), (3,))
    with pytest.raises(TypeError, match="must be tuple of ints, not float"):
        fl.ones(2.5)


def test_factories_requires_grad_and_device():
    t = fl.ones(2, requires_grad=True)
    assert t.requires_grad
    assert fl.zeros(2, device="cpu").device == fl.device("cpu")
    assert fl.zeros(2, device=fl.device("cpu")).device is fl.device("cpu")
    with pytest.raises(RuntimeError, match="floating point"):
        fl.zeros(2, dtype=fl.int64, requires_grad=True)


@pytest.mark.parametrize("value, dtype", [(True, None), (3, None), (1.5, None), (2, fl.float64), (1.5, fl.int64),
                                          (-7, fl.int8)])
def test_full_like_torch(value, dtype):
    same_as_torch(fl.full((2, 3), value, dtype=dtype),
                  torch.full((2, 3), value, dtype=None if dtype is None else TORCH_OF[dtype]))


def test_full_tensor_value():
    same_as_torch(fl.full((2,), fl.tensor(3.0)), torch.full((2,), torch.tensor(3.0)))
    assert fl.full([2], 4).shape == (2,)


def test_scalar_tensor():
    same_as_torch(fl.scalar_tensor(True), torch.scalar_tensor(True))
    same_as_torch(fl.scalar_tensor(3, dtype=fl.int64), torch.scalar_tensor(3, dtype=torch.int64))


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like"])
def test_like_factories(name):
    x = fl.from_numpy(np.zeros((3, 4), np.int32)).t()  # non-contiguous input
    out = getattr(fl, name)(x)
    assert out.shape == (4, 3) and out.dtype is fl.int32 and out.device is x.device and out.is_contiguous()
    if name != "empty_like":
        np.testing.assert_array_equal(out.numpy(), getattr(torch, name)(torch.zeros(4, 3, dtype=torch.int32)))
    assert getattr(fl, name)(x, dtype=fl.float16).dtype is fl.float16
    with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor, not list"):
        getattr(fl, name)([1])


def test_full_like():
    x = fl.zeros(2, dtype=fl.int64)
    same_as_torch(fl.full_like(x, 2.7), torch.full_like(torch.zeros(2, dtype=torch.int64), 2.7))
    assert fl.full_like(x, 2.5, dtype=fl.float32).numpy().tolist() == [2.5, 2.5]


# --- ranges ----------------------------------------------------------------------------------------
ARANGE = [(5,), (0, 5), (1, 10, 3), (10, 0, -3), (5.0,), (0, 1, 0.1), (0.5, 5), (-1, 1, 0.25), (0, 0), (3, 1, -1),
          (0, 10, 7), (1.5, 2.5, 0.3)]


@pytest.mark.parametrize("args", ARANGE, ids=str)
def test_arange_like_torch(args):
    t, tt = fl.arange(*args), torch.arange(*args)
    assert tuple(t.shape) == tuple(tt.shape) and t.dtype is FL_OF[tt.dtype]
    np.testing.assert_allclose(t.numpy(), tt.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [fl.int64, fl.float64, fl.int16, fl.float16], ids=str)
def test_arange_dtype(dtype):
    same_as_torch(fl.arange(0, 10, 2, dtype=dtype), torch.arange(0, 10, 2, dtype=TORCH_OF[dtype]))
    same_as_torch(fl.arange(0.5, 5, dtype=dtype), torch.arange(0.5, 5, dtype=TORCH_OF[dtype]))


def test_arange_tensor_arguments_and_errors():
    same_as_torch(fl.arange(fl.tensor(4)), torch.arange(torch.tensor(4)))
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        fl.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
        fl.arange(0, -5, 1)
    with pytest.raises(TypeError, match="must be Number"):
        fl.arange("5")
    with pytest.raises(RuntimeError, match="unsupported range"):
        fl.arange(0, float("inf"))


@pytest.mark.parametrize("start, end, steps", [(0, 1, 5), (-3, 7, 11), (2, 2, 3), (0, 1, 1), (0, 1, 0), (5, -5, 4)])
@pytest.mark.parametrize("dtype", [None, fl.float64, fl.int64])
def test_linspace_like_torch(start, end, steps, dtype):
    t = fl.linspace(start, end, steps, dtype=dtype)
    tt = torch.linspace(start, end, steps, dtype=None if dtype is None else TORCH_OF[dtype])
    assert tuple(t.shape) == tuple(tt.shape) and t.dtype is FL_OF[tt.dtype]
    np.testing.assert_allclose(t.numpy(), tt.numpy(), rtol=1e-6, atol=1e-6)


def test_linspace_errors():
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        fl.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="steps"):
        fl.linspace(0, 1, 2.5)


@pytest.mark.parametrize("start, end, steps, base", [(0, 2, 3, 10.0), (0, 2, 3, 2), (-1, 1, 5, 10.0), (1, 1, 1, 3.0)])
def test_logspace_like_torch(start, end, steps, base):
    t, tt = fl.logspace(start, end, steps, base), torch.logspace(start, end, steps, base)
    assert t.dtype is FL_OF[tt.dtype]
    np.testing.assert_allclose(t.numpy(), tt.numpy(), rtol=1e-6)
    assert fl.logspace(0, 1, 2, dtype=fl.float64).dtype is fl.float64


@pytest.mark.parametrize("n, m", [(0, None), (1, None), (3, None), (2, 4), (4, 2), (3, 0)])
@pytest.mark.parametrize("dtype", [None, fl.bool, fl.int64])
def test_eye_like_torch(n, m, dtype):
    td = None if dtype is None else TORCH_OF[dtype]
    tt = torch.eye(n, dtype=td) if m is None else torch.eye(n, m, dtype=td)
    same_as_torch(fl.eye(n, m, dtype=dtype), tt)


def test_eye_errors():
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        fl.eye(-1)
    with pytest.raises(RuntimeError, match="m must be greater or equal to 0, got -1"):
        fl.eye(2, -1)
    with pytest.raises(TypeError, match="must be int"):
        fl.eye(2.5)


def test_set_printoptions_exported_from_factories():
    assert "set_printoptions" in fl._factories.__all__


def test_no_numpy_warnings_from_factories():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fl.logspace(0, 400, 3)
        fl.linspace(0, 1, 0)
        fl.arange(0, 0.3, 0.1)


def test_all_public_factories_have_docstrings():
    for name in fl._factories.__all__:
        assert getattr(fl, name).__doc__, name


# --- asarray / frombuffer / empty_strided / tri indices ----------------------------------------------
def test_asarray_shares_when_possible():
    a = np.arange(4.0)
    assert fl.asarray(a).data_ptr() == a.ctypes.data
    tt = torch.arange(3.0)
    assert fl.asarray(tt).data_ptr() == tt.data_ptr()
    t = fl.ones(2)
    assert fl.asarray(t) is t
    c = fl.asarray(t, copy=True)
    assert c is not t and c.data_ptr() != t.data_ptr()
    same_as_torch(fl.asarray([[1, 2]]), torch.asarray([[1, 2]]))
    same_as_torch(fl.asarray(2.5), torch.asarray(2.5))
    assert fl.asarray(a, dtype=fl.float32).dtype is fl.float32
    np.testing.assert_array_equal(fl.asarray(a[::-1]).numpy(), a[::-1])


def test_asarray_copy_false_and_requires_grad():
    a = np.arange(3.0)
    with pytest.raises(ValueError, match="copy=False"):
        fl.asarray(a, dtype=fl.float32, copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        fl.asarray([1, 2], copy=False)
    t = fl.zeros(2)
    r = fl.asarray(t, requires_grad=True)
    assert r.requires_grad and not t.requires_grad and r.data_ptr() == t.data_ptr()


def test_frombuffer_shares_memory():
    b = bytearray(16)
    t = fl.frombuffer(b, dtype=fl.int32)
    assert t.shape == (4,) and t.dtype is fl.int32
    t.numpy()[1] = 7
    assert b[4] == 7
    t = fl.frombuffer(b, dtype=fl.int16, count=2, offset=4)
    assert t.tolist() == [7, 0]
    tt = torch.frombuffer(bytearray(b), dtype=torch.int16, count=2, offset=4)
    assert t.tolist() == tt.tolist()
    with pytest.warns(UserWarning, match="not writable"):
        fl.frombuffer(b"\x01\x00", dtype=fl.uint8)
    with pytest.raises(ValueError, match="frombuffer"):
        fl.frombuffer(bytearray(3), dtype=fl.int32)


@pytest.mark.parametrize("size, stride", [((2, 3), (3, 1)), ((2, 3), (1, 2)), ((4,), (2,)), ((2, 0), (1, 1)),
                                          ((), ()), ((3, 1), (0, 5))])
def test_empty_strided_like_torch(size, stride):
    t, tt = fl.empty_strided(size, stride), torch.empty_strided(size, stride)
    assert tuple(t.shape) == tuple(tt.shape) and t.stride() == tt.stride()
    assert t.is_contiguous() == tt.is_contiguous()
    assert t._storage.nbytes == tt.untyped_storage().nbytes()
    assert fl.empty_strided(size, stride, dtype=fl.int8).dtype is fl.int8


def test_empty_strided_errors():
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        fl.empty_strided((2, 3), (1,))
    with pytest.raises(RuntimeError, match="non-negative"):
        fl.empty_strided((2,), (-1,))


@pytest.mark.parametrize("row, col, offset", [(3, 3, 0), (3, 4, 1), (4, 3, -1), (0, 3, 0), (3, 0, 0), (1, 1, 5),
                                              (5, 2, -10)])
@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
def test_tri_indices_like_torch(name, row, col, offset):
    same_as_torch(getattr(fl, name)(row, col, offset), getattr(torch, name)(row, col, offset))
    assert getattr(fl, name)(row, col, offset, dtype=fl.int32).dtype is fl.int32


def test_tri_indices_errors():
    with pytest.raises(RuntimeError, match="non-negative"):
        fl.tril_indices(-1, 2)
    with pytest.raises(TypeError, match="must be int"):
        fl.triu_indices(2.0, 2)


# --- other devices (tier 2: numba's CUDA simulator, in a subprocess) -------------------------------------
_SIM_SCRIPT = """
import flambeau as fl
assert fl.cuda.is_available()
z = fl.zeros(2, 3, device="cuda")
assert z.device == fl.device("cuda", 0) and z.tolist() == [[0.0] * 3] * 2
assert fl.full((2,), 7, device="cuda").tolist() == [7, 7]
assert fl.ones(2, dtype=fl.int8, device="cuda").dtype is fl.int8
assert fl.empty(4, device="cuda").shape == (4,)
assert fl.tensor([1.5, 2], device="cuda").tolist() == [1.5, 2.0]
assert fl.arange(4, device="cuda").tolist() == [0, 1, 2, 3]
assert fl.zeros_like(z).device == z.device
assert fl.empty_strided((2, 3), (1, 2), device="cuda").stride() == (1, 2)
# CUDA draws from a CUDA generator (Philox on the device): a seed reproduces its numbers
a = fl.randn(5, device="cuda", generator=fl.Generator("cuda").manual_seed(0)).tolist()
b = fl.randn(5, device="cuda", generator=fl.Generator("cuda").manual_seed(0)).tolist()
assert a == b, (a, b)
v = z._version
z.normal_(generator=fl.Generator("cuda").manual_seed(1))
want = fl.randn(2, 3, device="cuda", generator=fl.Generator("cuda").manual_seed(1)).tolist()
assert z._version == v + 1 and z.tolist() == want
assert "device='cuda:0'" in repr(z)
print("OK")
"""


def test_factories_on_simulated_cuda_device():
    import os
    import subprocess
    import sys

    pytest.importorskip("numba.cuda")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    if "cuda" in r.stderr and "ModuleNotFoundError" in r.stderr:
        pytest.skip(f"CUDA simulator not usable here: {r.stderr[-300:]}")
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stderr[-3000:]


_scalars = st.one_of(st.booleans(), st.integers(-(2**40), 2**40), st.floats(-1e6, 1e6, allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=0, max_size=3).flatmap(
    lambda shape: st.lists(_scalars, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))).map(
        lambda flat: np.array(flat, dtype=object).reshape(shape).tolist() if shape else flat[0] if flat else 0)))
def test_tensor_from_nested_lists_matches_torch_property(data):
    same_as_torch(fl.tensor(data), torch.tensor(data))


# --- sizes too large to allocate (Note [Allocation errors] in _storage.py) -------------------------
# torch: "DefaultCPUAllocator: not enough memory: you tried to allocate 40000000000000 bytes" and
# "Storage size calculation overflowed with sizes=[...]"; flambeau names the call, the size and the bytes.
HUGE = 10 ** 13  # 40 TB of float32: more than any machine here has, small enough to describe
TOO_LARGE = {
    "empty": (lambda n: fl.empty(n), "size"), "zeros": (lambda n: fl.zeros(2, n), "size"),
    "ones": (lambda n: fl.ones((n,), dtype=fl.float64), "size"), "full": (lambda n: fl.full((n,), 1.5), "size"),
    "empty_like": (lambda n: fl.empty(0).new_empty(n), "size"),
    "new_full": (lambda n: fl.ones(1).new_full((n,), 2), "size"),
    "empty_strided": (lambda n: fl.empty_strided((n,), (1,)), "size"), "arange": (lambda n: fl.arange(n), "end"),
    "linspace": (lambda n: fl.linspace(0, 1, n), "steps"), "eye": (lambda n: fl.eye(int(n ** 0.5) + 1), "n"),
    "repeat": (lambda n: fl.ones(1).repeat(n), "repeats"),
}


@pytest.mark.parametrize("name", sorted(TOO_LARGE))
@pytest.mark.parametrize("n", [HUGE, 2 ** 62, 2 ** 63, 2 ** 70])
def test_too_large_sizes_raise_runtime_error_naming_size_and_bytes(name, n):
    make, argname = TOO_LARGE[name]
    with pytest.raises(RuntimeError) as info:
        make(n)
    msg = str(info.value)
    if name == "arange" and n >= 2 ** 63:  # as torch: "value cannot be converted to type int64_t without overflow"
        assert msg == f"arange(): start=0, end={n}, step=1: value cannot be converted to type int64 without overflow"
        return
    assert type(info.value) is RuntimeError and f"{argname}=" in msg and "bytes" in msg
    assert str(n) in msg or (name == "eye" and str(int(n ** 0.5) + 1) in msg)
    if n == HUGE:
        assert "not enough memory: you tried to allocate" in msg
    else:
        assert "is too large" in msg and str(2 ** 63 - 1) in msg


def test_too_large_empty_shapes_and_exact_bytes():
    with pytest.raises(RuntimeError, match=r"^empty\(\): not enough memory: you tried to allocate 40000000000000 bytes "
                                           r"\(size=\[10000000000000\], dtype flambeau.float32\)$"):
        fl.empty(HUGE)
    with pytest.raises(RuntimeError, match=r"^zeros\(\): size=\[1099511627776, 1099511627776\] is too large: .* "
                                           r"takes 4835703278458516698824704 bytes"):
        fl.zeros(2 ** 40, 2 ** 40)
    # numpy cannot describe these even without elements (torch can): a clear error, not numpy's
    with pytest.raises(RuntimeError, match=r"size=\[0, 9223372036854775808\] is too large"):
        fl.empty(0, 2 ** 63)


@pytest.mark.parametrize("make", [lambda: fl.empty(-1), lambda: fl.zeros(2, -3), lambda: fl.ones((-1,)),
                                  lambda: fl.full((-2,), 1.0), lambda: fl.rand(-1), lambda: fl.randn(3, -1),
                                  lambda: fl.ones(2).repeat(-1)], ids=["empty", "zeros", "ones", "full", "rand",
                                                                       "randn", "repeat"])
def test_negative_sizes_name_the_dimension(make):
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension -\d"):
        make()


def test_fill_value_errors_are_not_taken_for_allocation_errors():
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8 without overflow"):  # (torch's)
        fl.full((2,), 300, dtype=fl.int8)


def test_arange_beyond_int64_raises_like_torch():
    for args in [(2 ** 63,), (-2 ** 64, 0, 2 ** 62), (0, 2 ** 64, 2 ** 62)]:
        with pytest.raises(RuntimeError, match="value cannot be converted to type int64 without overflow"):
            fl.arange(*args)


def test_tensor_of_any_sequence_like_torch():
    import collections

    torch = pytest.importorskip("torch")
    for data in (collections.deque([1.5, 2.0]), [collections.deque([1, 2]), collections.deque([3, 4])], range(4)):
        ours, theirs = fl.tensor(data), torch.tensor(data)
        assert ours.tolist() == theirs.tolist() and str(ours.dtype)[9:] == str(theirs.dtype)[6:]
