"""nn.functional: losses.

The class-index, binary and regression losses are flambeau operators (fused kernels); the margin
losses are composites of differentiable operators. Every function takes torch's arguments, the
deprecated ``size_average``/``reduce`` included (mapped to ``reduction`` as torch does).
"""

from __future__ import annotations

import warnings

import flambeau as fl
from flambeau import Tensor

__all__ = ["nll_loss", "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss",
           "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "cosine_embedding_loss", "margin_ranking_loss",
           "triplet_margin_loss"]


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """``reduction`` from torch's deprecated ``size_average``/``reduce`` arguments when either is given."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                  f"{_legacy_string(size_average, reduce)}' instead.", UserWarning, stacklevel=3)
    return _legacy_string(size_average, reduce)


def _legacy_string(size_average, reduce) -> str:
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def _apply_reduction(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of log-probabilities ``input`` for class indices ``target``.

    See :func:`flambeau.nll_loss`.

    ``input`` is ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)``, ``target`` int64 ``()``, ``(N,)`` or
    ``(N, d1, ...)``; ``weight`` ``(C,)``; ``"mean"`` divides by the summed weights of the targets
    that are not ``ignore_index``.
    """
    return fl.nll_loss(input, target, weight, ignore_index, _legacy_reduction(size_average, reduce, reduction))


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits ``input`` against class indices or probabilities (see :func:`flambeau.cross_entropy`).

    ``input`` is ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)``; ``target`` int64 class indices of the
    input's shape without the class dim, or floating probabilities of the input's shape.
    """
    return fl.cross_entropy(input, target, weight, ignore_index, _legacy_reduction(size_average, reduce, reduction),
                            label_smoothing)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities ``input`` (see :func:`flambeau.binary_cross_entropy`).

    ``target`` has ``input``'s shape; ``weight`` broadcasts to it. Logs are clamped at ``-100``.
    """
    return fl.binary_cross_entropy(input, target, weight, _legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)``, computed stably from the logits.

    ``target`` has ``input``'s shape; ``weight`` broadcasts to it and ``pos_weight`` weighs the
    positive examples of each class (the last dimension). See
    :func:`flambeau.binary_cross_entropy_with_logits`.
    """
    return fl.binary_cross_entropy_with_logits(input, target, weight, pos_weight,
                                               _legacy_reduction(size_average, reduce, reduction))


def _weighted(op, input, target, reduction, weight, *extra, mean_by_weight=True):
    """A regression loss times ``weight``; torch's weighted mse/l1 means divide by ``weight.sum()``, huber's by
    the element count."""
    if weight is None:
        return op(input, target, reduction, *extra)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = op(input, target, "none", *extra) * weight
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return _apply_reduction(loss, reduction)


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """Mean squared error ``(input - target) ** 2`` (times ``weight`` if given), reduced.

    ``input`` and ``target`` broadcast (with a warning when their shapes differ, as in torch). With
    ``weight`` (of ``input``'s shape) ``"mean"`` divides by ``weight.sum()``, as torch does.
    """
    return _weighted(fl.mse_loss, input, target, _legacy_reduction(size_average, reduce, reduction), weight)


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    """Mean absolute error ``|input - target|`` (times ``weight`` if given), reduced.

    With ``weight`` (of ``input``'s shape) ``"mean"`` divides by ``weight.sum()``, as torch does.
    """
    return _weighted(fl.l1_loss, input, target, _legacy_reduction(size_average, reduce, reduction), weight)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Smooth L1 loss: quadratic below ``beta``, linear above (see :func:`flambeau.smooth_l1_loss`)."""
    return fl.smooth_l1_loss(input, target, _legacy_reduction(size_average, reduce, reduction), beta)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """Huber loss: quadratic below ``delta``, linear above (times ``weight`` if given).

    See :func:`flambeau.huber_loss`.
    """
    return _weighted(fl.huber_loss, input, target, reduction, weight, delta, mean_by_weight=False)


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """KL divergence of ``target`` from log-probabilities ``input`` (see :func:`flambeau.kl_div`).

    ``reduction="mean"`` averages over every element and warns, as torch does; ``"batchmean"`` is
    the mathematical KL divergence (the sum divided by the batch size).
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    return fl.kl_div(input, target, reduction, log_target)


def _check_margin_target(target: Tensor, n: int, name: str) -> None:
    if target.ndim > 1 or (target.ndim == 1 and target.shape[0] != n and target.shape[0] != 1):
        raise RuntimeError(f"{name}: expected target of shape ({n},), but got {tuple(target.shape)}")


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where ``target == -1``.

    Args:
        input1: ``(N, D)`` or ``(D,)``.
        input2: the same shape as ``input1``.
        target: ``(N,)`` or ``()`` of 1 and -1.
        margin: in ``[-1, 1]``.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(f"cosine_embedding_loss: expected input1 and input2 of the same shape (N, D) or (D,), but "
                           f"got {tuple(input1.shape)} and {tuple(input2.shape)}")
    _check_margin_target(target, input1.shape[0] if input1.ndim == 2 else 1, "cosine_embedding_loss")
    eps = 1e-12
    dim = input1.ndim - 1
    prod = (input1 * input2).sum(dim)
    mag = ((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)
    cos = prod / mag.sqrt()
    zeros = fl.zeros_like(cos)
    pos = fl.where(target == 1, 1 - cos, zeros)
    neg = fl.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _apply_reduction(pos + neg, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``, reduced.

    ``input1``, ``input2`` and ``target`` (of 1 and -1) have the same shape ``(N,)`` or ``()``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    return _apply_reduction((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def _pairwise_distance(x1: Tensor, x2: Tensor, p: float, eps: float) -> Tensor:
    d = x1 - x2 + eps
    return (d.abs() ** p).sum(-1) ** (1.0 / p) if p != 2 else (d * d).sum(-1).sqrt()


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the ``p``-norm pairwise distance.

    Args:
        anchor: ``(N, D)`` or ``(D,)``.
        positive: the same shape as ``anchor``.
        negative: the same shape as ``anchor``.
        margin: must be positive.
        p: the norm degree.
        eps: added to the differences for numerical stability.
        swap: use ``min(d(a, n), d(p, n))`` as the negative distance (the distance swap).
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not (anchor.ndim == positive.ndim == negative.ndim) or anchor.ndim not in (1, 2):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions (1 or 2), but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and "
                           f"negative {negative.ndim}D inputs")
    d_pos = _pairwise_distance(anchor, positive, p, eps)
    d_neg = _pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = fl.minimum(d_neg, _pairwise_distance(positive, negative, p, eps))
    return _apply_reduction((d_pos - d_neg + margin).clamp_min(0), reduction)
