"""Fold / Unfold (``flambeau/nn/modules/fold.py``) and F.fold / F.unfold against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(2)

GEOMETRIES = [dict(kernel_size=3), dict(kernel_size=(2, 3), stride=2, padding=1, dilation=(2, 1)),
              dict(kernel_size=(1, 4), stride=(3, 1), padding=(0, 2)), dict(kernel_size=2, dilation=3, padding=2)]


@pytest.mark.parametrize("kw", GEOMETRIES, ids=str)
@pytest.mark.parametrize("batched", [True, False])
def test_unfold_module_values_and_gradient(kw, batched):
    shape = (2, 3, 7, 8) if batched else (3, 7, 8)
    a = RNG.standard_normal(shape)
    ours, theirs = nn.Unfold(**kw), torch.nn.Unfold(**kw)
    assert repr(ours) == repr(theirs)
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    y, ty = ours(x), theirs(tx)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    g = RNG.standard_normal(tuple(ty.shape))
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("kw", GEOMETRIES, ids=str)
@pytest.mark.parametrize("batched", [True, False])
def test_fold_module_values_and_gradient(kw, batched):
    cols = tuple(torch.nn.functional.unfold(torch.zeros(1, 3, 7, 8), **kw).shape[1:])
    shape = (2, *cols) if batched else cols
    a = RNG.standard_normal(shape)
    ours, theirs = nn.Fold((7, 8), **kw), torch.nn.Fold((7, 8), **kw)
    assert repr(ours) == repr(theirs)
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    y, ty = ours(x), theirs(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-13, atol=1e-13)
    g = RNG.standard_normal(tuple(ty.shape))
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13, atol=1e-13)


def test_float32_and_double_backward():
    a = RNG.standard_normal((2, 2, 5, 6)).astype(np.float32)
    y = F.unfold(fl.from_numpy(a), 3, padding=1, stride=2)
    assert y.dtype == fl.float32
    np.testing.assert_array_equal(y.numpy(), torch.nn.functional.unfold(torch.from_numpy(a), 3, padding=1,
                                                                         stride=2).numpy())
    x = fl.from_numpy(RNG.standard_normal((1, 2, 4, 5))).requires_grad_(True)
    assert gradgradcheck(lambda t: F.unfold(t, 2, padding=1, stride=(1, 2)) ** 2, (x,))
    c = fl.from_numpy(RNG.standard_normal((1, 8, 15))).requires_grad_(True)
    assert gradgradcheck(lambda t: F.fold(t, (4, 5), 2, padding=1, stride=(1, 2)) ** 2, (c,))


def test_fold_is_the_adjoint_of_unfold():
    # <unfold(x), c> == <x, fold(c)> for every x and c
    x = RNG.standard_normal((2, 3, 6, 7))
    kw = dict(kernel_size=(3, 2), dilation=(1, 2), padding=(1, 2), stride=(2, 1))
    cols = F.unfold(fl.from_numpy(x), **kw)
    c = RNG.standard_normal(tuple(cols.shape))
    lhs = (cols.numpy() * c).sum()
    rhs = (x * F.fold(fl.from_numpy(c), (6, 7), **kw).numpy()).sum()
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12)


def errors(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares whatever torch raises
        return type(e), str(e)
    return None


@pytest.mark.parametrize("call", [
    lambda F, t: F.unfold(t.zeros(1, 2, 3, 3), 5),
    lambda F, t: F.unfold(t.zeros(1, 2, 3, 3), 2, stride=0),
    lambda F, t: F.unfold(t.zeros(1, 2, 3, 3), 0),
    lambda F, t: F.unfold(t.zeros(1, 2, 3, 3), 2, dilation=0),
    lambda F, t: F.unfold(t.zeros(1, 2, 3, 3), 2, padding=-1),
    lambda F, t: F.unfold(t.zeros(1, 0, 3, 3), 2),
    lambda F, t: F.unfold(t.zeros(1, 2, 3, 3), (2, 2, 2)),
    lambda F, t: F.fold(t.zeros(1, 7, 4), (3, 3), 2),
    lambda F, t: F.fold(t.zeros(1, 8, 5), (3, 3), 2),
    lambda F, t: F.fold(t.zeros(1, 8, 0), (1, 1), 2),
    lambda F, t: F.fold(t.zeros(8, 4, 1, 1), (3, 3), 2),
], ids=range(11))
def test_errors_match_torch(call):
    ours, theirs = errors(lambda: call(F, fl)), errors(lambda: call(torch.nn.functional, torch))
    assert theirs is not None and ours == theirs


def test_empty_batch():
    assert F.unfold(fl.zeros(0, 2, 3, 3), 2).shape == (0, 8, 4)
    assert F.fold(fl.zeros(0, 8, 4), (3, 3), 2).shape == (0, 2, 3, 3)
