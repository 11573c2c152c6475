"""Device telemetry through NVML (``pynvml``, from the ``nvidia-ml-py`` package), as ``torch.cuda`` reads it.

``pynvml`` is imported on first use; without it every function raises torch's
``ModuleNotFoundError`` (``list_gpu_processes`` returns torch's message instead). A CUDA device
index is mapped to NVML's through ``CUDA_VISIBLE_DEVICES`` (ordinals or ``GPU-`` UUIDs), since
NVML numbers every GPU of the machine.
"""

from __future__ import annotations

import os

__all__ = ["utilization", "memory_usage", "temperature", "power_draw", "clock_rate", "device_memory_used",
           "list_gpu_processes"]

_initialized: list = []


def _pynvml():
    """The initialized pynvml module; torch's ModuleNotFoundError when it cannot be imported."""
    try:
        import pynvml
    except ImportError as e:
        raise ModuleNotFoundError("nvidia-ml-py does not seem to be installed or it can't be imported.") from e
    if not _initialized:
        pynvml.nvmlInit()
        _initialized.append(True)
    return pynvml


def _cuda_index(device) -> int:
    import flambeau.cuda as cuda

    if device is None:
        return cuda.current_device()
    from flambeau.cuda._streams import _device_index

    return _device_index(device)


def _nvml_device(device) -> int | str:
    """NVML's index (or the ``GPU-``/``MIG-`` UUID) of CUDA device ``device``, through CUDA_VISIBLE_DEVICES."""
    idx = _cuda_index(device)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return idx
    entries = [v.strip() for v in visible.split(",") if v.strip()]
    # CUDA stops at the first invalid entry; so does this list
    ordinals: list = []
    for v in entries:
        if v.lstrip("-").isdigit():
            if int(v) < 0:
                break
            ordinals.append(int(v))
        elif v.startswith(("GPU-", "MIG-")):
            ordinals.append(v)
        else:
            break
    if idx < 0 or idx >= len(ordinals):
        raise RuntimeError(f"device {idx} is not visible (CUDA_VISIBLE_DEVICES={ordinals})")
    return ordinals[idx]


def _handle(device):
    """NVML's handle of CUDA device ``device`` (None: the current one)."""
    nvml = _pynvml()
    entry = _nvml_device(device)
    if isinstance(entry, str):
        return nvml.nvmlDeviceGetHandleByUUID(entry)
    return nvml.nvmlDeviceGetHandleByIndex(entry)


def device_memory_used(device=None) -> int:
    """Used global memory of the device in bytes, as ``nvidia-smi`` reports it (every process's)."""
    return int(_pynvml().nvmlDeviceGetMemoryInfo(_handle(device)).used)


def memory_usage(device=None) -> int:
    """Percent of the last sample period during which global memory was read or written (``nvidia-smi``)."""
    return int(_pynvml().nvmlDeviceGetUtilizationRates(_handle(device)).memory)


def utilization(device=None) -> int:
    """Percent of the last sample period during which one or more kernels ran on the GPU (``nvidia-smi``)."""
    return int(_pynvml().nvmlDeviceGetUtilizationRates(_handle(device)).gpu)


def temperature(device=None) -> int:
    """Temperature of the GPU die in degrees Celsius (NVML's sensor 0)."""
    return int(_pynvml().nvmlDeviceGetTemperature(_handle(device), 0))


def power_draw(device=None) -> int:
    """Average power draw of the GPU in milliwatts over the last sample period."""
    return int(_pynvml().nvmlDeviceGetPowerUsage(_handle(device)))


def clock_rate(device=None) -> int:
    """Clock of the GPU's SMs in MHz over the last sample period (NVML clock type 1, ``NVML_CLOCK_SM``)."""
    return int(_pynvml().nvmlDeviceGetClockInfo(_handle(device), 1))


def list_gpu_processes(device=None) -> str:
    """The processes running on the device and their GPU memory, one line each (as torch prints them)."""
    try:
        nvml = _pynvml()
    except ModuleNotFoundError:
        return "pynvml module not found, please install nvidia-ml-py"
    except Exception as e:  # NVMLError_DriverNotLoaded and kin, at nvmlInit
        if type(e).__name__ == "NVMLError_DriverNotLoaded":
            return "cuda driver can't be loaded, is cuda enabled?"
        raise
    handle = _handle(device)
    procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    lines = [f"GPU:{_nvml_device(device)}"]  # NVML's numbering, as torch prints it
    if len(procs) == 0:
        lines.append("no processes are running")
    for p in procs:
        mem = (p.usedGpuMemory or 0) / (1024 * 1024)
        lines.append(f"process {p.pid:>10d} uses {mem:>12.3f} MB GPU memory")
    return "\n".join(lines)
