"""The profiler's global state: the recorder of the running profile, and the hooks other packages install.

Note [Profiling at zero cost]
    With no profile running nothing is instrumented: the operators bound in ``flambeau`` and on
    ``Tensor`` are the front functions themselves, autograd runs its own node caller, and the
    hooks of other packages are absent. Starting a profile (:func:`start`) *rebinds* every
    operator variant to a recording wrapper and calls every installed hook's ``start``;
    stopping puts everything back. So the per-operator overhead with the profiler off is
    exactly what it was before the profiler existed (benchmarks/ops.py measures it).

    Other packages register their instrumentation with :func:`register_hook` when they are
    imported (flambeau-autograd wraps its engine's node calls, flambeau-nn its optimizers'
    ``step``, flambeau-data its loaders' ``__next__``); a package imported while a profile runs
    is instrumented at once.

:func:`active` is the running :class:`Recorder` or None; code that records its own spans
(``record_function``) asks it and does nothing when it is None.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

__all__ = ["Recorder", "active", "start", "stop", "register_hook", "trace_attributes", "now_ns"]

now_ns = time.perf_counter_ns


class Recorder:
    """What one profiling run collects: spans (complete events) and instants (memory), per thread.

    ``spans`` holds tuples ``(kind, name, thread id, start ns, end ns, extra)``; ``kind`` is the
    Chrome trace category (``cpu_op``, ``user_annotation``, ``autograd``, ``kernel`` ...), ``extra``
    a dict (input shapes and dtypes, device times, sequence number) or None. ``memory`` holds
    ``(thread id, time ns, device type, bytes, address)`` with negative bytes for frees.
    """

    def __init__(self, *, record_shapes: bool = False, profile_memory: bool = False, cuda: bool = False,
                 with_stack: bool = False):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.cuda = cuda
        self.with_stack = with_stack
        self.spans: list = []
        self.memory: list = []
        self.device_spans: list = []  # (name, stream id, start event, end event, host start ns, extra)
        self.start_ns = now_ns()
        self.pid = os.getpid()
        self.local = threading.local()  # per thread: the depth stack of open spans (for forward links)

    def add_span(self, kind: str, name: str, start: int, end: int, extra=None) -> None:
        self.spans.append((kind, name, threading.get_ident(), start, end, extra))

    def add_memory(self, device_type: str, nbytes: int, address: int, when: int | None = None) -> None:
        """An allocation (``nbytes`` > 0) or a free (< 0) at ``when`` (default: now)."""
        self.memory.append((threading.get_ident(), now_ns() if when is None else when, device_type, nbytes, address))


_active: list = [None]
# name -> (start(recorder), stop()): the instrumentation of every package (Note [Profiling at zero cost])
_hooks: dict[str, tuple[Callable, Callable]] = {}
_lock = threading.Lock()


def active() -> Recorder | None:
    """The recorder of the running profile, or None."""
    return _active[0]


def register_hook(name: str, start: Callable, stop: Callable) -> None:
    """Install instrumentation ``name``: ``start(recorder)`` when a profile starts, ``stop()`` when it
    stops; started at once if a profile is running."""
    with _lock:
        _hooks[name] = (start, stop)
        recorder = _active[0]
    if recorder is not None:
        start(recorder)


def start(recorder: Recorder) -> None:
    """Make ``recorder`` the running profile and instrument everything; RuntimeError if one runs."""
    with _lock:
        if _active[0] is not None:
            raise RuntimeError("Profiler is already enabled on this thread")
        _active[0] = recorder
        hooks = list(_hooks.values())
    for begin, _ in hooks:
        begin(recorder)


def stop() -> None:
    """Remove every instrumentation and end the running profile (nothing if none runs)."""
    with _lock:
        if _active[0] is None:
            return
        hooks = list(_hooks.values())
    for _, end in reversed(hooks):
        end()
    _active[0] = None


def trace_attributes(hook_name: str, targets: Callable[[], list]) -> None:
    """Instrumentation that, while a profile runs, replaces callables by span-recording wrappers.

    ``targets()`` (asked when each profile starts) lists ``(owner, attribute, category, label)``:
    ``owner.attribute`` (a class attribute or a module global) is rebound to a wrapper recording a
    span of ``category`` named ``label`` (a string, or a callable of the call's first argument,
    e.g. the optimizer, giving it) around each call; the originals come back when it stops.
    """
    saved: list = []

    def begin(recorder) -> None:
        for owner, attribute, category, label in targets():
            original = owner.__dict__.get(attribute) if isinstance(owner, type) else getattr(owner, attribute, None)
            if original is None or getattr(original, "_profiled", False):
                continue
            saved.append((owner, attribute, original))
            setattr(owner, attribute, _span_wrapper(original, category, label))

    def end() -> None:
        while saved:
            owner, attribute, original = saved.pop()
            setattr(owner, attribute, original)

    register_hook(hook_name, begin, end)


def _span_wrapper(fn: Callable, category: str, label) -> Callable:
    import functools

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        rec = _active[0]
        if rec is None:
            return fn(*args, **kwargs)
        start = now_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            name = label(args[0] if args else None) if callable(label) else label
            rec.add_span(category, name, start, now_ns())

    traced._profiled = True
    return traced
