"""``torch.cuda`` device queries, library handles and error classes.

Architectures: flambeau compiles its kernels at run time (numba-cuda through NVVM/NVRTC) for the
device at hand, so :func:`get_arch_list` lists the architectures the installed NVRTC can target,
where torch lists those its binary was built for.
"""

from __future__ import annotations

from typing import Union

from flambeau._device import device as _device_cls
from flambeau.cuda import _streams

__all__ = ["Device", "device_of", "can_device_access_peer", "get_arch_list", "get_gencode_flags",
           "is_bf16_supported", "is_tf32_supported", "has_half", "has_magma", "current_blas_handle",
           "current_solver_handle", "CudaError", "DeferredCudaCallError", "is_current_stream_capturing"]

Device = Union[_device_cls, str, int, None]  # noqa: UP007 (what torch.cuda.Device is: the type of ``device=`` arguments)

has_half: bool = True  # float16 tensors and kernels exist on CUDA
has_magma: bool = False  # flambeau does not link MAGMA: its CUDA linear algebra is numba kernels


def _cuda():
    import flambeau.cuda as cuda

    return cuda


class device_of:
    """Context manager making the device of tensor ``obj`` current inside the block; no change for a CPU
    tensor (as ``torch.cuda.device_of``)."""

    def __init__(self, obj):
        self.idx = obj.get_device() if obj.is_cuda else -1
        self._ctx = None

    def __enter__(self):
        if self.idx != -1:
            self._ctx = _streams.device(self.idx)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            ctx, self._ctx = self._ctx, None
            return ctx.__exit__(*exc)
        return False


def can_device_access_peer(device, peer_device) -> bool:
    """Whether ``device`` can read and write the memory of ``peer_device`` directly (P2P).

    False for a device and itself, as ``cudaDeviceCanAccessPeer``. AssertionError for an invalid index.
    """
    cuda = _cuda()
    cuda._lazy_init()
    device = _streams._device_index(device)
    peer_device = _streams._device_index(peer_device)
    if device < 0 or device >= cuda.device_count():
        raise AssertionError("Invalid device id")
    if peer_device < 0 or peer_device >= cuda.device_count():
        raise AssertionError("Invalid peer device id")
    if device == peer_device:
        return False
    from numba import cuda as numba_cuda

    return bool(numba_cuda.gpus[device].can_access_peer(peer_device))


def get_arch_list() -> list[str]:
    """The GPU architectures flambeau's kernels can be compiled for (``['sm_50', ..., 'sm_90', ...]``): those of
    the installed NVRTC, since kernels are compiled at run time. ``[]`` without CUDA or NVRTC."""
    if not _cuda().is_available():
        return []
    try:
        from numba.cuda.cudadrv import nvrtc

        ccs = nvrtc.get_supported_ccs()
    except Exception:  # no NVRTC library: nothing can be compiled
        return []
    return [f"sm_{major}{minor}" for major, minor in ccs]


def get_gencode_flags() -> str:
    """``nvcc`` ``-gencode`` flags for :func:`get_arch_list` (as torch builds them)."""
    arch_list = get_arch_list()
    if not arch_list:
        return ""
    return " ".join(f"-gencode compute=compute_{arch},code={kind}_{arch}"
                    for kind, arch in (a.split("_") for a in arch_list))


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current device supports bfloat16: natively (compute capability 8.0 or more) or, with
    ``including_emulation``, if bfloat16 tensors can be made on it (kernels compute in float32)."""
    cuda = _cuda()
    if not cuda.is_available():
        return False
    if cuda.get_device_properties(cuda.current_device()).major >= 8:
        return True
    if not including_emulation:
        return False
    try:
        import flambeau

        flambeau.tensor([1.0], dtype=flambeau.bfloat16, device="cuda")
    except Exception:
        return False
    return True


def is_tf32_supported() -> bool:
    """Whether the current device has TF32 tensor cores (compute capability 8.0 or more)."""
    return is_bf16_supported(including_emulation=False)


def current_blas_handle() -> int:
    """The ``cublasHandle_t`` flambeau's matrix products use on the calling thread and current device, as an int.

    Raises:
        RuntimeError: cuBLAS is not available (under numba's simulator, or no libcublas).
    """
    cuda = _cuda()
    cuda._lazy_init()
    from flambeau._kernels.cuda import _cublas

    if not _cublas.available():
        why = "numba's CUDA simulator has no cuBLAS" if cuda.is_simulator() else _cublas._state.get("why")
        raise RuntimeError(f"current_blas_handle: cuBLAS is not available ({why})")
    handle = _cublas._handle(cuda.current_device())
    _cublas.forget_stream(cuda.current_device())  # its user may set a stream on it: set ours again next time
    return int(_cublas._state["ffi"].cast("uintptr_t", handle))


def current_solver_handle() -> int:
    """torch's ``cusolverDnHandle_t``: flambeau has none (no cuSOLVER binding), so this raises RuntimeError."""
    _cuda()._lazy_init()
    raise RuntimeError("current_solver_handle: flambeau is not built with cuSOLVER (its CUDA linear algebra "
                       "runs as numba kernels), so there is no cuSOLVER handle")


class CudaError(RuntimeError):
    """A CUDA runtime error code, with the runtime's description: ``CudaError(2)`` reads
    ``out of memory (2)``."""

    def __init__(self, code: int) -> None:
        super().__init__(f"{_error_string(code)} ({code})")
        self.code = code


def _error_string(code: int) -> str:
    try:
        from cuda.bindings import runtime

        _, msg = runtime.cudaGetErrorString(runtime.cudaError_t(code))
        return msg.decode() if isinstance(msg, bytes) else str(msg)
    except Exception:  # no cuda-python, or a code the runtime does not know
        return "unrecognized error code"


class DeferredCudaCallError(Exception):
    """torch's error for a call queued until CUDA initialization that failed there. flambeau queues no calls
    (seeds and settings apply at once), so it never raises it; it exists for ``except`` clauses."""


def is_current_stream_capturing() -> bool:
    """Whether the current stream is being captured into a CUDA graph (``cuStreamIsCapturing``).

    flambeau itself never captures (no CUDA graphs); another library may capture a stream flambeau uses.
    False under numba's simulator and without CUDA.
    """
    cuda = _cuda()
    if not cuda.is_available() or cuda.is_simulator():
        return False
    from cuda.bindings import driver

    err, status = driver.cuStreamIsCapturing(driver.CUstream(cuda.current_stream().cuda_stream))
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuStreamIsCapturing failed: {err.name}")
    return status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
