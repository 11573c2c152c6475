"""RMSprop: gradients scaled by a running root mean square (optionally centered, with momentum)."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.optim import _kernels as K
from flambeau.optim._functional import bump_step, decayed_grad
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _check_nonnegative, _step_tensor, _to_scalar

__all__ = ["RMSprop", "rmsprop"]


class RMSprop(Optimizer):
    r"""RMSprop, as ``torch.optim.RMSprop``.

    .. math::
        v_t = \alpha v_{t-1} + (1-\alpha) g_t^2, \quad
        \tilde v_t = v_t - \bar g_t^2 \text{ (centered, } \bar g_t = \alpha\bar g_{t-1} + (1-\alpha)g_t),\quad
        b_t = \mu b_{t-1} + g_t / (\sqrt{\tilde v_t} + \epsilon), \quad \theta_t = \theta_{t-1} - \gamma b_t

    (without momentum, :math:`\theta_t = \theta_{t-1} - \gamma g_t / (\sqrt{\tilde v_t} + \epsilon)`).

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate (float or 1-element tensor). Default: 1e-2.
        alpha: smoothing constant. Default: 0.99.
        eps: term added to the denominator. Default: 1e-8.
        weight_decay: L2 penalty. Default: 0.
        momentum: momentum factor. Default: 0.
        centered: normalise by an estimate of the gradient's variance.
        capturable, foreach: accepted for compatibility with torch.
        maximize: maximize the objective instead of minimizing it.
        differentiable: must be False.
        fused: None/True: one fused kernel per parameter where possible; False: tensor operators.

    State per parameter: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0) and
    ``grad_avg`` (centered).
    """

    _group_defaults = (("momentum", 0), ("centered", False), ("foreach", None), ("maximize", False),
                       ("differentiable", False), ("capturable", False))

    def __init__(self, params, lr: float | Tensor = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False, *,
                 fused: bool | None = None):
        _check_lr(lr)
        _check_nonnegative(eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        _check_flags(differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        self._fused = fused
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, square_avgs, grad_avgs, bufs, steps = self._gather(
            group, ("square_avg", "grad_avg" if group["centered"] else None,
                    "momentum_buffer" if group["momentum"] > 0 else None, "step"), _init_state)
        rmsprop(params, grads, square_avgs, grad_avgs, bufs, steps, lr=group["lr"], alpha=group["alpha"],
                eps=group["eps"], weight_decay=group["weight_decay"], momentum=group["momentum"],
                centered=group["centered"], maximize=group["maximize"], fused=self._fused)


def _init_state(state, p, group):
    state["step"] = _step_tensor()
    state["square_avg"] = fl.zeros_like(p)
    if group["momentum"] > 0:
        state["momentum_buffer"] = fl.zeros_like(p)
    if group["centered"]:
        state["grad_avg"] = fl.zeros_like(p)


def rmsprop(params: list[Tensor], grads: list[Tensor], square_avgs: list[Tensor], grad_avgs: list[Tensor],
            momentum_buffer_list: list[Tensor], state_steps: list[Tensor], *, lr: float | Tensor, alpha: float,
            eps: float, weight_decay: float, momentum: float, centered: bool, maximize: bool,
            fused: bool | None = None) -> None:
    """The update of :class:`RMSprop` on lists of parameters and their state (see the class for the arguments).

    ``grad_avgs`` is used only when ``centered``, ``momentum_buffer_list`` only when ``momentum > 0``;
    ``fused=False`` forces the tensor-operator path.
    """
    lr = _to_scalar(lr)
    for i, p in enumerate(params):
        g = grads[i]
        sq = square_avgs[i]
        ga = grad_avgs[i] if centered else None
        buf = momentum_buffer_list[i] if momentum > 0 else None
        bump_step(state_steps[i])
        dt = K.fused_dtype(p) if fused is not False else None
        if dt is not None:
            oma, one = K.cast(dt, 1 - alpha, 1)
            if K.launch(K.kernels().rmsprop, p, g, (sq, ga, buf),
                        K.pack(dt, weight_decay, alpha, oma, one - oma, eps, momentum, -lr),
                        bool(abs(oma) < 0.5), maximize, centered, buf is not None):
                continue
        grad = decayed_grad(p, g, maximize, weight_decay)
        sq.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if centered:
            ga.lerp_(grad, 1 - alpha)
            avg = sq.addcmul(ga, ga, value=-1).sqrt_()
        else:
            avg = sq.sqrt()
        avg = avg.add_(eps)
        if momentum > 0:
            buf.mul_(momentum).addcdiv_(grad, avg)
            p.add_(buf, alpha=-lr)
        else:
            p.addcdiv_(grad, avg, value=-lr)
    K.flush()  # the CUDA parameters, updated together (Note [Multi-tensor CUDA updates])
