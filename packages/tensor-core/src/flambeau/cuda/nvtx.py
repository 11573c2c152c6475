"""``flambeau.cuda.nvtx``: NVTX ranges and marks, as ``torch.cuda.nvtx``.

A range labels what runs between its push and its pop (or start and end) on a timeline. Here each range is a
span of flambeau's profiler (``flambeau.profiler``, what ``record_function`` makes: the operators run inside it
nest under it, and the trace shows it); where NVIDIA's NVTX library (``libnvToolsExt``) loads, the ranges and
marks also go to it, so Nsight Systems shows them. Without a profile running and without the library every call
does nothing, as torch's calls do without a tool attached. Ranges pushed on a thread are popped on that thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading

from flambeau.profiler import record_function

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]

_LIB: list = []  # libnvToolsExt, or None where it does not load (looked for once)
_local = threading.local()  # .stack: this thread's pushed ranges (record_function objects), innermost last
_started: dict = {}  # range_start's ids -> their record_function objects
_started_lock = threading.Lock()
_next_id = [1]


def _lib():
    if not _LIB:
        path = ctypes.util.find_library("nvToolsExt")
        try:
            lib = ctypes.CDLL(path or "libnvToolsExt.so.1")
            for name, argtypes, restype in (("nvtxRangePushA", [ctypes.c_char_p], ctypes.c_int),
                                            ("nvtxRangePop", [], ctypes.c_int),
                                            ("nvtxRangeStartA", [ctypes.c_char_p], ctypes.c_uint64),
                                            ("nvtxRangeEnd", [ctypes.c_uint64], None),
                                            ("nvtxMarkA", [ctypes.c_char_p], None)):
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = argtypes, restype
        except (OSError, AttributeError):
            lib = None
        _LIB.append(lib)
    return _LIB[0]


def _message(msg) -> str:
    if not isinstance(msg, str):
        raise TypeError(f"nvtx: msg must be a str, got {type(msg).__name__}")
    return msg


def range_push(msg: str) -> int:
    """Open a nested range named ``msg`` on this thread; returns its depth (0 for the outermost), as torch's."""
    span = record_function(_message(msg))
    span.__enter__()
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(span)
    lib = _lib()
    if lib is not None:
        lib.nvtxRangePushA(msg.encode())
    return len(stack) - 1


def range_pop() -> int:
    """Close this thread's innermost range; returns the depth it had, or -1 when none is open (as torch's)."""
    stack = _local.__dict__.get("stack")
    if not stack:
        return -1
    stack.pop().__exit__(None, None, None)
    lib = _lib()
    if lib is not None:
        lib.nvtxRangePop()
    return len(stack)


def range_start(msg: str) -> int:
    """Open a range named ``msg`` that may end on another thread; returns its id for :func:`range_end`."""
    span = record_function(_message(msg))
    span.__enter__()
    lib = _lib()
    with _started_lock:
        rid = int(lib.nvtxRangeStartA(msg.encode())) if lib is not None else _next_id[0]
        _next_id[0] += 1
        _started[rid] = span
    return rid


def range_end(range_id: int) -> None:
    """Close the range :func:`range_start` returned ``range_id`` for."""
    with _started_lock:
        span = _started.pop(range_id, None)
    if span is None:
        raise ValueError(f"nvtx.range_end: no open range has id {range_id}")
    span.__exit__(None, None, None)
    lib = _lib()
    if lib is not None:
        lib.nvtxRangeEnd(range_id)


def mark(msg: str) -> None:
    """An instantaneous event named ``msg`` (for the NVTX library; flambeau's profiler records a zero-length
    span)."""
    with record_function(_message(msg)):
        pass
    lib = _lib()
    if lib is not None:
        lib.nvtxMarkA(msg.encode())


@contextlib.contextmanager
def range(msg: str, *args, **kwargs):  # noqa: A001 - torch's name
    """A range around a block (``with nvtx.range("step {}", i):``; the message is ``msg.format(*args, **kwargs)``),
    or a function decorated with it."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
