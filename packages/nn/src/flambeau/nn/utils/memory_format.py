"""Converting the weights of convolutions to another memory format, as torch.nn.utils.memory_format."""

from __future__ import annotations

import flambeau as fl

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, kinds: tuple):
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Give the weight of every ``Conv2d`` and ``ConvTranspose2d`` in ``module`` (itself included, recursively)
    ``memory_format`` (``flambeau.channels_last`` or ``flambeau.contiguous_format``); returns ``module``."""
    return _convert(module, memory_format, (fl.nn.Conv2d, fl.nn.ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """As :func:`convert_conv2d_weight_memory_format`, for ``Conv3d`` and ``ConvTranspose3d`` (formats
    ``flambeau.channels_last_3d`` or ``flambeau.contiguous_format``)."""
    return _convert(module, memory_format, (fl.nn.Conv3d, fl.nn.ConvTranspose3d))
