"""The other flambeau distributions, found where a PyTorch program looks for them.

``import torch; torch.nn.Linear(...)`` works because ``import torch`` imports ``torch.nn``. flambeau's
subpackages are separate distributions that a user may or may not have installed, and importing
them all would make ``import flambeau`` slow, so ``flambeau`` resolves them on first attribute
access instead (PEP 562 ``__getattr__``): ``import flambeau as fl; fl.nn.Linear`` imports
``flambeau.nn`` then. Where the distribution is not installed, both ``fl.nn`` and
``import flambeau.nn`` say which one to install.

PyTorch's other spellings of the same modules (``torch.utils.data`` for ``flambeau.data``) are
aliases: ``flambeau.utils.data`` *is* ``flambeau.data``, and ``flambeau.utils.data.sampler`` is
``flambeau.data.sampler``, the same module objects (so classes keep one identity and pickles one
module path).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

__all__ = ["ALIASES", "PROVIDERS", "install_finders", "resolve"]

# flambeau.<name> -> the distribution that ships it: one entry per module outside tensor-core that a
# user imports by name (subpackages of ``flambeau``, and modules other distributions add to
# tensor-core's ``flambeau.utils``).
PROVIDERS = {
    "amp": "flambeau-autograd",
    "autograd": "flambeau-autograd",
    "cuda_alloc": "flambeau-cuda-alloc",
    "data": "flambeau-data",
    "distributions": "flambeau-nn",
    "distributed": "flambeau-distributed",
    "func": "flambeau-autograd",
    "multiprocessing": "flambeau-multiproc",
    "nn": "flambeau-nn",
    "optim": "flambeau-nn",
    "utils.checkpoint": "flambeau-autograd",
    "utils.hooks": "flambeau-nn",
    "utils._pytree": "flambeau-autograd",
}

# PyTorch's module path -> flambeau's module (its submodules follow).
ALIASES = {"flambeau.utils.data": "flambeau.data", "flambeau.utils.hooks": "flambeau.nn.utils.hooks",
           "flambeau.utils._pytree": "flambeau.func._pytree"}


def _missing_message(fullname: str) -> str | None:
    """The install hint for a provided module (``flambeau.nn``) whose distribution is absent, else None.

    Only the provided module itself: ``flambeau.nn.x`` imports ``flambeau.nn`` first, which fails
    here when flambeau-nn is absent, and a missing ``x`` of an installed flambeau-nn is just missing.
    """
    module = fullname[len("flambeau."):] if fullname.startswith("flambeau.") else None
    dist = PROVIDERS.get(module)
    if dist is None:
        return None
    return (f"No module named {fullname!r}: it is part of the {dist} distribution, which is not installed "
            f"(pip install {dist})")


def _alias_target(fullname: str) -> str | None:
    for alias, target in ALIASES.items():
        if fullname == alias or fullname.startswith(alias + "."):
            return target + fullname[len(alias):]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Hands the import system the already-imported target module instead of a new one."""

    def __init__(self, target: str):
        self.target = target
        self.own_spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = self.own_spec  # the import system set the alias's spec; keep the real one


class _AliasFinder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: PyTorch's paths to flambeau modules, as the same objects."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("flambeau.utils."):
            return None
        real = _alias_target(fullname)
        if real is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real))


class _MissingDistributionFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: a flambeau subpackage nobody found is a distribution not installed."""

    def find_spec(self, fullname, path=None, target=None):
        message = _missing_message(fullname) if fullname.startswith("flambeau.") else None
        if message is not None:
            raise ModuleNotFoundError(message, name=fullname)
        return None


def install_finders() -> None:
    """Put both finders on ``sys.meta_path`` (once per interpreter)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
    if not any(isinstance(f, _MissingDistributionFinder) for f in sys.meta_path):
        sys.meta_path.append(_MissingDistributionFinder())


def resolve(package: str, name: str):
    """``package.name`` as a submodule, for a PEP 562 ``__getattr__``; AttributeError if there is none.

    Only names that can be submodules are imported (the caller passes those); an absent
    distribution is an AttributeError (so ``hasattr`` works) whose message says what to install.
    """
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{package}.{name}":
            raise  # the subpackage exists but something it imports is missing: show that
        message = _missing_message(error.name) or str(error)
        raise AttributeError(f"module {package!r} has no attribute {name!r}: {message}") from None
