"""The remaining loss modules of ``torch.nn`` (CTC, Gaussian/Poisson NLL, margin losses), over
:mod:`flambeau.nn._functional.loss_more`, plus the legacy ``NLLLoss2d`` alias.
"""

from __future__ import annotations

import warnings

from flambeau import Tensor
from flambeau.nn._functional import loss_more as F
from flambeau.nn.modules.loss import NLLLoss, _Loss, _WeightedLoss

__all__ = ["CTCLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
           "MultiLabelSoftMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginWithDistanceLoss",
           "NLLLoss2d"]


class CTCLoss(_Loss):
    """Connectionist Temporal Classification loss (see :func:`flambeau.nn.functional.ctc_loss`).

    Args:
        blank: the blank class index.
        reduction: ``"none"``, ``"mean"`` (each loss divided by its target length, then averaged) or ``"sum"``.
        zero_infinity: replace infinite losses (impossible alignments) and their gradients by zero.

    Shape: ``log_probs`` ``(T, N, C)`` or ``(T, C)``; ``targets`` ``(N, S)`` or concatenated
    ``(sum(target_lengths),)``; ``input_lengths`` and ``target_lengths`` ``(N,)``.
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths, target_lengths) -> Tensor:
        """The CTC loss of ``log_probs`` against ``targets``."""
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log-likelihood of ``target`` under means ``input`` and variances ``var``.

    Args:
        full: include the constant term.
        eps: the clamp of ``var``.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var) -> Tensor:
        """The loss of ``target`` under ``N(input, var)``."""
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` where ``y == 1`` and ``max(0, margin - x)`` where ``y == -1``, reduced."""

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target`` (1 or -1)."""
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss (see :func:`flambeau.nn.functional.multi_margin_loss`).

    Args:
        p: 1 or 2.
        margin: the margin.
        weight: optional ``(C,)`` class weights (a buffer).
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.ndim}D instead")
        self.p = p
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` ``(N, C)`` against class indices ``target`` ``(N,)``."""
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss; ``target`` lists each sample's classes, ended by ``-1``."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` ``(N, C)`` against ``target`` ``(N, C)``."""
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Multi-label one-versus-all logistic loss, averaged over the classes; ``weight`` ``(C,)`` optional."""

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` ``(N, C)`` against 0/1 ``target`` ``(N, C)``."""
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """Poisson negative log-likelihood (see :func:`flambeau.nn.functional.poisson_nll_loss`).

    Args:
        log_input: ``input`` is the log of the rate (the loss is ``exp(input) - target * input``).
        full: add the Stirling approximation term.
        eps: added to ``input`` before the log when ``log_input`` is False.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
    """

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None, eps: float = 1e-8, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        """The loss of the predicted rates against the counts ``target``."""
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """Two-class logistic loss ``log(1 + exp(-y * x))``, reduced."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input`` against ``target`` (1 or -1)."""
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """Triplet margin loss with a custom distance.

    See :func:`~flambeau.nn.functional.triplet_margin_with_distance_loss`.

    Args:
        distance_function: ``(x1, x2) -> distances``; defaults to :func:`~flambeau.nn.functional.pairwise_distance`.
        margin: must be positive.
        swap: use the distance swap.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
    """

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             f"instead")
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """The loss of the triplets."""
        return F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """Deprecated alias of :class:`NLLLoss` (torch keeps it for old code; :class:`NLLLoss` takes ``(N, C, H, W)``)."""

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean") -> None:
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and see "
                      "https://pytorch.org/docs/main/nn.html#flambeau.nn.NLLLoss for more details.", FutureWarning,
                      stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
