"""Pruning a module's parameters with masks, as torch.nn.utils.prune.

Note [Pruning by reparametrization]
    Pruning parameter ``name`` of a module moves the parameter to ``name + "_orig"`` (still what the optimizer
    trains), adds a buffer ``name + "_mask"`` of ones and zeros, and makes ``name`` a plain tensor attribute,
    ``name_orig * name_mask``, recomputed by a forward pre-hook (the pruning method itself) before every call: the
    pruned entries read as zero and receive no gradient, while ``name_orig`` keeps their values. Pruning the same
    parameter again combines the methods in a :class:`PruningContainer`, which prunes only what the earlier masks
    left (the unpruned entries for unstructured methods, the unpruned channels for structured ones). :func:`remove`
    makes the pruning permanent: ``name`` becomes a parameter again, holding ``name_orig * name_mask``, and the
    hook, ``name_orig`` and ``name_mask`` go. The state dict of a pruned module holds ``name_orig`` and
    ``name_mask``, as torch's.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import flambeau as fl
from flambeau import Tensor
from flambeau.nn.utils.hooks import remove_forward_pre_hook

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A way of computing a pruning mask (Note [Pruning by reparametrization]). Subclasses set ``PRUNING_TYPE``
    (``"unstructured"``, ``"structured"`` with a ``dim`` attribute, or ``"global"``) and define
    :meth:`compute_mask`. As a forward pre-hook it recomputes the pruned tensor before each call."""

    PRUNING_TYPE: str | None = None
    _tensor_name: str | None = None

    def __call__(self, module, inputs) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask (``t``'s shape) that prunes ``t`` further than ``default_mask`` (the mask so far) does."""

    def apply_mask(self, module) -> Tensor:
        """``name_orig * name_mask`` of ``module`` (in the original's dtype)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name: str, *args, importance_scores: Tensor | None = None, **kwargs):
        """Prune parameter ``name`` of ``module`` with a new ``cls(*args, **kwargs)``, combined with the method that
        pruned it before if any; ``importance_scores`` (``name``'s shape) rank the entries in place of the
        parameter's values. Returns the method (or container) now installed as the hook."""
        method = _install_method(cls, module, name, args, kwargs)
        orig = getattr(module, name)
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(orig.shape):
                raise AssertionError(f"importance_scores should have the same shape as parameter {name} of {module}")
        else:
            importance_scores = orig
        first = not isinstance(method, PruningContainer)
        if first:  # the parameter moves to name_orig; name becomes the pruned tensor
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = fl.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(memory_format=fl.contiguous_format)
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:  # put the parameter back as it was
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None, importance_scores: Tensor | None = None) -> Tensor:
        """``t`` times the mask this method computes for it (``importance_scores``, of ``t``'s shape, rank its
        entries if given), without touching any module."""
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(t.shape):
                raise AssertionError("importance_scores should have the same shape as tensor t")
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else fl.ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module) -> None:
        """Make the pruning permanent: ``name`` becomes a parameter holding the pruned values (Note [Pruning by
        reparametrization]); the caller removes the hook."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _install_method(cls, module, name: str, args: tuple, kwargs: dict) -> BasePruningMethod:
    """A new ``cls`` method for parameter ``name``, combined in a container with the pruning hook ``name`` had (which
    is taken off the module: the caller installs the result)."""
    old = [(k, hook) for k, hook in module._forward_pre_hooks.items()
           if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    if len(old) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. "
                             "Use a PruningContainer.")
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if not old:
        return method
    key, previous = old[0]
    del module._forward_pre_hooks[key]
    if not isinstance(previous, PruningContainer):
        previous = PruningContainer(previous)
    previous.add_pruning_method(method)
    return previous


class PruningContainer(BasePruningMethod):
    """The pruning methods applied one after the other to one parameter: each prunes only what the masks before it
    left (the unpruned entries, or for a structured method the unpruned channels along its ``dim``)."""

    def __init__(self, *args) -> None:
        self._pruning_methods: tuple = ()
        if len(args) == 1 and not isinstance(args[0], Iterable):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        elif len(args) == 1 and isinstance(args[0], BasePruningMethod):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in (args[0] if len(args) == 1 else args):
                self.add_pruning_method(method)

    def add_pruning_method(self, method) -> None:
        """Append ``method`` (a :class:`BasePruningMethod` acting on this container's parameter)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError("Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with the last method's mask of the part of ``t`` it leaves written into it."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            part = mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of PRUNING_TYPE 'structured' need to have the attribute `dim` "
                                     "defined.")
            dim = method.dim + t.ndim if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of size {t.ndim}")
            kept = mask.sum(dim=[d for d in range(t.ndim) if d != dim]) != 0  # the channels still there
            part = tuple(kept if d == dim else slice(None) for d in range(t.ndim))
        elif kind == "global":
            part = (slice(None),) * t.ndim
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        mask[part] = method.compute_mask(t[part], default_mask=mask[part]).to(dtype=mask.dtype)
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing (a mask of ones)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module, name: str):
        return super().apply(module, name)


def _validate_amount(amount) -> None:
    """An amount is a fraction in [0, 1] or a non-negative count (torch's messages)."""
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count_to_prune(amount, size: int) -> int:
    """How many of ``size`` entries (or channels) ``amount`` prunes; ValueError for more than there are."""
    n = amount if isinstance(amount, numbers.Integral) else round(amount * size)
    if n > size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
    return int(n)


def _structured_dim(t: Tensor, dim: int) -> int:
    if t.ndim <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {tuple(t.shape)} with {t.ndim} dims")
    if dim >= t.ndim:
        raise IndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")
    return dim


def _channels_mask(t: Tensor, dim: int, channels: Tensor, default_mask: Tensor) -> Tensor:
    """Ones in the channels ``channels`` (indices or a boolean mask) of ``t`` along ``dim``, times ``default_mask``."""
    mask = fl.zeros_like(t, memory_format=fl.contiguous_format)
    mask[tuple(channels if d == dim else slice(None) for d in range(t.ndim))] = 1
    return mask * default_mask.to(dtype=mask.dtype)


class _Unstructured(BasePruningMethod):
    """Prunes ``amount`` (a fraction, or a count) of the entries, those of least :meth:`_scores`."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _validate_amount(amount)
        self.amount = amount

    def _scores(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        n = _count_to_prune(self.amount, t.numel())
        mask = default_mask.clone(memory_format=fl.contiguous_format)
        if n:
            mask.view(-1)[fl.topk(self._scores(t).reshape(-1), k=n, largest=False).indices] = 0
        return mask


class RandomUnstructured(_Unstructured):
    """Prunes ``amount`` (a fraction, or a count) of the entries, drawn at random."""

    def _scores(self, t: Tensor) -> Tensor:
        return fl.rand_like(t)

    @classmethod
    def apply(cls, module, name: str, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes ``amount`` (a fraction, or a count) of the entries, those of least absolute value."""

    def _scores(self, t: Tensor) -> Tensor:
        return t.abs()

    @classmethod
    def apply(cls, module, name: str, amount, importance_scores: Tensor | None = None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Prunes ``amount`` (a fraction, or a count) of the channels along ``dim``, those of least
    :meth:`_channel_scores`."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1) -> None:
        _validate_amount(amount)
        self.amount = amount
        self.dim = dim

    def _channel_scores(self, t: Tensor, dim: int) -> Tensor:
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        dim = _structured_dim(t, self.dim)
        channels = t.shape[dim]
        n = _count_to_prune(self.amount, channels)
        if n == 0:
            return default_mask
        dim = dim + t.ndim if dim < 0 else dim
        kept = fl.topk(self._channel_scores(t, dim), k=channels - n, largest=True).indices
        return _channels_mask(t, dim, kept.to(t.device), default_mask)


class RandomStructured(_Structured):
    """Prunes ``amount`` (a fraction, or a count) of the channels along ``dim``, drawn at random."""

    def _channel_scores(self, t: Tensor, dim: int) -> Tensor:
        return fl.rand(t.shape[dim])

    @classmethod
    def apply(cls, module, name: str, amount, dim: int = -1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes ``amount`` (a fraction, or a count) of the channels along ``dim``, those of least ``n``-norm."""

    def __init__(self, amount, n, dim: int = -1) -> None:
        super().__init__(amount, dim)
        self.n = n

    def _channel_scores(self, t: Tensor, dim: int) -> Tensor:
        return fl.norm(t, p=self.n, dim=[d for d in range(t.ndim) if d != dim])

    @classmethod
    def apply(cls, module, name: str, amount, n, dim: int, importance_scores: Tensor | None = None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes the entries where ``mask`` is zero."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError("mask and the pruned tensor must have the same shape")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name: str, mask: Tensor):
        return super().apply(module, name, mask=mask)


def identity(module, name: str):
    """Reparametrize ``module.name`` with a mask of ones (prunes nothing); returns ``module``."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name: str, amount):
    """Prune ``amount`` (fraction or count) of ``module.name``'s entries at random; returns ``module``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name: str, amount, importance_scores: Tensor | None = None):
    """Prune ``amount`` (fraction or count) of ``module.name``'s entries of least absolute value (of
    ``importance_scores`` where given); returns ``module``."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name: str, amount, dim: int):
    """Prune ``amount`` (fraction or count) of ``module.name``'s channels along ``dim`` at random; returns
    ``module``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name: str, amount, n, dim: int, importance_scores: Tensor | None = None):
    """Prune ``amount`` (fraction or count) of ``module.name``'s channels along ``dim`` of least ``n``-norm (of
    ``importance_scores`` where given); returns ``module``."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores: dict | None = None, **kwargs) -> None:
    """Prune the ``(module, name)`` pairs of ``parameters`` together: ``pruning_method(**kwargs)`` (an unstructured
    method, :class:`L1Unstructured` say) ranks the entries of all of them at once (their ``importance_scores``,
    a dict keyed by the pairs, where given), and each parameter gets its part of the mask."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = fl.cat([importance_scores.get((m, n), getattr(m, n)).detach().reshape(-1) for m, n in parameters])
    default_mask = fl.cat([getattr(m, n + "_mask", fl.ones_like(getattr(m, n))).detach().reshape(-1)
                           for m, n in parameters])
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container = PruningContainer()
    container._tensor_name = "temp"
    container.add_pruning_method(method)
    final = container.compute_mask(scores, default_mask)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=final[start:start + param.numel()].view_as(param))
        start += param.numel()


def custom_from_mask(module, name: str, mask: Tensor):
    """Prune the entries of ``module.name`` where ``mask`` is zero; returns ``module``."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name: str):
    """Make the pruning of ``module.name`` permanent (Note [Pruning by reparametrization]); returns ``module``."""
    return remove_forward_pre_hook(
        module, lambda hook: isinstance(hook, BasePruningMethod) and hook._tensor_name == name,
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module) -> bool:
    """Whether ``module`` or one of its submodules has a pruned parameter."""
    return any(isinstance(hook, BasePruningMethod) for _, sub in module.named_modules()
               for hook in sub._forward_pre_hooks.values())
