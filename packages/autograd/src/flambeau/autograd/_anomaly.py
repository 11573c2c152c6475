"""Anomaly detection: remember where each node was created and fail on NaN gradients.

Under ``detect_anomaly()`` every recorded node keeps the traceback of the forward call that
created it. When its backward produces a NaN, or raises, the error names the forward operator
and shows that traceback.
"""

from __future__ import annotations

import threading
import traceback
import warnings

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "set_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]


class _State(threading.local):
    enabled = False
    check_nan = True


_state = _State()


def enabled() -> bool:
    return _state.enabled


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on in this thread."""
    return _state.enabled


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off in this thread, with its NaN check (``torch.set_anomaly_enabled``)."""
    _state.enabled, _state.check_nan = bool(enabled), bool(check_nan)


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks backward's outputs for NaN (True unless turned off)."""
    return _state.check_nan


def capture_trace() -> str:
    # Drop the engine's own frames (the last two: record and capture_trace).
    return "".join(traceback.format_stack()[:-3])


class detect_anomaly:
    """Context manager (and decorator) enabling anomaly detection for autograd.

    Args:
        check_nan: raise when a backward node produces NaN (default True).
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only "
                      "be enabled for debugging.", stacklevel=2)
        self._prev = (_state.enabled, _state.check_nan)
        _state.enabled, _state.check_nan = True, self.check_nan
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.check_nan = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off (as a call, or as a context manager restoring it)."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self._prev = (_state.enabled, _state.check_nan)
        _state.enabled, _state.check_nan = bool(mode), check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.check_nan = self._prev
        return False


def check_nan(node, outs) -> None:
    if not _state.check_nan:
        return
    for i, g in enumerate(outs):
        if g is not None and g.dtype.is_differentiable and bool(g.isnan().any()):
            raise RuntimeError(
                f"Function '{node.name()}' returned nan values in its {i}th output.\n"
                f"Traceback of forward call that caused the error:\n{node._trace}"
            )


def report(node, error: Exception) -> None:
    warnings.warn(
        f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n{node._trace}",
        stacklevel=2,
    )
