"""flambeau.profiler against torch.profiler where they are comparable: counts per operator, nesting,
table columns, the schedule, and the Chrome trace's schema; and the profiler costs nothing when off."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops._registry import OPS
from flambeau.profiler import ProfilerAction, profile, record_function, schedule, tensorboard_trace_handler

torch = pytest.importorskip("torch")

COMPARABLE = ("add", "mul", "exp", "relu", "sum", "neg")  # operators torch runs without nested aten calls


def _program(lib, x):
    y = lib.relu(x * 2 + 1)
    z = lib.exp(-y)
    return (z + y).sum() + x.mul(3).sum()


def _fl_profile(**kwargs):
    x = fl.ones(4, 5)
    with profile(**kwargs) as prof:
        with record_function("block"):
            _program(fl, x)
    return prof


def test_counts_per_operator_match_torch():
    prof = _fl_profile()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as tprof:
        _program(torch, torch.ones(4, 5))
    ours = {e.key: e.count for e in prof.key_averages()}
    theirs = {e.key: e.count for e in tprof.key_averages()}
    for name in COMPARABLE:
        assert ours.get(f"flambeau::{name}", 0) == theirs.get(f"aten::{name}", 0), name


def test_spans_nest_inside_record_function_and_self_time_excludes_children():
    prof = _fl_profile()
    block = next(e for e in prof.events() if e.name == "block")
    names = sorted(c.name for c in block.cpu_children)
    assert names.count("flambeau::mul") == 2 and "flambeau::exp" in names
    assert all(c.cpu_parent is block for c in block.cpu_children)
    assert block.self_cpu_time_total == pytest.approx(
        block.cpu_time_total - sum(c.cpu_time_total for c in block.cpu_children))
    for c in block.cpu_children:
        assert block.start_us <= c.start_us and c.end_us <= block.end_us


def _titles(table: str) -> list:
    header = table.splitlines()[1]
    return [t for t in header.split("  ") if t.strip()]


def test_table_columns_are_torchs():
    prof = _fl_profile(record_shapes=True, profile_memory=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                profile_memory=True) as tprof:
        _program(torch, torch.ones(4, 5))
    for group in (False, True):
        ours = prof.key_averages(group_by_input_shape=group).table(sort_by="self_cpu_time_total", row_limit=5)
        theirs = tprof.key_averages(group_by_input_shape=group).table(sort_by="self_cpu_time_total", row_limit=5)
        assert [t.strip() for t in _titles(ours)] == [t.strip() for t in _titles(theirs)]
        assert ours.strip().splitlines()[-1].startswith("Self CPU time total: ")
    rows = prof.key_averages(group_by_input_shape=True)
    mul = [r for r in rows if r.key == "flambeau::mul"]  # x * 2 and x.mul(3): one shape, one row
    assert len(mul) == 1 and mul[0].count == 2 and str(mul[0].input_shapes) == "[[4, 5], []]"


def test_sort_and_row_limit():
    prof = _fl_profile()
    table = prof.key_averages().table(sort_by="count", row_limit=2)
    lines = table.splitlines()
    body = lines[3:lines.index(lines[0], 3)]
    assert len(body) == 2
    assert body[0].split()[0] == "flambeau::add" and body[0].split()[-1] == "3"  # x*2 + 1, z + y, sum + sum


def test_memory_is_attributed_to_the_allocating_operator():
    x = fl.ones(1000)
    with profile(profile_memory=True) as prof:
        y = x * 2  # noqa: F841 - kept alive: no free inside the profile
    mul = next(e for e in prof.key_averages() if e.key == "flambeau::mul")
    assert mul.self_cpu_memory_usage == 4000 and mul.cpu_memory_usage == 4000


def test_chrome_trace_schema_and_nesting(tmp_path):
    prof = _fl_profile(record_shapes=True, profile_memory=True)
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    with open(path) as f:
        data = json.load(f)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as tprof:
        _program(torch, torch.ones(4, 5))
    tprof.export_chrome_trace(str(tmp_path / "torch.json"))
    with open(tmp_path / "torch.json") as f:
        reference = json.load(f)
    assert {"schemaVersion", "traceEvents", "displayTimeUnit"} <= set(data) & set(reference)
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    ref_span = next(e for e in reference["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    for e in spans:
        assert set(ref_span) - {"args"} <= set(e), e
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    op = next(e for e in spans if e["name"] == "flambeau::mul")
    assert op["cat"] == "cpu_op" and op["args"]["Input Dims"] == [[4, 5], []]
    assert {"Input Dims", "Input type", "External id"} <= set(ref_span["args"]) & set(op["args"])
    by_thread: dict = {}
    for e in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):  # slices of a thread nest or are disjoint
        stack = by_thread.setdefault(e["tid"], [])
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            assert e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + 1e-3
        stack.append(e)
    memory = [e for e in data["traceEvents"] if e["ph"] == "i"]
    assert memory and all(e["name"] == "[memory]" and "Bytes" in e["args"] for e in memory)


def test_schedule_matches_torch_and_hands_over_each_cycle(tmp_path):
    kwargs = {"wait": 1, "warmup": 1, "active": 2, "repeat": 2, "skip_first": 1}
    ours, theirs = schedule(**kwargs), torch.profiler.schedule(**kwargs)
    assert [ours(i).name for i in range(14)] == [theirs(i).name for i in range(14)]
    ready = []
    handler = tensorboard_trace_handler(str(tmp_path), worker_name="w")
    with profile(schedule=schedule(wait=1, warmup=1, active=2), on_trace_ready=lambda p: (ready.append(
            sorted({e.name for e in p.events() if e.name.startswith("ProfilerStep")})), handler(p))) as prof:
        x = fl.ones(3)
        for _ in range(8):
            x = x + 1
            prof.step()
    assert ready[0] == ["ProfilerStep#2", "ProfilerStep#3"] and ready[1] == ["ProfilerStep#6", "ProfilerStep#7"]
    assert prof.current_action is ProfilerAction.NONE
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == len(ready) and all(f.startswith("w.") and f.endswith(".pt.trace.json") for f in files)


def test_other_threads_are_recorded_on_their_own_rows():
    x = fl.ones(3)
    with profile() as prof:
        t = threading.Thread(target=lambda: x.exp())
        t.start()
        t.join()
        x.neg()
    threads = {e.name: e.thread for e in prof.events()}
    assert threads["flambeau::exp"] != threads["flambeau::neg"]


def test_record_function_as_decorator_and_off_without_profile():
    @record_function("helper")
    def helper(t):
        return t * 2

    helper(fl.ones(2))  # no profile: nothing recorded, nothing fails
    with profile() as prof:
        helper(helper(fl.ones(2)))
    assert sum(e.name == "helper" for e in prof.events()) == 2


def test_nothing_stays_instrumented_after_the_profile():
    with profile():
        fl.ones(2) + 1
    assert fl.add is OPS["add"].bindings[0] and fl.Tensor.add is OPS["add"].bindings[1]
    assert fl.Tensor.__add__ is OPS["add"].dunders["__add__"]
    assert fl.Tensor.add_ is OPS["add"].inplace_fn
    with pytest.raises(RuntimeError, match="already enabled"):
        with profile():
            with profile():
                pass
    np.testing.assert_array_equal((fl.ones(2) + 1).numpy(), [2, 2])
