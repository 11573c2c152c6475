"""``inference_mode``: no recording and no autograd bookkeeping, for pure inference."""

from __future__ import annotations

import threading

from flambeau._grad_mode import decorate
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

    def __new__(cls, mode: bool = True):
        if mode is None or isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # ``@inference_mode`` without parentheses: the class is called with the function

    def __init__(self, mode: bool = True):
        self.mode = True if mode is None or not isinstance(mode, bool) else mode

    def __enter__(self):
        self._prev = (_state.enabled, grad_state.enabled)
        _state.enabled = self.mode
        grad_state.enabled = not self.mode  # inference_mode(False) turns grad mode on, as torch's does
        return self

    def __exit__(self, *exc):
        _state.enabled, grad_state.enabled = self._prev
        return False

    def __call__(self, fn):
        mode = self.mode
        return decorate(lambda: inference_mode(mode), fn)
