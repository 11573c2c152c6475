"""Tests of the promotion rules of flambeau/_dtype.py against torch.promote_types / result_type / can_cast."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
PAIRS = list(itertools.product(NAMES, NAMES))
SCALARS = [True, False, 0, 3, -2, 2**40, 2.5, -0.0, float("inf")]


def _fl(name):
    return getattr(fl, name)


def _th(name):
    return getattr(torch, name)


def _fl_tensor(name, ndim):
    return fl.zeros((2,) * ndim, dtype=_fl(name))


def _th_tensor(name, ndim):
    return torch.zeros((2,) * ndim, dtype=_th(name))


@pytest.mark.parametrize("a,b", PAIRS)
def test_promote_types(a, b):
    expected = str(torch.promote_types(_th(a), _th(b))).replace("torch.", "")
    assert fl.promote_types(_fl(a), _fl(b)).name == expected


@pytest.mark.parametrize("a,b", PAIRS)
def test_can_cast(a, b):
    assert fl.can_cast(_fl(a), _fl(b)) == torch.can_cast(_th(a), _th(b))


@pytest.mark.parametrize("ndim_a,ndim_b", [(1, 1), (1, 0), (0, 1), (0, 0), (2, 1)])
@pytest.mark.parametrize("a,b", PAIRS)
def test_result_type_tensors(a, b, ndim_a, ndim_b):
    expected = torch.result_type(_th_tensor(a, ndim_a), _th_tensor(b, ndim_b))
    assert fl.result_type(_fl_tensor(a, ndim_a), _fl_tensor(b, ndim_b)).name == str(expected).replace("torch.", "")


@pytest.mark.parametrize("ndim", [0, 1])
@pytest.mark.parametrize("a", NAMES)
def test_result_type_tensor_and_scalar(a, ndim):
    for s in SCALARS:
        expected = str(torch.result_type(_th_tensor(a, ndim), s)).replace("torch.", "")
        assert fl.result_type(_fl_tensor(a, ndim), s).name == expected, s
        expected = str(torch.result_type(s, _th_tensor(a, ndim))).replace("torch.", "")
        assert fl.result_type(s, _fl_tensor(a, ndim)).name == expected, s


def test_result_type_scalars_only():
    for s, t in itertools.product(SCALARS, SCALARS):
        assert fl.result_type(s, t).name == str(torch.result_type(s, t)).replace("torch.", ""), (s, t)


THREE = list(itertools.product(["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"],
                               ["bool", "uint8", "int16", "int64", "float16", "float64"],
                               [True, 3, 2.5]))


@pytest.mark.parametrize("dim_t,zero_t,scalar", THREE)
def test_result_type_three_states(dim_t, zero_t, scalar):
    """A dim tensor, a 0-dim tensor and a Python number together (torch's elementwise_dtypes)."""
    prims = pytest.importorskip("torch._prims_common")
    _, expected = prims.elementwise_dtypes(_th_tensor(dim_t, 1), _th_tensor(zero_t, 0), scalar,
                                           type_promotion_kind=prims.ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    got = fl.result_type(_fl_tensor(dim_t, 1), _fl_tensor(zero_t, 0), scalar)
    assert got.name == str(expected).replace("torch.", "")
    got = fl.result_type(scalar, _fl_tensor(zero_t, 0), _fl_tensor(dim_t, 1))
    assert got.name == str(expected).replace("torch.", "")


@pytest.mark.parametrize("default", ["float64", "float16"])
def test_default_dtype_is_used_for_python_floats(default):
    old = fl.get_default_dtype()
    told = torch.get_default_dtype()
    try:
        fl.set_default_dtype(_fl(default))
        torch.set_default_dtype(torch.float64 if default == "float64" else torch.float32)
        assert fl.result_type(fl.zeros(2, dtype=fl.int32), 2.5) is _fl(default)
        assert fl.result_type(fl.zeros(2, dtype=fl.float32), 2.5) is fl.float32
        assert fl.result_type(fl.zeros(2, dtype=fl.bool), 1.0) is _fl(default)
        if default == "float64":
            assert (fl.tensor([1, 2]) / 2).dtype is fl.float64
            assert (torch.tensor([1, 2]) / 2).dtype is torch.float64
    finally:
        fl.set_default_dtype(old)
        torch.set_default_dtype(told)
    assert fl.result_type(fl.zeros(2, dtype=fl.int32), 2.5) is fl.float32


def test_numpy_scalars_count_as_python_numbers():
    t = fl.zeros(2, dtype=fl.int32)
    assert fl.result_type(t, np.int64(3)) is fl.int32
    assert fl.result_type(t, np.float64(3)) is fl.float32
    assert fl.result_type(t, np.bool_(True)) is fl.int32
    assert fl.result_type(fl.zeros(2, dtype=fl.bool), np.uint8(3)) is fl.int64


def test_bad_operands():
    assert fl.result_type(fl.zeros(2), 1j) is fl.complex64  # a complex scalar raises the category (torch)
    with pytest.raises(TypeError, match="expected a Tensor or a number, got str"):
        fl.result_type(fl.zeros(2), "a")
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        fl.set_default_dtype(fl.int64)


@pytest.mark.parametrize("a,b", [p for p in PAIRS if p[0] != "float16" and p[1] != "float16"])
def test_binary_op_result_dtype_follows_result_type(a, b):
    """The elementwise fronts compute in result_type (checked here on add over all pairs)."""
    x, y = _fl_tensor(a, 1), _fl_tensor(b, 0)
    assert fl.mul(x, y).dtype is fl.result_type(x, y)
    assert fl.mul(y, x).dtype is fl.result_type(x, y)
