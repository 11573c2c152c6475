"""Adafactor (Shazeer and Stern, 2018), as ``torch.optim.Adafactor``: factored second moments."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim._functional import bump_step
from flambeau.optim.optimizer import Optimizer, _step_tensor, _to_scalar

__all__ = ["Adafactor", "adafactor"]


class Adafactor(Optimizer):
    r"""Adafactor, as ``torch.optim.Adafactor`` (torch's variant: no first moment, relative step size).

    For a parameter of two or more dimensions the second moment is kept factored, one row and one
    column statistic per matrix of the last two dimensions; a vector keeps a full one. At step ``t``:

    .. math::
        \beta_{2,t} = 1 - t^{c},\quad \rho_t = \min(\gamma, 1/\sqrt t),\quad
        \alpha_t = \max(\epsilon_2, \mathrm{RMS}(\theta_{t-1}))\,\rho_t,\quad
        \theta \leftarrow \theta (1 - \gamma\lambda)

    then ``R, C`` (row and column means of ``g^2``) are averaged with weight ``1 - beta2_t``, the
    variance estimate is ``R C / max(mean(R), eps1)`` (``v`` for vectors), ``U = g / sqrt(max(v, eps1^2))``
    and ``theta -= alpha_t / max(1, RMS(U) / d) * U``.

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: the maximum relative step size ``gamma`` (float or 1-element tensor). Default: 1e-2.
        beta2_decay: the exponent ``c`` of the second-moment decay (``<= 0``). Default: -0.8.
        eps: ``(eps1, eps2)``: ``eps1`` floors the variance (None: the dtype's machine epsilon),
            ``eps2`` floors the parameter RMS. Default: ``(None, 1e-3)``.
        d: the clipping threshold of the update's RMS (``>= 1``). Default: 1.0.
        weight_decay: decoupled weight decay ``lambda``. Default: 0.
        foreach: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.

    State per parameter: ``step``, and ``row_var`` and ``col_var`` (two or more dimensions) or
    ``variance`` (vectors), as torch's.
    """

    def __init__(self, params, lr: float | Tensor = 1e-2, beta2_decay: float = -0.8, eps=(None, 1e-3),
                 d: float = 1.0, weight_decay: float = 0.0, *, foreach: bool | None = None,
                 maximize: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        rows, cols, variances, steps = [], [], [], []
        params, grads = self._gather(group, ())  # checks every gradient first (Note [Gradient checks])
        for p in params:
            if p.dtype.is_complex:
                raise RuntimeError("Adafactor does not support complex parameters")
            if p.grad.is_sparse:
                raise RuntimeError("Adafactor does not support sparse gradients")
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _step_tensor()
                if p.grad.ndim > 1:
                    state["row_var"] = p.grad.new_zeros((*p.grad.shape[:-1], 1))
                    state["col_var"] = p.grad.new_zeros((*p.grad.shape[:-2], 1, p.grad.shape[-1]))
                else:
                    state["variance"] = fl.zeros_like(p.grad)
            rows.append(state.get("row_var"))
            cols.append(state.get("col_var"))
            variances.append(state.get("variance"))
            steps.append(state["step"])
        eps1, eps2 = group["eps"]
        adafactor(params, grads, rows, cols, variances, steps, d=group["d"], lr=group["lr"],
                  beta2_decay=group["beta2_decay"], weight_decay=group["weight_decay"], eps1=eps1, eps2=eps2,
                  maximize=group["maximize"])


def adafactor(params: list[Tensor], grads: list[Tensor], row_vars: list, col_vars: list, variances: list,
              state_steps: list[Tensor], *, d: float, lr: float | Tensor, beta2_decay: float, weight_decay: float,
              eps1: float | None, eps2: float, maximize: bool) -> None:
    """The update of :class:`Adafactor` on lists of parameters and their state (torch's single-tensor form)."""
    lr = _to_scalar(lr)
    for i, param in enumerate(params):
        grad = -grads[i] if maximize else grads[i]
        if eps1 is None:
            eps1 = fl.finfo(param.dtype).eps
        step = bump_step(state_steps[i])
        one_minus_beta2 = step ** beta2_decay
        rho = min(lr, 1 / step ** 0.5)
        alpha = max(eps2, param.norm(2).item() / param.numel() ** 0.5) * rho
        if weight_decay != 0:
            param.mul_(1 - lr * weight_decay)
        if grad.ndim > 1:
            row_var, col_var = row_vars[i], col_vars[i]
            row_var.lerp_(grad.norm(dim=-1, keepdim=True).square().div(grad.shape[-1]), one_minus_beta2)
            col_var.lerp_(grad.norm(dim=-2, keepdim=True).square().div(grad.shape[-2]), one_minus_beta2)
            estimate = (row_var @ col_var).div(row_var.mean(dim=-2, keepdim=True).clamp_min(eps1))
        else:
            variances[i].lerp_(grad * grad, one_minus_beta2)
            estimate = variances[i].clone()
        update = estimate.clamp_min(eps1 * eps1).rsqrt().mul(grad)
        denom = max(1.0, update.norm(2).item() / (update.numel() ** 0.5 * d))
        param.add_(update, alpha=-alpha / denom)
