"""nn.functional: pooling (max, average, adaptive; 1-D and 2-D) and ``lp_pool``.

The poolings are tensor-core's operators (``flambeau.max_pool2d`` ...) under torch's
``nn.functional`` names and signatures; ``return_indices`` gives torch's flat per-plane indices.
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor

__all__ = ["max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
           "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "lp_pool1d", "lp_pool2d"]

max_pool1d = fl.max_pool1d
max_pool2d = fl.max_pool2d
max_pool1d_with_indices = fl.max_pool1d_with_indices
max_pool2d_with_indices = fl.max_pool2d_with_indices
avg_pool1d = fl.avg_pool1d
avg_pool2d = fl.avg_pool2d
adaptive_avg_pool1d = fl.adaptive_avg_pool1d
adaptive_avg_pool2d = fl.adaptive_avg_pool2d
adaptive_max_pool1d = fl.adaptive_max_pool1d
adaptive_max_pool2d = fl.adaptive_max_pool2d


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """:func:`adaptive_max_pool1d` returning ``(values, indices)``."""
    return fl.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """:func:`adaptive_max_pool2d` returning ``(values, indices)``."""
    return fl.adaptive_max_pool2d(input, output_size, True)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling ``(sum over window of x^p)^(1/p)`` over ``(N, C, L)``.

    Args:
        input: ``(N, C, L)`` or ``(C, L)``.
        norm_type: the power ``p``.
        kernel_size: window length.
        stride: defaults to ``kernel_size``.
        ceil_mode: round the output length up.

    Returns:
        ``(N, C, L_out)``.
    """
    k = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    out = fl.avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(k).pow(1.0 / norm_type)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling ``(sum over window of x^p)^(1/p)`` over ``(N, C, H, W)``.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        norm_type: the power ``p``.
        kernel_size: int or pair.
        stride: defaults to ``kernel_size``.
        ceil_mode: round output sizes up.

    Returns:
        ``(N, C, H_out, W_out)``.
    """
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    out = fl.avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kh * kw).pow(1.0 / norm_type)
