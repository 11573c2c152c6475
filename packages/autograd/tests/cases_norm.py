"""Gradcheck cases of the normalisation and loss operators, merged into test_derivatives.CASES.

Running statistics are left out in training (each evaluation would update them) and fixed in
evaluation mode; loss inputs stay away from the kinks of l1/smooth_l1/huber.
"""

from __future__ import annotations

import numpy as np

import flambeau as fl

_RNG = np.random.default_rng(4321)


def _t(*shape, low=-1.0, high=1.0, requires_grad=True):
    return fl.tensor(_RNG.uniform(low, high, size=shape), dtype=fl.float64, requires_grad=requires_grad)


def _nc(*shape):
    """A transposed (non-contiguous) float64 leaf of the given shape."""
    return _t(*reversed(shape), requires_grad=False).permute(*reversed(range(len(shape)))).requires_grad_(True)


def _const(*shape, low=-1.0, high=1.0):
    return _t(*shape, low=low, high=high, requires_grad=False)


def _idx(values):
    return fl.tensor(values, dtype=fl.int64)


_RM, _RV = _const(3), _const(3, low=0.5, high=2.0)
_PROBS = fl.softmax(_const(4, 5), 1)
_W5 = _const(5, low=0.2, high=2.0)
_T34, _W4, _W31, _PW4 = _const(3, 4, low=0.0), _const(4), _const(3, 1), _const(4, low=0.5, high=2.0)


def _away_from(x, points, gap=0.05):
    """``x`` (a float64 leaf) with values moved at least ``gap`` away from every kink in ``points``."""
    a = x.detach().numpy().copy()
    for p in points:
        close = np.abs(a - p) < gap
        a[close] = p + np.where(a[close] >= p, gap, -gap) * 2
    return fl.tensor(a, dtype=fl.float64, requires_grad=True)


CASES = {
    "batch_norm": (lambda x, w, b: fl.batch_norm(x, None, None, w, b, True), (_t(4, 3, 5), _t(3), _t(3))),
    "batch_norm#noncontiguous_2d": (lambda x: fl.batch_norm(x, None, None, None, None, True, 0.1, 1e-3),
                                    (_nc(5, 3),)),
    "batch_norm#eval": (lambda x, w, b: fl.batch_norm(x, _RM, _RV, w, b, False), (_t(2, 3, 2, 2), _t(3), _t(3))),
    "layer_norm": (lambda x, w, b: fl.layer_norm(x, (3, 4), w, b), (_t(2, 3, 4), _t(3, 4), _t(3, 4))),
    "layer_norm#noaffine": (lambda x: fl.layer_norm(x, (5,), eps=1e-3), (_nc(3, 5),)),
    "group_norm": (lambda x, w, b: fl.group_norm(x, 2, w, b), (_t(2, 4, 3), _t(4), _t(4))),
    "group_norm#noaffine_4d": (lambda x: fl.group_norm(x, 3, eps=1e-3), (_t(2, 6, 2, 2),)),
    "nll_loss": (lambda x: fl.nll_loss(x, _idx([0, 4, 2, 1])), (_t(4, 5),)),
    "nll_loss#weight_ignore_sum": (lambda x: fl.nll_loss(x, _idx([0, 4, 2, 1]), _W5, ignore_index=2,
                                                         reduction="sum"), (_nc(4, 5),)),
    "nll_loss#nd_none": (lambda x: fl.nll_loss(x, _idx([[0, 2], [1, 1]]), reduction="none"), (_t(2, 3, 2),)),
    "nll_loss#1d": (lambda x: fl.nll_loss(x, _idx(3)), (_t(5),)),
    "cross_entropy": (lambda x: fl.cross_entropy(x, _idx([0, 4, 2, 1])), (_t(4, 5),)),
    "cross_entropy#weight_ignore_smoothing": (
        lambda x: fl.cross_entropy(x, _idx([0, 4, 2, 1]), _W5, ignore_index=4, label_smoothing=0.2), (_nc(4, 5),)),
    "cross_entropy#nd_none": (lambda x: fl.cross_entropy(x, _idx([[0, 2], [1, 1]]), reduction="none",
                                                         label_smoothing=0.1), (_t(2, 3, 2),)),
    "cross_entropy#1d_sum": (lambda x: fl.cross_entropy(x, _idx(3), reduction="sum"), (_t(5),)),
    "cross_entropy#probabilities": (lambda x, p: fl.cross_entropy(x, p, _W5, label_smoothing=0.1),
                                    (_t(4, 5), _PROBS.clone().requires_grad_(True))),
    "binary_cross_entropy": (lambda x, t: fl.binary_cross_entropy(x, t), (_t(3, 4, low=0.1, high=0.9),
                                                                         _t(3, 4, low=0.0, high=1.0))),
    "binary_cross_entropy#weight_sum": (lambda x: fl.binary_cross_entropy(x, _T34, _W4,
                                                                         reduction="sum"),
                                        (_t(3, 4, low=0.1, high=0.9),)),
    "binary_cross_entropy_with_logits": (lambda x, t: fl.binary_cross_entropy_with_logits(x, t),
                                         (_t(3, 4, low=-3, high=3), _t(3, 4, low=0.0))),
    "binary_cross_entropy_with_logits#weights_none": (
        lambda x, t: fl.binary_cross_entropy_with_logits(x, t, _W31, _PW4,
                                                         reduction="none"),
        (_t(3, 4, low=-3, high=3), _t(3, 4, low=0.0))),
    "mse_loss": (lambda x, t: fl.mse_loss(x, t), (_t(3, 4), _nc(3, 4))),
    "mse_loss#none": (lambda x, t: fl.mse_loss(x, t, reduction="none"), (_t(3, 4), _t(3, 4))),
    "l1_loss": (lambda x, t: fl.l1_loss(x, t, reduction="sum"), (_away_from(_t(3, 4), [0.0]), _t(3, 4) * 0)),
    "smooth_l1_loss": (lambda x: fl.smooth_l1_loss(x, fl.zeros(3, 4, dtype=fl.float64), beta=0.5),
                       (_away_from(_t(3, 4), [0.0, 0.5, -0.5]),)),
    "huber_loss": (lambda x: fl.huber_loss(x, fl.zeros(3, 4, dtype=fl.float64), delta=0.5, reduction="none"),
                   (_away_from(_t(3, 4), [0.0, 0.5, -0.5]),)),
    "kl_div": (lambda x, t: fl.kl_div(x, t, reduction="batchmean"), (_t(3, 4), _t(3, 4, low=0.1, high=1.0))),
    "kl_div#log_target": (lambda x, t: fl.kl_div(x, t, reduction="sum", log_target=True), (_t(3, 4), _t(3, 4))),
}
