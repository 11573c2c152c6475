"""``flambeau.cpu``: the CPU's device module (torch's ``torch.cpu``), what :func:`flambeau.get_device_module`
returns for ``"cpu"``. The CPU runs operators synchronously, so there is nothing to wait for. ``flambeau.cpu.amp``
is torch's older spelling of mixed precision on the CPU, imported on first use."""

from __future__ import annotations

__all__ = ["is_available", "device_count", "current_device", "set_device", "synchronize"]


def is_available() -> bool:
    """True: flambeau always runs on the CPU."""
    return True


def device_count() -> int:
    """1, as torch's."""
    return 1


def current_device() -> str:
    """``"cpu"``, as torch's."""
    return "cpu"


def set_device(device) -> None:
    """Nothing to select: there is one CPU device."""


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU operators return when done."""


def __getattr__(name: str):
    # torch.cpu.amp, imported on first use: it reaches flambeau.amp (flambeau-autograd), which imports the operator
    # modules that import flambeau (PEP 562, as flambeau.cuda.amp)
    if name == "amp":
        from flambeau._subpackages import resolve

        return resolve(__name__, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
