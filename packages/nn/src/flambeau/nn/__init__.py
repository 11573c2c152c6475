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
from flambeau.nn.utils import spectral_norm as _spectral_norm  # noqa: E402
from flambeau.nn.utils import weight_norm as _weight_norm  # noqa: E402

# torch's nn.utils.weight_norm / spectral_norm are the functions (their modules' names, shadowed), as here
utils.weight_norm, utils.remove_weight_norm = _weight_norm.weight_norm, _weight_norm.remove_weight_norm
utils.spectral_norm, utils.remove_spectral_norm = _spectral_norm.spectral_norm, _spectral_norm.remove_spectral_norm


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


# torch's torch.nn.attention and torch.nn.common_types (after the star import, which brought the layers' own
# ``modules.attention`` module under the first name: a submodule import, as ``from`` would find that attribute)
import flambeau.nn.attention as attention  # noqa: E402, F401
from flambeau.nn import common_types  # noqa: E402, F401
