"""Grad mode and the autograd seam (DESIGN.md, seam 2).

Core only decides *whether* an operator must be recorded: when grad mode is on and an input
requires grad, the dispatcher hands the operator, its inputs and its outputs to the installed
engine. flambeau-autograd installs that engine with :func:`install_engine`; without it nothing
is recorded and ``Tensor.backward()`` says which package to install.
"""

from __future__ import annotations

import functools
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


def install_engine(engine) -> None:
    """Install the autograd engine that records operators (called by flambeau-autograd)."""
    _engine[0] = engine


def load_engine() -> None:
    """Import flambeau-autograd if it is installed; importing it installs its engine.

    Core knows the engine's distribution only by this name: it is found when first needed (the first
    tensor that requires grad, or the first backward), so ``import flambeau`` stays light.
    """
    if _engine[0] is None:
        try:
            import flambeau.autograd  # noqa: F401
        except ImportError:
            pass


def get_engine():
    """The installed autograd engine; RuntimeError naming the package to install if none."""
    load_engine()
    engine = _engine[0]
    if engine is None:
        raise RuntimeError(
            "flambeau has no autograd engine: backward() needs the flambeau-autograd package "
            "(pip install flambeau-autograd)."
        )
    return engine


def is_grad_enabled() -> bool:
    """Whether operators are currently recorded for differentiation in this thread."""
    return state.enabled


class _GradModeContext:
    """Base of the grad-mode context managers; also usable as function decorators."""

    _mode: bool

    def __enter__(self):
        self._prev = state.enabled
        state.enabled = self._mode
        return self

    def __exit__(self, *exc):
        state.enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradModeContext):
    """Context manager (and decorator) that disables recording of operators for autograd."""

    _mode = False


class enable_grad(_GradModeContext):
    """Context manager (and decorator) that enables recording of operators for autograd."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off: as a function call, or as a context manager restoring it on exit."""

    def __init__(self, mode: bool):
        self._mode = bool(mode)
        self._prev = state.enabled
        state.enabled = self._mode

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self._mode
        state.enabled = self._prev  # used as a decorator: don't keep the mode set by __init__

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper
