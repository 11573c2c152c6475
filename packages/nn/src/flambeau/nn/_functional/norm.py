"""nn.functional: normalisation layers (batch, layer, group, instance and RMS normalisation).

batch_norm, layer_norm and group_norm are flambeau's fused operators; instance_norm is group
normalisation with one group per channel (plus torch's running-statistics update); rms_norm is a
composite of elementwise operators and a mean, as torch's reference implementation.
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor

__all__ = ["batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm"]


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Batch normalisation over dimension 1 of ``input`` ``(N, C, *)`` (see :func:`flambeau.batch_norm`).

    In training the batch statistics are used and ``running_mean``/``running_var`` (``(C,)``, if
    given) are updated in place with ``momentum`` (unbiased variance); otherwise the running
    statistics normalise. ``weight``/``bias`` are ``(C,)`` or None. Returns ``input``'s shape.
    """
    return fl.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Layer normalisation over the trailing ``normalized_shape`` dims (see :func:`flambeau.layer_norm`).

    ``weight``/``bias`` have shape ``normalized_shape`` or are None. Returns ``input``'s shape.
    """
    return fl.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Group normalisation of ``input`` ``(N, C, *)`` in ``num_groups`` groups (see :func:`flambeau.group_norm`).

    ``weight``/``bias`` are ``(C,)`` or None. Returns ``input``'s shape.
    """
    return fl.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Instance normalisation: each channel of each sample of ``input`` ``(N, C, *)`` normalised on its own.

    With ``use_input_stats`` the statistics are the instance's; ``running_mean``/``running_var``
    (``(C,)``, if given) are then updated in place with the batch average of the instance means and
    unbiased variances, as torch does. Without it the running statistics normalise.
    ``weight``/``bias`` are ``(C,)`` or None. Returns ``input``'s shape.
    """
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected input of shape (N, C, *) with at least one spatial dimension, "
                         f"got input of size {input.shape}")
    if not use_input_stats:
        return fl.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    spatial = input.numel() // (input.shape[0] * input.shape[1]) if input.numel() else 0
    if spatial == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    if running_mean is not None or running_var is not None:
        with fl.no_grad():
            flat = input.detach().reshape(input.shape[0], input.shape[1], -1)
            if running_mean is not None:
                mean = flat.mean(2).mean(0).to(running_mean.dtype)
                running_mean.mul_(1.0 - momentum).add_(mean * momentum)
            if running_var is not None:
                var = flat.var(2).mean(0).to(running_var.dtype)
                running_var.mul_(1.0 - momentum).add_(var * momentum)
    return fl.group_norm(input, input.shape[1], weight, bias, eps)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dims (Zhang and Sennrich, 2019).

    ``y = x / sqrt(mean(x**2) + eps) * weight``, the mean taken over the last ``len(normalized_shape)``
    dimensions. 16-bit float inputs compute in float32 and are cast back before the weight multiplies,
    as torch does.

    Args:
        input: ``(*, *normalized_shape)``, floating.
        normalized_shape: an int or a sequence of ints, the trailing shape of ``input``.
        weight: ``normalized_shape``-shaped scale, or None.
        eps: added to the mean square; None is ``finfo(dtype).eps`` of the computation dtype
            (float32 for 16-bit inputs).

    Returns:
        ``input``'s shape and dtype.
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    n = len(shape)
    if n > input.ndim:
        raise ValueError(f"Input tensor must have at least {n} dimensions, but got {input.ndim}")
    if tuple(input.shape[input.ndim - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*{', '.join(str(s) for s in shape)}], but got input of size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(shape)}")
    # 16-bit floats (float16, bfloat16) compute in float32
    x = input.float() if input.dtype.is_floating_point and input.dtype.itemsize == 2 else input
    if eps is None:
        eps = fl.finfo(x.dtype).eps
    dims = tuple(range(input.ndim - n, input.ndim))
    out = x * (x * x).mean(dims, keepdim=True).add(eps).rsqrt()
    out = out.to(input.dtype)
    return out if weight is None else out * weight
