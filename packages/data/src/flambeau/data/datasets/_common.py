"""What the image datasets share: the ``(image, label)`` sample and its transforms."""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau.data.dataset import Dataset


class _ImageDataset(Dataset):
    """Images in ``self.data`` (uint8 numpy, ``(N, H, W)`` or ``(N, C, H, W)``), labels in ``self.targets``."""

    def __init__(self, data: np.ndarray, labels: np.ndarray, transform=None, target_transform=None) -> None:
        self.data = data
        self._labels = np.array(labels, dtype=np.int64)  # a writable copy
        self.targets = fl.from_numpy(self._labels)
        self.transform = transform
        self.target_transform = target_transform

    _scale = 255.0  # the pixel value that maps to 1.0

    def _image(self, index: int) -> np.ndarray:
        return self.data[index]

    def __getitem__(self, index: int):
        arr = self._image(index)
        if arr.ndim == 2:
            arr = arr[None]
        img = fl.from_numpy(arr.astype(np.float32) / np.float32(self._scale))
        target = int(self._labels[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={len(self)}, train={getattr(self, 'train', None)})"
