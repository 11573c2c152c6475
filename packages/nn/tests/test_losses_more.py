"""The losses of issue 13 against torch: CTC, Gaussian/Poisson NLL and the margin losses (values, gradients,
reductions, errors), functional forms and modules."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(13)


def _both(arrays, grad=(True,)):
    """The arrays as torch and flambeau tensors (float64; ints stay ints); ``grad[i]``: requires_grad."""
    ours, theirs = [], []
    for i, a in enumerate(arrays):
        g = bool(grad[i]) if i < len(grad) and np.issubdtype(a.dtype, np.floating) else False
        theirs.append(torch.tensor(a, requires_grad=g))
        ours.append(fl.tensor(a, requires_grad=g))
    return ours, theirs


def _compare(ours_fn, theirs_fn, arrays, grad=(True,), atol=1e-10):
    """Outputs and the gradients (of a weighted sum of the output) of every float input."""
    ours, theirs = _both(arrays, grad)
    r = theirs_fn(*theirs)
    q = ours_fn(*ours)
    assert tuple(q.shape) == tuple(r.shape)
    assert str(q.dtype).split(".")[-1] == str(r.dtype).split(".")[-1]
    np.testing.assert_allclose(q.detach().numpy(), r.detach().numpy(), rtol=1e-9, atol=atol)
    w = np.linspace(0.5, 1.5, max(r.numel(), 1)).reshape(tuple(r.shape))
    (r * torch.tensor(w)).sum().backward()
    (q * fl.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        if b.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=atol)


# --- CTC ----------------------------------------------------------------------------------------------
T_, N_, C_, S_ = 10, 4, 5, 4
LOGITS = RNG.standard_normal((T_, N_, C_))
TARGETS = RNG.integers(1, C_, (N_, S_))
TARGET_LENGTHS = np.array([4, 2, 3, 0])
INPUT_LENGTHS = np.array([10, 9, 5, 7])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_padded_targets(reduction):
    def ours(x):
        return F.ctc_loss(x.log_softmax(2), fl.tensor(TARGETS), fl.tensor(INPUT_LENGTHS), fl.tensor(TARGET_LENGTHS),
                          reduction=reduction)

    def theirs(x):
        return TF.ctc_loss(x.log_softmax(2), torch.tensor(TARGETS), torch.tensor(INPUT_LENGTHS),
                           torch.tensor(TARGET_LENGTHS), reduction=reduction)

    _compare(ours, theirs, [LOGITS])


def test_ctc_concatenated_targets_blank_and_tuples():
    blank = 2
    targets = RNG.integers(0, C_ - 1, (N_, S_))
    targets[targets >= blank] += 1  # no blank in the targets
    flat = np.concatenate([targets[n, :TARGET_LENGTHS[n]] for n in range(N_)])

    def ours(x):
        return F.ctc_loss(x.log_softmax(2), fl.tensor(flat), tuple(INPUT_LENGTHS), tuple(TARGET_LENGTHS), blank=blank,
                          reduction="none")

    def theirs(x):
        return TF.ctc_loss(x.log_softmax(2), torch.tensor(flat), tuple(INPUT_LENGTHS), tuple(TARGET_LENGTHS),
                           blank=blank, reduction="none")

    _compare(ours, theirs, [LOGITS])


def test_ctc_unbatched_and_module():
    x = LOGITS[:, 0]
    _compare(lambda a: nn.CTCLoss(reduction="sum")(a.log_softmax(1), fl.tensor(TARGETS[0]), (10,), (4,)),
             lambda a: torch.nn.CTCLoss(reduction="sum")(a.log_softmax(1), torch.tensor(TARGETS[0]), (10,), (4,)), [x])
    _compare(lambda a: F.ctc_loss(a.log_softmax(1), fl.tensor(TARGETS[0, :3]), (10,), (3,), reduction="none"),
             lambda a: TF.ctc_loss(a.log_softmax(1), torch.tensor(TARGETS[0, :3]), (10,), (3,), reduction="none"), [x])
    with pytest.raises(RuntimeError, match="Expected tensor to have size 3 at dimension 0"):
        F.ctc_loss(fl.tensor(x).log_softmax(1), fl.tensor(TARGETS[0]), (10,), (3,))


def test_ctc_impossible_alignment_and_zero_infinity():
    lengths = np.array([3, 9, 5, 7])  # sample 0: 4 labels cannot fit in 3 steps
    ours = F.ctc_loss(fl.tensor(LOGITS).log_softmax(2), fl.tensor(TARGETS), fl.tensor(lengths),
                      fl.tensor(TARGET_LENGTHS), reduction="none")
    theirs = TF.ctc_loss(torch.tensor(LOGITS).log_softmax(2), torch.tensor(TARGETS), torch.tensor(lengths),
                         torch.tensor(TARGET_LENGTHS), reduction="none")
    assert math.isinf(ours[0].item()) and math.isinf(theirs[0].item())
    np.testing.assert_allclose(ours.numpy()[1:], theirs.numpy()[1:], rtol=1e-10)

    def ours_fn(x):
        return nn.CTCLoss(zero_infinity=True)(x.log_softmax(2), fl.tensor(TARGETS), fl.tensor(lengths),
                                              fl.tensor(TARGET_LENGTHS))

    def theirs_fn(x):
        return torch.nn.CTCLoss(zero_infinity=True)(x.log_softmax(2), torch.tensor(TARGETS), torch.tensor(lengths),
                                                    torch.tensor(TARGET_LENGTHS))

    _compare(ours_fn, theirs_fn, [LOGITS])


def test_ctc_float32_and_errors():
    x = LOGITS.astype(np.float32)
    q = F.ctc_loss(fl.tensor(x).log_softmax(2), fl.tensor(TARGETS), fl.tensor(INPUT_LENGTHS), fl.tensor(TARGET_LENGTHS))
    r = TF.ctc_loss(torch.tensor(x).log_softmax(2), torch.tensor(TARGETS), torch.tensor(INPUT_LENGTHS),
                    torch.tensor(TARGET_LENGTHS))
    assert q.dtype == fl.float32
    np.testing.assert_allclose(q.item(), r.item(), rtol=1e-5)
    lp = fl.tensor(x).log_softmax(2)
    with pytest.raises(RuntimeError, match="blank"):
        F.ctc_loss(lp, fl.tensor(TARGETS), fl.tensor(INPUT_LENGTHS), fl.tensor(TARGET_LENGTHS), blank=C_)
    with pytest.raises(RuntimeError, match="input_lengths"):
        F.ctc_loss(lp, fl.tensor(TARGETS), fl.tensor(INPUT_LENGTHS + 1), fl.tensor(TARGET_LENGTHS))
    with pytest.raises(ValueError, match="reduction"):
        F.ctc_loss(lp, fl.tensor(TARGETS), fl.tensor(INPUT_LENGTHS), fl.tensor(TARGET_LENGTHS), reduction="avg")


# --- the other losses -------------------------------------------------------------------------------------
X = RNG.standard_normal((5, 4))
Y = RNG.standard_normal((5, 4))
SIGNS = np.where(RNG.random((5, 4)) < 0.5, -1.0, 1.0)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll(reduction, full):
    var = RNG.random((5, 4)) + 0.1
    var[0, 0] = 1e-9  # clamped to eps; the gradient still flows
    _compare(lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=full, reduction=reduction),
             lambda a, b, v: TF.gaussian_nll_loss(a, b, v, full=full, reduction=reduction), [X, Y, var], (1, 1, 1))
    hom = RNG.random(5) + 0.1  # one dimension short: homoscedastic
    _compare(lambda a, v: nn.GaussianNLLLoss(reduction=reduction)(a, fl.tensor(Y), v),
             lambda a, v: torch.nn.GaussianNLLLoss(reduction=reduction)(a, torch.tensor(Y), v), [X, hom], (1, 1))
    _compare(lambda a, v: F.gaussian_nll_loss(a, fl.tensor(Y), v),
             lambda a, v: TF.gaussian_nll_loss(a, torch.tensor(Y), v),
             [X, hom[:, None]], (1, 1))


def test_gaussian_nll_errors():
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(fl.tensor(X), fl.tensor(Y), fl.tensor(-np.ones((5, 4))))
    with pytest.raises(ValueError, match="incorrect size"):
        F.gaussian_nll_loss(fl.tensor(X), fl.tensor(Y), fl.ones(3))
    with pytest.raises(ValueError, match="is not valid"):
        F.gaussian_nll_loss(fl.tensor(X), fl.tensor(Y), fl.ones(5, 4), reduction="x")


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_sign_target_losses(reduction):
    _compare(lambda a: F.hinge_embedding_loss(a, fl.tensor(SIGNS), margin=0.5, reduction=reduction),
             lambda a: TF.hinge_embedding_loss(a, torch.tensor(SIGNS), margin=0.5, reduction=reduction), [X])
    _compare(lambda a: nn.SoftMarginLoss(reduction=reduction)(a, fl.tensor(SIGNS)),
             lambda a: torch.nn.SoftMarginLoss(reduction=reduction)(a, torch.tensor(SIGNS)), [X])
    _compare(lambda a: nn.HingeEmbeddingLoss(reduction=reduction)(a, fl.tensor(SIGNS)),
             lambda a: torch.nn.HingeEmbeddingLoss(reduction=reduction)(a, torch.tensor(SIGNS)), [X])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin(reduction, p):
    target = RNG.integers(0, 4, 5)
    weight = RNG.random(4) + 0.5
    _compare(lambda a, w: F.multi_margin_loss(a, fl.tensor(target), p=p, margin=0.7, weight=w, reduction=reduction),
             lambda a, w: TF.multi_margin_loss(a, torch.tensor(target), p=p, margin=0.7, weight=w, reduction=reduction),
             [X, weight], (1, 0))
    _compare(lambda a: nn.MultiMarginLoss(p=p, reduction=reduction)(a, fl.tensor(target[0])),
             lambda a: torch.nn.MultiMarginLoss(p=p, reduction=reduction)(a, torch.tensor(target[0])), [X[0]])


def test_multi_margin_errors():
    with pytest.raises(ValueError, match="p == 1"):
        F.multi_margin_loss(fl.tensor(X), fl.zeros(5, dtype=fl.int64), p=3)
    with pytest.raises(RuntimeError, match="out of range"):
        F.multi_margin_loss(fl.tensor(X), fl.full((5,), 4, dtype=fl.int64))
    with pytest.raises(ValueError, match="one-dimensional"):
        F.multi_margin_loss(fl.tensor(X), fl.zeros(5, dtype=fl.int64), weight=fl.ones(2, 2))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin(reduction):
    target = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [1, -1, 2, 0], [-1, 0, 0, 0], [2, 2, -1, 0]])
    _compare(lambda a: F.multilabel_margin_loss(a, fl.tensor(target), reduction=reduction),
             lambda a: TF.multilabel_margin_loss(a, torch.tensor(target), reduction=reduction), [X])
    _compare(lambda a: nn.MultiLabelMarginLoss(reduction=reduction)(a, fl.tensor(target[0])),
             lambda a: torch.nn.MultiLabelMarginLoss(reduction=reduction)(a, torch.tensor(target[0])), [X[0]])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_soft_margin_and_poisson(reduction):
    labels = (RNG.random((5, 4)) < 0.5).astype(np.float64)
    weight = RNG.random(4)
    _compare(lambda a: F.multilabel_soft_margin_loss(a, fl.tensor(labels), weight=fl.tensor(weight),
                                                     reduction=reduction),
             lambda a: TF.multilabel_soft_margin_loss(a, torch.tensor(labels), weight=torch.tensor(weight),
                                                      reduction=reduction), [X])
    _compare(lambda a: nn.MultiLabelSoftMarginLoss(reduction=reduction)(a, fl.tensor(labels)),
             lambda a: torch.nn.MultiLabelSoftMarginLoss(reduction=reduction)(a, torch.tensor(labels)), [X])
    counts = RNG.integers(0, 5, (5, 4)).astype(np.float64)
    for log_input in (True, False):
        for full in (False, True):
            inp = X if log_input else np.abs(X) + 0.1
            options = {"log_input": log_input, "full": full, "reduction": reduction}
            _compare(lambda a, o=options: F.poisson_nll_loss(a, fl.tensor(counts), **o),
                     lambda a, o=options: TF.poisson_nll_loss(a, torch.tensor(counts), **o), [inp])
    _compare(lambda a: nn.PoissonNLLLoss(reduction=reduction)(a, fl.tensor(counts)),
             lambda a: torch.nn.PoissonNLLLoss(reduction=reduction)(a, torch.tensor(counts)), [X])


def test_legacy_reduction_arguments():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = F.soft_margin_loss(fl.tensor(X), fl.tensor(SIGNS), size_average=False)
        r = TF.soft_margin_loss(torch.tensor(X), torch.tensor(SIGNS), size_average=False)
    np.testing.assert_allclose(q.item(), r.item(), rtol=1e-12)


@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance(swap):
    a, p, n = X, Y, RNG.standard_normal((5, 4))
    _compare(lambda *t: F.triplet_margin_with_distance_loss(*t, swap=swap),
             lambda *t: TF.triplet_margin_with_distance_loss(*t, swap=swap), [a, p, n], (1, 1, 1))

    def l1(x1, x2):
        return (x1 - x2).abs().sum(-1)

    _compare(lambda *t: nn.TripletMarginWithDistanceLoss(distance_function=l1, margin=2.0, swap=swap,
                                                         reduction="none")(*t),
             lambda *t: torch.nn.TripletMarginWithDistanceLoss(distance_function=l1, margin=2.0, swap=swap,
                                                               reduction="none")(*t), [a, p, n], (1, 1, 1))
    with pytest.raises(ValueError, match="margin"):
        F.triplet_margin_with_distance_loss(fl.tensor(a), fl.tensor(p), fl.tensor(n), margin=0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_with_distance_loss(fl.tensor(a), fl.tensor(p), fl.tensor(n[0]))


def test_nllloss2d_alias():
    logp = RNG.standard_normal((2, 3, 4, 4))
    target = RNG.integers(0, 3, (2, 4, 4))
    assert issubclass(nn.NLLLoss2d, nn.NLLLoss)
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        ours = nn.NLLLoss2d()
    with pytest.warns(FutureWarning):
        theirs = torch.nn.NLLLoss2d()
    _compare(lambda a: ours(a, fl.tensor(target)), lambda a: theirs(a, torch.tensor(target)), [logp])
