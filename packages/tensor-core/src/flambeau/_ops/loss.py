"""Loss operators: nll_loss, cross_entropy, binary cross-entropy, regression losses and kl_div.

``flambeau.nn`` builds its loss modules and ``nn.functional`` losses on these; the semantics are
torch's: ``reduction`` is ``"none"``, ``"mean"`` or ``"sum"``; the class-index losses take
``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)`` inputs, class weights and an ``ignore_index``, and their
mean divides by the summed weights of the targets that are not ignored.

cross_entropy with class indices is one fused operator that keeps only each row's log-sum-exp for
its backward (the log-softmax matrix is never stored). The CPU kernels are in
``flambeau/_kernels/cpu/loss.py``.

Kernel convention (every device; arrays in, arrays out; ``reduction`` is the string):
    nll_loss: ``kernel(x, target, weight, ignore_index, reduction) -> (loss, total_weight)``;
    nll_loss_backward: ``kernel(grad, x, target, weight, ignore_index, reduction, total_weight) -> grad_input``.
    cross_entropy (class indices): ``kernel(x, target, weight, ignore_index, reduction, label_smoothing)
        -> (loss, lse, total_weight)``; ``lse`` is the log-sum-exp per target element.
    cross_entropy_backward: ``kernel(grad, x, target, weight, ignore_index, reduction, label_smoothing,
        lse, total_weight) -> grad_input``.
    binary_cross_entropy: ``kernel(x, target, weight, reduction) -> loss``;
    binary_cross_entropy_with_logits: ``kernel(x, target, weight, pos_weight, reduction) -> loss``.
    mse_loss, l1_loss: ``kernel(x, target, reduction) -> loss``; smooth_l1_loss, huber_loss:
        ``kernel(x, target, reduction, beta_or_delta) -> loss``. Inputs arrive broadcast to one shape.
    ``weight``/``pos_weight`` may be None. Targets of class-index losses are int64.

Autograd recording (seam 2): ``inputs`` are the positional arguments in signature order;
nll_loss records ``attrs["total_weight"]`` and cross_entropy ``attrs["lse"]`` and
``attrs["total_weight"]`` for their backward. cross_entropy with class probabilities and kl_div
are composites of differentiable operators and record nothing themselves.
"""

from __future__ import annotations

import warnings

import numpy as np

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, grad_state, record, record_if_needed
from flambeau._ops._registry import declare

__all__ = ["nll_loss", "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss",
           "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div"]

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


# --- class-index losses --------------------------------------------------------------------------------
NLL_LOSS = declare("nll_loss(Tensor input, Tensor target, Tensor? weight=None, int ignore_index=-100, "
                   "str reduction=\"mean\") -> Tensor", category="loss", method=False)
NLL_LOSS_BACKWARD = declare(
    "nll_loss_backward(Tensor grad_output, Tensor input, Tensor target, Tensor? weight, int ignore_index, "
    "str reduction, Tensor total_weight) -> Tensor", category="loss", method=False, function=False,
    differentiable=False)
CROSS_ENTROPY = declare("cross_entropy(Tensor input, Tensor target, Tensor? weight=None, int ignore_index=-100, "
                        "str reduction=\"mean\", float label_smoothing=0.0) -> Tensor", category="loss",
                        method=False)
CROSS_ENTROPY_BACKWARD = declare(
    "cross_entropy_backward(Tensor grad_output, Tensor input, Tensor target, Tensor? weight, int ignore_index, "
    "str reduction, float label_smoothing, Tensor lse, Tensor total_weight) -> Tensor",
    category="loss", method=False, function=False, differentiable=False)


def _shape_list(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _check_class_args(op: str, input: Tensor, target: Tensor, weight) -> int:
    """Validate a class-index loss's input, int64/uint8 target and class weight; return the class count."""
    check_tensor(input, "input", op)
    check_tensor(target, "target", op)
    if input.ndim == 0:
        raise ValueError(f"{op}: expected input with at least 1 dimension (C), (N, C) or (N, C, d1, ...), "
                         "but got a 0-dim tensor")
    if target.dtype not in (dt.int64, dt.uint8):
        given = target.dtype.scalar_name
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {given}")
    if input.ndim == 1:
        if target.ndim != 0:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    elif input.ndim == 2:
        if target.ndim != 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if input.shape[0] != target.shape[0]:
            raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                             f"({target.shape[0]}).")
    else:
        if input.shape[0] != (target.shape[0] if target.ndim else -1):
            raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                             f"({target.shape[0] if target.ndim else 0}).")
        if tuple(target.shape) != tuple(input.shape[:1]) + tuple(input.shape[2:]):
            raise RuntimeError(f"size mismatch (got input: {_shape_list(input.shape)} , target: "
                               f"{_shape_list(target.shape)}")
    c = input.shape[0] if input.ndim == 1 else input.shape[1]
    if weight is not None:
        check_tensor(weight, "weight", op)
        if weight.numel() != c:
            raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no classes but got "
                               f"weight tensor of shape: {_shape_list(weight.shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, but got {input.dtype}")
    common_device(input, target, weight)
    return c


def _check_class_backward(op: str, grad_output, input: Tensor, target: Tensor, weight, reduction: str,
                          lse=None) -> None:
    """The checks of a class-index loss's backward, whose kernel indexes every argument by the forward's
    shapes: autograd hands it the saved tensors, which a ``.data`` assignment may have changed since."""
    _check_class_args(op, input, target, weight)
    check_tensor(grad_output, "grad_output", op)
    expected = tuple(target.shape) if reduction == "none" else ()
    if tuple(grad_output.shape) != expected:
        raise RuntimeError(f"{op}(): expected grad_output of shape {_shape_list(expected)} (the loss's shape for "
                           f"target {_shape_list(target.shape)} and reduction='{reduction}'), got "
                           f"{_shape_list(grad_output.shape)}")
    if lse is not None:
        check_tensor(lse, "lse", op)
        if tuple(lse.shape) != tuple(target.shape):
            raise RuntimeError(f"{op}(): expected lse of shape {_shape_list(target.shape)} (one log-sum-exp per "
                               f"target), got {_shape_list(lse.shape)}")
    common_device(input, grad_output, lse)


def _wdata(weight):
    if weight is None:
        return None
    w = weight._data
    return w if w.ndim == 1 else w.reshape(-1)


@NLL_LOSS.front
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """The negative log likelihood loss of log-probabilities ``input`` for class indices ``target``.

    ``loss[n] = -weight[target[n]] * input[n, target[n]]`` (0 where ``target[n] == ignore_index``);
    ``"mean"`` divides the sum by the summed weights of the targets that are not ignored.

    Args:
        input: log-probabilities ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)`` (floating).
        target: int64 (or uint8) class indices ``()``, ``(N,)`` or ``(N, d1, ...)``.
        weight: ``(C,)`` class weights, or None.
        ignore_index: target value that contributes neither loss nor weight.
        reduction: ``"none"`` (a loss of ``target``'s shape), ``"mean"`` or ``"sum"``.

    Returns:
        The loss, 0-dim unless ``reduction="none"``, in ``input``'s dtype.
    """
    _check_class_args("nll_loss", input, target, weight)
    _check_reduction(reduction)
    dev = input._device
    loss, total = NLL_LOSS.kernel(dev.type)(input._data, target._data, _wdata(weight), int(ignore_index), reduction)
    out = _wrap(loss, dev)
    if grad_state.enabled and input._requires_grad:
        record(NLL_LOSS, (input, target, weight, int(ignore_index), reduction), {"total_weight": _wrap(total, dev)},
               out)
    return out


@NLL_LOSS_BACKWARD.front
def nll_loss_backward(grad_output: Tensor, input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int,
                      reduction: str, total_weight: Tensor) -> Tensor:
    """Gradient of :func:`nll_loss` w.r.t. ``input`` (not differentiable): zeros except ``-weight[t] * grad``
    at each target class (divided by ``total_weight`` for ``"mean"``). Returns ``input``'s shape and dtype.
    """
    _check_class_backward("nll_loss_backward", grad_output, input, target, weight, reduction)
    dev = input._device
    return _wrap(NLL_LOSS_BACKWARD.kernel(dev.type)(grad_output._data, input._data, target._data, _wdata(weight),
                                                    int(ignore_index), reduction, total_weight._data), dev)


def _probability_cross_entropy(input, target, weight, reduction, label_smoothing):
    """cross_entropy with class probabilities, as a composite of differentiable operators."""
    from flambeau._ops.nn_ops import log_softmax

    dim = 0 if input.ndim == 1 else 1
    c = input.shape[dim]
    logp = log_softmax(input, dim)
    if label_smoothing > 0:
        target = target * (1.0 - label_smoothing) + label_smoothing / c
    prod = logp * target
    if weight is not None:
        prod = prod * weight.reshape((c,) + (1,) * (input.ndim - dim - 1))
    if reduction == "none":
        return -prod.sum(dim)
    total = -prod.sum()
    if reduction == "sum":
        return total
    return total / (input.numel() // c) if input.numel() else total * float("nan")


@CROSS_ENTROPY.front
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy between the logits ``input`` and class indices or class probabilities ``target``.

    With class indices this is ``nll_loss(log_softmax(input, 1), target, ...)`` computed in one fused
    pass; with label smoothing ``eps`` the target is ``(1 - eps)`` on the class plus ``eps / C`` spread
    over all classes (weighted, with torch's normalisation). With probabilities (a floating
    ``target`` of ``input``'s shape) the loss is ``-sum(weight * target * log_softmax(input))`` per
    sample, and ``"mean"`` divides by the number of samples.

    Args:
        input: logits ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)``.
        target: int64 class indices ``()``, ``(N,)`` or ``(N, d1, ...)``, or probabilities of ``input``'s shape.
        weight: ``(C,)`` class weights, or None.
        ignore_index: target value to ignore (class indices only).
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.
        label_smoothing: in ``[0, 1]``.

    Returns:
        The loss, 0-dim unless ``reduction="none"``, in ``input``'s dtype.
    """
    check_tensor(input, "input", "cross_entropy")
    check_tensor(target, "target", "cross_entropy")
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if target.dtype.is_floating_point and tuple(target.shape) == tuple(input.shape):
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        if weight is not None:
            c = input.shape[0] if input.ndim == 1 else input.shape[1]
            if weight.numel() != c:
                raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no classes but "
                                   f"got weight tensor of shape: {_shape_list(weight.shape)}")
        if not input.dtype.is_floating_point:
            raise RuntimeError(f"cross_entropy: expected a floating point input, but got {input.dtype}")
        return _probability_cross_entropy(input, target, weight, reduction, float(label_smoothing))
    _check_class_args("cross_entropy", input, target, weight)
    dev = input._device
    loss, lse, total = CROSS_ENTROPY.kernel(dev.type)(input._data, target._data, _wdata(weight), int(ignore_index),
                                                      reduction, float(label_smoothing))
    out = _wrap(loss, dev)
    if grad_state.enabled and input._requires_grad:
        record(CROSS_ENTROPY, (input, target, weight, int(ignore_index), reduction, float(label_smoothing)),
               {"lse": _wrap(lse, dev), "total_weight": _wrap(total, dev)}, out)
    return out


@CROSS_ENTROPY_BACKWARD.front
def cross_entropy_backward(grad_output: Tensor, input: Tensor, target: Tensor, weight: Tensor | None,
                           ignore_index: int, reduction: str, label_smoothing: float, lse: Tensor,
                           total_weight: Tensor) -> Tensor:
    """Gradient of :func:`cross_entropy` (class indices) w.r.t. ``input``, fused, not differentiable.

    ``lse`` (the log-sum-exp of each sample's logits) and ``total_weight`` are what the forward
    recorded. Returns a tensor of ``input``'s shape: ``softmax(input) - target`` scaled by the
    weights, label smoothing and reduction.
    """
    _check_class_backward("cross_entropy_backward", grad_output, input, target, weight, reduction, lse)
    dev = input._device
    return _wrap(CROSS_ENTROPY_BACKWARD.kernel(dev.type)(
        grad_output._data, input._data, target._data, _wdata(weight), int(ignore_index), reduction,
        float(label_smoothing), lse._data, total_weight._data), dev)


# --- element-wise losses --------------------------------------------------------------------------------
def _pair(op: str, input, target):
    """Validated ``(input, target)`` arrays broadcast to one shape and promoted to one floating dtype."""
    check_tensor(input, "input", op)
    check_tensor(target, "target", op)
    common_device(input, target)
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=3)
        try:
            np.broadcast_shapes(input.shape, target.shape)
        except ValueError:
            raise RuntimeError(_size_mismatch(input.shape, target.shape)) from None
    rt = dt.promote_types(input.dtype, target.dtype)
    if not rt.is_floating_point:
        raise RuntimeError(f"{op}: expected floating point input and target, but got {input.dtype} and "
                           f"{target.dtype}")
    npt = rt.np
    return _cast(input, npt), _cast(target, npt), rt


def _cast(t: Tensor, npt):
    """``t``'s array in numpy dtype ``npt`` (a copy by the device's ``to_copy`` kernel where it differs)."""
    a = t._data
    if a.dtype == npt:
        return a
    dev = t._device
    if dev.type == "cpu":
        return a.astype(npt)
    from flambeau._ops._registry import OPS

    return OPS["to_copy"].kernel(dev.type)(a, npt, dev, dev, False)


def _size_mismatch(s1, s2) -> str:
    n = max(len(s1), len(s2))
    p1, p2 = (1,) * (n - len(s1)) + tuple(s1), (1,) * (n - len(s2)) + tuple(s2)
    for i in range(n - 1, -1, -1):
        if p1[i] != p2[i] and p1[i] != 1 and p2[i] != 1:
            return (f"The size of tensor a ({p1[i]}) must match the size of tensor b ({p2[i]}) at non-singleton "
                    f"dimension {i}")
    return "shapes do not broadcast"


MSE_LOSS = declare("mse_loss(Tensor input, Tensor target, str reduction=\"mean\") -> Tensor", category="loss",
                   method=False)
L1_LOSS = declare("l1_loss(Tensor input, Tensor target, str reduction=\"mean\") -> Tensor", category="loss",
                  method=False)
SMOOTH_L1_LOSS = declare("smooth_l1_loss(Tensor input, Tensor target, str reduction=\"mean\", float beta=1.0) "
                         "-> Tensor", category="loss", method=False)
HUBER_LOSS = declare("huber_loss(Tensor input, Tensor target, str reduction=\"mean\", float delta=1.0) -> Tensor",
                     category="loss", method=False)
BCE = declare("binary_cross_entropy(Tensor input, Tensor target, Tensor? weight=None, str reduction=\"mean\") "
              "-> Tensor", category="loss", method=False)
BCE_LOGITS = declare("binary_cross_entropy_with_logits(Tensor input, Tensor target, Tensor? weight=None, "
                     "Tensor? pos_weight=None, str reduction=\"mean\") -> Tensor", category="loss", method=False)
KL_DIV = declare("kl_div(Tensor input, Tensor target, str reduction=\"mean\", bool log_target=False) -> Tensor",
                 category="loss", method=False, composite=True)


def _pointwise_loss(op, input, target, reduction, *extra):
    _check_reduction(reduction)
    a, b, rt = _pair(op.name, input, target)
    dev = input._device
    out = _wrap(op.kernel(dev.type)(a, b, reduction, *extra), dev)
    record_if_needed(op, (input, target, reduction, *extra), {}, out)
    return out


@MSE_LOSS.front
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error ``(input - target) ** 2``, reduced by ``reduction`` (``"none"``, ``"mean"``, ``"sum"``).

    ``input`` and ``target`` broadcast (with a warning when their shapes differ, as in torch); the
    result has the promoted floating dtype, 0-dim unless ``reduction="none"``.
    """
    return _pointwise_loss(MSE_LOSS, input, target, reduction)


@L1_LOSS.front
def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error ``|input - target|``, reduced by ``reduction`` (``"none"``, ``"mean"``, ``"sum"``).

    Shapes and dtypes as :func:`mse_loss`.
    """
    return _pointwise_loss(L1_LOSS, input, target, reduction)


@SMOOTH_L1_LOSS.front
def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Smooth L1: ``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input - target``).

    ``beta = 0`` is the L1 loss; ``beta`` must not be negative. Shapes and dtypes as :func:`mse_loss`.
    """
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _pointwise_loss(SMOOTH_L1_LOSS, input, target, reduction, float(beta))


@HUBER_LOSS.front
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """Huber loss: ``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (``d = input - target``).

    ``delta`` must be positive. Shapes and dtypes as :func:`mse_loss`.
    """
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise_loss(HUBER_LOSS, input, target, reduction, float(delta))


def _broadcast_weight(weight, shape, argname: str, input: Tensor):
    if weight is None:
        return None
    check_tensor(weight, argname, "binary_cross_entropy")
    common_device(input, weight)
    w = weight._data
    try:
        if np.broadcast_shapes(w.shape, shape) != tuple(shape):
            raise ValueError
    except ValueError:
        raise RuntimeError(_size_mismatch(w.shape, shape)) from None
    return w


@BCE.front
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities ``input`` against ``target``.

    ``loss = -weight * (target * log(input) + (1 - target) * log(1 - input))`` with each log clamped
    at ``-100``, as torch does. ``input`` values must lie in ``[0, 1]`` (on CUDA the kernel checks them
    and the next synchronisation raises).

    Args:
        input: probabilities of any shape (floating).
        target: the same shape and dtype as ``input``.
        weight: broadcastable to ``input``'s shape, or None.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.

    Returns:
        The loss in ``input``'s dtype, 0-dim unless ``reduction="none"``.
    """
    check_tensor(input, "input", "binary_cross_entropy")
    check_tensor(target, "target", "binary_cross_entropy")
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"binary_cross_entropy: expected a floating point input, but got {input.dtype}")
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype.scalar_name} but expected {input.dtype.scalar_name}")
    x = input._data
    # A device kernel checks the range itself and reports at the next synchronisation (Note [Device-side
    # errors]): reading the values here would make the host wait.
    if input._device.type == "cpu" and x.size and not (x.min() >= 0 and x.max() <= 1):
        raise RuntimeError("all elements of input should be between 0 and 1")
    t = target._data
    if target._device.type == "cpu" and t.size and not (t.min() >= 0 and t.max() <= 1):  # (as torch's CPU kernel)
        raise RuntimeError("all elements of target should be between 0 and 1")
    common_device(input, target)
    w = _broadcast_weight(weight, x.shape, "weight", input)
    dev = input._device
    out = _wrap(BCE.kernel(dev.type)(x, target._data, w, reduction), dev)
    if grad_state.enabled and (input._requires_grad or target._requires_grad):
        record(BCE, (input, target, weight, reduction), {}, out)
    return out


@BCE_LOGITS.front
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)`` against ``target``, computed stably from the logits.

    ``loss = -weight * (pos_weight * target * log(sigmoid(x)) + (1 - target) * log(1 - sigmoid(x)))``,
    evaluated as ``(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)``.

    Args:
        input: logits of any shape (floating).
        target: the same shape as ``input``, values in ``[0, 1]``.
        weight: broadcastable to ``input``'s shape, or None.
        pos_weight: weight of positive examples, broadcastable along the last (class) dimension, or None.
        reduction: ``"none"``, ``"mean"`` or ``"sum"``.

    Returns:
        The loss in ``input``'s dtype, 0-dim unless ``reduction="none"``.
    """
    check_tensor(input, "input", "binary_cross_entropy_with_logits")
    check_tensor(target, "target", "binary_cross_entropy_with_logits")
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"binary_cross_entropy_with_logits: expected a floating point input, but got {input.dtype}")
    common_device(input, target)
    x = input._data
    t = _cast(target, x.dtype)
    w = _broadcast_weight(weight, x.shape, "weight", input)
    pw = _broadcast_weight(pos_weight, x.shape, "pos_weight", input)
    dev = input._device
    out = _wrap(BCE_LOGITS.kernel(dev.type)(x, t, w, pw, reduction), dev)
    if grad_state.enabled and (input._requires_grad or target._requires_grad):
        record(BCE_LOGITS, (input, target, weight, pos_weight, reduction), {}, out)
    return out


@KL_DIV.front
def kl_div(input: Tensor, target: Tensor, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence of ``target`` from the log-probabilities ``input``.

    ``loss = target * (log(target) - input)`` (0 where ``target == 0``), or with ``log_target=True``
    ``exp(target) * (target - input)``. ``reduction`` is ``"none"``, ``"mean"`` (over all elements),
    ``"batchmean"`` (the sum divided by ``input.size(0)``, the mathematical KL divergence) or
    ``"sum"``. A composite of differentiable operators: gradients flow to ``input`` and ``target``.

    Returns:
        The loss in the promoted dtype, 0-dim unless ``reduction="none"``.
    """
    check_tensor(input, "input", "kl_div")
    check_tensor(target, "target", "kl_div")
    if reduction not in ("none", "mean", "batchmean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        from flambeau._ops._registry import OPS

        loss = OPS["xlogy"].fn(target, target) - target * input
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    total = loss.sum()
    return total / input.shape[0] if input.ndim else total


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _declare_samples():
    from flambeau._ops._registry import OPS
    from flambeau._ops._samples import FLOAT, cases
    from flambeau._ops._samples import SampleInput as S

    def add(name, *builders, dtypes=FLOAT, **meta):
        OPS[name].samples(cases(*builders), dtypes=dtypes, **meta)

    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        add(name, lambda mk, mki: S(mk((3, 4)), mk((3, 4))),
            lambda mk, mki: S(mk((3, 4)), mk((3, 4)), reduction="sum"),
            lambda mk, mki: S(mk((3, 4)), mk((3, 4)), reduction="none"), ref=f"nn.functional.{name}")
    add("binary_cross_entropy", lambda mk, mki: S(mk((3, 4), low=0.1, high=0.9), mk((3, 4), low=0, high=1)),
        lambda mk, mki: S(mk((3, 4), low=0.1, high=0.9), mk((3, 4), low=0, high=1),
                          mk((4,), low=0.5, high=2, requires_grad=False), reduction="sum"),
        ref="nn.functional.binary_cross_entropy")
    add("binary_cross_entropy_with_logits", lambda mk, mki: S(mk((3, 4)), mk((3, 4), low=0, high=1)),
        lambda mk, mki: S(mk((3, 4)), mk((3, 4), low=0, high=1),
                          pos_weight=mk((4,), low=0.5, high=2, requires_grad=False)),
        ref="nn.functional.binary_cross_entropy_with_logits")
    add("nll_loss", lambda mk, mki: S(mk((3, 5)), mki((3,), 5)),
        lambda mk, mki: S(mk((3, 5)), mki((3,), 5), mk((5,), low=0.5, high=2, requires_grad=False), reduction="sum"),
        ref="nn.functional.nll_loss")
    add("cross_entropy", lambda mk, mki: S(mk((3, 5)), mki((3,), 5)),
        lambda mk, mki: S(mk((3, 5)), mki((3,), 5), label_smoothing=0.1),
        lambda mk, mki: S(mk((2, 5, 3)), mki((2, 3), 5), reduction="none"),
        lambda mk, mki: S(mk((3, 5)), mk((3, 5), low=0, high=1)), ref="nn.functional.cross_entropy")
    add("kl_div", lambda mk, mki: S(mk((3, 4)), mk((3, 4), low=0.1, high=1), reduction="batchmean"),
        ref="nn.functional.kl_div")

_declare_samples()
