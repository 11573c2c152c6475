"""Adafactor and Muon against torch 2.13's: several steps of parameters, state and state_dict, argument checks."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.optim as optim

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(21)


def _run(name, shapes, dtype=np.float32, steps=5, **kwargs):
    """Step torch's and flambeau's optimizer with the same gradients; returns both optimizers and parameters."""
    init = [RNG.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[RNG.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]
    tp = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    fp = [fl.tensor(a.copy(), requires_grad=True) for a in init]
    to, fo = getattr(torch.optim, name)(tp, **kwargs), getattr(optim, name)(fp, **kwargs)
    for g in grads:
        for p, a in zip(tp, g):
            p.grad = torch.tensor(a)
        for p, a in zip(fp, g):
            p.grad = fl.tensor(a)
        to.step()
        fo.step()
    return to, fo, tp, fp


def _assert_same(tp, fp, rtol):
    for a, b in zip(fp, tp):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("kwargs", [{}, {"lr": 0.1, "weight_decay": 0.1, "maximize": True, "d": 2.0},
                                    {"eps": (1e-20, 1e-2), "beta2_decay": -0.5}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adafactor_matches_torch(kwargs, dtype):
    to, fo, tp, fp = _run("Adafactor", [(5, 4), (3,), (2, 3, 4)], dtype, **kwargs)
    _assert_same(tp, fp, 1e-6 if dtype == np.float32 else 1e-12)
    ours, theirs = fo.state_dict(), to.state_dict()
    assert sorted(ours["param_groups"][0]) == sorted(theirs["param_groups"][0])
    for i in range(3):
        assert sorted(ours["state"][i]) == sorted(theirs["state"][i])
        for key, value in theirs["state"][i].items():
            np.testing.assert_allclose(ours["state"][i][key].numpy(), value.numpy(), rtol=1e-5)
    fo2 = optim.Adafactor([fl.tensor(p.detach().numpy()) for p in fp])
    fo2.load_state_dict(ours)
    assert fo2.state_dict()["state"][0]["step"].item() == 5


def test_adafactor_checks():
    p = [fl.zeros(2, requires_grad=True)]
    for kwargs, match in (({"lr": -1}, "Learning rate"), ({"beta2_decay": 0.5}, "beta2_decay"),
                          ({"eps": (-1, 1e-3)}, "epsilon1"), ({"d": 0.5}, "Clipping threshold"),
                          ({"weight_decay": -1}, "weight_decay")):
        with pytest.raises(ValueError, match=match):
            optim.Adafactor(p, **kwargs)


@pytest.mark.parametrize("kwargs", [{}, {"nesterov": False, "adjust_lr_fn": "match_rms_adamw", "lr": 0.02},
                                    {"weight_decay": 0.0, "momentum": 0.5, "ns_steps": 3}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_muon_matches_torch(kwargs, dtype):
    to, fo, tp, fp = _run("Muon", [(5, 4), (3, 6)], dtype, **kwargs)
    _assert_same(tp, fp, 1e-6 if dtype == np.float32 else 1e-12)
    assert sorted(fo.state_dict()["state"][0]) == ["momentum_buffer"]
    assert fo.defaults["ns_coefficients"] == to.defaults["ns_coefficients"]


def test_muon_checks():
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        optim.Muon([fl.zeros(3, requires_grad=True)])
    with pytest.raises(ValueError, match="Adjust learning rate function"):
        optim.Muon([fl.zeros(2, 2, requires_grad=True)], adjust_lr_fn="bad")
    with pytest.raises(ValueError, match="momentum"):
        optim.Muon([fl.zeros(2, 2, requires_grad=True)], momentum=-1)


@pytest.mark.parametrize("name", ["Adafactor", "Muon"])
def test_a_grad_of_another_shape_is_refused_before_any_update(name):
    p, q = fl.randn(3, 4, requires_grad=True), fl.randn(2, 2, requires_grad=True)
    opt = getattr(optim, name)([p, q], weight_decay=0.1)
    p.grad, q.grad = fl.randn(3, 4), fl.randn(2, 2)
    q.data = fl.zeros(3, 3)  # a stale gradient: the parameter replaced after backward
    before = p.detach().numpy().copy()
    with pytest.raises(RuntimeError, match=rf"{name}\.step\(\): the grad of param_groups\[0\]\['params'\]\[1\] "
                                           r"has the wrong shape"):
        opt.step()
    assert np.array_equal(p.detach().numpy(), before) and not any(opt.state.values())
