"""``Module``: the base class of every layer and model (``torch.nn.Module``).

A module registers the :class:`~flambeau.nn.Parameter` objects, buffers and submodules assigned to
it as attributes, walks them in registration order (``named_parameters``, ``named_modules``,
``state_dict`` ...), moves or casts them in place (``to``, ``float``, ``cuda``), and runs hooks around
``forward`` when called. Names, order, error messages and ``repr`` follow PyTorch.
"""

from __future__ import annotations

import functools
import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Iterator, Mapping

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn.parameter import Buffer, Parameter, is_lazy
from flambeau.nn.utils.hooks import BackwardHook, RemovableHandle

__all__ = ["Module", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_hook", "register_module_full_backward_pre_hook"]

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"

# Global hooks, run for every module (torch.nn.modules.module.register_module_*_hook).
_global_forward_pre_hooks: OrderedDict = OrderedDict()
_global_forward_hooks: OrderedDict = OrderedDict()
_global_forward_hooks_with_kwargs: OrderedDict = OrderedDict()
_global_backward_hooks: OrderedDict = OrderedDict()
_global_backward_pre_hooks: OrderedDict = OrderedDict()
# Set while any global hook is registered, so that the fast path of __call__ tests one list.
_global_any = [False]


def _update_global_any() -> None:
    _global_any[0] = bool(_global_forward_pre_hooks or _global_forward_hooks or _global_backward_hooks
                          or _global_backward_pre_hooks)


class _GlobalHandle(RemovableHandle):
    def remove(self) -> None:
        super().remove()
        _update_global_any()


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    """Register ``hook(module, args)`` run before every module's ``forward`` (returns a handle)."""
    handle = _GlobalHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    _update_global_any()
    return handle


def register_module_forward_hook(hook, *, with_kwargs: bool = False, always_call: bool = False) -> RemovableHandle:
    """Register ``hook(module, args, output)`` run after every module's ``forward`` (returns a handle)."""
    handle = _GlobalHandle(_global_forward_hooks, extra_dict=_global_forward_hooks_with_kwargs)
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    _update_global_any()
    return handle


def register_module_full_backward_hook(hook) -> RemovableHandle:
    """Register ``hook(module, grad_input, grad_output)`` for every module (returns a handle)."""
    handle = _GlobalHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    _update_global_any()
    return handle


def register_module_full_backward_pre_hook(hook) -> RemovableHandle:
    """Register ``hook(module, grad_output)`` for every module (returns a handle)."""
    handle = _GlobalHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    _update_global_any()
    return handle


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _typename(obj) -> str:
    if isinstance(obj, Tensor):
        return obj.type()
    typ = obj if isinstance(obj, type) else type(obj)
    module = getattr(typ, "__module__", "") or ""
    if module in ("", "builtins"):
        return typ.__qualname__
    return module + "." + typ.__qualname__


def _addindent(s_: str, num_spaces: int) -> str:
    s = s_.split("\n")
    if len(s) == 1:
        return s_
    first = s.pop(0)
    return first + "\n" + "\n".join((num_spaces * " ") + line for line in s)


def _forward_unimplemented(self, *input):
    """Define the computation performed at every call; every subclass overrides it."""
    raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')


def _hook_last_operation(module, result, hooks: list) -> None:
    """Register :meth:`Module.register_backward_hook`'s ``hooks`` on the ``grad_fn`` of the first tensor of
    ``result`` (torch's older backward hooks: of the forward's last operation)."""
    var = result
    while not isinstance(var, Tensor):
        if isinstance(var, dict):
            var = next((v for v in var.values() if isinstance(v, Tensor)), None)
        elif isinstance(var, (list, tuple)) and var:
            var = var[0]
        else:
            return
    if var.grad_fn is None:
        return
    for hook in hooks:
        var.grad_fn.register_hook(functools.partial(_call_older_hook, hook, module))


def _call_older_hook(hook, module, grad_inputs, grad_outputs):
    return hook(module, grad_inputs, grad_outputs)


class Module:
    """Base class for all neural network modules; models subclass it.

    Assign :class:`~flambeau.nn.Parameter` objects, submodules and buffers (see
    :meth:`register_buffer`) as attributes in ``__init__`` (after calling ``super().__init__()``)
    and define :meth:`forward`::

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return fl.relu(self.fc(x))

    Calling the module runs its forward pre-hooks, ``forward`` and forward hooks.

    Attributes:
        training: whether the module is in training mode (see :meth:`train`, :meth:`eval`).
    """

    dump_patches: bool = False
    _version: int = 1
    training: bool
    call_super_init: bool = False

    def __init__(self, *args, **kwargs) -> None:
        if self.call_super_init is False and kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")
        if self.call_super_init is False and args:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but {len(args) + 1} "
                            "were given")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_is_full_backward_hook"] = None
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks_always_called"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()
        d["_modules"] = {}
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    forward = _forward_unimplemented

    # --- registration ------------------------------------------------------------------------
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: a tensor that is part of the module's state but not a parameter.

        Args:
            name: the attribute name of the buffer.
            tensor: the buffer (None is allowed: it is then skipped by ``buffers()`` and
                ``state_dict``).
            persistent: whether the buffer is part of :meth:`state_dict`.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(flambeau Tensor or None required)")
        if isinstance(tensor, Buffer):
            tensor = tensor._plain()
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter to the module, reachable as attribute ``name``.

        Args:
            name: the attribute name of the parameter.
            param: the :class:`~flambeau.nn.Parameter` (or None, skipped by ``parameters()``).
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(flambeau.nn.Parameter or None required)")
        elif param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                             f"explicitly. To express '{name}' as a function of another Tensor, compute the value in "
                             "the forward() method.")
        else:
            self._parameters[name] = param

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module, reachable as attribute ``name``."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    def register_module(self, name: str, module: Module | None) -> None:
        """Alias for :meth:`add_module`."""
        self.add_module(name, module)

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is this module); AttributeError if none."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put ``module`` at dotted path ``target`` (replacing what is there, which must be a module); ``strict``:
        only replace an existing attribute (AttributeError if none)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target``; AttributeError if none."""
        module_path, _, param_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, param_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(mod, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``; AttributeError if none."""
        module_path, _, buffer_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, buffer_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + buffer_name + "`")
        buffer = getattr(mod, buffer_name)
        if buffer_name not in mod._buffers:
            raise AttributeError("`" + buffer_name + "` is not a buffer")
        return buffer

    def get_extra_state(self):
        """Extra state saved in :meth:`state_dict` by subclasses that override it (with :meth:`set_extra_state`)."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state) -> None:
        """Restore the extra state returned by :meth:`get_extra_state`."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    # --- moves and casts ------------------------------------------------------------------------
    def _apply(self, fn, recurse: bool = True):
        if recurse:
            for module in self.children():
                module._apply(fn)
        for param in self._parameters.values():
            if param is None:
                continue
            with fl.no_grad():
                param_applied = fn(param)
            if param_applied is not param:
                param.data = param_applied  # keep the Parameter object: optimizers hold it
            grad = param._grad
            if grad is not None:
                with fl.no_grad():
                    grad_applied = fn(grad)
                if grad_applied is not grad:
                    grad.data = grad_applied
        buffers = self._buffers
        for key, buf in buffers.items():
            if buf is not None:
                buffers[key] = fn(buf)
        return self

    def to_empty(self, *, device, recurse: bool = True):
        """Move the parameters and buffers to ``device`` without copying their values: each becomes an uninitialised
        tensor of its shape and dtype there (a model built on the meta device, or to be loaded over). Returns self."""
        return self._apply(lambda t: fl.empty_like(t, device=device), recurse=recurse)

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first, as ``.children()`` orders them) then on self.

        Typically used to initialise parameters. Returns self.
        """
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def cuda(self, device=None):
        """Move every parameter and buffer to a CUDA device (in place). Returns self."""
        return self._apply(lambda t: t.cuda(device))

    def cpu(self):
        """Move every parameter and buffer to the CPU (in place). Returns self."""
        return self._apply(lambda t: t.cpu())

    def type(self, dst_type):
        """Cast every parameter and buffer to ``dst_type``. Returns self."""
        return self._apply(lambda t: t.type(dst_type))

    def float(self):
        """Cast floating parameters and buffers to float32. Returns self."""
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        """Cast floating parameters and buffers to float64. Returns self."""
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        """Cast floating parameters and buffers to float16. Returns self."""
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        """Cast floating parameters and buffers to bfloat16. Returns self."""
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def compile(self, *args, **kwargs) -> None:
        """torch's in-place ``Module.compile``: ``flambeau.compile`` runs modules eagerly (docs/differences.rst),
        so this does nothing but warn once, as ``flambeau.compile`` does."""
        fl.compile(self, *args, **kwargs)

    def to(self, *args, **kwargs):
        """Move and/or cast parameters and buffers in place; returns self.

        Forms: ``to(device=None, dtype=None, non_blocking=False)``, ``to(dtype, non_blocking=False)``,
        ``to(tensor, non_blocking=False)``. Only floating parameters and buffers are cast to
        ``dtype`` (which must be a floating dtype); integer buffers keep their dtype.
        """
        device, dtype, non_blocking = _parse_to(*args, **kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")

        def convert(t):
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None, non_blocking=non_blocking)

        return self._apply(convert)

    def share_memory(self):
        """Move parameters and buffers to shared memory (``Tensor.share_memory_``). Returns self."""
        return self._apply(lambda t: t.share_memory_())

    # --- hooks ---------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        """Register ``hook(module, args) -> None or new args`` run before :meth:`forward`.

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs) -> None or (args, kwargs)``.
        ``prepend=True`` runs it before the hooks already registered. Returns a handle whose
        ``remove()`` unregisters it.
        """
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """Register ``hook(module, args, output) -> None or new output`` run after :meth:`forward`.

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs, output)``;
        ``always_call=True`` runs it even when ``forward`` raises. Returns a removable handle.
        """
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """Register ``hook(module, grad_output) -> None or new grad_output`` run when the output grads are known."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook):
        """Register torch's older backward hook, ``hook(module, grad_input, grad_output) -> None or new grad_input``:
        as torch's, it is a hook of the last operation of the module's forward (the ``grad_fn`` of its first output
        tensor), so ``grad_input`` holds the gradients of that operation's inputs, which are the module's inputs only
        when the forward is one operation (a Grad-CAM's ``grad_output`` of a convolution is right either way).
        torch deprecates it for :meth:`register_full_backward_hook`; a module takes one kind or the other."""
        return self._add_backward_hook(hook, full=False, prepend=False)

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """Register ``hook(module, grad_input, grad_output) -> None or new grad_input``.

        ``grad_input`` holds one entry per positional argument of the call (None for non-tensors and
        tensors that do not require grad), ``grad_output`` one per output tensor. The hook runs
        once the gradients w.r.t. the module's inputs are computed; what it returns replaces them.
        Inputs and outputs must not be modified in place inside the module.
        """
        return self._add_backward_hook(hook, full=True, prepend=prepend)

    def _add_backward_hook(self, hook, full: bool, prepend: bool):
        if self._is_full_backward_hook is (not full):
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        self._is_full_backward_hook = full
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook):
        """Register ``hook(module, prefix, keep_vars)`` run before :meth:`state_dict` collects this module."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook):
        """Register ``hook(module, state_dict, prefix, local_metadata)`` run after :meth:`state_dict`."""
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    _register_state_dict_hook = register_state_dict_post_hook

    def register_load_state_dict_pre_hook(self, hook):
        """Register ``hook(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors)``."""
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = lambda *a: hook(self, *a)
        return handle

    def _register_load_state_dict_pre_hook(self, hook, with_module: bool = False):
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = (lambda *a: hook(self, *a)) if with_module else hook
        return handle

    def register_load_state_dict_post_hook(self, hook):
        """Register ``hook(module, incompatible_keys)`` run after :meth:`load_state_dict` loads this module."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    # --- calling -------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """Run :meth:`forward` (with the registered hooks, if any)."""
        if self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks \
                or _global_any[0]:
            return self._call_impl(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        full_backward_hooks = []
        backward_pre_hooks = []
        if self._backward_pre_hooks or _global_backward_pre_hooks:
            backward_pre_hooks = [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]
        older_hooks = []  # register_backward_hook's: on the output's grad_fn
        if self._is_full_backward_hook is False:
            older_hooks = list(self._backward_hooks.values())
            if _global_backward_hooks:
                full_backward_hooks = list(_global_backward_hooks.values())
        elif self._backward_hooks or _global_backward_hooks:
            full_backward_hooks = [*_global_backward_hooks.values(), *self._backward_hooks.values()]
        if _global_forward_pre_hooks or self._forward_pre_hooks:
            for hook_id, hook in itertools.chain(_global_forward_pre_hooks.items(), self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    res = hook(self, args, kwargs)
                    if res is not None:
                        if isinstance(res, tuple) and len(res) == 2:
                            args, kwargs = res
                        else:
                            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                               f"new_kwargs), but got {res}.")
                else:
                    res = hook(self, args)
                    if res is not None:
                        args = res if isinstance(res, tuple) else (res,)
        bw_hook = None
        if full_backward_hooks or backward_pre_hooks:
            bw_hook = BackwardHook(self, full_backward_hooks, backward_pre_hooks)
            args = bw_hook.setup_input_hook(args)
        called_always = False
        try:
            result = self.forward(*args, **kwargs)
        except Exception:
            if self._forward_hooks_always_called:
                called_always = True
                for hook_id, hook in self._forward_hooks.items():
                    if hook_id in self._forward_hooks_always_called:
                        try:
                            if hook_id in self._forward_hooks_with_kwargs:
                                hook(self, args, kwargs, None)
                            else:
                                hook(self, args, None)
                        except Exception:  # noqa: S110 - the forward's exception is the one to report
                            pass
            raise
        if not called_always and (_global_forward_hooks or self._forward_hooks):
            for hook_id, hook in itertools.chain(_global_forward_hooks.items(), self._forward_hooks.items()):
                if hook_id in self._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res
        if bw_hook is not None:
            result = bw_hook.setup_output_hook(result)
        if older_hooks:
            _hook_last_operation(self, result, older_hooks)
        return result

    # --- attributes ------------------------------------------------------------------------------
    def __getattr__(self, name: str):
        d = self.__dict__
        if "_parameters" in d:
            params = d["_parameters"]
            if name in params:
                return params[name]
        if "_buffers" in d:
            buffers = d["_buffers"]
            if name in buffers:
                return buffers[name]
        if "_modules" in d:
            modules = d["_modules"]
            if name in modules:
                return modules[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__

        def remove_from(*dicts_or_sets):
            for s in dicts_or_sets:
                if name in s:
                    if isinstance(s, dict):
                        del s[name]
                    else:
                        s.discard(name)

        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(flambeau.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(flambeau.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(flambeau.nn.Buffer, flambeau.Tensor or None expected)")
                    if buffers is None:
                        raise AttributeError("cannot assign buffer before Module.__init__() call")
                    if isinstance(value, Buffer):
                        persistent = value.persistent
                        remove_from(d, self._parameters, self._modules)
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    self.register_buffer(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for key, default in (("_forward_pre_hooks", OrderedDict), ("_forward_pre_hooks_with_kwargs", OrderedDict),
                             ("_forward_hooks", OrderedDict), ("_forward_hooks_with_kwargs", OrderedDict),
                             ("_forward_hooks_always_called", OrderedDict), ("_backward_hooks", OrderedDict),
                             ("_backward_pre_hooks", OrderedDict), ("_state_dict_hooks", OrderedDict),
                             ("_state_dict_pre_hooks", OrderedDict), ("_load_state_dict_pre_hooks", OrderedDict),
                             ("_load_state_dict_post_hooks", OrderedDict), ("_non_persistent_buffers_set", set)):
            if key not in self.__dict__:
                self.__dict__[key] = default()
        self.__dict__.setdefault("_is_full_backward_hook", None)

    def __dir__(self):
        module_attrs = dir(self.__class__)
        attrs = list(self.__dict__.keys())
        keys = module_attrs + attrs + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in keys if not k[0].isdigit())

    # --- state dict ------------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix: str, keep_vars: bool) -> None:
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        non_persistent = self._non_persistent_buffers_set
        for name, buf in self._buffers.items():
            if buf is not None and name not in non_persistent:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """An ``OrderedDict`` of every parameter and persistent buffer, keyed by dotted name.

        Args:
            destination: a dict to fill instead of a new ``OrderedDict``.
            prefix: prepended to every key.
            keep_vars: keep the parameters themselves (autograd leaves) instead of detached tensors
                sharing their storage.
        """
        if args:
            destination = args[0] if destination is None else destination
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, local_metadata)
            if result is not None:
                destination = result
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        non_persistent = self._non_persistent_buffers_set
        local_state = {k: v for k, v in self._parameters.items() if v is not None}
        local_state.update((k, v) for k, v in self._buffers.items() if v is not None and k not in non_persistent)
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected flambeau.Tensor or '
                                  f"Tensor-like object from checkpoint but received {type(input_param)}")
                continue
            # an uninitialized parameter of a lazy module has no shape to check (the lazy load hook
            # materialized it already if the checkpoint's is initialized)
            lazy = is_lazy(param)
            if not lazy and param.ndim == 0 and input_param.ndim == 1 and input_param.shape[0] == 1:
                input_param = input_param[0]
            if not lazy and input_param.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                with fl.no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            if not isinstance(input_param, Parameter):
                                input_param = Parameter(input_param, requires_grad=param.requires_grad)
                            else:
                                input_param.requires_grad_(param.requires_grad)
                        setattr(self, name, input_param)
                    else:
                        param.copy_(input_param)
            except Exception as ex:  # noqa: BLE001 - reported with the others, as torch does
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{param.size()} and whose dimensions in the checkpoint are {input_param.size()}, "
                                  f"an exception occurred : {ex.args}.")
        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_state_key in state_dict:
                self.set_extra_state(state_dict[extra_state_key])
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and extra_state_key in state_dict:
            unexpected_keys.append(extra_state_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_state_key:
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict: Mapping, strict: bool = True, assign: bool = False):
        """Copy parameters and buffers from ``state_dict`` into this module and its descendants.

        Args:
            state_dict: a mapping of dotted names to tensors (as :meth:`state_dict` returns).
            strict: require the keys to match this module's :meth:`state_dict` keys exactly.
            assign: assign the checkpoint's tensors instead of copying into the existing ones.

        Returns:
            A named tuple ``(missing_keys, unexpected_keys)``.

        Raises:
            RuntimeError: listing missing/unexpected keys (when ``strict``) and shape mismatches.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys: list[str] = []
        unexpected_keys: list[str] = []
        error_msgs: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing_keys,
                                         unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                    load(child, child_state_dict, child_prefix)
            incompatible_keys = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                out = hook(module, incompatible_keys)
                if out is not None:
                    raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not"
                                         "expected to return new values, if incompatible_keys need to be modified,"
                                         "it should be done inplace.")

        load(self, state_dict)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self.__class__.__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # --- iteration ------------------------------------------------------------------------------
    def _named_members(self, get_members_fn, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or v in memo:
                    continue
                if remove_duplicate:
                    memo.add(v)
                yield (module_prefix + ("." if module_prefix else "") + k), v

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Iterate over the parameters (of this module and, with ``recurse``, its descendants), each once."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Iterate over ``(dotted name, parameter)`` pairs in registration order.

        Args:
            prefix: prepended to every name.
            recurse: include the parameters of descendants.
            remove_duplicate: yield a parameter shared by several modules only once.
        """
        yield from self._named_members(lambda m: m._parameters.items(), prefix=prefix, recurse=recurse,
                                       remove_duplicate=remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Iterate over the buffers (of this module and, with ``recurse``, its descendants)."""
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """Iterate over ``(dotted name, buffer)`` pairs in registration order."""
        yield from self._named_members(lambda m: m._buffers.items(), prefix=prefix, recurse=recurse,
                                       remove_duplicate=remove_duplicate)

    def children(self) -> Iterator[Module]:
        """Iterate over the immediate child modules (each once)."""
        for _, module in self.named_children():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Iterate over ``(name, child module)`` pairs (each child once)."""
        memo = set()
        for name, module in self._modules.items():
            if module is not None and module not in memo:
                memo.add(module)
                yield name, module

    def modules(self, remove_duplicate: bool = True) -> Iterator[Module]:
        """Iterate over every module of the tree, this one first (each once, unless ``remove_duplicate`` is
        False)."""
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        """Iterate over ``(dotted name, module)`` pairs of the tree, depth first, this one first as ``prefix``."""
        if memo is None:
            memo = set()
        if self not in memo:
            if remove_duplicate:
                memo.add(self)
            yield prefix, self
            for name, module in self._modules.items():
                if module is None:
                    continue
                submodule_prefix = prefix + ("." if prefix else "") + name
                yield from module.named_modules(memo, submodule_prefix, remove_duplicate)

    # --- modes and grads --------------------------------------------------------------------------
    def train(self, mode: bool = True):
        """Set training mode (``mode=True``) or evaluation mode on this module and its descendants; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        """Set evaluation mode (``train(False)``); returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        """Set ``requires_grad`` of every parameter in place; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (default) or to zeros in place."""
        for p in self.parameters():
            g = p._grad
            if g is not None:
                if set_to_none:
                    p._grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    # --- repr --------------------------------------------------------------------------------------
    def _get_name(self) -> str:
        return self.__class__.__name__

    def extra_repr(self) -> str:
        """The module-specific part of ``repr`` (one line or several); subclasses override it."""
        return ""

    def __repr__(self) -> str:
        extra_lines = []
        extra_repr = self.extra_repr()
        if extra_repr:
            extra_lines = extra_repr.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"


def _parse_to(*args, **kwargs):
    """``(device, dtype, non_blocking)`` from the arguments of :meth:`Module.to`."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = kwargs.pop("non_blocking", False)
    kwargs.pop("memory_format", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(f"to() received an invalid combination of arguments: unexpected keyword "
                        f"'{next(iter(kwargs))}'")
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        t = rest.pop(0)
        device, dtype = t.device, t.dtype
        if rest:
            non_blocking = rest.pop(0)
    elif rest and _is_dtype(rest[0]):
        dtype = rest.pop(0)
        if rest:
            non_blocking = rest.pop(0)
    elif rest:
        device = rest.pop(0)
        if rest and (rest[0] is None or _is_dtype(rest[0])):
            dtype = rest.pop(0)
        if rest:
            non_blocking = rest.pop(0)
    if rest:
        raise TypeError(f"to() received an invalid combination of arguments: {args!r}")
    if dtype is not None:
        dtype = _to_dtype(dtype)
    if device is not None:
        device = fl.device(device) if not isinstance(device, fl.device) else device
    return device, dtype, bool(non_blocking)


def _is_dtype(x) -> bool:
    if isinstance(x, fl.dtype):
        return True
    if isinstance(x, (type, np.dtype)):
        return True
    return isinstance(x, str) and x in ("float", "double", "half", "float16", "float32", "float64")


def _to_dtype(x):
    from flambeau._dtype import to_dtype

    return to_dtype(x)
