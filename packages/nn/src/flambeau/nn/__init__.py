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
