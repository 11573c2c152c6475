"""Sliding-block layers (as ``torch.nn.modules.fold``): :class:`Unfold` (im2col) and :class:`Fold` (col2im).

Both store their arguments as given (ints or pairs, as torch prints them) and call
:func:`~flambeau.nn.functional.unfold` / :func:`~flambeau.nn.functional.fold`.
"""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional.conv import fold, unfold
from flambeau.nn.modules.module import Module

__all__ = ["Fold", "Unfold"]


class Fold(Module):
    """Combine an array of sliding local blocks into a tensor, summing where blocks overlap (col2im).

    Column ``l`` of the input holds the ``C * kh * kw`` values of block ``l``; the blocks are laid
    out over the (padded) output of size ``output_size`` with the given stride and dilation, and
    the padding is cropped. ``Fold`` is the adjoint of :class:`Unfold`: ``fold(unfold(x))`` is ``x``
    times the number of blocks that cover each element.

    Args:
        output_size: int or pair, the spatial size ``(H, W)`` of the output.
        kernel_size: int or pair, the block size.
        dilation: int or pair, the spacing between the elements of a block.
        padding: int or pair, implicit zeros added on both sides before the blocks are laid out.
        stride: int or pair, the step between blocks.

    Shape: input ``(N, C * kh * kw, L)`` or ``(C * kh * kw, L)`` with
    ``L = prod((output_size + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1)``;
    output ``(N, C, H, W)`` or ``(C, H, W)``.
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        """Fold the blocks of ``input``."""
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    """Extract sliding local blocks from a batched tensor (im2col).

    Each block of ``kernel_size`` (spaced by ``dilation``, stepping by ``stride``, over the input
    padded with ``padding`` zeros) becomes one column of ``C * kh * kw`` values, channel-major.

    Args:
        kernel_size: int or pair, the block size.
        dilation: int or pair, the spacing between the elements of a block.
        padding: int or pair, implicit zeros on both sides of each spatial dimension.
        stride: int or pair, the step between blocks.

    Shape: input ``(N, C, H, W)`` or ``(C, H, W)``; output ``(N, C * kh * kw, L)`` or
    ``(C * kh * kw, L)`` with ``L = prod((size + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1)``.
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        """Extract the blocks of ``input``."""
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, stride={self.stride}"
