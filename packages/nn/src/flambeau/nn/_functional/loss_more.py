"""nn.functional: the remaining losses of torch (CTC, Gaussian and Poisson NLL, the margin losses).

All are composites of differentiable flambeau operators: no kernels of their own, and their gradients
come from the operators'. Each takes torch's arguments (the deprecated ``size_average``/``reduce``
included where torch has them) and raises torch's errors on bad input.
"""

from __future__ import annotations

import math

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.activation import logsigmoid
from flambeau.nn._functional.basic import pairwise_distance
from flambeau.nn._functional.loss import _apply_reduction, _legacy_reduction

__all__ = ["ctc_loss", "gaussian_nll_loss", "hinge_embedding_loss", "multi_margin_loss", "multilabel_margin_loss",
           "multilabel_soft_margin_loss", "poisson_nll_loss", "soft_margin_loss", "triplet_margin_with_distance_loss"]


def _check_reduction(reduction: str, message: str) -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(message)


def _as_numpy_ints(values, name: str) -> np.ndarray:
    """Lengths or targets given as a tensor, a list or a tuple, as an int64 numpy array."""
    if isinstance(values, Tensor):
        if values.dtype.is_floating_point or values.dtype.is_complex:
            raise RuntimeError(f"ctc_loss: expected {name} to be an integer tensor, but got {values.dtype}")
        return values.detach().cpu().numpy().astype(np.int64).reshape(-1)
    return np.asarray(list(values), dtype=np.int64).reshape(-1)


# --- CTC (Note [CTC as a log-space recursion of tensor ops]) -----------------------------------------
#
# Note [CTC as a log-space recursion of tensor ops]
# The forward variable alpha_t(s) of Graves et al. (2006) over the blank-extended target
# l' = (blank, l1, blank, l2, ..., blank) of length 2S+1 is computed for the whole batch at once, one
# step of T per iteration: alpha_t = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2) where
# l'(s) is not blank and differs from l'(s-2)) + log_probs[t, l'(s)]. A sample whose input has ended
# (t >= input_length) keeps its alpha. Unreachable states hold a large finite negative number rather
# than -inf, so that logsumexp's gradient stays finite (no 0 * nan); a final log-likelihood below half
# of it means no alignment exists, and the loss is +inf (or 0 with ``zero_infinity``), as torch's.
# The gradient is autograd's through these operators: for ``log_probs`` from ``log_softmax`` it equals
# torch's (torch's CTC backward assumes log-softmax inputs, and so agrees only through it).
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist Temporal Classification loss (Note [CTC as a log-space recursion of tensor ops]).

    Args:
        log_probs: float ``(T, N, C)`` or unbatched ``(T, C)``: log-probabilities over ``C`` classes
            (blank included), as from :func:`log_softmax`.
        targets: int ``(N, S)`` padded targets, or 1-D concatenated targets of total length
            ``sum(target_lengths)`` (``(S,)`` unbatched); they must not contain ``blank``.
        input_lengths: ``(N,)`` tensor or sequence: the length of each input (``<= T``).
        target_lengths: ``(N,)`` tensor or sequence: the length of each target.
        blank: the blank class index.
        reduction: ``"none"`` (``(N,)``), ``"sum"``, or ``"mean"`` (each loss divided by its target length,
            then the batch mean, as torch).
        zero_infinity: replace infinite losses (no alignment possible) by zero.

    Returns:
        the loss, of ``log_probs``' dtype.
    """
    _check_reduction(reduction, f"{reduction} is not a valid value for reduction")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D (T, C) or 3-D (T, N, C), but got "
                           f"{log_probs.ndim}-D")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    steps, batch, classes = lp.shape
    if not 0 <= blank < classes:
        raise RuntimeError(f"blank must be in label range, but got blank={blank} for {classes} classes")
    in_len = _as_numpy_ints(input_lengths, "input_lengths")
    tg_len = _as_numpy_ints(target_lengths, "target_lengths")
    if in_len.size != batch or tg_len.size != batch:
        raise RuntimeError(f"ctc_loss: expected input_lengths and target_lengths of size {batch}, but got "
                           f"{in_len.size} and {tg_len.size}")
    if (in_len > steps).any() or (in_len < 0).any():
        raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got value "
                           f"{int(in_len.max())}")
    tg = _as_numpy_ints(targets, "targets").reshape(tuple(targets.shape)) if isinstance(targets, Tensor) \
        else np.asarray(targets, dtype=np.int64)
    width = max(int(tg_len.max(initial=0)), 1)
    labels = np.full((batch, width), blank, dtype=np.int64)
    if tg.ndim == 2:
        for n in range(batch):
            if tg_len[n] > tg.shape[1]:
                raise RuntimeError(f"Expected tensor to have size at least {tg_len[n]} at dimension 1, but got "
                                   f"size {tg.shape[1]} for argument #2 'targets'")
            labels[n, :tg_len[n]] = tg[n, :tg_len[n]]
    else:
        offsets = np.concatenate([[0], np.cumsum(tg_len)])
        if tg.ndim != 1 or offsets[-1] != tg.size:
            raise RuntimeError(f"Expected tensor to have size {offsets[-1]} at dimension 0, but got size {tg.size} for "
                               f"argument #2 'targets'")
        for n in range(batch):
            labels[n, :tg_len[n]] = tg.reshape(-1)[offsets[n]:offsets[n + 1]]
    if ((labels < 0) | (labels >= classes)).any():
        raise RuntimeError(f"ctc_loss: target labels must be in [0, {classes})")
    ext = np.full((batch, 2 * width + 1), blank, dtype=np.int64)
    ext[:, 1::2] = labels
    skip = np.zeros_like(ext, dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])

    device = lp.device
    neg = float(fl.finfo(lp.dtype).min) / 8
    index = fl.from_numpy(ext).to(device).unsqueeze(0).expand(steps, batch, ext.shape[1]).contiguous()
    emit = lp.gather(2, index)  # (T, N, 2S+1): log-probability of each extended label at each step
    first_two = fl.from_numpy(np.arange(ext.shape[1]) < 2).to(device)
    alpha = fl.where(first_two, emit[0], neg)
    skip_t = fl.from_numpy(skip).to(device)
    pad1 = fl.full((batch, 1), neg, dtype=lp.dtype, device=device)
    pad2 = fl.full((batch, 2), neg, dtype=lp.dtype, device=device)
    live = fl.from_numpy(in_len).to(device).unsqueeze(1)
    states = ext.shape[1]
    for t in range(1, steps):  # narrow rather than slicing: the same view, and a plainer backward
        from_prev = fl.cat([pad1, alpha.narrow(1, 0, states - 1)], 1)
        from_skip = fl.where(skip_t, fl.cat([pad2, alpha.narrow(1, 0, states - 2)], 1), neg)
        step = fl.logsumexp(fl.stack([alpha, from_prev, from_skip]), 0) + emit[t]
        alpha = fl.where(live > t, step, alpha)
    ends = np.stack([2 * tg_len, np.maximum(2 * tg_len - 1, 0)], 1)
    final = alpha.gather(1, fl.from_numpy(ends).to(device))
    final = fl.where(fl.from_numpy(np.stack([tg_len >= 0, tg_len > 0], 1)).to(device), final, neg)
    loss = -fl.logsumexp(final, 1)
    impossible = (loss > -neg / 2) | fl.from_numpy(in_len == 0).to(device)
    loss = fl.where(impossible, 0.0 if zero_infinity else math.inf, loss)
    if reduction == "mean":
        lengths = fl.from_numpy(np.maximum(tg_len, 1)).to(device=device, dtype=loss.dtype)
        return (loss / lengths).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.squeeze(0)


def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """Gaussian negative log-likelihood ``0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps))``.

    Args:
        input: the predicted means, any shape.
        target: the samples, ``input``'s shape (or broadcastable).
        var: the predicted variances: ``input``'s shape, one dimension short of it (homoscedastic), the
            same rank with one dimension of size 1, or a float.
        full: add the constant ``0.5 * log(2 pi)``.
        eps: the clamp of ``var`` (the clamp does not stop its gradient, as torch's).
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
    """
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = fl.full_like(input, float(var))
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise ValueError("var is of incorrect size")
    _check_reduction(reduction, reduction + " is not valid")
    # torch clamps under no_grad: the value is clamped, the gradient flows as if it were not
    var = var + (var.detach().clamp_min(eps) - var.detach())
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _apply_reduction(loss, reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1``, reduced.

    ``input`` and ``target`` (of 1 and -1) have the same (broadcastable) shape.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    zeros = fl.zeros_like(input)
    loss = fl.where(target != 1, (margin - input).clamp_min(0), zeros) + fl.where(target != -1, input, zeros)
    return _apply_reduction(loss, reduction)


def _class_target(input: Tensor, target: Tensor, name: str) -> tuple[Tensor, Tensor]:
    """``input`` as ``(N, C)`` and ``target`` as ``(N,)`` for the multi-class margin losses (torch's checks)."""
    if input.ndim > 2:
        raise RuntimeError(f"{name}: expected input of 0, 1 or 2 dimensions, but got {input.ndim}")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    t = target.reshape(-1)
    if t.shape[0] != x.shape[0] or (input.ndim == 2 and target.ndim != 1) or target.ndim > 1:
        raise RuntimeError(f"inconsistent target size, expected {x.shape[0]} but got {list(target.shape)}")
    return x, t


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss ``sum_{i != y} max(0, margin - x[y] + x[i])^p * weight[y] / C`` per sample.

    Args:
        input: ``(N, C)`` or ``(C,)``.
        target: int64 ``(N,)`` (or ``()``) class indices in ``[0, C)``.
        p: 1 or 2.
        margin: the margin.
        weight: optional ``(C,)`` class weights.
        reduction: ``"none"`` (``(N,)``), ``"mean"`` or ``"sum"``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    x, t = _class_target(input, target, "multi_margin_loss")
    classes = x.shape[1]
    if bool(((t < 0) | (t >= classes)).any()):
        raise RuntimeError("target out of range")
    own = x.gather(1, t.unsqueeze(1))
    z = (margin - own + x).clamp_min(0)
    z = z if p == 1 else z * z
    others = fl.arange(classes, device=x.device).unsqueeze(0) != t.unsqueeze(1)
    z = fl.where(others, z, fl.zeros_like(z))
    if weight is not None:
        z = z * weight[t].unsqueeze(1)
    loss = z.sum(1) / classes
    if reduction == "none":
        return loss.reshape(target.shape)
    return _apply_reduction(loss, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss ``sum_{j, i not a target} max(0, 1 - (x[y_j] - x[i])) / C`` per sample.

    Args:
        input: ``(N, C)`` or ``(C,)``.
        target: int64 of ``input``'s shape: the target classes of each sample, ended by the first ``-1``.
        reduction: ``"none"`` (``(N,)`` or ``()``), ``"mean"`` or ``"sum"``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input.ndim > 2 or tuple(target.shape) != tuple(input.shape) and not (input.ndim == 0 and target.numel() == 1):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    tg = target.detach().cpu().numpy().reshape(x.shape).astype(np.int64)
    classes = x.shape[1]
    if ((tg < -1) | (tg >= classes)).any():
        raise RuntimeError("multilabel_margin_loss: target values must be in [-1, C)")
    valid = np.cumprod(tg >= 0, axis=1).astype(bool)  # the entries before the first -1
    is_target = np.zeros(x.shape, dtype=bool)
    rows = np.nonzero(valid)
    is_target[rows[0], tg[rows]] = True
    idx = fl.from_numpy(np.where(valid, tg, 0)).to(x.device)
    own = x.gather(1, idx)  # (N, C): x[y_j] for each target position j
    z = (1 - own.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)  # (N, j, i)
    pairs = fl.from_numpy(valid[:, :, None] & ~is_target[:, None, :]).to(x.device)
    loss = fl.where(pairs, z, fl.zeros_like(z)).sum((1, 2)) / classes
    if reduction == "none":
        return loss if input.ndim == 2 else loss.squeeze(0)
    return _apply_reduction(loss, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:
    """Multi-label one-versus-all logistic loss, averaged over the classes (the last dimension).

    ``input`` ``(N, C)`` or ``(C,)``; ``target`` of 0 and 1 in its shape; ``weight`` broadcast to it.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.ndim - 1) / input.shape[input.ndim - 1]
    _check_reduction(reduction, reduction + " is not valid")
    return _apply_reduction(loss, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood: ``exp(input) - target * input`` (``log_input``), else
    ``input - target * log(input + eps)``; ``full`` adds the Stirling term where ``target > 1``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, reduction + " is not a valid value for reduction")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        big = target > 1
        safe = fl.where(big, target, fl.ones_like(target))  # no 0 * log(0) where the term is masked anyway
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + fl.where(big, stirling, fl.zeros_like(stirling))
    return _apply_reduction(loss, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """Two-class logistic loss ``log(1 + exp(-target * input))``; ``target`` of 1 and -1 in ``input``'s shape."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _apply_reduction((-target * input).exp().log1p(), reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with a custom distance ``d`` (default :func:`pairwise_distance`).

    Args:
        anchor, positive, negative: tensors of the same rank that ``distance_function`` takes.
        distance_function: ``(x1, x2) -> distances``; defaults to the Euclidean pairwise distance.
        margin: must be positive.
        swap: use ``min(d(a, n), d(p, n))`` as the negative distance.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
    """
    _check_reduction(reduction, f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = fl.minimum(d_neg, distance(positive, negative))
    return _apply_reduction((margin + d_pos - d_neg).clamp_min(0), reduction)
