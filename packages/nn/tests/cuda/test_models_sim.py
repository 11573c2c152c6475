"""The seven models of benchmarks/train.py train on CUDA exactly as on the CPU (issue: every model on a GPU).

Each model is built small (the simulator runs every GPU thread in Python), copied to the device,
and trained for two steps beside its CPU twin from the same parameters and batch: losses and
parameters must agree step by step within float32 tolerance. The same run checks the two promises
of the CUDA backend: no host synchronisation inside a step (only the ``.item()`` that reads the
loss), and no raw device allocation after the first step (the caching allocator serves them all).
"""

from __future__ import annotations

import copy
import os
import sys

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn  # noqa: F401
import flambeau.optim  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import train as bench  # noqa: E402

# model name -> (builder keyword arguments, batch maker): tiny versions of the benchmark models
TINY = {
    "mlp": ({"sizes": (8, 6, 6, 3)}, lambda rng: (rng.standard_normal((4, 8), dtype=np.float32),
                                                  rng.integers(0, 3, 4))),
    "lenet": ({"channels": (2, 3), "hidden": 5, "image": 8, "num_classes": 3},
              lambda rng: (rng.standard_normal((2, 1, 8, 8), dtype=np.float32), rng.integers(0, 3, 2))),
    "resnet18": ({"widths": (2, 2, 3, 3), "num_classes": 3},
                 lambda rng: (rng.standard_normal((2, 3, 8, 8), dtype=np.float32), rng.integers(0, 3, 2))),
    # the first two stages: the stem, an inverted residual with and without its skip, depthwise convs, ReLU6
    "mobilenet_v2": ({"width": 0.1, "num_classes": 3, "stages": ((1, 16, 1, 1), (6, 24, 2, 2))},
                     lambda rng: (rng.standard_normal((2, 3, 8, 8), dtype=np.float32), rng.integers(0, 3, 2))),
    "lstm_lm": ({"vocab": 7, "hidden": 4, "layers": 2},
                lambda rng: (rng.integers(0, 7, (3, 2)), rng.integers(0, 7, 6))),
    "ncf": ({"users": 5, "items": 6, "dim": 4},
            lambda rng: (np.stack([rng.integers(0, 5, 4), rng.integers(0, 6, 4)], 1),
                         rng.integers(0, 2, 4).astype(np.float32))),
    "gpt": ({"vocab": 7, "context": 4, "d_model": 8, "heads": 2, "layers": 1},
            lambda rng: (rng.integers(0, 7, (2, 4)), rng.integers(0, 7, 8))),
}
STEPS = 2  # the second step shows no raw allocation; the simulator is slow


def _no_dropout(model):
    # CPU and CUDA draw from different generators (as in torch): dropout off, BatchNorm still training
    for m in model.modules():
        if isinstance(m, fl.nn.Dropout):
            m.p = 0.0


def _run(model, spec, x, y, device):
    model = model.to(device)
    opt = getattr(fl.optim, spec.optimizer)(model.parameters(), **spec.optimizer_args)
    step = bench.train_step(fl, spec, model, opt, fl.from_numpy(x).to(device), fl.from_numpy(y).to(device))
    losses, params, syncs, mallocs = [], [], [], []
    for _ in range(STEPS):
        before_sync = fl.cuda.host_sync_count() if device == "cuda" else 0
        before_alloc = fl.cuda.memory_stats().get("num_device_alloc", 0) if device == "cuda" else 0
        loss = step()
        if device == "cuda":
            syncs.append(fl.cuda.host_sync_count() - before_sync)
            mallocs.append(fl.cuda.memory_stats().get("num_device_alloc", 0) - before_alloc)
        losses.append(loss.item())
        params.append([p.detach().cpu().numpy().copy() for p in model.parameters()])
    return losses, params, syncs, mallocs


@pytest.mark.parametrize("name", list(TINY))
def test_model_trains_on_cuda_as_on_cpu(name):
    kwargs, make_batch = TINY[name]
    spec = bench.MODELS[name]
    fl.manual_seed(0)
    cpu_model = spec.builder(fl, **kwargs)
    _no_dropout(cpu_model)
    cuda_model = copy.deepcopy(cpu_model)
    x, y = make_batch(np.random.default_rng(0))
    want_losses, want_params, _, _ = _run(cpu_model, spec, x, y, "cpu")
    got_losses, got_params, syncs, mallocs = _run(cuda_model, spec, x, y, "cuda")
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-4, atol=1e-5)
    # Adam moves every element by about lr whatever its gradient's size, so an element whose gradient is
    # rounding noise (different summation orders on the two devices) may move differently by up to lr:
    # there each element is held to lr, and the whole tensor to a norm-relative 1e-3 (SGD: 1e-4), plus
    # an absolute floor for parameters near zero.
    adaptive = spec.optimizer in ("Adam", "AdamW")
    atol = spec.optimizer_args.get("lr", 1e-3) if adaptive else 1e-5
    for step, (got, want) in enumerate(zip(got_params, want_params)):
        for i, (g, w) in enumerate(zip(got, want)):
            msg = f"{name}: parameter {i} after step {step}"
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, err_msg=msg)
            bound = (1e-3 if adaptive else 1e-4) * np.linalg.norm(w) + 1e-5 * np.sqrt(w.size)
            assert np.linalg.norm(g - w) <= bound, msg
    assert syncs == [0] * STEPS, f"{name}: host synchronisations inside a step: {syncs}"
    assert mallocs[1:] == [0] * (STEPS - 1), f"{name}: raw device allocations per step: {mallocs}"
