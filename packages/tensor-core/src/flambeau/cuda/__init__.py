"""``flambeau.cuda``: devices, streams, events, synchronisation and the device-memory allocator.

numba.cuda is imported on first use, never when flambeau is imported. Kernels run
asynchronously on the current stream (:func:`current_stream`); the host waits only when a value
is read (``.item()``, ``.cpu()``, ``.numpy()``, printing) or on :func:`synchronize`.

Under numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) one simulated device is available and
every kernel runs in Python threads on the CPU: slow, but it tests kernel code without a GPU.
"""

from __future__ import annotations

from flambeau.cuda._allocator import Allocator, NativeAllocator, get_allocator, set_allocator
from flambeau.cuda._streams import (
    Event,
    Stream,
    current_device,
    current_stream,
    default_stream,
    device,
    set_device,
    set_stream,
    stream,
    synchronize,
)

__all__ = ["is_available", "device_count", "current_device", "set_device", "device", "Stream", "Event",
           "current_stream", "default_stream", "stream", "set_stream", "synchronize", "Allocator",
           "NativeAllocator", "set_allocator", "get_allocator", "memory_allocated", "memory_reserved",
           "empty_cache", "memory_stats", "is_simulator", "record_stream"]

_available: list = []


def is_available() -> bool:
    """Whether a CUDA device (or numba's simulator, under ``NUMBA_ENABLE_CUDASIM=1``) can be used.

    False, without an exception, when numba-cuda, the driver or a GPU is missing.
    """
    if _available:
        return _available[0]
    try:
        from numba import cuda

        ok = bool(cuda.is_available())
    except Exception:
        ok = False
    _available.append(ok)
    return ok


def is_simulator() -> bool:
    """Whether numba's CUDA simulator stands in for the device (``NUMBA_ENABLE_CUDASIM=1``)."""
    try:
        from numba.core import config
    except ImportError:
        return False
    return bool(config.ENABLE_CUDASIM)


def device_count() -> int:
    """Number of CUDA devices visible (0 without CUDA)."""
    if not is_available():
        return 0
    from numba import cuda

    return len(cuda.gpus)


def _device_arg(device):
    return None if device is None else getattr(device, "index", device)


def memory_allocated(device=None) -> int:
    """Bytes of device memory held by live tensors on ``device``, per its allocator."""
    return int(get_allocator(_device_arg(device)).memory_allocated())


def memory_reserved(device=None) -> int:
    """Bytes of device memory the allocator of ``device`` holds (live and cached)."""
    return int(get_allocator(_device_arg(device)).memory_reserved())


def memory_stats(device=None) -> dict:
    """The allocator's counters for ``device`` (a dict; empty if the allocator keeps none)."""
    fn = getattr(get_allocator(_device_arg(device)), "memory_stats", None)
    return dict(fn()) if fn is not None else {}


def empty_cache() -> None:
    """Give cached, unused device memory of the current device back to the driver."""
    get_allocator().empty_cache()


def record_stream(tensor, stream: Stream) -> None:
    """Tell the allocator that ``tensor``'s memory is also used on ``stream`` (``Tensor.record_stream``).

    A caching allocator then does not hand the block out again before the work queued on
    ``stream`` so far has run, even if ``tensor`` is freed earlier. No-op under the simulator.
    """
    if tensor.device.type != "cuda":
        raise RuntimeError(f"record_stream: expected a CUDA tensor, got one on {tensor.device}")
    if not isinstance(stream, Stream):
        raise TypeError(f"record_stream(): expected a flambeau.cuda.Stream, got {type(stream).__name__}")
    if is_simulator():
        return
    get_allocator(tensor.device.index).record_stream(tensor.untyped_storage().data_ptr(), stream.numba)


def _register_kernels() -> None:
    # The operator table is complete once flambeau._ops is imported (it is, before this module):
    # register the CUDA launchers now (importing no numba).
    from flambeau._backends import cuda_kernels

    cuda_kernels.register_all()


_register_kernels()
