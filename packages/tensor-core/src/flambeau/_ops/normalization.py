"""Normalisation operators: batch_norm, layer_norm, group_norm and their fused backward passes.

``flambeau.nn`` builds BatchNorm, LayerNorm, GroupNorm (and instance norm) on these. The CPU
kernels (fused numba passes over rows: statistics, normalisation with the affine transform, and
backward) are in ``flambeau/_kernels/cpu/normalization.py``.

Kernel convention (every device; arrays in, arrays out):
    batch_norm: ``kernel(x, running_mean, running_var, weight, bias, training, momentum, eps)
        -> (out, save_mean, save_invstd)``; ``x`` is ``(N, C, *)``, the running arrays (or None) are
        updated in place in training, ``save_*`` have shape ``(C,)`` and ``x``'s dtype.
    batch_norm_backward: ``kernel(grad, x, weight, save_mean, save_invstd, training, mask)
        -> (dx, dweight, dbias)`` (None where ``mask`` is False).
    layer_norm: ``kernel(x, k, weight, bias, eps) -> (out, mean, rstd)`` normalising the last
        ``k`` dims; ``mean``/``rstd`` have one entry per row (leading dims).
    layer_norm_backward: ``kernel(grad, x, k, mean, rstd, weight, mask) -> (dx, dweight, dbias)``.
    group_norm: ``kernel(x, groups, weight, bias, eps) -> (out, mean, rstd)``, ``mean``/``rstd``
        of shape ``(N, groups)``.
    group_norm_backward: ``kernel(grad, x, groups, mean, rstd, weight, mask) -> (dx, dweight, dbias)``.
    ``weight``/``bias`` may be None (no affine transform).

Autograd recording (seam 2): ``inputs`` are the positional arguments in signature order; the
forward operators also record ``attrs`` ``{"save_mean": ..., "save_invstd"/"save_rstd": ...}``,
the statistics their backward needs. The ``*_backward`` operators are not differentiable: the
derivative table switches to a composite of differentiable operators for double backward.
"""

from __future__ import annotations

import math

from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, grad_state, record, wrap_optional
from flambeau._ops._registry import declare

__all__ = ["batch_norm", "layer_norm", "group_norm"]


# --- batch_norm ---------------------------------------------------------------------------------------
BATCH_NORM = declare(
    "batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, Tensor? bias=None, "
    "bool training=False, float momentum=0.1, float eps=1e-05) -> Tensor",
    category="normalization", method=False)
BATCH_NORM_BACKWARD = declare(
    "batch_norm_backward(Tensor grad_output, Tensor input, Tensor? weight, Tensor save_mean, Tensor save_invstd, "
    "bool training, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    category="normalization", method=False, function=False, differentiable=False)


def _check_float(x: Tensor, op: str) -> None:
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, but got {x.dtype}")


def _check_vector(t, argname: str, c: int) -> None:
    if t is not None:
        check_tensor(t, argname, "batch_norm")
        if t.numel() != c:
            raise RuntimeError(f"{argname} should contain {c} elements not {t.numel()}")
        if t.ndim > 1:  # (a (C, 1) running mean was taken and written as a (C,) one)
            raise RuntimeError(f"{argname} should be a 1-D tensor of {c} elements, got shape {list(t.shape)}")


def _data(t):
    return None if t is None else t._data


def _vec(t):
    """The data of a 1-D (or one-element) tensor as a 1-D array view (writes go through), or None."""
    if t is None:
        return None
    data = t._data
    return data if len(data.shape) == 1 else data.reshape(-1)  # (reshape(-1) of 1-D data is the data itself)


@BATCH_NORM.front
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Batch normalisation over the channel dimension 1 of ``input`` ``(N, C, *)``.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` per channel. In training the statistics
    are the batch's (biased variance) and ``running_mean``/``running_var`` (if given) are updated in
    place: ``running = (1 - momentum) * running + momentum * batch_stat``, with the unbiased
    variance, as torch does. In evaluation (``training=False``) the running statistics are used.

    Args:
        input: a floating tensor of shape ``(N, C)`` or ``(N, C, *)``.
        running_mean: ``(C,)`` running mean, or None (required when ``training=False``).
        running_var: ``(C,)`` running variance, or None.
        weight: ``(C,)`` scale, or None.
        bias: ``(C,)`` shift, or None.
        training: use (and update with) the batch statistics.
        momentum: the running statistics' update factor.
        eps: added to the variance for numerical stability.

    Returns:
        A tensor of ``input``'s shape and dtype.
    """
    check_tensor(input, "input", "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected input of shape (N, C) or (N, C, *), but got input of size "
                         f"{input.shape}")
    _check_float(input, "batch_norm")
    c = input.shape[1]
    _check_vector(running_mean, "running_mean", c)
    _check_vector(running_var, "running_var", c)
    _check_vector(weight, "weight", c)
    _check_vector(bias, "bias", c)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(f"{'running_mean' if running_mean is None else 'running_var'} must be defined in "
                           "evaluation mode")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    if training and not eps > 0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if training and input.numel() // c == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
    if momentum is None:
        raise TypeError("batch_norm(): argument 'momentum' must be float, not NoneType")
    common_device(input, running_mean, running_var, weight, bias)  # the kernels take host arrays
    dev = input._device
    if training and input.numel():
        for t in (running_mean, running_var):
            if t is not None:
                t._storage._version += 1
    out, save_mean, save_invstd = BATCH_NORM.kernel(dev.type)(
        input._data, _vec(running_mean), _vec(running_var), _vec(weight), _vec(bias), bool(training),
        float(momentum), float(eps))
    out = _wrap(out, dev)
    if grad_state.enabled and (input._requires_grad or (weight is not None and weight._requires_grad)
                               or (bias is not None and bias._requires_grad)):
        record(BATCH_NORM, (input, running_mean, running_var, weight, bias, bool(training), float(momentum),
                            float(eps)),
               {"save_mean": _wrap(save_mean, dev), "save_invstd": _wrap(save_invstd, dev)}, out)
    return out


def _check_norm_backward(op: str, grad_output, input: Tensor, weight, per_channel: bool) -> int:
    """What every normalisation backward kernel indexes: ``grad_output`` of ``input``'s shape, dtype and
    device, and (``per_channel``) an input ``(N, C, *)`` and a ``weight`` of ``C`` elements on that device.
    Autograd hands these kernels the saved tensors, which a ``.data`` assignment may have changed since
    the forward. Returns ``C``."""
    check_tensor(grad_output, "grad_output", op)
    check_tensor(input, "input", op)
    if per_channel and input.ndim < 2:
        raise RuntimeError(f"{op}(): expected input of shape (N, C, *), got {_shape_list(input.shape)}")
    if tuple(grad_output.shape) != tuple(input.shape) or grad_output.dtype is not input.dtype:
        raise RuntimeError(f"{op}(): expected grad_output of input's shape {_shape_list(input.shape)} and dtype "
                           f"{input.dtype}, got {_shape_list(grad_output.shape)} and {grad_output.dtype}")
    c = input.shape[1] if input.ndim >= 2 else 0
    if weight is not None:
        check_tensor(weight, "weight", op)
        if per_channel and weight.numel() != c:
            raise RuntimeError(f"{op}(): expected weight of {c} elements (the channels of input "
                               f"{_shape_list(input.shape)}), got {_shape_list(weight.shape)}")
    common_device(input, grad_output, weight)
    return c


def _check_stat(t, argname: str, op: str, shape: tuple, input: Tensor) -> None:
    """A saved statistic of the forward: ``shape`` elements, on ``input``'s device."""
    check_tensor(t, argname, op)
    if t.numel() != math.prod(shape):
        raise RuntimeError(f"{op}(): expected {argname} of {math.prod(shape)} elements (one per normalised row "
                           f"of input {_shape_list(input.shape)}), got {_shape_list(t.shape)}")
    common_device(input, t)


@BATCH_NORM_BACKWARD.front
def batch_norm_backward(grad_output: Tensor, input: Tensor, weight: Tensor | None, save_mean: Tensor,
                        save_invstd: Tensor, training: bool, output_mask=(True, True, True)) -> tuple:
    """Gradients of :func:`batch_norm` w.r.t. ``input``, ``weight`` and ``bias`` (fused, not differentiable).

    ``save_mean``/``save_invstd`` are the ``(C,)`` statistics the forward used (batch statistics in
    training, the running ones in evaluation). Returns ``(grad_input, grad_weight, grad_bias)``,
    None where ``output_mask`` is False.
    """
    c = _check_norm_backward("batch_norm_backward", grad_output, input, weight, True)
    for t, argname in ((save_mean, "save_mean"), (save_invstd, "save_invstd")):
        _check_stat(t, argname, "batch_norm_backward", (c,), input)
    dev = input._device
    return wrap_optional(BATCH_NORM_BACKWARD.kernel(dev.type)(
        grad_output._data, input._data, _data(weight), save_mean._data, save_invstd._data, bool(training),
        tuple(output_mask)), dev)


# --- layer_norm ---------------------------------------------------------------------------------------
LAYER_NORM = declare(
    "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) "
    "-> Tensor", category="normalization", method=False)
LAYER_NORM_BACKWARD = declare(
    "layer_norm_backward(Tensor grad_output, Tensor input, int[] normalized_shape, Tensor mean, Tensor rstd, "
    "Tensor? weight, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    category="normalization", method=False, function=False, differentiable=False)


def _shape_list(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _normalize(op, input, kernel_arg, recorded_arg, weight, bias, eps):
    """Run layer_norm's or group_norm's kernel and record it with the statistics its backward reuses.

    ``kernel_arg``: what the kernel takes (the number of normalised dims, or of groups);
    ``recorded_arg``: the operator's own argument (``normalized_shape`` or ``num_groups``).
    """
    dev = input._device
    out, mean, rstd = op.kernel(dev.type)(input._data, kernel_arg, _data(weight), _data(bias), float(eps))
    out = _wrap(out, dev)
    if grad_state.enabled and (input._requires_grad or (weight is not None and weight._requires_grad)
                               or (bias is not None and bias._requires_grad)):
        record(op, (input, recorded_arg, weight, bias, float(eps)),
               {"save_mean": _wrap(mean, dev), "save_rstd": _wrap(rstd, dev)}, out)
    return out


@LAYER_NORM.front
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Layer normalisation over the trailing dimensions ``normalized_shape`` of ``input``.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias``, the mean and (biased) variance taken over
    the last ``len(normalized_shape)`` dimensions of each sample.

    Args:
        input: a floating tensor of shape ``(*, *normalized_shape)``.
        normalized_shape: an int or a sequence of ints, the trailing shape to normalise over.
        weight: elementwise scale of shape ``normalized_shape``, or None.
        bias: elementwise shift of shape ``normalized_shape``, or None.
        eps: added to the variance for numerical stability.

    Returns:
        A tensor of ``input``'s shape and dtype.
    """
    check_tensor(input, "input", "layer_norm")
    shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={_shape_list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size{_shape_list(input.shape)}")
    _check_float(input, "layer_norm")
    for t, argname in ((weight, "weight"), (bias, "bias")):
        if t is not None:
            check_tensor(t, argname, "layer_norm")
            if tuple(t.shape) != shape:
                raise RuntimeError(f"Expected {argname} to be of same shape as normalized_shape, but got {argname} of "
                                   f"shape {_shape_list(t.shape)} and normalized_shape = {_shape_list(shape)}")
    common_device(input, weight, bias)
    return _normalize(LAYER_NORM, input, k, shape, weight, bias, eps)


@LAYER_NORM_BACKWARD.front
def layer_norm_backward(grad_output: Tensor, input: Tensor, normalized_shape, mean: Tensor, rstd: Tensor,
                        weight: Tensor | None, output_mask=(True, True, True)) -> tuple:
    """Gradients of :func:`layer_norm` w.r.t. ``input``, ``weight`` and ``bias`` (fused, not differentiable).

    ``mean``/``rstd`` hold one value per normalised row, as the forward computed them. Returns
    ``(grad_input, grad_weight, grad_bias)``, None where ``output_mask`` is False.
    """
    shape = tuple(normalized_shape)
    k = len(shape)
    _check_norm_backward("layer_norm_backward", grad_output, input, weight, False)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or (weight is not None and tuple(weight.shape) != shape):
        raise RuntimeError(f"layer_norm_backward(): expected input of shape [*, {', '.join(map(str, shape))}] and "
                           f"weight of shape {_shape_list(shape)} (normalized_shape), got input of shape "
                           f"{_shape_list(input.shape)} and weight of shape "
                           f"{None if weight is None else _shape_list(weight.shape)}")
    rows = math.prod(input.shape[:input.ndim - k])
    for t, argname in ((mean, "mean"), (rstd, "rstd")):
        _check_stat(t, argname, "layer_norm_backward", (rows,), input)
    dev = input._device
    return wrap_optional(LAYER_NORM_BACKWARD.kernel(dev.type)(
        grad_output._data, input._data, len(normalized_shape), mean._data, rstd._data, _data(weight),
        tuple(output_mask)), dev)


# --- group_norm ---------------------------------------------------------------------------------------
GROUP_NORM = declare(
    "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor",
    category="normalization", method=False)
GROUP_NORM_BACKWARD = declare(
    "group_norm_backward(Tensor grad_output, Tensor input, int num_groups, Tensor mean, Tensor rstd, "
    "Tensor? weight, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    category="normalization", method=False, function=False, differentiable=False)


@GROUP_NORM.front
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Group normalisation: the channels of ``input`` ``(N, C, *)`` split into ``num_groups`` groups.

    Each sample's group is normalised by its own mean and (biased) variance, then scaled and
    shifted per channel: ``y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c]``.

    Args:
        input: a floating tensor of shape ``(N, C, *)`` with ``C`` divisible by ``num_groups``.
        num_groups: the number of groups.
        weight: ``(C,)`` scale, or None.
        bias: ``(C,)`` shift, or None.
        eps: added to the variance for numerical stability.

    Returns:
        A tensor of ``input``'s shape and dtype.
    """
    check_tensor(input, "input", "group_norm")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    _check_float(input, "group_norm")
    c = input.shape[1]
    num_groups = int(num_groups)
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {_shape_list(input.shape)} and num_groups={num_groups}")
    for t, argname in ((weight, "weight"), (bias, "bias")):
        if t is not None:
            check_tensor(t, argname, "group_norm")
            if t.ndim != 1 or t.shape[0] != c:
                raise RuntimeError(f"Expected {argname} to be a vector of size equal to the number of channels in "
                                   f"input, but got {argname} of shape {_shape_list(t.shape)} and input of shape "
                                   f"{_shape_list(input.shape)}")
    common_device(input, weight, bias)
    return _normalize(GROUP_NORM, input, num_groups, num_groups, weight, bias, eps)


@GROUP_NORM_BACKWARD.front
def group_norm_backward(grad_output: Tensor, input: Tensor, num_groups: int, mean: Tensor, rstd: Tensor,
                        weight: Tensor | None, output_mask=(True, True, True)) -> tuple:
    """Gradients of :func:`group_norm` w.r.t. ``input``, ``weight`` and ``bias`` (fused, not differentiable).

    ``mean``/``rstd`` are the ``(N, num_groups)`` statistics of the forward. Returns
    ``(grad_input, grad_weight, grad_bias)``, None where ``output_mask`` is False.
    """
    c = _check_norm_backward("group_norm_backward", grad_output, input, weight, True)
    num_groups = int(num_groups)
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"group_norm_backward(): expected num_groups dividing the {c} channels, got {num_groups}")
    for t, argname in ((mean, "mean"), (rstd, "rstd")):
        _check_stat(t, argname, "group_norm_backward", (input.shape[0] * num_groups,), input)
    dev = input._device
    return wrap_optional(GROUP_NORM_BACKWARD.kernel(dev.type)(
        grad_output._data, input._data, int(num_groups), mean._data, rstd._data, _data(weight),
        tuple(output_mask)), dev)



# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _declare_samples():
    from flambeau._ops._samples import SampleInput as S
    from flambeau._ops._samples import cases

    def pos(mk, shape):
        """Positive statistics (variances, inverse standard deviations) that gradcheck does not differentiate."""
        return mk(shape, low=0.5, high=2.0, requires_grad=False)

    def stat(mk, shape):
        return mk(shape, requires_grad=False)

    def aten(name, arrange):
        """``torch.ops.aten.<name>`` called with ``arrange(*args)`` (torch's native backward operators); None
        where the output mask (the last argument) is False, as flambeau returns."""
        def ref(*args):
            import torch

            out = getattr(torch.ops.aten, name)(*arrange(*args))
            return tuple(o if m else None for o, m in zip(out, args[-1]))

        return ref

    def bn_args(g, x, w, mean, invstd, training, mask):
        # evaluation: torch takes the running variance and eps; invstd ** -2 with eps = 0 gives the same invstd
        return g, x, w, mean, invstd ** -2, mean, invstd, training, 0.0, list(mask)

    def gn_args(g, x, groups, mean, rstd, w, mask):
        import torch

        w = torch.ones(x.shape[1], dtype=x.dtype) if w is None else w  # torch's CPU kernel wants a weight
        return g, x, mean, rstd, w, x.shape[0], x.shape[1], x[0, 0].numel(), groups, list(mask)

    def ln_args(g, x, shape, mean, rstd, w, mask):
        import torch

        ones = torch.ones(tuple(shape), dtype=x.dtype)  # torch's CPU kernel wants a weight and a bias
        return g, x, list(shape), mean, rstd, ones if w is None else w, ones, list(mask)

    f = "nn.functional."
    BATCH_NORM.samples(cases(
        lambda mk, mki: S(mk((3, 4, 2)), stat(mk, (4,)), pos(mk, (4,)), mk((4,)), mk((4,)), True, 0.1, 1e-5)
        .named("train"),
        lambda mk, mki: S(mk((3, 4, 2)), stat(mk, (4,)), pos(mk, (4,)), mk((4,)), mk((4,)), False).named("eval"),
        lambda mk, mki: S(mk((5, 3)), None, None, None, None, True, 0.3).named("2d no stats"),
        lambda mk, mki: S(mk((2, 3, 2, 2), noncontiguous=True), stat(mk, (3,)), pos(mk, (3,)), mk((3,)), None,
                          True).named("noncontiguous")), ref=f + "batch_norm")
    mask = (True, True, True)
    BATCH_NORM_BACKWARD.samples(cases(
        lambda mk, mki: S(mk((3, 4, 2)), mk((3, 4, 2)), mk((4,)), stat(mk, (4,)), pos(mk, (4,)), True, mask),
        lambda mk, mki: S(mk((3, 4, 2)), mk((3, 4, 2)), mk((4,)), stat(mk, (4,)), pos(mk, (4,)), False, mask),
        lambda mk, mki: S(mk((5, 3)), mk((5, 3)), None, stat(mk, (3,)), pos(mk, (3,)), True, (True, False, True)),
        lambda mk, mki: S(mk((2, 3, 2)), mk((2, 3, 2)), mk((3,)), stat(mk, (3,)), pos(mk, (3,)), False,
                          (True, False, False))), ref=aten("native_batch_norm_backward", bn_args))
    LAYER_NORM.samples(cases(
        lambda mk, mki: S(mk((3, 4, 2)), (4, 2), mk((4, 2)), mk((4, 2))),
        lambda mk, mki: S(mk((4, 5)), (5,)),
        lambda mk, mki: S(mk((3, 5), noncontiguous=True), [5], mk((5,)), None, 1e-3).named("noncontiguous")),
        ref=f + "layer_norm")
    LAYER_NORM_BACKWARD.samples(cases(
        lambda mk, mki: S(mk((3, 4, 2)), mk((3, 4, 2)), (4, 2), stat(mk, (3,)), pos(mk, (3,)), mk((4, 2)), mask),
        lambda mk, mki: S(mk((4, 5)), mk((4, 5)), (5,), stat(mk, (4,)), pos(mk, (4,)), None, (True, False, True))),
        ref=aten("native_layer_norm_backward", ln_args))
    GROUP_NORM.samples(cases(
        lambda mk, mki: S(mk((2, 6, 3)), 3, mk((6,)), mk((6,))),
        lambda mk, mki: S(mk((2, 4, 2, 2)), 2),
        lambda mk, mki: S(mk((3, 4), noncontiguous=True), 4, mk((4,)), None, 1e-3).named("noncontiguous")),
        ref=f + "group_norm")
    GROUP_NORM_BACKWARD.samples(cases(
        lambda mk, mki: S(mk((2, 6, 3)), mk((2, 6, 3)), 3, stat(mk, (2, 3)), pos(mk, (2, 3)), mk((6,)), mask),
        lambda mk, mki: S(mk((2, 4, 2, 2)), mk((2, 4, 2, 2)), 2, stat(mk, (2, 2)), pos(mk, (2, 2)), None,
                          (True, False, True))), ref=aten("native_group_norm_backward", gn_args))


_declare_samples()
