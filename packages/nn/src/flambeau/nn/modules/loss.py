"""Loss modules (as ``torch.nn``): each holds its options and calls :mod:`flambeau.nn.functional`.

Class weights (``weight``, ``pos_weight``) are registered as buffers, as in torch: they follow the
module through ``to()`` and appear in its ``state_dict`` when given. The deprecated ``size_average``
and ``reduce`` arguments are mapped to ``reduction`` as torch does.
"""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional import loss as F
from flambeau.nn.modules.module import Module

__all__ = ["L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss", "BCELoss",
           "BCEWithLogitsLoss", "KLDivLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "TripletMarginLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        else:
            self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.weight: Tensor | None


class L1Loss(_Loss):
    """Mean absolute error ``|input - target|``, reduced by ``reduction`` (``"none"``, ``"mean"``, ``"sum"``).

    Shape: ``input`` and ``target`` of the same shape; the output is 0-dim unless ``reduction="none"``.
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error ``(input - target) ** 2``, reduced by ``reduction`` (``"none"``, ``"mean"``, ``"sum"``).

    Shape: ``input`` and ``target`` of the same shape; the output is 0-dim unless ``reduction="none"``.
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Smooth L1 loss: ``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``, ``d = input - target``.

    Args:
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
        beta: the threshold between the quadratic and linear parts (``>= 0``).
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Huber loss: ``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``, ``d = input - target``.

    Args:
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
        delta: the threshold between the quadratic and linear parts (``> 0``).
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities for class-index targets.

    Args:
        weight: ``(C,)`` class weights (a buffer), or None.
        ignore_index: target value that contributes neither loss nor weight.
        reduction: ``"none"``, ``"mean"`` (divided by the summed weights of the targets) or ``"sum"``.

    Shape: input ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)``; target int64 ``(N,)``, ``()`` or ``(N, d1, ...)``.
    """

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross-entropy between logits and class indices or class probabilities (fused log-softmax + NLL).

    Args:
        weight: ``(C,)`` class weights (a buffer), or None.
        ignore_index: target value to ignore (class-index targets only).
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
        label_smoothing: in ``[0, 1]``: the target becomes ``(1 - eps)`` on the class plus ``eps / C``
            spread over all classes.

    Shape: input ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)``; target int64 class indices ``(N,)``,
    ``()`` or ``(N, d1, ...)``, or probabilities of the input's shape.
    """

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities, logs clamped at ``-100``.

    Args:
        weight: weight broadcastable to the input (a buffer), or None.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.

    Shape: ``input`` (values in ``[0, 1]``) and ``target`` of the same shape.
    """

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of ``sigmoid(input)``, computed stably from the logits.

    Args:
        weight: weight broadcastable to the input (a buffer), or None.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
        pos_weight: weight of the positive examples per class (a buffer, broadcast along the last
            dimension), or None.

    Shape: ``input`` and ``target`` of the same shape.
    """

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)
        self.weight: Tensor | None
        self.pos_weight: Tensor | None

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of ``target`` from log-probabilities ``input``.

    Args:
        reduction: ``"none"``, ``"mean"`` (over all elements, with torch's warning), ``"batchmean"``
            (the KL divergence: the sum over the batch size) or ``"sum"``.
        log_target: whether ``target`` holds log-probabilities.
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target``."""
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` for ``y = 1``, ``max(0, cos(x1, x2) - margin)`` for ``y = -1``.

    Args:
        margin: in ``[-1, 1]``.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.

    Shape: ``input1`` and ``input2`` ``(N, D)`` or ``(D,)``; ``target`` ``(N,)`` or ``()``.
    """

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        """The loss of the pairs ``(input1, input2)`` labelled ``target``."""
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -y * (x1 - x2) + margin)``: ``x1`` should rank above ``x2`` where ``y = 1``, below where ``y = -1``.

    Args:
        margin: the margin.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.

    Shape: ``input1``, ``input2`` and ``target`` ``(N,)`` or ``()``.
    """

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        """The loss of ranking ``input1`` against ``input2`` as ``target`` says."""
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the ``p``-norm pairwise distance.

    Args:
        margin: must be positive.
        p: the norm degree of the distance.
        eps: added to the differences for numerical stability.
        swap: use the distance swap (``min(d(a, n), d(p, n))``).
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.

    Shape: anchor, positive and negative ``(N, D)`` or ``(D,)``.
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False, size_average=None,
                 reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """The loss of the triplets."""
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)
