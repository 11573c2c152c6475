"""Dispatch modes: code that sees every operator call while it is active (torch's ``TorchDispatchMode``).

Note [Dispatch modes]
    A *mode* is an object with a method ``dispatch(name, fn, args, kwargs)``. While it is active,
    every call of an operator variant (``flambeau.<name>``, ``Tensor.<name>``, ``Tensor.<name>_``,
    the operator dunders, the aliases, the internal ``OPS[name].fn``, and the references other
    flambeau modules hold, e.g. ``conv2d = fl.conv2d`` in ``flambeau.nn.functional`` or a class's
    static method) goes to the mode instead: ``name`` is the operator's name (``"add"``; ``"add_"``
    for the in-place variants, ``x.add_(y)`` and ``x += y``), ``args``/``kwargs`` the call's
    arguments, and ``fn(*args, **kwargs)`` *calls on*: to the next mode below, or the operator itself
    (``fn.__wrapped__`` is the function the call reached: the front, the method or the dunder). A
    mode may change the arguments (autocast casts them), look at the result (the profiler records a
    span), or not call on at all.

    Zero cost when off: nothing is instrumented while no mode is active anywhere. The first active
    mode (in any thread) *rebinds* every operator variant to a dispatching wrapper; the last one to
    leave puts the front functions back (:func:`_install` / :func:`_uninstall`, a count of users).
    The walk that finds the bindings is done once and cached until a module is imported or an
    operator is declared, so entering and leaving a mode costs a loop of ``setattr``.

    Modes form a stack per thread (:func:`push_mode`, :func:`pop_mode`, or ``with mode:`` for a
    :class:`DispatchMode`): a mode pushed in one thread is not seen by another. A mode pushed with
    ``bottom=True`` goes below the thread's other modes, whenever it is pushed (vmap's: it batches
    what autocast has cast, as torch's batching runs after autocast), and *global* modes
    (:func:`push_global_mode`; the profiler, which records every thread) sit below every thread's
    modes. The top mode handles a call first. While a mode's ``dispatch`` runs, that mode and the
    ones above it are hidden in its thread, so the operators it calls itself (autocast's casts) go
    only to the modes below, as torch pops a mode inside ``__torch_dispatch__``; and while the
    operator itself runs, no mode is visible, so a front calling another front is one operator,
    as the program called it. A mode with ``reentrant = True`` stays visible to its own operator
    calls (vmap's, whose batching rules call operators on values that may be batched at an outer
    level; it must call on when it has nothing to do, or it recurses). The operator modules
    themselves (``flambeau._ops``, ``flambeau._kernels``) are never rebound.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable

from flambeau._ops._keywords import rewrap

__all__ = ["DispatchMode", "push_mode", "pop_mode", "push_global_mode", "pop_global_mode", "active_modes", "call"]


class DispatchMode:
    """Base class of a dispatch mode (Note [Dispatch modes]); ``with mode:`` pushes it in this thread.

    Subclasses override :meth:`dispatch`; the default calls on unchanged.
    """

    reentrant = False  # True: the mode sees the operators its own dispatch calls (Note [Dispatch modes])

    def dispatch(self, name: str, fn: Callable, args: tuple, kwargs: dict):
        """Handle one call of operator ``name``: ``fn(*args, **kwargs)`` calls on (next mode or the operator)."""
        return fn(*args, **kwargs)

    def __enter__(self):
        push_mode(self)
        return self

    def __exit__(self, *exc) -> None:
        pop_mode(self)


_local = threading.local()  # .stack, .bottom: this thread's modes; .visible: the modes a nested call sees
_global_modes: tuple = ()  # modes of every thread, below each thread's stack
_lock = threading.RLock()
_users = [0]  # active modes, all threads together: rebound while > 0
_saved: list = []  # (owner, attribute, original) of every rebinding, to put back
_cache: list = [None, []]  # [key, [(owner, attribute, original, replacement)]]: the last walk


# --- the stack ---------------------------------------------------------------------------------
def active_modes() -> tuple:
    """The modes an operator called now in this thread would go through, bottom (global) first."""
    visible = getattr(_local, "visible", None)
    if visible is not None:
        return visible
    return (*_global_modes, *getattr(_local, "bottom", ()), *getattr(_local, "stack", ()))


def push_mode(mode, *, bottom: bool = False) -> None:
    """Make ``mode`` the top mode of this thread (it handles operator calls first), or with ``bottom=True``
    the lowest of this thread's modes (above the global ones)."""
    if not callable(getattr(mode, "dispatch", None)):
        raise TypeError(f"push_mode(): mode must have a dispatch(name, fn, args, kwargs) method, "
                        f"got {type(mode).__name__}")
    where = "bottom" if bottom else "stack"
    modes = getattr(_local, where, None)
    if modes is None:
        modes = []
        setattr(_local, where, modes)
    _acquire()
    if bottom:
        modes.insert(0, mode)
    else:
        modes.append(mode)


def pop_mode(mode=None):
    """Remove this thread's top mode (checked to be ``mode`` when given), or ``mode`` if it was pushed with
    ``bottom=True``, and return it."""
    bottom = getattr(_local, "bottom", None)
    if mode is not None and bottom and mode in bottom:
        bottom.remove(mode)
        _release()
        return mode
    stack = getattr(_local, "stack", None)
    if not stack:
        raise RuntimeError("pop_mode(): no dispatch mode is active in this thread")
    if mode is not None and stack[-1] is not mode:
        raise RuntimeError(f"pop_mode(): the top mode is {type(stack[-1]).__name__}, not {type(mode).__name__} "
                           "(modes must be exited in the reverse order of entering)")
    top = stack.pop()
    _release()
    return top


def push_global_mode(mode) -> None:
    """Activate ``mode`` in every thread, below each thread's own modes (the profiler's)."""
    global _global_modes
    with _lock:
        _acquire()
        _global_modes = (*_global_modes, mode)


def pop_global_mode(mode) -> None:
    """Deactivate a mode :func:`push_global_mode` activated."""
    global _global_modes
    with _lock:
        if mode not in _global_modes:
            raise RuntimeError(f"pop_global_mode(): {type(mode).__name__} is not an active global mode")
        _global_modes = tuple(m for m in _global_modes if m is not mode)
        _release()


# --- dispatching --------------------------------------------------------------------------------
class _CallOn:
    """What a mode's ``dispatch`` receives as ``fn``: calling it calls on, through the modes below, to
    ``__wrapped__`` (the operator's front, method or dunder)."""

    __slots__ = ("below", "name", "__wrapped__")

    def __init__(self, below: tuple, name: str, fn: Callable):
        self.below, self.name, self.__wrapped__ = below, name, fn

    def __call__(self, *args, **kwargs):
        return _call(self.below, self.name, self.__wrapped__, args, kwargs)


def _call(chain: tuple, name: str, fn: Callable, args: tuple, kwargs: dict):
    if not chain:
        return fn(*args, **kwargs)
    mode, below = chain[-1], chain[:-1]
    saved = getattr(_local, "visible", None)
    # the mode's own operator calls see only the modes below (or all, for a reentrant mode)
    _local.visible = chain if getattr(mode, "reentrant", False) else below
    try:
        return mode.dispatch(name, _CallOn(below, name, fn), args, kwargs)
    finally:
        _local.visible = saved


def call(name: str, fn: Callable, args: tuple, kwargs: dict):
    """Call ``fn`` (a variant of operator ``name``) through the modes active in this thread: what a
    rebound front does; for callers that hold the front itself (vmap's batched tensor methods)."""
    return _call(active_modes(), name, fn, args, kwargs)


def _dispatching(fn: Callable, name: str) -> Callable:
    """``fn`` wrapped to go through the active modes as operator ``name``."""

    @functools.wraps(fn)
    def dispatched(*args, **kwargs):
        return _call(active_modes(), name, fn, args, kwargs)

    dispatched._dispatching = True
    return dispatched


# --- rebinding (Note [Dispatch modes]) -----------------------------------------------------------
_OWN = ("flambeau._ops", "flambeau._kernels", "flambeau.profiler")
# operator dunders that modify ``self``: reported as the in-place variant (``x += y`` is "add_", ``x[i] = v``
# is "index_put_"), as torch's ``aten::add_``
_INPLACE_DUNDERS = frozenset({"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
                              "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__",
                              "__imatmul__", "__setitem__"})


def _replacement(bound: Callable, name: str) -> Callable:
    """What dispatches in place of ``bound``, a binding of operator ``name``: a binding that takes torch's keyword
    forms resolves them before the modes see the call (Note [torch's keyword forms])."""
    front = bound.__wrapped__ if hasattr(bound, "_torch_keywords") else bound
    return rewrap(bound, _dispatching(front, name))


def _current(owner, attribute: str):
    return owner.__dict__.get(attribute) if isinstance(owner, type) else getattr(owner, attribute, None)


def _walk() -> list:
    """Every binding of every operator variant: ``(owner, attribute, original, replacement)``."""
    import flambeau
    from flambeau._ops._registry import OPS
    from flambeau._tensor import Tensor

    found: list = []

    def bind(owner, attribute: str, name: str, bound) -> None:
        # only where the table bound that very function (a property or another function of the same
        # name, e.g. Tensor.mT, is left alone); a binding taking torch's keyword forms resolves them
        # before the modes see the call (Note [torch's keyword forms])
        if bound is not None and _current(owner, attribute) is bound:
            found.append((owner, attribute, bound, _replacement(bound, name)))

    names = {}
    for op in OPS.values():
        if op.fn is not None:
            names[id(op.fn)] = op.name
            for binding in op.bindings or ():
                if binding is not None:
                    names[id(binding)] = op.name
        if op.inplace_fn is not None:
            names[id(op.inplace_fn)] = op.name + "_"
    # references held by other flambeau modules, as their globals or as static methods
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("flambeau.") or module_name.startswith(_OWN):
            continue
        for attribute, value in list(vars(module).items()):
            name = names.get(id(value))
            if name is not None:
                bind(module, attribute, name, value)
            elif isinstance(value, type) and value.__module__ == module_name:
                for cls_attr, member in list(vars(value).items()):
                    if isinstance(member, staticmethod) and id(member.__func__) in names:
                        wrapper = _replacement(member.__func__, names[id(member.__func__)])
                        found.append((value, cls_attr, member, staticmethod(wrapper)))
    for op in OPS.values():
        for alias in (op.name, *op.aliases):
            if op.fn is not None:
                function, method = op.bindings or (op.fn, op.fn)
                if op.function:
                    bind(flambeau, alias, op.name, function)
                if op.method:
                    bind(Tensor, alias, op.name, method)
            if op.inplace_fn is not None:
                bind(Tensor, alias + "_", op.name + "_", op.inplace_fn)
        for dunder, fn in op.dunders.items():
            if callable(fn):  # (properties such as Tensor.mT run the operator they call)
                bind(Tensor, dunder, op.name + "_" if dunder in _INPLACE_DUNDERS else op.name, fn)
        if op.fn is not None and not op.function and not op.method:
            # internal operators (batch_norm_backward ...) are called as OPS[name].fn by the derivatives
            bind(op, "fn", op.name, op.fn)
    return found


def _install() -> None:
    from flambeau._ops._registry import OPS

    key = (len(sys.modules), len(OPS))
    if _cache[0] != key:
        _cache[0], _cache[1] = key, _walk()
    for owner, attribute, original, replacement in _cache[1]:
        if _current(owner, attribute) is original:  # (not replaced since the walk)
            _saved.append((owner, attribute, original))
            setattr(owner, attribute, replacement)


def _uninstall() -> None:
    while _saved:
        owner, attribute, original = _saved.pop()
        setattr(owner, attribute, original)


def _acquire() -> None:
    with _lock:
        if _users[0] == 0:
            _install()
        _users[0] += 1


def _release() -> None:
    with _lock:
        _users[0] -= 1
        if _users[0] == 0:
            _uninstall()
