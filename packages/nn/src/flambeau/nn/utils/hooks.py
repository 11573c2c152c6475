"""Hook handles and the machinery behind :meth:`Module.register_full_backward_hook`.

:class:`RemovableHandle` is what every ``register_*_hook`` of :class:`~flambeau.nn.Module` returns
(``torch.utils.hooks.RemovableHandle``). :class:`BackwardHook` wraps a module call: an identity
autograd :class:`~flambeau.autograd.Function` on the module's outputs captures ``grad_output``
(running backward pre-hooks), and one on its tensor inputs hands ``grad_input`` to the hooks.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

from flambeau import Tensor

__all__ = ["RemovableHandle", "BackwardHook"]

_ids = itertools.count()


class RemovableHandle:
    """A handle returned by hook registration; :meth:`remove` unregisters the hook.

    Args:
        hooks_dict: the ordered dict the hook is stored in, keyed by :attr:`id`.
        extra_dict: another dict (or a list of them) holding flags for the same id, cleared too.

    Usable as a context manager: the hook is removed on exit.
    """

    def __init__(self, hooks_dict: OrderedDict, *, extra_dict=None):
        self.hooks_dict_ref = hooks_dict
        self.id = next(_ids)
        if extra_dict is None:
            self.extra_dict_ref = ()
        elif isinstance(extra_dict, (list, tuple)):
            self.extra_dict_ref = tuple(extra_dict)
        else:
            self.extra_dict_ref = (extra_dict,)

    def remove(self) -> None:
        """Unregister the hook (a no-op if it was removed already)."""
        self.hooks_dict_ref.pop(self.id, None)
        for d in self.extra_dict_ref:
            d.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _function_cls():
    from flambeau.autograd import Function

    class _BackwardHookFunction(Function):
        """Identity on tensors whose backward hands the gradients to a :class:`BackwardHook`."""

        @staticmethod
        def forward(ctx, state, side, *tensors):
            ctx.set_materialize_grads(False)
            ctx.state, ctx.side = state, side
            ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
            return tensors

        @staticmethod
        def backward(ctx, *grads):
            grads = ctx.state._on_grads(ctx.side, grads)
            return (None, None, *grads)

    return _BackwardHookFunction


_FN: list = []


def _fn():
    if not _FN:
        _FN.append(_function_cls())
    return _FN[0]


class BackwardHook:
    """The per-call state of a module's full backward (pre-)hooks.

    Args:
        module: the module being called.
        user_hooks: ``hook(module, grad_input, grad_output) -> new grad_input or None``.
        user_pre_hooks: ``hook(module, grad_output) -> new grad_output or None``.
    """

    def __init__(self, module, user_hooks: list, user_pre_hooks: list):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = 0
        self.input_index: list[int] | None = None
        self.n_outputs = 0
        self.output_index: list[int] = []

    def setup_input_hook(self, args: tuple) -> tuple:
        """Route the tensor arguments through the input identity; returns the new ``args``."""
        self.n_inputs = len(args)
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not index or not self.user_hooks:
            return args
        self.input_index = index
        outs = _fn().apply(self, "input", *[args[i] for i in index])
        new = list(args)
        for i, t in zip(index, outs):
            new[i] = t
        return tuple(new)

    def setup_output_hook(self, result):
        """Route the tensor outputs through the output identity; returns the new result."""
        single = isinstance(result, Tensor)
        outs = (result,) if single else result
        if not isinstance(outs, (tuple, list)):
            return result
        index = [i for i, a in enumerate(outs) if isinstance(a, Tensor) and a.requires_grad]
        self.n_outputs = len(outs)
        self.output_index = index
        if not index:
            return result
        wrapped = _fn().apply(self, "output", *[outs[i] for i in index])
        new = list(outs)
        for i, t in zip(index, wrapped):
            new[i] = t
        if single:
            return new[0]
        return type(outs)(new) if isinstance(outs, list) or type(outs) is tuple else type(outs)(*new)

    def _pack(self, index, values, size):
        res = [None] * size
        for i, v in zip(index, values):
            res[i] = v
        return tuple(res)

    def _on_grads(self, side: str, grads: tuple) -> tuple:
        if side == "output":
            self.grad_outputs = self._pack(self.output_index, grads, self.n_outputs)
            for hook in self.user_pre_hooks:
                res = hook(self.module, self.grad_outputs)
                if res is None:
                    continue
                res = res if isinstance(res, tuple) else (res,)
                if len(res) != len(self.grad_outputs):
                    raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got {len(res)}, "
                                       f"but expected {len(self.grad_outputs)}")
                self.grad_outputs = res
            if self.input_index is None:
                grad_inputs = (None,) * self.n_inputs
                for hook in self.user_hooks:
                    res = hook(self.module, grad_inputs, self.grad_outputs)
                    if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                        raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                           "return None or None for all gradients.")
            return tuple(self.grad_outputs[i] for i in self.output_index)
        grad_inputs = self._pack(self.input_index, grads, self.n_inputs)
        for hook in self.user_hooks:
            res = hook(self.module, grad_inputs, self.grad_outputs)
            if res is None:
                continue
            res = res if isinstance(res, tuple) else (res,)
            if len(res) != len(grad_inputs):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(res)}, but "
                                   f"expected {len(grad_inputs)}")
            grad_inputs = res
        return tuple(grad_inputs[i] for i in self.input_index)


def remove_forward_pre_hook(module, matches, missing: str):
    """Remove the first of ``module``'s forward pre-hooks for which ``matches(hook)`` holds, after its
    ``remove(module)`` (pruning's and the weight norms' hooks put their parameter back there); returns ``module``,
    ValueError ``missing`` if no hook matches."""
    for key, hook in module._forward_pre_hooks.items():
        if matches(hook):
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(missing)
