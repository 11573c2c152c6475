"""Backward in the profiler: a span per autograd node, linked to the forward operator that made it."""

from __future__ import annotations

import json

import flambeau as fl
import flambeau.autograd as autograd
from flambeau.autograd import _engine
from flambeau.profiler import profile


def test_backward_nodes_are_spans_linked_to_their_forward_operators(tmp_path):
    x = fl.ones(3, requires_grad=True)
    with profile() as prof:
        (x.exp() * 2).sum().backward()
    names = [e.name for e in prof.events()]
    for node in ("SumBackward0", "MulBackward0", "ExpBackward0"):
        assert f"autograd::engine::evaluate_function: {node}" in names
    forward = {e.sequence_nr: e.name for e in prof.events() if e.kind == "cpu_op" and e.sequence_nr >= 0}
    backward = {e.sequence_nr: e.name for e in prof.events() if e.kind == "autograd"}
    assert forward[backward_seq(backward, "ExpBackward0")] == "flambeau::exp"
    trace = json.load(open(prof.export_chrome_trace(str(tmp_path / "t.json"))))
    flows = [e for e in trace["traceEvents"] if e.get("cat") == "fwdbwd"]
    starts = {e["id"] for e in flows if e["ph"] == "s"}
    ends = {e["id"] for e in flows if e["ph"] == "f"}
    assert starts == ends and len(starts) >= 3


def backward_seq(backward: dict, node: str) -> int:
    return next(seq for seq, name in backward.items() if name.endswith(node))


def test_engine_is_restored_and_legacy_spelling_works():
    x = fl.ones(2, requires_grad=True)
    with autograd.profiler.profile(record_shapes=True) as prof:
        (x * x).sum().backward()
    assert _engine._call_node is autograd.profiler._original_call_node
    assert any(e.key == "flambeau::mul" for e in prof.key_averages())
    with autograd.profiler.profile(enabled=False) as off:
        x.sum()
    assert off.current_action is not None
