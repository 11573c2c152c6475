"""``flambeau.Size``: the tuple type of tensor shapes, as ``torch.Size``; shape arguments as torch takes them,
and broadcasting of shapes with torch's messages (a leaf module: kernels of every device use it too)."""

from __future__ import annotations

import math

__all__ = ["Size", "broadcast_error", "broadcast_shapes", "normalize_shape"]


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


def broadcast_shapes(*shapes) -> tuple:
    """The broadcast of ``shapes``; RuntimeError with torch's message if they don't broadcast."""
    if len(shapes) == 2:  # the common cases of binary operators, without the general loop
        a, b = shapes
        if a == b or not b:
            return tuple(a)
        if not a:
            return tuple(b)
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n != 1:
                if out[i] == 1:
                    out[i] = n
                elif out[i] != n:
                    raise broadcast_error(tuple(out), s, i - ndim)
    return tuple(out)


def broadcast_error(shape_a: tuple, shape_b: tuple, axis: int | None = None) -> RuntimeError:
    """torch's message for two shapes that don't broadcast (computed once we know they don't)."""
    ndim = max(len(shape_a), len(shape_b))
    a = (1,) * (ndim - len(shape_a)) + tuple(shape_a)
    b = (1,) * (ndim - len(shape_b)) + tuple(shape_b)
    for i in range(ndim - 1, -1, -1):
        if a[i] != b[i] and a[i] != 1 and b[i] != 1:
            return RuntimeError(
                f"The size of tensor a ({a[i]}) must match the size of tensor b ({b[i]}) at "
                f"non-singleton dimension {i}"
            )
    return RuntimeError(f"shapes {list(shape_a)} and {list(shape_b)} cannot be broadcast together")
