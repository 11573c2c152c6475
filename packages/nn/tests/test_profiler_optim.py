"""Optimizer steps in the profiler: torch's ``Optimizer.step#<Class>.step`` spans around their updates."""

from __future__ import annotations

import flambeau as fl
import flambeau.nn as nn
import flambeau.optim as optim
from flambeau.profiler import profile


def test_step_and_zero_grad_are_spans_and_are_put_back():
    model = nn.Linear(3, 2)
    opt = optim.Adam(model.parameters(), lr=0.1)
    with profile() as prof:
        for _ in range(2):
            opt.zero_grad()
            model(fl.ones(4, 3)).sum().backward()
            opt.step()
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts["Optimizer.step#Adam.step"] == 2 and counts["Optimizer.zero_grad#Adam.zero_grad"] == 2
    assert not getattr(optim.Adam.step, "_profiled", False)
    assert not getattr(optim.Optimizer.zero_grad, "_profiled", False)
