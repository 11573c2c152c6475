"""Classic datasets read from local files (nothing is ever downloaded).

Every dataset here is a map-style :class:`~flambeau.data.Dataset` whose samples are
``(image, label)``: ``image`` a float32 tensor of shape ``(C, H, W)`` with values in ``[0, 1]``
(what torchvision's ``ToTensor`` gives), ``label`` a Python int, each passed through the optional
``transform`` / ``target_transform``. The raw arrays are kept as ``data`` (uint8) and ``targets``.

- :class:`MNIST`, :class:`FashionMNIST`: the IDX files (gzipped or not) of the original
  distributions, under ``root``, ``root/raw``, or ``root/<ClassName>/raw`` (torchvision's layout).
- :class:`CIFAR10`: the ``cifar-10-batches-py`` pickles, read with an unpickler that only
  rebuilds numpy arrays (no arbitrary code runs).
- :class:`ArrayFolder`: one subfolder per class holding ``.npy`` files.
- :class:`Digits`: scikit-learn's 1797 8x8 handwritten digits, shipped inside flambeau-data
  (see ``_files/NOTICE.md``): a dataset for demos and tests that needs no file at all.
"""

from __future__ import annotations

from flambeau.data.datasets._arrays import ArrayFolder
from flambeau.data.datasets._cifar import CIFAR10
from flambeau.data.datasets._digits import Digits
from flambeau.data.datasets._mnist import MNIST, FashionMNIST, read_idx

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "ArrayFolder", "Digits", "read_idx"]
