"""SparseAdam: Adam for sparse gradients (``nn.Embedding(sparse=True)``), as ``torch.optim.SparseAdam``."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau import Tensor
from flambeau._sparse import _linear_index
from flambeau.optim.optimizer import Optimizer, _check_lr, _to_scalar

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    r"""Adam restricted to the rows a sparse gradient holds, as ``torch.optim.SparseAdam``.

    Only the moments and parameter entries present in the (coalesced) gradient are updated:

    .. math::
        m \mathrel{+}= (1 - \beta_1)(g - m), \quad v \mathrel{+}= (1 - \beta_2)(g^2 - v), \quad
        \theta \mathrel{-}= \gamma\,\frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t}\,\frac{m}{\sqrt{v} + \epsilon}

    Args:
        params: iterable of dense tensors to optimize, or of dicts defining parameter groups.
        lr: learning rate. Default: 1e-3.
        betas: ``(beta1, beta2)``. Default: (0.9, 0.999).
        eps: term added to the denominator. Default: 1e-8.
        maximize: maximize the objective instead of minimizing it.

    State per parameter (created at its first step): ``step`` (int), ``exp_avg``, ``exp_avg_sq``.
    A dense gradient raises, as in torch.
    """

    def __init__(self, params, lr: float | Tensor = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False):
        _check_lr(lr)
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse_params = [f"[{gi}, {pi}]" if len(self.param_groups) > 1 else str(pi)
                         for gi, group in enumerate(self.param_groups)
                         for pi, p in enumerate(group["params"]) if p.is_sparse]
        if sparse_params:
            raise ValueError(f"Sparse params at indices {sparse_params}: SparseAdam requires dense parameter "
                             "tensors")

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        beta1, beta2 = group["betas"]
        lr, eps = _to_scalar(group["lr"]), group["eps"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if not g.is_sparse:
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = fl.zeros_like(p)
                state["exp_avg_sq"] = fl.zeros_like(p)
            state["step"] += 1
            _sparse_adam_update(p, -g if group["maximize"] else g, state, lr, beta1, beta2, eps)


def _sparse_adam_update(p: Tensor, grad, state: dict, lr: float, beta1: float, beta2: float, eps: float) -> None:
    grad = grad.coalesce()  # the update is not linear in the gradient: one entry per index
    if grad._nnz() == 0:
        return
    sd = grad.sparse_dim()
    rows_shape = tuple(p.shape[:sd])
    lin = _linear_index(grad._indices(), rows_shape)
    values = grad._values()
    flat = (math.prod(rows_shape),) + tuple(p.shape[sd:])
    exp_avg, exp_avg_sq = state["exp_avg"].view(flat), state["exp_avg_sq"].view(flat)
    old_avg = exp_avg.index_select(0, lin)
    old_sq = exp_avg_sq.index_select(0, lin)
    avg_update = (values - old_avg) * (1 - beta1)
    sq_update = (values * values - old_sq) * (1 - beta2)
    exp_avg.index_add_(0, lin, avg_update)
    exp_avg_sq.index_add_(0, lin, sq_update)
    numer = avg_update + old_avg
    denom = (sq_update + old_sq).sqrt() + eps
    step = state["step"]
    step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
    p.view(flat).index_add_(0, lin, (numer / denom) * -step_size)
