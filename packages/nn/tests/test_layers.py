"""Layers and nn.functional of NNCORE against torch: outputs, input and parameter gradients (torch's
weights copied into ours), train/eval behaviour, options, reprs, and initial distributions."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F

torch = pytest.importorskip("torch")
tnn = torch.nn
TF = torch.nn.functional

RNG = np.random.default_rng(11)


def _copy_params(ours: nn.Module, theirs) -> None:
    """Load torch's parameters and buffers into ours (through numpy copies)."""
    sd = {k: fl.from_numpy(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(sd)


def _check(ours, theirs, *arrays, dtype=np.float64, grad_inputs=True, rtol=None, kwargs=None):
    """Compare outputs and every gradient of ``ours(*inputs)`` and ``theirs(*inputs)``."""
    kwargs = kwargs or {}
    rtol = rtol or (1e-10 if dtype == np.float64 else 1e-5)
    xs = [fl.from_numpy(a.copy()) for a in arrays]
    txs = [torch.from_numpy(a.copy()) for a in arrays]
    if grad_inputs:
        for x, tx in zip(xs, txs):
            if x.dtype.is_floating_point:
                x.requires_grad_()
                tx.requires_grad_()
    out = ours(*xs, **kwargs)
    ref = theirs(*txs, **kwargs)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=rtol, atol=rtol)
    g = RNG.standard_normal(tuple(ref.shape)).astype(dtype)
    if out.requires_grad:
        out.backward(fl.from_numpy(g.copy()))
        ref.backward(torch.from_numpy(g.copy()))
        for x, tx in zip(xs, txs):
            if tx.grad is not None:
                np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=rtol)
        tparams = dict(theirs.named_parameters()) if isinstance(theirs, tnn.Module) else {}
        for name, p in (ours.named_parameters() if isinstance(ours, nn.Module) else []):
            tp = tparams[name]
            if tp.grad is None:
                assert p.grad is None or not p.grad.abs().sum().item()
            else:
                np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=rtol, atol=rtol, err_msg=name)
    return out, ref


def _arr(*shape, dtype=np.float64, scale=1.0):
    return np.asarray(RNG.standard_normal(shape) * scale).astype(dtype)


# --- linear ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 7), (7,), (2, 3, 7), (2, 2, 3, 7), (0, 7), (2, 0, 7)])
def test_linear(dtype, bias, shape):
    t = tnn.Linear(7, 4, bias=bias).to(torch.float64 if dtype == np.float64 else torch.float32)
    o = nn.Linear(7, 4, bias=bias).to(fl.float64 if dtype == np.float64 else fl.float32)
    _copy_params(o, t)
    _check(o, t, _arr(*shape, dtype=dtype), dtype=dtype)
    assert repr(o) == repr(t)


@pytest.mark.parametrize("x_shape,w_shape,b_shape", [
    ((2, 3, 4), (5, 4), (3, 5)),  # a bias of more than one dim broadcasts to the result
    ((2, 3, 4), (5, 4), (2, 1, 5)),
    ((3, 4), (5, 4), (1,)),
    ((4,), (5, 4), (5,)),
    ((2, 3, 4), (4,), None),
])
def test_functional_linear_biases_and_shapes(x_shape, w_shape, b_shape):
    arrays = [_arr(*x_shape), _arr(*w_shape)] + ([] if b_shape is None else [_arr(*b_shape)])
    _check(F.linear, TF.linear, *arrays)


def test_functional_linear_errors_are_torchs():
    for args in (((2, 3, 3), (4, 5), None), ((2, 3), (4, 3), (5,)), ((2, 3, 3), (4, 3), (2, 2, 4))):
        x, w, b = (None if s is None else _arr(*s) for s in args)
        with pytest.raises(RuntimeError) as theirs:
            TF.linear(*(torch.from_numpy(a) for a in (x, w, b) if a is not None))
        with pytest.raises(RuntimeError, match=re.escape(str(theirs.value).splitlines()[0])):
            F.linear(*(fl.from_numpy(a) for a in (x, w, b) if a is not None))


def test_linear_init_distribution():
    fl.manual_seed(0)
    m = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.mean()) < 3 * bound / math.sqrt(3) / math.sqrt(w.size)
    np.testing.assert_allclose(w.std(), bound / math.sqrt(3), rtol=0.02)
    b = m.bias.detach().numpy()
    assert np.abs(b).max() <= bound
    assert m.weight.requires_grad and isinstance(m.weight, nn.Parameter)
    assert nn.Linear(3, 2, dtype=fl.float64).weight.dtype is fl.float64
    assert list(nn.Linear(3, 2).state_dict()) == list(tnn.Linear(3, 2).state_dict())
    assert nn.Linear(3, 2, bias=False).bias is None


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear(bias):
    t = tnn.Bilinear(3, 4, 5, bias=bias).double()
    o = nn.Bilinear(3, 4, 5, bias=bias).double()
    _copy_params(o, t)
    _check(o, t, _arr(6, 3), _arr(6, 4))
    _check(o, t, _arr(2, 3, 3), _arr(2, 3, 4))
    assert repr(o) == repr(t)
    w = nn.Bilinear(10, 4, 50).weight.detach().numpy()
    assert np.abs(w).max() <= 1 / math.sqrt(10)
    with pytest.raises(RuntimeError, match="input1 size does not match"):
        o(fl.ones(2, 2, dtype=fl.float64), fl.ones(2, 4, dtype=fl.float64))


def test_identity_flatten_unflatten():
    x = _arr(2, 3, 4, 5)
    assert nn.Identity(1, a=2)(fl.from_numpy(x)) is not None
    for args in [(), (0,), (1, 2), (2, -1), (0, -2)]:
        o, t = nn.Flatten(*args), tnn.Flatten(*args)
        _check(o, t, x)
        assert repr(o) == repr(t)
    for dim, size in [(1, (3, 1)), (-1, (5, 1)), (2, [2, 2]), (1, (-1, 3))]:
        o, t = nn.Unflatten(dim, size), tnn.Unflatten(dim, size)
        _check(o, t, x)
        assert repr(o) == repr(t)
    with pytest.raises(TypeError, match="unflattened_size must be tuple of ints"):
        nn.Unflatten(1, (2.0, 3))
    with pytest.raises(TypeError, match="unflattened_size must be a tuple of ints, but found type int"):
        nn.Unflatten(1, 3)


# --- activations ------------------------------------------------------------------------------------
ACTIVATIONS = [
    ("ReLU", ()), ("ReLU", (True,)), ("ReLU6", ()), ("LeakyReLU", ()), ("LeakyReLU", (0.2, True)), ("ELU", ()),
    ("ELU", (0.5,)), ("GELU", ()), ("GELU", ("tanh",)), ("SiLU", ()), ("Mish", ()), ("Sigmoid", ()), ("Tanh", ()),
    ("Softmax", (1,)), ("Softmax", (-1,)), ("LogSoftmax", (0,)), ("Softmin", (1,)), ("Softplus", ()),
    ("Softplus", (2.0, 5.0)), ("Hardswish", ()), ("Hardsigmoid", ()), ("Hardtanh", ()), ("Hardtanh", (-2.0, 0.5)),
    ("SELU", ()), ("CELU", ()), ("CELU", (0.5,)), ("Softsign", ()), ("Tanhshrink", ()), ("Threshold", (0.1, 20.0)),
    ("Hardshrink", ()), ("Softshrink", (0.3,)), ("LogSigmoid", ()), ("GLU", ()), ("GLU", (1,)), ("Softmax2d", ()),
]


@pytest.mark.parametrize("name, args", ACTIVATIONS, ids=[f"{n}{a}" for n, a in ACTIVATIONS])
def test_activation_modules(name, args):
    o, t = getattr(nn, name)(*args), getattr(tnn, name)(*args)
    assert repr(o) == repr(t)
    x = _arr(3, 4, 2, 6, scale=3.0)
    inplace = bool(getattr(t, "inplace", False))
    if inplace:  # in-place forms: apply to a non-leaf so autograd accepts it
        xs, txs = fl.from_numpy(x.copy()).requires_grad_(), torch.from_numpy(x.copy()).requires_grad_()
        y, ty = o(xs * 1.0), t(txs * 1.0)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(xs.grad.numpy(), txs.grad.numpy(), rtol=1e-10)
    else:
        # torch's Hardsigmoid and CELU backward use float32 constants even for float64
        _check(o, t, x, rtol=1e-6 if name in ("Hardsigmoid", "CELU") else None)
        _check(o, t, x.astype(np.float32), dtype=np.float32, rtol=2e-5)


@pytest.mark.parametrize("num", [1, 4])
def test_prelu(num):
    o, t = nn.PReLU(num).double(), tnn.PReLU(num).double()
    with torch.no_grad():
        t.weight.uniform_(-0.5, 0.5)
    _copy_params(o, t)
    _check(o, t, _arr(3, 4, 5))
    _check(o, t, _arr(3, 4))
    assert repr(o) == repr(t)
    assert nn.PReLU(3, init=0.1).weight.tolist() == pytest.approx([0.1] * 3)


def test_rrelu():
    o = nn.RReLU(0.1, 0.3)
    assert repr(o) == repr(tnn.RReLU(0.1, 0.3))
    x = fl.from_numpy(_arr(1000))
    o.eval()
    np.testing.assert_allclose(o(x).numpy(), TF.rrelu(torch.from_numpy(x.numpy()), 0.1, 0.3).numpy())
    o.train()
    y = o(x).numpy()
    neg = x.numpy() < 0
    ratio = y[neg] / x.numpy()[neg]
    assert ratio.min() >= 0.1 and ratio.max() <= 0.3 and ratio.std() > 0.03
    np.testing.assert_array_equal(y[~neg], x.numpy()[~neg])


def test_inplace_activation_modules_modify_input():
    pairs = [(nn.ReLU(True), nn.ReLU()), (nn.LeakyReLU(0.1, True), nn.LeakyReLU(0.1)), (nn.ELU(inplace=True), nn.ELU()),
             (nn.SELU(True), nn.SELU()), (nn.CELU(inplace=True), nn.CELU()), (nn.Hardtanh(inplace=True), nn.Hardtanh()),
             (nn.ReLU6(True), nn.ReLU6()), (nn.SiLU(True), nn.SiLU()), (nn.Mish(True), nn.Mish()),
             (nn.Hardswish(True), nn.Hardswish()), (nn.Hardsigmoid(True), nn.Hardsigmoid()),
             (nn.Threshold(0.0, 1.0, True), nn.Threshold(0.0, 1.0))]
    for o, plain in pairs:
        x = fl.from_numpy(_arr(10))
        ref = plain(x.clone())
        y = o(x)
        assert y is x, type(o).__name__
        np.testing.assert_allclose(x.numpy(), ref.numpy(), rtol=1e-12)


def test_functional_activations_match_torch():
    x = _arr(4, 6, scale=3.0)
    a, ta = fl.from_numpy(x), torch.from_numpy(x)
    pairs = [
        (F.relu(a), TF.relu(ta)), (F.relu6(a), TF.relu6(ta)), (F.leaky_relu(a, 0.3), TF.leaky_relu(ta, 0.3)),
        (F.elu(a, 0.4), TF.elu(ta, 0.4)), (F.selu(a), TF.selu(ta)), (F.celu(a, 1.5), TF.celu(ta, 1.5)),
        (F.gelu(a), TF.gelu(ta)), (F.gelu(a, approximate="tanh"), TF.gelu(ta, approximate="tanh")),
        (F.silu(a), TF.silu(ta)), (F.mish(a), TF.mish(ta)), (F.sigmoid(a), TF.sigmoid(ta)), (F.tanh(a), TF.tanh(ta)),
        (F.softmax(a, 1), TF.softmax(ta, 1)), (F.log_softmax(a, 0), TF.log_softmax(ta, 0)),
        (F.log_softmax(a, 1, dtype=fl.float32), TF.log_softmax(ta, 1, dtype=torch.float32)),
        (F.softmin(a, 1), TF.softmin(ta, 1)), (F.softplus(a, 2, 3), TF.softplus(ta, 2, 3)),
        (F.hardswish(a), TF.hardswish(ta)), (F.hardsigmoid(a), TF.hardsigmoid(ta)),
        (F.hardtanh(a, -2, 2), TF.hardtanh(ta, -2, 2)), (F.softsign(a), TF.softsign(ta)),
        (F.tanhshrink(a), TF.tanhshrink(ta)), (F.glu(a), TF.glu(ta)), (F.glu(a, 0), TF.glu(ta, 0)),
        (F.logsigmoid(a), TF.logsigmoid(ta)), (F.threshold(a, 0.5, -1.0), TF.threshold(ta, 0.5, -1.0)),
        (F.hardshrink(a, 1.0), TF.hardshrink(ta, 1.0)), (F.softshrink(a, 1.0), TF.softshrink(ta, 1.0)),
        (F.prelu(a, fl.tensor([0.2], dtype=fl.float64)), TF.prelu(ta, torch.tensor([0.2], dtype=torch.float64))),
        (F.rrelu(a), TF.rrelu(ta)),
    ]
    for i, (o, t) in enumerate(pairs):
        assert o.dtype.name == str(t.dtype).split(".")[1], i
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-6, atol=1e-6, err_msg=str(i))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        np.testing.assert_allclose(F.softmax(a).numpy(), TF.softmax(ta, 1).numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(fl.ones(3))
    for fn, name in [(F.relu, "relu"), (F.elu, "elu"), (F.leaky_relu, "leaky_relu"), (F.hardtanh, "hardtanh"),
                     (F.silu, "silu"), (F.mish, "mish"), (F.hardswish, "hardswish"), (F.selu, "selu")]:
        b = fl.from_numpy(x.copy())
        assert fn(b, inplace=True) is b
        np.testing.assert_allclose(b.numpy(), getattr(TF, name)(ta).numpy(), rtol=1e-6, atol=1e-7, err_msg=name)


def test_silu_inplace_under_autograd():
    x = fl.from_numpy(_arr(5)).requires_grad_()
    tx = torch.from_numpy(x.detach().numpy().copy()).requires_grad_()
    y = x * 2
    F.silu(y, inplace=True)
    (y * y).sum().backward()
    ty = TF.silu(tx * 2, inplace=True)
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


# --- dropout ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                                 "FeatureAlphaDropout"])
def test_dropout_modules_eval_and_repr(cls):
    o, t = getattr(nn, cls)(0.3), getattr(tnn, cls)(0.3)
    assert repr(o) == repr(t)
    assert repr(getattr(nn, cls)(0.1, True)) == repr(getattr(tnn, cls)(0.1, True))
    x = fl.from_numpy(_arr(*{"Dropout1d": (2, 3, 4), "Dropout2d": (2, 3, 4, 5)}.get(cls, (2, 3, 4, 5, 6))))
    o.eval()
    assert o(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        getattr(nn, cls)(1.5)


def test_dropout_statistics_and_gradient():
    fl.manual_seed(1)
    p = 0.3
    x = fl.ones(200, 500, requires_grad=True)
    m = nn.Dropout(p)
    y = m(x)
    vals = y.detach().numpy()
    kept = vals != 0
    assert abs(kept.mean() - (1 - p)) < 0.01
    np.testing.assert_allclose(vals[kept], 1 / (1 - p), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), vals)  # grad = mask / (1 - p)
    assert (nn.Dropout(0.0)(x) is x) and nn.Dropout(1.0)(x).abs().sum().item() == 0
    z = fl.ones(100)
    assert F.dropout(z, 0.5, True, inplace=True) is z


@pytest.mark.parametrize("cls, shape, lead", [("Dropout1d", (8, 50, 7), 2), ("Dropout1d", (50, 7), 1),
                                              ("Dropout2d", (8, 50, 3, 4), 2), ("Dropout3d", (4, 50, 2, 3, 2), 2),
                                              ("Dropout3d", (50, 2, 3, 2), 1)])
def test_channel_dropout_zeroes_whole_channels(cls, shape, lead):
    fl.manual_seed(2)
    y = getattr(nn, cls)(0.5)(fl.ones(*shape)).numpy()
    flat = y.reshape(*shape[:lead], -1)  # one row per channel
    assert np.all((flat == 0).all(-1) | (flat == 2.0).all(-1))
    frac = (flat == 0).all(-1).mean()
    assert 0.25 < frac < 0.75
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(fl.ones(2, 2, 2, 2))


def test_alpha_dropout_keeps_statistics():
    fl.manual_seed(3)
    x = fl.randn(200_000)
    y = F.alpha_dropout(x, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02


# --- embeddings -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("padding_idx", [None, 0, 3, -1])
def test_embedding(padding_idx):
    t = tnn.Embedding(10, 4, padding_idx=padding_idx).double()
    o = nn.Embedding(10, 4, padding_idx=padding_idx).double()
    assert repr(o) == repr(t)
    if padding_idx is not None:
        assert o.weight[padding_idx].abs().sum().item() == 0
    _copy_params(o, t)
    idx = RNG.integers(0, 10, size=(3, 5))
    idx[0, :2] = 3
    _check(o, t, idx, grad_inputs=False)


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_scale_grad_by_freq(padding_idx):
    # each row's gradient divided by its index's count in the batch (the composite derivative ignored the option)
    t = tnn.Embedding(10, 4, padding_idx=padding_idx, scale_grad_by_freq=True).double()
    o = nn.Embedding(10, 4, padding_idx=padding_idx, scale_grad_by_freq=True).double()
    assert repr(o) == repr(t)
    _copy_params(o, t)
    idx = np.array([[1, 3, 3, 7], [3, 1, 9, 3]])
    _check(o, t, idx, grad_inputs=False)


def test_embedding_of_a_complex_weight_refuses_autograd_as_torch():
    w = fl.tensor(np.ones((5, 3)) + 1j * np.ones((5, 3)), dtype=fl.complex64).requires_grad_()
    with pytest.raises(RuntimeError, match="embedding does not support automatic differentiation for outputs with "
                                           "complex dtype"):
        F.embedding(fl.tensor([1, 2]), w)
    with fl.no_grad():
        assert F.embedding(fl.tensor([1, 2]), w).shape == (2, 3)


def test_embedding_options():
    t = tnn.Embedding(10, 4, max_norm=1.0, norm_type=2.0).double()
    o = nn.Embedding(10, 4, max_norm=1.0).double()
    _copy_params(o, t)
    idx = np.array([[1, 2, 2], [5, 6, 1]])
    _check(o, t, idx, grad_inputs=False)
    np.testing.assert_allclose(o.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-10)
    assert repr(o) == repr(t)
    w = fl.randn(5, 3)
    e = nn.Embedding.from_pretrained(w)
    assert not e.weight.requires_grad and e.weight.data_ptr() == w.data_ptr()
    assert nn.Embedding.from_pretrained(w, freeze=False, padding_idx=1).weight.requires_grad
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(5, 2, padding_idx=5)
    fl.manual_seed(0)
    big = nn.Embedding(500, 400).weight.detach().numpy()
    assert abs(big.mean()) < 0.01 and abs(big.std() - 1) < 0.01


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag(mode, padding_idx):
    t = tnn.EmbeddingBag(10, 3, mode=mode, padding_idx=padding_idx).double()
    o = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=padding_idx).double()
    _copy_params(o, t)
    assert repr(o) == repr(t)
    # 2-D fixed bags
    idx = RNG.integers(0, 10, size=(4, 3))
    idx[1, 0] = 2
    _check(o, t, idx, grad_inputs=False)
    # 1-D with offsets (an empty bag in the middle)
    flat = np.array([1, 2, 4, 5, 4, 3, 2, 9, 2])
    offsets = np.array([0, 3, 3, 7])
    for w in (o.weight, t.weight):
        w.grad = None
    _check(o, t, flat, offsets, grad_inputs=False)
    # include_last_offset
    t2 = tnn.EmbeddingBag(10, 3, mode=mode, include_last_offset=True).double()
    o2 = nn.EmbeddingBag(10, 3, mode=mode, include_last_offset=True).double()
    _copy_params(o2, t2)
    _check(o2, t2, flat, np.array([0, 3, 3, 7, 9]), grad_inputs=False)


def test_embedding_bag_per_sample_weights_and_errors():
    t = tnn.EmbeddingBag(10, 3, mode="sum").double()
    o = nn.EmbeddingBag(10, 3, mode="sum").double()
    _copy_params(o, t)
    flat = np.array([1, 2, 4, 5, 4, 3])
    offsets = np.array([0, 2])
    psw = RNG.random(6)
    x, tx = fl.from_numpy(flat), torch.from_numpy(flat)
    w, tw = fl.from_numpy(psw.copy()).requires_grad_(), torch.from_numpy(psw.copy()).requires_grad_()
    out = o(x, fl.from_numpy(offsets), per_sample_weights=w)
    ref = t(tx, torch.from_numpy(offsets), per_sample_weights=tw)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(o.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(x, o.weight, fl.from_numpy(offsets), mode="mean", per_sample_weights=w)
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        o(x)
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        o(x.reshape(2, 3), fl.from_numpy(offsets))


# --- other functional ---------------------------------------------------------------------------------------
def test_basic_functional_match_torch():
    x, y = _arr(4, 5), _arr(4, 5)
    a, b, ta, tb = fl.from_numpy(x), fl.from_numpy(y), torch.from_numpy(x), torch.from_numpy(y)
    for o, t in [(F.normalize(a), TF.normalize(ta)), (F.normalize(a, 1.0, 0), TF.normalize(ta, 1.0, 0)),
                 (F.cosine_similarity(a, b), TF.cosine_similarity(ta, tb)),
                 (F.cosine_similarity(a, b, dim=0), TF.cosine_similarity(ta, tb, dim=0)),
                 (F.pairwise_distance(a, b), TF.pairwise_distance(ta, tb)),
                 (F.pairwise_distance(a, b, 1.0, keepdim=True), TF.pairwise_distance(ta, tb, 1.0, keepdim=True)),
                 (F.pad(a, (1, 2)), TF.pad(ta, (1, 2))), (F.pad(a, (1, 1, 2, 0), value=3.0),
                                                          TF.pad(ta, (1, 1, 2, 0), value=3.0)),
                 (F.linear(a, b[:3]), TF.linear(ta, tb[:3])),
                 (F.linear(a, b[:3], fl.from_numpy(x[0, :3].copy())), TF.linear(ta, tb[:3], ta[0, :3]))]:
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
    idx = np.array([0, 3, 1])
    assert F.one_hot(fl.from_numpy(idx)).tolist() == TF.one_hot(torch.from_numpy(idx)).tolist()
    assert F.one_hot(fl.from_numpy(idx), 6).shape == (3, 6)
    # gradients of the compositions
    for fn, tfn in [(lambda p, q: F.cosine_similarity(p, q), lambda p, q: TF.cosine_similarity(p, q)),
                    (lambda p, q: F.pairwise_distance(p, q), lambda p, q: TF.pairwise_distance(p, q)),
                    (lambda p, q: F.normalize(p) * q, lambda p, q: TF.normalize(p) * q),
                    (lambda p, q: F.bilinear(p, q, fl.ones(2, 5, 5, dtype=fl.float64)),
                     lambda p, q: TF.bilinear(p, q, torch.ones(2, 5, 5, dtype=torch.float64)))]:
        _check(fn, tfn, x, y)


def test_dropout2d_warns_for_3d():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        F.dropout2d(fl.ones(2, 3, 4), 0.5)
    assert any("dropout2d: Received a 3D input" in str(w.message) for w in rec)


def test_layers_train_in_a_model():
    """A small MLP with every NNCORE layer kind trains (loss decreases) with manual SGD."""
    fl.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 16),
                          nn.LeakyReLU(), nn.Linear(16, 3), nn.LogSoftmax(1))
    x = fl.randn(64, 2, 4)
    y = fl.randint(0, 3, (64,))
    losses = []
    for _ in range(30):
        out = model(x)
        loss = -out[fl.arange(64), y].mean()
        model.zero_grad()
        loss.backward()
        with fl.no_grad():
            for p in model.parameters():
                p.sub_(0.5 * p.grad)
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
