"""Fused optimizer updates on CUDA equal the CPU's fused kernels (Note [Multi-tensor CUDA updates]).

Under the simulator each parameter gets its own launch of the family's element function; on a GPU
the whole group is one multi-tensor launch (the test marked ``gpu`` checks that path against the CPU).
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.optim  # noqa: F401
from flambeau.optim import _cuda_kernels

CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "nesterov": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1, "maximize": True}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}),
    ("Adagrad", {"lr": 0.1}),
    ("Adadelta", {"lr": 1.0}),
    ("Adamax", {"lr": 0.01}),
    ("NAdam", {"lr": 0.01}),
    ("RAdam", {"lr": 0.01}),
]
SHAPES = [(3, 4), (5,), (1,)]


def _train(name, kwargs, device, dtype, steps=3):
    rng = np.random.default_rng(0)
    params = [fl.tensor(rng.standard_normal(s), dtype=dtype, device=device, requires_grad=True) for s in SHAPES]
    opt = getattr(fl.optim, name)(params, **kwargs)
    for k in range(steps):
        for j, p in enumerate(params):
            p.grad = fl.tensor(np.random.default_rng(10 * k + j).standard_normal(SHAPES[j]), dtype=dtype,
                               device=device)
        opt.step()
    return [p.detach().cpu().numpy() for p in params]


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
@pytest.mark.parametrize("name, kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_cuda_update_equals_cpu_fused_update(name, kwargs, dtype):
    want = _train(name, kwargs, "cpu", dtype)
    got = _train(name, kwargs, "cuda", dtype)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6 if dtype is fl.float32 else 1e-12, atol=1e-7)


def test_a_group_is_queued_then_flushed_without_sync(monkeypatch):
    launches = []
    real = _cuda_kernels.flush
    monkeypatch.setattr(_cuda_kernels, "flush", lambda: (launches.append(len(_cuda_kernels._pending)), real()))
    params = [fl.ones(4, device="cuda", requires_grad=True) for _ in range(5)]
    for p in params:
        p.grad = fl.ones(4, device="cuda")
    opt = fl.optim.Adam(params, lr=0.1)
    before = fl.cuda.host_sync_count()
    opt.step()
    assert fl.cuda.host_sync_count() == before
    assert launches == [1]  # five parameters in lockstep: one queued launch
    assert not _cuda_kernels._pending
    np.testing.assert_allclose(params[0].detach().cpu().numpy(), 0.9, rtol=1e-6)


@pytest.mark.gpu
def test_multi_tensor_path_on_a_gpu():
    for name, kwargs in CASES:
        want = _train(name, kwargs, "cpu", fl.float32)
        got = _train(name, kwargs, "cuda", fl.float32)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
