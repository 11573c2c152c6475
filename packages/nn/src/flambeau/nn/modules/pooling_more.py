"""Adaptive 3-D pooling, :class:`LPPool3d` and fractional max pooling (as ``torch.nn``)."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional import pooling_more as F
from flambeau.nn.modules.module import Module
from flambeau.nn.modules.pooling import _AdaptiveMaxPoolNd, _AdaptivePoolNd, _LPPoolNd

__all__ = ["AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "LPPool3d", "FractionalMaxPool2d", "FractionalMaxPool3d"]


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    """3-D adaptive average pooling to a fixed output size.

    Args:
        output_size: int or triple ``(D_out, H_out, W_out)``; None in the triple keeps the input's size.

    Shape: input ``(N, C, D, H, W)`` or ``(C, D, H, W)``; output ``(N, C, D_out, H_out, W_out)``.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """3-D adaptive max pooling to a fixed output size.

    Args:
        output_size: int or triple; None in the triple keeps the input's size.
        return_indices: also return the flat per-volume positions of the maxima.

    Shape: input ``(N, C, D, H, W)`` or ``(C, D, H, W)``; output ``(N, C, D_out, H_out, W_out)``.
    """

    def forward(self, input: Tensor):
        """Pool ``input`` (and return the indices too with ``return_indices``)."""
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class LPPool3d(_LPPoolNd):
    """3-D power-average pooling ``(sum x^p)^(1/p)`` over windows.

    Args:
        norm_type: the power ``p``.
        kernel_size: int or triple.
        stride: defaults to ``kernel_size``.
        ceil_mode: round output sizes up.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Pool ``input``."""
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class _FractionalMaxPoolNd(Module):
    _dims = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples: Tensor | None = None) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = self._ntuple(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = self._ntuple(output_size) if output_size is not None else None
        self.output_ratio = self._ntuple(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def _ntuple(self, value) -> tuple:
        return tuple(value) if isinstance(value, (tuple, list)) else (value,) * self._dims

    def forward(self, input: Tensor):
        """Pool ``input`` (and return the indices too with ``return_indices``)."""
        function = F.fractional_max_pool2d if self._dims == 2 else F.fractional_max_pool3d
        return function(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                        _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2-D fractional max pooling (Graham, 2014): windows at pseudo-random, overlapping-free strides.

    Args:
        kernel_size: int or pair, the window.
        output_size: int or pair; or
        output_ratio: float or pair in ``(0, 1)``, the output size as a ratio of the input's.
        return_indices: also return the flat ``h * W + w`` positions of the maxima.
        _random_samples: fixed ``(N, C, 2)`` samples in ``[0, 1)`` (a buffer); drawn from flambeau's
            generator at each call when None.

    Shape: input ``(N, C, H, W)`` or ``(C, H, W)``; output ``(N, C, H_out, W_out)``.
    """

    _dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-D fractional max pooling; the arguments are :class:`FractionalMaxPool2d`'s with triples.

    Shape: input ``(N, C, T, H, W)`` or ``(C, T, H, W)``; ``_random_samples`` ``(N, C, 3)``.
    """

    _dims = 3
