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


def test_layers_record_their_operators_forward_and_backward():
    # flambeau.nn holds operators as its own globals (conv2d = fl.conv2d) and static methods: recorded too
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(8, 3))
    with profile() as prof:
        nn.functional.cross_entropy(model(fl.randn(2, 1, 6, 6)), fl.tensor([0, 1])).backward()
    top = [e.name for e in prof.events() if e.cpu_parent is None]
    for name in ("flambeau::conv2d", "flambeau::batch_norm", "flambeau::relu", "flambeau::max_pool2d",
                 "flambeau::linear", "flambeau::cross_entropy"):
        assert name in top, name
    children = {e.name.split(": ")[-1]: [c.name for c in e.cpu_children] for e in prof.events()
                if e.kind == "autograd"}
    assert children["BatchNormBackward0"] == ["flambeau::batch_norm_backward"]
    assert children["CrossEntropyBackward0"] == ["flambeau::cross_entropy_backward"]
    assert children["ConvolutionBackward0"] == ["flambeau::convolution_backward"]  # one call for its gradients
    assert nn.functional.conv2d is fl._ops.OPS["conv2d"].bindings[0]  # put back
