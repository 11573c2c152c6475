"""torch's older, hook-based weight normalisation (``torch.nn.utils.weight_norm``; torch deprecates it for
:func:`flambeau.nn.utils.parametrizations.weight_norm`, which computes the same).

``module.<name>`` is replaced by two parameters, the magnitude ``<name>_g`` (the norm over every dim but ``dim``,
kept with size 1) and the direction ``<name>_v``, and recomputed as ``v * (g / ||v||)`` by a forward pre-hook
before each call; :func:`remove_weight_norm` folds them back into one parameter.
"""

from __future__ import annotations

import warnings

import flambeau as fl
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter, UninitializedParameter
from flambeau.nn.utils.hooks import remove_forward_pre_hook
from flambeau.nn.utils.parametrizations import _norm_except_dim

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


class WeightNorm:
    """The forward pre-hook of :func:`weight_norm`: sets ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name: str, dim: int) -> None:
        self.name = name
        self.dim = dim

    def compute_weight(self, module: Module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, -1 if dim is None else dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ValueError("The module passed to `WeightNorm` can't have uninitialized parameters. Make sure to run "
                             "the dummy forward before applying weight normalization")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        with fl.no_grad():
            weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` with a forward pre-hook (module docstring); the norm
    is over every dim but ``dim`` (``None``: the whole tensor). Returns ``module``."""
    warnings.warn("`flambeau.nn.utils.weight_norm` is deprecated in favor of "
                  "`flambeau.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`weight_norm`: ``module.<name>`` is one parameter again, of the current ``g * v / ||v||``."""
    return remove_forward_pre_hook(module, lambda hook: isinstance(hook, WeightNorm) and hook.name == name,
                                   f"weight_norm of '{name}' not found in {module}")
