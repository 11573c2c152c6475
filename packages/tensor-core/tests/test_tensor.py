"""Tests of the Tensor class (flambeau/_tensor.py): metadata, conversions, autograd fields, copying."""

import copy
import pickle
import sys

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")

DTYPES = [fl.bool, fl.uint8, fl.int8, fl.int16, fl.int32, fl.int64, fl.float16, fl.float32, fl.float64]
TORCH_OF = {fl.bool: torch.bool, fl.uint8: torch.uint8, fl.int8: torch.int8, fl.int16: torch.int16,
            fl.int32: torch.int32, fl.int64: torch.int64, fl.float16: torch.float16, fl.float32: torch.float32,
            fl.float64: torch.float64}


def pair(shape=(3, 4), dtype=np.float32):
    a = np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
    return fl.from_numpy(a.copy()), torch.from_numpy(a.copy())


VIEWS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.t(),
    "row_slice": lambda x: x[1:],
    "col_slice": lambda x: x[:, 1:3],
    "strided": lambda x: x[::2, ::3],
    "transposed_slice": lambda x: x.t()[1:],
    "row": lambda x: x[2],
    "element": lambda x: x[1, 2],
}


# --- metadata --------------------------------------------------------------------------------------
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_metadata_matches_torch(view):
    t, tt = pair((4, 6))
    v, tv = VIEWS[view](t), VIEWS[view](tt)
    assert tuple(v.shape) == tuple(tv.shape)
    assert v.size() == tuple(tv.size())
    assert v.stride() == tv.stride()
    assert v.storage_offset() == tv.storage_offset()
    assert v.is_contiguous() == tv.is_contiguous()
    assert v.numel() == tv.numel() and v.nelement() == tv.nelement()
    assert v.dim() == tv.dim() == v.ndim
    assert v.data_ptr() - t.data_ptr() == tv.data_ptr() - tt.data_ptr()
    for d in range(-v.dim(), v.dim()):
        assert v.size(d) == tv.size(d) and v.stride(d) == tv.stride(d)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_element_size_and_nbytes(dtype):
    t = fl.zeros(2, 3, dtype=dtype)
    tt = torch.zeros(2, 3, dtype=TORCH_OF[dtype])
    assert t.element_size() == tt.element_size() == t.itemsize
    assert t.nbytes == tt.nbytes


def test_size_and_stride_dim_errors():
    t = fl.zeros(3, 4)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        t.size(2)
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.stride(-3)
    with pytest.raises(IndexError, match=r"\[-1, 0\]"):
        fl.tensor(1.0).size(1)


def test_empty_and_zero_dim_metadata():
    for shape in [(), (0,), (2, 0), (0, 3, 1)]:
        t, tt = fl.zeros(shape), torch.zeros(shape)
        assert t.is_contiguous() == tt.is_contiguous()
        assert t.numel() == tt.numel() and t.dim() == tt.dim()
        assert tuple(t.shape) == tuple(tt.shape)


def test_size_object():
    s = fl.zeros(2, 3, 4).shape
    assert isinstance(s, fl.Size) and isinstance(s, tuple)
    assert repr(s) == repr(torch.Size([2, 3, 4])).replace("torch", "flambeau")
    assert repr(fl.Size([])) == "flambeau.Size([])"
    assert s.numel() == 24 and fl.Size([]).numel() == 1 and fl.Size([0, 5]).numel() == 0
    assert isinstance(s[1:], fl.Size) and s[1:] == (3, 4)
    assert isinstance(s + (5,), fl.Size)
    assert s == (2, 3, 4) and s[0] == 2
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is fl.Size


def test_device_properties():
    t = fl.zeros(2)
    assert t.device == fl.device("cpu") and t.is_cpu and not t.is_cuda and t.get_device() == -1
    assert t.untyped_storage() is t._storage
    assert t.is_floating_point() and not t.is_complex() and t.is_signed()
    assert not fl.zeros(1, dtype=fl.uint8).is_signed()


def test_type_names():
    assert fl.zeros(1).type() == "torch.FloatTensor"  # torch's spelling (Note [Legacy type names])
    assert fl.zeros(1, dtype=fl.int64).type() == "torch.LongTensor"
    assert fl.zeros(1).type(fl.float64).dtype is fl.float64


# --- dtype conversions -----------------------------------------------------------------------------
CONVERSIONS = ["float", "double", "half", "long", "int", "short", "char", "byte", "bool"]


@pytest.mark.parametrize("method", CONVERSIONS)
@pytest.mark.parametrize("src", [fl.float32, fl.int64, fl.bool, fl.float16], ids=str)
def test_conversion_methods_match_torch(method, src):
    data = [[-1.5, 0.0, 2.7], [3.0, 1.0, 0.25]]
    t = fl.tensor(data).to(src)
    tt = torch.tensor(data).to(TORCH_OF[src])
    r, tr = getattr(t, method)(), getattr(tt, method)()
    assert str(r.dtype).split(".")[1] == str(tr.dtype).split(".")[1]
    np.testing.assert_array_equal(r.numpy(), tr.numpy())
    if r.dtype is t.dtype:
        assert r is t


def test_to_forms():
    t = fl.arange(6.0).reshape(2, 3)
    assert t.to(fl.int64).dtype is fl.int64
    assert t.to("float64").dtype is fl.float64
    assert t.to(dtype=fl.float16).dtype is fl.float16
    assert t.to(fl.zeros(1, dtype=fl.int32)).dtype is fl.int32
    assert t.to("cpu") is t and t.to(fl.device("cpu")) is t and t.to(t.dtype) is t
    assert t.to("cpu", fl.int8).dtype is fl.int8
    c = t.to(t.dtype, copy=True)
    assert c is not t and c.data_ptr() != t.data_ptr()
    np.testing.assert_array_equal(c.numpy(), t.numpy())
    assert t.cpu() is t
    with pytest.raises(TypeError, match="to\\(\\) received an invalid argument"):
        t.to(3.5)


def test_to_non_contiguous_preserves_values():
    t = fl.arange(12.0).reshape(3, 4).t()
    np.testing.assert_array_equal(t.to(fl.int32).numpy(), np.arange(12).reshape(3, 4).T)


# --- Python conversions ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_item_and_tolist_match_torch(dtype):
    data = [[0, 1], [1, 0]]
    t, tt = fl.tensor(data, dtype=dtype), torch.tensor(data, dtype=TORCH_OF[dtype])
    assert t.tolist() == tt.tolist()
    assert type(t[0, 1].item()) is type(tt[0, 1].item())
    assert t[0, 1].item() == tt[0, 1].item()
    assert t[0].tolist() == tt[0].tolist()
    assert fl.tensor(3, dtype=dtype).tolist() == torch.tensor(3, dtype=TORCH_OF[dtype]).tolist()


def test_item_errors_and_single_element():
    assert fl.tensor([[2.5]]).item() == 2.5
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        fl.zeros(2).item()
    with pytest.raises(RuntimeError, match="a Tensor with 0 elements cannot be converted to Scalar"):
        fl.zeros(0).item()


def test_float_int_format():
    assert float(fl.tensor(2.5)) == 2.5 and int(fl.tensor(2.7)) == 2
    assert f"{fl.tensor(2.5):.2f}" == "2.50"


def test_bool_len_index():
    assert bool(fl.tensor([1.0])) is True and bool(fl.tensor(0)) is False
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(fl.zeros(2))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values is ambiguous"):
        bool(fl.zeros(0))
    assert len(fl.zeros(4, 2)) == 4
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(fl.tensor(1.0))
    assert [10, 20, 30][fl.tensor(1)] == 20
    assert [10, 20, 30][fl.tensor([2])] == 30
    for bad in (fl.tensor(1.0), fl.tensor([1, 2]), fl.tensor(True)):
        with pytest.raises(TypeError, match="only integer tensors of a single element can be converted to an index"):
            [1, 2, 3][bad]


def test_bool_messages_match_torch():
    for fl_t, t_t in ((fl.zeros(2), torch.zeros(2)), (fl.zeros(0), torch.zeros(0))):
        with pytest.raises(RuntimeError) as fe:
            bool(fl_t)
        with pytest.raises(RuntimeError) as te:
            bool(t_t)
        assert str(fe.value) == str(te.value)


def test_iteration():
    rows = list(fl.arange(6).reshape(3, 2))
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(fl.tensor(1))


def test_numpy_shares_memory_and_array_protocol():
    t = fl.zeros(3)
    t.numpy()[1] = 5
    assert t.tolist() == [0.0, 5.0, 0.0]
    assert np.asarray(t).ctypes.data == t.data_ptr()
    assert np.array(t, dtype=np.int64).dtype == np.int64
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        fl.zeros(2, requires_grad=True).numpy()
    assert fl.zeros(2, requires_grad=True).numpy(force=True).shape == (2,)


# --- autograd fields -------------------------------------------------------------------------------
def test_requires_grad_rules():
    t = fl.zeros(2)
    assert not t.requires_grad and t.is_leaf
    assert t.requires_grad_() is t and t.requires_grad
    t.requires_grad = False
    assert not t.requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        fl.zeros(2, dtype=fl.int64).requires_grad_()
    fl.zeros(2, dtype=fl.int64).requires_grad_(False)  # allowed
    with pytest.raises(TypeError, match="requires_grad must be a bool"):
        fl.zeros(2).requires_grad_(1)
    assert fl.zeros(2).requires_grad_(np.bool_(True)).requires_grad


def test_requires_grad_false_on_non_leaf_raises():
    t = fl.zeros(2)
    t.grad_fn = object()  # what the engine sets on recorded outputs
    assert not t.is_leaf
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        t.requires_grad_(False)


def test_grad_setter_validation():
    t = fl.zeros(2, 3, requires_grad=True)
    g = fl.ones(2, 3)
    t.grad = g
    assert t.grad is g
    t.grad = None
    assert t.grad is None
    t.grad = g
    del t.grad
    assert t.grad is None
    with pytest.raises(RuntimeError, match=r"different size: expected \[2, 3\], got \[3\]"):
        t.grad = fl.zeros(3)
    with pytest.raises(RuntimeError, match="different type: expected flambeau.float32, got flambeau.float64"):
        t.grad = fl.zeros(2, 3, dtype=fl.float64)
    with pytest.raises(TypeError, match="must be a Tensor or None, got list"):
        t.grad = [1]


def test_detach_shares_storage_and_version():
    t = fl.arange(4.0).requires_grad_()
    d = t.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert d._storage is t._storage and d.data_ptr() == t.data_ptr()
    d.numpy()[0] = 7
    assert t.numpy(force=True)[0] == 7
    d.fill_(1.0)
    assert t._version == d._version == 1


def test_detach_inplace():
    t = fl.zeros(2, requires_grad=True)
    assert t.detach_() is t and not t.requires_grad


def test_data_property():
    t = fl.arange(3.0).requires_grad_()
    d = t.data
    assert not d.requires_grad and d.data_ptr() == t.data_ptr()
    t.data = fl.zeros(5, dtype=fl.float64)
    assert t.shape == (5,) and t.dtype is fl.float64 and t.requires_grad
    with pytest.raises(TypeError, match="data must be a Tensor"):
        t.data = [1.0]


def test_version_counter_shared_by_views():
    t = fl.zeros(3, 4)
    v = t[1]
    v.fill_(2.0)
    assert t._version == v._version == 1
    t.zero_()
    assert v._version == 2


# --- copying ---------------------------------------------------------------------------------------
def test_deepcopy():
    t = fl.arange(6.0).reshape(2, 3).requires_grad_()
    t.grad = fl.ones(2, 3)
    c = copy.deepcopy(t)
    assert c is not t and c.requires_grad and c.data_ptr() != t.data_ptr()
    np.testing.assert_array_equal(c.detach().numpy(), t.detach().numpy())
    assert c.grad is not None and c.grad.data_ptr() != t.grad.data_ptr()
    memo_copy = copy.deepcopy([t, t])
    assert memo_copy[0] is memo_copy[1]


def test_deepcopy_non_leaf_raises():
    t = fl.zeros(2)
    t.grad_fn = object()
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(t)


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16])
def test_pickle_round_trip(view, dtype):
    t = VIEWS[view](pair((4, 6), dtype)[0])
    r = pickle.loads(pickle.dumps(t))
    assert r.dtype is t.dtype and r.shape == t.shape and r.device == t.device
    np.testing.assert_array_equal(r.numpy(), t.numpy())
    assert r.data_ptr() != t.data_ptr()


def test_pickle_keeps_requires_grad():
    t = fl.ones(3, requires_grad=True)
    r = pickle.loads(pickle.dumps(t))
    assert r.requires_grad and r.is_leaf


def test_tensor_constructor_shortcut():
    t = fl.Tensor([1, 2])
    assert t.dtype is fl.float32 and t.tolist() == [1.0, 2.0]
    assert fl.Tensor(2, 3).shape == (2, 3)


def test_new_factories():
    t = fl.zeros(2, dtype=fl.float64)
    assert t.new_zeros(3).dtype is fl.float64 and t.new_ones((2, 2)).shape == (2, 2)
    assert t.new_full((2,), 7).tolist() == [7.0, 7.0]
    assert t.new_empty(4).dtype is fl.float64
    assert t.new_tensor([1, 2]).dtype is fl.float64


# --- backward without an engine --------------------------------------------------------------------
def test_backward_without_engine_names_the_package(monkeypatch):
    from flambeau import _grad_mode

    monkeypatch.setattr(_grad_mode, "_engine", [None])
    monkeypatch.setitem(sys.modules, "flambeau.autograd", None)  # makes `import flambeau.autograd` fail
    t = fl.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="flambeau-autograd"):
        t.backward()
    with pytest.raises(RuntimeError, match="pip install flambeau-autograd"):
        t.register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="pip install flambeau-autograd"):
        t.register_post_accumulate_grad_hook(lambda t: None)


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64, fl.int64, fl.bool, fl.complex64, fl.bfloat16, fl.float16])
def test_large_copies_are_exact(dtype):
    # Note [Parallel copies]: large C-contiguous clone, contiguous and copy_ move bytes over threads;
    # sizes straddle the block size and the threshold, views and overlapping copies keep numpy's path
    rng = np.random.default_rng(0)
    for n in (262_143, 262_144 + 17, 1_500_007):
        values = rng.standard_normal(n).astype(np.float32) * 100
        if dtype == fl.complex64:  # every byte set
            values = values + 1j * values[::-1]
        src = fl.from_numpy(values).to(dtype)
        ref = src.numpy().copy()
        c = src.clone()
        assert c.data_ptr() != src.data_ptr() and np.array_equal(c.numpy(), ref)
        dst = fl.zeros(n, dtype=dtype)
        dst.copy_(src)
        assert np.array_equal(dst.numpy(), ref)
        m = src.reshape(-1, 1)[: n // 7 * 7].reshape(n // 7, 7).t()  # a transposed view: strided clone
        assert np.array_equal(m.contiguous().numpy(), ref[: n // 7 * 7].reshape(n // 7, 7).T)
        src[1:].copy_(src[:-1].clone())  # overlapping storage, via a copy
        assert np.array_equal(src.numpy()[1:], ref[:-1])
        src = fl.from_numpy(ref.copy()) if dtype != fl.bfloat16 else fl.tensor(ref.astype(np.float32)).to(dtype)
        src[1:].copy_(src[:-1])  # overlapping storage, directly
        assert np.array_equal(src.numpy()[1:], ref[:-1])
