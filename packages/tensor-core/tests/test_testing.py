"""``flambeau.testing``: assert_close raises where torch's does, with torch's message; make_tensor's ranges."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flambeau as fl  # noqa: E402
from flambeau.testing import assert_close, make_tensor  # noqa: E402

NAN = float("nan")


def _message(fn, *args, **kwargs):
    """``(exception type, message)`` of ``fn(*args, **kwargs)``, or None if it passes."""
    try:
        fn(*args, **kwargs)
    except Exception as e:  # the comparison is of the type and message
        return type(e), str(e)
    return None


def _pair(x):
    """``x`` for flambeau and for torch: a builder ``lambda lib: ...`` called with each module."""
    return x(fl), x(torch)


CASES = {
    "close floats": (lambda m: m.tensor([1.0, 2.0, 3.0]), lambda m: m.tensor([1.0, 2.0 + 1e-6, 3.0]), {}),
    "not close": (lambda m: m.tensor([1.0, 2.0, 3.0]), lambda m: m.tensor([1.0, 2.5, 3.1]), {}),
    "ints equal": (lambda m: m.tensor([1, 2, 3]), lambda m: m.tensor([1, 2, 4]), {}),
    "0-d": (lambda m: m.tensor(1.0), lambda m: m.tensor(2.0), {}),
    "dtype": (lambda m: m.tensor([1.0, 2]), lambda m: m.tensor([1.0, 2], dtype=m.float64), {}),
    "shape": (lambda m: m.zeros(2, 3), lambda m: m.zeros(3, 2), {}),
    "nan": (lambda m: m.tensor([1.0, NAN]), lambda m: m.tensor([1.0, NAN]), {}),
    "equal_nan": (lambda m: m.tensor([1.0, NAN]), lambda m: m.tensor([1.0, NAN]), {"equal_nan": True}),
    "msg": (lambda m: m.tensor([1.0, 2]), lambda m: m.tensor([1.0, 3]), {"msg": "boom"}),
    "msg callable": (lambda m: m.tensor([1.0, 2]), lambda m: m.tensor([1.0, 2.1]), {"msg": lambda s: "X" + s}),
    "check_dtype off": (lambda m: m.tensor([1, 2]), lambda m: m.tensor([1.0, 2.1]), {"check_dtype": False}),
    "check_dtype off close": (lambda m: m.tensor([1, 2]), lambda m: m.tensor([1.0, 2.0]), {"check_dtype": False}),
    "tolerances": (lambda m: m.tensor([1.0, 2]), lambda m: m.tensor([1.05, 2]), {"rtol": 0.1, "atol": 0.0}),
    "zero tolerances": (lambda m: m.tensor([1e30, 2]), lambda m: m.tensor([1.0, 2.1]), {"rtol": 0, "atol": 0}),
    "bool": (lambda m: m.tensor([True]), lambda m: m.tensor([False]), {}),
    "float16": (lambda m: m.tensor([1.0, 2.0], dtype=m.float16), lambda m: m.tensor([1.0, 2.001], dtype=m.float16),
                {}),
    "float64": (lambda m: m.tensor([1.0, 2.0], dtype=m.float64),
                lambda m: m.tensor([1.0, 2.0 + 1e-6], dtype=m.float64), {}),
    "list": (lambda m: [m.tensor(1.0), m.tensor(2.0)], lambda m: [m.tensor(1.0), m.tensor(3.0)], {}),
    "dict": (lambda m: {"a": m.tensor(1.0)}, lambda m: {"a": m.tensor(2.0)}, {}),
    "keys": (lambda m: {"a": 1.0}, lambda m: {"b": 1.0}, {}),
    "lengths": (lambda m: [1.0, 2.0], lambda m: [1.0, 2.0, 3.0], {}),
    "scalars": (lambda m: 1.0, lambda m: 1.1, {}),
    "int scalars": (lambda m: 1, lambda m: 2, {}),
    "scalar types": (lambda m: 1, lambda m: 1.0, {}),
    "booleans": (lambda m: True, lambda m: False, {}),
    "tuple vs list": (lambda m: (1.0, 2.0), lambda m: [1.0, 2.0], {}),
    "tensor vs list": (lambda m: m.tensor([1.0, 2]), lambda m: [1.0, 2.0], {}),
    "none": (lambda m: None, lambda m: None, {}),
    "2-d index": (lambda m: m.zeros(2, 3), lambda m: m.tensor([[0.0, 0, 0], [0, 0, 1]]), {}),
    "inf": (lambda m: m.tensor([float("inf")]), lambda m: m.tensor([float("inf")]), {}),
    "-inf": (lambda m: m.tensor([float("inf")]), lambda m: m.tensor([-float("inf")]), {}),
}


@pytest.mark.parametrize("case", CASES)
def test_assert_close_like_torch(case):
    make_a, make_b, kwargs = CASES[case]
    got = _message(assert_close, make_a(fl), make_b(fl), **kwargs)
    want = _message(torch.testing.assert_close, make_a(torch), make_b(torch), **kwargs)
    if want is None:
        assert got is None
        return
    assert got is not None, f"flambeau passed, torch raised {want}"
    assert got[0] is want[0]
    assert _spelled_alike(got[1]) == _spelled_alike(want[1])


def _spelled_alike(message: str) -> str:
    """A message with the library's name and module paths spelled one way."""
    return message.replace("flambeau.", "torch.").replace("torch._tensor.", "torch.")


def test_only_one_tolerance_is_an_error():
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol' must be either specified or omitted, but got no atol"):
        assert_close(fl.zeros(1), fl.zeros(1), rtol=1e-3)


def test_numpy_arrays_and_stride():
    assert_close(np.zeros(3), np.zeros(3))
    x = fl.zeros(2, 3)
    assert_close(x, x.t().contiguous().t())
    with pytest.raises(AssertionError, match=r"'stride\(\)' do not match: \(3, 1\) != \(1, 2\)"):
        assert_close(x.contiguous(), x.t().contiguous().t(), check_stride=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "uint8", "int8", "bool"])
def test_make_tensor_ranges(dtype):
    d = getattr(fl, dtype)
    x = make_tensor(40, 50, dtype=d, device="cpu")
    assert x.shape == (40, 50) and x.dtype is d and x.device == fl.device("cpu")
    a = x.numpy().astype(np.float64)
    lo, hi = (0, 9) if dtype == "uint8" else (-9, 9)
    if dtype == "bool":
        lo, hi = 0, 1
    assert a.min() >= lo and a.max() <= hi and len(np.unique(a)) > 1
    t = torch.testing.make_tensor(40, 50, dtype=getattr(torch, dtype), device="cpu").double().numpy()
    assert t.min() >= lo and t.max() <= hi  # the same ranges as torch's
    y = make_tensor((3, 4), dtype=d, device="cpu", low=1, high=3, exclude_zero=True, noncontiguous=True)
    assert y.shape == (3, 4) and not y.is_contiguous()
    if dtype != "bool":
        b = y.numpy().astype(np.float64)
        assert b.min() >= 1 and b.max() <= 3


def test_make_tensor_options():
    fl.manual_seed(0)
    a = make_tensor([2, 2], dtype=fl.float32, device="cpu", requires_grad=True)
    fl.manual_seed(0)
    b = make_tensor(2, 2, dtype=fl.float32, device="cpu")
    assert a.requires_grad and np.array_equal(a.detach().numpy(), b.numpy())
    z = make_tensor(1000, dtype=fl.int64, device="cpu", low=-1, high=1, exclude_zero=True)
    assert (z.numpy() != 0).all()
    for lib in (fl, torch):
        maker = make_tensor if lib is fl else torch.testing.make_tensor
        with pytest.raises(ValueError, match="`low` must be less than `high`, but got 5 >= 3"):
            maker(2, dtype=lib.float32, device="cpu", low=5, high=3)
        with pytest.raises(ValueError, match="cannot be NaN"):
            maker(2, dtype=lib.float32, device="cpu", low=NAN)
        with pytest.raises(ValueError, match="only supports"):
            maker(2, dtype=lib.uint8, device="cpu", low=-5, high=-1)
        with pytest.raises(ValueError, match="`requires_grad=True` is not supported"):
            maker(2, dtype=lib.int64, device="cpu", requires_grad=True)
