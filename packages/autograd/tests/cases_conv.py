"""Gradcheck cases of the convolution and pooling operators, merged into test_derivatives.CASES.

Small float64 inputs covering every option: stride, padding (int, 'same' with an even kernel),
dilation, groups (grouped and depthwise), transposed convolutions with output_padding, 1-D forms,
unbatched inputs, ceil_mode, count_include_pad, divisor_override, adaptive windows that overlap,
and the backward operators themselves (their own derivatives make double backward work).
"""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau._ops import get_op

_RNG = np.random.default_rng(2024)
_bw_weight = get_op("convolution_backward_weight").fn
_max_bw = get_op("max_pool2d_backward").fn
_avg_bw = get_op("avg_pool2d_backward").fn
_adaptive_bw = get_op("adaptive_avg_pool2d_backward").fn


def t(*shape):
    return fl.tensor(_RNG.uniform(-1.0, 1.0, size=shape), dtype=fl.float64, requires_grad=True)


def nc(*shape):
    """A non-contiguous leaf (its dims reversed in memory)."""
    base = fl.tensor(_RNG.uniform(-1.0, 1.0, size=shape[::-1]), dtype=fl.float64)
    return base.permute(*reversed(range(len(shape)))).requires_grad_(True)


def distinct(*shape):
    """Well-separated values (no ties in max pooling windows, so finite differences are exact)."""
    values = _RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.1
    return fl.tensor(values, dtype=fl.float64, requires_grad=True)


def _max_indices():
    x = distinct(2, 2, 5, 4).detach()
    return fl.max_pool2d(x, 2, 1, return_indices=True)[1]


_IDX = _max_indices()

CASES = {
    "convolution": (lambda x, w, b: fl.convolution(x, w, b, [2, 1], [1, 0], [1, 2], False, [0, 0], 1),
                    (t(2, 3, 6, 7), t(4, 3, 3, 2), t(4))),
    "convolution#transposed": (lambda x, w, b: fl.convolution(x, w, b, [2, 2], [1, 0], [1, 1], True, [1, 0], 2),
                               (t(2, 4, 3, 3), t(4, 3, 3, 2), t(6))),
    "convolution_backward_weight": (
        lambda g, x: _bw_weight(g, x, [4, 3, 3, 3], [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        (t(2, 4, 5, 4), t(2, 3, 5, 4))),
    "convolution_backward_weight#transposed": (
        lambda g, x: _bw_weight(g, x, [2, 2, 3, 3], [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
        (t(2, 2, 6, 6), t(2, 2, 3, 3))),
    "conv1d": (lambda x, w, b: fl.conv1d(x, w, b, stride=2, padding=1, dilation=2), (t(2, 3, 9), t(4, 3, 3), t(4))),
    "conv1d#same": (lambda x, w: fl.conv1d(x, w, padding="same"), (t(3, 8), t(2, 3, 4))),
    "conv2d": (lambda x, w, b: fl.conv2d(x, w, b, stride=(2, 1), padding=(1, 2)),
               (nc(2, 3, 6, 5), t(4, 3, 3, 3), t(4))),
    "conv2d#dilation_groups": (lambda x, w: fl.conv2d(x, w, dilation=(2, 1), padding=1, groups=2),
                               (t(2, 4, 7, 6), t(6, 2, 3, 2))),
    "conv2d#depthwise": (lambda x, w, b: fl.conv2d(x, w, b, stride=2, padding=1, groups=3),
                         (t(2, 3, 7, 6), t(6, 1, 3, 3), t(6))),
    "conv2d#pointwise": (lambda x, w: fl.conv2d(x, w), (t(2, 4, 3, 3), t(5, 4, 1, 1))),
    "conv2d#same_unbatched": (lambda x, w: fl.conv2d(x, w, padding="same", dilation=(1, 2)),
                              (t(2, 5, 6), t(3, 2, 2, 3))),
    "conv_transpose1d": (lambda x, w, b: fl.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2),
                         (t(2, 3, 4), t(3, 2, 3), t(2))),
    "conv_transpose2d": (lambda x, w, b: fl.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=(1, 0),
                                                              dilation=(1, 2)),
                         (t(2, 3, 3, 4), t(3, 2, 3, 3), t(2))),
    "conv_transpose2d#groups": (lambda x, w: fl.conv_transpose2d(x, w, groups=2, stride=(1, 2)),
                                (t(2, 4, 3, 3), t(4, 3, 2, 2))),
    "conv_transpose2d#depthwise_unbatched": (lambda x, w: fl.conv_transpose2d(x, w, groups=3, stride=2, padding=1),
                                             (t(3, 3, 4), t(3, 1, 3, 3))),
    "max_pool2d_with_indices": (lambda x: fl.max_pool2d_with_indices(x, 3, 2, 1)[0], (distinct(2, 2, 7, 6),)),
    "max_pool2d": (lambda x: fl.max_pool2d(x, (2, 3), (2, 1), (1, 1), dilation=(2, 1), ceil_mode=True),
                   (distinct(2, 3, 7, 6),)),
    "max_pool2d#unbatched": (lambda x: fl.max_pool2d(x, 2), (distinct(2, 5, 4),)),
    "max_pool1d": (lambda x: fl.max_pool1d(x, 3, 2, 1, ceil_mode=True), (distinct(2, 3, 8),)),
    "max_pool1d_with_indices": (lambda x: fl.max_pool1d_with_indices(x, 2, dilation=2)[0], (distinct(3, 9),)),
    "max_pool2d_backward": (lambda g: _max_bw(g, _IDX, [2, 2, 5, 4]), (t(2, 2, 4, 3),)),
    "avg_pool2d": (lambda x: fl.avg_pool2d(x, 3, 2, 1), (nc(2, 2, 7, 6),)),
    "avg_pool2d#no_pad_ceil": (lambda x: fl.avg_pool2d(x, (3, 2), (2, 2), (1, 1), ceil_mode=True,
                                                      count_include_pad=False), (t(2, 2, 6, 7),)),
    "avg_pool2d#divisor": (lambda x: fl.avg_pool2d(x, 2, 1, divisor_override=3), (t(2, 4, 5),)),
    "avg_pool2d_backward": (lambda g: _avg_bw(g, [2, 2, 7, 6], [3, 3], [2, 2], [1, 1], True, False, None),
                            (t(2, 2, 4, 4),)),
    "avg_pool1d": (lambda x: fl.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (t(2, 3, 8),)),
    "adaptive_avg_pool2d": (lambda x: fl.adaptive_avg_pool2d(x, (3, 4)), (t(2, 2, 7, 6),)),
    "adaptive_avg_pool2d#global": (lambda x: fl.adaptive_avg_pool2d(x, 1), (nc(2, 3, 4, 5),)),
    "adaptive_avg_pool2d_backward": (lambda g: _adaptive_bw(g, [2, 2, 7, 6]), (t(2, 2, 3, 4),)),
    "adaptive_avg_pool1d": (lambda x: fl.adaptive_avg_pool1d(x, 3), (t(2, 7),)),
    "adaptive_max_pool2d": (lambda x: fl.adaptive_max_pool2d(x, (3, 2)), (distinct(2, 2, 7, 5),)),
    "adaptive_max_pool1d": (lambda x: fl.adaptive_max_pool1d(x, 4), (distinct(2, 3, 9),)),
}
