"""CUDA kernels of the activation operators and of the elementwise operators with parameters or a third
operand (the ternary template of ``_kernels/cuda/elementwise.py``), beyond the declared samples:
strided and broadcast operands, in-place forms through views, float16, special values, backward through
autograd against the CPU, no host synchronisation, errors before any launch.

Sizes are tiny: the simulator runs every CUDA thread in Python.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn.functional as F
from flambeau.cuda import host_sync_count

RNG = np.random.default_rng(7)


def _pair(shape, dtype=fl.float32, low=-4.0, high=4.0):
    c = fl.tensor(RNG.uniform(low, high, shape).astype(dtype.np))
    return c, c.to("cuda")


def _check(got, want, rtol=1e-5, atol=1e-6):
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    g, w = got.cpu().numpy(), want.detach().numpy()
    if want.dtype.is_floating_point:
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


# (name, call) of the activations with parameters: each is checked transposed, sliced and in float16
ACTIVATIONS = [
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2)), ("elu", lambda x: fl.elu(x, 0.5, 1.5, 2.0)),
    ("selu", fl.selu), ("celu", lambda x: fl.celu(x, 0.7)), ("hardtanh", lambda x: fl.hardtanh(x, -2.0, 1.5)),
    ("mish", fl.mish), ("hardswish", fl.hardswish), ("hardsigmoid", fl.hardsigmoid), ("log_sigmoid", fl.log_sigmoid),
    ("threshold", lambda x: fl.threshold(x, 0.5, -3.0)), ("hardshrink", lambda x: fl.hardshrink(x, 1.0)),
    ("softshrink", lambda x: fl.softshrink(x, 1.0)), ("gelu", F.gelu), ("gelu_tanh", lambda x: F.gelu(x, "tanh")),
    ("softplus", lambda x: F.softplus(x, 2.0, 3.0)), ("silu", F.silu), ("logit", lambda x: fl.logit(x.sigmoid(), 0.1)),
    ("round", lambda x: fl.round(x, decimals=1)), ("frac", fl.frac), ("erfinv", lambda x: fl.erfinv(x / 5)),
]


@pytest.mark.parametrize("name, fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_strided_and_half(name, fn):
    c, g = _pair((4, 6))
    _check(fn(g.T), fn(c.T), rtol=1e-5, atol=1e-5)
    _check(fn(g[1:, ::2]), fn(c[1:, ::2]), rtol=1e-5, atol=1e-5)
    h = c[:2].to(fl.float16)
    _check(fn(h.cuda()), fn(h), rtol=2e-3, atol=2e-3)  # float16 computes in float32 on CUDA


def test_special_values():
    x = fl.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 3.0, -3.0, 25.0, -25.0])
    g = x.cuda()
    for fn in (F.gelu, F.silu, fl.mish, fl.hardswish, fl.hardsigmoid, fl.log_sigmoid, fl.selu, F.leaky_relu,
               fl.hardtanh, fl.floor, fl.ceil, fl.trunc, fl.round, fl.sgn, lambda t: fl.nan_to_num(t),
               lambda t: fl.nan_to_num(t, 1.0, 2.0, -2.0), lambda t: fl.clamp(t, -1, 1)):
        _check(fn(g), fn(x))
    big = fl.tensor([2.0 ** 60, -(2.0 ** 60), 4503599627370495.5, 0.5, 1.5, 2.5, -2.5], dtype=fl.float64)
    for fn in (fl.floor, fl.ceil, fl.trunc, fl.round, fl.frac):
        _check(fn(big.cuda()), fn(big))


def test_backward_kernels_one_launch_match_cpu():
    cg, gg = _pair((3, 5))
    cx, gx = _pair((5, 3))
    _check(fl.gelu_backward(gg, gx.T), fl.gelu_backward(cg, cx.T))
    _check(fl.gelu_backward(gg, gx.T, approximate="tanh"), fl.gelu_backward(cg, cx.T, approximate="tanh"))
    for fn in (fl.silu_backward, fl.mish_backward, fl.hardswish_backward):
        _check(fn(gg, gx.T), fn(cg, cx.T))
    _check(fl.hardtanh_backward(gg, gx.T, 0.0, 6.0), fl.hardtanh_backward(cg, cx.T, 0.0, 6.0))


def test_ternary_broadcast_and_strided():
    ca, ga = _pair((3, 4))
    cb, gb = _pair((4, 3))
    cw, gw = _pair((4,), low=0.0, high=1.0)
    cond = ca > 0
    _check(fl.where(cond.cuda(), ga, gb.T), fl.where(cond, ca, cb.T))
    _check(fl.where(cond.cuda()[:, :1], 2.5, gb.T), fl.where(cond[:, :1], 2.5, cb.T))
    _check(fl.where(cond.cuda(), ga.to(fl.int32), gb.T), fl.where(cond, ca.to(fl.int32), cb.T))  # promotion
    _check(fl.lerp(ga, gb.T, gw), fl.lerp(ca, cb.T, cw))
    _check(fl.addcmul(ga, gb.T, gw, value=-2), fl.addcmul(ca, cb.T, cw, value=-2))
    _check(fl.addcdiv(ga[:, :1], gb.T, gw + 2, value=0.5), fl.addcdiv(ca[:, :1], cb.T, cw + 2, value=0.5))
    _check(fl.clamp(ga, gb.T, gw + 1), fl.clamp(ca, cb.T, cw + 1))
    _check(fl.clamp(ga, max=gw), fl.clamp(ca, max=cw))
    ci, gi = fl.tensor([[5, -7, 2]], dtype=fl.int16), fl.tensor([[5, -7, 2]], dtype=fl.int16).cuda()
    _check(fl.clamp(gi, -3, 3), fl.clamp(ci, -3, 3))
    _check(fl.addcmul(gi, gi, gi, value=2), fl.addcmul(ci, ci, ci, value=2))
    _check(fl.isclose(ga, ga + 1e-6), fl.isclose(ca, ca + 1e-6))
    _check(fl.isclose(gi, gi.T), fl.isclose(ci, ci.T))
    nan = fl.tensor([float("nan"), 1.0, float("inf")])
    _check(fl.isclose(nan.cuda(), nan.cuda(), equal_nan=True), fl.isclose(nan, nan, equal_nan=True))
    assert fl.allclose(ga, ga.clone())


def test_inplace_through_views():
    c, g = _pair((4, 6))
    for fn in (lambda t: t.clamp_(-1, 1), lambda t: F.leaky_relu_(t, 0.3), F.elu_,
               lambda t: F.hardtanh_(t, -0.5, 0.5), lambda t: t.round_(decimals=1), lambda t: t.nan_to_num_(),
               lambda t: t.lerp_(t * 2, 0.7), lambda t: t.addcmul_(t, t, value=0.5), lambda t: F.threshold_(t, 0, 1)):
        fn(c[:, ::2])
        v = g._version
        fn(g[:, ::2])
        assert g._version > v
        _check(g, c)
        fn(c.T[1:])
        fn(g.T[1:])
        _check(g, c)


def test_prelu_channels():
    cx, gx = _pair((2, 3, 4))
    cw, gw = _pair((3,))
    _check(fl.prelu(gx.transpose(1, 2).transpose(1, 2), gw), fl.prelu(cx, cw))
    _check(fl.prelu(gx[:, :, ::2], gw), fl.prelu(cx[:, :, ::2], cw))
    _check(fl.prelu(fl.tensor(-2.0).cuda(), gw[:1]), fl.prelu(fl.tensor(-2.0), cw[:1]))


BACKWARD = [
    ("gelu", F.gelu), ("gelu_tanh", lambda x: F.gelu(x, "tanh")), ("silu", F.silu), ("mish", fl.mish),
    ("hardswish", fl.hardswish), ("relu", fl.relu), ("relu6", lambda x: fl.hardtanh(x, 0.0, 6.0)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.1)), ("elu", fl.elu), ("softplus", F.softplus),
    ("hardsigmoid", fl.hardsigmoid), ("log_sigmoid", fl.log_sigmoid), ("clamp", lambda x: x.clamp(-1, 1)),
    ("where", lambda x: fl.where(x > 0, x * 2, x)), ("lerp", lambda x: fl.lerp(x, x * x, 0.3)),
    ("addcdiv", lambda x: fl.addcdiv(x, x, x * x + 1, value=0.5)),
]


@pytest.mark.parametrize("name, fn", BACKWARD, ids=[b[0] for b in BACKWARD])
def test_backward_matches_cpu(name, fn):
    h = RNG.uniform(-4, 4, (3, 4)).astype(np.float32)
    h[np.abs(np.abs(h) - 3) < 0.05] = 1.0  # away from the kinks
    c = fl.tensor(h, requires_grad=True)
    g = fl.tensor(h).cuda().requires_grad_(True)
    fn(c).backward(fl.ones(3, 4))
    fn(g).backward(fl.ones(3, 4, device="cuda"))
    _check(g.grad, c.grad, rtol=1e-5, atol=1e-5)


def test_no_host_synchronisation():
    _, g = _pair((3, 4))
    w = fl.ones(4, device="cuda")
    n0 = host_sync_count()
    y = F.gelu(fl.where(g > 0, g, fl.clamp(g, -1)).lerp(w, 0.5))
    y = fl.addcmul(fl.mish(y), y, w, value=2).round(decimals=2)
    fl.gelu_backward(y, g)
    fl.isclose(y, g)
    assert host_sync_count() == n0


def test_errors_before_launch():
    _, g = _pair((3, 4))
    c, _ = _pair((3, 4))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        fl.gelu_backward(c, g)
    with pytest.raises(RuntimeError, match="same device"):
        fl.where(g > 0, g, c)
    with pytest.raises(RuntimeError, match="does not match"):
        fl.silu_backward(g[:2], g)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.leaky_relu(fl.ones(3, dtype=fl.int64, device="cuda"))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        g[:1].clamp_(g, g)
    with pytest.raises(NotImplementedError, match="not implemented for 'Half'"):
        fl.bitwise_left_shift(fl.ones(2, dtype=fl.float16, device="cuda"), 1)
    with pytest.raises(RuntimeError, match="\"lerp_cuda\" not implemented for 'Long'"):  # the kernel's own check
        fl._OPS["lerp"].kernel("cuda")(g._data, g._data, 0.5, fl.int64)
