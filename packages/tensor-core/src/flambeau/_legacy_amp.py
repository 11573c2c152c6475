"""torch's older, per-device spellings of mixed precision (``torch.cuda.amp``, ``torch.cpu.amp``).

Each name forwards to :mod:`flambeau.amp` with the module's ``device_type`` and, as torch 2.4+ does, warns
that the spelling is deprecated. :mod:`flambeau.amp` ships with flambeau-autograd; it is imported on
first use, so tensor-core alone imports these modules. :func:`spellings` makes one device's set.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import SimpleNamespace

__all__ = ["spellings"]


def spellings(device_type: str, default_dtype: str) -> SimpleNamespace:
    """``autocast``, ``GradScaler``, ``custom_fwd`` and ``custom_bwd`` of ``flambeau.<device_type>.amp``;
    ``default_dtype``: the name of the autocast dtype when none is given (torch's: float16 on CUDA, bfloat16 on
    the CPU)."""
    module = f"flambeau.{device_type}.amp"

    def deprecated(old: str, new: str) -> None:
        warnings.warn(f"`{module}.{old}(args...)` is deprecated. Please use `{new}` instead.", FutureWarning,
                      stacklevel=3)

    def autocast(enabled: bool = True, dtype=None, cache_enabled: bool = True):
        """``flambeau.amp.autocast(device_type, dtype or the device's default, enabled, cache_enabled)`` (a
        context manager and a decorator)."""
        import flambeau
        from flambeau.amp import autocast as _autocast

        deprecated("autocast", f"flambeau.amp.autocast('{device_type}', args...)")
        return _autocast(device_type, dtype=getattr(flambeau, default_dtype) if dtype is None else dtype,
                         enabled=enabled, cache_enabled=cache_enabled)

    def GradScaler(init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,  # noqa: N802
                   growth_interval: int = 2000, enabled: bool = True):
        """``flambeau.amp.GradScaler(device_type, ...)``."""
        from flambeau.amp import GradScaler as _GradScaler

        deprecated("GradScaler", f"flambeau.amp.GradScaler('{device_type}', args...)")
        return _GradScaler(device_type, init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    def custom_fwd(fwd: Callable | None = None, *, cast_inputs=None):
        """``flambeau.amp.custom_fwd(fwd, device_type=device_type, cast_inputs=cast_inputs)``."""
        from flambeau.amp import custom_fwd as _custom_fwd

        deprecated("custom_fwd", f"flambeau.amp.custom_fwd(args..., device_type='{device_type}')")
        return _custom_fwd(fwd, device_type=device_type, cast_inputs=cast_inputs)

    def custom_bwd(bwd: Callable | None = None):
        """``flambeau.amp.custom_bwd(bwd, device_type=device_type)``."""
        from flambeau.amp import custom_bwd as _custom_bwd

        deprecated("custom_bwd", f"flambeau.amp.custom_bwd(args..., device_type='{device_type}')")
        return _custom_bwd(bwd, device_type=device_type)

    for fn in (autocast, GradScaler, custom_fwd, custom_bwd):
        fn.__module__ = module
        fn.__qualname__ = fn.__name__
    return SimpleNamespace(autocast=autocast, GradScaler=GradScaler, custom_fwd=custom_fwd, custom_bwd=custom_bwd)
