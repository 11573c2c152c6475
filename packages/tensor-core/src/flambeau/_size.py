"""``flambeau.Size``: the tuple type of tensor shapes, as ``torch.Size``; and shape arguments as torch takes them."""

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


def normalize_shape(size, argname: str = "size") -> tuple:
    """Shape arguments as torch takes them: ``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` or a Size."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    try:
        shape = tuple(int(s.__index__()) for s in size)
    except (AttributeError, TypeError):
        raise TypeError(f"{argname} must be a tuple of ints, but got {tuple(size)!r}") from None
    for n in shape:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(shape)}")
    return shape
