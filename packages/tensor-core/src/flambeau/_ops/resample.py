"""Resampling operators (interpolate nearest/bilinear, pixel_shuffle). Being written."""

__all__: list[str] = []
