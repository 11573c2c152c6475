"""torchvision.utils.save_image: a grid of images written as a PNG (through Pillow when installed, else .npy)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["make_grid", "save_image"]


def make_grid(tensor, nrow: int = 8, padding: int = 2, normalize: bool = False, **kwargs) -> np.ndarray:
    """(B, C, H, W) or (C, H, W) tensor -> an HxWxC float array in [0, 1] tiling the images, ``nrow`` per row."""
    arr = np.asarray(tensor.detach().cpu().numpy(), dtype=np.float32)
    if arr.ndim == 3:
        arr = arr[None]
    if normalize:
        lo, hi = arr.min(), arr.max()
        arr = (arr - lo) / max(hi - lo, 1e-5)
    b, c, h, w = arr.shape
    cols = min(nrow, b)
    rows = math.ceil(b / cols)
    grid = np.zeros((rows * (h + padding) + padding, cols * (w + padding) + padding, c), np.float32)
    for i in range(b):
        r, k = divmod(i, cols)
        y, x = padding + r * (h + padding), padding + k * (w + padding)
        grid[y:y + h, x:x + w] = arr[i].transpose(1, 2, 0)
    return np.clip(grid, 0, 1)


def save_image(tensor, fp, nrow: int = 8, padding: int = 2, normalize: bool = False, **kwargs) -> None:
    grid = (make_grid(tensor, nrow, padding, normalize) * 255).astype(np.uint8)
    try:
        from PIL import Image
    except ImportError:
        np.save(str(fp) + ".npy", grid)
        return
    Image.fromarray(grid[..., 0] if grid.shape[2] == 1 else grid).save(fp)
