"""Synthetic stand-ins for torchvision's datasets, with their constructor signatures.

``MNIST``: 28x28 ``uint8`` images of 10 classes (a class-specific stroke pattern plus noise), so
that a classifier can learn something in a few batches; ``PORTED_DATASET_SIZE`` images (default
512) in the training split and a quarter of that in the test split. ``CIFAR10``: 32x32x3 ``uint8`` images
of 10 balanced classes, sized like ``MNIST``'s. ``FakeData``: random images of ``image_size``, as
torchvision's (which is synthetic too). ``root`` and ``download`` are accepted
and ignored: nothing is read or downloaded.
"""

from __future__ import annotations

import os

import numpy as np
from _ported_framework import framework

__all__ = ["CIFAR10", "FakeData", "MNIST"]


class _Synthetic:
    def __init__(self, n: int, seed: int, transform=None, target_transform=None):
        self.n = n
        self.seed = seed
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self) -> int:
        return self.n

    def _item(self, index: int):
        raise NotImplementedError

    def __getitem__(self, index: int):
        if not 0 <= index < self.n:
            raise IndexError(index)
        image, target = self._item(index)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


class MNIST(_Synthetic):
    """``len``: ``PORTED_DATASET_SIZE`` (train) or a quarter of it (test); items ``(28x28 uint8 array, int)``."""

    def __init__(self, root, train: bool = True, transform=None, target_transform=None, download: bool = False):
        size = int(os.environ.get("PORTED_DATASET_SIZE", "512"))
        super().__init__(size if train else max(size // 4, 1), 0 if train else 1, transform, target_transform)
        rng = np.random.default_rng(1234)
        self.templates = (rng.random((10, 28, 28)) > 0.7).astype(np.float32)

    def _item(self, index: int):
        rng = np.random.default_rng((self.seed, index))
        label = index % 10  # balanced classes: every class has len // 10 images or more
        image = 0.8 * self.templates[label] + 0.3 * rng.random((28, 28))
        return (np.clip(image, 0, 1) * 255).astype(np.uint8), label

    @property
    def data(self):
        """All images as one ``uint8`` tensor (N, 28, 28), as torchvision's ``MNIST.data``."""
        return framework().from_numpy(np.stack([self._item(i)[0] for i in range(self.n)]))

    @property
    def targets(self):
        """All labels as one ``int64`` tensor (N,), as torchvision's ``MNIST.targets``."""
        return framework().from_numpy(np.array([self._item(i)[1] for i in range(self.n)], dtype=np.int64))


class FakeData(_Synthetic):
    """torchvision's ``FakeData``: ``size`` random images of ``image_size`` (C, H, W), labels below ``num_classes``."""

    def __init__(self, size: int = 1000, image_size=(3, 224, 224), num_classes: int = 10, transform=None,
                 target_transform=None, random_offset: int = 0):
        super().__init__(size, random_offset, transform, target_transform)
        self.image_size = tuple(image_size)
        self.num_classes = num_classes

    def _item(self, index: int):
        rng = np.random.default_rng((self.seed, index))
        c, h, w = self.image_size
        image = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
        return (image[..., 0] if c == 1 else image), int(rng.integers(self.num_classes))


class CIFAR10(MNIST):
    """``len`` as :class:`MNIST`'s; items ``(32x32x3 uint8 array, int)``, a class-specific colour pattern plus noise."""

    def __init__(self, root, train: bool = True, transform=None, target_transform=None, download: bool = False):
        super().__init__(root, train, transform, target_transform, download)
        self.templates = np.random.default_rng(4321).random((10, 32, 32, 3)).astype(np.float32)

    def _item(self, index: int):
        rng = np.random.default_rng((self.seed, index))
        label = index % 10
        image = 0.7 * self.templates[label] + 0.3 * rng.random((32, 32, 3))
        return (np.clip(image, 0, 1) * 255).astype(np.uint8), label
