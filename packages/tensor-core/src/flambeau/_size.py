"""``flambeau.Size``: the tuple type of tensor shapes, as ``torch.Size``."""

from __future__ import annotations

import math

__all__ = ["Size"]


class Size(tuple):
    """The shape of a tensor: a tuple of ints with a torch-like repr and :meth:`numel`."""

    __slots__ = ()

    def numel(self) -> int:
        """Number of elements a tensor of this shape holds."""
        return math.prod(self)

    def __repr__(self) -> str:
        return f"flambeau.Size([{', '.join(map(str, self))}])"

    def __getitem__(self, item):
        r = tuple.__getitem__(self, item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __reduce__(self):
        return (Size, (tuple(self),))
