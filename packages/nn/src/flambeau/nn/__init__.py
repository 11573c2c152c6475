"""Layers, losses and :class:`Module`, written as plain Python classes over the public flambeau API.

Models are just Python programs (section 4.1 of the PyTorch paper): a :class:`Module` registers the
parameters, buffers and submodules assigned to it as attributes, and its ``forward`` is ordinary
Python calling flambeau operators.
"""

from flambeau.nn import functional, init, utils  # noqa: F401
from flambeau.nn.modules import *  # noqa: F403
from flambeau.nn.parameter import *  # noqa: F403

# after the layers: the parametrizations build on them (and nn.utils is imported by Module itself)
from flambeau.nn.utils import parametrizations, parametrize  # noqa: E402, F401


def __getattr__(name: str):
    # nn.SyncBatchNorm and nn.parallel need process groups: they live in flambeau-distributed, which
    # depends on flambeau-nn, so they resolve on first use (PEP 562) and never at import.
    if name == "DataParallel":
        from flambeau.nn.parallel.data_parallel import DataParallel

        return DataParallel
    if name == "parallel":
        import importlib

        return importlib.import_module("flambeau.nn.parallel")
    if name == "SyncBatchNorm":
        from flambeau.nn.parallel import _from_distributed

        return _from_distributed("SyncBatchNorm")
    raise AttributeError(f"module 'flambeau.nn' has no attribute {name!r}")
