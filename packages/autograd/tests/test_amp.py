"""flambeau.amp.GradScaler (flambeau/amp/grad_scaler.py) step by step against torch.amp.GradScaler("cpu")."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import flambeau as fl
from flambeau.amp import GradScaler

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(4)


class SGD:
    """The smallest optimizer GradScaler accepts (param_groups and step), usable with both libraries."""

    def __init__(self, params, lr):
        self.param_groups = [{"params": list(params), "lr": lr}]
        self.steps = 0

    def step(self, *args, **kwargs):
        self.steps += 1
        for p in self.param_groups[0]["params"]:
            if p.grad is not None:
                p.data = p.data - self.param_groups[0]["lr"] * p.grad
        return "stepped"


def _setup(lib, w, **kwargs):
    t = fl.tensor(w, requires_grad=True) if lib is fl else torch.tensor(w, requires_grad=True)
    scaler = GradScaler("cpu", **kwargs) if lib is fl else torch.amp.GradScaler("cpu", **kwargs)
    return t, SGD([t], 0.1), scaler


def _iteration(lib, t, opt, scaler, x, poison: bool, clip: bool):
    x = lib.tensor(x)
    t.grad = None
    loss = ((t * x).sin().sum()) * (float("inf") if poison else 1.0)
    scaler.scale(loss).backward()
    if clip:
        scaler.unscale_(opt)
        grads = t.grad.clone()
    else:
        grads = None
    result = scaler.step(opt)
    scaler.update()
    return result, grads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_sequence_matches_torch(dtype):
    w = RNG.standard_normal(5).astype(dtype)
    kw = dict(init_scale=2.0 ** 10, growth_factor=4.0, backoff_factor=0.25, growth_interval=2)
    tf, of, sf = _setup(fl, w, **kw)
    tt, ot, st = _setup(torch, w, **kw)
    poisoned = [False, True, False, False, False, True, True, False, False]
    for i, poison in enumerate(poisoned):
        x = RNG.standard_normal(5).astype(dtype)
        clip = i % 3 == 0
        rf, gf = _iteration(fl, tf, of, sf, x, poison, clip)
        rt, gt = _iteration(torch, tt, ot, st, x, poison, clip)
        assert rf == rt  # None when the step was skipped
        assert sf.get_scale() == st.get_scale()
        assert sf.state_dict() == st.state_dict()
        if clip and not poison:
            np.testing.assert_allclose(gf.numpy(), gt.numpy(), rtol=1e-6)
        np.testing.assert_allclose(tf.detach().numpy(), tt.detach().numpy(), rtol=1e-6)
    assert of.steps == ot.steps == poisoned.count(False)


def test_unscaled_gradients_are_the_true_gradients():
    w = RNG.standard_normal(4)
    t, opt, scaler = _setup(fl, w, init_scale=1024.0)
    scaler.scale((t ** 2).sum()).backward()
    np.testing.assert_allclose(t.grad.numpy(), 2 * 1024.0 * w)
    scaler.unscale_(opt)
    np.testing.assert_allclose(t.grad.numpy(), 2 * w)


def test_growth_that_overflows_keeps_the_scale():
    w = RNG.standard_normal(3).astype(np.float32)
    for lib in (fl, torch):
        t, opt, scaler = _setup(lib, w, init_scale=3.0e38, growth_interval=1)
        _iteration(lib, t, opt, scaler, np.ones(3, np.float32), False, False)
        assert scaler.get_scale() == pytest.approx(3.0e38, rel=1e-6)
        assert scaler.state_dict()["_growth_tracker"] == 0


def test_update_with_a_new_scale_and_state_dict_round_trip():
    tf, of, sf = _setup(fl, RNG.standard_normal(3))
    tt, ot, st = _setup(torch, RNG.standard_normal(3))
    for t, s in ((tf, sf), (tt, st)):
        s.scale(t.sum()).backward()
    sf.update(8.0)
    st.update(8.0)
    assert sf.get_scale() == st.get_scale() == 8.0
    sf.update(fl.tensor([2.0]))
    assert sf.get_scale() == 2.0
    fresh = GradScaler("cpu")
    fresh.load_state_dict(sf.state_dict())
    assert fresh.state_dict() == sf.state_dict()
    copy = pickle.loads(pickle.dumps(sf))
    assert copy.state_dict() == sf.state_dict()
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        fresh.load_state_dict({})


def test_scale_containers():
    scaler = GradScaler("cpu", init_scale=4.0)
    a, b = fl.ones(2), fl.ones(3)
    out = scaler.scale([a, (b, b)])
    assert out[0].tolist() == [4.0, 4.0] and out[1][1].tolist() == [4.0] * 3
    assert isinstance(out, list) and isinstance(out[1], tuple)
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale(3.0)


@pytest.mark.parametrize("lib", ["flambeau", "torch"])
def test_misuse_errors_as_torch(lib):
    L = fl if lib == "flambeau" else torch
    make = GradScaler if lib == "flambeau" else torch.amp.GradScaler
    t, opt, scaler = _setup(L, RNG.standard_normal(3))
    with pytest.raises(AssertionError, match="Attempted step but _scale is None"):
        scaler.step(opt)
    scaler.scale(t.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called on this optimizer"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: 0)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step"):
        scaler.unscale_(opt)
    with pytest.raises(AssertionError, match="may only be pickled at the beginning of an iteration"):
        pickle.dumps(scaler)
    with pytest.raises(AssertionError, match="The growth factor must be > 1.0"):
        make("cpu", growth_factor=1.0)
    with pytest.raises(AssertionError, match="The backoff factor must be < 1.0"):
        make("cpu", backoff_factor=1.0)
    half = (fl.ones(2, dtype=fl.float16) if lib == "flambeau" else torch.ones(2, dtype=torch.float16))
    half.requires_grad_()
    s2 = make("cpu")
    opt2 = SGD([half], 0.1)
    s2.scale((half * 1).sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        s2.unscale_(opt2)


def test_disabled_scaler_is_a_no_op():
    t, opt, _ = _setup(fl, RNG.standard_normal(3))
    scaler = GradScaler("cpu", enabled=False)
    loss = t.sum()
    assert scaler.scale(loss) is loss
    assert scaler.step(opt) == "stepped"
    scaler.update()
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {} and not scaler.is_enabled()


def test_cuda_scaler_without_cuda_disables_itself():
    if fl.cuda.is_available():
        pytest.skip("a CUDA device is available")
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling"):
        scaler = GradScaler()
    assert not scaler.is_enabled()


def test_with_flambeau_optim():
    nn = pytest.importorskip("flambeau.nn")
    optim = pytest.importorskip("flambeau.optim")
    model = nn.Linear(3, 1)
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=256.0)
    before = [p.detach().clone() for p in model.parameters()]
    scaler.scale(model(fl.ones(2, 3)).sum() * float("nan")).backward()
    scaler.step(opt)
    scaler.update()
    assert all(bool((p == b).all()) for p, b in zip(model.parameters(), before))  # skipped
    assert scaler.get_scale() == 128.0
    opt.zero_grad()
    scaler.scale(model(fl.ones(2, 3)).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert not all(bool((p == b).all()) for p, b in zip(model.parameters(), before))
