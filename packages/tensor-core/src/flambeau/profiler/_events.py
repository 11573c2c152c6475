"""Profiled events, their per-name averages, and torch's table of them.

A :class:`FunctionEvent` is one recorded span (an operator call, a ``record_function`` block, an
autograd node, an optimizer step ...) with its CPU interval, its children (spans of the same
thread inside it), the device time of the work it queued, and the memory allocated while it ran.
``key_averages()`` groups them by name (and input shapes) into :class:`FunctionEventAvg` rows;
:meth:`EventList.table` prints them with ``torch.profiler``'s columns and units.
"""

from __future__ import annotations

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "build_events"]


class FunctionEvent:
    """One recorded span. Times are microseconds (as torch's), memory in bytes."""

    __slots__ = ("id", "name", "kind", "thread", "start_us", "end_us", "input_shapes", "input_dtypes",
                 "sequence_nr", "device_type", "cpu_children", "cpu_parent", "device_time_total",
                 "self_cpu_memory_usage", "self_device_memory_usage", "_child_cpu")

    def __init__(self, id: int, name: str, kind: str, thread: int, start_us: float, end_us: float, extra):
        self.id = id
        self.name = name
        self.kind = kind
        self.thread = thread
        self.start_us = start_us
        self.end_us = end_us
        extra = extra or {}
        self.input_shapes = extra.get("Input Dims", [])
        self.input_dtypes = extra.get("Input type", [])
        self.sequence_nr = extra.get("Sequence number", -1)
        self.device_type = "cpu"
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.device_time_total = extra.get("device_us", 0.0)  # filled when the profile stops
        self.self_cpu_memory_usage = 0
        self.self_device_memory_usage = 0
        self._child_cpu = 0.0

    key = property(lambda self: self.name, doc="The name the averages group by.")
    count = property(lambda self: 1)
    cpu_time_total = property(lambda self: self.end_us - self.start_us, doc="Wall time of the span (µs).")
    self_cpu_time_total = property(lambda self: self.cpu_time_total - self._child_cpu,
                                   doc="Its time less its children's (µs).")
    cuda_time_total = property(lambda self: self.device_time_total)
    self_device_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = self_device_time_total

    @property
    def cpu_memory_usage(self) -> int:
        """Bytes allocated on the CPU during the span (its children's included)."""
        return self.self_cpu_memory_usage + sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def device_memory_usage(self) -> int:
        return self.self_device_memory_usage + sum(c.device_memory_usage for c in self.cpu_children)

    cuda_memory_usage = device_memory_usage

    @property
    def time_range(self):
        from types import SimpleNamespace

        return SimpleNamespace(start=self.start_us, end=self.end_us, elapsed_us=lambda: self.cpu_time_total)

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={_format_time(self.cpu_time_total)} "
                f"thread={self.thread} input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The sum of the events sharing a key (name, and input shapes when grouped by them)."""

    def __init__(self, key: str, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_device_memory_usage = 0

    def add(self, e) -> FunctionEventAvg:
        self.count += e.count
        for attr in ("cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total",
                     "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage", "self_device_memory_usage"):
            setattr(self, attr, getattr(self, attr) + getattr(e, attr))
        return self

    cpu_time = property(lambda self: self.cpu_time_total / max(self.count, 1), doc="Average CPU time per call.")
    device_time = property(lambda self: self.device_time_total / max(self.count, 1))
    cuda_time = device_time
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={_format_time(self.self_cpu_time_total)} "
                f"cpu_time={_format_time(self.cpu_time_total)} count={self.count}>")


class EventList(list):
    """A list of :class:`FunctionEvent` (or of averages) with torch's summaries."""

    def __init__(self, events=(), *, use_device: bool = False, profile_memory: bool = False):
        super().__init__(events)
        self._use_device = use_device
        self._profile_memory = profile_memory

    def key_averages(self, group_by_input_shape: bool = False) -> EventList:
        """Averages by name (and input shapes with ``group_by_input_shape``), in first-seen order."""
        groups: dict = {}
        for e in self:
            shapes = str(e.input_shapes) if group_by_input_shape else None
            avg = groups.get((e.key, shapes))
            if avg is None:
                avg = FunctionEventAvg(e.key, e.input_shapes if group_by_input_shape else None)
                groups[(e.key, shapes)] = avg
            avg.add(e)
        out = EventList(groups.values(), use_device=self._use_device, profile_memory=self._profile_memory)
        out._shapes = group_by_input_shape
        return out

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """torch's table: one row per entry, the columns that have data, a total line.

        ``sort_by``: an attribute of the rows (``"self_cpu_time_total"``, ``"cpu_time_total"``,
        ``"cuda_time_total"``, ``"count"``, ``"cpu_memory_usage"`` ...), largest first.
        """
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
        if sort_by is not None:
            attr = sort_by.replace("cuda", "device")
            rows.sort(key=lambda e: getattr(e, attr, getattr(e, sort_by, 0)), reverse=True)
        rows = rows[:row_limit] if row_limit and row_limit > 0 else rows
        return _table(rows, self, header=header, shapes=getattr(self, "_shapes", False),
                      use_device=self._use_device or any(e.device_time_total for e in self),
                      memory=self._profile_memory, name_width=max_name_column_width,
                      shapes_width=max_shapes_column_width)

    def export_chrome_trace(self, path: str) -> None:
        raise RuntimeError("export_chrome_trace is a method of the profile object (prof.export_chrome_trace)")


# --- building events from a recorder ------------------------------------------------------------------
def build_events(recorder) -> EventList:
    """The :class:`EventList` of a finished :class:`~flambeau.profiler._state.Recorder`: spans in start
    order, each with its parent and children on its thread, its device time and its memory."""
    base = recorder.start_ns
    spans = sorted(recorder.spans, key=lambda s: (s[2], s[3], -s[4]))
    events = []
    for i, (kind, name, tid, start, end, extra) in enumerate(spans):
        events.append(FunctionEvent(i, name, kind, tid, (start - base) / 1e3, (end - base) / 1e3, extra))
    stack: list[FunctionEvent] = []
    for e in events:  # nesting per thread: each span's parent is the innermost open span containing it
        while stack and (stack[-1].thread != e.thread or stack[-1].end_us < e.end_us):
            stack.pop()
        if stack:
            e.cpu_parent = stack[-1]
            stack[-1].cpu_children.append(e)
            stack[-1]._child_cpu += e.cpu_time_total
        stack.append(e)
    by_thread: dict = {}
    for e in events:
        by_thread.setdefault(e.thread, []).append(e)
    for tid, when, device_type, nbytes, _addr in recorder.memory:
        owner = _innermost(by_thread.get(tid, ()), (when - base) / 1e3)
        if owner is None:
            continue
        if device_type == "cpu":
            owner.self_cpu_memory_usage += nbytes
        else:
            owner.self_device_memory_usage += nbytes
    events.sort(key=lambda e: e.start_us)
    return EventList(events, use_device=recorder.cuda, profile_memory=recorder.profile_memory)


def _innermost(events, t_us: float):
    found = None
    for e in events:
        if e.start_us <= t_us <= e.end_us and (found is None or e.start_us >= found.start_us):
            found = e
    return found


# --- the table ------------------------------------------------------------------------------------------
def _format_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes: int) -> str:
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes / gb:.2f} Gb"
    if abs(nbytes) >= mb:
        return f"{nbytes / mb:.2f} Mb"
    if abs(nbytes) >= kb:
        return f"{nbytes / kb:.2f} Kb"
    return f"{nbytes} B"


def _percent(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "0.00%"


def _table(rows, everything, *, header, shapes, use_device, memory, name_width, shapes_width) -> str:
    self_cpu_total = sum(e.self_cpu_time_total for e in everything)
    self_device_total = sum(e.self_device_time_total for e in everything)
    columns = [("Self CPU %", lambda e: _percent(e.self_cpu_time_total, self_cpu_total)),
               ("Self CPU", lambda e: _format_time(e.self_cpu_time_total)),
               ("CPU total %", lambda e: _percent(e.cpu_time_total, self_cpu_total)),
               ("CPU total", lambda e: _format_time(e.cpu_time_total)),
               ("CPU time avg", lambda e: _format_time(e.cpu_time_total / max(e.count, 1)))]
    if use_device:
        columns += [("Self CUDA", lambda e: _format_time(e.self_device_time_total)),
                    ("Self CUDA %", lambda e: _percent(e.self_device_time_total, self_device_total)),
                    ("CUDA total", lambda e: _format_time(e.device_time_total)),
                    ("CUDA time avg", lambda e: _format_time(e.device_time_total / max(e.count, 1)))]
    if memory:
        columns += [("CPU Mem", lambda e: _format_memory(e.cpu_memory_usage)),
                    ("Self CPU Mem", lambda e: _format_memory(e.self_cpu_memory_usage))]
        if use_device:
            columns += [("CUDA Mem", lambda e: _format_memory(e.device_memory_usage)),
                        ("Self CUDA Mem", lambda e: _format_memory(e.self_device_memory_usage))]
    columns.append(("# of Calls", lambda e: str(e.count)))
    name_w = min(max([len(e.key) for e in rows] + [4]) + 4, name_width)
    widths = [name_w] + [12] * len(columns)
    titles = ["Name"] + [c[0] for c in columns]
    if shapes:
        widths.append(min(max([len(str(e.input_shapes)) for e in rows] + [12]) + 4, shapes_width))
        titles.append("Input Shapes")

    def line(cells):
        return "".join(f"{c:>{w}}  " for c, w in zip(cells, widths))

    sep = "".join("-" * w + "  " for w in widths)
    out = [header] if header else []
    out += [sep, line(titles), sep]
    for e in rows:
        name = e.key if len(e.key) <= name_w else e.key[:name_w - 3] + "..."
        cells = [name] + [fn(e) for _, fn in columns]
        if shapes:
            s = str(e.input_shapes)
            cells.append(s if len(s) <= widths[-1] else s[:widths[-1] - 3] + "...")
        out.append(line(cells))
    out.append(sep)
    out.append(f"Self CPU time total: {_format_time(self_cpu_total)}")
    if use_device:
        out.append(f"Self CUDA time total: {_format_time(self_device_total)}")
    return "\n".join(out) + "\n"
