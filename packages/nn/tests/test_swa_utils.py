"""optim.swa_utils (``flambeau/optim/swa_utils.py``) against torch: AveragedModel, update_bn, SWALR."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
from flambeau.optim import swa_utils as S

torch = pytest.importorskip("torch")
TS = torch.optim.swa_utils

RNG = np.random.default_rng(13)


def twins():
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                                 torch.nn.Linear(4, 2)).double()
    ours = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).double()
    ours.load_state_dict({k: fl.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def train_step(model, tmodel, opt, topt):
    a = RNG.standard_normal((8, 3))
    model(fl.from_numpy(a)).pow(2).mean().backward()
    tmodel(torch.from_numpy(a)).pow(2).mean().backward()
    opt.step()
    topt.step()
    opt.zero_grad()
    topt.zero_grad()


def assert_same_state(ours, theirs, rtol=1e-12):
    sd, tsd = ours.state_dict(), theirs.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        np.testing.assert_allclose(sd[k].numpy(), tsd[k].numpy(), rtol=rtol, atol=1e-14, err_msg=k)


AVERAGES = {
    "swa": ({}, {}),
    "ema_multi": (lambda: dict(multi_avg_fn=S.get_ema_multi_avg_fn(0.9)),
                  lambda: dict(multi_avg_fn=TS.get_ema_multi_avg_fn(0.9))),
    "ema_fn_buffers": (lambda: dict(avg_fn=S.get_ema_avg_fn(0.8), use_buffers=True),
                       lambda: dict(avg_fn=TS.get_ema_avg_fn(0.8), use_buffers=True)),
    # (with use_buffers, torch's SWA multi_avg_fn fails on the integer batch count: addcdiv of integers)
    "swa_multi": (lambda: dict(multi_avg_fn=S.get_swa_multi_avg_fn()),
                  lambda: dict(multi_avg_fn=TS.get_swa_multi_avg_fn())),
    "swa_fn": (lambda: dict(avg_fn=S.get_swa_avg_fn()), lambda: dict(avg_fn=TS.get_swa_avg_fn())),
}


@pytest.mark.parametrize("kind", list(AVERAGES))
def test_averaged_model_matches_torch(kind):
    ours_kw, theirs_kw = (f() if callable(f) else f for f in AVERAGES[kind])
    model, tmodel = twins()
    avg, tavg = S.AveragedModel(model, **ours_kw), TS.AveragedModel(tmodel, **theirs_kw)
    assert list(avg.state_dict()) == list(tavg.state_dict())
    assert avg.module is not model and avg.n_averaged.dtype == fl.int64
    opt, topt = fl.optim.SGD(model.parameters(), lr=0.05), torch.optim.SGD(tmodel.parameters(), lr=0.05)
    for step in range(4):
        train_step(model, tmodel, opt, topt)
        avg.update_parameters(model)
        tavg.update_parameters(tmodel)
        assert avg.n_averaged.item() == step + 1
        assert_same_state(avg, tavg)
    a = RNG.standard_normal((5, 3))
    avg.eval()
    tavg.eval()
    np.testing.assert_allclose(avg(fl.from_numpy(a)).detach().numpy(), tavg(torch.from_numpy(a)).detach().numpy(),
                               rtol=1e-12)


def test_default_average_is_the_mean_of_the_snapshots():
    model = nn.Linear(3, 2, dtype=fl.float64)
    avg = S.AveragedModel(model)
    snapshots = []
    for _ in range(5):
        with fl.no_grad():
            model.weight.copy_(fl.from_numpy(RNG.standard_normal((2, 3))))
        snapshots.append(model.weight.detach().numpy().copy())
        avg.update_parameters(model)
    np.testing.assert_allclose(avg.module.weight.detach().numpy(), np.mean(snapshots, 0), rtol=1e-13)
    # the copy is independent of the model and keeps requires_grad
    assert avg.module.weight is not model.weight and avg.module.weight.requires_grad


def test_update_bn_matches_torch():
    model, tmodel = twins()
    avg, tavg = S.AveragedModel(model), TS.AveragedModel(tmodel)
    batches = [RNG.standard_normal((8, 3)) * 2 + 1 for _ in range(3)]
    avg.eval()
    tavg.eval()
    S.update_bn([fl.from_numpy(b) for b in batches], avg)
    TS.update_bn([(torch.from_numpy(b), 0) for b in batches[:0]] + [torch.from_numpy(b) for b in batches], tavg)
    assert_same_state(avg, tavg)
    assert not avg.training and avg.module[1].momentum == 0.1
    assert avg.module[1].num_batches_tracked.item() == 3
    # lists of (input, target) work too, and a model without batch norm is left alone
    S.update_bn([(fl.from_numpy(b), None) for b in batches], avg)
    assert_same_state(avg, tavg)
    lin = nn.Linear(3, 3)
    before = copy.deepcopy(lin.state_dict())
    S.update_bn([fl.randn(2, 3)], lin)
    assert all((lin.state_dict()[k].numpy() == v.numpy()).all() for k, v in before.items())


def lrs(scheduler, opt, steps):
    out = []
    for _ in range(steps):
        opt.step()
        scheduler.step()
        out.append(scheduler.get_last_lr())
    return out


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 4])
@pytest.mark.parametrize("swa_lr", [0.05, [0.05, 0.2]], ids=["one", "per_group"])
def test_swalr_sequence_matches_torch(strategy, anneal_epochs, swa_lr):
    def groups(lib, params):
        return [{"params": [params[0]], "lr": 0.5}, {"params": [params[1]], "lr": 0.1}]

    p = [fl.zeros(2, requires_grad=True), fl.zeros(2, requires_grad=True)]
    tp = [torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)]
    opt, topt = fl.optim.SGD(groups(fl, p), lr=1.0), torch.optim.SGD(groups(torch, tp), lr=1.0)
    s = S.SWALR(opt, swa_lr=swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    ts = TS.SWALR(topt, swa_lr=swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    assert s.get_last_lr() == ts.get_last_lr()
    assert lrs(s, opt, 7) == lrs(ts, topt, 7)
    state = s.state_dict()
    assert sorted(state) == sorted(ts.state_dict())
    s2 = S.SWALR(fl.optim.SGD(groups(fl, p), lr=1.0), swa_lr=1.0, anneal_strategy="linear" if strategy == "cos"
                 else "cos")
    s2.load_state_dict(state)
    assert s2.anneal_func == s.anneal_func and s2.anneal_epochs == anneal_epochs


def test_swalr_after_another_scheduler():
    p, tp = fl.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    opt, topt = fl.optim.SGD([p], lr=1.0), torch.optim.SGD([tp], lr=1.0)
    cos, tcos = fl.optim.lr_scheduler.CosineAnnealingLR(opt, 10), torch.optim.lr_scheduler.CosineAnnealingLR(topt, 10)
    assert lrs(cos, opt, 3) == lrs(tcos, topt, 3)
    s, ts = S.SWALR(opt, swa_lr=0.01, anneal_epochs=3), TS.SWALR(topt, swa_lr=0.01, anneal_epochs=3)
    np.testing.assert_allclose(lrs(s, opt, 5), lrs(ts, topt, 5), rtol=1e-15)


def test_errors_match_torch():
    opt = fl.optim.SGD([fl.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', instead got step"):
        S.SWALR(opt, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0, got -1"):
        S.SWALR(opt, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr must have the same length as optimizer.param_groups"):
        S.SWALR(opt, [0.1, 0.2])
    with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided. Please provide a value in \[0,1\] range."):
        S.get_ema_multi_avg_fn(1.5)
    with pytest.raises(ValueError, match="Invalid decay value -0.1 provided"):
        S.get_ema_avg_fn(-0.1)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn should be provided"):
        S.AveragedModel(nn.Linear(2, 2), avg_fn=S.get_ema_avg_fn(), multi_avg_fn=S.get_ema_multi_avg_fn())
