"""``flambeau.version``: torch's ``torch.version`` names. ``cuda`` is the CUDA runtime version the GPU path uses
(``"13.0"``), or None without one, worked out on first access (it asks numba-cuda); ``git_version`` is None (no
build from a checkout is recorded), ``hip`` is None."""

from __future__ import annotations

from flambeau.torch_version import __version__

__all__ = ["__version__", "cuda", "debug", "git_version", "hip"]

debug = False
git_version = None
hip = None


def __getattr__(name: str):
    if name == "cuda":
        global cuda
        cuda = _cuda_runtime()
        return cuda
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _cuda_runtime() -> str | None:
    try:
        import flambeau.cuda

        if not flambeau.cuda.is_available():
            return None
        from numba import cuda as numba_cuda

        major, minor = numba_cuda.runtime.get_version()
        return f"{major}.{minor}"
    except Exception:  # noqa: BLE001 - no CUDA runtime to ask: no CUDA version, as torch's CPU builds
        return None
