"""flambeau.optim optimizers against torch.optim: trajectories, state dicts, param groups, errors.

Every optimizer and option combination runs the same steps from the same start in both libraries
(fixed gradient sequences on parameters of several shapes, 0-dim included, float32 and float64),
through the fused kernels and through the tensor-operator path (``fused=False``).
"""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.optim as optim

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), (), (2, 1, 3)]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.05)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.02, betas=(0.3, 0.9), eps=1e-3, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-4, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, alpha=0.3, momentum=0.5, centered=True, weight_decay=0.1, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-3, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.5, eps=1e-4, weight_decay=0.1, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, betas=(0.3, 0.5), weight_decay=0.1, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("RAdam", dict(lr=0.01, betas=(0.6, 0.99), weight_decay=0.1, decoupled_weight_decay=True)),
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CONFIGS)]


def _problem(dtype, steps, shapes=SHAPES, seed=0):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]
    return init, grads


def _pair(name, kw, init, fused=None):
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    fp = [fl.tensor(a, requires_grad=True) for a in init]
    extra = {} if fused is None else {"fused": fused}
    return tp, getattr(torch.optim, name)(tp, **kw), fp, getattr(optim, name)(fp, **kw, **extra)


def _set_grads(tp, fp, grads):
    for p, g in zip(tp, grads):
        p.grad = torch.tensor(g)
    for p, g in zip(fp, grads):
        p.grad = fl.tensor(g)


def _assert_close(tp, fp, dtype, what=""):
    for a, b in zip(tp, fp):
        assert b.dtype is (fl.float32 if dtype == np.float32 else fl.float64)
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), **TOL[dtype], err_msg=what)


@pytest.mark.parametrize("fused", [None, False], ids=["fused", "tensor-ops"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(("name", "kw"), CONFIGS, ids=IDS)
def test_trajectory_matches_torch(name, kw, dtype, fused):
    steps = 12
    init, grads = _problem(dtype, steps)
    tp, topt, fp, fopt = _pair(name, kw, init, fused)
    for k in range(steps):
        _set_grads(tp, fp, grads[k])
        topt.step()
        fopt.step()
        _assert_close(tp, fp, dtype, f"step {k}")
    # the state matches torch's too, key for key
    for a, b in zip(tp, fp):
        ts, fs = topt.state[a], fopt.state[b]
        assert set(ts) == set(fs)
        for key in ts:
            if torch.is_tensor(ts[key]):
                assert fs[key].shape == tuple(ts[key].shape)
                np.testing.assert_allclose(fs[key].numpy(), ts[key].numpy(), rtol=1e-4, atol=1e-6)


UNFUSED_CONFIGS = [
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=0.1, alpha=0.5, t0=3, weight_decay=0.1, maximize=True)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(("name", "kw"), UNFUSED_CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(UNFUSED_CONFIGS)])
def test_tensor_operator_optimizers_match_torch(name, kw, dtype):
    steps = 12
    init, grads = _problem(dtype, steps)
    grads[3] = [-g for g in grads[2]]  # sign flips for Rprop
    tp, topt, fp, fopt = _pair(name, kw, init)
    for k in range(steps):
        _set_grads(tp, fp, grads[k])
        topt.step()
        fopt.step()
        _assert_close(tp, fp, dtype, f"step {k}")
    for a, b in zip(tp, fp):
        for key, value in topt.state[a].items():
            np.testing.assert_allclose(fopt.state[b][key].numpy(), value.numpy(), **TOL[dtype])


@pytest.mark.parametrize(("name", "kw"), [("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
                                          ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01)),
                                          ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
                                          ("Adagrad", dict(lr=0.1)), ("Adadelta", dict()), ("Adamax", dict()),
                                          ("NAdam", dict()), ("RAdam", dict())])
def test_large_parameters_run_in_parallel_chunks(name, kw):
    # 300k elements: the fused kernel is split over threads (Note [Fused optimizer kernels])
    init, grads = _problem(np.float32, 3, shapes=[(600, 500), (7,)], seed=1)
    tp, topt, fp, fopt = _pair(name, kw, init)
    for k in range(3):
        _set_grads(tp, fp, grads[k])
        topt.step()
        fopt.step()
    _assert_close(tp, fp, np.float32)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "NAdam"])
def test_one_group_mixing_dtypes(name):
    kw = dict(lr=0.05, momentum=0.9) if name in ("SGD", "RMSprop") else dict(lr=0.05)
    rng = np.random.default_rng(4)
    init = [rng.standard_normal(5).astype(np.float32), rng.standard_normal(5),
            rng.standard_normal(()).astype(np.float32)]
    tp, topt, fp, fopt = _pair(name, kw, init)
    for _ in range(5):
        grads = [rng.standard_normal(a.shape).astype(a.dtype) for a in init]
        _set_grads(tp, fp, grads)
        topt.step()
        fopt.step()
    for a, b in zip(tp, fp):
        dtype = np.float32 if a.dtype == torch.float32 else np.float64
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), **TOL[dtype])


def test_strided_gradient_and_parameter():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 3))
    tw = torch.tensor(w.T.copy(), requires_grad=True)
    fw = fl.tensor(w).t().detach().requires_grad_()  # non-contiguous leaf: tensor-operator path
    tb = torch.tensor(w[0].copy(), requires_grad=True)
    fb = fl.tensor(w[0].copy(), requires_grad=True)
    topt = torch.optim.Adam([tw, tb], lr=0.1)
    fopt = optim.Adam([fw, fb], lr=0.1)
    for _ in range(4):
        g = rng.standard_normal((3, 4))
        gb = rng.standard_normal((6,))[::2]  # strided gradient of a contiguous parameter: fused path
        tw.grad, tb.grad = torch.tensor(g), torch.tensor(gb.copy())
        fw.grad, fb.grad = fl.tensor(g.T.copy()).t(), fl.tensor(np.concatenate([gb, gb]).reshape(2, 3))[0]
        assert not fw.is_contiguous()
        topt.step()
        fopt.step()
    np.testing.assert_allclose(fw.detach().numpy(), tw.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(fb.detach().numpy(), tb.detach().numpy(), rtol=1e-12)


def test_float16_parameters_use_tensor_operators():
    init = [np.linspace(-1, 1, 6).astype(np.float16)]
    tp, topt, fp, fopt = _pair("SGD", dict(lr=0.1, momentum=0.9), init)
    for k in range(3):
        _set_grads(tp, fp, [np.full(6, 0.5 * (k + 1), np.float16)])
        topt.step()
        fopt.step()
    assert fp[0].dtype is fl.float16
    np.testing.assert_allclose(fp[0].detach().numpy().astype(np.float32),
                               tp[0].detach().numpy().astype(np.float32), rtol=2e-3)


def test_tensor_learning_rate():
    init, grads = _problem(np.float64, 5)
    tp, topt, fp, _ = _pair("Adam", dict(lr=0.01), init)
    fopt = optim.Adam(fp, lr=fl.tensor(0.01, dtype=fl.float64))
    for k in range(5):
        _set_grads(tp, fp, grads[k])
        topt.step()
        fopt.step()
    _assert_close(tp, fp, np.float64)
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        optim.SGD(fp, lr=fl.tensor([0.1, 0.2]))


def test_training_loop_with_parameters_and_autograd():
    # a tiny regression through backward(): Parameters, zero_grad, closures, param groups
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((16, 3)), rng.standard_normal((16, 1))
    w0, b0 = rng.standard_normal((3, 1)), rng.standard_normal(1)
    fw, fb = nn.Parameter(fl.tensor(w0)), nn.Parameter(fl.tensor(b0))
    tw, tb = torch.nn.Parameter(torch.tensor(w0)), torch.nn.Parameter(torch.tensor(b0))
    fopt = optim.SGD([{"params": [fw]}, {"params": [fb], "lr": 0.01}], lr=0.05, momentum=0.9)
    topt = torch.optim.SGD([{"params": [tw]}, {"params": [tb], "lr": 0.01}], lr=0.05, momentum=0.9)
    fx, fy, tx, ty = fl.tensor(x), fl.tensor(y), torch.tensor(x), torch.tensor(y)

    def fclosure():
        fopt.zero_grad()
        loss = ((fx @ fw + fb - fy) ** 2).mean()
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = ((tx @ tw + tb - ty) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(10):
        fl_loss, th_loss = fopt.step(fclosure), topt.step(tclosure)
        assert math.isclose(fl_loss.item(), th_loss.item(), rel_tol=1e-12)
    np.testing.assert_allclose(fw.detach().numpy(), tw.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(fb.detach().numpy(), tb.detach().numpy(), rtol=1e-12)


def test_step_bumps_version_counters_like_inplace_ops():
    for fused in (None, False):
        p = nn.Parameter(fl.randn(3))
        y = (p * p).sum()  # saves p for backward
        opt = optim.Adam([p], lr=0.1, fused=fused)
        p.grad = fl.ones(3)
        v = p._version
        opt.step()
        assert p._version > v
        assert opt.state[p]["exp_avg"]._version > 0
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


def test_parameters_without_grad_are_skipped():
    a, b = fl.ones(2, requires_grad=True), fl.ones(2, requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = fl.ones(2)
    opt.step()
    assert b.tolist() == [1.0, 1.0] and a.tolist() != [1.0, 1.0]
    assert b not in opt.state and len(opt.state[a]) == 3


# --- state dicts --------------------------------------------------------------------------------
def _clone_state_dict(sd):
    return {"state": {k: {n: (v.clone() if isinstance(v, fl.Tensor) else copy.deepcopy(v)) for n, v in s.items()}
                      for k, s in sd["state"].items()},
            "param_groups": copy.deepcopy(sd["param_groups"])}


@pytest.mark.parametrize(("name", "kw"), [c for c in CONFIGS if c[0] != "SGD" or c[1].get("momentum")][::2]
                         + [("SGD", dict(lr=0.1, momentum=0.9))])
def test_state_dict_round_trip_continues_the_run(name, kw):
    # float32: loading casts float state to the parameter's dtype, which would turn NAdam's float32
    # mu_product into float64 for float64 parameters (as torch does) and change the rounding
    init, grads = _problem(np.float32, 8)
    ref = [fl.tensor(a, requires_grad=True) for a in init]
    ref_opt = getattr(optim, name)(ref, **kw)
    params = [fl.tensor(a, requires_grad=True) for a in init]
    opt = getattr(optim, name)(params, **kw)
    for k in range(8):
        for p, g in zip(ref, grads[k]):
            p.grad = fl.tensor(g)
        ref_opt.step()
        if k == 3:  # checkpoint, rebuild everything, restore
            saved = _clone_state_dict(opt.state_dict())
            params = [p.detach().clone().requires_grad_() for p in params]
            opt = getattr(optim, name)(params, **kw)
            opt.load_state_dict(saved)
        for p, g in zip(params, grads[k]):
            p.grad = fl.tensor(g)
        opt.step()
    for a, b in zip(ref, params):
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())


def test_state_dict_layout_matches_torch_and_loads_torch_state():
    init, grads = _problem(np.float32, 4)
    tp, topt, fp, fopt = _pair("Adam", dict(lr=0.01, amsgrad=True), init)
    tp2 = [torch.tensor(a, requires_grad=True) for a in init]
    topt = torch.optim.Adam([{"params": tp[:2]}, {"params": tp[2:], "lr": 0.02}], lr=0.01, amsgrad=True)
    fopt = optim.Adam([{"params": fp[:2]}, {"params": fp[2:], "lr": 0.02}], lr=0.01, amsgrad=True)
    for k in range(2):
        _set_grads(tp, fp, grads[k])
        topt.step()
        fopt.step()
    tsd, fsd = topt.state_dict(), fopt.state_dict()
    assert fsd["param_groups"] == tsd["param_groups"]
    assert list(fsd["state"]) == list(tsd["state"]) == [0, 1, 2, 3]
    for i in range(4):
        assert list(fsd["state"][i]) == list(tsd["state"][i])
        assert fsd["state"][i]["step"].dtype is fl.float32 and fsd["state"][i]["step"].item() == 2.0
    # a torch checkpoint (tensors converted) resumes in flambeau
    converted = {"state": {k: {n: fl.tensor(v.numpy()) for n, v in s.items()} for k, s in tsd["state"].items()},
                 "param_groups": copy.deepcopy(tsd["param_groups"])}
    fp2 = [fl.tensor(p.detach().numpy(), requires_grad=True) for p in tp]
    fopt2 = optim.Adam([{"params": fp2[:2]}, {"params": fp2[2:]}], lr=0.5)
    fopt2.load_state_dict(converted)
    assert fopt2.param_groups[1]["lr"] == 0.02
    for tp2_, p in zip(tp2, tp):
        tp2_.data.copy_(p.detach())
    for k in range(2, 4):
        _set_grads(tp, fp2, grads[k])
        topt.step()
        fopt2.step()
    _assert_close(tp, fp2, np.float32)


def test_state_dict_survives_save_and_load(tmp_path):
    init, grads = _problem(np.float32, 4)
    params = [fl.tensor(a, requires_grad=True) for a in init]
    opt = optim.Adam(params, lr=0.01, amsgrad=True)
    ref = [fl.tensor(a, requires_grad=True) for a in init]
    ref_opt = optim.Adam(ref, lr=0.01, amsgrad=True)
    for k in range(2):
        for p, r, g in zip(params, ref, grads[k]):
            p.grad, r.grad = fl.tensor(g), fl.tensor(g)
        opt.step()
        ref_opt.step()
    fl.save(opt.state_dict(), tmp_path / "opt.pt")
    params = [p.detach().clone().requires_grad_() for p in params]
    opt = optim.Adam(params, lr=0.5)
    opt.load_state_dict(fl.load(tmp_path / "opt.pt"))
    for k in range(2, 4):
        for p, r, g in zip(params, ref, grads[k]):
            p.grad, r.grad = fl.tensor(g), fl.tensor(g)
        opt.step()
        ref_opt.step()
    for a, b in zip(ref, params):
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())


def test_python_number_step_counters_are_converted():
    a = fl.ones(2, requires_grad=True)
    opt = optim.Adam([a])
    opt.load_state_dict({"state": {0: {"step": 3, "exp_avg": fl.zeros(2), "exp_avg_sq": fl.zeros(2)}},
                         "param_groups": [dict(opt.state_dict()["param_groups"][0])]})
    a.grad = fl.ones(2)
    opt.step()
    assert opt.state[a]["step"].dtype is fl.float32 and opt.state[a]["step"].item() == 4.0


def test_load_state_dict_casts_to_parameter_dtype():
    src = [fl.ones(3, requires_grad=True)]
    opt = optim.Adam(src)
    src[0].grad = fl.ones(3)
    opt.step()
    dst = [fl.ones(3, dtype=fl.float64, requires_grad=True)]
    opt2 = optim.Adam(dst)
    opt2.load_state_dict(opt.state_dict())
    state = opt2.state[dst[0]]
    assert state["exp_avg"].dtype is fl.float64 and state["exp_avg_sq"].dtype is fl.float64
    assert state["step"].dtype is fl.float32  # the step counter is never cast, as in torch
    dst[0].grad = fl.ones(3, dtype=fl.float64)
    opt2.step()
    assert state["step"].item() == 2.0


def test_load_state_dict_errors():
    a, b = fl.ones(2, requires_grad=True), fl.ones(2, requires_grad=True)
    opt = optim.SGD([a, b], lr=0.1)
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="loaded state dict has a different number of parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="loaded state dict contains a parameter group that doesn't match the size "
                                         "of optimizer's group"):
        optim.SGD([a], lr=0.1).load_state_dict(sd)


# --- param groups, zero_grad, repr, hooks ------------------------------------------------------
def test_param_groups_and_add_param_group():
    a, b, c = (fl.ones(2, requires_grad=True) for _ in range(3))
    opt = optim.SGD([{"params": [a]}, {"params": b, "momentum": 0.9}], lr=0.1)
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["momentum"] == 0.9
    assert opt.param_groups[0]["momentum"] == 0
    opt.add_param_group({"params": [c], "lr": 0.5})
    assert opt.param_groups[2]["lr"] == 0.5 and opt.param_groups[2]["nesterov"] is False
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([a, a], lr=0.1)
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([c])
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {a, b}}], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors, but one of the params is int"):
        optim.SGD([1], lr=0.1)
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts, but got flambeau.Tensor"):
        optim.SGD(a, lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([a * 2], lr=0.1)
    named = optim.SGD([("w", a), ("b", b)], lr=0.1)
    assert named.param_groups[0]["param_names"] == ["w", "b"]
    assert named.state_dict()["param_groups"][0]["param_names"] == ["w", "b"]


def test_zero_grad():
    a = fl.ones(2, requires_grad=True)
    opt = optim.SGD([a], lr=0.1)
    a.grad = fl.ones(2)
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and a.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert a.grad is None


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                                  "Rprop", "ASGD", "LBFGS"])
def test_repr_and_defaults_match_torch(name):
    kw = {"lr": 0.1} if name == "SGD" else {}
    fopt = getattr(optim, name)([fl.ones(2, requires_grad=True)], **kw)
    topt = getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], **kw)
    assert repr(fopt) == repr(topt)
    assert fopt.defaults == topt.defaults


def test_step_hooks_and_pickling():
    a = fl.ones(2, requires_grad=True)
    opt = optim.SGD([a], lr=0.1)
    calls = []
    h1 = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
    a.grad = fl.ones(2)
    opt.step()
    h1.remove()
    opt.step()
    assert calls == ["pre", "post", "post"]
    clone = copy.deepcopy(opt)
    assert clone.param_groups[0]["lr"] == 0.1 and clone.param_groups[0]["params"][0] is not a


# --- errors ----------------------------------------------------------------------------------
ERROR_CASES = [
    ("SGD", dict(lr=-1)), ("SGD", dict(lr=0.1, momentum=-0.5)), ("SGD", dict(lr=0.1, weight_decay=-1)),
    ("SGD", dict(lr=0.1, nesterov=True)), ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)),
    ("Adam", dict(lr=-1)), ("Adam", dict(betas=(1.0, 0.999))), ("Adam", dict(betas=(0.9, -0.1))),
    ("Adam", dict(eps=-1)), ("Adam", dict(weight_decay=-1)), ("AdamW", dict(betas=(0.9, 1.5))),
    ("RMSprop", dict(alpha=-1)), ("RMSprop", dict(momentum=-1)), ("RMSprop", dict(eps=-1)),
    ("Adagrad", dict(lr_decay=-1)), ("Adagrad", dict(initial_accumulator_value=-1)),
    ("Adadelta", dict(rho=1.5)), ("Adamax", dict(betas=(-0.1, 0.9))), ("NAdam", dict(momentum_decay=-1)),
    ("RAdam", dict(betas=(0.9, 1.0))), ("LBFGS", dict(lr=-1)), ("Rprop", dict(etas=(1.1, 1.2))),
    ("ASGD", dict(weight_decay=-0.1)),
]


@pytest.mark.parametrize(("name", "kw"), ERROR_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERROR_CASES)])
def test_invalid_hyperparameters_raise_torchs_errors(name, kw):
    with pytest.raises(ValueError) as expected:
        getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as got:
        getattr(optim, name)([fl.ones(2, requires_grad=True)], **kw)
    assert str(got.value) == str(expected.value)


def test_invalid_learning_rate_message():
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.SGD([fl.ones(1, requires_grad=True)], lr=-1)
    with pytest.raises(ValueError, match="differentiable=True is not supported"):
        optim.Adam([fl.ones(1, requires_grad=True)], differentiable=True)


# --- LBFGS ---------------------------------------------------------------------------------------
def _rosenbrock_numpy(xy):
    x, y = xy
    f = (1 - x) ** 2 + 100 * (y - x * x) ** 2
    g = np.array([-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)], dtype=xy.dtype)
    return np.asarray(f, dtype=xy.dtype), g


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_lbfgs_on_rosenbrock_matches_torch(line_search_fn, dtype):
    # The closures evaluate the function and its gradient with the same numpy code for both
    # libraries, so that any difference comes from the optimizers.
    start = np.array([-1.5, 2.0], dtype)
    tx = torch.tensor(start, requires_grad=True)
    fx = fl.tensor(start, requires_grad=True)
    kw = dict(lr=1 if line_search_fn else 1e-3, history_size=5, max_iter=10, line_search_fn=line_search_fn)
    topt, fopt = torch.optim.LBFGS([tx], **kw), optim.LBFGS([fx], **kw)

    def tclosure():
        f, g = _rosenbrock_numpy(tx.detach().numpy().copy())
        tx.grad = torch.tensor(g)
        return torch.tensor(f)

    def fclosure():
        f, g = _rosenbrock_numpy(fx.detach().numpy().copy())
        fx.grad = fl.tensor(g)
        return fl.tensor(f)

    if line_search_fn is None:
        tol = dict(rtol=1e-12, atol=1e-14) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-6)
    else:
        # The line search branches on comparisons of nearly equal values: last-bit differences of
        # BLAS dot products (FMA or not) can change a branch, so float32 paths may part for a few
        # iterations before meeting again at the minimum.
        tol = dict(rtol=1e-7, atol=1e-9) if dtype == np.float64 else None
    for _ in range(6):
        tl, fl_ = topt.step(tclosure), fopt.step(fclosure)
        if tol is not None:
            np.testing.assert_allclose(fl_.item(), tl.item(), **tol)
            np.testing.assert_allclose(fx.detach().numpy(), tx.detach().numpy(), **tol)
    np.testing.assert_allclose(fx.detach().numpy(), tx.detach().numpy(), rtol=1e-4)
    if tol is not None:
        ts, fs = topt.state[tx], fopt.state[fx]
        assert (fs["func_evals"], fs["n_iter"]) == (ts["func_evals"], ts["n_iter"])
    if line_search_fn:
        np.testing.assert_allclose(fx.detach().numpy(), [1.0, 1.0], atol=1e-3)


def test_lbfgs_with_autograd_converges_on_rosenbrock():
    xy = fl.tensor([-1.5, 2.0], dtype=fl.float64, requires_grad=True)
    opt = optim.LBFGS([xy], line_search_fn="strong_wolfe", max_iter=50)

    def closure():
        opt.zero_grad()
        loss = (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2
        loss.backward()
        return loss

    for _ in range(4):
        opt.step(closure)
    np.testing.assert_allclose(xy.detach().numpy(), [1.0, 1.0], atol=1e-4)


def test_lbfgs_rejects_param_groups_and_unknown_line_search():
    a, b = fl.ones(2, requires_grad=True), fl.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = optim.LBFGS([a], line_search_fn="armijo")

    def closure():
        opt.zero_grad()
        loss = (a * a).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)


def test_no_warnings_during_steps():
    init, grads = _problem(np.float32, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name, kw in CONFIGS[::3]:
            params = [fl.tensor(a, requires_grad=True) for a in init]
            opt = getattr(optim, name)(params, **kw)
            for k in range(2):
                for p, g in zip(params, grads[k]):
                    p.grad = fl.tensor(np.zeros_like(g))  # zero gradients: 0/0 guarded by eps
                opt.step()
