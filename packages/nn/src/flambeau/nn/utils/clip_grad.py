"""Gradient clipping: :func:`clip_grad_norm_` and :func:`clip_grad_value_` (as ``torch.nn.utils``)."""

from __future__ import annotations

import math
import warnings

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn.utils._cuda_clip import fused_scale_, fused_total_norm

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(parameters) -> list:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def _norm_np(a: np.ndarray, norm_type: float) -> float:
    """The ``norm_type``-norm of array ``a`` as a Python float (accumulated in float64)."""
    if a.size == 0:
        return 0.0
    if norm_type == 2.0:
        flat = a.reshape(-1) if a.flags.c_contiguous else np.ravel(a)
        if flat.dtype == np.float16:
            flat = flat.astype(np.float32)
        return math.sqrt(float(np.dot(flat, flat)))
    if math.isinf(norm_type):
        return float(np.max(np.abs(a))) if norm_type > 0 else float(np.min(np.abs(a)))
    if norm_type == 1.0:
        return float(np.sum(np.abs(a), dtype=np.float64))
    if norm_type == 0:
        return float(np.count_nonzero(a))
    return float(np.sum(np.abs(a).astype(np.float64) ** norm_type) ** (1.0 / norm_type))


def _combine(norms: list, norm_type: float) -> float:
    if math.isinf(norm_type):  # (numpy's max and min propagate a NaN, as torch's do; Python's depend on the order)
        values = np.asarray(norms, np.float64)
        return float(values.max() if norm_type > 0 else values.min())
    if norm_type == 0:
        return float(sum(norms))
    return _norm_np(np.asarray(norms, np.float64), norm_type)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The ``norm_type``-norm of the norms of ``tensors`` (as if they were concatenated).

    Args:
        tensors: a tensor or an iterable of tensors.
        norm_type: the p of the norm (``inf`` for the max norm).
        error_if_nonfinite: raise if the total norm is NaN or infinite.
        foreach: accepted for compatibility (ignored).

    Returns:
        A 0-d float tensor (dtype of the first tensor) holding the total norm.
    """
    tensors = [t for t in _as_list(tensors) if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return fl.tensor(0.0)
    if tensors[0].device.type != "cpu":
        return _device_total_norm(tensors, norm_type, error_if_nonfinite)
    norms = [_norm_np(t.numpy(force=True), norm_type) for t in tensors]
    total = _combine(norms, norm_type)
    if error_if_nonfinite and (math.isnan(total) or math.isinf(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    dtype = tensors[0].dtype if tensors[0].dtype.is_floating_point else fl.float32
    return fl.tensor(total, dtype=dtype, device=tensors[0].device)


def _device_total_norm(tensors, norm_type: float, error_if_nonfinite: bool) -> Tensor:
    """The total norm computed on the tensors' device (a GPU): no value comes to the host, so the
    training step does not wait for the device (only ``error_if_nonfinite`` has to look, as in torch)."""
    total = fused_total_norm(tensors, norm_type)  # Note [Fused gradient clipping]
    if total is None:
        with fl.no_grad():
            norms = fl.stack([fl.norm(t.detach().reshape(-1), norm_type) for t in tensors])
            total = fl.norm(norms, norm_type)
    if error_if_nonfinite and not bool(total.isfinite().item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their total norm is at most ``max_norm``.

    The total norm is computed over all gradients together, as if concatenated into one vector;
    gradients are multiplied by ``min(1, max_norm / (total_norm + 1e-6))``.

    Args:
        parameters: a tensor or an iterable of tensors whose ``.grad`` is clipped (those without
            a gradient are skipped).
        max_norm: the largest allowed total norm.
        norm_type: the p of the norm (``float('inf')`` for the max norm).
        error_if_nonfinite: raise RuntimeError if the total norm is NaN or infinite.
        foreach: accepted for compatibility (ignored).

    Returns:
        The total norm of the gradients before clipping, a 0-d tensor.
    """
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not grads:
        return fl.tensor(0.0)
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(grads, max_norm, total_norm, _grads=True)
    return total_norm


def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None, _grads: bool = False) -> None:
    """Scale the gradients of ``parameters`` by ``min(1, max_norm / (total_norm + 1e-6))`` in place."""
    grads = parameters if _grads else [p.grad for p in _as_list(parameters) if p.grad is not None]
    if isinstance(total_norm, Tensor) and total_norm.device.type != "cpu":
        # on a GPU the factor stays there, clamped at 1, as torch does: no host synchronisation
        if fused_scale_(grads, max_norm, total_norm):  # Note [Fused gradient clipping]
            return
        with fl.no_grad():
            coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.to(g.dtype))
        return
    total = float(total_norm)
    coef = max_norm / (total + 1e-6)
    if coef >= 1.0:
        return
    with fl.no_grad():
        for g in grads:
            g.mul_(coef)


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_`."""
    warnings.warn("`flambeau.nn.utils.clip_grad_norm` is deprecated in favor of `flambeau.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp the gradients of ``parameters`` in place to ``[-clip_value, clip_value]``.

    Args:
        parameters: a tensor or an iterable of tensors whose ``.grad`` is clipped.
        clip_value: the largest allowed magnitude.
        foreach: accepted for compatibility (ignored).
    """
    clip_value = float(clip_value)
    with fl.no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
