"""Memory formats: ``flambeau.channels_last`` and friends, and the strided layouts they name.

Note [Memory formats are strides]
    A flambeau tensor is a strided view, so a memory format is only an order of strides, as in
    torch: a ``channels_last`` tensor of shape ``(N, C, H, W)`` has its channels innermost (strides
    ``(H*W*C, 1, W*C, C)``). ``x.contiguous(memory_format=flambeau.channels_last)`` makes that
    layout by permute -> contiguous -> permute (recorded by autograd as those views and that copy),
    ``x.is_contiguous(memory_format=...)`` answers from the strides by torch's rule, and
    ``x.to(..., memory_format=...)`` converts then lays out. Operators take such tensors as any
    strided tensor; numpy's elementwise loops keep the input's stride order in their result, so
    ``x_cl + 1`` stays channels-last as torch's does. ``preserve_format`` (the default of ``to``)
    keeps a channels-last input channels-last through a dtype or device copy.

    This module is a leaf (the formats and the stride rules) that operator fronts may import;
    ``flambeau._memory_format_methods`` binds the Tensor methods that take a format.
"""

from __future__ import annotations

from flambeau._tensor import Tensor

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format",
           "legacy_contiguous_format"]


class memory_format:  # noqa: N801 - torch's name
    """A layout of a tensor's elements in memory (``flambeau.channels_last`` ...): see Note [Memory formats
    are strides]. The instances are the module's constants; there are no others."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"flambeau.{self._name}"

    def __reduce__(self):
        return self._name  # pickles as the module-level constant of that name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
legacy_contiguous_format = contiguous_format  # as torch's: the same object

# dimension order from outermost to innermost of each permuted format, by rank
ORDERS = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def check_format(fmt) -> None:
    """TypeError unless ``fmt`` is a :class:`memory_format`."""
    if not isinstance(fmt, memory_format):
        raise TypeError(f"memory_format must be a flambeau.memory_format, got {type(fmt).__name__}")


def _order(t: Tensor, fmt):
    """The physical order of ``fmt`` for ``t``; RuntimeError if its rank does not fit (torch's message)."""
    rank, order = ORDERS[fmt]
    if t.ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt._name} format")
    return order


def _dense_in_order(shape, strides, order) -> bool:
    """torch's ``compute_channels_last_contiguous``: dimensions in ``order`` (outer to inner) are dense;
    dimensions of size 1 may have any stride."""
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def dense_strides(shape, order=None) -> list:
    """Dense strides of ``shape`` with the dimensions in ``order`` (outer to inner; row-major by default)."""
    order = range(len(shape)) if order is None else order
    strides, running = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = running
        running *= max(shape[d], 1)
    return strides


def is_contiguous_as(t: Tensor, fmt) -> bool:
    """Whether ``t`` is dense in the layout of ``fmt`` (False for a permuted format of another rank)."""
    check_format(fmt)
    if fmt not in ORDERS:
        return t.is_contiguous()
    rank, order = ORDERS[fmt]
    return t.ndim == rank and _dense_in_order(t.shape, t.stride(), order)


def suggest_memory_format(t: Tensor):
    """``channels_last(_3d)`` when ``t`` is laid out so and not plainly contiguous, else ``contiguous_format``."""
    for fmt, (rank, order) in ORDERS.items():
        if t.ndim == rank and not t.is_contiguous() and _dense_in_order(t.shape, t.stride(), order):
            return fmt
    return contiguous_format


def inverse_order(order) -> list:
    """The permutation that undoes ``t.permute(*order)``."""
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return inverse


def channels_order(t: Tensor, fmt) -> tuple | None:
    """The dimensions of ``t`` from outer to inner in format ``fmt``, None for the row-major formats (RuntimeError
    for a channels-last format of another rank)."""
    return _order(t, fmt) if fmt in ORDERS else None


def like_layout(input: Tensor, fmt, make):
    """The result of a ``*_like`` factory laid out in ``fmt`` (None or ``preserve_format``: channels-last where
    ``input`` is, else row-major): ``make(shape)`` makes a row-major tensor of a shape, called with ``input``'s
    shape, or with it permuted into the format's order and the result viewed back (its strides then the format's).
    torch's preserve_format also keeps other dense layouts' strides; here those give row-major results."""
    if fmt is None or fmt is preserve_format:
        fmt = suggest_memory_format(input) if input.ndim in (4, 5) else contiguous_format
    check_format(fmt)
    shape = tuple(input.shape)
    if fmt not in ORDERS:
        return make(shape)
    order = _order(input, fmt)
    return make(tuple(shape[d] for d in order)).permute(*inverse_order(order))


def as_format(t: Tensor, fmt, contiguous) -> Tensor:
    """``t`` itself if dense in ``fmt``, else a copy laid out so (``contiguous``: the plain operator)."""
    if fmt not in ORDERS:
        return contiguous(t)
    order = _order(t, fmt)
    if _dense_in_order(t.shape, t.stride(), order):
        return t
    return contiguous(t.permute(*order)).permute(*inverse_order(order))
