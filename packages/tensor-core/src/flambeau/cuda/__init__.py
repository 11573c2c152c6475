"""``flambeau.cuda``: devices, streams, events, synchronisation and the device-memory allocator.

numba.cuda is imported on first use, never when flambeau is imported. Kernels run
asynchronously on the current stream (:func:`current_stream`); the host waits only when a value
is read (``.item()``, ``.cpu()``, ``.numpy()``, printing) or on :func:`synchronize`.

Under numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) one simulated device is available and
every kernel runs in Python threads on the CPU: slow, but it tests kernel code without a GPU.

Without CUDA (numba-cuda, a driver or a GPU missing) :func:`is_available` is False and everything
that needs a device (``Tensor.to('cuda')``, ``device='cuda'``, streams, :func:`synchronize`,
:func:`current_device` ...) raises ``RuntimeError: CUDA is not available: <why>`` through
:func:`_lazy_init`, as torch's ``_lazy_init`` does.
"""

from __future__ import annotations

from flambeau._device import device as _dev
from flambeau._device import register_current_index
from flambeau.cuda import _streams
from flambeau.cuda._allocator import Allocator, NativeAllocator, OutOfMemoryError, get_allocator, set_allocator
from flambeau.cuda._devices import (
    CudaError,
    DeferredCudaCallError,
    Device,
    can_device_access_peer,
    current_blas_handle,
    current_solver_handle,
    device_of,
    get_arch_list,
    get_gencode_flags,
    has_half,
    has_magma,
    is_bf16_supported,
    is_current_stream_capturing,
    is_tf32_supported,
)
from flambeau.cuda._memory import (
    CUDAPluggableAllocator,
    MemPool,
    caching_allocator_alloc,
    caching_allocator_delete,
    caching_allocator_disabled,
    caching_allocator_enable,
    change_current_allocator,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    ipc_collect,
    max_memory_cached,
    mem_get_info,
    memory_cached,
    memory_snapshot,
    memory_stats_as_nested_dict,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    set_per_process_memory_fraction,
    use_mem_pool,
)
from flambeau.cuda._nvml import (
    clock_rate,
    device_memory_used,
    list_gpu_processes,
    memory_usage,
    power_draw,
    temperature,
    utilization,
)
from flambeau.cuda._streams import (
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    device,
    get_stream_from_external,
    set_device,
    set_stream,
    stream,
    synchronize,
)
from flambeau.cuda._sync import get_sync_debug_mode, host_sync_count, set_sync_debug_mode
from flambeau.cuda.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)

__all__ = ["is_available", "device_count", "current_device", "set_device", "device", "Stream", "Event",
           "current_stream", "default_stream", "stream", "set_stream", "synchronize", "Allocator",
           "NativeAllocator", "set_allocator", "get_allocator", "memory_allocated", "memory_reserved",
           "empty_cache", "memory_stats", "is_simulator", "record_stream", "host_sync_count",
           "set_sync_debug_mode", "get_sync_debug_mode", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
           "max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats", "memory_summary",
           "get_device_properties", "get_device_name", "get_device_capability", "amp", "nvtx",
           # torch.cuda's memory management (_memory.py)
           "mem_get_info", "memory_stats_as_nested_dict", "memory_snapshot", "memory_cached", "max_memory_cached",
           "reset_accumulated_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction", "caching_allocator_alloc",
           "caching_allocator_delete", "caching_allocator_enable", "caching_allocator_disabled",
           "get_allocator_backend", "CUDAPluggableAllocator", "change_current_allocator", "MemPool", "use_mem_pool",
           "host_memory_stats", "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats",
           "reset_peak_host_memory_stats", "ipc_collect",
           # NVML telemetry (_nvml.py)
           "utilization", "memory_usage", "temperature", "power_draw", "clock_rate", "device_memory_used",
           "list_gpu_processes",
           # devices, streams, handles, errors (_devices.py, _streams.py)
           "init", "is_initialized", "Device", "device_of", "can_device_access_peer", "get_arch_list",
           "get_gencode_flags", "is_bf16_supported", "is_tf32_supported", "has_half", "has_magma", "StreamContext",
           "ExternalStream", "get_stream_from_external", "current_blas_handle", "current_solver_handle",
           "default_generators", "CudaError", "DeferredCudaCallError", "is_current_stream_capturing",
           "OutOfMemoryError"]
# FloatStorage ... (torch.cuda's legacy storages) are set on this module by flambeau/__init__.py
# (flambeau._storage_api.CUDA_LEGACY), as the legacy tensor types FloatTensor ...



def __getattr__(name: str):
    # torch.cuda.amp, imported on first use: it reaches flambeau.amp (flambeau-autograd), which imports the
    # operator modules that import this package (PEP 562, as flambeau's own subpackages)
    if name == "amp":
        from flambeau._subpackages import resolve

        return resolve(__name__, name)
    if name == "nvtx":  # (imports the profiler, which this package's import must not)
        import importlib

        return importlib.import_module("flambeau.cuda.nvtx")
    if name == "default_generators":
        # torch.cuda.default_generators: one generator per device, made on first use (empty without CUDA)
        from flambeau.cuda.random import _all

        return tuple(_all()) if is_available() else ()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_available: list = []  # [bool] once asked
_initialized: list = []  # [True] once _lazy_init succeeded
_why_not: list = [None]  # why CUDA is not available, once asked


def is_available() -> bool:
    """Whether a CUDA device (or numba's simulator, under ``NUMBA_ENABLE_CUDASIM=1``) can be used.

    False, without an exception, when numba-cuda, the driver or a GPU is missing.
    """
    if _available:
        return _available[0]
    try:
        from numba import cuda
    except ImportError:
        why = "numba-cuda is not installed (pip install 'flambeau-tensor-core[cuda]')"
    except Exception as e:  # a broken install must not make is_available() raise
        why = f"numba-cuda could not be imported ({type(e).__name__}: {e})"
    else:
        try:
            why = None if cuda.is_available() else _driver_problem(cuda.cuda_error())
        except Exception as e:
            why = _driver_problem(e)
    _why_not[0] = why
    _available.append(why is None)
    return why is None


def _driver_problem(error) -> str:
    """numba-cuda's reason for no CUDA, in a few words (its first sentence, without its advice)."""
    if error is None:
        return "no usable CUDA GPU was found (numba-cuda found a driver but no GPU or no NVVM library)"
    text = " ".join(str(error).split())
    first = text.split(". ")[0].rstrip(".")
    if "NO_DEVICE" in text:
        return f"no CUDA GPU was found ({first})"
    if "driver" in text.lower():
        return f"no CUDA driver was found ({first})"
    return first


def _lazy_init() -> None:
    """RuntimeError saying why if CUDA cannot be used; every path that needs a device calls it first.

    A fake driver installed by tests (``_streams._set_driver``) stands in for a device.
    """
    if _streams._override[0] is not None:
        return
    if not (_available and _available[0]) and not is_available():
        raise RuntimeError(f"CUDA is not available: {_why_not[0] or 'numba-cuda reports no CUDA device'}")
    if not _initialized:
        if not is_simulator():
            from flambeau.cuda._numba_compat import prepare_numba_cuda

            prepare_numba_cuda()
        _initialized.append(True)


def init() -> None:
    """Initialize flambeau's CUDA state (:func:`_lazy_init`): RuntimeError saying why if CUDA cannot be used.

    Every CUDA function does it on first use; calling it again does nothing.
    """
    _lazy_init()


def is_initialized() -> bool:
    """Whether flambeau's CUDA state has been initialized (a CUDA function succeeded, or :func:`init`)."""
    return bool(_initialized)


def current_device() -> int:
    """Ordinal of the calling thread's current CUDA device; RuntimeError if CUDA is not available."""
    _lazy_init()
    return _streams.current_device()


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
    """A device argument of the memory and property queries as an index (None: the current device); strings such
    as ``"cuda:1"`` as torch takes them."""
    if isinstance(device, str):
        device = _dev(device)
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
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


def max_memory_allocated(device=None) -> int:
    """Peak of :func:`memory_allocated` on ``device`` since the start or :func:`reset_peak_memory_stats`."""
    return int(get_allocator(_device_arg(device)).max_memory_allocated())


def max_memory_reserved(device=None) -> int:
    """Peak of :func:`memory_reserved` on ``device`` since the start or :func:`reset_peak_memory_stats`."""
    return int(get_allocator(_device_arg(device)).max_memory_reserved())


def reset_peak_memory_stats(device=None) -> None:
    """Set the peak statistics of ``device``'s allocator to their current values."""
    get_allocator(_device_arg(device)).reset_peak_memory_stats()


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A human-readable report of ``device``'s allocator (as ``torch.cuda.memory_summary``)."""
    return str(get_allocator(_device_arg(device)).memory_summary())


def get_device_properties(device=None):
    """The properties of a CUDA device: ``name``, ``major``, ``minor``, ``total_memory``,
    ``multi_processor_count`` and ``uuid`` (the driver's, a string: the same physical GPU whatever
    its index in this process) (a namespace, as torch's ``_CudaDeviceProperties``)."""
    import types

    from numba import cuda

    index = current_device() if device is None else _device_arg(device)
    if index is None:
        index = current_device()
    dev = cuda.gpus[index]
    with dev:
        d = cuda.get_current_device()
        major, minor = d.compute_capability
        name = getattr(d, "name", b"numba CUDA simulator")
        name = name.decode() if isinstance(name, bytes) else str(name)
        try:
            total = int(cuda.current_context().get_memory_info()[1])
        except Exception:  # the simulator reports no memory
            total = 0
        sms = int(getattr(d, "MULTIPROCESSOR_COUNT", 0) or 0)
        uuid = str(getattr(d, "uuid", "") or "")
    return types.SimpleNamespace(name=name, major=major, minor=minor, total_memory=total,
                                 multi_processor_count=sms, uuid=uuid)


def get_device_name(device=None) -> str:
    """The name of a CUDA device (default: the current one), e.g. ``'NVIDIA H100 80GB HBM3'``."""
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple:
    """``(major, minor)`` compute capability of a CUDA device."""
    p = get_device_properties(device)
    return p.major, p.minor


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


# This package decides whether CUDA can be used, how many devices there are and which is current; the
# modules below it ask it through these hooks (Note [flambeau.cuda and its streams] in _streams.py, Note
# [The current device of a type] in flambeau/_device.py). The lambdas look the functions up when called, so
# replacing them here (as tests do) reaches those modules too.
_streams.use_checks(lambda: _lazy_init(), lambda: device_count())
register_current_index("cuda", lambda: current_device())
