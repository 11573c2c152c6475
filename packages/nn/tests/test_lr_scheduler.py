"""flambeau.optim.lr_scheduler against torch.optim.lr_scheduler: learning-rate sequences, state dicts, errors."""

from __future__ import annotations

import math
import warnings

import pytest

import flambeau as fl
import flambeau.optim as optim
from flambeau.optim import lr_scheduler as fsched

torch = pytest.importorskip("torch")
tsched = torch.optim.lr_scheduler


def _optimizers(name="SGD", **kw):
    """The same two-group optimizer in both libraries (group lrs 0.1 and 0.02)."""
    kw = {"lr": 0.1, "momentum": 0.9, **kw} if name == "SGD" else {"lr": 0.1, **kw}
    fa, fb = fl.ones(2, requires_grad=True), fl.ones(3, requires_grad=True)
    ta, tb = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    fopt = getattr(optim, name)([{"params": [fa]}, {"params": [fb], "lr": 0.02}], **kw)
    topt = getattr(torch.optim, name)([{"params": [ta]}, {"params": [tb], "lr": 0.02}], **kw)
    return fopt, topt


def _lr_lambda(epoch):
    return 0.95**epoch


def _mult_lambda(epoch):
    return 0.9 if epoch % 3 else 1.05


CASES = [
    ("StepLR", dict(step_size=7)),
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[5, 12, 12, 30], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.93)),
    ("CosineAnnealingLR", dict(T_max=10)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts", dict(T_0=5)),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.005)),
    ("LambdaLR", dict(lr_lambda=_lr_lambda)),
    ("LambdaLR", dict(lr_lambda=[_lr_lambda, lambda e: 1.0 / (e + 1)])),
    ("MultiplicativeLR", dict(lr_lambda=_mult_lambda)),
    ("LinearLR", dict()),
    ("LinearLR", dict(start_factor=0.2, end_factor=0.7, total_iters=9)),
    ("ConstantLR", dict()),
    ("ConstantLR", dict(factor=0.25, total_iters=11)),
    ("PolynomialLR", dict(total_iters=20, power=2.0)),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=60)),
    ("OneCycleLR", dict(max_lr=[0.5, 0.2], epochs=6, steps_per_epoch=10, anneal_strategy="linear")),
    ("OneCycleLR", dict(max_lr=0.8, total_steps=60, three_phase=True, pct_start=0.2, div_factor=10.0,
                        final_div_factor=100.0, base_momentum=0.8, max_momentum=0.9)),
    ("OneCycleLR", dict(max_lr=0.8, total_steps=60, cycle_momentum=False)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=4)),
    ("CyclicLR", dict(base_lr=[0.01, 0.02], max_lr=0.2, step_size_up=3, step_size_down=5, mode="triangular2")),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=4, mode="exp_range", gamma=0.97)),
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CASES)]


def _check_step(fopt, topt, fs, ts, what):
    assert fs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-14, abs=1e-17), what
    for fg, tg in zip(fopt.param_groups, topt.param_groups):
        assert fg["lr"] == pytest.approx(tg["lr"], rel=1e-14, abs=1e-17), what
        for key in ("momentum", "betas"):
            if key in tg:
                assert fg[key] == pytest.approx(tg[key], rel=1e-14), what


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize(("name", "kw"), CASES, ids=IDS)
def test_lr_sequence_matches_torch(name, kw, opt_name):
    fopt, topt = _optimizers(opt_name)
    fs, ts = getattr(fsched, name)(fopt, **kw), getattr(tsched, name)(topt, **kw)
    _check_step(fopt, topt, fs, ts, "construction")
    steps = 60 if name in ("OneCycleLR",) else 50
    for k in range(steps):
        fopt.step()
        topt.step()
        fs.step()
        ts.step()
        _check_step(fopt, topt, fs, ts, f"step {k}")


def test_sequential_lr_matches_torch():
    fopt, topt = _optimizers()
    f1, t1 = fsched.LinearLR(fopt, start_factor=0.1, total_iters=5), tsched.LinearLR(topt, start_factor=0.1,
                                                                                        total_iters=5)
    f2, t2 = fsched.CosineAnnealingLR(fopt, T_max=10), tsched.CosineAnnealingLR(topt, T_max=10)
    f3, t3 = fsched.ExponentialLR(fopt, gamma=0.9), tsched.ExponentialLR(topt, gamma=0.9)
    fs = fsched.SequentialLR(fopt, schedulers=[f1, f2, f3], milestones=[5, 15])
    ts = tsched.SequentialLR(topt, schedulers=[t1, t2, t3], milestones=[5, 15])
    _check_step(fopt, topt, fs, ts, "construction")
    for k in range(30):
        fopt.step()
        topt.step()
        fs.step()
        ts.step()
        _check_step(fopt, topt, fs, ts, f"step {k}")


def test_chained_scheduler_matches_torch():
    fopt, topt = _optimizers()
    fs = fsched.ChainedScheduler([fsched.ConstantLR(fopt, factor=0.5, total_iters=4),
                                  fsched.ExponentialLR(fopt, gamma=0.9)])
    ts = tsched.ChainedScheduler([tsched.ConstantLR(topt, factor=0.5, total_iters=4),
                                  tsched.ExponentialLR(topt, gamma=0.9)])
    for k in range(12):
        fopt.step()
        topt.step()
        fs.step()
        ts.step()
        _check_step(fopt, topt, fs, ts, f"step {k}")


METRICS = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.85, 0.85, 0.86, 0.9, 0.9,
           0.9, 0.9, 0.9, 0.9, 0.9, 0.9]


@pytest.mark.parametrize("kw", [dict(), dict(patience=2), dict(mode="max", patience=1, factor=0.5),
                                dict(patience=1, threshold=0.05, threshold_mode="abs", cooldown=2),
                                dict(patience=0, min_lr=[0.01, 0.015], factor=0.5),
                                dict(mode="max", threshold_mode="abs", threshold=0.01, patience=1, eps=0.05)])
def test_reduce_lr_on_plateau_matches_torch(kw):
    fopt, topt = _optimizers()
    fs, ts = fsched.ReduceLROnPlateau(fopt, **kw), tsched.ReduceLROnPlateau(topt, **kw)
    for k, metric in enumerate(METRICS * 2):
        fopt.step()
        topt.step()
        fs.step(metric)
        ts.step(metric)
        _check_step(fopt, topt, fs, ts, f"step {k}")
        assert (fs.num_bad_epochs, fs.cooldown_counter, fs.best) == (ts.num_bad_epochs, ts.cooldown_counter, ts.best)


def test_reduce_lr_on_plateau_accepts_tensor_metrics():
    fopt, _ = _optimizers()
    fs = fsched.ReduceLROnPlateau(fopt, patience=0)
    fs.step(fl.tensor(1.0))
    fs.step(fl.tensor(2.0))
    assert fs.get_last_lr() == pytest.approx([0.01, 0.002])


@pytest.mark.parametrize(("name", "kw"), [c for c in CASES if c[0] not in ("LambdaLR", "MultiplicativeLR")][::2])
def test_state_dict_round_trip(name, kw):
    fopt, _ = _optimizers()
    ref = getattr(fsched, name)(fopt, **kw)
    lrs = []
    for _ in range(20):
        fopt.step()
        ref.step()
        lrs.append(ref.get_last_lr())
    # resume at step 8: a fresh optimizer and scheduler, loaded from the states at that point
    fopt2, _ = _optimizers()
    sched = getattr(fsched, name)(fopt2, **kw)
    for _ in range(8):
        fopt2.step()
        sched.step()
    opt_state, sched_state = fopt2.state_dict(), sched.state_dict()
    fopt3, _ = _optimizers()
    sched3 = getattr(fsched, name)(fopt3, **kw)
    fopt3.load_state_dict(opt_state)
    sched3.load_state_dict(sched_state)
    for k in range(8, 20):
        fopt3.step()
        sched3.step()
        assert sched3.get_last_lr() == lrs[k]
    assert "optimizer" not in sched_state


def test_lambda_state_dict_saves_callable_objects_only():
    class Decay:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, epoch):
            return self.rate**epoch

    fopt, _ = _optimizers()
    s = fsched.LambdaLR(fopt, [Decay(0.5), _lr_lambda])
    state = s.state_dict()
    assert state["lr_lambdas"] == [{"rate": 0.5}, None]
    fopt2, _ = _optimizers()
    s2 = fsched.LambdaLR(fopt2, [Decay(0.9), _lr_lambda])
    s2.load_state_dict(state)
    assert s2.lr_lambdas[0].rate == 0.5


def test_tensor_learning_rate_is_updated_in_place():
    lr = fl.tensor(0.1, dtype=fl.float64)
    opt = optim.SGD([fl.ones(2, requires_grad=True)], lr=lr)
    s = fsched.StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    s.step()
    assert opt.param_groups[0]["lr"] is lr and lr.item() == pytest.approx(0.05)


def test_last_epoch_resume_and_warnings():
    fopt, _ = _optimizers()
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        fsched.StepLR(fopt, step_size=2, last_epoch=3)
    s = fsched.StepLR(fopt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    fopt, _ = _optimizers()
    s = fsched.StepLR(fopt, step_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fopt.step()
        s.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        s.get_lr()
    fopt, _ = _optimizers()
    s = fsched.StepLR(fopt, step_size=3, gamma=0.5)
    fopt.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        s.step(7)  # closed form
    assert s.get_last_lr() == pytest.approx([0.1 * 0.25, 0.02 * 0.25])


def test_warm_restarts_with_fractional_epochs_matches_torch():
    fopt, topt = _optimizers()
    fs = fsched.CosineAnnealingWarmRestarts(fopt, T_0=4, T_mult=2)
    ts = tsched.CosineAnnealingWarmRestarts(topt, T_0=4, T_mult=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(40):
            epoch = k * 0.7
            fs.step(epoch)
            ts.step(epoch)
            _check_step(fopt, topt, fs, ts, f"epoch {epoch}")


ERRORS = [
    ("ConstantLR", dict(factor=1.5)), ("LinearLR", dict(start_factor=0)), ("LinearLR", dict(end_factor=2)),
    ("CosineAnnealingWarmRestarts", dict(T_0=0)), ("CosineAnnealingWarmRestarts", dict(T_0=2, T_mult=0)),
    ("OneCycleLR", dict(max_lr=1.0)), ("OneCycleLR", dict(max_lr=1.0, total_steps=-1)),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=10, pct_start=1.5)),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=10, anneal_strategy="exp")),
    ("OneCycleLR", dict(max_lr=[1.0, 2.0, 3.0], total_steps=10)),
    ("ReduceLROnPlateau", dict(factor=1.0)), ("ReduceLROnPlateau", dict(mode="median")),
    ("ReduceLROnPlateau", dict(threshold_mode="ratio")), ("ReduceLROnPlateau", dict(min_lr=[0.1])),
    ("LambdaLR", dict(lr_lambda=[_lr_lambda])), ("CyclicLR", dict(base_lr=0.1, max_lr=1.0, mode="zigzag")),
]


@pytest.mark.parametrize(("name", "kw"), ERRORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERRORS)])
def test_errors_match_torch(name, kw):
    fopt, topt = _optimizers()
    with pytest.raises(ValueError) as expected:
        getattr(tsched, name)(topt, **kw)
    with pytest.raises(ValueError) as got:
        getattr(fsched, name)(fopt, **kw)
    assert str(got.value) == str(expected.value)


def test_other_errors():
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        fsched.StepLR([], step_size=1)
    fopt, _ = _optimizers()
    s = fsched.OneCycleLR(fopt, max_lr=1.0, total_steps=3)
    for _ in range(2):
        fopt.step()
        s.step()
    fopt.step()
    s.step()
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
        s.step()
    opt = optim.Adagrad([fl.ones(1, requires_grad=True)])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        fsched.OneCycleLR(opt, max_lr=1.0, total_steps=3)
    fopt, _ = _optimizers()
    other, _ = _optimizers()
    with pytest.raises(ValueError, match="expects all schedulers to belong to the same optimizer"):
        fsched.SequentialLR(fopt, [fsched.StepLR(fopt, 2), fsched.StepLR(other, 2)], milestones=[3])
    with pytest.raises(ValueError, match="number of milestones to be equal to 2"):
        fsched.SequentialLR(fopt, [fsched.StepLR(fopt, 2), fsched.StepLR(fopt, 2)], milestones=[3, 4])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        fsched.ChainedScheduler([fsched.ReduceLROnPlateau(fopt)])


def test_cosine_annealing_reaches_eta_min_and_comes_back():
    opt = optim.SGD([fl.ones(1, requires_grad=True)], lr=1.0)
    s = fsched.CosineAnnealingLR(opt, T_max=4, eta_min=0.1)
    lrs = []
    for _ in range(8):
        opt.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
    assert lrs[3] == pytest.approx(0.1) and lrs[7] == pytest.approx(1.0)
    assert lrs[1] == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * 2 / 4)) / 2)
