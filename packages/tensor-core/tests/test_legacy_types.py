"""``flambeau._legacy_types``: ``FloatTensor(2, 3)``, ``isinstance(x, LongTensor)``, ``x.type(...)``, as torch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flambeau as fl  # noqa: E402

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", NAMES)
def test_construct_like_torch(name):
    ours, theirs = getattr(fl, name), getattr(torch, name)
    x, t = ours(2, 3), theirs(2, 3)
    assert tuple(x.shape) == tuple(t.shape) and x.dtype.name == str(t.dtype).removeprefix("torch.")
    assert ours(fl.Size([2, 3])).shape == (2, 3)
    assert ours().shape == (0,) and ours().dtype is x.dtype
    data = [1, 0, 1]
    np.testing.assert_array_equal(ours(data).numpy().astype(np.float64),
                                  theirs(data).to(torch.float64).numpy())
    np.testing.assert_array_equal(ours((1, 0)).numpy().astype(np.float64), theirs((1, 0)).to(torch.float64).numpy())
    assert isinstance(x, ours) and isinstance(t, theirs)
    assert x.type() == t.type() == f"torch.{name}"
    assert not issubclass(ours, fl.Tensor) and not issubclass(theirs, torch.Tensor)
    assert ours.__name__ == name and ours.dtype is x.dtype and ours.is_cuda is False


def test_isinstance_checks_dtype_and_device():
    x = fl.zeros(2)
    assert isinstance(x, fl.FloatTensor) and isinstance(x, fl.Tensor)
    assert not isinstance(x, fl.DoubleTensor) and not isinstance(x.long(), fl.FloatTensor)
    assert not isinstance(x, fl.cuda.FloatTensor) and fl.cuda.FloatTensor.is_cuda
    assert not isinstance(np.zeros(2, np.float32), fl.FloatTensor)


def test_tensor_argument_and_errors():
    x = fl.zeros(2)
    assert fl.FloatTensor(x) is x
    with pytest.raises(TypeError):
        torch.FloatTensor(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="expected FloatTensor"):
        fl.FloatTensor(fl.tensor([1, 2]))
    with pytest.raises(TypeError, match=r"data must be a sequence \(got float\)"):
        torch.LongTensor(2.5)
    with pytest.raises(TypeError, match=r"data must be a sequence \(got float\)"):
        fl.LongTensor(2.5)
    np.testing.assert_array_equal(fl.LongTensor([2.5]).numpy(), torch.LongTensor([2.5]).numpy())
    np.testing.assert_array_equal(fl.FloatTensor(np.array([1, 2])).numpy(), [1.0, 2.0])
    with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu"):
        fl.FloatTensor(2, device="cuda")


def test_type_converts_like_torch():
    x, t = fl.zeros(2), torch.zeros(2)
    for spec, tspec in ((fl.LongTensor, torch.LongTensor), ("torch.LongTensor", "torch.LongTensor"),
                        (fl.float64, torch.float64), ("torch.BoolTensor", "torch.BoolTensor")):
        got, want = x.type(spec), t.type(tspec)
        assert got.type() == want.type()
    assert x.type(fl.float32) is x and t.type(torch.float32) is t
    assert x.type(fl.FloatTensor) is x and x.type("torch.FloatTensor") is x
    assert x.type("flambeau.DoubleTensor").dtype is fl.float64
    assert x.type(fl.float64, non_blocking=True).dtype is fl.float64
    for bad in ("torch.FooTensor", "torch.cuda.cuda.FloatTensor", "numpy.FloatTensor"):
        with pytest.raises(ValueError, match="invalid type"):
            x.type(bad)
    with pytest.raises(ValueError, match="invalid type"):
        t.type("torch.FooTensor")


def test_type_names_of_other_dtypes():
    for d, td in ((fl.bfloat16, torch.bfloat16), (fl.complex64, torch.complex64), (fl.bool, torch.bool),
                  (fl.uint8, torch.uint8), (fl.int8, torch.int8)):
        assert fl.zeros(1, dtype=d).type() == torch.zeros(1, dtype=td).type()


def test_cuda_types_under_the_simulator():
    import subprocess
    import sys

    code = ("import flambeau as fl; x = fl.cuda.FloatTensor(2, 3); assert x.is_cuda and x.shape == (2, 3); "
            "assert x.type() == 'torch.cuda.FloatTensor' and isinstance(x, fl.cuda.FloatTensor); "
            "assert not isinstance(x, fl.FloatTensor); y = fl.zeros(2).type('torch.cuda.LongTensor'); "
            "assert y.is_cuda and y.dtype is fl.int64; z = y.type(fl.DoubleTensor); "
            "assert not z.is_cuda and z.dtype is fl.float64; "
            "assert fl.cuda.LongTensor([1, 2]).cpu().tolist() == [1, 2]")
    import os

    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
