"""Streams, events and the current device/stream of each thread.

Every CUDA kernel launch and copy of flambeau goes on the calling thread's *current stream*
(:func:`current_stream`); it is the device's default stream unless a :func:`stream` context
made another one current. The host waits only when a value is read or the user asks
(:func:`synchronize`, :meth:`Stream.synchronize`, :meth:`Event.synchronize`).

numba-cuda is reached through :func:`_driver` (``numba.cuda``), which tests replace with a fake
to check the bookkeeping without a device.

Note [flambeau.cuda and its streams]
    Whether CUDA can be used at all (and why not) and how many devices there are is decided by the
    ``flambeau.cuda`` package itself (its ``_lazy_init`` and ``device_count``). That package imports
    this module, so this module does not import it back: the package hands those two functions over
    with :func:`use_checks` when it is imported.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from flambeau._device import device as _dev
from flambeau.cuda._sync import host_sync

__all__ = ["Stream", "Event", "current_stream", "default_stream", "stream", "synchronize", "StreamContext",
           "stream_handle",
           "ExternalStream", "get_stream_from_external",
           "current_device", "set_device", "device"]

_tls = threading.local()
_override: list = [None]
_defaults: dict[int, Stream] = {}


# flambeau.cuda's availability check and device count, installed by it (Note [flambeau.cuda and its streams])
_checks: dict = {}


def use_checks(lazy_init, device_count) -> None:
    """Install flambeau.cuda's ``_lazy_init`` and ``device_count`` (Note [flambeau.cuda and its streams])."""
    _checks["lazy_init"] = lazy_init
    _checks["device_count"] = device_count


def _driver():
    """The numba.cuda module (or the fake installed by :func:`_set_driver`); RuntimeError without CUDA."""
    d = _override[0]
    if d is None:
        _checks["lazy_init"]()
        from numba import cuda as d
    return d


def _set_driver(driver) -> None:
    """Install a fake driver for tests (None restores numba.cuda) and forget cached streams."""
    _override[0] = driver
    _defaults.clear()
    _tls.__dict__.clear()


def _is_sim() -> bool:
    if _override[0] is not None:
        return bool(getattr(_override[0], "_is_simulator", False))
    from numba.core import config

    return bool(config.ENABLE_CUDASIM)


# --- devices ------------------------------------------------------------------------------------
def current_device() -> int:
    """Ordinal of the calling thread's current CUDA device."""
    return _tls.__dict__.get("device", 0)  # (getattr with a default pays for an AttributeError: every operator asks)


def _check_index(index) -> int:
    if isinstance(index, str) or hasattr(index, "type"):
        d = _dev(index)
        if d.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {d}")
        index = 0 if d.index is None else d.index
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"device: expected a non-negative CUDA device index, got {index!r}")
    _checks["lazy_init"]()
    n = _checks["device_count"]()
    if index >= n:
        raise RuntimeError(f"CUDA error: invalid device ordinal {index} (device_count() is {n})")
    return index


def set_device(device) -> None:
    """Make ``device`` (an index, ``'cuda:i'`` or a device) the calling thread's current device."""
    index = _check_index(device)
    if index != current_device() and not _is_sim():
        _driver().select_device(index)
    _tls.device = index


@contextlib.contextmanager
def device(device):
    """Context manager making ``device`` current inside the block (None: no change)."""
    if device is None:
        yield
        return
    prev = current_device()
    set_device(device)
    try:
        yield
    finally:
        if prev != current_device():
            set_device(prev)


# --- streams ------------------------------------------------------------------------------------
class Stream:
    """A CUDA stream: a queue of kernels and copies that run in order on one device.

    ``Stream()`` creates a new stream on the current device. ``priority`` is accepted for torch
    compatibility and ignored. ``Stream.numba`` is the numba-cuda stream object to pass to
    numba launches (``kernel[grid, block, s.numba]``).
    """

    __slots__ = ("device_index", "numba", "_is_default", "__weakref__")

    def __init__(self, device=None, priority: int = 0, *, _numba_stream=None, _is_default: bool = False):
        self.device_index = current_device() if device is None else _device_index(device)
        if _numba_stream is None:
            with _on_device(self.device_index):
                _numba_stream = _driver().stream()
        self.numba = _numba_stream
        self._is_default = _is_default

    @property
    def device(self):
        """The :class:`flambeau.device` this stream belongs to."""
        return _dev("cuda", self.device_index)

    @property
    def cuda_stream(self) -> int:
        """The raw ``CUstream`` handle as an int (0 for the default stream)."""
        n = self.numba
        if getattr(n, "handle", None) is None:  # the simulator's streams have none
            return 0 if self._is_default else id(n)
        return stream_handle(n)

    def _cai_stream(self) -> int:
        """The ``stream`` entry of ``__cuda_array_interface__`` v3 (1: the legacy default stream)."""
        return 1 if self._is_default or self.cuda_stream == 0 else self.cuda_stream

    def synchronize(self) -> None:
        """Wait until everything queued on this stream has run."""
        self.numba.synchronize()
        host_sync(self.device_index, explicit=True)

    def query(self) -> bool:
        """Whether everything queued on this stream has run (never blocks)."""
        ev = Event()
        ev.record(self)
        return ev.query()

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) on this stream and return it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait for ``event`` (the host does not wait)."""
        event.wait(self)

    def wait_stream(self, stream: Stream) -> None:
        """Make later work on this stream wait for the work queued so far on ``stream``."""
        self.wait_event(stream.record_event())

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and self.numba is other.numba

    def __hash__(self) -> int:
        return hash(id(self.numba))

    def __repr__(self) -> str:
        return f"<flambeau.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"


def _device_index(device) -> int:
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    d = _dev(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return current_device() if d.index is None else d.index


@contextlib.contextmanager
def _on_device(index: int):
    if index == current_device():
        yield
    else:
        with device(index):
            yield


def stream_handle(numba_stream) -> int:
    """The ``CUstream`` handle of a numba stream as an int; 0 (the legacy default stream) for None, 0, or a
    stream without a handle. (numba-cuda's ``int(stream)`` gives a ``CUstream_flags`` for the default
    stream, which Python deprecates as an ``__int__`` result.)"""
    h = getattr(numba_stream, "handle", None) if numba_stream else None
    if h is None:
        return 0
    try:
        return int(h)  # cuda.bindings handles
    except TypeError:
        return int(h.value or 0)  # ctypes handles


def default_stream(device=None) -> Stream:
    """The default (legacy, synchronising) stream of ``device`` (default: current device)."""
    index = current_device() if device is None else _device_index(device)
    s = _defaults.get(index)
    if s is None:
        with _on_device(index):
            s = Stream(index, _numba_stream=_driver().default_stream(), _is_default=True)
        _defaults[index] = s
    return s


def current_stream(device=None) -> Stream:
    """The calling thread's current stream on ``device`` (default: current device)."""
    local = _tls.__dict__
    index = local.get("device", 0) if device is None else _device_index(device)
    cur = local.get("streams")
    if cur is None:
        cur = _bind_thread()
    s = cur.get(index)
    if s is not None:
        return s
    return _defaults.get(index) or default_stream(index)


def _bind_thread() -> dict:
    """Make the current device's context current on the calling thread, once per thread; return the
    thread's (empty) table of current streams.

    Note [A CUDA context on every thread]
        The CUDA driver keeps the current context per thread. numba makes it current when it launches a
        kernel, but flambeau also calls the driver directly (cuMemAlloc in the allocators, copies, cuBLAS
        and cuDNN through cffi): on a thread that has not launched anything yet (the autograd engine's
        device thread, a DataLoader thread, a user's thread) such a call fails with
        CUDA_ERROR_INVALID_CONTEXT. Every operator asks for the current stream before it touches the
        device, so the first such request on a thread binds the device's primary context to it (torch's
        runtime does the same lazily).
    """
    if not _is_sim():
        _driver().select_device(current_device())
    cur = _tls.streams = {}
    return cur


def set_stream(s: Stream) -> None:
    """Make ``s`` the current stream of its device for the calling thread."""
    if not isinstance(s, Stream):
        raise TypeError(f"set_stream(): expected a flambeau.cuda.Stream, got {type(s).__name__}")
    cur = getattr(_tls, "streams", None)
    if cur is None:
        cur = _bind_thread()
    cur[s.device_index] = s


class StreamContext:
    """Context manager making ``stream`` the current stream of its device, and its device the current
    device, inside the block (``stream`` None: no change), as ``torch.cuda.StreamContext``.

    On exit the previous current streams (of both devices) and the previous current device come back.
    """

    def __init__(self, stream: Stream | None):
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"stream(): expected a flambeau.cuda.Stream or None, got {type(stream).__name__}")
        self.stream = stream
        self._saved: list = []

    def __enter__(self) -> Stream | None:
        s = self.stream
        if s is None:
            return None
        prev_dev = current_device()
        self._saved.append((prev_dev, current_stream(s.device_index)))
        set_stream(s)
        if s.device_index != prev_dev:
            set_device(s.device_index)
        return s

    def __exit__(self, *exc) -> None:
        if self.stream is None:
            return
        prev_dev, prev_stream = self._saved.pop()
        set_stream(prev_stream)
        if current_device() != prev_dev:
            set_device(prev_dev)


def stream(s: Stream | None) -> StreamContext:
    """Context manager making ``s`` the current stream of its device (None: no change): a
    :class:`StreamContext`.

    Example::

        s = fl.cuda.Stream()
        with fl.cuda.stream(s):
            y = x * 2          # queued on s
        s.synchronize()
    """
    return StreamContext(s)


class ExternalStream(Stream):
    """A stream created outside flambeau (by another library), from its ``cudaStream_t`` as an int.

    flambeau does not own it: keeping it alive while it is used is the caller's job (as in torch).
    ``device`` is the device the stream was created on (default: the current one).
    """

    __slots__ = ()

    def __init__(self, stream_ptr: int, device=None):
        if isinstance(stream_ptr, bool) or not isinstance(stream_ptr, int):
            raise TypeError(f"ExternalStream(): stream_ptr must be an int cudaStream_t, got {stream_ptr!r}")
        index = current_device() if device is None else _device_index(device)
        with _on_device(index):
            numba_stream = _driver().external_stream(stream_ptr)
        super().__init__(index, _numba_stream=numba_stream)


def get_stream_from_external(data_ptr: int, device=None) -> Stream:
    """A :class:`Stream` over an externally allocated ``cudaStream_t`` (an :class:`ExternalStream`)."""
    _checks["lazy_init"]()
    return ExternalStream(data_ptr, device)


def synchronize(device=None) -> None:
    """Wait for all work queued on every stream of ``device`` (default: the current device)."""
    index = current_device() if device is None else _device_index(device)
    with _on_device(index):
        _driver().synchronize()
    host_sync(index, explicit=True)


# --- events -------------------------------------------------------------------------------------
class Event:
    """A marker in a stream: record it, then wait for it or time between two of them.

    ``enable_timing`` is needed for :meth:`elapsed_time`. The numba event is created on first
    :meth:`record`.
    """

    __slots__ = ("enable_timing", "blocking", "interprocess", "numba", "_stream")

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            raise NotImplementedError("flambeau.cuda.Event: interprocess events are not supported")
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.interprocess = False
        self.numba: Any = None
        self._stream: Stream | None = None

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (default: the current stream)."""
        s = current_stream() if stream is None else stream
        if self.numba is None:
            drv = _driver()
            self.numba = drv.event() if _is_sim() else drv.event(timing=self.enable_timing)
        self.numba.record(s.numba)
        self._stream = s

    def wait(self, stream: Stream | None = None) -> None:
        """Make later work on ``stream`` (default: current) wait for this event."""
        if self.numba is None:
            return
        s = current_stream() if stream is None else stream
        self.numba.wait(s.numba)

    def query(self) -> bool:
        """Whether the work recorded before this event has completed (never blocks)."""
        if self.numba is None:
            return True
        q = getattr(self.numba, "query", None)
        return True if q is None else bool(q())

    def synchronize(self) -> None:
        """Wait on the host until the event has completed."""
        if self.numba is not None:
            self.numba.synchronize()
            host_sync(self._stream.device_index, explicit=True)

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, timing enabled)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.numba is None or end_event.numba is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        end_event.synchronize()
        return float(self.numba.elapsed_time(end_event.numba))

    def __repr__(self) -> str:
        return f"<flambeau.cuda.Event recorded={self.numba is not None} timing={self.enable_timing}>"
