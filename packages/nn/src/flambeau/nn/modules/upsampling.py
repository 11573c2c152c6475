"""Resampling layers: :class:`Upsample`, :class:`UpsamplingNearest2d`, :class:`UpsamplingBilinear2d`,
:class:`PixelShuffle`, :class:`PixelUnshuffle` (as ``torch.nn``)."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional.resample import interpolate, pixel_shuffle, pixel_unshuffle
from flambeau.nn.modules.module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle"]


class Upsample(Module):
    """Upsample ``(N, C, W)`` or ``(N, C, H, W)`` inputs with :func:`~flambeau.nn.functional.interpolate`.

    Args:
        size: output spatial size (int or tuple); exclusive with ``scale_factor``.
        scale_factor: multiplier(s) of the spatial size.
        mode: ``'nearest'``, ``'linear'`` or ``'bilinear'``.
        align_corners: for the linear modes, align the corner pixels (default False).
        recompute_scale_factor: use ``in / out`` instead of ``scale_factor`` in the kernels.
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        """Resize ``input``."""
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """2-D nearest-neighbour upsampling: ``Upsample(size, scale_factor, mode='nearest')``.

    Args:
        size: output ``(H, W)`` or an int; scale_factor: multiplier(s).
    """

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """2-D bilinear upsampling with ``align_corners=True`` (torch's definition).

    Args:
        size: output ``(H, W)`` or an int; scale_factor: multiplier(s).
    """

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """``(*, C * r**2, H, W)`` to ``(*, C, H * r, W * r)`` (see :func:`~flambeau.pixel_shuffle`).

    Args:
        upscale_factor: ``r``.
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        """Rearrange ``input``."""
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H * r, W * r)`` to ``(*, C * r**2, H, W)`` (see :func:`~flambeau.pixel_unshuffle`).

    Args:
        downscale_factor: ``r``.
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        """Rearrange ``input``."""
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
