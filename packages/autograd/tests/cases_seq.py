"""Gradcheck cases of the seq operators, merged into test_derivatives.CASES."""

from __future__ import annotations

import numpy as np

import flambeau as fl

RNG = np.random.default_rng(4321)


def t(*shape, scale=1.0, requires_grad=True):
    return fl.tensor(RNG.uniform(-scale, scale, size=shape), dtype=fl.float64, requires_grad=requires_grad)


def nc(*shape, **kw):
    """A non-contiguous (transposed) leaf of the given shape."""
    base = t(*reversed(shape), **kw).detach()
    return base.permute(*reversed(range(len(shape)))).requires_grad_(True)


def _seeded_sdpa(q, k, v):
    fl.manual_seed(7)  # the same dropout mask at every evaluation
    return fl.scaled_dot_product_attention(q, k, v, dropout_p=0.3)


_BOOL_MASK = fl.tensor([[True, False, True, True], [False, False, False, False], [True, True, False, True]])

SDPA = fl.scaled_dot_product_attention
CASES = {
    "scaled_dot_product_attention": (lambda q, k, v: SDPA(q, k, v), (t(2, 3, 2), t(2, 4, 2), t(2, 4, 3))),
    "scaled_dot_product_attention#causal": (lambda q, k, v: SDPA(q, k, v, is_causal=True, scale=0.7),
                                            (nc(2, 3, 2), t(2, 4, 2), nc(4, 3))),
    "scaled_dot_product_attention#bool_mask": (lambda q, k, v: SDPA(q, k, v, attn_mask=_BOOL_MASK),
                                               (t(1, 2, 3, 2), t(1, 2, 4, 2), t(1, 2, 4, 2))),
    "scaled_dot_product_attention#float_mask": (lambda q, k, v, m: SDPA(q, k, v, attn_mask=m),
                                                (t(2, 3, 2), t(2, 4, 2), t(2, 4, 3), t(3, 4))),
    "scaled_dot_product_attention#dropout": (_seeded_sdpa, (t(2, 3, 2), t(2, 4, 2), t(2, 4, 3))),
    "scaled_dot_product_attention#gqa": (lambda q, k, v: SDPA(q, k, v, enable_gqa=True),
                                         (t(1, 4, 3, 2), t(1, 2, 4, 2), t(1, 2, 4, 2))),
    "lstm_cell": (lambda x, h, c, wi, wh, bi, bh: fl.lstm_cell(x, (h, c), wi, wh, bi, bh),
                  (t(2, 3), t(2, 2), t(2, 2), t(8, 3), nc(8, 2), t(8), t(8))),
    "lstm_cell#nobias_unbatched": (lambda x, h, c, wi, wh: fl.lstm_cell(x, (h, c), wi, wh),
                                   (t(3), t(2), t(2), t(8, 3), t(8, 2))),
    "gru_cell": (lambda x, h, wi, wh, bi, bh: fl.gru_cell(x, h, wi, wh, bi, bh),
                 (t(2, 3), t(2, 2), t(6, 3), t(6, 2), t(6), t(6))),
    "gru_cell#nobias_unbatched": (lambda x, h, wi, wh: fl.gru_cell(x, h, wi, wh), (t(3), t(2), t(6, 3), t(6, 2))),
    "rnn_tanh_cell": (lambda x, h, wi, wh, bi, bh: fl.rnn_tanh_cell(x, h, wi, wh, bi, bh),
                      (t(2, 3), t(2, 2), t(2, 3), t(2, 2), t(2), t(2))),
    "rnn_relu_cell": (lambda x, h, wi, wh, bi, bh: fl.rnn_relu_cell(x, h, wi, wh, bi, bh),
                      (t(2, 3), t(2, 2), t(2, 3), t(2, 2), t(2), t(2))),
    "_lstm_layer": (lambda x, h, c, wi, wh, bi, bh: fl._lstm_layer(x, h, c, wi, wh, bi, bh),
                    (t(3, 2, 3), t(2, 2), t(2, 2), t(8, 3), t(8, 2), t(8), t(8))),
    "_lstm_layer#reverse_nobias": (lambda x, h, c, wi, wh: fl._lstm_layer(x, h, c, wi, wh, reverse=True),
                                   (nc(3, 2, 3), t(2, 2), t(2, 2), t(8, 3), t(8, 2))),
    "_gru_layer": (lambda x, h, wi, wh, bi, bh: fl._gru_layer(x, h, wi, wh, bi, bh),
                   (t(3, 2, 3), t(2, 2), t(6, 3), t(6, 2), t(6), t(6))),
    "_gru_layer#reverse": (lambda x, h, wi, wh, bi, bh: fl._gru_layer(x, h, wi, wh, bi, bh, reverse=True),
                           (t(3, 2, 3), t(2, 2), t(6, 3), t(6, 2), t(6), t(6))),
    "_rnn_layer": (lambda x, h, wi, wh, bi, bh: fl._rnn_layer(x, h, wi, wh, bi, bh),
                   (t(3, 2, 3), t(2, 2), t(2, 3), t(2, 2), t(2), t(2))),
    "_rnn_layer#relu_reverse": (lambda x, h, wi, wh: fl._rnn_layer(x, h, wi, wh, nonlinearity="relu", reverse=True),
                                (t(3, 2, 3), t(2, 2), t(2, 3), t(2, 2))),
}

_UP = {
    "upsample_nearest1d": lambda x: fl.upsample_nearest1d(x, (7,)),
    "upsample_nearest1d#scales": lambda x: fl.upsample_nearest1d(x, (6,), 1.7),
    "upsample_nearest2d": lambda x: fl.upsample_nearest2d(x, (5, 8)),
    "upsample_nearest2d#scales": lambda x: fl.upsample_nearest2d(x, (6, 4), 2.2, 1.5),
    "upsample_linear1d": lambda x: fl.upsample_linear1d(x, (7,), False),
    "upsample_linear1d#align_corners": lambda x: fl.upsample_linear1d(x, (5,), True),
    "upsample_bilinear2d": lambda x: fl.upsample_bilinear2d(x, (5, 7), False),
    "upsample_bilinear2d#align_corners": lambda x: fl.upsample_bilinear2d(x, (7, 5), True),
    "upsample_bilinear2d#scales": lambda x: fl.upsample_bilinear2d(x, (6, 4), False, 2.2, 1.5),
}
for _k, _f in _UP.items():
    CASES[_k] = (_f, (nc(2, 2, 3, 4) if "2d" in _k else t(2, 2, 3),))
_UPB = {
    "upsample_nearest1d_backward": lambda g: fl.upsample_nearest1d_backward(g, (7,), (2, 2, 3)),
    "upsample_nearest2d_backward": lambda g: fl.upsample_nearest2d_backward(g, (5, 8), (2, 2, 3, 4)),
    "upsample_linear1d_backward": lambda g: fl.upsample_linear1d_backward(g, (7,), (2, 2, 3), True),
    "upsample_bilinear2d_backward": lambda g: fl.upsample_bilinear2d_backward(g, (5, 7), (2, 2, 3, 4), False),
}
for _k, _f in _UPB.items():
    CASES[_k] = (_f, (t(2, 2, 5, 8) if "nearest2d" in _k else t(2, 2, 5, 7) if "2d" in _k else t(2, 2, 7),))
CASES["pixel_shuffle"] = (lambda x: fl.pixel_shuffle(x, 2), (t(2, 8, 2, 3),))
CASES["pixel_unshuffle"] = (lambda x: fl.pixel_unshuffle(x, 2), (nc(2, 2, 4, 6),))
