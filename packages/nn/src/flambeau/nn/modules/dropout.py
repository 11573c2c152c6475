"""Dropout modules: :class:`Dropout`, :class:`Dropout1d`, :class:`Dropout2d`, :class:`Dropout3d`,
:class:`AlphaDropout`, :class:`FeatureAlphaDropout` (active in training mode only)."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional import basic as F
from flambeau.nn.modules.module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability ``p`` in training, scaling the rest by ``1 / (1 - p)``.

    Args:
        p: the probability of an element to be zeroed.
        inplace: overwrite the input.

    Shape: ``(*)`` to ``(*)``. In evaluation mode the input is returned unchanged.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` input with probability ``p`` in training.

    Args:
        p: the probability of a channel to be zeroed.
        inplace: overwrite the input.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``(N, C, H, W)`` input with probability ``p`` in training.

    Args:
        p: the probability of a channel to be zeroed.
        inplace: overwrite the input.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``(N, C, D, H, W)`` input with probability ``p`` in training.

    Args:
        p: the probability of a channel to be zeroed.
        inplace: overwrite the input.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout keeping zero mean and unit variance of SELU activations (training mode only).

    Args:
        p: the probability of an element to be dropped.
        inplace: overwrite the input.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels (training mode only).

    Args:
        p: the probability of a channel to be dropped.
        inplace: overwrite the input.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)
