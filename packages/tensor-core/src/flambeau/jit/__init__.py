"""``flambeau.jit``: TorchScript's decorators, accepted so that a PyTorch program runs unchanged.

flambeau has no TorchScript: :func:`script` and :func:`trace` return their argument itself (warning
once, ``UserWarning``), ``trace`` runs nothing; :func:`ignore`, :func:`unused` and :func:`export`
mark nothing and return the function; :func:`is_scripting` and :func:`is_tracing` are False;
:data:`Final` is ``typing.Final`` (as ``torch.jit.Final``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final  # torch.jit.Final is typing.Final

from flambeau._compile import warn_once
from flambeau._control_flow import fork, wait  # torch.jit.fork / wait: run now, a finished Future

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting", "is_tracing",
           "Final", "annotate", "fork", "wait"]


def script(obj, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """``torch.jit.script``: returns ``obj`` (a Module, function or class) unchanged, warning once."""
    warn_once("jit.script")
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True, check_inputs=None,
          check_tolerance: float = 1e-5, strict: bool = True, **kwargs):
    """``torch.jit.trace``: returns ``func`` unchanged without calling it, warning once."""
    warn_once("jit.trace")
    return func


def trace_module(mod, inputs=None, **kwargs):
    """``torch.jit.trace_module``: returns ``mod`` unchanged without calling it, warning once."""
    warn_once("jit.trace")
    return mod


def ignore(drop=False, **kwargs):
    """``@torch.jit.ignore`` and ``@torch.jit.ignore(drop=True)``: the function, unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    """``@torch.jit.unused``: the function, unchanged."""
    return fn


def export(fn: Callable) -> Callable:
    """``@torch.jit.export``: the function, unchanged."""
    return fn


def is_scripting() -> bool:
    """False: flambeau code never runs under TorchScript."""
    return False


def is_tracing() -> bool:
    """False: :func:`trace` records nothing."""
    return False


def annotate(the_type, the_value):
    """``torch.jit.annotate``: ``the_value``."""
    return the_value


