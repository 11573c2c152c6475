"""Batching rules of the neural-network operators: convolution, pooling, resampling, padding, embedding,
normalisation, losses, dropout and the random operators, attention (conventions in
:mod:`flambeau.func._rules_base`)."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.func._rules_base import (
    RULES,
    _call,
    _first,
    _full,
    _index,
    _make,
    _only_input_batched,
    _pad,
    _run,
    _val,
    _wrap,
    bound,
    check_inplace,
    elementwise,
    rule,
)

__all__: list = []  # rules register themselves in RULES


# --- convolution, pooling, resampling: the batch folds into N ----------------------------------------
_SPATIAL_RANK = {
    "conv1d": 3, "conv2d": 4, "max_pool1d": 3, "max_pool2d": 4, "max_pool1d_with_indices": 3,
    "max_pool2d_with_indices": 4, "avg_pool1d": 3, "avg_pool2d": 4, "adaptive_avg_pool1d": 3,
    "adaptive_avg_pool2d": 4, "adaptive_max_pool1d": 3, "adaptive_max_pool2d": 4, "upsample_nearest1d": 3,
    "upsample_nearest2d": 4, "upsample_linear1d": 3, "upsample_bilinear2d": 4, "pixel_shuffle": 4,
    "pixel_unshuffle": 4,
}


def _fold_batch(op, fn, level, args, kwargs):
    """An operator on ``(N, C, *spatial)`` (or ``(C, *spatial)``): the batch joins N."""
    ba = bound(fn, args, kwargs)
    first = _first(ba)
    if not _only_input_batched(ba, level, first):
        return NotImplemented
    full = _SPATIAL_RANK[op.name]
    x = ba.arguments[first]
    v = x._value
    if x.dim() == full - 1:  # an unbatched-form input: the vmap batch is N
        ba.arguments[first] = v
        return _wrap(_run(op, fn, ba), level)
    if x.dim() != full:
        return NotImplemented  # the operator's own error, per example
    n = x.shape[0]
    ba.arguments[first] = v.reshape(level.size * n, *v.shape[2:])
    return _wrap(_unfold_batch(_run(op, fn, ba), level.size, n), level)


def _unfold_batch(out, size, n):
    if isinstance(out, Tensor):
        return out.reshape(size, n, *out.shape[1:])
    parts = [_unfold_batch(o, size, n) for o in out]
    return type(out)(*parts) if hasattr(type(out), "_fields") else type(out)(parts)


for _name in _SPATIAL_RANK:
    if not _name.startswith("conv"):
        RULES[_name] = _fold_batch


@rule("conv1d", "conv2d")
def _conv(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x, w, bias = ba.arguments["input"], ba.arguments["weight"], ba.arguments.get("bias")
    if _val(w, level) is None and _val(bias, level) is None:
        return _fold_batch(op, fn, level, args, kwargs)
    # Per-example weights: one grouped convolution, the batch folded into the channels (x: (N, B*C, ...),
    # weight: (B*O, C/g, ...), groups B*g), as functorch does.
    full = _SPATIAL_RANK[op.name]
    size = level.size
    if x.dim() not in (full, full - 1):
        return NotImplemented
    xv = _full(x, level)
    single = x.dim() == full - 1
    if single:
        xv = xv.unsqueeze(1)
    n, c = xv.shape[1], xv.shape[2]
    xv = xv.movedim(0, 1).reshape(n, size * c, *xv.shape[3:])
    wv = _full(w, level)
    wv = wv.reshape(size * wv.shape[1], *wv.shape[2:])
    if bias is not None:
        bias = _full(bias, level).reshape(-1)
    ba.arguments.update(input=xv, weight=wv, bias=bias, groups=ba.arguments["groups"] * size)
    out = _run(op, fn, ba)
    out = out.reshape(n, size, -1, *out.shape[2:]).movedim(1, 0)
    return _make(out.squeeze(1) if single else out, level)


@rule("pad")
def _pad_rule(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    first = _first(ba)
    if not _only_input_batched(ba, level, first):
        return NotImplemented
    x = ba.arguments[first]
    k = len(ba.arguments["pad"]) // 2
    v = x._value
    if ba.arguments.get("mode", "constant") == "constant" or x.dim() == k + 1:
        ba.arguments[first] = v
        return _make(_run(op, fn, ba), level)
    if x.dim() == k + 2:
        n = x.shape[0]
        ba.arguments[first] = v.reshape(level.size * n, *v.shape[2:])
        out = _run(op, fn, ba)
        return _make(out.reshape(level.size, n, *out.shape[1:]), level)
    return NotImplemented


# --- normalisation --------------------------------------------------------------------------------------
@rule("layer_norm")
def _layer_norm(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x, w, b = ba.arguments["input"], ba.arguments.get("weight"), ba.arguments.get("bias")
    if _val(w, level) is not None or _val(b, level) is not None:
        out = _layer_norm(op, fn, level, (x, ba.arguments["normalized_shape"], None, None, ba.arguments["eps"]), {})
        if w is not None:
            out = out * w
        return out if b is None else out + b
    ba.arguments["input"] = x._value
    return _make(_run(op, fn, ba), level)


def _channels(t, level, times):
    """A per-channel tensor (C,) for the batch folded into the channels: (B*C,)."""
    if t is None:
        return None
    v = _val(t, level)
    return v.reshape(-1) if v is not None else t.repeat(times)


@rule("batch_norm")
def _batch_norm(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments["input"]
    stats = (ba.arguments.get("running_mean"), ba.arguments.get("running_var"))
    if ba.arguments.get("training") and any(s is not None for s in stats):
        raise RuntimeError("vmap: batch_norm in training mode updates its running statistics in place, which "
                           "cannot hold one value per example. Use a module without running stats "
                           "(track_running_stats=False) or eval mode inside vmap.")
    if x.dim() < 2:
        return NotImplemented
    size = level.size
    xv = _full(x, level)  # (B, N, C, *)
    n, c = xv.shape[1], xv.shape[2]
    xv = xv.movedim(0, 1).reshape(n, size * c, *xv.shape[3:])
    ba.arguments["input"] = xv
    for name in ("running_mean", "running_var", "weight", "bias"):
        ba.arguments[name] = _channels(ba.arguments.get(name), level, size)
    out = _run(op, fn, ba)
    return _make(out.reshape(n, size, c, *out.shape[2:]).movedim(1, 0), level)


@rule("group_norm")
def _group_norm(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments["input"]
    if x.dim() < 2:
        return NotImplemented
    size = level.size
    xv = _full(x, level)
    n, c = xv.shape[1], xv.shape[2]
    ba.arguments["input"] = xv.movedim(0, 1).reshape(n, size * c, *xv.shape[3:])
    ba.arguments["num_groups"] = ba.arguments["num_groups"] * size
    for name in ("weight", "bias"):
        ba.arguments[name] = _channels(ba.arguments.get(name), level, size)
    out = _run(op, fn, ba)
    return _make(out.reshape(n, size, c, *out.shape[2:]).movedim(1, 0), level)


# --- losses: elementwise with reduction="none", then the reduction per example --------------------------
def _reduced(loss, reduction: str, x):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    if reduction == "batchmean":
        return loss.sum() / x.shape[0] if x.dim() else loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


@rule("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "kl_div",
      "binary_cross_entropy_with_logits")
def _pointwise_loss(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    reduction = ba.arguments["reduction"]
    ba.arguments["reduction"] = "none"
    loss = elementwise(op, fn, level, ba.args, ba.kwargs)
    return _reduced(loss, reduction, ba.arguments["input"])


@rule("nll_loss", "cross_entropy")
def _class_loss(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x, target, weight = ba.arguments["input"], ba.arguments["target"], ba.arguments.get("weight")
    reduction = ba.arguments["reduction"]
    if _val(weight, level) is not None or reduction not in ("none", "sum", "mean"):
        return NotImplemented
    if op.name == "cross_entropy" and ba.arguments.get("label_smoothing", 0.0) > 0 and reduction == "mean" \
            and weight is not None:
        return NotImplemented
    size = level.size
    xv, tv = _full(x, level), _full(target, level)
    probabilities = target.dtype.is_floating_point
    w_target = None
    if not probabilities and reduction == "mean":  # torch's mean: the loss sum over the target weights sum
        w_target = _call("ne", target, ba.arguments["ignore_index"]).to(x.dtype)
        if weight is not None:
            w_target = w_target * _index(weight, target.clamp(min=0))
    if x.dim() == 1:  # one example of (C,) with a class index (): the vmap batch is N
        ba.arguments.update(input=xv, target=tv, reduction="none")
        loss = _make(_run(op, fn, ba), level)
        return loss / w_target if w_target is not None else loss
    n = x.shape[0]
    ba.arguments.update(input=xv.reshape(size * n, *xv.shape[2:]), target=tv.reshape(size * n, *tv.shape[2:]),
                        reduction="none")
    loss = _make(_run(op, fn, ba).reshape(size, n, *x.shape[2:]), level)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.mean() if w_target is None else loss.sum() / w_target.sum()


# --- randomness (randomness="different"; "same" and "error" are handled before the rules) -------------
@rule("dropout")
def _dropout(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    first = _first(ba)
    ba.arguments[first] = ba.arguments[first]._value
    out = _run(op, fn, ba)
    return args[0] if ba.arguments.get("inplace") else _make(out, level)


@rule("bernoulli")
def _bernoulli(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    first = _first(ba)
    if not _only_input_batched(ba, level, first):
        return NotImplemented
    ba.arguments[first] = ba.arguments[first]._value
    return _make(_run(op, fn, ba), level)


@rule("normal_", "uniform_", "random_", "exponential_", "geometric_", "cauchy_", "log_normal_", "bernoulli_")
def _fill_random(op, fn, level, args, kwargs):
    check_inplace(args, level, op.name)
    ba = bound(fn, args, kwargs)
    if any(_val(v, level) is not None for k, v in ba.arguments.items() if k != _first(ba)):
        return NotImplemented
    ba.arguments[_first(ba)] = args[0]._value
    _run(op, fn, ba, True)
    return args[0]


@rule("scaled_dot_product_attention")
def _sdpa(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    names = [n for n in ("query", "key", "value", "attn_mask") if isinstance(ba.arguments.get(n), Tensor)]
    rank = max(ba.arguments[n].dim() for n in names)
    for n in names:
        t = ba.arguments[n]
        ba.arguments[n] = _pad(_full(t, level), rank, level.size)
    return _make(_run(op, fn, ba), level)
