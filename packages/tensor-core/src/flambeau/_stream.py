"""Device-generic streams and events: ``flambeau.Stream``, ``flambeau.Event`` (``torch.Stream``, ``torch.Event``).

``Stream(device)`` on a CUDA device is a :class:`flambeau.cuda.Stream` (and ``Event(device)`` a
:class:`flambeau.cuda.Event`); ``isinstance(s, flambeau.Stream)`` holds for those. On the CPU, where
operators run synchronously, the stream is the single CPU stream: it is always done, waiting on it
returns at once, and events cannot be recorded on it ("cpu backend doesn't support events", as torch
says on a CPU build). Without ``device`` the current accelerator is used: CUDA when available, else the CPU.
"""

from __future__ import annotations

import importlib

from flambeau._device import CPU, device, to_device

__all__ = ["Stream", "Event"]

_NO_EVENTS = "cpu backend doesn't support events."


def _device_of(value) -> device:
    if value is None:
        return to_device("cuda") if _cuda().is_available() else CPU
    if isinstance(value, str) and value.split(":")[0] == "cpu":
        return CPU
    return to_device(value)


def _cuda():
    return importlib.import_module("flambeau.cuda")


class _GenericMeta(type):
    """``isinstance(x, flambeau.Stream)`` is also true of a :class:`flambeau.cuda.Stream` (same for events)."""

    def __instancecheck__(cls, obj) -> bool:
        return type.__instancecheck__(cls, obj) or isinstance(obj, getattr(_cuda(), cls.__name__))


class Stream(metaclass=_GenericMeta):
    """An in-order queue of work on a device (torch's ``torch.Stream``); see the module docstring.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, a device, or None (the current accelerator).
        priority: accepted for torch compatibility; ignored.
    """

    __slots__ = ()
    device_type = 0  # torch's DeviceType enum value of the CPU
    device_index = -1
    stream_id = 0

    def __new__(cls, device=None, *, priority: int = 0):
        dev = _device_of(device)
        if dev.type == "cuda":
            return _cuda().Stream(dev, priority)
        return object.__new__(cls)

    @property
    def device(self) -> device:
        return CPU

    def query(self) -> bool:
        """True: CPU work is done when the operator returns."""
        return True

    def synchronize(self) -> None:
        """Nothing to wait for on the CPU."""

    def wait_stream(self, stream) -> None:
        """Nothing to wait for on the CPU."""

    def wait_event(self, event) -> None:
        """Nothing to wait for on the CPU."""

    def record_event(self, event=None):
        """Raises: events cannot be recorded on the CPU (as torch)."""
        raise RuntimeError(_NO_EVENTS)

    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(("cpu", self.stream_id))

    def __repr__(self) -> str:
        return f"flambeau.Stream device_type=cpu, device_index={self.device_index}, stream_id={self.stream_id}"


class Event(metaclass=_GenericMeta):
    """A marker in a stream (torch's ``torch.Event``); on CUDA a :class:`flambeau.cuda.Event`.

    A CPU event is always complete; :meth:`record` raises, since the CPU has no events to record.
    """

    __slots__ = ("enable_timing",)
    device_type = 0  # torch's DeviceType enum value of the CPU
    device_index = -1
    event_id = 0

    def __new__(cls, device=None, *, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        dev = _device_of(device)
        if dev.type == "cuda":
            return _cuda().Event(enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)
        event = object.__new__(cls)
        event.enable_timing = bool(enable_timing)
        return event

    @property
    def device(self) -> device:
        return CPU

    def record(self, stream=None) -> None:
        raise RuntimeError(_NO_EVENTS)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Nothing to wait for on the CPU."""

    def wait(self, stream=None) -> None:
        """Nothing to wait for on the CPU."""

    def elapsed_time(self, end_event) -> float:
        """Raises: a CPU event records no time (ValueError without ``enable_timing``, as torch)."""
        if not (self.enable_timing and getattr(end_event, "enable_timing", False)):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        raise RuntimeError(_NO_EVENTS)

    def __repr__(self) -> str:
        return (f"flambeau.Event device_type=cpu, device_index={self.device_index}, "
                f"event_flag={int(self.enable_timing)}, event_id={self.event_id}")
