"""Distance modules (as ``torch.nn``): :class:`CosineSimilarity` and :class:`PairwiseDistance`."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional.basic import cosine_similarity, pairwise_distance
from flambeau.nn.modules.module import Module

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Module):
    """Cosine similarity ``x1 . x2 / max(||x1|| * ||x2||, eps)`` along ``dim``.

    Args:
        dim: the dimension of the vectors.
        eps: lower bound of the norms' product.

    Shape: ``x1`` and ``x2`` broadcastable; the output drops ``dim``.
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The similarities of ``x1`` and ``x2``."""
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dimension.

    Args:
        p: the norm degree.
        eps: added to the differences.
        keepdim: keep the last dimension (of size 1).

    Shape: ``x1`` and ``x2`` ``(N, D)`` or ``(D,)``; output ``(N,)`` or ``()``.
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The distances of ``x1`` and ``x2``."""
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
