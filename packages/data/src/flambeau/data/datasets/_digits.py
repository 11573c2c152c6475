"""Digits: scikit-learn's 1797 8x8 handwritten digits, shipped inside flambeau-data."""

from __future__ import annotations

import functools
import gzip
import os

import numpy as np

from flambeau.data.datasets._common import _ImageDataset

__all__ = ["Digits"]

_FILE = os.path.join(os.path.dirname(__file__), "_files", "digits.csv.gz")
N_TRAIN = 1437  # the first 80 % of the rows; the last 360 are the test split


@functools.cache
def _load() -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(_FILE, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    images = table[:, :-1].reshape(-1, 8, 8).astype(np.uint8)
    images.flags.writeable = False
    labels = table[:, -1].copy()
    labels.flags.writeable = False
    return images, labels


class Digits(_ImageDataset):
    """The optical-recognition handwritten digits (1797 8x8 grey images, labels 0-9), bundled: no file needed.

    This is the data of ``sklearn.datasets.load_digits`` (from the UCI repository; source and
    licence in ``flambeau/data/datasets/_files/NOTICE.md``). Pixels are 0..16 in the file and
    are scaled to ``[0, 1]``. The training split is the first 1437 images (80 %), the test split
    the last 360; ``split="all"`` gives all 1797.

    A sample is ``(image, label)``: a float32 tensor of shape ``(1, 8, 8)`` in ``[0, 1]`` (after
    ``transform``) and an int (after ``target_transform``).

    Args:
        train: the training split (True) or the test split (False); ignored when ``split`` is given.
        transform: applied to each image tensor.
        target_transform: applied to each label.
        split: ``"train"``, ``"test"`` or ``"all"``.

    Attributes:
        data: uint8 numpy array ``(N, 8, 8)`` with values 0..16.
        targets: int64 tensor ``(N,)``.
    """

    classes = [str(i) for i in range(10)]

    def __init__(self, train: bool = True, transform=None, target_transform=None, *, split: str | None = None):
        if split is None:
            split = "train" if train else "test"
        if split not in ("train", "test", "all"):
            raise ValueError(f"Digits: split must be 'train', 'test' or 'all', got {split!r}")
        self.split = split
        self.train = split == "train"
        images, labels = _load()
        part = {"train": slice(0, N_TRAIN), "test": slice(N_TRAIN, None), "all": slice(None)}[split]
        super().__init__(images[part], labels[part], transform, target_transform)

    _scale = 16.0

    def __repr__(self) -> str:
        return f"Digits(split={self.split!r}, len={len(self)})"
