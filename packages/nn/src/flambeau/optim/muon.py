"""Muon (Jordan et al., 2024), as ``torch.optim.Muon``: momentum orthogonalised by Newton–Schulz iterations."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau import Tensor
from flambeau.optim.optimizer import Optimizer, _to_scalar

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5


def _bf16(t: Tensor) -> Tensor:
    """``t`` rounded to the nearest bfloat16 values, as float32."""
    return t.to(fl.bfloat16).to(fl.float32)


def _zeropower_via_newtonschulz(grad: Tensor, ns_coefficients: tuple, ns_steps: int, eps: float) -> Tensor:
    """The approximate orthogonalisation ``U V^T`` of ``grad = U S V^T``: quintic Newton–Schulz in bfloat16."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    # torch iterates in bfloat16: each operation accumulates in float32 and rounds its result to
    # bfloat16. The same is done here in float32 with a rounding after each operation, which runs
    # on every device (bfloat16 kernels are not all there on CUDA) and gives torch's values.
    ortho = _bf16(grad)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        ortho = ortho.T
    ortho = _bf16(ortho / _bf16(_bf16(ortho.norm()).clamp(min=eps)))
    for _ in range(ns_steps):
        gram = _bf16(ortho @ ortho.T)
        gram_update = _bf16(fl.addmm(gram, gram, gram, beta=b, alpha=c))
        ortho = _bf16(fl.addmm(ortho, gram_update, ortho, beta=a))
    return ortho.T if tall else ortho


def _adjust_lr(lr: float, adjust_lr_fn: str | None, shape) -> float:
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class Muon(Optimizer):
    """Muon, as ``torch.optim.Muon``, for 2-D parameters only.

    Each step: ``buf = lerp(buf, g, 1 - momentum)``; the update ``lerp(g, buf, momentum)`` (Nesterov)
    or ``buf`` is orthogonalised by ``ns_steps`` quintic Newton–Schulz iterations in bfloat16 (torch's
    coefficients), then ``p *= 1 - lr * weight_decay`` and ``p -= adjusted_lr * update`` with
    ``adjusted_lr = lr * sqrt(max(1, rows / cols))`` (``"original"``) or ``0.2 * lr * sqrt(max(rows, cols))``
    (``"match_rms_adamw"``).

    Args:
        params: iterable of 2-D tensors or of dicts defining parameter groups.
        lr: learning rate. Default: 1e-3.
        weight_decay: decoupled weight decay. Default: 0.1.
        momentum: momentum factor. Default: 0.95.
        nesterov: Nesterov momentum. Default: True.
        ns_coefficients: the ``(a, b, c)`` of the iteration. Default: ``(3.4445, -4.7750, 2.0315)``.
        eps: floor of the norm the input is divided by. Default: 1e-7.
        ns_steps: iterations (< 100). Default: 5.
        adjust_lr_fn: None / ``"original"`` or ``"match_rms_adamw"``.

    State per parameter: ``momentum_buffer``.

    Raises:
        ValueError: a parameter that is not 2-D, or a bad hyperparameter (torch's messages).
    """

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple = (DEFAULT_A, DEFAULT_B, DEFAULT_C), eps: float = EPS,
                 ns_steps: int = DEFAULT_NS_STEPS, adjust_lr_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{p.shape}")

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        lr = _to_scalar(group["lr"])
        params, grads = self._gather(group, ())  # checks every gradient first (Note [Gradient checks])
        for p, grad in zip(params, grads):
            if p.dtype.is_complex:
                raise RuntimeError("Muon does not support complex parameters")
            if p.grad.is_sparse:
                raise RuntimeError("Muon does not support sparse gradients")
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = fl.zeros_like(grad)
            buf = state["momentum_buffer"]
            buf.lerp_(grad, 1 - group["momentum"])
            update = grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
            update = _zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
            p.mul_(1 - lr * group["weight_decay"])
            p.add_(update.to(p.dtype), alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape))
