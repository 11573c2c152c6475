"""One backend module per device type (``cpu``, ``cuda``), chosen by the device's type.

A backend knows how to allocate arrays on its device, build strided views of a storage
buffer, copy between host and device and report pointers. Operator kernels live in the kernel
house (``flambeau._kernels.<device>.<family>``), registered per operator and device type.
"""

from __future__ import annotations

import importlib

_MODULES = {"cpu": "flambeau._backends.cpu", "cuda": "flambeau._backends.cuda"}
_loaded: dict = {}


def backend(device_type: str):
    """The backend module of ``device_type`` (imported on first use: CUDA is never imported early)."""
    mod = _loaded.get(device_type)
    if mod is None:
        if device_type == "cuda":
            from flambeau.cuda import _lazy_init

            _lazy_init()  # RuntimeError saying why, rather than numba-cuda's errors
        mod = _loaded[device_type] = importlib.import_module(_MODULES[device_type])
    return mod


def backend_for(device):
    """The backend module of ``device``."""
    return backend(device.type)
