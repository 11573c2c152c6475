"""F.interpolate's ``"bicubic"`` and ``"area"`` modes (``flambeau/nn/_functional/resample.py``) against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(12)
TOL = {np.float32: dict(rtol=1e-5, atol=5e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}

SIZES = [dict(size=(7, 9)), dict(size=(3, 2)), dict(scale_factor=2.5), dict(scale_factor=(0.5, 1.7)),
         dict(scale_factor=1.5, recompute_scale_factor=True), dict(size=(1, 1)), dict(size=5)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", SIZES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_values_and_gradient(dtype, kw, align_corners):
    a = RNG.standard_normal((2, 3, 5, 6)).astype(dtype)
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    y = F.interpolate(x, mode="bicubic", align_corners=align_corners, **kw)
    ty = TF.interpolate(tx, mode="bicubic", align_corners=align_corners, **kw)
    assert y.dtype == x.dtype and tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **TOL[dtype])
    g = RNG.standard_normal(tuple(ty.shape)).astype(dtype)
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,kw", [((2, 3, 11), dict(size=4)), ((2, 3, 11), dict(scale_factor=0.4)),
                                      ((2, 3, 7, 9), dict(size=(3, 4))), ((2, 3, 7, 9), dict(scale_factor=(0.5, 2))),
                                      ((1, 7, 9), dict(size=5))], ids=str)
def test_area_values_and_gradient(dtype, shape, kw):
    a = RNG.standard_normal(shape).astype(dtype)
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    y, ty = F.interpolate(x, mode="area", **kw), TF.interpolate(tx, mode="area", **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **TOL[dtype])
    g = RNG.standard_normal(tuple(ty.shape)).astype(dtype)
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **TOL[dtype])


def test_upsample_module_bicubic_and_double_backward():
    a = RNG.standard_normal((1, 2, 4, 5))
    ours, theirs = nn.Upsample(scale_factor=2, mode="bicubic"), torch.nn.Upsample(scale_factor=2, mode="bicubic")
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(ours(fl.from_numpy(a)).numpy(), theirs(torch.from_numpy(a)).numpy(), rtol=1e-12,
                               atol=1e-13)
    x = fl.from_numpy(RNG.standard_normal((1, 1, 3, 4))).requires_grad_(True)
    assert gradgradcheck(lambda t: F.interpolate(t, size=(5, 3), mode="bicubic") ** 2, (x,))


def test_errors():
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        F.interpolate(fl.zeros(1, 2, 4), scale_factor=2, mode="area", align_corners=True)
    with pytest.raises(NotImplementedError, match=r"Only 3D, 4D and 5D input Tensors supported \(got 3D\)"):
        F.interpolate(fl.zeros(1, 2, 4), scale_factor=2, mode="bicubic")
    with pytest.raises(NotImplementedError, match="not implemented for"):
        F.interpolate(fl.zeros(1, 2, 4, 4, dtype=fl.int64), size=2, mode="bicubic")
