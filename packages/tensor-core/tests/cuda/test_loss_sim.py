"""CUDA kernels of the losses against the CPU, beyond the operator samples.

Class weights, ``ignore_index``, label smoothing and every reduction of the fused cross-entropy and
of nll_loss on strided ``(N, C, d)`` inputs, their backward kernels through autograd, targets
checked on the device (reported at the next synchronisation), reductions that do not make the host
wait, and the element-wise losses with broadcasting and weights. Tiny sizes (simulator).
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.cuda._sync import host_sync_count

RNG = np.random.default_rng(1)


def _close(got, want, rtol=1e-5, atol=1e-6):
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)


def _leaf(h, device):
    t = fl.tensor(h)
    return (t.to(device) if device != "cpu" else t).requires_grad_()


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_class_losses_and_backward(op):
    f = getattr(fl.nn.functional, op)
    h = RNG.standard_normal((2, 2, 4))  # (N, d, C) viewed as (N, C, d): class dim strided
    t = fl.tensor(np.array([[2, -100], [0, 3]]))  # (N=2, d=2), one ignored
    w = fl.tensor(RNG.uniform(0.5, 2.0, 4))
    cases = [dict(weight=w), dict(reduction="none"), dict(reduction="sum")]
    if op == "cross_entropy":
        cases[0]["label_smoothing"] = 0.3
    for kw in cases:
        kwc = {k: (v.to("cuda") if isinstance(v, fl.Tensor) else v) for k, v in kw.items()}
        x, xc = _leaf(h, "cpu"), _leaf(h, "cuda")
        want = f(x.transpose(1, 2), t, **kw)
        n = host_sync_count()
        got = f(xc.transpose(1, 2), t.to("cuda"), **kwc)
        assert host_sync_count() == n, "a loss reduction made the host wait"
        _close(got, want, rtol=1e-10, atol=1e-12)
        want.sum().backward()
        got.sum().backward()
        _close(xc.grad, x.grad, rtol=1e-10, atol=1e-12)


def test_float32_float16_and_1d():
    h = RNG.standard_normal((3, 5)).astype(np.float32)
    t = fl.tensor(np.array([4, 0, 2], np.uint8))
    for dt, tol in ((np.float32, 1e-5), (np.float16, 2e-3)):
        x = fl.tensor(h.astype(dt))
        _close(fl.cross_entropy(x.to("cuda"), t.to("cuda")), fl.cross_entropy(x, t), rtol=tol, atol=tol)
    a, b = fl.tensor(h.astype(np.float16)), fl.tensor(h[::-1].copy().astype(np.float16))
    _close(fl.nn.functional.mse_loss(a.to("cuda"), b.to("cuda"), reduction="sum"),
           fl.nn.functional.mse_loss(a, b, reduction="sum"), rtol=2e-3, atol=2e-3)
    v = fl.tensor(h[0])
    _close(fl.cross_entropy(v.to("cuda"), fl.tensor(3).to("cuda"), label_smoothing=0.1),
           fl.cross_entropy(v, fl.tensor(3), label_smoothing=0.1))


def test_mean_with_every_target_ignored_is_nan():
    x = fl.tensor(RNG.standard_normal((2, 3))).to("cuda")
    t = fl.tensor(np.array([-100, -100])).to("cuda")
    assert np.isnan(fl.cross_entropy(x, t).item()) and np.isnan(fl.nll_loss(x, t).item())


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_bad_target_raises_at_next_sync(op):
    f = getattr(fl.nn.functional, op)
    x = fl.tensor(RNG.standard_normal((3, 5)).astype(np.float32)).to("cuda")
    n = host_sync_count()
    loss = f(x, fl.tensor(np.array([1, 9, 0])).to("cuda"))
    assert host_sync_count() == n  # the check happens on the device
    with pytest.raises(RuntimeError, match="index 9 is out of bounds for dimension with size 5"):
        loss.item()
    assert np.isfinite(f(x, fl.tensor(np.array([1, 4, 0])).to("cuda")).item())  # reported once


POINTWISE = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"]


@pytest.mark.parametrize("op", POINTWISE)
def test_pointwise_losses_broadcast_and_backward(op):
    f = getattr(fl.nn.functional, op)
    a = RNG.standard_normal((3, 4))
    b = fl.tensor(RNG.standard_normal((4,)).astype(np.float32))  # broadcast, promoted to float64
    x, xc = _leaf(a, "cpu"), _leaf(a, "cuda")
    kw = {"beta": 0.5} if op == "smooth_l1_loss" else {"delta": 0.7} if op == "huber_loss" else {}
    with pytest.warns(UserWarning, match="target size"):
        for red in ("none", "sum"):
            _close(f(xc.t(), b.to("cuda")[:, None], reduction=red, **kw), f(x.t(), b[:, None], reduction=red, **kw),
                   rtol=1e-10, atol=1e-12)
        want, got = f(x, b, **kw), f(xc, b.to("cuda"), **kw)
    _close(got, want, rtol=1e-10, atol=1e-12)
    want.backward()
    got.backward()
    _close(xc.grad, x.grad, rtol=1e-10, atol=1e-12)


def test_binary_cross_entropy_weights_and_range_check():
    p = fl.tensor(RNG.uniform(0.05, 0.95, (3, 4)))
    p[0, 0] = 0.0  # log clamped at -100
    t = fl.tensor(RNG.uniform(0, 1, (3, 4)))
    w = fl.tensor(RNG.uniform(0.5, 2, (4,)))
    pw = fl.tensor(RNG.uniform(0.5, 2, (4,)).astype(np.float32))
    F = fl.nn.functional
    for red in ("none", "mean"):
        _close(F.binary_cross_entropy(p.to("cuda"), t.to("cuda"), w.to("cuda"), reduction=red),
               F.binary_cross_entropy(p, t, w, reduction=red), rtol=1e-10, atol=1e-12)
        _close(F.binary_cross_entropy_with_logits(p.to("cuda"), t.to("cuda").float(), w.to("cuda"),
                                                  pos_weight=pw.to("cuda"), reduction=red),
               F.binary_cross_entropy_with_logits(p, t.float(), w, pos_weight=pw, reduction=red),
               rtol=1e-10, atol=1e-12)
    bad = fl.tensor(np.array([0.5, 1.5])).to("cuda")
    loss = F.binary_cross_entropy(bad, fl.tensor(np.array([0.0, 1.0])).to("cuda"))
    with pytest.raises(RuntimeError, match=r"should be between 0 and 1 \(element 1 is not\)"):
        loss.item()


def test_errors_before_launch():
    x = fl.tensor(RNG.standard_normal((2, 3))).to("cuda")
    with pytest.raises(RuntimeError, match="same device"):
        fl.cross_entropy(x, fl.tensor(np.array([0, 1])))
    with pytest.raises(RuntimeError, match="same device"):
        fl.nn.functional.mse_loss(x, fl.tensor(RNG.standard_normal((2, 3))))
    with pytest.raises(RuntimeError, match="weight tensor should be defined"):
        fl.nll_loss(x, fl.tensor(np.array([0, 1])).to("cuda"), weight=fl.ones(2).to("cuda"))
