"""The profiler on CUDA: each operator on device tensors gets a device-side slice on its GPU's row."""

from __future__ import annotations

import json

import flambeau as fl
from flambeau.profiler import ProfilerActivity, profile


def test_device_rows_and_cuda_columns(tmp_path):
    x = fl.ones(8, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        y = (x * 2).exp().sum()
    y.item()
    table = prof.key_averages().table(sort_by="cuda_time_total")
    assert "Self CUDA" in table and "CUDA total" in table and "Self CUDA time total" in table
    trace = json.load(open(prof.export_chrome_trace(str(tmp_path / "t.json"))))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert {e["name"] for e in kernels} == {"flambeau::mul", "flambeau::exp", "flambeau::sum"}
    assert all(e["pid"] == "GPU 0" and e["dur"] >= 0 for e in kernels)
    assert any(e["ph"] == "M" and e["pid"] == "GPU 0" for e in trace["traceEvents"])
