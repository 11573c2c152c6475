"""nn.functional: spatial transformers (``affine_grid``, ``grid_sample``), as torch.

``grid_sample`` checks its arguments with torch's messages and calls the tensor-core operator
``grid_sampler_2d`` or ``grid_sampler_3d`` (CPU and CUDA kernels; their backward gives the gradients
of the input and of the grid). ``affine_grid`` is a composite: the base grid of normalized pixel centres times ``theta``
(one batched matmul), so autograd differentiates it with respect to ``theta``.
"""

from __future__ import annotations

import warnings

import flambeau as fl
from flambeau import Tensor

__all__ = ["affine_grid", "grid_sample"]

_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
_DEFAULT_CHANGED = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                    "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                    "grid_sample for details.")


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """Sample ``input`` at the locations ``grid`` gives (spatial transformer networks).

    Args:
        input: floating ``(N, C, H, W)`` or volumetric ``(N, C, D, H, W)`` tensor.
        grid: ``(N, H_out, W_out, 2)`` (or ``(N, D_out, H_out, W_out, 3)``) tensor of ``input``'s dtype
            and device; ``grid[n, h, w] = (x, y)`` are normalized coordinates, ``(-1, -1)`` the
            top-left of ``input`` and ``(1, 1)`` its bottom-right (``z`` runs along ``D``).
        mode: ``'bilinear'`` (trilinear for 5-D), ``'nearest'`` (halves round to even, as torch) or
            ``'bicubic'`` (4-D only; Keys' cubic convolution, ``A = -0.75``).
        padding_mode: the value of locations outside the input: ``'zeros'``, ``'border'`` (the
            nearest edge value) or ``'reflection'`` (reflected at the border).
        align_corners: ``-1`` and ``1`` are the centres of the corner pixels (True) or their outer
            edges (False, the default; None warns as torch does).

    Returns:
        ``(N, C, H_out, W_out)`` (or ``(N, C, D_out, H_out, W_out)``) tensor of ``input``'s dtype,
        differentiable with respect to ``input`` and ``grid`` (the grid's gradient is zero for
        ``'nearest'``).
    """
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in _PADDINGS:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_DEFAULT_CHANGED, stacklevel=2)
        align_corners = False
    # torch dispatches on the input's rank: 4-D to the 2-D sampler, anything else to the 3-D one (whose
    # checks then name the expected 5-D shapes)
    sampler = fl.grid_sampler_2d if isinstance(input, Tensor) and input.ndim == 4 else fl.grid_sampler_3d
    return sampler(input, grid, _MODES[mode], _PADDINGS[padding_mode], bool(align_corners))


def _linspace_from_neg_one(steps: int, align_corners: bool, like: Tensor) -> Tensor:
    # torch's linspace_from_neg_one: the normalized pixel centres along one dimension
    if steps <= 1:
        return fl.zeros(1, dtype=like.dtype, device=like.device)
    r = fl.linspace(-1, 1, steps, dtype=like.dtype, device=like.device)
    return r if align_corners else r * ((steps - 1) / steps)


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid of the affine maps ``theta`` (for :func:`grid_sample`).

    Args:
        theta: floating ``(N, 2, 3)`` (2-D) or ``(N, 3, 4)`` (3-D) batch of affine matrices mapping
            output coordinates to input coordinates, both normalized to ``[-1, 1]``.
        size: the output's size, ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
        align_corners: as in :func:`grid_sample` (use the same value for both).

    Returns:
        ``(N, H, W, 2)`` or ``(N, D, H, W, 3)`` grid of ``theta``'s dtype, differentiable with respect
        to ``theta``.
    """
    if not isinstance(theta, Tensor):
        raise TypeError(f"affine_grid(): argument 'theta' must be Tensor, not {type(theta).__name__}")
    if align_corners is None:
        warnings.warn(_DEFAULT_CHANGED, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. "
                             f"Got {theta.shape}.")
        spatial = tuple(size[-2:])
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. "
                             f"Got {theta.shape}.")
        spatial = tuple(size[-3:])
    else:
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n = int(size[0])
    if theta.shape[0] != n:
        raise RuntimeError(f"affine_grid(): expected theta's batch size {theta.shape[0]} to equal size[0] = {n}")
    spatial = tuple(int(s) for s in spatial)
    # coordinates in (x, y[, z]) order: x runs along the last dimension
    axes = [_linspace_from_neg_one(s, align_corners, theta) for s in reversed(spatial)]
    k = len(spatial)
    cols = []
    for i, ax in enumerate(axes):
        view = [1] * k
        view[k - 1 - i] = ax.shape[0]
        cols.append(ax.reshape(view).expand(*spatial))
    cols.append(fl.ones(spatial, dtype=theta.dtype, device=theta.device))
    base = fl.stack(cols, -1).reshape(1, -1, k + 1)
    grid = base @ theta.transpose(1, 2)
    return grid.reshape(n, *spatial, k)
