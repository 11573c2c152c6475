"""AdamW: Adam with decoupled weight decay."""

from __future__ import annotations

from flambeau import Tensor
from flambeau.optim.adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    r"""AdamW, as ``torch.optim.AdamW``: :class:`Adam` with decoupled weight decay.

    Each step first scales the parameter, :math:`\theta \leftarrow \theta (1 - \gamma\lambda)`, then
    applies the Adam update (the decay never enters the moment estimates).

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate (float or 1-element tensor). Default: 1e-3.
        betas: coefficients of the running averages of the gradient and its square.
        eps: term added to the denominator. Default: 1e-8.
        weight_decay: decoupled weight decay coefficient. Default: 1e-2.
        amsgrad: use the AMSGrad variant.
        maximize: maximize the objective instead of minimizing it.
        foreach, capturable: accepted for compatibility with torch.
        differentiable: must be False.
        fused: None/True: one fused kernel per parameter where possible; False: tensor operators.
    """

    def __init__(self, params, lr: float | Tensor = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
