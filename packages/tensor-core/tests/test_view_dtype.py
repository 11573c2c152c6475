"""Tensor.view(dtype) against torch: reinterpreted bytes, shapes, strides, shared storage, errors."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")


def _both(values, dtype):
    t = torch.tensor(values, dtype=getattr(torch, dtype))
    return fl.tensor(t.float().numpy() if dtype == "bfloat16" else t.numpy(), dtype=getattr(fl, dtype)), t


def _bytes(x) -> bytes:
    return x.contiguous().view(fl.uint8).numpy().tobytes() if isinstance(x, fl.Tensor) else \
        x.contiguous().view(torch.uint8).numpy().tobytes()


CASES = [  # (source dtype, target dtype, how to take the source tensor)
    ("float32", "int32", lambda x: x), ("float32", "int16", lambda x: x), ("float32", "uint8", lambda x: x[1:]),
    ("int16", "int32", lambda x: x[:, :2]), ("float64", "float32", lambda x: x.t().contiguous()),
    ("float32", "complex64", lambda x: x), ("bfloat16", "int16", lambda x: x), ("float16", "bfloat16", lambda x: x),
    ("float32", "float32", lambda x: x.t()), ("int8", "uint8", lambda x: x[::2]),
]


@pytest.mark.parametrize("src, dst, take", CASES, ids=[f"{a}-{b}" for a, b, _ in CASES])
def test_view_dtype_matches_torch(src, dst, take):
    values = np.arange(1, 25, dtype=np.float64).reshape(4, 6) % 7 - 3
    ours, theirs = _both(values.tolist(), src)
    o, t = take(ours).view(getattr(fl, dst)), take(theirs).view(getattr(torch, dst))
    assert tuple(o.shape) == tuple(t.shape) and o.stride() == t.stride()
    assert o.storage_offset() == t.storage_offset() and o.dtype is getattr(fl, dst)
    assert _bytes(o) == _bytes(t)
    assert not o.requires_grad


def test_view_dtype_shares_storage_both_ways():
    x = fl.zeros(4)
    y = x.view(fl.int32)
    y[1] = 1065353216  # the bits of 1.0f
    assert x[1].item() == 1.0
    x[2] = 2.0
    assert y[2].item() == 1073741824
    z = y.view(fl.int16)[:, None][3:5]  # views of the view keep its dtype and address its bytes
    assert z.dtype is fl.int16 and z.shape == (2, 1)
    assert fl.view_as_real(fl.zeros(2, dtype=fl.complex64)).as_strided((2,), (2,)).dtype is fl.float32


def test_view_dtype_of_a_tensor_requiring_grad_is_not_differentiable():
    w = fl.ones(3, requires_grad=True)
    assert not w.view(fl.int32).requires_grad and not w.view(dtype=fl.float32).requires_grad


@pytest.mark.parametrize("make, dtype", [
    (lambda L: L.tensor(1.0), "int16"),
    (lambda L: L.ones(2, 3).t(), "int16"),
    (lambda L: L.ones(3, dtype=L.int16), "int32"),
    (lambda L: L.ones(4, dtype=L.int16)[1:3], "int32"),
    (lambda L: L.ones(4, 3, dtype=L.int16).as_strided((2, 2), (3, 1)), "int32"),
    (lambda L: L.ones(3), "complex64"),
], ids=["0-dim", "stride(-1)", "size(-1)", "offset", "stride(0)", "complex"])
def test_view_dtype_errors_as_torch(make, dtype):
    with pytest.raises(RuntimeError) as theirs:
        make(torch).view(getattr(torch, dtype))
    with pytest.raises(RuntimeError) as ours:
        make(fl).view(getattr(fl, dtype))
    assert str(ours.value) == str(theirs.value)
