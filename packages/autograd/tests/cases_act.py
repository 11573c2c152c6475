"""Gradcheck cases of the activation operators (``_ops/activation.py``), merged into test_derivatives.CASES.

Inputs avoid the kinks (|x| near 0, the hardtanh bounds, +-3 for the hard functions, the shrink
thresholds), where finite differences and the subgradient disagree.
"""

from __future__ import annotations

import numpy as np

import flambeau as fl

_RNG = np.random.default_rng(4321)


def _away(shape, kinks=(0.0,), low=-4.0, high=4.0, margin=0.05):
    """float64 values in [low, high] at least ``margin`` away from every kink."""
    v = _RNG.uniform(low, high, size=shape)
    for k in kinks:
        close = np.abs(v - k) < margin
        v[close] = k + np.where(v[close] >= k, margin, -margin) * 2
    return fl.tensor(v, dtype=fl.float64, requires_grad=True)


def _nc(shape, kinks=(0.0,)):
    base = _away(tuple(reversed(shape)), kinks).detach()
    return base.permute(*reversed(range(len(shape)))).requires_grad_(True)


CASES: dict = {
    "leaky_relu": (lambda x: fl.leaky_relu(x, 0.2), (_away((3, 4)),)),
    "leaky_relu#default": (lambda x: fl.leaky_relu(x), (_nc((3, 2)),)),
    "elu": (lambda x: fl.elu(x, 1.3), (_away((3, 4)),)),
    "elu#scales": (lambda x: fl.elu(x, 0.7, 1.5, 0.5), (_nc((2, 3)),)),
    "selu": (lambda x: fl.selu(x), (_away((5,)),)),
    "celu": (lambda x: fl.celu(x, 0.6), (_away((2, 3)),)),
    "hardtanh": (lambda x: fl.hardtanh(x, -1.5, 2.0), (_away((4, 3), kinks=(-1.5, 2.0)),)),
    "hardtanh_backward": (lambda g, x: fl.hardtanh_backward(g, x, -1.5, 2.0),
                          (_away((4, 3)), _away((4, 3), kinks=(-1.5, 2.0)))),
    "gelu_backward": (lambda g, x: fl.gelu_backward(g, x), (_away((3, 4)), _away((3, 4), low=-6, high=6))),
    "gelu_backward#tanh": (lambda g, x: fl.gelu_backward(g, x, approximate="tanh"),
                           (_away((4, 3)), _nc((4, 3)))),
    "silu_backward": (lambda g, x: fl.silu_backward(g, x), (_away((3, 4)), _nc((3, 4)))),
    "mish_backward": (lambda g, x: fl.mish_backward(g, x), (_away((3, 4)), _away((3, 4), low=-6, high=6))),
    "hardswish_backward": (lambda g, x: fl.hardswish_backward(g, x), (_away((4, 4)), _away((4, 4), kinks=(-3.0, 3.0)))),
    "hardsigmoid_backward": (lambda g, x: fl.hardsigmoid_backward(g, x),
                             (_away((4, 4)), _away((4, 4), kinks=(-3.0, 3.0)))),
    "leaky_relu_backward": (lambda g, x: fl.leaky_relu_backward(g, x, 0.2, False), (_away((3, 4)), _nc((3, 4)))),
    "elu_backward": (lambda g, x: fl.elu_backward(g, 1.3, 0.8, 0.6, False, x), (_away((3, 4)), _nc((3, 4)))),
    "elu_backward#result": (lambda g, y: fl.elu_backward(g, 1.3, 0.8, 0.6, True, y),
                            (_away((3, 4)), _away((3, 4), low=-1.0, high=4.0))),
    "mish": (lambda x: fl.mish(x), (_away((3, 3)),)),
    "hardswish": (lambda x: fl.hardswish(x), (_away((4, 4), kinks=(-3.0, 3.0)),)),
    "hardsigmoid": (lambda x: fl.hardsigmoid(x), (_away((4, 4), kinks=(-3.0, 3.0)),)),
    "log_sigmoid": (lambda x: fl.log_sigmoid(x), (_away((6,), low=-30, high=30),)),
    "threshold": (lambda x: fl.threshold(x, 0.5, -2.0), (_away((3, 3), kinks=(0.5,)),)),
    "hardshrink": (lambda x: fl.hardshrink(x, 0.5), (_away((3, 3), kinks=(-0.5, 0.5)),)),
    "softshrink": (lambda x: fl.softshrink(x, 0.5), (_away((3, 3), kinks=(-0.5, 0.5)),)),
    "prelu": (lambda x, w: fl.prelu(x, w), (_away((2, 3, 4)), fl.tensor([0.1, 0.25, -0.3], dtype=fl.float64,
                                                                           requires_grad=True))),
    "prelu#shared": (lambda x, w: fl.prelu(x, w), (_away((3, 4)), fl.tensor([0.2], dtype=fl.float64,
                                                                           requires_grad=True))),
    "prelu#2d": (lambda x, w: fl.prelu(x, w), (_away((5, 3)), fl.tensor([0.1, 0.5, 0.9], dtype=fl.float64,
                                                                       requires_grad=True))),
    "prelu#1d": (lambda x, w: fl.prelu(x, w), (_away((5,)), fl.tensor([0.3], dtype=fl.float64,
                                                                   requires_grad=True))),
}
