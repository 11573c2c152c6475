"""``inference_mode``: no recording and no autograd bookkeeping, for pure inference."""

from __future__ import annotations

import functools
import threading

from flambeau._grad_mode import state as grad_state

__all__ = ["inference_mode", "is_inference_mode_enabled"]


class _State(threading.local):
    enabled = False


_state = _State()


def is_inference_mode_enabled() -> bool:
    """Whether inference mode is on in this thread."""
    return _state.enabled


class inference_mode:
    """Context manager (and decorator) for inference: grad mode off.

    Differs from torch: tensors made inside are ordinary tensors (torch marks them as "inference
    tensors" that may never enter autograd); here it behaves as :class:`flambeau.no_grad`.
    """

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = (_state.enabled, grad_state.enabled)
        if self.mode:
            _state.enabled = True
            grad_state.enabled = False
        return self

    def __exit__(self, *exc):
        _state.enabled, grad_state.enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(self.mode):
                return fn(*args, **kwargs)

        return wrapper
