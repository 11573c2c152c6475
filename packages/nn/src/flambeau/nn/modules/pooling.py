"""Pooling layers: max, average and adaptive pooling, max unpooling (as ``torch.nn.modules.pooling``).

Each layer stores its hyperparameters as torch does (1-D layers keep 1-tuples where torch does),
``forward`` is one call into ``nn.functional`` and ``extra_repr`` prints torch's text.
"""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional import pooling as F
from flambeau.nn.modules.module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "LPPool1d", "LPPool2d", "MaxUnpool1d",
           "MaxUnpool2d", "MaxUnpool3d"]


def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling over ``(N, C, L)`` inputs.

    Args:
        kernel_size: the window length.
        stride: defaults to ``kernel_size``.
        padding: implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: spacing between window elements.
        return_indices: also return the positions of the maxima (for ``MaxUnpool``-style uses).
        ceil_mode: round the output length up.

    Shape: input ``(N, C, L)`` or ``(C, L)``; output ``(N, C, L_out)`` with
    ``L_out = (L + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1``.
    """

    def forward(self, input: Tensor):
        """Pool ``input`` (and return the indices too with ``return_indices``)."""
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling over ``(N, C, H, W)`` inputs.

    Args:
        kernel_size: int or pair.
        stride: int or pair; defaults to ``kernel_size``.
        padding: implicit ``-inf`` padding (at most half the effective kernel size).
        dilation: spacing between window elements.
        return_indices: also return the flat per-plane positions ``ih * W + iw`` of the maxima.
        ceil_mode: round output sizes up.

    Shape: input ``(N, C, H, W)`` or ``(C, H, W)``; output ``(N, C, H_out, W_out)`` with
    ``H_out = (H + 2 * padding - dilation * (kH - 1) - 1) // stride + 1`` (likewise ``W_out``).
    """

    def forward(self, input: Tensor):
        """Pool ``input`` (and return the indices too with ``return_indices``)."""
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling over ``(N, C, D, H, W)`` inputs.

    Args:
        kernel_size: int or triple.
        stride: int or triple; defaults to ``kernel_size``.
        padding: implicit ``-inf`` padding (at most half the effective kernel size).
        dilation: spacing between window elements.
        return_indices: also return the flat per-volume positions ``(d * H + h) * W + w`` of the maxima.
        ceil_mode: round output sizes up.

    Shape: input ``(N, C, D, H, W)`` or ``(C, D, H, W)``; output ``(N, C, D_out, H_out, W_out)`` with
    ``D_out = (D + 2 * padding - dilation * (kD - 1) - 1) // stride + 1`` (likewise the others).
    """

    def forward(self, input: Tensor):
        """Pool ``input`` (and return the indices too with ``return_indices``)."""
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class _AvgPoolNd(Module):
    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _DivisorAvgPoolNd(_AvgPoolNd):
    """The 2-D and 3-D average poolings (which take ``divisor_override``)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override=None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override


class AvgPool1d(_AvgPoolNd):
    """1-D average pooling over ``(N, C, L)`` inputs.

    Args:
        kernel_size: the window length.
        stride: defaults to ``kernel_size``.
        padding: implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: round the output length up.
        count_include_pad: count the zero padding in the divisor.

    Shape: input ``(N, C, L)`` or ``(C, L)``; output ``(N, C, L_out)`` with
    ``L_out = (L + 2 * padding - kernel_size) // stride + 1``.
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(_DivisorAvgPoolNd):
    """2-D average pooling over ``(N, C, H, W)`` inputs.

    Args:
        kernel_size: int or pair.
        stride: int or pair; defaults to ``kernel_size``.
        padding: implicit zero padding (at most half the kernel size).
        ceil_mode: round output sizes up.
        count_include_pad: count the zero padding in the divisor.
        divisor_override: if given, the divisor of every window.

    Shape: input ``(N, C, H, W)`` or ``(C, H, W)``; output ``(N, C, H_out, W_out)`` with
    ``H_out = (H + 2 * padding - kH) // stride + 1`` (likewise ``W_out``).
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AvgPool3d(_DivisorAvgPoolNd):
    """3-D average pooling over ``(N, C, D, H, W)`` inputs.

    Args:
        kernel_size: int or triple.
        stride: int or triple; defaults to ``kernel_size``.
        padding: implicit zero padding (at most half the kernel size).
        ceil_mode: round output sizes up.
        count_include_pad: count the zero padding in the divisor.
        divisor_override: if given, the divisor of every window.

    Shape: input ``(N, C, D, H, W)`` or ``(C, D, H, W)``; output ``(N, C, D_out, H_out, W_out)`` with
    ``D_out = (D + 2 * padding - kD) // stride + 1`` (likewise the others).
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _AdaptivePoolNd(Module):
    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """1-D adaptive average pooling to a fixed output length.

    Args:
        output_size: the output length.

    Shape: input ``(N, C, L)`` or ``(C, L)``; output ``(N, C, output_size)``.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """2-D adaptive average pooling to a fixed output size (``1`` gives global average pooling).

    Args:
        output_size: int or pair ``(H_out, W_out)``; None in the pair keeps the input's size.

    Shape: input ``(N, C, H, W)`` or ``(C, H, W)``; output ``(N, C, H_out, W_out)``.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.adaptive_avg_pool2d(input, self.output_size)


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """1-D adaptive max pooling to a fixed output length.

    Args:
        output_size: the output length.
        return_indices: also return the positions of the maxima.

    Shape: input ``(N, C, L)`` or ``(C, L)``; output ``(N, C, output_size)``.
    """

    def forward(self, input: Tensor):
        """Pool ``input`` (and return the indices too with ``return_indices``)."""
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """2-D adaptive max pooling to a fixed output size.

    Args:
        output_size: int or pair ``(H_out, W_out)``; None in the pair keeps the input's size.
        return_indices: also return the flat per-plane positions of the maxima.

    Shape: input ``(N, C, H, W)`` or ``(C, H, W)``; output ``(N, C, H_out, W_out)``.
    """

    def forward(self, input: Tensor):
        """Pool ``input`` (and return the indices too with ``return_indices``)."""
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class _LPPoolNd(Module):
    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """1-D power-average pooling ``(sum x^p)^(1/p)`` over windows.

    Args:
        norm_type: the power ``p``.
        kernel_size: window length.
        stride: defaults to ``kernel_size``.
        ceil_mode: round the output length up.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """2-D power-average pooling ``(sum x^p)^(1/p)`` over windows.

    Args:
        norm_type: the power ``p``.
        kernel_size: int or pair.
        stride: defaults to ``kernel_size``.
        ceil_mode: round output sizes up.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class _MaxUnpoolNd(Module):
    _dims = 1

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()

        def ntuple(v):
            return tuple(v) if isinstance(v, (tuple, list)) else (v,) * self._dims

        self.kernel_size = ntuple(kernel_size)
        self.stride = ntuple(stride if stride is not None else kernel_size)
        self.padding = ntuple(padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool1d`: the maxima go back to their positions, the rest is zero.

    Args:
        kernel_size: int or 1-tuple, as given to the pooling.
        stride: defaults to ``kernel_size``.
        padding: as given to the pooling.

    Shape: input and indices ``(N, C, L_in)`` or ``(C, L_in)``; output ``(N, C, L_out)`` with
    ``L_out = (L_in - 1) * stride - 2 * padding + kernel_size``, or ``output_size`` given to ``forward``.
    """

    _dims = 1

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        """Scatter ``input`` to ``indices`` (``output_size`` picks among the valid sizes)."""
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool2d`: the maxima go back to their positions, the rest is zero.

    Args:
        kernel_size: int or pair, as given to the pooling.
        stride: defaults to ``kernel_size``.
        padding: as given to the pooling.

    Shape: input and indices ``(N, C, H_in, W_in)`` or ``(C, H_in, W_in)``; output ``(N, C, H_out, W_out)``
    with ``H_out = (H_in - 1) * stride - 2 * padding + kH`` (likewise ``W_out``), or ``output_size``.
    """

    _dims = 2

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        """Scatter ``input`` to ``indices`` (``output_size`` picks among the valid sizes)."""
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool3d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool3d`: the maxima go back to their positions, the rest is zero.

    Args:
        kernel_size: int or triple, as given to the pooling.
        stride: defaults to ``kernel_size``.
        padding: as given to the pooling.

    Shape: input and indices ``(N, C, D_in, H_in, W_in)`` or ``(C, D_in, H_in, W_in)``; output
    ``(N, C, D_out, H_out, W_out)`` with ``D_out = (D_in - 1) * stride - 2 * padding + kD`` (likewise the
    others), or ``output_size``.
    """

    _dims = 3

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        """Scatter ``input`` to ``indices`` (``output_size`` picks among the valid sizes)."""
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)
