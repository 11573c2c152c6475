"""Grad mode and the autograd seam (DESIGN.md, seam 2).

Core only decides *whether* an operator must be recorded: when grad mode is on and an input
requires grad, the dispatcher hands the operator, its inputs and its outputs to the installed
engine. flambeau-autograd installs that engine with :func:`install_engine`; without it nothing
is recorded, yet ``requires_grad`` flows as in torch (Note [requires_grad without an engine]) and
``Tensor.backward()`` says which package to install.
"""

from __future__ import annotations

import functools
import inspect
import threading

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "install_engine", "get_engine",
           "load_engine"]


class _GradState(threading.local):
    # Grad mode is per thread, as in torch: a worker thread starts with grad enabled.
    enabled = True


state = _GradState()


class _Engine:
    """The interface an autograd engine implements (documentation only; duck-typed)."""

    def record(self, op, inputs: tuple, attrs: dict, outputs) -> None:  # pragma: no cover
        """Record that ``op`` (an OpDef) produced ``outputs`` from ``inputs`` with ``attrs``."""

    def backward(self, tensors, grad_tensors, retain_graph, create_graph, inputs) -> None:  # pragma: no cover
        """Run backward from ``tensors``."""


_engine: list = [None]


# Note [requires_grad without an engine]
# Without flambeau-autograd, :data:`NO_ENGINE` stands in for the engine once a tensor requires grad:
# it records nothing, but marks the results of differentiable operators as torch would mark them
# (floating outputs require grad and are not leaves; integer and bool outputs never require grad;
# nothing in no_grad mode, since the dispatcher does not call it then), and it runs in-place operators
# with torch's leaf checks. Only ``backward()`` and the other graph functions need the real engine.
class _Unrecorded:
    """The ``grad_fn`` of a result computed without an engine: it marks a non-leaf and holds no graph."""

    __slots__ = ("_name",)
    next_functions = ()

    def __init__(self, op_name: str):
        self._name = "".join(p.capitalize() for p in op_name.strip("_").split("_")) + "Backward0"

    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"<{self._name} (not recorded: flambeau-autograd is not installed)>"


class _NoEngine:
    """What :func:`load_engine` installs when flambeau-autograd is not installed (see the Note above)."""

    def record(self, op, inputs: tuple, attrs: dict, outputs) -> None:
        if op.differentiable:
            self._mark(op, outputs)

    @staticmethod
    def _mark(op, outputs) -> None:
        node = None
        for out in outputs if isinstance(outputs, (tuple, list)) else (outputs,):
            if getattr(out, "dtype", None) is not None and out.dtype.is_differentiable:
                out._requires_grad = True
                out.grad_fn = node = node or _Unrecorded(op.name)

    def apply_inplace(self, op, inputs: tuple, attrs: dict):
        from flambeau._tensor import Tensor

        self_ = inputs[0]
        if self_._requires_grad and self_.grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        base = self_._base
        if base is not None and base._requires_grad and base.grad_fn is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
        kwargs = {k: v for k, v in attrs.items() if k != "inplace"}
        with no_grad():  # the operator's own front then runs it in place, asking no engine
            if op.category == "random":  # tensor-core hands over the samples
                self_.copy_(inputs[1])
            elif op.inplace_fn is not None:
                op.inplace_fn(*inputs, **kwargs)
            else:  # method-only in-place operators (copy_, fill_, zero_) are their own front
                op.fn(*inputs, **kwargs)
        if op.differentiable and any(isinstance(x, Tensor) and x._requires_grad for x in inputs):
            self._mark(op, self_)
        return self_


NO_ENGINE = _NoEngine()


def install_engine(engine) -> None:
    """Install the autograd engine that records operators (called by flambeau-autograd)."""
    _engine[0] = engine


def load_engine() -> None:
    """Import flambeau-autograd if it is installed; importing it installs its engine.

    Core knows the engine's distribution only by this name: it is found when first needed (the first
    tensor that requires grad, or the first backward), so ``import flambeau`` stays light. Without it,
    :data:`NO_ENGINE` is installed (Note [requires_grad without an engine]).
    """
    if _engine[0] is None:
        try:
            import flambeau.autograd  # noqa: F401
        except ImportError:
            pass
        if _engine[0] is None:
            _engine[0] = NO_ENGINE


def get_engine():
    """The installed autograd engine; RuntimeError naming the package to install if none."""
    load_engine()
    engine = _engine[0]
    if engine is NO_ENGINE:
        raise RuntimeError(
            "flambeau has no autograd engine: backward() needs the flambeau-autograd package "
            "(pip install flambeau-autograd)."
        )
    return engine


def is_grad_enabled() -> bool:
    """Whether operators are currently recorded for differentiation in this thread."""
    return state.enabled


def decorate(context, fn):
    """``fn`` run inside ``context()`` (a new context manager per call), as torch's context decorators do: a
    generator function's body runs inside it at each resumption (not only while the generator is made), and the
    context is left whenever the generator yields."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with context():
                    value = gen.send(None)
                while True:
                    try:
                        sent = yield value
                    except GeneratorExit:
                        with context():
                            gen.close()
                        raise
                    except BaseException as e:  # noqa: BLE001 - thrown into the generator, which may handle it
                        with context():
                            value = gen.throw(e)
                    else:
                        with context():
                            value = gen.send(sent)
            except StopIteration as stop:
                return stop.value

        return generator

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with context():
            return fn(*args, **kwargs)

    return wrapper


class _GradModeContext:
    """Base of the grad-mode context managers; also usable as function decorators, with or without parentheses
    (``@no_grad()`` and ``@no_grad``, as torch's)."""

    _mode: bool

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)  # ``@no_grad`` without parentheses: the class is called with the function

    def __init__(self, orig_func=None):
        pass

    def __enter__(self):
        self._prev = state.enabled
        state.enabled = self._mode
        return self

    def __exit__(self, *exc):
        state.enabled = self._prev
        return False

    def __call__(self, fn):
        return decorate(self.__class__, fn)


class no_grad(_GradModeContext):
    """Context manager (and decorator) that disables recording of operators for autograd."""

    _mode = False


class enable_grad(_GradModeContext):
    """Context manager (and decorator) that enables recording of operators for autograd."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off: as a function call, or as a context manager restoring it on exit."""

    def __new__(cls, mode: bool):
        return object.__new__(cls)

    def __init__(self, mode: bool):
        self._mode = bool(mode)
        self._prev = state.enabled
        state.enabled = self._mode

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self._mode
        state.enabled = self._prev  # used as a decorator: don't keep the mode set by __init__

        return decorate(lambda: set_grad_enabled(mode), fn)
