"""``profile``, ``schedule`` and ``record_function``: torch.profiler's API over flambeau's recorder."""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Callable, Iterable

from flambeau.profiler import _state
from flambeau.profiler._events import EventList, build_events
from flambeau.profiler._trace import write_trace

__all__ = ["ProfilerActivity", "ProfilerAction", "schedule", "profile", "record_function",
           "supported_activities"]


class ProfilerActivity(enum.Enum):
    """What to record: host activity (operators, annotations, autograd, memory) and CUDA device time."""

    CPU = 0
    CUDA = 1


class ProfilerAction(enum.Enum):
    """What the profiler does at a step of a :func:`schedule`."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities() -> set:
    """The activities this machine can record: CPU always, CUDA when a device (or the simulator) is there."""
    from flambeau import cuda

    return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if cuda.is_available() else set())


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Callable:
    """torch's schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle, ``warmup`` and
    ``active`` recorded steps (the last of a cycle saves: ``on_trace_ready``), ``repeat`` cycles
    (0: until the profile ends)."""
    for name, v in (("wait", wait), ("warmup", warmup), ("active", active), ("repeat", repeat),
                    ("skip_first", skip_first)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"schedule(): {name} must be a non-negative int, got {v!r}")
    if active < 1:
        raise ValueError("schedule(): active must be at least 1")

    def schedule_fn(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        k = step % cycle
        if k < wait:
            return ProfilerAction.NONE
        if k < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if k == cycle - 1 else ProfilerAction.RECORD

    return schedule_fn


def _always(_: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class profile:
    """Record what a program does, as ``torch.profiler.profile``.

    ::

        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            model(x).sum().backward()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
        prof.export_chrome_trace("trace.json")   # open in Perfetto or chrome://tracing

    Args:
        activities: :class:`ProfilerActivity` values (default: all :func:`supported_activities`).
        schedule: a :func:`schedule` callable; with one, call :meth:`step` at the end of each step.
        on_trace_ready: called with the profiler when a scheduled cycle (or the profile) ends.
        record_shapes: record the shapes and dtypes of operator inputs.
        profile_memory: record the bytes each operator allocates (and their frees).
        with_stack, with_flops, with_modules, experimental_config, acc_events: accepted for
            compatibility; not recorded.

    Recorded: every operator called through ``flambeau.<op>`` / ``Tensor`` methods, ``record_function``
    blocks, autograd nodes run by backward, optimizer steps and DataLoader batches (when those
    packages are installed), memory, and on CUDA each operator's device time.
    """

    def __init__(self, *, activities: Iterable | None = None, schedule: Callable | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, execution_trace_observer=None, acc_events: bool = False,
                 use_cuda: bool | None = None):
        acts = set(supported_activities() if activities is None else activities)
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise ValueError(f"activities: expected ProfilerActivity values, got {a!r}")
        if use_cuda:
            acts.add(ProfilerActivity.CUDA)
        self.activities = acts
        self.schedule = schedule or _always
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._recorder: _state.Recorder | None = None
        self._finished: _state.Recorder | None = None
        self._events: EventList | None = None
        self._step_block = None

    # --- running ------------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Begin (the first step of) profiling."""
        self._transition(None, self.current_action)

    def stop(self) -> None:
        """End profiling; a trace in progress is finished and handed to ``on_trace_ready``."""
        self._end_step_block()
        if self._recorder is not None:
            self._finish_recording()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def step(self) -> None:
        """Mark the end of a training step: advances the schedule."""
        self._end_step_block()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transition(prev, self.current_action)

    def _transition(self, prev, now) -> None:
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if prev == ProfilerAction.RECORD_AND_SAVE:
            self._finish_recording()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if now in recording and self._recorder is None:
            self._start_recording()
        if self._recorder is not None and self.schedule is not _always:
            self._step_block = record_function(f"ProfilerStep#{self.step_num}")
            self._step_block.__enter__()

    def _end_step_block(self) -> None:
        if self._step_block is not None:
            block, self._step_block = self._step_block, None
            block.__exit__(None, None, None)

    def _start_recording(self) -> None:
        rec = _state.Recorder(record_shapes=self.record_shapes, profile_memory=self.profile_memory,
                              cuda=ProfilerActivity.CUDA in self.activities, with_stack=self.with_stack)
        rec.wall_start_us = time.time_ns() / 1e3
        if rec.cuda:
            from flambeau import cuda

            if cuda.is_available():
                rec.reference = cuda.Event(enable_timing=True)
                rec.reference.record()
            else:
                rec.cuda = False
        _state.start(rec)
        self._recorder = rec

    def _finish_recording(self) -> None:
        rec, self._recorder = self._recorder, None
        _state.stop()
        if rec.cuda and rec.device_spans:
            _resolve_device_times(rec)
        self._finished = rec
        self._events = None

    # --- results ----------------------------------------------------------------------------------
    def events(self) -> EventList:
        """Every recorded span of the last finished recording, in start order."""
        if self._finished is None:
            raise RuntimeError("the profiler has not recorded anything yet (leave the with-block first)")
        if self._events is None:
            self._events = build_events(self._finished)
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """Averages per operator name (and input shapes): rows for :meth:`EventList.table`."""
        if group_by_input_shape and not self._finished.record_shapes:
            raise RuntimeError("group_by_input_shape needs record_shapes=True")
        return self.events().key_averages(group_by_input_shape)

    def table(self, **kwargs) -> str:
        return self.key_averages().table(**kwargs)

    def export_chrome_trace(self, path: str) -> str:
        """Write the Chrome trace JSON (Perfetto, chrome://tracing) of the last recording to ``path``."""
        if self._finished is None:
            raise RuntimeError("the profiler has not recorded anything yet (leave the with-block first)")
        return write_trace(self._finished, path)

    @property
    def function_events(self) -> EventList:
        return self.events()


def _resolve_device_times(rec) -> None:
    """Device start and duration of each CUDA operator, from its events against the reference."""
    from flambeau import cuda

    cuda.synchronize()
    for _name, (e0, e1), _start, extra in rec.device_spans:
        start_ms = rec.reference.elapsed_time(e0)
        dur_ms = e0.elapsed_time(e1)
        extra["device_start_us"] = max(start_ms, 0.0) * 1e3
        extra["device_us"] = max(dur_ms, 0.0) * 1e3
        extra["device_index"] = e0._stream.device_index if e0._stream is not None else 0
        extra["device_stream"] = e0._stream.cuda_stream if e0._stream is not None else 0


class record_function(contextlib.ContextDecorator):
    """Label a block (``with record_function("name"):``) or a function (``@record_function("name")``):
    the profiler shows it as a span containing the operators it ran. Nothing when no profile runs."""

    def __init__(self, name: str, args: str | None = None):
        if not isinstance(name, str):
            raise TypeError(f"record_function(): name must be a str, got {type(name).__name__}")
        self.name = name
        self.args = args
        self._rec = None
        self._start = 0

    def _recreate_cm(self):  # a decorated function may recurse or run on several threads
        return record_function(self.name, self.args)

    def __enter__(self) -> record_function:
        self._rec = _state.active()
        if self._rec is not None:
            self._start = _state.now_ns()
        return self

    def __exit__(self, *exc) -> None:
        rec, self._rec = self._rec, None
        if rec is not None and _state.active() is rec:
            rec.add_span("user_annotation", self.name, self._start, _state.now_ns(),
                         {"args": self.args} if self.args else None)
