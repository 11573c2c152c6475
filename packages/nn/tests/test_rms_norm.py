"""RMSNorm and F.rms_norm (``flambeau/nn/modules/normalization.py``, ``_functional/norm.py``) against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}
FL = {np.float32: fl.float32, np.float64: fl.float64}
TH = {np.float32: torch.float32, np.float64: torch.float64}


def close(a, b, dtype):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("normalized,shape", [(5, (3, 5)), ((4, 5), (2, 3, 4, 5)), ([6], (6,))], ids=str)
@pytest.mark.parametrize("options", [{}, {"eps": 1e-2}, {"elementwise_affine": False}], ids=str)
def test_rmsnorm_module_matches_torch(dtype, normalized, shape, options):
    theirs = torch.nn.RMSNorm(normalized, dtype=TH[dtype], **options)
    ours = nn.RMSNorm(normalized, dtype=FL[dtype], **options)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    if theirs.weight is not None:
        np.testing.assert_array_equal(ours.weight.detach().numpy(), np.ones(theirs.weight.shape))
        w = RNG.standard_normal(tuple(theirs.weight.shape)).astype(dtype)
        with torch.no_grad():
            theirs.weight.copy_(torch.from_numpy(w))
        ours.load_state_dict({"weight": fl.from_numpy(w.copy())})
    # small values make eps matter, so a wrong default eps fails
    a = (RNG.standard_normal(shape) * 1e-4).astype(dtype)
    g = RNG.standard_normal(shape).astype(dtype)
    x, tx = fl.from_numpy(a.copy()).requires_grad_(True), torch.from_numpy(a.copy()).requires_grad_(True)
    y, ty = ours(x), theirs(tx)
    assert y.dtype == FL[dtype]
    close(y, ty, dtype)
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    close(x.grad, tx.grad, dtype)
    if theirs.weight is not None:
        close(ours.weight.grad, theirs.weight.grad, dtype)


@pytest.mark.parametrize("eps", [None, 1e-6])
def test_rms_norm_functional_default_eps_and_float16(eps):
    a = (RNG.standard_normal((4, 8)) * 1e-4).astype(np.float32)
    ty = torch.nn.functional.rms_norm(torch.from_numpy(a), (8,), eps=eps)
    close(F.rms_norm(fl.from_numpy(a), (8,), eps=eps), ty, np.float32)
    h = a.astype(np.float16) * np.float16(1e3)
    w = RNG.standard_normal(8).astype(np.float16)
    ours = F.rms_norm(fl.from_numpy(h), [8], fl.from_numpy(w), eps)
    theirs = torch.nn.functional.rms_norm(torch.from_numpy(h), [8], torch.from_numpy(w), eps)
    assert ours.dtype == fl.float16
    np.testing.assert_allclose(ours.numpy().astype(np.float32), theirs.numpy().astype(np.float32), rtol=2e-3,
                               atol=2e-3)


def test_rms_norm_double_backward():
    x = fl.from_numpy(RNG.standard_normal((3, 4))).requires_grad_(True)
    w = fl.from_numpy(RNG.standard_normal(4)).requires_grad_(True)
    assert gradcheck(lambda a, b: F.rms_norm(a, 4, b, 1e-3), (x, w))
    assert gradgradcheck(lambda a, b: F.rms_norm(a, 4, b, 1e-3), (x, w))


def test_rms_norm_errors_match_torch():
    x = fl.zeros(2, 3, 4)
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[5\], expected input with shape \[\*5\], but "
                                            r"got input of size\[2, 3, 4\]"):
        F.rms_norm(x, [5])
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[3, 5\], expected input with shape \[\*3, 5\]"):
        F.rms_norm(x, (3, 5))
    with pytest.raises(RuntimeError, match=r"Expected weight to be of same shape as normalized_shape, but got weight "
                                            r"of shape \[3\] and normalized_shape = \[4\]"):
        F.rms_norm(x, [4], fl.ones(3))
    with pytest.raises(ValueError, match="Input tensor must have at least 2 dimensions, but got 1"):
        F.rms_norm(fl.zeros(4), [4, 1])
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*4\], but got input of size\[3, 5\]"):
        nn.RMSNorm(4)(fl.zeros(3, 5))
