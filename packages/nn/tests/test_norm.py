"""BatchNorm1d/2d/3d, LayerNorm, GroupNorm and nn.functional's normalisations against torch.

Each module is built in flambeau and torch with the same parameters; outputs, input and parameter
gradients and running statistics are compared over several training steps and in evaluation mode.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}
FL_DTYPE = {np.float32: fl.float32, np.float64: fl.float64}
TH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}


def close(x, y, dtype):
    x = x.detach().numpy() if isinstance(x, fl.Tensor) else x
    y = y.detach().numpy() if isinstance(y, torch.Tensor) else y
    tol = TOL[dtype]
    np.testing.assert_allclose(x, y, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, float(np.abs(y).max(initial=0))))


def copy_params(ours, theirs):
    """torch's parameters and buffers into our module (random affine parameters to make the test bite)."""
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, dtype=p.dtype))
    for name, p in theirs.named_parameters():
        getattr(ours, name).data = fl.from_numpy(p.detach().numpy().copy())
    for name, b in theirs.named_buffers():
        getattr(ours, name).copy_(fl.from_numpy(b.numpy().copy()))


def step(ours, theirs, shape, dtype, shift=1.0):
    """One forward and backward through both modules with the same input; compare everything."""
    x = (RNG.standard_normal(shape) * 2 + shift).astype(dtype)
    go = RNG.standard_normal(shape).astype(dtype)
    fx = fl.from_numpy(x.copy()).requires_grad_(True)
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    y, ty = ours(fx), theirs(tx)
    close(y, ty, dtype)
    y.backward(fl.from_numpy(go.copy()))
    ty.backward(torch.from_numpy(go.copy()))
    close(fx.grad, tx.grad, dtype)
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        close(p.grad, tp.grad, dtype)
    for (name, b), (tname, tb) in zip(ours.named_buffers(), theirs.named_buffers()):
        assert name == tname
        if b.dtype.is_floating_point:
            close(b, tb, dtype)
        else:
            assert b.item() == tb.item()
    ours.zero_grad()
    theirs.zero_grad()


BN = [("BatchNorm1d", (8, 4)), ("BatchNorm1d", (4, 4, 6)), ("BatchNorm2d", (3, 4, 5, 5)),
      ("BatchNorm3d", (2, 4, 2, 3, 3))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls,shape", BN)
@pytest.mark.parametrize("options", [{}, {"momentum": None}, {"affine": False}, {"track_running_stats": False},
                                     {"momentum": 0.3, "eps": 1e-3}, {"bias": False}], ids=str)
def test_batchnorm_train_and_eval(dtype, cls, shape, options):
    theirs = getattr(torch.nn, cls)(shape[1], dtype=TH_DTYPE[dtype], **options)
    ours = getattr(nn, cls)(shape[1], dtype=FL_DTYPE[dtype], **options)
    copy_params(ours, theirs)
    for i in range(3):  # running statistics over several steps
        step(ours, theirs, shape, dtype, shift=float(i))
    ours.eval()
    theirs.eval()
    step(ours, theirs, shape, dtype)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs).replace("torch.float64", "flambeau.float64")


def test_batchnorm_initial_state_repr_and_resets():
    m = nn.BatchNorm2d(3)
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(3))
    np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(3))
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert repr(m) == repr(torch.nn.BatchNorm2d(3))
    m(fl.randn(4, 3, 2, 2) + 5)
    assert m.num_batches_tracked.item() == 1 and m.running_mean.numpy().min() > 0.1
    m.reset_running_stats()
    np.testing.assert_array_equal(m.running_mean.numpy(), np.zeros(3))
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(3))
    assert m.num_batches_tracked.item() == 0
    with fl.no_grad():
        m.weight.fill_(3.0)
    m.reset_parameters()
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(3))
    n = nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    assert list(n.state_dict()) == [] and n.weight is None and n.running_mean is None


def test_batchnorm_loads_version1_state_dict_without_batch_count():
    m = nn.BatchNorm1d(3)
    state = OrderedDict((k, v) for k, v in nn.BatchNorm1d(3).state_dict().items() if k != "num_batches_tracked")
    state._metadata = {"": {"version": 1}}  # as torch's state dicts carry it
    m.load_state_dict(state)
    assert m.num_batches_tracked.item() == 0


def test_batchnorm_eval_without_running_stats_uses_batch_stats():
    m = nn.BatchNorm1d(3, track_running_stats=False).eval()
    x = fl.randn(6, 3) * 3 + 2
    y = m(x).detach().numpy()
    np.testing.assert_allclose(y.mean(0), 0, atol=1e-5)


def test_batchnorm_input_dim_errors():
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.BatchNorm1d(3)(fl.randn(2, 3, 2, 2))
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(fl.randn(2, 3, 2))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(fl.randn(1, 3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("normalized,shape", [(5, (3, 5)), ((4, 5), (2, 3, 4, 5))], ids=str)
@pytest.mark.parametrize("options", [{}, {"elementwise_affine": False}, {"bias": False}, {"eps": 1e-3}], ids=str)
def test_layernorm(dtype, normalized, shape, options):
    theirs = torch.nn.LayerNorm(normalized, dtype=TH_DTYPE[dtype], **options)
    ours = nn.LayerNorm(normalized, dtype=FL_DTYPE[dtype], **options)
    copy_params(ours, theirs)
    step(ours, theirs, shape, dtype)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("groups,channels,shape", [(2, 8, (4, 8)), (3, 6, (2, 6, 5)), (1, 4, (2, 4, 3, 3))], ids=str)
@pytest.mark.parametrize("options", [{}, {"affine": False}, {"bias": False}], ids=str)
def test_groupnorm(dtype, groups, channels, shape, options):
    theirs = torch.nn.GroupNorm(groups, channels, dtype=TH_DTYPE[dtype], **options)
    ours = nn.GroupNorm(groups, channels, dtype=FL_DTYPE[dtype], **options)
    copy_params(ours, theirs)
    step(ours, theirs, shape, dtype)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (3, 4, 6)), ("InstanceNorm2d", (2, 4, 3, 3)),
                                       ("InstanceNorm2d", (4, 3, 3)), ("InstanceNorm3d", (2, 4, 2, 2, 3))], ids=str)
@pytest.mark.parametrize("options", [{}, {"affine": True}, {"track_running_stats": True, "momentum": 0.3},
                                     {"affine": True, "track_running_stats": True, "momentum": None}], ids=str)
def test_instancenorm(cls, shape, options):
    theirs = getattr(torch.nn, cls)(4, dtype=torch.float64, **options)
    ours = getattr(nn, cls)(4, dtype=fl.float64, **options)
    copy_params(ours, theirs)
    for i in range(2):
        step(ours, theirs, shape, np.float64, shift=float(i))
    ours.eval()
    theirs.eval()
    step(ours, theirs, shape, np.float64)
    assert repr(ours) == repr(theirs).replace("torch.float64", "flambeau.float64")
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_groupnorm_channels_must_divide():
    with pytest.raises(ValueError, match="num_channels must be divisible by num_groups"):
        nn.GroupNorm(3, 4)


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_functional_instance_norm(use_input_stats):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float64) * 2 + 1
    w, b = RNG.standard_normal(4), RNG.standard_normal(4)
    rm, rv = RNG.standard_normal(4), RNG.uniform(0.5, 2, 4)
    frm, frv, trm, trv = fl.tensor(rm), fl.tensor(rv), torch.tensor(rm), torch.tensor(rv)
    fx = fl.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    y = F.instance_norm(fx, frm, frv, fl.tensor(w), fl.tensor(b), use_input_stats, 0.2, 1e-5)
    ty = torch.nn.functional.instance_norm(tx, trm, trv, torch.tensor(w), torch.tensor(b), use_input_stats, 0.2, 1e-5)
    close(y, ty, np.float64)
    close(frm, trm, np.float64)
    close(frv, trv, np.float64)
    y.sum().backward()
    ty.sum().backward()
    close(fx.grad, tx.grad, np.float64)


@pytest.mark.parametrize("name", ["batch_norm", "batch_norm_eval", "layer_norm", "group_norm"])
def test_double_backward(name):
    x = fl.tensor(RNG.standard_normal((4, 4, 3)), requires_grad=True)
    w = fl.tensor(RNG.standard_normal(4), requires_grad=True)
    b = fl.tensor(RNG.standard_normal(4), requires_grad=True)
    rm, rv = fl.tensor(RNG.standard_normal(4)), fl.tensor(RNG.uniform(0.5, 2, 4))
    fns = {
        "batch_norm": lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
        "batch_norm_eval": lambda x, w, b: F.batch_norm(x, rm, rv, w, b, False),
        "layer_norm": lambda x, w, b: F.layer_norm(x.transpose(1, 2), (4,), w, b),
        "group_norm": lambda x, w, b: F.group_norm(x, 2, w, b),
    }
    assert gradgradcheck(fns[name], (x, w, b))


def test_training_step_with_retain_graph_runs_fused_backward_twice():
    m = nn.BatchNorm2d(3)
    x = fl.randn(4, 3, 2, 2, requires_grad=True)
    y = (m(x) * fl.randn(4, 3, 2, 2)).sum()
    y.backward(retain_graph=True)
    g1 = (x.grad.numpy().copy(), m.weight.grad.numpy().copy())
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.weight.grad.numpy(), 2 * g1[1], rtol=1e-5, atol=1e-6)
