"""The real-GPU backend: raw memory, events and streams through numba-cuda's driver API.

Imported only when used, so the package imports without numba-cuda. It calls the driver
(``cuMemAlloc``/``cuMemFree``) directly rather than ``Context.memalloc``, because with
the caching plugin installed the latter would come back into the allocator.
"""

from __future__ import annotations

from typing import Any

from ._backend import Backend, DeviceOutOfMemory

__all__ = ["NumbaDriverBackend"]


def _driver() -> Any:
    try:
        from numba.cuda.cudadrv import driver
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "flambeau.cuda_alloc: the GPU backend needs numba-cuda; install flambeau-cuda-alloc[cuda]"
        ) from exc
    if not hasattr(driver, "cuMemAlloc") and not hasattr(driver, "driver"):
        raise RuntimeError(
            "flambeau.cuda_alloc: numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) has no driver "
            "API; use flambeau.cuda_alloc.SimulatedDevice instead"
        )
    return driver


class NumbaDriverBackend(Backend):
    """Raw device memory of one GPU, through numba-cuda's driver bindings.

    Args:
        device: Index of the GPU.
        context: The numba ``Context`` to allocate in; by default the device's primary
            context, looked up on first use. The memory-manager plugin passes its own,
            because it is built while numba is still creating that context.
    """

    def __init__(self, device: int = 0, context: Any = None) -> None:
        self.device = device
        self._context: Any = context
        self._mod: Any = _driver() if context is not None else None

    def _ctx(self) -> Any:
        # Touch CUDA only on first use: numba builds plugins before a context exists.
        if self._context is None:
            from numba import cuda

            self._mod = _driver()
            with cuda.gpus[self.device]:
                self._context = cuda.current_context()
        return self._context

    def _oom_code(self) -> Any:
        return self._mod.binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY

    def malloc(self, size: int) -> int:
        ctx = self._ctx()
        ctx.push()
        try:
            return int(self._mod.driver.cuMemAlloc(size))
        except self._mod.CudaAPIError as exc:
            if exc.code == self._oom_code():
                raise DeviceOutOfMemory(str(exc)) from exc
            raise
        finally:
            ctx.pop()

    def free(self, address: int) -> None:
        ctx = self._ctx()
        ctx.push()
        try:
            self._mod.driver.cuMemFree(self._mod.binding.CUdeviceptr(address))
        finally:
            ctx.pop()

    def mem_get_info(self) -> tuple[int, int]:
        ctx = self._ctx()
        ctx.push()
        try:
            free, total = self._mod.driver.cuMemGetInfo()
        finally:
            ctx.pop()
        return int(free), int(total)

    def default_stream(self) -> Any:
        from numba import cuda

        return cuda.default_stream()

    def stream_key(self, stream: Any) -> int:
        # Distinct numba Stream objects may wrap one CUstream; the handle identifies it.
        if isinstance(stream, int):
            return stream
        handle = getattr(stream, "handle", None)
        if handle is None:
            raise TypeError(f"stream: expected a numba.cuda Stream or 0, got {stream!r}")
        return int(handle) if not hasattr(handle, "value") else int(handle.value or 0)

    def record_event(self, stream: Any) -> Any:
        ctx = self._ctx()
        event = ctx.create_event(timing=False)
        event.record(stream)
        return event

    def event_query(self, event: Any) -> bool:
        return bool(event.query())

    def event_synchronize(self, event: Any) -> None:
        event.synchronize()

    def synchronize(self) -> None:
        self._ctx().synchronize()

    def ipc_handle(self, address: int) -> Any:
        ctx = self._ctx()
        ctx.push()
        try:
            return self._mod.driver.cuIpcGetMemHandle(address)
        finally:
            ctx.pop()

    def host_malloc(self, size: int) -> int:
        ctx = self._ctx()
        ctx.push()
        try:
            return int(self._mod.driver.cuMemHostAlloc(size, 0))
        finally:
            ctx.pop()

    def host_free(self, address: int) -> None:
        ctx = self._ctx()
        ctx.push()
        try:
            self._mod.driver.cuMemFreeHost(address)
        finally:
            ctx.pop()
