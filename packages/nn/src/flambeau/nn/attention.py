"""``flambeau.nn.attention``: torch's ``torch.nn.attention`` backend selection for
:func:`~flambeau.nn.functional.scaled_dot_product_attention`.

flambeau has one implementation per device (on the CPU the math composite; on CUDA fused kernels for short
sequences and cuBLAS products around a fused softmax otherwise), each computing what torch's ``MATH`` backend
computes. :func:`sdpa_kernel` therefore checks its arguments as torch does and leaves the choice of kernel to
flambeau whichever backends it names: code that asks for ``FLASH_ATTENTION`` runs, with flambeau's kernels.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Iterable

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """torch's names of attention backends (its values)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_state = threading.local()  # .backends: what the innermost sdpa_kernel block of this thread named


@contextlib.contextmanager
def sdpa_kernel(backends: SDPBackend | Iterable[SDPBackend], set_priority: bool = False):
    """Within the block, attention may use ``backends`` (an :class:`SDPBackend` or a list of them; module
    docstring: flambeau's kernels run whichever are named). ``set_priority`` orders them, as torch's."""
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    if not chosen or not all(isinstance(b, SDPBackend) for b in chosen):
        raise TypeError(f"sdpa_kernel(): backends must be SDPBackend members or a list of them, got {backends!r}")
    saved = getattr(_state, "backends", None)
    _state.backends = tuple(chosen)
    try:
        yield
    finally:
        if saved is None:
            del _state.backends
        else:
            _state.backends = saved
