"""Loss operators against torch: every option, float32/float64, non-contiguous inputs and errors.

cross_entropy's fused backward operator is called directly (``OPS["cross_entropy_backward"].fn``)
with the statistics its forward kernel returns; torch's autograd gives the reference gradient.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops import OPS

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}
RNG = np.random.default_rng(11)
REDUCTIONS = ["none", "mean", "sum"]


def arr(shape, dtype, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def layout(a: np.ndarray, kind: str) -> fl.Tensor:
    """``a`` as a flambeau tensor: contiguous, or (2-D and up) the same values in a transposed layout."""
    if kind == "contiguous" or a.ndim < 2:
        return fl.from_numpy(a.copy())
    perm = tuple(reversed(range(a.ndim)))
    return fl.from_numpy(np.ascontiguousarray(a.transpose(perm))).permute(*perm)


def close(x, y, dtype):
    x = x.numpy() if isinstance(x, fl.Tensor) else x
    y = y.detach().numpy() if isinstance(y, torch.Tensor) else y
    assert x.shape == y.shape
    tol = TOL[dtype]
    np.testing.assert_allclose(x, y, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, float(np.abs(y).max(initial=0))))


def targets(shape, c, ignore=None):
    t = RNG.integers(0, c, size=shape)
    if ignore is not None and t.size:
        t.flat[:: 3] = ignore
    return t


def fl_t(a):
    return None if a is None else fl.from_numpy(np.asarray(a).copy())


def th_t(a):
    return None if a is None else torch.from_numpy(np.asarray(a).copy())


# --- nll_loss / cross_entropy --------------------------------------------------------------------------------
CLASS_SHAPES = [((5, 7), (5,)), ((7,), ()), ((3, 4, 2, 3), (3, 2, 3)), ((0, 4), (0,))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", CLASS_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 2])
def test_nll_loss(dtype, shapes, reduction, weighted, ignore):
    xs, ts = shapes
    c = xs[0] if len(xs) == 1 else xs[1]
    x, t = arr(xs, dtype), targets(ts, c, ignore)
    w = arr(c, dtype, 0.1, 2.0) if weighted else None
    ii = -100 if ignore is None else ignore
    y = fl.nll_loss(fl_t(x), fl_t(t), fl_t(w), ii, reduction)
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    ty = F.nll_loss(tx, th_t(t), th_t(w), ignore_index=ii, reduction=reduction)
    close(y, ty, dtype)
    assert y.dtype == fl.from_numpy(x).dtype
    go = arr(ty.shape, dtype)
    ty.backward(torch.from_numpy(go))
    _, total = OPS["nll_loss"].kernel("cpu")(x, t, w, ii, reduction)
    gx = OPS["nll_loss_backward"].fn(fl_t(go), fl_t(x), fl_t(t), fl_t(w), ii, reduction, fl_t(total))
    close(gx, tx.grad, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", CLASS_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", [{}, {"weight": True}, {"ignore": 1, "kind": "transposed"}, {"smoothing": 0.2},
                                     {"weight": True, "ignore": 0, "smoothing": 0.3, "kind": "transposed"}], ids=str)
def test_cross_entropy_class_indices_forward_and_backward(dtype, shapes, reduction, options):
    xs, ts = shapes
    kind = options.get("kind", "contiguous")
    c = xs[0] if len(xs) == 1 else xs[1]
    x, t = arr(xs, dtype, -4, 4), targets(ts, c, options.get("ignore"))
    w = arr(c, dtype, 0.1, 2.0) if options.get("weight") else None
    ii = options.get("ignore", -100)
    ls = options.get("smoothing", 0.0)
    y = fl.cross_entropy(layout(x, kind), fl_t(t), fl_t(w), ii, reduction, ls)
    tx = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    ty = F.cross_entropy(tx, th_t(t), None if w is None else th_t(w.astype(np.float64)), ignore_index=ii,
                         reduction=reduction, label_smoothing=ls)
    close(y, ty, dtype)
    go = arr(ty.shape, dtype)
    ty.backward(torch.from_numpy(go.astype(np.float64)))
    _, lse, total = OPS["cross_entropy"].kernel("cpu")(x, t, w, ii, reduction, ls)
    gx = OPS["cross_entropy_backward"].fn(fl_t(go), layout(x, kind), fl_t(t), fl_t(w), ii, reduction, ls,
                                          fl_t(lse), fl_t(total))
    close(gx, tx.grad, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs", [(4, 6), (6,), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_probabilities(dtype, xs, reduction, weighted, smoothing):
    c = xs[0] if len(xs) == 1 else xs[1]
    x = arr(xs, dtype)
    p = np.exp(arr(xs, dtype))
    p = (p / p.sum(axis=0 if len(xs) == 1 else 1, keepdims=True)).astype(dtype)
    w = arr(c, dtype, 0.1, 2.0) if weighted else None
    y = fl.cross_entropy(fl_t(x), fl_t(p), fl_t(w), reduction=reduction, label_smoothing=smoothing)
    ty = F.cross_entropy(th_t(x), th_t(p), th_t(w), reduction=reduction, label_smoothing=smoothing)
    close(y, ty, dtype)


def test_cross_entropy_large_logits_are_stable():
    x = np.array([[1000.0, 0.0, -1000.0], [-1e4, -1e4, -1e4 + 1]], np.float32)
    t = np.array([0, 2])
    close(fl.cross_entropy(fl_t(x), fl_t(t), reduction="none"), F.cross_entropy(th_t(x), th_t(t), reduction="none"),
          np.float32)


def test_all_targets_ignored_gives_nan_mean_and_zero_sum():
    x, t = fl.randn(3, 4), fl.tensor([-100, -100, -100])
    for fn in (fl.nll_loss, fl.cross_entropy):
        assert np.isnan(fn(x, t).item())
        assert fn(x, t, reduction="sum").item() == 0


def test_uint8_targets():
    x = arr((4, 5), np.float32)
    t = np.array([1, 0, 4, 2], np.uint8)
    close(fl.nll_loss(fl_t(x), fl_t(t)), F.nll_loss(th_t(x), th_t(t)), np.float32)


def test_class_loss_errors():
    x = fl.randn(4, 10)
    for fn in (fl.nll_loss, fl.cross_entropy):
        with pytest.raises(IndexError, match="Target 12 is out of bounds."):
            fn(x, fl.tensor([1, 2, 12, 3]))
        with pytest.raises(IndexError, match="Target -1 is out of bounds."):
            fn(x, fl.tensor([1, 2, -1, 3]))
        with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match target batch_size \(3\)."):
            fn(x, fl.tensor([1, 2, 3]))
        with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
            fn(x, fl.tensor([1, 2, 3, 3], dtype=fl.int32))
        with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 10 classes or no "
                                               r"classes but got weight tensor of shape: \[3\]"):
            fn(x, fl.tensor([1, 2, 3, 3]), fl.ones(3))
        with pytest.raises(RuntimeError, match=r"size mismatch \(got input: \[4, 10, 2, 2\] , target: \[4, 2, 3\]"):
            fn(fl.randn(4, 10, 2, 2), fl.zeros(4, 2, 3, dtype=fl.int64))
        with pytest.raises(RuntimeError, match="0D or 1D target tensor expected, multi-target not supported"):
            fn(x, fl.zeros(4, 2, dtype=fl.int64))
        with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
            fn(x, fl.tensor([1, 2, 3, 3]), reduction="foo")
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Float"):
        fl.nll_loss(x, fl.tensor([1.0, 2, 3, 3]))
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point target"):
        fl.cross_entropy(x, fl.softmax(fl.randn(4, 10), 1), ignore_index=3)
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0. Got: 1.5"):
        fl.cross_entropy(x, fl.tensor([1, 2, 3, 3]), label_smoothing=1.5)


# --- binary cross-entropy ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [None, (5,), (3, 5)], ids=str)
@pytest.mark.parametrize("kind", ["contiguous", "transposed"])
def test_binary_cross_entropy(dtype, reduction, weight, kind):
    x, t = arr((3, 5), dtype, 0.0, 1.0), arr((3, 5), dtype, 0.0, 1.0)
    x[0, :2] = [0.0, 1.0]  # log clamped at -100 as torch does
    w = None if weight is None else arr(weight, dtype, 0.0, 2.0)
    y = fl.binary_cross_entropy(layout(x, kind), layout(t, kind), fl_t(w), reduction)
    close(y, F.binary_cross_entropy(th_t(x), th_t(t), th_t(w), reduction=reduction), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [None, (5,)], ids=str)
@pytest.mark.parametrize("pos_weight", [None, (5,), (3, 1)], ids=str)
def test_binary_cross_entropy_with_logits(dtype, reduction, weight, pos_weight):
    x, t = arr((3, 5), dtype, -30, 30), arr((3, 5), dtype, 0.0, 1.0)
    w = None if weight is None else arr(weight, dtype, 0.0, 2.0)
    pw = None if pos_weight is None else arr(pos_weight, dtype, 0.1, 3.0)
    y = fl.binary_cross_entropy_with_logits(layout(x, "transposed"), fl_t(t), fl_t(w), fl_t(pw), reduction)
    ty = F.binary_cross_entropy_with_logits(th_t(x), th_t(t), th_t(w), reduction=reduction, pos_weight=th_t(pw))
    close(y, ty, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_large_fused_pointwise_losses(dtype, reduction):
    """mse_loss and binary_cross_entropy_with_logits of large contiguous operands run one fused pass
    (Note [Fused pointwise losses]): the float64 reference of torch within a few ulps of the sum, logits
    from -60 to 60, zeros and tiny values; NaN propagates; weights keep numpy's path."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(200_003) * 6).astype(dtype)
    x[:6] = [0.0, -0.0, 1e-8, -1e-8, 60.0, -60.0]
    t = rng.random(200_003).astype(dtype)
    t[::3] = np.round(t[::3])
    tol = 1e-6 if dtype == np.float32 else 1e-13
    for name in ("binary_cross_entropy_with_logits", "mse_loss"):
        got = getattr(fl.nn.functional, name)(fl.from_numpy(x), fl.from_numpy(t), reduction=reduction)
        want = getattr(F, name)(torch.from_numpy(x).double(), torch.from_numpy(t).double(), reduction=reduction)
        assert got.dtype == fl.from_numpy(x).dtype and got.shape == ()
        np.testing.assert_allclose(got.item(), want.item(), rtol=tol)
        bad = x.copy()
        bad[1234] = np.nan
        bad_loss = getattr(fl.nn.functional, name)(fl.from_numpy(bad), fl.from_numpy(t), reduction=reduction)
        assert np.isnan(bad_loss.item())
    w = rng.random(200_003).astype(dtype)
    got = fl.nn.functional.binary_cross_entropy_with_logits(fl.from_numpy(x), fl.from_numpy(t), fl.from_numpy(w))
    want = F.binary_cross_entropy_with_logits(torch.from_numpy(x).double(), torch.from_numpy(t).double(),
                                              torch.from_numpy(w).double())
    np.testing.assert_allclose(got.item(), want.item(), rtol=tol)


def test_binary_losses_errors():
    with pytest.raises(ValueError, match=r"Using a target size \(flambeau.Size\(\[2, 3\]\)\) that is different to "
                                         r"the input size \(flambeau.Size\(\[3\]\)\) is deprecated"):
        fl.binary_cross_entropy(fl.rand(3), fl.rand(2, 3))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        fl.binary_cross_entropy(fl.rand(3) + 1, fl.rand(3))
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        fl.binary_cross_entropy(fl.rand(3), fl.rand(3, dtype=fl.float64))
    with pytest.raises(ValueError, match=r"Target size \(flambeau.Size\(\[2, 3\]\)\) must be the same as input size"):
        fl.binary_cross_entropy_with_logits(fl.rand(3), fl.rand(2, 3))
    with pytest.raises(RuntimeError, match="The size of tensor a"):
        fl.binary_cross_entropy_with_logits(fl.rand(3), fl.rand(3), pos_weight=fl.rand(2))


# --- regression losses and kl_div ----------------------------------------------------------------------------
POINTWISE = {
    "mse_loss": (lambda x, t, r: fl.mse_loss(x, t, r), lambda x, t, r: F.mse_loss(x, t, reduction=r)),
    "l1_loss": (lambda x, t, r: fl.l1_loss(x, t, r), lambda x, t, r: F.l1_loss(x, t, reduction=r)),
    "smooth_l1_loss": (lambda x, t, r: fl.smooth_l1_loss(x, t, r, 0.7),
                       lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.7)),
    "smooth_l1_loss#beta0": (lambda x, t, r: fl.smooth_l1_loss(x, t, r, 0.0),
                             lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0)),
    "huber_loss": (lambda x, t, r: fl.huber_loss(x, t, r, 0.6), lambda x, t, r: F.huber_loss(x, t, reduction=r,
                                                                                              delta=0.6)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(POINTWISE))
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,kind", [((4, 5), "contiguous"), ((4, 5), "transposed"), ((), "contiguous"),
                                        ((0, 3), "contiguous")], ids=str)
def test_pointwise_losses(dtype, name, reduction, shape, kind):
    x, t = arr(shape, dtype), arr(shape, dtype)
    fn, ref = POINTWISE[name]
    y = fn(layout(x, kind), layout(t, kind), reduction)
    ty = ref(th_t(x), th_t(t), reduction)
    if reduction == "mean" and not x.size:
        assert np.isnan(y.item()) and np.isnan(ty.item())
        return
    close(y, ty, dtype)


def test_pointwise_losses_broadcast_with_warning_and_promote():
    x, t = arr((3, 4), np.float32), arr((4,), np.float64)
    with pytest.warns(UserWarning, match="Using a target size"):
        y = fl.mse_loss(fl_t(x), fl_t(t))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = F.mse_loss(th_t(x), th_t(t))
    assert y.dtype == fl.float64
    close(y, ty, np.float64)


def test_pointwise_losses_errors():
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\) at "
                                           "non-singleton dimension 0"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fl.l1_loss(fl.rand(3), fl.rand(4))
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta."):
        fl.smooth_l1_loss(fl.rand(3), fl.rand(3), beta=-1)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values for delta."):
        fl.huber_loss(fl.rand(3), fl.rand(3), delta=0)
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        fl.mse_loss(fl.rand(3), fl.rand(3), reduction="bad")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "batchmean", "sum"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(dtype, reduction, log_target):
    x = np.log(arr((3, 4), dtype, 0.05, 1.0))
    t = arr((3, 4), dtype, 0.0, 1.0)
    t[0, 0] = 0.0
    if log_target:
        t = np.log(t + 0.1).astype(dtype)
    y = fl.kl_div(fl_t(x), fl_t(t), reduction, log_target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = F.kl_div(th_t(x), th_t(t), reduction=reduction, log_target=log_target)
    close(y, ty, dtype)


@pytest.mark.parametrize("case", ["logits", "probs", "weighted logits", "none", "sum"])
def test_binary_cross_entropy_of_zero_dim_tensors(case):
    # numpy's ufuncs gave the CPU kernels scalars for 0-dim arrays ("return arrays must be of ArrayType")
    def loss(lib, x, t):
        F = lib.nn.functional
        if case == "logits":
            return F.binary_cross_entropy_with_logits(x, t)
        if case == "probs":
            return F.binary_cross_entropy(x.sigmoid(), t)
        if case == "weighted logits":
            return F.binary_cross_entropy_with_logits(x, t, weight=lib.tensor(0.5, dtype=lib.float64),
                                                      pos_weight=lib.tensor(3.0, dtype=lib.float64))
        if case == "none":
            return F.binary_cross_entropy(x.sigmoid(), t, reduction="none")
        return F.binary_cross_entropy_with_logits(x, t, reduction="sum")

    results = []
    for lib in (fl, torch):
        x, t = lib.tensor(0.3, dtype=lib.float64, requires_grad=True), lib.tensor(1.0, dtype=lib.float64)
        value = loss(lib, x, t)
        value.backward()
        results.append((tuple(value.shape), value.item(), x.grad.item()))
    assert results[0][0] == results[1][0]
    np.testing.assert_allclose(results[0][1:], results[1][1:], rtol=1e-12)
