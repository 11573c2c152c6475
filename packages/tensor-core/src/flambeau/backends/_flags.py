"""Modules whose attributes are flags of ``flambeau._determinism`` (``cudnn.enabled = False`` sets one)."""

from __future__ import annotations

import contextlib
import sys
import types

from flambeau._determinism import FLAGS


class FlagModule(types.ModuleType):
    """A module class whose attributes named in ``_FLAGS`` (attribute -> key of ``FLAGS``) read and
    write the global flags: assigning ``module.benchmark = True`` sets ``FLAGS["cudnn.benchmark"]``."""

    _FLAGS: dict = {}

    def __getattr__(self, name):
        key = type(self)._FLAGS.get(name)
        if key is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return FLAGS[key]

    def __setattr__(self, name, value):
        key = type(self)._FLAGS.get(name)
        if key is None:
            super().__setattr__(name, value)
        else:
            if not isinstance(value, bool):
                raise TypeError(f"{self.__name__}.{name} must be a bool, got {type(value).__name__}")
            FLAGS[key] = value

    def __dir__(self):
        return sorted({*super().__dir__(), *type(self)._FLAGS})


def make_flag_module(module_name: str, flags: dict) -> None:
    """Turn module ``module_name`` into a :class:`FlagModule` over ``flags`` (attribute -> FLAGS key)."""
    cls = type(f"{module_name.rsplit('.', 1)[-1]}_module", (FlagModule,), {"_FLAGS": dict(flags)})
    sys.modules[module_name].__class__ = cls


@contextlib.contextmanager
def set_flags(flags: dict, values: dict):
    """Set ``FLAGS[flags[name]] = value`` for the non-None ``values`` inside the block; restore after."""
    saved = {flags[name]: FLAGS[flags[name]] for name, value in values.items() if value is not None}
    try:
        for name, value in values.items():
            if value is not None:
                FLAGS[flags[name]] = bool(value)
        yield
    finally:
        FLAGS.update(saved)

