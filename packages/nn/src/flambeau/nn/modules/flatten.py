"""Reshaping modules: :class:`Flatten` and :class:`Unflatten` (for use in :class:`Sequential`)."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn.modules.module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten dimensions ``start_dim`` to ``end_dim`` into one.

    Args:
        start_dim: first dimension to flatten (default 1: the batch dimension is kept).
        end_dim: last dimension to flatten.

    Shape: ``(*, S_start, ..., S_end, *)`` to ``(*, prod(S_start..S_end), *)``.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dimension ``dim`` into the shape ``unflattened_size``.

    Args:
        dim: the dimension to unflatten.
        unflattened_size: a tuple (or list, or Size) of ints whose product is the size of ``dim``
            (one entry may be -1).

    Shape: ``(*, S_dim, *)`` to ``(*, U_1, ..., U_n, *)``.
    """

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        self._require_tuple_int(unflattened_size)
        self.dim = dim
        self.unflattened_size = unflattened_size

    def _require_tuple_int(self, input) -> None:
        if isinstance(input, (tuple, list)):
            for idx, elem in enumerate(input):
                if not isinstance(elem, int):
                    raise TypeError("unflattened_size must be tuple of ints, "
                                    f"but found element of type {type(elem).__name__} at pos {idx}")
            return
        raise TypeError(f"unflattened_size must be a tuple of ints, but found type {type(input).__name__}")

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
