"""A folder-of-arrays dataset: ``root/<class>/<sample>.npy``."""

from __future__ import annotations

import os

import numpy as np

import flambeau as fl
from flambeau.data.dataset import Dataset

__all__ = ["ArrayFolder"]


class ArrayFolder(Dataset):
    """Samples stored as numpy files in one subfolder per class (torchvision's ``DatasetFolder`` layout)::

        root/cat/0001.npy
        root/cat/0002.npy
        root/dog/a.npy

    Classes are the subfolder names in sorted order (labels ``0 .. C-1``); samples are the files
    ending in one of ``extensions``, in sorted order within each class. Files are read with
    ``numpy.load(allow_pickle=False)`` when the sample is fetched, so no pickled object is ever
    loaded.

    A sample is ``(array, label)``: a tensor of the file's dtype and shape (after ``transform``)
    and an int (after ``target_transform``).

    Args:
        root: the folder of class subfolders.
        transform: applied to each sample tensor.
        target_transform: applied to each label.
        extensions: the file suffixes that count as samples.

    Attributes:
        classes: the class names; class_to_idx: name -> label; samples: ``(path, label)`` pairs;
        targets: the labels, one per sample.
    """

    def __init__(self, root: str, transform=None, target_transform=None, extensions: tuple[str, ...] = (".npy",)):
        self.root = os.fspath(root)
        self.transform = transform
        self.target_transform = target_transform
        self.extensions = tuple(extensions)
        if not os.path.isdir(self.root):
            raise FileNotFoundError(f"ArrayFolder: root {self.root!r} is not a folder")
        self.classes = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        if not self.classes:
            raise FileNotFoundError(f"ArrayFolder: no class folders found in {self.root!r}")
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for c in self.classes:
            folder = os.path.join(self.root, c)
            for dirpath, _, files in sorted(os.walk(folder, followlinks=True)):
                for f in sorted(files):
                    if f.lower().endswith(self.extensions):
                        self.samples.append((os.path.join(dirpath, f), self.class_to_idx[c]))
        if not self.samples:
            raise FileNotFoundError(f"ArrayFolder: no files ending in {', '.join(self.extensions)} under "
                                    f"{self.root!r}")
        self.targets = [t for _, t in self.samples]

    def __getitem__(self, index: int):
        path, target = self.samples[index]
        sample = fl.from_numpy(np.load(path, allow_pickle=False))
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __len__(self) -> int:
        return len(self.samples)
