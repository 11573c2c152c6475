"""Convolution operators (conv1d, conv2d, conv_transpose2d). Being written."""

__all__: list[str] = []
