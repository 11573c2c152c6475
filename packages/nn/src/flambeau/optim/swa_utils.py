"""Stochastic weight averaging and exponential moving averages of a model (``torch.optim.swa_utils``).

:class:`AveragedModel` keeps a copy of a model whose parameters (and optionally buffers) are a
running average of the model's, updated by :meth:`AveragedModel.update_parameters` after optimizer
steps: the equal-weight average of SWA (Izmailov et al., 2018) by default, or an exponential moving
average with :func:`get_ema_multi_avg_fn`. :class:`SWALR` anneals the learning rate to a constant
SWA rate; :func:`update_bn` recomputes the batch-norm statistics of the averaged weights with one
pass over the data.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any

import flambeau as fl
from flambeau import Tensor
from flambeau.nn.modules.batchnorm import _BatchNorm
from flambeau.nn.modules.module import Module
from flambeau.optim.lr_scheduler import LRScheduler, _format_param, _warn_get_lr_called_within_step
from flambeau.optim.optimizer import Optimizer

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """An in-place update of lists of averaged tensors: ``ema = decay * ema + (1 - decay) * current``.

    Pass it as ``AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))``. Floating tensors
    are updated with ``lerp_`` (as torch's foreach kernel).

    Args:
        decay: the decay in ``[0, 1]``.
    """
    _check_decay(decay)

    def ema_update(ema_param_list: list, current_param_list: list, _) -> None:
        with fl.no_grad():
            if ema_param_list[0].is_floating_point():
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """An in-place update of lists of averaged tensors to the equal-weight average of ``num_averaged + 1`` models."""

    def swa_update(averaged_param_list: list, current_param_list: list, num_averaged) -> None:
        with fl.no_grad():
            if averaged_param_list[0].is_floating_point():
                weight = 1 / (num_averaged + 1)
                weight = float(weight) if isinstance(weight, Tensor) else weight
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.lerp_(p_model, weight)
            else:
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    diff = p_model - p_avg
                    if isinstance(num_averaged, Tensor):
                        p_avg.addcdiv_(diff, num_averaged + 1)
                    else:
                        p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """``avg_fn(ema, current, num_averaged) = decay * ema + (1 - decay) * current`` (one tensor at a time).

    Args:
        decay: the decay in ``[0, 1]``.
    """
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with fl.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """``avg_fn(avg, current, n) = avg + (current - avg) / (n + 1)``: the running equal-weight average."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with fl.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _group_by_device_and_dtype(averaged: list, current: list) -> dict:
    groups: dict = {}
    for p_avg, p_model in zip(averaged, current):
        lists = groups.setdefault((p_avg.device, p_avg.dtype), ([], []))
        lists[0].append(p_avg)
        lists[1].append(p_model)
    return groups


class AveragedModel(Module):
    """A copy of ``model`` whose parameters are a running average of ``model``'s (SWA or EMA).

    The copy is made at construction (``deepcopy``, moved to ``device`` if given). Each
    :meth:`update_parameters` call folds the model's current parameters into the average: the first
    call copies them, later ones apply ``avg_fn`` (per tensor) or ``multi_avg_fn`` (in place, on the
    lists of tensors of one device and dtype); without either, the equal-weight average
    ``avg + (current - avg) / (n + 1)``. Buffers are copied from the model (not averaged) unless
    ``use_buffers``, which averages parameters and buffers alike. Calling the averaged model runs
    the copy.

    Args:
        model: the model to average.
        device: where to keep the averaged copy (default: where ``model`` is).
        avg_fn: ``avg_fn(averaged, current, num_averaged) -> new averaged`` for one tensor.
        multi_avg_fn: ``multi_avg_fn(averaged_list, current_list, num_averaged)`` updating in place
            (see :func:`get_ema_multi_avg_fn`); exclusive with ``avg_fn``.
        use_buffers: average the buffers too (instead of copying them).

    Attributes:
        module: the averaged copy.
        n_averaged: int64 buffer, the number of models averaged so far.

    ``avg_fn`` and ``multi_avg_fn`` are not part of the :meth:`state_dict`. With batch
    normalisation, either ``use_buffers=True`` or recompute the statistics with :func:`update_bn`.
    """

    def __init__(self, model: Module, device=None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", fl.tensor(0, dtype=fl.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """Run the averaged copy."""
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters (and buffers, with ``use_buffers``) into the average."""
        if self.use_buffers:
            self_params = itertools.chain(self.module.parameters(), self.module.buffers())
            model_params = itertools.chain(model.parameters(), model.buffers())
        else:
            self_params, model_params = self.parameters(), model.parameters()
        averaged, current = [], []
        copy_param = bool(self.n_averaged == 0)
        with fl.no_grad():
            for p_avg, p_model in zip(self_params, model_params):
                p_model_ = p_model.detach().to(p_avg.device)
                averaged.append(p_avg.detach())
                current.append(p_model_)
                if copy_param:
                    p_avg.detach().copy_(p_model_)
            if self.n_averaged > 0:
                if self.avg_fn is not None:
                    for p_avg, p_model in zip(averaged, current):
                        p_avg.copy_(self.avg_fn(p_avg, p_model, self.n_averaged.to(p_avg.device)))
                else:
                    update = self.multi_avg_fn
                    for (device, _), (avg_list, cur_list) in _group_by_device_and_dtype(averaged, current).items():
                        n_averaged = self.n_averaged.to(device)
                        if update is not None:
                            update(avg_list, cur_list, n_averaged)
                        else:  # torch's per-tensor formula (its CPU path)
                            swa = get_swa_avg_fn()
                            for p_avg, p_model in zip(avg_list, cur_list):
                                p_avg.copy_(swa(p_avg, p_model, n_averaged))
            if not self.use_buffers:
                # the buffers are not averaged: they follow the model's
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
            self.n_averaged += 1


def update_bn(loader: Iterable[Any], model: Module, device=None) -> None:
    """Recompute the running statistics of every batch normalisation layer of ``model`` over ``loader``.

    The statistics are reset, then accumulated as a cumulative average (``momentum=None``) over one
    pass in training mode; each layer's momentum and the model's mode are restored afterwards.

    Args:
        loader: batches, each a tensor or a list/tuple whose first element is the input tensor.
        model: the model (typically an :class:`AveragedModel`).
        device: if given, each input is moved there first.
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with fl.no_grad():
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate to a fixed ``swa_lr`` over ``anneal_epochs`` steps, then keep it.

    At step ``t`` the rate is ``swa_lr * alpha + lr_0 * (1 - alpha)``, ``alpha`` going from 0 to 1
    as ``(1 - cos(pi * t / anneal_epochs)) / 2`` (``"cos"``) or ``t / anneal_epochs``
    (``"linear"``). It is used with :class:`AveragedModel` late in training, often after another
    scheduler.

    Args:
        optimizer: the wrapped optimizer.
        swa_lr: the final rate, for all groups or one per group.
        anneal_epochs: the steps of the annealing phase (>= 0).
        anneal_strategy: ``"cos"`` or ``"linear"``.
        last_epoch: index of the last epoch when resuming. Default: -1.
    """

    def __init__(self, optimizer: Optimizer, swa_lr, anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1) -> None:
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha: float):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self) -> list:
        """The next rates: each group's rate moved from its current value toward ``swa_lr``."""
        _warn_get_lr_called_within_step(self)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        # the rate before annealing, recovered from the current one (the schedule is chainable)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state: every attribute except the optimizer and the annealing function."""
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state from :meth:`state_dict`."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
