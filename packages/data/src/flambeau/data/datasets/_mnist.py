"""MNIST and Fashion-MNIST from their IDX files (gzipped or not), found on the local disk."""

from __future__ import annotations

import gzip
import os

import numpy as np

from flambeau.data.datasets._common import _ImageDataset

__all__ = ["MNIST", "FashionMNIST", "read_idx"]

_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (the format of MNIST's files; gzipped if ``path`` ends in ``.gz``).

    Args:
        path: the file.

    Returns:
        np.ndarray: the array, of the file's shape and (native-endian) dtype.

    Raises:
        ValueError: when the file is not a valid IDX file (bad magic number or size).
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (magic number {raw[:4].hex() or 'missing'})")
    ndim = raw[3]
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    offset = 4 + 4 * ndim
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - offset != expected:
        raise ValueError(f"{path}: IDX header announces shape {shape} ({expected} bytes of data), "
                         f"but the file holds {len(raw) - offset} bytes")
    return np.frombuffer(raw, dtype, offset=offset).reshape(shape).astype(dtype.newbyteorder("="))


class MNIST(_ImageDataset):
    """The MNIST handwritten digits (60,000 training and 10,000 test 28x28 grey images), from local files.

    The files ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``
    and ``t10k-labels-idx1-ubyte`` (each optionally gzipped, ``.gz``) are looked for in ``root``,
    ``root/raw`` and ``root/<ClassName>/raw`` (torchvision's layout). Nothing is downloaded.

    A sample is ``(image, label)``: a float32 tensor of shape ``(1, 28, 28)`` with values in
    ``[0, 1]`` (after ``transform`` if given) and an int (after ``target_transform``).

    Args:
        root: the folder holding the files.
        train: the training set (True) or the test set (False).
        transform: applied to each image tensor.
        target_transform: applied to each label.

    Attributes:
        data: uint8 numpy array ``(N, 28, 28)``.
        targets: int64 tensor ``(N,)``.
        classes: the class names.
    """

    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]

    def __init__(self, root: str, train: bool = True, transform=None, target_transform=None) -> None:
        self.root = os.fspath(root)
        self.train = train
        prefix = "train" if train else "t10k"
        images = read_idx(self._find(f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(self._find(f"{prefix}-labels-idx1-ubyte"))
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"{type(self).__name__}: expected images (N, H, W) and labels (N,), got shapes "
                             f"{images.shape} and {labels.shape}")
        super().__init__(images.astype(np.uint8, copy=False), labels, transform, target_transform)

    def _find(self, name: str) -> str:
        folders = [self.root, os.path.join(self.root, "raw"), os.path.join(self.root, type(self).__name__, "raw")]
        for folder in folders:
            for candidate in (name, name + ".gz"):
                path = os.path.join(folder, candidate)
                if os.path.isfile(path):
                    return path
        raise RuntimeError(f"{type(self).__name__}: {name}[.gz] not found in {', '.join(folders)} "
                           "(flambeau downloads nothing: place the IDX files there)")


class FashionMNIST(MNIST):
    """Fashion-MNIST (Zalando's 28x28 grey images of clothes, 10 classes), from local IDX files.

    Same files, layout, arguments and samples as :class:`MNIST` (``root/FashionMNIST/raw`` is
    also searched).
    """

    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
