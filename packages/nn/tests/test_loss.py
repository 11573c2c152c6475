"""Loss modules and nn.functional losses against torch: outputs and gradients for every option."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(5)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}
REDUCTIONS = ["none", "mean", "sum"]


def close(x, y, dtype):
    x = x.detach().numpy() if isinstance(x, fl.Tensor) else x
    y = y.detach().numpy() if isinstance(y, torch.Tensor) else y
    assert x.shape == y.shape
    tol = TOL[dtype]
    np.testing.assert_allclose(x, y, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, float(np.abs(y).max(initial=0))))


def run_both(ours, theirs, arrays, grad_of, dtype):
    """Call both losses on the same arrays; compare the loss and the gradients of ``grad_of`` arguments."""
    fa = [fl.from_numpy(np.asarray(a).copy()) for a in arrays]
    ta = [torch.from_numpy(np.asarray(a).copy()) for a in arrays]
    for i in grad_of:
        fa[i].requires_grad_(True)
        ta[i].requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y, ty = ours(*fa), theirs(*ta)
    close(y, ty, dtype)
    go = RNG.standard_normal(ty.shape).astype(dtype)
    y.backward(fl.from_numpy(go.copy()))
    ty.backward(torch.from_numpy(go.copy()))
    for i in grad_of:
        close(fa[i].grad, ta[i].grad, dtype)


def make(name, *args, **kwargs):
    """The same loss module in flambeau and torch (tensor arguments converted)."""
    conv = lambda v, lib: (lib.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v)  # noqa: E731
    ours = getattr(nn, name)(*[conv(a, fl) for a in args], **{k: conv(v, fl) for k, v in kwargs.items()})
    theirs = getattr(torch.nn, name)(*[conv(a, torch) for a in args], **{k: conv(v, torch) for k, v in kwargs.items()})
    return ours, theirs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", [{}, {"weight": True, "ignore_index": 1}, {"label_smoothing": 0.15},
                                     {"weight": True, "label_smoothing": 0.3, "ignore_index": 0}], ids=str)
@pytest.mark.parametrize("shapes", [((6, 5), (6,)), ((2, 5, 3), (2, 3))], ids=str)
def test_cross_entropy_loss_module(dtype, reduction, options, shapes):
    xs, ts = shapes
    kwargs = dict(options)
    if kwargs.pop("weight", False):
        kwargs["weight"] = RNG.uniform(0.2, 2, 5).astype(dtype)
    ours, theirs = make("CrossEntropyLoss", reduction=reduction, **kwargs)
    x = RNG.standard_normal(xs).astype(dtype) * 3
    t = RNG.integers(0, 5, ts)
    run_both(ours, theirs, [x, t], (0,), dtype)
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_with_probabilities_gradients_flow_to_target(dtype, reduction):
    ours, theirs = make("CrossEntropyLoss", reduction=reduction, label_smoothing=0.1,
                        weight=RNG.uniform(0.2, 2, 4).astype(dtype))
    x = RNG.standard_normal((3, 4)).astype(dtype)
    p = RNG.uniform(0, 1, (3, 4)).astype(dtype)
    run_both(ours, theirs, [x, p / p.sum(1, keepdims=True)], (0, 1), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_module(dtype, reduction, weighted):
    kwargs = {"weight": RNG.uniform(0.2, 2, 5).astype(dtype)} if weighted else {}
    ours, theirs = make("NLLLoss", reduction=reduction, ignore_index=2, **kwargs)
    x = RNG.standard_normal((7, 5)).astype(dtype)
    run_both(ours, theirs, [x, RNG.integers(0, 5, 7)], (0,), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kwargs", [("MSELoss", {}), ("L1Loss", {}), ("SmoothL1Loss", {"beta": 0.5}),
                                         ("SmoothL1Loss", {"beta": 0.0}), ("HuberLoss", {"delta": 0.7})], ids=str)
def test_regression_loss_modules(dtype, reduction, name, kwargs):
    ours, theirs = make(name, reduction=reduction, **kwargs)
    x, t = RNG.standard_normal((4, 6)).astype(dtype), RNG.standard_normal((4, 6)).astype(dtype)
    run_both(ours, theirs, [x, t], (0, 1), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_loss_module(dtype, reduction, weighted):
    kwargs = {"weight": RNG.uniform(0.2, 2, 6).astype(dtype)} if weighted else {}
    ours, theirs = make("BCELoss", reduction=reduction, **kwargs)
    x, t = RNG.uniform(0.05, 0.95, (4, 6)).astype(dtype), RNG.uniform(0, 1, (4, 6)).astype(dtype)
    run_both(ours, theirs, [x, t], (0, 1), dtype)
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", [{}, {"weight": (6,)}, {"pos_weight": (6,)},
                                     {"weight": (4, 1), "pos_weight": (6,)}], ids=str)
def test_bce_with_logits_loss_module(dtype, reduction, options):
    kwargs = {k: RNG.uniform(0.2, 2, v).astype(dtype) for k, v in options.items()}
    ours, theirs = make("BCEWithLogitsLoss", reduction=reduction, **kwargs)
    x, t = RNG.standard_normal((4, 6)).astype(dtype) * 5, RNG.uniform(0, 1, (4, 6)).astype(dtype)
    run_both(ours, theirs, [x, t], (0, 1), dtype)
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "batchmean", "sum"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_loss_module(dtype, reduction, log_target):
    ours, theirs = make("KLDivLoss", reduction=reduction, log_target=log_target)
    x = np.log(RNG.uniform(0.05, 1, (3, 5))).astype(dtype)
    t = RNG.uniform(0.05, 1, (3, 5)).astype(dtype)
    run_both(ours, theirs, [x, np.log(t) if log_target else t], (0, 1), dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
@pytest.mark.parametrize("shape", [(5, 4), (4,)], ids=str)
def test_cosine_embedding_loss_module(reduction, margin, shape):
    ours, theirs = make("CosineEmbeddingLoss", margin=margin, reduction=reduction)
    target = np.array([1, -1, 1, -1, -1][: shape[0]]) if len(shape) == 2 else np.array(-1)
    a, b = RNG.standard_normal(shape), RNG.standard_normal(shape)
    run_both(ours, theirs, [a, b, target], (0, 1), np.float64)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_margin_ranking_loss_module(reduction, margin):
    ours, theirs = make("MarginRankingLoss", margin=margin, reduction=reduction)
    a, b = RNG.standard_normal(6), RNG.standard_normal(6)
    run_both(ours, theirs, [a, b, np.array([1.0, -1, 1, -1, 1, 1])], (0, 1), np.float64)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", [{}, {"p": 1.0}, {"swap": True, "margin": 2.0}, {"p": 3.0, "eps": 1e-3}], ids=str)
def test_triplet_margin_loss_module(reduction, options):
    ours, theirs = make("TripletMarginLoss", reduction=reduction, **options)
    a, p, n = (RNG.standard_normal((5, 4)) for _ in range(3))
    run_both(ours, theirs, [a, p, n], (0, 1, 2), np.float64)


def test_legacy_size_average_and_reduce():
    x, t = fl.randn(3, 4), fl.randn(3, 4)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        m = nn.MSELoss(size_average=False)
    assert m.reduction == "sum"
    with pytest.warns(UserWarning):
        assert F.l1_loss(x, t, reduce=False).shape == (3, 4)


def test_functional_weighted_regression_losses():
    x, t, w = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4)), RNG.uniform(0, 2, (3, 4))
    for name in ("mse_loss", "l1_loss", "huber_loss"):
        for reduction in REDUCTIONS:
            y = getattr(F, name)(fl.tensor(x), fl.tensor(t), reduction=reduction, weight=fl.tensor(w))
            ty = getattr(TF, name)(torch.tensor(x), torch.tensor(t), reduction=reduction, weight=torch.tensor(w))
            close(y, ty, np.float64)


def test_kl_div_mean_warns_like_torch():
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(fl.randn(3, 4), fl.rand(3, 4))


def test_loss_module_errors():
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater than 0"):
        nn.TripletMarginLoss(margin=0)
    with pytest.raises(IndexError, match="Target 12 is out of bounds."):
        nn.CrossEntropyLoss()(fl.randn(4, 10), fl.tensor([1, 2, 12, 3]))
    with pytest.raises(ValueError, match="margin must be greater than 0, got -1"):
        F.triplet_margin_loss(fl.randn(3, 4), fl.randn(3, 4), fl.randn(3, 4), margin=-1)
    with pytest.raises(RuntimeError, match="All input tensors should have same dimension"):
        F.margin_ranking_loss(fl.randn(3), fl.randn(3), fl.ones(3, 1))


def test_loss_weights_are_buffers_that_follow_dtype():
    m = nn.CrossEntropyLoss(weight=fl.ones(3)).double()
    assert m.weight.dtype == fl.float64
    assert [name for name, _ in m.named_buffers()] == ["weight"]
    m2 = nn.BCEWithLogitsLoss(pos_weight=fl.ones(3))
    assert list(m2.state_dict()) == ["pos_weight"]


@pytest.mark.parametrize("name", ["cross_entropy", "cross_entropy_smooth", "nll_loss", "bce_logits", "mse"])
def test_double_backward_of_losses(name):
    x = fl.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    t = fl.tensor([0, 3, 4, 1])
    w = fl.tensor(RNG.uniform(0.2, 2, 5))
    y = fl.tensor(RNG.uniform(0, 1, (4, 5)))
    fns = {
        "cross_entropy": lambda x: F.cross_entropy(x, t, w, ignore_index=3),
        "cross_entropy_smooth": lambda x: F.cross_entropy(x, t, label_smoothing=0.2, reduction="sum"),
        "nll_loss": lambda x: F.nll_loss(x.log_softmax(1), t, w),
        "bce_logits": lambda x: F.binary_cross_entropy_with_logits(x, y, pos_weight=w),
        "mse": lambda x: F.mse_loss(x, y) * F.mse_loss(x, y),
    }
    assert gradcheck(fns[name], (x,))
    assert gradgradcheck(fns[name], (x,))
