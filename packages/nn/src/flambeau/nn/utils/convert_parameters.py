"""Flatten parameters to one vector and back (``torch.nn.utils.parameters_to_vector``)."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_param_device(param: Tensor, old_device):
    if old_device is None:
        return param.device
    if param.device != old_device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return old_device


def parameters_to_vector(parameters) -> Tensor:
    """Concatenate the flattened ``parameters`` into one 1-D tensor (differentiable)."""
    device = None
    vec = []
    for param in parameters:
        device = _check_param_device(param, device)
        vec.append(param.reshape(-1))
    return fl.cat(vec)


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` (their ``.data`` is replaced)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected flambeau.Tensor, but got: {type(vec).__name__}")
    device = None
    pointer = 0
    for param in parameters:
        device = _check_param_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
