"""``LazyModuleMixin``: modules whose parameter shapes are inferred from their first input (as ``torch.nn``).

A lazy module (``LazyLinear``, ``LazyConv2d``, ``LazyBatchNorm1d`` ...) is built with
:class:`~flambeau.nn.UninitializedParameter` placeholders. A forward pre-hook calls its
``initialize_parameters(*input)`` on the first call: the placeholders are materialized in place
with the shapes the input implies and initialised as the regular layer's are; then the hook is
removed and the module's class becomes the regular one (``LazyLinear`` becomes ``Linear``).

Because the placeholders are materialized in place, an optimizer built before the first forward
holds the very parameters that get trained. As in torch, it is still best to run one ("dry run")
batch first and then build the optimizer: moves and casts (``.to``, ``.double()``) must also happen
before the first forward, and the parameters are drawn from the random generator at the first
forward, so a model with lazy modules initialises differently from its eager counterpart.
"""

from __future__ import annotations

import itertools

from flambeau.nn.parameter import is_lazy

__all__ = ["LazyModuleMixin"]


class LazyModuleMixin:
    """Mixin of the lazy modules: infers the parameters' shapes from the first input.

    Subclasses set ``cls_to_become`` (the regular class) and implement ``initialize_parameters``,
    which materializes the placeholders from the input. ``state_dict`` keeps the uninitialized
    placeholders as they are; ``load_state_dict`` of initialized tensors materializes them with the
    loaded shapes.
    """

    cls_to_become = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix: str, keep_vars: bool) -> None:
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if is_lazy(param) or keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if is_lazy(buf) or keep_vars else buf.detach()

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                        error_msgs) -> None:
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None and is_lazy(param) and not is_lazy(state_dict[key]):
                param.materialize(state_dict[key].shape)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materialize and initialise the parameters from the first input (implemented by each lazy module)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module is still an uninitialized placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None) -> None:
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
