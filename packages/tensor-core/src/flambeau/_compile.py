"""``flambeau.compile``: accepted, and the identity.

PyTorch programs wrap their model in ``torch.compile`` (and older ones in ``torch.jit.script`` or
``torch.jit.trace``) for speed; the result behaves like the model. flambeau runs operators eagerly
and has no graph compiler yet, so these return the model or function itself, unchanged, and warn
once per process (``UserWarning``) that nothing is fused: the program runs, at eager speed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

__all__ = ["compile", "warn_once"]

_WARNED: set = set()


def warn_once(api: str) -> None:
    """Warn, once per process per ``api`` (every time under ``flambeau.set_warn_always(True)``), that ``api``
    returns its argument unchanged."""
    from flambeau._runtime import is_warn_always_enabled

    if api in _WARNED and not is_warn_always_enabled():
        return
    _WARNED.add(api)
    warnings.warn(f"flambeau.{api} returns the model unchanged: flambeau runs operators eagerly and does no "
                  "fusion or graph compilation yet", UserWarning, stacklevel=3)


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,  # noqa: A001
            backend: str | Callable = "inductor", mode: str | None = None, options: dict | None = None,
            disable: bool = False, **kwargs) -> Callable:
    """``torch.compile``'s signature, returning ``model`` itself (Module or function).

    ``fl.compile(model)``, ``@fl.compile`` and ``@fl.compile(mode="max-autotune")`` all work; every
    keyword is accepted and ignored (torch's others, ``name``, ``recompile_limit`` ..., too). The first
    call warns (``UserWarning``) that flambeau does no fusion yet; ``disable=True`` does not warn.

    Raises:
        AssertionError: ``model`` is given and not callable (torch's error and message).
        RuntimeError: both ``mode`` and ``options`` are given.
    """
    if model is None:
        def decorate(fn: Callable) -> Callable:
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                           options=options, disable=disable, **kwargs)

        return decorate
    if not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if not disable:
        warn_once("compile")
    return model
