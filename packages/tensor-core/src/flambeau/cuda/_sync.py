"""Host synchronisation points, counted; and the errors kernels report from the device.

Note [Device-side errors]
    A CUDA kernel cannot raise. A kernel that meets bad data only the device sees (an index out
    of range in ``gather``, ``embedding``, ``nll_loss`` ...) must not read or write out of bounds
    and must not make the host wait to ask. It skips the access and records the fault in the
    device's *error flag* (:func:`error_flag`, four int64: code, offending value, bound, 0), and
    the next host synchronisation (:func:`host_sync`: ``.item()``, ``.numpy()``, printing,
    ``synchronize()``) raises ``RuntimeError`` naming it, as torch's device-side asserts surface
    at the next synchronising call. The flag is mapped host memory on a GPU, so reading it after a
    synchronisation copies nothing. A kernel writes it with::

        if i < 0 or i >= bound:
            err[0] = ERR_INDEX; err[1] = i; err[2] = bound
            continue

    The codes and their messages are :data:`MESSAGES` (one table).

Note [Counting host synchronisations]
    Issue: a training step must not make the host wait on the device anywhere but where the user
    reads a value. Every place flambeau waits goes through :func:`host_sync`, which counts
    (:func:`host_sync_count`) and, under :func:`set_sync_debug_mode` ``"warn"``/``"error"``, warns
    or raises as ``torch.cuda.set_sync_debug_mode`` does. Explicit ``synchronize()`` calls count
    too but never warn.
"""

from __future__ import annotations

import threading
import warnings

__all__ = ["ERR_INDEX", "ERR_VALUE", "MESSAGES", "error_flag", "raise_device_errors", "host_sync",
           "host_sync_count", "set_sync_debug_mode", "get_sync_debug_mode"]

ERR_INDEX = 1  # an index (value) outside [-bound, bound) or [0, bound)
ERR_VALUE = 2  # an input element outside [0, bound] (value: its flat index), e.g. binary_cross_entropy's

# error code -> message, formatted with the value and the bound the kernel recorded.
MESSAGES = {
    ERR_INDEX: "index {value} is out of bounds for dimension with size {bound}",
    ERR_VALUE: "all elements of input should be between 0 and {bound} (element {value} is not)",
}

_flags: dict = {}  # device index -> the device's error flag
_count = [0]
_mode = ["default"]
_MODES = {0: "default", 1: "warn", 2: "error", "default": "default", "warn": "warn", "error": "error"}
_lock = threading.Lock()


def error_flag(device_index: int):
    """The error flag of device ``device_index``: a device-visible int64 array of 4, zeroed."""
    flag = _flags.get(device_index)
    if flag is None:
        with _lock:
            flag = _flags.get(device_index)
            if flag is None:
                import numpy as np
                from numba import cuda

                from flambeau.cuda._streams import device

                with device(device_index):
                    flag = cuda.mapped_array(4, dtype=np.int64)
                flag[:] = 0
                _flags[device_index] = flag
    return flag


def raise_device_errors(device_index: int | None = None) -> None:
    """RuntimeError if a kernel recorded a fault on ``device_index`` (every device if None).

    Call only after the work was waited for (the flag is then current). The flag is cleared, so
    one fault raises once.
    """
    for index, flag in list(_flags.items()):
        if device_index is not None and index != device_index:
            continue
        code = int(flag[0])
        if code:
            value, bound = int(flag[1]), int(flag[2])
            flag[:] = 0
            text = MESSAGES.get(code, "unknown device error {value} {bound}").format(value=value, bound=bound)
            raise RuntimeError(f"CUDA kernel error on device cuda:{index}: {text} "
                               "(reported at this synchronisation; the kernel skipped the access)")


def host_sync(device_index: int | None = None, explicit: bool = False) -> None:
    """Record a host synchronisation (after it happened) and raise any device-side error.

    ``explicit``: a ``synchronize()`` the user asked for (counted, never warned about).
    """
    _count[0] += 1
    if not explicit and _mode[0] != "default":
        text = "called a synchronizing CUDA operation"
        if _mode[0] == "error":
            raise RuntimeError(text)
        warnings.warn(text, UserWarning, stacklevel=3)
    raise_device_errors(device_index)


def host_sync_count() -> int:
    """How many times the host has waited on a CUDA device in this process (Note [Counting ...])."""
    return _count[0]


def set_sync_debug_mode(debug_mode) -> None:
    """As ``torch.cuda.set_sync_debug_mode``: ``"default"``/0 silent, ``"warn"``/1, ``"error"``/2."""
    try:
        _mode[0] = _MODES[debug_mode]
    except (KeyError, TypeError):
        raise ValueError("invalid value of debug_mode, expected one of `default`, `warn`, `error` "
                         f"or 0, 1, 2, got {debug_mode!r}") from None


def get_sync_debug_mode() -> int:
    """The current mode as torch returns it: 0, 1 or 2."""
    return {"default": 0, "warn": 1, "error": 2}[_mode[0]]
