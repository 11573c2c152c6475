"""Chrome trace export (the JSON that Perfetto and chrome://tracing open), as torch.profiler writes it.

The file is ``{"schemaVersion": 1, "traceEvents": [...], ...}`` with the Trace Event Format's
events: ``"M"`` metadata naming the process and its threads; ``"X"`` complete events, one per span
(``cat`` ``cpu_op``, ``user_annotation``, ``autograd``, ``optimizer``, ``dataloader``; ``ts`` and
``dur`` in microseconds; ``args`` with torch's keys ``External id``, ``Input Dims``, ``Input type``,
``Sequence number``); for CUDA, one ``"X"`` event per operator's device work on a process row of
its own (``cat`` ``kernel``, pid ``GPU <i>``, tid the stream); ``"i"`` instant events named
``[memory]`` for allocations and frees with torch's ``Bytes``/``Total Allocated``/``Addr``/``Device
Type``; and ``"s"``/``"f"`` flow events (``cat`` ``fwdbwd``) from a forward operator to the autograd
node that differentiates it.
"""

from __future__ import annotations

import json
import os
import socket
import time

__all__ = ["chrome_trace", "write_trace", "tensorboard_trace_handler"]

_DEVICE_TYPE = {"cpu": 0, "cuda": 1}


def chrome_trace(recorder, path: str = "") -> dict:
    """The trace of a finished recorder, as a JSON-ready dict."""
    pid = recorder.pid
    base_ns = recorder.start_ns
    wall_base_us = getattr(recorder, "wall_start_us", 0.0)

    def us(t_ns: int) -> float:
        return round(wall_base_us + (t_ns - base_ns) / 1e3, 3)

    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}},
              {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}}]
    threads = sorted({s[2] for s in recorder.spans} | {m[0] for m in recorder.memory})
    for n, tid in enumerate(threads):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": f"thread {n} ({'main' if n == 0 else 'worker'})"}})
    flows = []
    for i, (kind, name, tid, start, end, extra) in enumerate(sorted(recorder.spans, key=lambda s: (s[3], -s[4]))):
        args = {"External id": i}
        if extra:
            args.update({k: v for k, v in extra.items() if not k.startswith("device_")})
        events.append({"ph": "X", "cat": kind, "name": name, "pid": pid, "tid": tid, "ts": us(start),
                       "dur": round((end - start) / 1e3, 3), "args": args})
        seq = (extra or {}).get("Sequence number")
        if seq is not None:  # a forward operator starts the flow, its autograd node ends it
            phase = "f" if kind == "autograd" else "s"
            flows.append({"ph": phase, "cat": "fwdbwd", "name": "fwdbwd", "id": seq, "pid": pid, "tid": tid,
                          "ts": us(start), **({"bp": "e"} if phase == "f" else {})})
    ends = {f["id"] for f in flows if f["ph"] == "f"}
    events += [f for f in flows if f["id"] in ends]  # only complete forward-backward pairs
    devices = set()
    for name, _events, host_start, extra in recorder.device_spans:
        if "device_us" not in extra:
            continue
        index = extra.get("device_index", 0)
        devices.add(index)
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": f"GPU {index}",
                       "tid": f"stream {extra.get('device_stream', 0)}",
                       "ts": round(wall_base_us + extra["device_start_us"], 3), "dur": round(extra["device_us"], 3),
                       "args": {"device": index, "stream": extra.get("device_stream", 0),
                                "launched at (host us)": us(host_start)}})
    for index in sorted(devices):
        events.append({"ph": "M", "name": "process_name", "pid": f"GPU {index}", "tid": 0,
                       "args": {"name": f"GPU {index}"}})
    totals: dict = {}
    for tid, when, device_type, nbytes, addr in recorder.memory:
        totals[device_type] = totals.get(device_type, 0) + nbytes
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid, "tid": tid,
                       "ts": us(when), "args": {"Total Reserved": 0, "Total Allocated": totals[device_type],
                                                "Bytes": nbytes, "Addr": addr,
                                                "Device Type": _DEVICE_TYPE.get(device_type, 0),
                                                "Device Id": -1 if device_type == "cpu" else 0}})
    return {"schemaVersion": 1, "deviceProperties": [], "record_shapes": int(recorder.record_shapes),
            "profile_memory": int(recorder.profile_memory), "host_name": socket.gethostname(),
            "displayTimeUnit": "ms", "baseTimeNanoseconds": int(wall_base_us * 1e3),
            "traceEvents": events, "traceName": path}


def write_trace(recorder, path: str) -> str:
    """Write the trace of ``recorder`` to ``path`` (gzip-compressed if it ends in ``.gz``); return path."""
    data = json.dumps(chrome_trace(recorder, path))
    if path.endswith(".gz"):
        import gzip

        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
    return path


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, use_gzip: bool = False):
    """An ``on_trace_ready`` callable writing each trace to ``dir_name`` as
    ``<worker_name>.<time in ns>.pt.trace.json[.gz]`` (what TensorBoard's profiler plugin reads; nanoseconds,
    as torch, so that two traces ready within one millisecond do not overwrite each other)."""
    def handler(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        suffix = ".pt.trace.json.gz" if use_gzip else ".pt.trace.json"
        prof.export_chrome_trace(os.path.join(dir_name, f"{name}.{time.time_ns()}{suffix}"))

    return handler
