"""``flambeau.backends.opt_einsum``: whether ``einsum`` may reorder its contractions (``enabled``)."""

from __future__ import annotations

from flambeau.backends._flags import make_flag_module

__all__ = ["is_available"]  # and the flag ``enabled``


def is_available() -> bool:
    """Whether the ``opt_einsum`` package is importable (as torch's)."""
    import importlib.util

    return importlib.util.find_spec("opt_einsum") is not None


make_flag_module(__name__, {"enabled": "opt_einsum.enabled"})
