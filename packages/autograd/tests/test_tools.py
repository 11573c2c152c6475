"""detect_anomaly, saved_tensors_hooks, inference_mode and autograd.functional."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flambeau as fl
from flambeau.autograd import Function
from flambeau.autograd import functional as F


def leaf(values):
    return fl.tensor(values, dtype=fl.float64, requires_grad=True)


class NanBackward(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * float("nan")


def make_nan_graph(x):
    return NanBackward.apply(x)  # the forward call anomaly mode must point at


def test_detect_anomaly_names_the_forward_operation():
    x = leaf([1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fl.autograd.detect_anomaly():
            y = make_nan_graph(x)
            with pytest.raises(RuntimeError, match=r"(?s)NanBackwardBackward.*returned nan.*make_nan_graph"):
                y.sum().backward()
    assert not fl.autograd.is_anomaly_enabled()


def test_without_anomaly_mode_nan_passes_silently():
    x = leaf([1.0])
    make_nan_graph(x).sum().backward()
    assert np.isnan(x.grad.numpy()).all()


def test_saved_tensors_hooks_pack_and_unpack():
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t.detach().clone()

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t

    x = leaf([1.0, 2.0])
    with fl.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x * x).sum()
    y.backward()
    assert packed and len(unpacked) == len(packed)
    assert x.grad.tolist() == [2.0, 4.0]


def test_inference_mode_disables_recording():
    x = leaf([1.0])
    with fl.autograd.inference_mode():
        assert fl.autograd.is_inference_mode_enabled()
        y = x * 2
    assert not y.requires_grad and fl.is_grad_enabled()


def test_functional_jacobian_hessian_vjp_jvp():
    x = fl.tensor([1.0, 2.0], dtype=fl.float64)

    def f(t):
        return t * t * t

    np.testing.assert_allclose(F.jacobian(f, x).numpy(), np.diag([3.0, 12.0]))
    _, jv = F.jvp(f, x, fl.tensor([1.0, 1.0], dtype=fl.float64))
    np.testing.assert_allclose(jv.numpy(), [3.0, 12.0])
    _, vj = F.vjp(f, x, fl.tensor([1.0, 2.0], dtype=fl.float64))
    np.testing.assert_allclose(vj.numpy(), [3.0, 24.0])
    h = F.hessian(lambda t: (t * t * t).sum(), x)
    np.testing.assert_allclose(h.numpy(), np.diag([6.0, 12.0]))
    _, hv = F.hvp(lambda t: (t * t * t).sum(), x, fl.tensor([1.0, 0.0], dtype=fl.float64))
    np.testing.assert_allclose(hv.numpy(), [6.0, 0.0])
