"""MaxPool3d / AvgPool3d / MaxUnpool1d-3d (``flambeau/nn/modules/pooling.py``) and their functional forms
against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(9)

GEOMETRIES = [
    ((2, 3, 7, 8, 9), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 7, 8, 9), dict(kernel_size=(2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0), ceil_mode=True)),
    ((3, 5, 6, 7), dict(kernel_size=2, ceil_mode=True)),  # unbatched
    ((1, 2, 5, 5, 5), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 6, 6, 5), dict(kernel_size=(3, 2, 2), stride=(2, 3, 1))),
]


def values(shape):
    # rounded to one decimal: many ties, so the choice among equal maxima is tested too
    return RNG.standard_normal(shape).round(1)


@pytest.mark.parametrize("shape,kw", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dilation", [1, (2, 1, 2)])
def test_max_pool3d_values_indices_gradient(shape, kw, dilation):
    a = values(shape)
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    ours, theirs = nn.MaxPool3d(dilation=dilation, return_indices=True, **kw), \
        torch.nn.MaxPool3d(dilation=dilation, return_indices=True, **kw)
    assert repr(ours) == repr(theirs)
    (y, i), (ty, ti) = ours(x), theirs(tx)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    assert i.dtype == fl.int64
    g = RNG.standard_normal(tuple(ty.shape))
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14, atol=1e-14)
    np.testing.assert_array_equal(F.max_pool3d(fl.from_numpy(a), dilation=dilation, **kw).numpy(),
                                  ty.detach().numpy())


@pytest.mark.parametrize("shape,kw", GEOMETRIES, ids=str)
@pytest.mark.parametrize("options", [{}, dict(count_include_pad=False), dict(divisor_override=5)], ids=str)
def test_avg_pool3d_values_and_gradient(shape, kw, options):
    a = RNG.standard_normal(shape)
    ours, theirs = nn.AvgPool3d(**kw, **options), torch.nn.AvgPool3d(**kw, **options)
    assert repr(ours) == repr(theirs)
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    y, ty = ours(x), theirs(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-13, atol=1e-14)
    g = RNG.standard_normal(tuple(ty.shape))
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13, atol=1e-14)


def test_float32_and_double_backward():
    a = RNG.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    for ours, theirs in ((F.max_pool3d, TF.max_pool3d), (F.avg_pool3d, TF.avg_pool3d)):
        y = ours(fl.from_numpy(a), 3, 2, 1)
        assert y.dtype == fl.float32
        np.testing.assert_allclose(y.numpy(), theirs(torch.from_numpy(a), 3, 2, 1).numpy(), rtol=1e-6, atol=1e-6)
    x = fl.from_numpy(RNG.standard_normal((1, 2, 3, 4, 4))).requires_grad_(True)
    assert gradgradcheck(lambda t: F.avg_pool3d(t, 2, (1, 2, 1), 1, count_include_pad=False) ** 2, (x,))
    assert gradgradcheck(lambda t: F.max_pool3d(t, 2, (1, 2, 1), 1) ** 2, (x,))


# geometries whose unpooled size is the pooled input's (the indices are flat positions in it)
@pytest.mark.parametrize("n,shape,kw", [
    (1, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
    (1, (3, 8), dict(kernel_size=2)),
    (2, (2, 3, 8, 9), dict(kernel_size=(2, 3), stride=(2, 3))),
    (2, (2, 3, 7, 8), dict(kernel_size=(3, 4), stride=(2, 2), padding=(1, 1))),
    (2, (3, 6, 6), dict(kernel_size=2)),
    (3, (2, 3, 4, 6, 8), dict(kernel_size=2, stride=2)),
    (3, (2, 4, 6, 4), dict(kernel_size=(2, 1, 2))),
], ids=str)
def test_max_unpool_inverts_max_pool_like_torch(n, shape, kw):
    pool, tpool = getattr(F, f"max_pool{n}d"), getattr(TF, f"max_pool{n}d")
    a = values(shape)
    y, i = pool(fl.from_numpy(a), return_indices=True, **kw)
    ty, ti = tpool(torch.from_numpy(a), return_indices=True, **kw)
    ours = getattr(nn, f"MaxUnpool{n}d")(**kw)
    theirs = getattr(torch.nn, f"MaxUnpool{n}d")(**kw)
    assert repr(ours) == repr(theirs)
    yg, tyg = y.detach().requires_grad_(True), ty.detach().requires_grad_(True)
    u, tu = ours(yg, i), theirs(tyg, ti)
    np.testing.assert_array_equal(u.detach().numpy(), tu.detach().numpy())
    g = RNG.standard_normal(tuple(tu.shape))
    u.backward(fl.from_numpy(g))
    tu.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(yg.grad.numpy(), tyg.grad.numpy())
    # an explicit output size, with and without the leading dimensions
    stride = kw.get("stride", kw["kernel_size"])
    stride = stride if isinstance(stride, tuple) else (stride,) * n
    size = [s + st - 1 for s, st in zip(tu.shape[-n:], stride)]  # the largest valid size
    for out_size in (size, list(tu.shape[:-n]) + size) if len(shape) == n + 2 else (size,):
        np.testing.assert_array_equal(ours(y, i, out_size).numpy(), theirs(ty, ti, out_size).numpy())


def errors(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares whatever torch raises
        return type(e), str(e)
    return None


def idx(t, shape, value=0, dtype=None):
    return t.zeros(shape, dtype=dtype or t.int64) + value


@pytest.mark.parametrize("call", [
    lambda F, t: F.max_pool3d(t.zeros(2, 4, 4), 2),
    lambda F, t: F.max_pool3d(t.zeros(1, 2, 4, 4, 4), 2, padding=2),
    lambda F, t: F.max_pool3d(t.zeros(1, 2, 4, 4, 4), 2, stride=0),
    lambda F, t: F.max_pool3d(t.zeros(1, 2, 1, 4, 4), 2),
    lambda F, t: F.max_pool3d(t.zeros(1, 2, 4, 4, 4), (2, 2)),
    lambda F, t: F.max_pool3d(t.zeros(1, 2, 4, 4, 4), 2, (2, 2)),
    lambda F, t: F.max_pool3d(t.zeros(1, 2, 4, 4, 4), 2, 2, 0, (1, 1)),
    lambda F, t: F.max_pool3d(t.zeros(1, 2, 4, 4, 4), 2, dilation=0),
    lambda F, t: F.avg_pool3d(t.zeros(1, 2, 4, 4, 4), 2, padding=2),
    lambda F, t: F.avg_pool3d(t.zeros(2, 4, 4), 2),
    lambda F, t: F.avg_pool3d(t.zeros(1, 2, 1, 4, 4), 2),
    lambda F, t: F.avg_pool3d(t.zeros(1, 2, 4, 4, 4), 2, divisor_override=0),
    lambda F, t: F.avg_pool3d(t.zeros(1, 2, 4, 4, 4), (2, 2)),
    lambda F, t: F.max_unpool2d(t.zeros(1, 2, 2, 2), idx(t, (1, 2, 2, 2), 20), 2),
    lambda F, t: F.max_unpool2d(t.zeros(1, 2, 2, 2), idx(t, (1, 2, 2, 2), -1), 2),
    lambda F, t: F.max_unpool2d(t.zeros(1, 2, 2, 2), idx(t, (1, 2, 2, 2), dtype=t.int32), 2),
    lambda F, t: F.max_unpool2d(t.zeros(1, 2, 2, 2), idx(t, (1, 2, 2, 3)), 2),
    lambda F, t: F.max_unpool2d(t.zeros(1, 2, 2, 2), idx(t, (1, 2, 2, 2)), 2, output_size=(7, 7)),
    lambda F, t: F.max_unpool2d(t.zeros(1, 2, 2, 2), idx(t, (1, 2, 2, 2)), 2, output_size=(1, 5, 5)),
    lambda F, t: F.max_unpool2d(t.zeros(2, 2), idx(t, (2, 2)), 2),
    lambda F, t: F.max_unpool1d(t.zeros(2, 2, 3), idx(t, (2, 2, 3), 6), 2),
    lambda F, t: F.max_unpool3d(t.zeros(1, 2, 2, 2, 2), idx(t, (1, 2, 2, 2, 2), 64), 2),
], ids=range(22))
def test_errors_match_torch(call):
    ours, theirs = errors(lambda: call(F, fl)), errors(lambda: call(TF, torch))
    assert theirs is not None and ours == theirs
