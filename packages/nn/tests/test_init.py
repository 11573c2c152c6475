"""nn.init: gains and fans as torch computes them, distributions checked statistically against the
formulas (and against torch's own draws), generators, no_grad and error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
from flambeau.nn import init

torch = pytest.importorskip("torch")
tinit = torch.nn.init

N = 400  # 400 x 300 = 120k samples: moments within ~1% (checked with generous bounds)


@pytest.mark.parametrize("name, param", [("linear", None), ("conv1d", None), ("conv2d", None), ("sigmoid", None),
                                         ("tanh", None), ("relu", None), ("leaky_relu", None),
                                         ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu", None),
                                         ("conv_transpose2d", None)])
def test_calculate_gain_like_torch(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(tinit.calculate_gain(name, param), rel=1e-15)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 2), (8, 4, 3, 3), (2, 1, 5, 5, 5)])
def test_fans_like_torch(shape):
    ours = init._calculate_fan_in_and_fan_out(fl.empty(*shape))
    theirs = tinit._calculate_fan_in_and_fan_out(torch.empty(*shape))
    assert ours == theirs
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(fl.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(fl.empty(3, 3), mode="fan_avg")


def _moments(a):
    a = np.asarray(a, np.float64).ravel()
    return a.mean(), a.std(), a.min(), a.max()


def _uniform_check(a, bound):
    mean, std, lo, hi = _moments(a)
    assert -bound <= lo and hi <= bound
    assert lo < -0.99 * bound and hi > 0.99 * bound
    assert abs(mean) < 0.02 * bound
    assert std == pytest.approx(bound / math.sqrt(3), rel=0.02)


def _normal_check(a, mean_ref, std_ref):
    mean, std, _, _ = _moments(a)
    assert abs(mean - mean_ref) < 0.02 * std_ref + 1e-12
    assert std == pytest.approx(std_ref, rel=0.02)


@pytest.mark.parametrize("shape", [(N, 300), (64, 32, 3, 3)])
@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
@pytest.mark.parametrize("nonlinearity, a", [("leaky_relu", 0), ("leaky_relu", math.sqrt(5)), ("relu", 0),
                                             ("tanh", 0)])
def test_kaiming(shape, mode, nonlinearity, a):
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(fl.empty(*shape))
    fan = fan_in if mode == "fan_in" else fan_out
    std = init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    w = init.kaiming_uniform_(fl.empty(*shape), a=a, mode=mode, nonlinearity=nonlinearity)
    _uniform_check(w.numpy(), math.sqrt(3) * std)
    # torch's draws follow the same law: compare their spread as well
    tw = tinit.kaiming_uniform_(torch.empty(*shape), a=a, mode=mode, nonlinearity=nonlinearity)
    assert w.numpy().std() == pytest.approx(tw.numpy().std(), rel=0.03)
    w = init.kaiming_normal_(fl.empty(*shape), a=a, mode=mode, nonlinearity=nonlinearity)
    _normal_check(w.numpy(), 0.0, std)


@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_xavier(gain):
    shape = (N, 200)
    std = gain * math.sqrt(2.0 / (N + 200))
    _uniform_check(init.xavier_uniform_(fl.empty(*shape), gain=gain).numpy(), math.sqrt(3) * std)
    _normal_check(init.xavier_normal_(fl.empty(*shape), gain=gain).numpy(), 0.0, std)
    tw = tinit.xavier_normal_(torch.empty(*shape), gain=gain)
    assert init.xavier_normal_(fl.empty(*shape), gain=gain).numpy().std() == pytest.approx(tw.numpy().std(),
                                                                                         rel=0.03)


def test_uniform_normal_constant_ones_zeros_eye():
    _uniform_check(init.uniform_(fl.empty(N, 300), -2.0, 2.0).numpy() , 2.0)
    w = init.uniform_(fl.empty(N, 300), 1.0, 3.0).numpy()
    assert w.min() >= 1.0 and w.max() < 3.0 and abs(w.mean() - 2.0) < 0.01
    _normal_check(init.normal_(fl.empty(N, 300), 3.0, 0.5).numpy(), 3.0, 0.5)
    assert init.constant_(fl.empty(3, 2), 1.5).tolist() == [[1.5, 1.5]] * 3
    assert init.ones_(fl.empty(2)).tolist() == [1.0, 1.0]
    assert init.zeros_(fl.empty(2)).tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(init.eye_(fl.empty(3, 5)).numpy(), tinit.eye_(torch.empty(3, 5)).numpy())
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(fl.empty(3))


@pytest.mark.parametrize("shape, groups", [((4, 2, 3), 1), ((6, 3, 3, 3), 1), ((4, 2, 3, 3), 2),
                                           ((2, 2, 3, 3, 3), 1)])
def test_dirac_like_torch(shape, groups):
    np.testing.assert_array_equal(init.dirac_(fl.empty(*shape), groups).numpy(),
                                  tinit.dirac_(torch.empty(*shape), groups).numpy())


@pytest.mark.parametrize("shape", [(50, 30), (30, 50), (20, 4, 3), (1, 7)])
def test_orthogonal(shape):
    w = init.orthogonal_(fl.empty(*shape), gain=2.0)
    m = w.numpy().reshape(shape[0], -1)
    rows, cols = m.shape
    gram = m @ m.T if rows <= cols else m.T @ m
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(rows, cols)), atol=1e-5)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(fl.empty(3))


def test_trunc_normal():
    w = init.trunc_normal_(fl.empty(N, 300), mean=1.0, std=2.0, a=-1.0, b=2.0).numpy()
    assert w.min() >= -1.0 and w.max() <= 2.0
    tw = tinit.trunc_normal_(torch.empty(N, 300), mean=1.0, std=2.0, a=-1.0, b=2.0).numpy()
    assert w.mean() == pytest.approx(tw.mean(), abs=0.01)
    assert w.std() == pytest.approx(tw.std(), rel=0.02)
    # the standard case: N(0, 1) truncated to [-2, 2] has std ~0.8796
    s = init.trunc_normal_(fl.empty(N, 300)).numpy()
    assert s.std() == pytest.approx(0.8796, rel=0.01) and abs(s.mean()) < 0.01


def test_sparse():
    w = init.sparse_(fl.empty(20, 10), sparsity=0.3, std=0.5).numpy()
    assert ((w == 0).sum(0) >= 6).all()


def test_generator_reproducibility_and_default_seed():
    g1, g2 = fl.Generator().manual_seed(5), fl.Generator().manual_seed(5)
    a = init.kaiming_uniform_(fl.empty(10, 10), generator=g1)
    b = init.kaiming_uniform_(fl.empty(10, 10), generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    fl.manual_seed(9)
    c = nn.Linear(5, 5).weight.detach().numpy().copy()
    fl.manual_seed(9)
    d = nn.Linear(5, 5).weight.detach().numpy().copy()
    np.testing.assert_array_equal(c, d)
    for fn in (init.normal_, init.uniform_, init.xavier_normal_, init.orthogonal_, init.trunc_normal_):
        x = fn(fl.empty(6, 6), generator=fl.Generator().manual_seed(1))
        y = fn(fl.empty(6, 6), generator=fl.Generator().manual_seed(1))
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_runs_under_no_grad_on_parameters():
    p = nn.Parameter(fl.empty(4, 4))
    for fn in (init.uniform_, init.normal_, init.kaiming_uniform_, init.xavier_normal_, init.orthogonal_,
               init.ones_, init.zeros_, init.eye_, init.trunc_normal_, lambda t: init.constant_(t, 2.0)):
        out = fn(p)
        assert out is p and p.is_leaf and p.requires_grad and p.grad_fn is None


def test_zero_element_warning():
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        init.kaiming_uniform_(fl.empty(0, 3))
