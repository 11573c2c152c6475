"""Tests of flambeau/_print.py: the tensor repr (compared with torch's) and set_printoptions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flambeau as fl
from flambeau._print import get_printoptions, printoptions, tensor_repr

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)

ARRAYS = {
    "floats": np.array([1.0, 2.0, 3.0], np.float32),
    "mixed_sign": np.array([[1.0, -2.5], [3.0, 4.0]], np.float32),
    "int_valued_negative": np.array([-1.0, 10.0, 100.0], np.float32),
    "randn_3d": rng.standard_normal((3, 4, 5)).astype(np.float32),
    "big_2d_summarised": (np.arange(2000.0) / 7).reshape(40, 50).astype(np.float32),
    "big_1d_summarised": rng.standard_normal(2000).astype(np.float32),
    "wide_rows": rng.standard_normal((10, 200)).astype(np.float32),
    "scalar": np.array(1.5, np.float32),
    "neg_scalar": np.array(-0.25, np.float32),
    "int_scalar": np.array(7, np.int64),
    "small_sci": np.array([1e-5, 1.0], np.float32),
    "large_sci": np.array([1e10, 2.0], np.float32),
    "ratio_sci": np.array([0.1, 100000.0], np.float32),
    "big_int_valued": np.array([123456789.0, 1.0], np.float32),
    "nonfinite": np.array([np.nan, np.inf, -np.inf, 0.0], np.float32),
    "all_zero": np.zeros(4, np.float32),
    "neg_zero": np.array([0.0, -0.0], np.float32),
    "bools": np.array([True, False]),
    "all_true": np.array([[True, True]]),
    "ints": np.arange(12, dtype=np.int64).reshape(3, 4),
    "neg_ints": np.array([-100, 5, 3], np.int64),
    "int_range_long": np.arange(30, dtype=np.int64),
    "big_ints_summarised": np.arange(3000, dtype=np.int64).reshape(30, 100),
    "thirds": (np.arange(40, dtype=np.float32) / 3),
    "empty_1d": np.zeros(0, np.float32),
    "empty_2d": np.zeros((0, 3), np.float32),
    "empty_2d_b": np.zeros((2, 0), np.float32),
    "4d": rng.standard_normal((2, 2, 2, 3)).astype(np.float32),
    "rounding_up": np.array([9.99996, 0.5], np.float32),
    "double_extremes": np.array([1e200, 1e-200], np.float64),
}
# dtypes whose name is as long in both libraries' suffix are compared verbatim; other dtypes are
# compared on small tensors (the longer 'flambeau.' prefix could move a line break).
DTYPED = {
    "int8": np.array([1, -2, 3], np.int8),
    "uint8": np.array([[0, 255], [7, 8]], np.uint8),
    "int32": np.arange(10, dtype=np.int32),
    "int16": np.array([-5, 5], np.int16),
    "float64": np.array([1.5, 2.25], np.float64),
    "float64_int_valued": np.array([[1.0, 2.0], [3.0, 4.0]], np.float64),
    "float16": np.array([-1.0, 2.5], np.float16),
    "empty_int64": np.zeros(0, np.int64),
    "empty_int64_2d": np.zeros((2, 0), np.int64),
    "empty_bool": np.zeros(0, np.bool_),
}


def _expected(arr) -> str:
    return repr(torch.from_numpy(arr)).replace("torch.", "flambeau.")


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_repr_matches_torch(name):
    arr = ARRAYS[name]
    assert repr(fl.from_numpy(arr)) == _expected(arr)


@pytest.mark.parametrize("name", sorted(DTYPED))
def test_repr_with_dtype_suffix_matches_torch(name):
    arr = DTYPED[name]
    assert repr(fl.from_numpy(arr)) == _expected(arr)


def test_str_is_repr_and_non_contiguous_input():
    a = rng.standard_normal((4, 3)).astype(np.float32)
    t = fl.from_numpy(a).t()
    assert str(t) == repr(t) == _expected(np.ascontiguousarray(a.T))
    b = np.arange(20, dtype=np.float32)
    assert repr(fl.from_numpy(b)[::3]) == _expected(b[::3].copy())


def test_default_dtype_changes_suffix():
    fl.set_default_dtype(fl.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for arr in (np.array([1.5, 2.0]), np.array([1.5], np.float32), np.zeros(0)):
            assert repr(fl.from_numpy(arr)) == _expected(arr)
    finally:
        fl.set_default_dtype(fl.float32)
        torch.set_default_dtype(torch.float32)


def test_requires_grad_suffix():
    arr = np.array([1.0, 2.0], np.float32)
    t = fl.from_numpy(arr.copy()).requires_grad_()
    assert repr(t) == repr(torch.from_numpy(arr).requires_grad_())
    assert repr(t) == "tensor([1., 2.], requires_grad=True)"


class AddBackward0:
    pass


class NamedNode:
    def name(self):
        return "MulBackward0"


def test_grad_fn_suffix_uses_type_name_or_name_method():
    t = fl.tensor([1.0, 2.0])
    t.grad_fn = AddBackward0()
    assert repr(t) == "tensor([1., 2.], grad_fn=<AddBackward0>)"
    t.grad_fn = NamedNode()
    assert repr(t) == "tensor([1., 2.], grad_fn=<MulBackward0>)"
    tt = torch.tensor([1.0, 2.0], requires_grad=True) + 0
    assert repr(tt).endswith("grad_fn=<AddBackward0>)")


class _FakeCudaTensor:
    """What tensor_repr reads from a tensor, for a CUDA tensor on a machine without a GPU."""

    def __init__(self, arr, dtype):
        self._arr, self.dtype = arr, dtype
        self.device = fl.device("cuda", 0)
        self.grad_fn, self.requires_grad = None, False

    def numpy(self, force=False):
        assert force
        return self._arr


def test_device_suffix():
    t = _FakeCudaTensor(np.array([1.0, 2.0], np.float32), fl.float32)
    assert tensor_repr(t) == "tensor([1., 2.], device='cuda:0')"
    t = _FakeCudaTensor(np.array([1, 2], np.int32), fl.int32)
    assert tensor_repr(t) == "tensor([1, 2], device='cuda:0', dtype=flambeau.int32)"


def test_suffix_wraps_past_linewidth():
    arr = np.arange(60, dtype=np.float64).reshape(4, 15) / 3
    r = repr(fl.from_numpy(arr))
    last = r.splitlines()[-1]
    assert last == "       dtype=flambeau.float64)"
    assert all(len(line) <= 80 for line in r.splitlines())


@pytest.mark.parametrize("opts", [
    {"precision": 2}, {"precision": 6}, {"threshold": 5}, {"edgeitems": 1, "threshold": 3},
    {"linewidth": 30}, {"sci_mode": True}, {"sci_mode": False}, {"edgeitems": 0, "threshold": 3},
    {"profile": "full"}, {"profile": "short"},
])
def test_printoptions_match_torch(opts):
    arrays = [np.arange(20.0, dtype=np.float32) / 3, np.arange(24, dtype=np.int64).reshape(2, 3, 4),
              np.array([1e-6, 1.0], np.float32), np.arange(2000, dtype=np.float32)]
    fl.set_printoptions(**opts)
    torch.set_printoptions(**opts)
    try:
        for arr in arrays:
            assert repr(fl.from_numpy(arr)) == _expected(arr), opts
    finally:
        fl.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


def test_set_printoptions_is_exported_and_resets_sci_mode():
    assert fl.set_printoptions is fl._factories.set_printoptions
    assert "set_printoptions" in fl.__all__
    fl.set_printoptions(sci_mode=True)
    assert get_printoptions()["sci_mode"] is True
    fl.set_printoptions(precision=4)  # sci_mode omitted: back to automatic, as in torch
    assert get_printoptions()["sci_mode"] is None
    with pytest.raises(ValueError, match="profile"):
        fl.set_printoptions(profile="bogus")


def test_printoptions_context_manager_restores():
    before = get_printoptions()
    with printoptions(precision=1):
        assert repr(fl.tensor([1.25, 2.0])) == "tensor([1.2, 2.0])"
    assert get_printoptions() == before


def test_format_of_zero_dim():
    assert f"{fl.tensor(2.5):.2f}" == "2.50"


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5),
                  elements=st.one_of(st.floats(-2.0**40, 2.0**40, width=32),
                                   st.sampled_from([np.nan, np.inf, -np.inf, 0.0]))))
def test_repr_matches_torch_property_float32(arr):
    assert repr(fl.from_numpy(arr)) == _expected(arr)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=40),
                  elements=st.integers(-(10**6), 10**6)))
def test_repr_matches_torch_property_int64(arr):
    assert repr(fl.from_numpy(arr)) == _expected(arr)
