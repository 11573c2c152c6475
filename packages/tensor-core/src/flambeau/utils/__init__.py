"""``flambeau.utils``: PyTorch's ``torch.utils`` paths, so that a program ports by its imports alone.

``flambeau.utils.data`` is :mod:`flambeau.data` itself (shipped by flambeau-data), submodules
included: ``from flambeau.utils.data import DataLoader`` and ``from flambeau.utils.data.distributed
import DistributedSampler`` give the very classes of :mod:`flambeau.data`. Other distributions add
their own ``flambeau.utils`` modules: ``flambeau.utils.checkpoint`` comes with flambeau-autograd;
``flambeau.utils.hooks`` (``RemovableHandle``) is :mod:`flambeau.nn.utils.hooks` and ``flambeau.utils._pytree``
is :mod:`flambeau.func._pytree`, as aliases.
"""

from pkgutil import extend_path

from flambeau._subpackages import resolve

__path__ = extend_path(__path__, __name__)

_SUBMODULES = ("checkpoint", "data", "hooks", "_pytree")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return resolve(__name__, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_SUBMODULES])
