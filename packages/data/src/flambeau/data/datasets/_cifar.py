"""CIFAR-10 from its python batches (``cifar-10-batches-py``), read without running pickled code."""

from __future__ import annotations

import os
import pickle

import numpy as np

from flambeau.data.datasets._common import _ImageDataset

__all__ = ["CIFAR10"]

# The only globals a CIFAR batch pickle may name: numpy's array reconstruction, and the bytes
# constructor that Python 3's protocol-2 pickles use (``_codecs.encode(str, "latin1")``).
_ALLOWED = {
    ("_codecs", "encode"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, strings, bytes and numpy arrays; any other global is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED:
            if module.startswith("numpy.core"):
                module = "numpy._core" + module[len("numpy.core"):]
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a CIFAR batch holds only numpy arrays")


def _load_batch(path: str) -> dict:
    with open(path, "rb") as f:
        obj = _ArrayUnpickler(f, encoding="latin1").load()
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a pickled dict, got {type(obj).__name__}")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


class CIFAR10(_ImageDataset):
    """CIFAR-10 (50,000 training and 10,000 test 32x32 colour images, 10 classes), from local files.

    Reads ``root/cifar-10-batches-py/data_batch_1`` .. ``data_batch_5`` (training) or
    ``test_batch`` (test), and ``batches.meta`` for the class names when present. The batches
    are pickles; they are read with an unpickler that only allows numpy's array reconstruction,
    so a tampered file cannot run code. Nothing is downloaded.

    A sample is ``(image, label)``: a float32 tensor of shape ``(3, 32, 32)`` with values in
    ``[0, 1]`` (after ``transform``) and an int (after ``target_transform``).

    Args:
        root: the folder holding ``cifar-10-batches-py`` (or that folder itself).
        train: the training set (True) or the test set (False).
        transform: applied to each image tensor.
        target_transform: applied to each label.

    Attributes:
        data: uint8 numpy array ``(N, 3, 32, 32)``.
        targets: int64 tensor ``(N,)``.
        classes: the class names.
    """

    base_folder = "cifar-10-batches-py"
    train_list = [f"data_batch_{i}" for i in range(1, 6)]
    test_list = ["test_batch"]
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

    def __init__(self, root: str, train: bool = True, transform=None, target_transform=None) -> None:
        self.root = os.fspath(root)
        self.train = train
        folder = os.path.join(self.root, self.base_folder)
        if not os.path.isdir(folder):
            folder = self.root
        names = self.train_list if train else self.test_list
        missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
        if missing:
            raise RuntimeError(f"CIFAR10: {', '.join(missing)} not found in {folder} (flambeau downloads nothing: "
                               f"extract cifar-10-python.tar.gz into {self.root})")
        data, labels = [], []
        for n in names:
            batch = _load_batch(os.path.join(folder, n))
            arr = np.asarray(batch["data"], dtype=np.uint8)
            data.append(arr.reshape(-1, 3, 32, 32))
            labels.extend(batch["labels"] if "labels" in batch else batch["fine_labels"])
        meta = os.path.join(folder, "batches.meta")
        if os.path.isfile(meta):
            names = _load_batch(meta).get("label_names")
            if names:
                self.classes = [s.decode() if isinstance(s, bytes) else str(s) for s in names]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        super().__init__(np.concatenate(data), np.asarray(labels), transform, target_transform)
