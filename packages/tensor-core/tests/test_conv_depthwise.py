"""Depthwise convolution kernels (``_kernels/cpu/conv_depthwise.py``, Note [Depthwise convolution by phase planes]).

The 3x3 kernels with one output channel per input channel take a one-pass path (nine taps unrolled); other
kernel sizes and channel multipliers take the per-tap path. Both are checked against torch: forward, input
and weight gradients, over strides, paddings, dilations, tiny and odd-sized planes, float32 and float64,
non-contiguous inputs and the transposed convolution.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {np.float32: dict(rtol=2e-4, atol=2e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}

# (input shape, kernel (KH, KW), multiplier, kwargs)
CASES = [
    ((2, 3, 9, 8), (3, 3), 1, dict(padding=1)),
    ((2, 3, 9, 8), (3, 3), 1, dict(stride=2, padding=1)),
    ((2, 3, 10, 7), (3, 3), 1, dict(stride=3, padding=2)),
    ((2, 3, 9, 8), (3, 3), 1, dict(stride=(2, 1), padding=(1, 0))),
    ((2, 3, 9, 11), (3, 3), 1, dict(stride=(1, 2), padding=(0, 2), dilation=(2, 1))),
    ((2, 3, 9, 8), (3, 3), 1, dict(dilation=2, padding=2)),
    ((2, 3, 9, 8), (3, 3), 1, {}),                                  # no padding
    ((3, 5, 1, 1), (3, 3), 1, dict(padding=1)),                     # 1x1 planes
    ((3, 6, 2, 2), (3, 3), 1, dict(padding=1)),                     # MobileNet's last stages
    ((3, 6, 4, 4), (3, 3), 1, dict(stride=2, padding=1)),
    ((2, 4, 33, 32), (3, 3), 1, dict(padding=1)),                   # wide rows
    ((2, 4, 32, 33), (3, 3), 1, dict(stride=2, padding=1)),
    ((2, 3, 9, 8), (3, 3), 2, dict(stride=2, padding=1)),           # channel multiplier: per-tap path
    ((2, 3, 9, 8), (5, 5), 1, dict(padding=2)),
    ((2, 3, 9, 8), (3, 2), 1, dict(stride=2, padding=(1, 0), dilation=(1, 2))),
    ((2, 3, 7, 9), (1, 3), 3, dict(padding=(0, 1))),
]


def _pair(rng, shape, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    return fl.from_numpy(a.copy()).requires_grad_(True), torch.from_numpy(a.copy()).requires_grad_(True)


def _close(a, ref, dtype):
    np.testing.assert_allclose(a.detach().numpy().astype(np.float64), ref.detach().numpy().astype(np.float64),
                               **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,k,mult,kw", CASES)
def test_depthwise_forward_and_grads_match_torch(rng, xs, k, mult, kw, dtype):
    C = xs[1]
    x, tx = _pair(rng, xs, dtype)
    w, tw = _pair(rng, (C * mult, 1, *k), dtype)
    out = fl.conv2d(x, w, groups=C, **kw)
    ref = F.conv2d(tx, tw, groups=C, **kw)
    _close(out, ref, dtype)
    g = rng.standard_normal(tuple(ref.shape)).astype(dtype)
    out.backward(fl.from_numpy(g))
    ref.backward(torch.from_numpy(g))
    _close(x.grad, tx.grad, dtype)
    _close(w.grad, tw.grad, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_non_contiguous_input(rng, stride, dtype):
    base = rng.standard_normal((5, 2, 10, 12)).astype(dtype)   # (C, N, W', H) -> (N, C, H, W) by a permutation
    xs = base.transpose(1, 0, 3, 2)[:, :, :, ::2]                # and a strided slice: (2, 5, 12, 5)
    x = fl.from_numpy(base.copy()).permute(1, 0, 3, 2)[:, :, :, ::2]
    tx = torch.from_numpy(np.ascontiguousarray(xs))
    w, tw = _pair(rng, (5, 1, 3, 3), dtype)
    out = fl.conv2d(x, w, stride=stride, padding=1, groups=5)
    ref = F.conv2d(tx, tw, stride=stride, padding=1, groups=5)
    _close(out, ref, dtype)
    g = rng.standard_normal(tuple(ref.shape)).astype(dtype)
    out.backward(fl.from_numpy(g))
    ref.backward(torch.from_numpy(g))
    _close(w.grad, tw.grad, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, output_padding=1), dict(padding=1), dict(dilation=2)])
def test_depthwise_transposed_matches_torch(rng, kw, dtype):
    x, tx = _pair(rng, (2, 4, 5, 6), dtype)
    w, tw = _pair(rng, (4, 1, 3, 3), dtype)
    out = fl.conv_transpose2d(x, w, groups=4, **kw)
    ref = F.conv_transpose2d(tx, tw, groups=4, **kw)
    _close(out, ref, dtype)
    g = rng.standard_normal(tuple(ref.shape)).astype(dtype)
    out.backward(fl.from_numpy(g))
    ref.backward(torch.from_numpy(g))
    _close(x.grad, tx.grad, dtype)
    _close(w.grad, tw.grad, dtype)
