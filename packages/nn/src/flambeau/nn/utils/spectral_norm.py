"""torch's older, hook-based spectral normalisation (``torch.nn.utils.spectral_norm``; the parametrization form is
:func:`flambeau.nn.utils.parametrizations.spectral_norm`).

``module.<name>`` becomes the parameter ``<name>_orig`` and buffers ``<name>_u`` and ``<name>_v``, the power
iteration's estimates of the top singular vectors of the weight reshaped to a matrix (``dim`` first). A forward
pre-hook sets ``module.<name> = <name>_orig / sigma`` before each call, ``sigma = u . (W v)``; in training mode
it first refines ``u`` and ``v`` in place by ``n_power_iterations`` steps (``v`` then ``u``, as torch's), in
evaluation mode it uses them as they are. :func:`remove_spectral_norm` keeps the normalised weight as the parameter.
"""

from __future__ import annotations

import flambeau as fl
from flambeau.nn._functional.basic import normalize
from flambeau.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter, UninitializedParameter
from flambeau.nn.utils.hooks import remove_forward_pre_hook

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook of :func:`spectral_norm` (module docstring)."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with fl.no_grad():  # in place: the buffers are state (a replica's update reaches the module)
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(fl.mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(normalize(fl.mv(weight_mat, v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()  # (the graph keeps these, not the buffers the next call rewrites)
        sigma = fl.dot(u, fl.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with fl.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if isinstance(weight, UninitializedParameter):
            raise ValueError("The module passed to `SpectralNorm` can't have uninitialized parameters. Make sure to "
                             "run the dummy forward before applying spectral normalization")
        with fl.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        object.__setattr__(module, name, weight.data)  # a plain attribute until the first call (not a parameter)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Normalise ``module.<name>`` by its spectral norm with a forward pre-hook (module docstring); ``dim``: the
    output dim, 0 by default and 1 for transposed convolutions. Returns ``module``."""
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`spectral_norm`: ``module.<name>`` is a parameter again, holding the normalised weight."""
    return remove_forward_pre_hook(module, lambda hook: isinstance(hook, SpectralNorm) and hook.name == name,
                                   f"spectral_norm of '{name}' not found in {module}")
