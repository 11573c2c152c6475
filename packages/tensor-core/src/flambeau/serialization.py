"""``flambeau.serialization``: torch's ``torch.serialization`` names. :func:`save` and :func:`load` are
:func:`flambeau.save` and :func:`flambeau.load`; the safe globals are what a weights-only :func:`load` of a torch
archive allows beyond tensors, containers and numbers (Note [Objects beyond the format] in
``flambeau._serialization``): classes and functions the program trusts, such as ``argparse.Namespace``."""

from __future__ import annotations

import contextlib

from flambeau._serialization import load, save
from flambeau._torch_format import SAFE_GLOBALS

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "load", "safe_globals", "save"]


def _key(entry) -> tuple:
    """``(module, qualified name)`` of a safe global: the object, or ``(object, "module.name")`` as torch takes
    for an object pickled under another name."""
    if isinstance(entry, tuple):
        obj, path = entry
        module, _, name = path.rpartition(".")
        return (module, name), obj
    module, name = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if not module or not name:
        raise TypeError(f"add_safe_globals(): expected classes or functions (or (object, 'module.name') pairs), "
                        f"got {entry!r}")
    return (module, name), entry


def add_safe_globals(safe_globals: list) -> None:
    """Allow the classes and functions ``safe_globals`` in weights-only loads of torch archives."""
    for entry in safe_globals:
        key, obj = _key(entry)
        SAFE_GLOBALS[key] = obj


def get_safe_globals() -> list:
    """The globals :func:`add_safe_globals` allowed."""
    return list(SAFE_GLOBALS.values())


def clear_safe_globals() -> None:
    """Forget the globals :func:`add_safe_globals` allowed."""
    SAFE_GLOBALS.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list):
    """Within the block, weights-only loads also allow ``safe_globals`` (those allowed before stay)."""
    saved = dict(SAFE_GLOBALS)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        SAFE_GLOBALS.clear()
        SAFE_GLOBALS.update(saved)
