"""``flambeau.cuda``: device availability, current device, streams and synchronisation.

numba.cuda is imported on first use, never when flambeau is imported.
"""

from __future__ import annotations

__all__ = ["is_available", "device_count", "current_device"]


def is_available() -> bool:
    """Whether a CUDA device (or numba's simulator, under ``NUMBA_ENABLE_CUDASIM=1``) can be used."""
    try:
        from numba import cuda
    except ImportError:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:
        return False


def device_count() -> int:
    """Number of CUDA devices visible (0 without CUDA)."""
    if not is_available():
        return 0
    from numba import cuda

    return len(cuda.gpus)


def current_device() -> int:
    """Ordinal of the current CUDA device."""
    return 0
