"""A stand-in for the parts of torchvision the ported example programs use (no network here).

Not torchvision: tiny synthetic datasets with torchvision's constructor signatures, the few
transforms the programs compose, ``models.resnet18`` (untrained), and ``utils.save_image``.
See examples/ported/README.md.
"""

from . import datasets, models, transforms, utils

__all__ = ["datasets", "models", "transforms", "utils"]
