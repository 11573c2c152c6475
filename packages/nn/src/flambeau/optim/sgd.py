"""Stochastic gradient descent, with momentum, dampening, Nesterov momentum and weight decay."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau._sparse import _linear_index
from flambeau.optim import _kernels as K
from flambeau.optim._state_memory import state_memory
from flambeau.optim.optimizer import Optimizer, _check_flags, _check_lr, _to_scalar

__all__ = ["SGD", "sgd"]


class SGD(Optimizer):
    r"""Stochastic gradient descent (optionally with momentum), as ``torch.optim.SGD``.

    With gradient :math:`g_t` (negated when ``maximize``), weight decay :math:`\lambda`, momentum
    :math:`\mu` and dampening :math:`\tau`:

    .. math::
        g_t \leftarrow g_t + \lambda\theta_{t-1}, \quad
        b_t = \mu b_{t-1} + (1-\tau) g_t \;(b_1 = g_1), \quad
        \theta_t = \theta_{t-1} - \gamma\,(g_t + \mu b_t \text{ if nesterov else } b_t).

    Args:
        params: iterable of tensors to optimize or of dicts defining parameter groups.
        lr: learning rate (float or 1-element tensor). Default: 1e-3.
        momentum: momentum factor. Default: 0.
        dampening: dampening of the momentum. Default: 0.
        weight_decay: L2 penalty. Default: 0.
        nesterov: use Nesterov momentum (needs ``momentum > 0`` and zero dampening).
        maximize: maximize the objective instead of minimizing it.
        foreach: accepted for compatibility with torch; flambeau always fuses.
        differentiable: must be False (differentiating through the step is not supported).
        fused: None or True run each parameter's update as one fused kernel where the parameter
            is a contiguous float32/float64 CPU tensor (other tensors use tensor operators);
            False always uses tensor operators.

    State per parameter: ``momentum_buffer`` (when ``momentum != 0``), same shape and dtype.
    """

    _group_defaults = (("nesterov", False), ("maximize", False), ("foreach", None), ("differentiable", False),
                       ("fused", None))

    def __init__(self, params, lr: float | Tensor = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None):
        _check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_flags(differentiable)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform one optimization step (see :meth:`Optimizer.step`)."""
        return self._step_groups(closure)

    def _step_group(self, group):
        params, grads, bufs = [], [], []
        use_momentum = group["momentum"] != 0
        for p in group["params"]:
            g = p.grad
            if g is not None and g.is_sparse:  # nn.Embedding(sparse=True)
                if use_momentum or group["weight_decay"] != 0:
                    g = g.to_dense()  # the same numbers as torch's sparse momentum buffer
                else:
                    _sparse_update_(p, g, group["lr"] if group["maximize"] else -group["lr"])
                    continue
            if g is not None:
                if g._data.shape != p._data.shape or g.dtype is not p.dtype or g._device is not p._device:
                    self._check_grad(group, p, g)  # raises (Note [Gradient checks])
                params.append(p)
                grads.append(g)
                if use_momentum:  # (no state at all without momentum, as torch)
                    bufs.append(self.state[p].get("momentum_buffer"))
        # the first step makes the momentum buffers (Note [Optimizer state in a memory pool of its own])
        new = [p for p, buf in zip(params, bufs) if buf is None] if use_momentum else ()
        with state_memory(self, new):
            sgd(params, grads, bufs, weight_decay=group["weight_decay"], momentum=group["momentum"], lr=group["lr"],
                dampening=group["dampening"], nesterov=group["nesterov"], maximize=group["maximize"],
                fused=group["fused"])
        if use_momentum:
            for p, buf in zip(params, bufs):
                self.state[p]["momentum_buffer"] = buf


def _sparse_update_(p: Tensor, g: Tensor, alpha: float) -> None:
    """``p += alpha * g`` for a sparse COO gradient ``g``, touching only the rows it holds (as torch's
    ``param.add_(sparse_grad, alpha=-lr)``)."""
    g = g.coalesce()
    sparse_dim = g.sparse_dim()
    rows = _linear_index(g.indices(), p.shape[:sparse_dim])
    p.view(-1, *p.shape[sparse_dim:]).index_add_(0, rows, g.values().to(p.dtype), alpha=_to_scalar(alpha))


def sgd(params: list[Tensor], grads: list[Tensor], momentum_buffer_list: list[Tensor | None], *,
        weight_decay: float, momentum: float, lr: float | Tensor, dampening: float, nesterov: bool,
        maximize: bool, fused: bool | None = None) -> None:
    """The SGD update of :class:`SGD` on lists of parameters (functional form, as ``torch.optim.sgd``).

    Args:
        params: parameters, updated in place.
        grads: their gradients.
        momentum_buffer_list: their momentum buffers (None entries are created, in place in the
            list); ignored when ``momentum == 0``.
        weight_decay, momentum, lr, dampening, nesterov, maximize: see :class:`SGD`.
        fused: False forces the tensor-operator path.
    """
    lr = _to_scalar(lr)
    kernel = K.kernels().sgd if fused is not False else None
    scalars: dict = {}  # kernel scalars by dtype
    for i, p in enumerate(params):
        g = grads[i]
        buf = momentum_buffer_list[i] if momentum != 0 else None
        dt = K.fused_dtype(p) if kernel is not None else None
        if dt is not None:
            args = scalars.get(dt)
            if args is None:
                args = scalars[dt] = (K.pack(dt, weight_decay, momentum, 1 - dampening, -lr), maximize, momentum != 0)
            first = momentum != 0 and buf is None
            new_buf = fl.empty_like(p) if first else buf  # kept only once the kernel has filled it
            if K.launch(kernel, p, g, (new_buf,), *args, first, nesterov):
                if first:
                    momentum_buffer_list[i] = new_buf
                continue
        grad = -g if maximize else g
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        if momentum != 0:
            if buf is None:
                buf = momentum_buffer_list[i] = grad.detach().clone()
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            grad = grad.add(buf, alpha=momentum) if nesterov else buf
        p.add_(grad, alpha=-lr)
    K.flush()  # the CUDA parameters, updated together (Note [Multi-tensor CUDA updates])
