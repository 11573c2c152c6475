"""torchvision's transforms that the ported programs compose, on ``uint8`` HxW(xC) numpy images."""

from __future__ import annotations

import numpy as np
from _ported_framework import framework

__all__ = ["CenterCrop", "Compose", "Lambda", "Normalize", "Resize", "ToTensor"]


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class Lambda:
    def __init__(self, lambd):
        self.lambd = lambd

    def __call__(self, x):
        return self.lambd(x)


class ToTensor:
    """HxW or HxWxC ``uint8`` -> float32 tensor CxHxW in [0, 1], as torchvision's."""

    def __call__(self, image):
        arr = np.asarray(image)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        arr = np.ascontiguousarray(arr.transpose(2, 0, 1)).astype(np.float32) / 255.0
        return framework().from_numpy(arr)


class Normalize:
    def __init__(self, mean, std, inplace: bool = False):
        self.mean, self.std = list(mean), list(std)

    def __call__(self, t):
        fw = framework()
        mean = fw.tensor(self.mean, dtype=t.dtype).view(-1, 1, 1)
        std = fw.tensor(self.std, dtype=t.dtype).view(-1, 1, 1)
        return (t - mean) / std


class Resize:
    """Nearest-neighbour resize of the shorter side to ``size`` (an int) or to ``(h, w)``."""

    def __init__(self, size, interpolation=None):
        self.size = size

    def __call__(self, image):
        arr = np.asarray(image)
        h, w = arr.shape[:2]
        if isinstance(self.size, int):
            scale = self.size / min(h, w)
            oh, ow = round(h * scale), round(w * scale)
        else:
            oh, ow = self.size
        rows = np.minimum((np.arange(oh) * h / oh).astype(int), h - 1)
        cols = np.minimum((np.arange(ow) * w / ow).astype(int), w - 1)
        return arr[rows][:, cols]


class CenterCrop:
    def __init__(self, size):
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def __call__(self, image):
        arr = np.asarray(image)
        h, w = arr.shape[:2]
        th, tw = self.size
        top, left = (h - th) // 2, (w - tw) // 2
        return arr[top:top + th, left:left + tw]
