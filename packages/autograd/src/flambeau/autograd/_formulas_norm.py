"""Derivatives of the normalisation and loss operators (see ``_formulas.py`` for the convention).

Note [Fused norm backward]: the gradients of a normalisation w.r.t. its input, weight and bias
share the same row sums, so the operator's fused ``*_backward`` kernel computes all those needed in
one call (Note [Shared backward calls]: the derivatives' ``joint``). The fused kernels are not
differentiable: under ``create_graph=True`` (grad mode on while formulas run) the formulas switch
to composites of differentiable operators that recompute the statistics from the input, so double
backward is exact.

Running statistics, loss weights and class-index targets get no gradient (as in torch).
"""

from __future__ import annotations

import flambeau as fl
from flambeau._ops import OPS
from flambeau.autograd._opnode import Derivative as D
from flambeau.autograd._shared_grads import masked

__all__ = ["TABLE"]

_NAMES = ("input", "weight", "bias")


def _channel_shape(x):
    return (1, -1) + (1,) * (x.dim() - 2)


# --- batch_norm ----------------------------------------------------------------------------------------
def _bn_composite(g, s, name):
    x, w = s.input, s.weight
    dims = (0,) + tuple(range(2, x.dim()))
    shape = _channel_shape(x)
    if s.training:
        xc = x - x.mean(dims, keepdim=True)
        invstd = ((xc * xc).mean(dims, keepdim=True) + s.eps).rsqrt()
    else:
        xc = x - s.save_mean.reshape(shape)
        invstd = s.save_invstd.reshape(shape)
    if name == "bias":
        return g.sum(dims)
    xhat = xc * invstd
    if name == "weight":
        return (g * xhat).sum(dims)
    gh = g if w is None else g * w.reshape(shape)
    if not s.training:
        return gh * invstd
    return invstd * (gh - gh.mean(dims, keepdim=True) - xhat * (gh * xhat).mean(dims, keepdim=True))


def _bn_fused(g, s, mask):
    return OPS["batch_norm_backward"].fn(g, s.input, s.weight, s.save_mean, s.save_invstd, s.training, mask)


# --- layer_norm ----------------------------------------------------------------------------------------
def _ln_composite(g, s, name):
    x, w = s.input, s.weight
    k = len(s.normalized_shape)
    dims = tuple(range(x.dim() - k, x.dim()))
    lead = tuple(range(x.dim() - k))
    if name == "bias":
        return g.sum(lead) if lead else g
    xc = x - x.mean(dims, keepdim=True)
    xhat = xc * ((xc * xc).mean(dims, keepdim=True) + s.eps).rsqrt()
    if name == "weight":
        return (g * xhat).sum(lead) if lead else g * xhat
    invstd = ((xc * xc).mean(dims, keepdim=True) + s.eps).rsqrt()
    gh = g if w is None else g * w
    return invstd * (gh - gh.mean(dims, keepdim=True) - xhat * (gh * xhat).mean(dims, keepdim=True))


def _ln_fused(g, s, mask):
    return OPS["layer_norm_backward"].fn(g, s.input, s.normalized_shape, s.save_mean, s.save_rstd, s.weight, mask)


# --- group_norm ----------------------------------------------------------------------------------------
def _gn_composite(g, s, name):
    x, w = s.input, s.weight
    n = x.shape[0]
    dims = (0,) + tuple(range(2, x.dim()))
    if name == "bias":
        return g.sum(dims)
    xg = x.reshape(n, s.num_groups, -1)
    xc = xg - xg.mean(2, keepdim=True)
    invstd = ((xc * xc).mean(2, keepdim=True) + s.eps).rsqrt()
    xhat = (xc * invstd).reshape(x.shape)
    if name == "weight":
        return (g * xhat).sum(dims)
    gh = g if w is None else g * w.reshape(_channel_shape(x))
    ghg = gh.reshape(n, s.num_groups, -1)
    xhg = xhat.reshape(n, s.num_groups, -1)
    dx = invstd * (ghg - ghg.mean(2, keepdim=True) - xhg * (ghg * xhg).mean(2, keepdim=True))
    return dx.reshape(x.shape)


def _gn_fused(g, s, mask):
    return OPS["group_norm_backward"].fn(g, s.input, s.num_groups, s.save_mean, s.save_rstd, s.weight, mask)


def _norm_entry(composite, fused):
    """The derivative of a normalisation: its fused backward operator for every gradient at once (not under
    ``create_graph``: :func:`masked`), else per input the ``composite(g, s, name)`` of differentiable operators."""
    return D({n: (lambda g, s, n=n: composite(g, s, n)) for n in _NAMES}, save=("input", "weight"),
             joint=masked(fused))


TABLE = {
    "batch_norm": _norm_entry(_bn_composite, _bn_fused),
    "layer_norm": _norm_entry(_ln_composite, _ln_fused),
    "group_norm": _norm_entry(_gn_composite, _gn_fused),
}


# --- losses ----------------------------------------------------------------------------------------------
def _class_dim(x) -> int:
    return 0 if x.dim() == 1 else 1


def _target_weights(s, dtype):
    """``(valid targets as int64 indices, per-target weight)``; ignored targets get index 0 and weight 0."""
    t = s.target.to(fl.int64)
    valid = t != s.ignore_index
    tc = t.masked_fill(~valid, 0)
    w = valid.to(dtype)
    if s.weight is not None:
        w = w * fl.take(s.weight.to(dtype), tc)
    return tc, w


def _reduction_scale(g, s, count):
    """The incoming gradient as a per-element factor: divided by ``count`` for ``reduction="mean"``."""
    return g / count if s.reduction == "mean" else g


def _nll_grad(g, s):
    if not fl.is_grad_enabled():
        # the input itself is not saved: the kernel needs only its shape and dtype
        like = fl.empty(s.input_shape, dtype=s.input_dtype, device=g.device)
        return OPS["nll_loss_backward"].fn(g, like, s.target, s.weight, s.ignore_index, s.reduction, s.total_weight)
    dtype = s.input_dtype
    dim = 0 if len(s.input_shape) == 1 else 1
    tc, w = _target_weights(s, dtype)
    coef = -(w * _reduction_scale(g, s, s.total_weight))
    return fl.zeros(s.input_shape, dtype=dtype, device=g.device).scatter(dim, tc.unsqueeze(dim), coef.unsqueeze(dim))


def _ce_composite(g, s):
    x = s.input
    dim = _class_dim(x)
    c = x.shape[dim]
    ls = s.label_smoothing
    tc, wt = _target_weights(s, x.dtype)
    valid = (s.target.to(fl.int64) != s.ignore_index).to(x.dtype)
    gs = _reduction_scale(g, s, s.total_weight) * valid
    p = fl.softmax(x, dim)
    if s.weight is None:
        wsum, wvec = float(c), fl.ones(c, dtype=x.dtype, device=x.device)
    else:
        wvec = s.weight.to(x.dtype).reshape(-1)
        wsum = wvec.sum()
    coef = (gs * ((1.0 - ls) * wt + ls * wsum / c)).unsqueeze(dim)
    onehot = fl.zeros(x.shape, dtype=x.dtype, device=x.device).scatter(
        dim, tc.unsqueeze(dim), (gs * (1.0 - ls) * wt).unsqueeze(dim))
    grad = p * coef - onehot
    if ls > 0:
        grad = grad - (gs * (ls / c)).unsqueeze(dim) * wvec.reshape((c,) + (1,) * (x.dim() - dim - 1))
    return grad


def _ce_grad(g, s):
    if fl.is_grad_enabled():
        return _ce_composite(g, s)
    return OPS["cross_entropy_backward"].fn(g, s.input, s.target, s.weight, s.ignore_index, s.reduction,
                                            s.label_smoothing, s.lse, s.total_weight)


def _weighted(v, s):
    return v if s.weight is None else v * s.weight


def _bce_input(g, s):
    x, t = s.input, s.target
    gx = (x - t) / ((1.0 - x) * x).clamp_min(1e-12)
    return _weighted(gx, s) * _reduction_scale(g, s, x.numel())


def _bce_target(g, s):
    return _weighted(-fl.logit(s.input), s) * _reduction_scale(g, s, s.input.numel())


def _log_weight(s):
    return None if s.pos_weight is None else 1.0 + (s.pos_weight - 1.0) * s.target


def _softplus_neg(x):
    # log(1 + e) rather than log1p(e): see Note [log1p] in tensor-core's _kernels/cpu/loss.py
    return (-x).clamp_min(0.0) + ((-x.abs()).exp() + 1.0).log()


def _bce_logits_input(g, s):
    x, t = s.input, s.target
    lw = _log_weight(s)
    # (1 - t) - lw * sigmoid(-x), which is sigmoid(x) - t without pos_weight
    gx = fl.sigmoid(x) - t if lw is None else (1.0 - t) - lw * fl.sigmoid(-x)
    return _weighted(gx, s) * _reduction_scale(g, s, x.numel())


def _bce_logits_target(g, s):
    x = s.input
    gt = -x if s.pos_weight is None else -x + (s.pos_weight - 1.0) * _softplus_neg(x)
    return _weighted(gt, s) * _reduction_scale(g, s, x.numel())


def _pointwise(derivative):
    """Input and target formulas of a loss of ``d = input - target``: ``derivative(d, s, scale)`` is
    ``dloss/dd`` times ``scale`` (the incoming gradient, divided by the element count for "mean")."""
    def input_grad(g, s):
        d = s.input - s.target
        return derivative(d, s, _reduction_scale(g, s, d.numel()))

    def target_grad(g, s):
        return -input_grad(g, s)

    return D({"input": input_grad, "target": target_grad}, save=("input", "target"))


def _smooth_l1(d, s, scale):
    if s.beta == 0:
        return d.sign() * scale
    return fl.where(d.abs() < s.beta, d / s.beta, d.sign()) * scale


def _huber(d, s, scale):
    return fl.where(d.abs() < s.delta, d, d.sign() * s.delta) * scale


TABLE.update({
    "nll_loss": D({"input": _nll_grad}, save=("target", "weight")),
    "cross_entropy": D({"input": _ce_grad}, save=("input", "target", "weight")),
    "binary_cross_entropy": D({"input": _bce_input, "target": _bce_target}, save=("input", "target", "weight")),
    "binary_cross_entropy_with_logits": D({"input": _bce_logits_input, "target": _bce_logits_target},
                                          save=("input", "target", "weight", "pos_weight")),
    "mse_loss": _pointwise(lambda d, s, scale: d * (scale * 2.0)),  # a 0-dim factor times d: one pass
    "l1_loss": _pointwise(lambda d, s, scale: d.sign() * scale),
    "smooth_l1_loss": _pointwise(_smooth_l1),
    "huber_loss": _pointwise(_huber),
})
