"""The :class:`Optimizer` base class: parameter groups, per-parameter state, state dicts, hooks.

An optimizer holds ``param_groups`` (a list of dicts: ``"params"``, the tensors to update, and the
group's hyperparameters, missing ones filled from ``defaults``) and ``state``, a dict of dicts keyed
by parameter tensor (``state[p]["exp_avg"]`` ...). Subclasses implement ``step``, which updates every
parameter that has a gradient. This follows ``torch.optim.Optimizer`` name for name, including the
layout of :meth:`Optimizer.state_dict`, so checkpoints move between the two libraries after a
tensor conversion.
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from copy import deepcopy
from itertools import chain
from typing import Any

import flambeau as fl
from flambeau import Tensor
from flambeau.optim._functional import check_grad
from flambeau.optim._state_memory import state_memory

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton marking a hyperparameter that each parameter group must give."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj) -> str:
    if isinstance(obj, Tensor):
        return "flambeau.Tensor"
    module = type(obj).__module__
    name = type(obj).__qualname__
    return name if module == "builtins" else f"{module}.{name}"


def _to_scalar(x):
    """A 1-element tensor hyperparameter (``lr=fl.tensor(0.01)``) as a Python number."""
    if isinstance(x, Tensor):
        return x.item()
    return x


def _check_lr(lr) -> None:
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_nonnegative(**values) -> None:
    """Raise torch's ``ValueError("Invalid <name> value: ...")`` for the first negative (or NaN) value."""
    for name, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {'epsilon' if name == 'eps' else name} value: {value}")


def _check_flags(differentiable: bool = False, **_) -> None:
    if differentiable:
        raise ValueError("differentiable=True is not supported by flambeau.optim")


def _hooked_step(step):
    """Wrap a subclass's ``step`` so that step pre- and post-hooks run around it."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        self._opt_called = True  # read by the learning-rate schedulers' order check
        if self._optimizer_step_pre_hooks or _global_pre_hooks:
            for hook in chain(_global_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            f"{hook} must return None or a tuple of (new_args, new_kwargs), but got {result}."
                        )
                    args, kwargs = result
        out = step(self, *args, **kwargs)
        if self._optimizer_step_post_hooks or _global_post_hooks:
            for hook in chain(self._optimizer_step_post_hooks.values(), _global_post_hooks.values()):
                hook(self, args, kwargs)
        return out

    wrapper._hooked = True
    return wrapper


_global_pre_hooks: OrderedDict = OrderedDict()
_global_post_hooks: OrderedDict = OrderedDict()


def _register_hook(hooks: OrderedDict, hook: Callable, prepend: bool = False):
    """Add ``hook`` to ``hooks`` (first with ``prepend``); returns its removable handle."""
    from flambeau.nn.utils.hooks import RemovableHandle

    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def register_optimizer_step_pre_hook(hook: Callable):
    """Register a pre-hook run before the ``step`` of every optimizer: ``hook(optimizer, args, kwargs)``.

    Returns:
        A handle whose ``remove()`` unregisters the hook.
    """
    return _register_hook(_global_pre_hooks, hook)


def register_optimizer_step_post_hook(hook: Callable):
    """Register a post-hook run after the ``step`` of every optimizer: ``hook(optimizer, args, kwargs)``.

    Returns:
        A handle whose ``remove()`` unregisters the hook.
    """
    return _register_hook(_global_post_hooks, hook)


class Optimizer:
    """Base class of all optimizers.

    Args:
        params: an iterable of tensors (requiring grad) or of dicts defining parameter groups
            (each with a ``"params"`` entry and hyperparameters overriding ``defaults``). Tuples
            ``(name, tensor)`` (from ``named_parameters()``) record the names in the group's
            ``"param_names"``.
        defaults: default values of the hyperparameters, used by groups that do not set them.

    Attributes:
        param_groups: list of dicts, one per parameter group.
        state: per-parameter state, ``state[param]`` a dict (``defaultdict(dict)``).
        defaults: the default hyperparameters.
    """

    # (key, value) pairs that __setstate__ adds to groups missing them (checkpoints of older versions)
    _group_defaults: tuple = ()
    # ``fused`` of the optimizers that keep it out of their groups, as torch does (None: fuse where possible)
    _fused: bool | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_hooked", False):
            cls.step = _hooked_step(step)

    def __init__(self, params, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {_typename(params)}")
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                     "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())
        self.defaults.setdefault("differentiable", False)
        for param_state in self.state.values():
            # checkpoints of old torch versions hold the step counter as a Python number
            if isinstance(param_state, dict) and "step" in param_state and not isinstance(param_state["step"], Tensor):
                param_state["step"] = _step_tensor().add_(float(param_state["step"]))
        for group in self.param_groups:
            for key, value in self._group_defaults:
                group.setdefault(key, value)

    def __repr__(self) -> str:
        out = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    out += f"    {key}: {group[key]}\n"
        return out + ")"

    # --- hooks ------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook: Callable):
        """Register ``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)`` run before ``step``.

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        return _register_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable):
        """Register ``hook(optimizer, args, kwargs) -> None`` run after ``step``.

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        return _register_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False):
        """Register ``hook(optimizer)`` run at the start of :meth:`state_dict`."""
        return _register_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False):
        """Register ``hook(optimizer, state_dict) -> state_dict or None`` run at the end of :meth:`state_dict`."""
        return _register_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False):
        """Register ``hook(optimizer, state_dict) -> state_dict or None`` run before :meth:`load_state_dict`."""
        return _register_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False):
        """Register ``hook(optimizer)`` run after :meth:`load_state_dict`."""
        return _register_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # --- state dict ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state as a dict, in torch's layout.

        Returns:
            ``{"state": {id: {name: value}}, "param_groups": [group, ...]}`` where ids are integers
            numbering the parameters in group order, each group's ``"params"`` is its list of ids,
            and state tensors are the optimizer's own tensors (not copies).
        """
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        mapping: dict[int, int] = {}
        start = 0

        def pack_group(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            mapping.update({id(p): i for i, p in enumerate(group["params"], start) if id(p) not in mapping})
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    @staticmethod
    def _cast_state_value(param: Tensor, value: Tensor, key) -> Tensor:
        # Floating-point state follows the parameter's dtype and device; "step" is never cast.
        if key == "step":
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state produced by :meth:`state_dict` (of this class, in flambeau or torch layout).

        Parameters are matched by position: the i-th id of the saved groups is the i-th parameter
        of this optimizer's groups. Floating-point state tensors are cast to their parameter's dtype
        and device (``"step"`` counters are kept as they are).

        Args:
            state_dict: the dict to load.

        Raises:
            ValueError: if the number of groups or of parameters in a group differs.
        """
        state_dict = state_dict.copy()
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                return Optimizer._cast_state_value(param, value, key)
            if isinstance(value, dict):
                return {k: cast(param, v, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    # --- gradients and steps ----------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors.

        Args:
            set_to_none: set ``.grad`` to None (default) instead of filling it with zeros. With
                None, a parameter that gets no gradient before the next ``step`` is skipped by
                it; with zeros it is updated with a zero gradient (momentum and weight decay
                still move it).
        """
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        if g.grad_fn is not None:
                            g.detach_()
                        else:
                            g.requires_grad_(False)
                        g.zero_()

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one optimization step (update every parameter that has a gradient).

        Args:
            closure: a callable that re-evaluates the model and returns the loss (needed by
                :class:`LBFGS`, optional for the others).

        Returns:
            The closure's loss, or None.
        """
        raise NotImplementedError

    def _step_groups(self, closure: Callable[[], Any] | None):
        """The ``step`` of the optimizers that update each parameter group on its own: ``closure()`` with
        grad enabled, then ``self._step_group(group)`` for every group under ``no_grad``; returns the loss."""
        loss = None
        if closure is not None:
            with fl.enable_grad():
                loss = closure()
        with fl.no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _gather(self, group: dict[str, Any], keys: tuple, init_state: Callable | None = None) -> tuple:
        """The parameters of ``group`` that have a gradient, their gradients and, for each name of ``keys``,
        the list of their ``state[name]`` (an empty list where the name is None).

        ``init_state(state, param, group)`` fills the empty state of a parameter at its first step.

        Raises:
            RuntimeError: if a gradient's shape, dtype or device is not its parameter's (before any
                state is created for it).
        """
        params, grads, states = [], [], []
        state_of = self.state
        for p in group["params"]:
            g = p.grad
            if g is not None:
                if g._data.shape != p._data.shape or g.dtype is not p.dtype or g._device is not p._device:
                    self._check_grad(group, p, g)  # raises (Note [Gradient checks])
                params.append(p)
                grads.append(g)
                state = state_of[p]
                if init_state is not None and len(state) == 0:
                    with state_memory(self, (p,)):  # Note [Optimizer state in a memory pool of its own]
                        init_state(state, p, group)
                states.append(state)
        return (params, grads, *([s[k] for s in states] if k is not None else [] for k in keys))

    def _check_grad(self, group: dict[str, Any], p: Tensor, g: Tensor) -> None:
        """:func:`check_grad` of ``p``'s gradient, naming the parameter by its place in ``param_groups``."""
        gi = next(i for i, other in enumerate(self.param_groups) if other is group)
        i = next(i for i, other in enumerate(group["params"]) if other is p)
        name = f"param_groups[{gi}]['params'][{i}]"
        if "param_names" in group:
            name += f" ({group['param_names'][i]!r})"
        check_grad(p, g, f"{type(self).__name__}.step(): the grad of {name}")

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group (a dict with ``"params"`` and optional hyperparameters).

        Useful when fine-tuning: frozen layers can be made trainable and added as training goes.

        Args:
            param_group: the group; hyperparameters it omits take the optimizer's defaults.

        Raises:
            TypeError: for a non-dict group, a set of parameters or a non-tensor parameter.
            ValueError: for a non-leaf tensor, a missing required hyperparameter, or a parameter
                already in another group.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        tensors, names = [], []
        for param in param_group["params"]:
            if isinstance(param, tuple):
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for param in tensors:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not (param.is_leaf or getattr(param, "retains_grad", False)):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        if len(tensors) != len(set(tensors)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error",
                          stacklevel=3)
        param_set: set = set()
        for group in self.param_groups:
            param_set.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        if not param_set.isdisjoint(tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)


def _step_tensor() -> Tensor:
    """A fresh ``state["step"]`` counter: a 0-dim float tensor, as torch keeps it (float32 by default)."""
    return fl.zeros((), dtype=fl.float64 if fl.get_default_dtype() is fl.float64 else fl.float32)


def _profiled_methods() -> list:
    """What the profiler records of the optimizers (``flambeau.profiler.trace_attributes``): each class's
    own ``step`` and ``zero_grad``, as torch's ``Optimizer.step#SGD.step`` spans."""
    targets, todo = [], [Optimizer]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        for attribute in ("step", "zero_grad"):
            if attribute in cls.__dict__:
                targets.append((cls, attribute, "optimizer",
                                lambda opt, a=attribute: f"Optimizer.{a}#{type(opt).__name__}.{a}"))
    return targets


def _register_profiling() -> None:
    from flambeau.profiler import trace_attributes

    trace_attributes("flambeau.optim", _profiled_methods)


_register_profiling()
