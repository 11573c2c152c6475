"""Adam (with AMSGrad and, through ``decoupled_weight_decay``, AdamW's decoupled weight decay)."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim._functional import bump_step, decayed_grad
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _step_tensor, _to_scalar

__all__ = ["Adam", "adam"]


def _check_betas(betas, eps: float, weight_decay: float) -> tuple[float, float]:
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    return tuple(_to_scalar(b) for b in betas)


def _lerp_args(dtype, weight: float):
    """Scalars of torch's ``lerp_(end, weight)`` in numpy ``dtype``: weight, 1 - weight, |weight| < 0.5."""
    w, one = K.cast(dtype, weight, 1)
    return w, one - w, bool(abs(w) < 0.5)


class Adam(Optimizer):
    r"""Adam, as ``torch.optim.Adam``.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t,\quad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2,\quad
        \theta_t = \theta_{t-1} - \frac{\gamma}{1-\beta_1^t}\,
        \frac{m_t}{\sqrt{\hat v_t}/\sqrt{1-\beta_2^t} + \epsilon}

    where :math:`\hat v_t = \max(\hat v_{t-1}, v_t)` with ``amsgrad`` and :math:`v_t` otherwise;
    ``weight_decay`` adds :math:`\lambda\theta_{t-1}` to the gradient, or with
    ``decoupled_weight_decay`` (AdamW) scales the parameter by :math:`1-\gamma\lambda` first.

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate (float or 1-element tensor). Default: 1e-3.
        betas: coefficients of the running averages of the gradient and its square.
        eps: term added to the denominator. Default: 1e-8.
        weight_decay: weight decay coefficient. Default: 0.
        amsgrad: use the AMSGrad variant (maximum of the second moments).
        foreach, capturable: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.
        fused: None/True: one fused kernel per parameter where possible; False: tensor operators.
        decoupled_weight_decay: apply weight decay to the parameter directly (AdamW).

    State per parameter: ``step`` (0-dim float32 tensor), ``exp_avg``, ``exp_avg_sq`` and, with
    ``amsgrad``, ``max_exp_avg_sq``.
    """

    _group_defaults = (("amsgrad", False), ("maximize", False), ("foreach", None), ("capturable", False),
                       ("differentiable", False), ("decoupled_weight_decay", False), ("fused", None))

    def __init__(self, params, lr: float | Tensor = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False):
        _check_lr(lr)
        betas = _check_betas(betas, eps, weight_decay)
        _check_flags(differentiable)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        amsgrad = group["amsgrad"]
        params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps = self._gather(
            group, ("exp_avg", "exp_avg_sq", "max_exp_avg_sq" if amsgrad else None, "step"), _init_state)
        beta1, beta2 = group["betas"]
        adam(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, amsgrad=amsgrad, beta1=beta1, beta2=beta2,
             lr=group["lr"], weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
             decoupled_weight_decay=group["decoupled_weight_decay"], fused=group["fused"])


def _init_state(state, p, group):
    state["step"] = _step_tensor()
    state["exp_avg"] = fl.zeros_like(p)
    state["exp_avg_sq"] = fl.zeros_like(p)
    if group.get("amsgrad"):  # (also RAdam's state: its groups have no "amsgrad")
        state["max_exp_avg_sq"] = fl.zeros_like(p)


def adam(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_avg_sqs: list[Tensor],
         max_exp_avg_sqs: list[Tensor], state_steps: list[Tensor], *, amsgrad: bool, beta1: float, beta2: float,
         lr: float | Tensor, weight_decay: float, eps: float, maximize: bool, decoupled_weight_decay: bool = False,
         fused: bool | None = None) -> None:
    """The update of :class:`Adam` / :class:`AdamW` on lists of parameters and their state.

    Args:
        params: parameters, updated in place; the state tensors are updated in place too.
        grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps: per-parameter lists
            (``max_exp_avg_sqs`` only used with ``amsgrad``).
        amsgrad, beta1, beta2, lr, weight_decay, eps, maximize, decoupled_weight_decay: see :class:`Adam`.
        fused: False forces the tensor-operator path.
    """
    lr, beta1, beta2 = _to_scalar(lr), _to_scalar(beta1), _to_scalar(beta2)
    kernel = K.kernels().adam if fused is not False else None
    scalars: dict = {}  # kernel scalars by (dtype, step): computed once for parameters in lockstep
    for i, p in enumerate(params):
        g = grads[i]
        m, v = exp_avgs[i], exp_avg_sqs[i]
        vmax = max_exp_avg_sqs[i] if amsgrad else None
        step = bump_step(state_steps[i])
        dt = K.fused_dtype(p) if kernel is not None else None
        if dt is not None:
            args = scalars.get((dt, step))
            if args is None:
                step_size = lr / (1 - beta1**step)
                w1, omw1, small = _lerp_args(dt, 1 - beta1)
                sc = K.pack(dt, weight_decay, 1 - lr * weight_decay, w1, omw1, beta2, 1 - beta2,
                            (1 - beta2**step) ** 0.5, eps, -step_size)
                args = scalars[dt, step] = (sc, maximize, decoupled_weight_decay, small, amsgrad)
            if K.launch(kernel, p, g, (m, v, vmax), *args):
                continue
        step_size = lr / (1 - beta1**step)
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        grad = decayed_grad(p, g, maximize, weight_decay, lr if decoupled_weight_decay else None)
        m.lerp_(grad, 1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        if amsgrad:
            vmax.copy_(fl.maximum(vmax, v))
            denom = (vmax.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (v.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(m, denom, value=-step_size)
    K.flush()  # the CUDA parameters, updated together (Note [Multi-tensor CUDA updates])
