"""``flambeau.cuda.amp``: torch's older spelling of mixed precision on CUDA (``torch.cuda.amp``).

Each name forwards to :mod:`flambeau.amp` with ``device_type="cuda"`` and, as torch 2.4+ does, warns
that the spelling is deprecated. :mod:`flambeau.amp` ships with flambeau-autograd; it is imported on
first use, so tensor-core alone imports this module.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`flambeau.cuda.amp.{old}(args...)` is deprecated. Please use `{new}` instead.",
                  FutureWarning, stacklevel=3)


def autocast(enabled: bool = True, dtype=None, cache_enabled: bool = True):
    """``flambeau.amp.autocast("cuda", dtype or float16, enabled, cache_enabled)`` (a context manager
    and a decorator)."""
    from flambeau import float16
    from flambeau.amp import autocast as _autocast

    _deprecated("autocast", "flambeau.amp.autocast('cuda', args...)")
    return _autocast("cuda", dtype=float16 if dtype is None else dtype, enabled=enabled,
                     cache_enabled=cache_enabled)


def GradScaler(init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,  # noqa: N802
               growth_interval: int = 2000, enabled: bool = True):
    """``flambeau.amp.GradScaler("cuda", ...)``."""
    from flambeau.amp import GradScaler as _GradScaler

    _deprecated("GradScaler", "flambeau.amp.GradScaler('cuda', args...)")
    return _GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def custom_fwd(fwd: Callable | None = None, *, cast_inputs=None):
    """``flambeau.amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)``."""
    from flambeau.amp import custom_fwd as _custom_fwd

    _deprecated("custom_fwd", "flambeau.amp.custom_fwd(args..., device_type='cuda')")
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable | None = None):
    """``flambeau.amp.custom_bwd(bwd, device_type="cuda")``."""
    from flambeau.amp import custom_bwd as _custom_bwd

    _deprecated("custom_bwd", "flambeau.amp.custom_bwd(args..., device_type='cuda')")
    return _custom_bwd(bwd, device_type="cuda")
