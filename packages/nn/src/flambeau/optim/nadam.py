"""NAdam: Adam with Nesterov momentum (and optional decoupled weight decay)."""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim._functional import bump_step, decayed_grad
from flambeau.optim.adam import _check_betas, _lerp_args
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _check_nonnegative, _step_tensor, _to_scalar

__all__ = ["NAdam", "nadam"]


class NAdam(Optimizer):
    r"""NAdam, as ``torch.optim.NAdam``.

    With :math:`\mu_t = \beta_1 (1 - \tfrac12 0.96^{t\psi})` (:math:`\psi` the momentum decay):

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t,\quad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2,\quad
        \theta_t = \theta_{t-1} - \gamma\frac{1-\mu_t}{1-\prod_{i\le t}\mu_i}\frac{g_t}{d_t}
        - \gamma\frac{\mu_{t+1}}{1-\prod_{i\le t+1}\mu_i}\frac{m_t}{d_t},\quad
        d_t = \sqrt{v_t/(1-\beta_2^t)} + \epsilon

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate (float or 1-element tensor). Default: 2e-3.
        betas: coefficients of the running averages of the gradient and its square.
        eps: term added to the denominator. Default: 1e-8.
        weight_decay: weight decay coefficient. Default: 0.
        momentum_decay: :math:`\psi`. Default: 4e-3.
        decoupled_weight_decay: apply weight decay to the parameter directly (as AdamW).
        foreach, capturable: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.
        fused: None/True: one fused kernel per parameter where possible; False: tensor operators.

    State per parameter: ``step``, ``mu_product`` (0-dim float32 tensors), ``exp_avg`` and
    ``exp_avg_sq``.
    """

    _group_defaults = (("maximize", False), ("foreach", None), ("capturable", False), ("differentiable", False),
                       ("decoupled_weight_decay", False))

    def __init__(self, params, lr: float | Tensor = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        _check_lr(lr)
        betas = _check_betas(betas, eps, weight_decay)
        _check_nonnegative(momentum_decay=momentum_decay)
        _check_flags(differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        self._fused = fused
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, exp_avgs, exp_avg_sqs, mu_products, steps = self._gather(
            group, ("exp_avg", "exp_avg_sq", "mu_product", "step"), _init_state)
        beta1, beta2 = group["betas"]
        nadam(params, grads, exp_avgs, exp_avg_sqs, mu_products, steps, beta1=beta1, beta2=beta2, lr=group["lr"],
              weight_decay=group["weight_decay"], momentum_decay=group["momentum_decay"], eps=group["eps"],
              decoupled_weight_decay=group["decoupled_weight_decay"], maximize=group["maximize"], fused=self._fused)


def _init_state(state, p, group):
    state["step"] = _step_tensor()
    state["mu_product"] = _step_tensor().add_(1)
    state["exp_avg"] = fl.zeros_like(p)
    state["exp_avg_sq"] = fl.zeros_like(p)


def _mul_mu_product(mu_product: Tensor, mu: float) -> float:
    """``mu_product *= mu`` in the counter's dtype (float32, as torch keeps it); returns the new value."""
    a = mu_product._data
    if isinstance(a, np.ndarray) and a.ndim == 0:
        a[()] = a * a.dtype.type(mu)
        mu_product._storage._version += 1
        return float(a)
    mu_product.mul_(mu)
    return mu_product.item()


def nadam(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_avg_sqs: list[Tensor],
          mu_products: list[Tensor], state_steps: list[Tensor], *, beta1: float, beta2: float, lr: float | Tensor,
          weight_decay: float, momentum_decay: float, eps: float, decoupled_weight_decay: bool = False,
          maximize: bool = False, fused: bool | None = None) -> None:
    """The update of :class:`NAdam` on lists of parameters and their state (see the class for the arguments)."""
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        m, v = exp_avgs[i], exp_avg_sqs[i]
        step = bump_step(state_steps[i])
        bias_correction2 = 1 - beta2**step
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product = _mul_mu_product(mu_products[i], mu)
        mu_product_next = mu_product * mu_next
        c_grad = -lr * (1.0 - mu) / (1.0 - mu_product)
        c_avg = (-lr * mu_next) / (1.0 - mu_product_next)
        dt = K.fused_dtype(p) if fused is not False else None
        if dt is not None:
            w1, omw1, small = _lerp_args(dt, 1 - beta1)
            if K.launch(K.kernels().nadam, p, g, (m, v),
                        K.pack(dt, weight_decay, 1 - lr * weight_decay, w1, omw1, beta2, 1 - beta2, bias_correction2,
                               eps, c_grad, c_avg),
                        maximize, decoupled_weight_decay, small):
                continue
        grad = decayed_grad(p, g, maximize, weight_decay, lr if decoupled_weight_decay else None)
        m.lerp_(grad, 1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = v.div(bias_correction2).sqrt().add_(eps)
        p.addcdiv_(grad, denom, value=c_grad)
        p.addcdiv_(m, denom, value=c_avg)
    K.flush()  # the CUDA parameters, updated together (Note [Multi-tensor CUDA updates])
