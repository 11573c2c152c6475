"""RAdam: Adam with a rectified adaptive learning rate (optionally decoupled weight decay)."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim._functional import bump_step, decayed_grad
from flambeau.optim.adam import _check_betas, _lerp_args
from flambeau.optim.adam import _init_state as _init_adam_state
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _to_scalar

__all__ = ["RAdam", "radam"]


class RAdam(Optimizer):
    r"""RAdam, as ``torch.optim.RAdam``.

    With :math:`\rho_\infty = 2/(1-\beta_2) - 1` and
    :math:`\rho_t = \rho_\infty - 2t\beta_2^t/(1-\beta_2^t)`: while :math:`\rho_t \le 5` the step is
    :math:`\theta_t = \theta_{t-1} - \gamma\hat m_t`; afterwards it is scaled by the adaptive rate
    :math:`\sqrt{1-\beta_2^t}/(\sqrt{v_t}+\epsilon)` and the rectification
    :math:`r_t = \sqrt{\frac{(\rho_t-4)(\rho_t-2)\rho_\infty}{(\rho_\infty-4)(\rho_\infty-2)\rho_t}}`.

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate (float or 1-element tensor). Default: 1e-3.
        betas: coefficients of the running averages of the gradient and its square.
        eps: term added to the denominator. Default: 1e-8.
        weight_decay: weight decay coefficient. Default: 0.
        decoupled_weight_decay: apply weight decay to the parameter directly (as AdamW).
        foreach, capturable: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.
        fused: None/True: one fused kernel per parameter where possible; False: tensor operators.

    State per parameter: ``step``, ``exp_avg`` and ``exp_avg_sq``.
    """

    _group_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False),
                       ("decoupled_weight_decay", False))

    def __init__(self, params, lr: float | Tensor = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None):
        _check_lr(lr)
        betas = _check_betas(betas, eps, weight_decay)
        _check_flags(differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        self._fused = fused
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, exp_avgs, exp_avg_sqs, steps = self._gather(group, ("exp_avg", "exp_avg_sq", "step"),
                                                                   _init_adam_state)
        beta1, beta2 = group["betas"]
        radam(params, grads, exp_avgs, exp_avg_sqs, steps, beta1=beta1, beta2=beta2, lr=group["lr"],
              weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
              decoupled_weight_decay=group["decoupled_weight_decay"], fused=self._fused)


def radam(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_avg_sqs: list[Tensor],
          state_steps: list[Tensor], *, beta1: float, beta2: float, lr: float | Tensor, weight_decay: float,
          eps: float, decoupled_weight_decay: bool = False, maximize: bool = False,
          fused: bool | None = None) -> None:
    """The update of :class:`RAdam` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        m, v = exp_avgs[i], exp_avg_sqs[i]
        step = bump_step(state_steps[i])
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        rectify = rho_t > 5.0
        rect = 1.0
        if rectify:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
        dt = K.fused_dtype(p) if fused is not False else None
        if dt is not None:
            w1, omw1, small = _lerp_args(dt, 1 - beta1)
            if K.launch(K.kernels().radam, p, g, (m, v),
                        K.pack(dt, weight_decay, 1 - lr * weight_decay, w1, omw1, beta2, 1 - beta2, bias_correction1,
                               lr, bias_correction2**0.5, eps, rect, 1),
                        maximize, decoupled_weight_decay, small, rectify):
                continue
        grad = decayed_grad(p, g, maximize, weight_decay, lr if decoupled_weight_decay else None)
        m.lerp_(grad, 1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_corrected_exp_avg = m / bias_correction1
        if rectify:
            adaptive = v.sqrt().add_(eps).reciprocal() * bias_correction2**0.5
            p.add_(bias_corrected_exp_avg * lr * adaptive * rect, alpha=-1.0)
        else:
            p.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
    K.flush()  # the CUDA parameters, updated together (Note [Multi-tensor CUDA updates])
