"""The Tensor methods that take a memory format: ``contiguous``, ``is_contiguous`` and ``dim_order``
(``to`` takes ``memory_format`` in its own front, in ``flambeau._ops.core``).

See Note [Memory formats are strides] in ``flambeau._memory_format``. ``contiguous`` is bound as a
dunder of its operator (``OpDef.dunders``), as ``to`` is, so dispatch modes see it under the operator's
name (Note [Dispatch modes]) and the operator's own front does the copying.
"""

from __future__ import annotations

from flambeau._memory_format import (
    as_format,
    check_format,
    contiguous_format,
    is_contiguous_as,
    preserve_format,
)
from flambeau._ops._registry import OPS
from flambeau._tensor import Tensor

__all__: list[str] = []

_CONTIGUOUS = OPS["contiguous"]
_contiguous = _CONTIGUOUS.fn
_row_major = Tensor.is_contiguous


def contiguous(self: Tensor, memory_format=contiguous_format) -> Tensor:
    """``self`` if dense in ``memory_format`` (default: row-major), else a copy laid out so."""
    if memory_format is contiguous_format or memory_format is preserve_format or memory_format is None:
        return _contiguous(self)
    check_format(memory_format)
    return as_format(self, memory_format, _contiguous)


def is_contiguous(self: Tensor, memory_format=contiguous_format) -> bool:
    """Whether the elements are dense in ``memory_format`` (row-major by default), by torch's stride rule."""
    if memory_format is contiguous_format or memory_format is None or memory_format is preserve_format:
        return _row_major(self)
    return is_contiguous_as(self, memory_format)


def dim_order(self: Tensor, *, ambiguity_check: bool = False) -> tuple:
    """The dimensions from outermost to innermost in memory (by decreasing stride; ties keep their order).

    Raises:
        RuntimeError: with ``ambiguity_check=True``, when two dimensions share a stride and a size-1
            dimension makes the order ambiguous (torch's check).
    """
    strides = self.stride()
    order = tuple(sorted(range(self.ndim), key=lambda d: -strides[d]))
    if ambiguity_check and len(set(strides)) != len(strides) and 1 in self.shape:
        raise RuntimeError("The tensor does not have unique dim order, or cannot map to a single memory format.")
    return order


def _bind() -> None:
    Tensor.is_contiguous = is_contiguous
    Tensor.dim_order = dim_order
    _CONTIGUOUS.dunders["contiguous"] = contiguous
    Tensor.contiguous = contiguous


_bind()
