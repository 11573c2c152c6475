"""The Tensor methods that take a memory format: ``contiguous``, ``to``, ``is_contiguous`` and ``dim_order``.

See Note [Memory formats are strides] in ``flambeau._memory_format``. ``contiguous`` and ``to`` are
bound as dunders of their operators (``OpDef.dunders``), as ``to`` already was, so dispatch modes see
them under the operator's name (Note [Dispatch modes]) and the operator's own front does the copying.
"""

from __future__ import annotations

from flambeau._memory_format import (
    as_format,
    check_format,
    contiguous_format,
    is_contiguous_as,
    preserve_format,
    suggest_memory_format,
)
from flambeau._ops._registry import OPS
from flambeau._tensor import Tensor

__all__: list[str] = []

_CONTIGUOUS = OPS["contiguous"]
_TO_COPY = OPS["to_copy"]
_contiguous = _CONTIGUOUS.fn
_to = _TO_COPY.dunders["to"]
_row_major = Tensor.is_contiguous


def contiguous(self: Tensor, memory_format=contiguous_format) -> Tensor:
    """``self`` if dense in ``memory_format`` (default: row-major), else a copy laid out so."""
    if memory_format is contiguous_format or memory_format is preserve_format or memory_format is None:
        return _contiguous(self)
    check_format(memory_format)
    return as_format(self, memory_format, _contiguous)


def to(self: Tensor, *args, memory_format=preserve_format, **kwargs) -> Tensor:
    """``Tensor.to`` (dtype, device, ``copy``, ``non_blocking``) with ``memory_format``: the layout of a copy.

    ``preserve_format`` (the default) keeps a channels-last input channels-last when a copy is made.
    """
    out = _to(self, *args, **kwargs) if kwargs else _to(self, *args)  # (the common call, kept cheap)
    if memory_format is preserve_format or memory_format is None:
        if out is self or self._data.ndim < 4:
            return out
        memory_format = suggest_memory_format(self)
        if memory_format is contiguous_format:
            return out
    check_format(memory_format)
    return as_format(out, memory_format, _contiguous)


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
    _TO_COPY.dunders["to"] = to
    Tensor.to = to


_bind()
