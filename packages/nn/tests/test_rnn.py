"""RNN / LSTM / GRU and their cells against torch with copied parameters: outputs, states, gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn

torch = pytest.importorskip("torch")
tnn = torch.nn

@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


TOL = {"float32": dict(rtol=1e-5, atol=2e-6), "float64": dict(rtol=1e-10, atol=1e-12)}


def _copy(tm, fm):
    fm.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


def _close(a, b, dtype, scale=1.0):
    a = a.detach().numpy() if isinstance(a, fl.Tensor) else a
    tol = TOL[dtype]
    np.testing.assert_allclose(a, b.detach().numpy(), rtol=tol["rtol"] * scale, atol=tol["atol"] * scale)


def _build(cls, dtype, *args, **kw):
    torch.manual_seed(0)
    tm = getattr(tnn, cls)(*args, **kw).to(getattr(torch, dtype))
    fm = getattr(nn, cls)(*args, **kw).to(getattr(fl, dtype))
    assert list(fm.state_dict()) == list(tm.state_dict())
    _copy(tm, fm)
    return tm, fm


CONFIGS = [
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"num_layers": 2, "batch_first": True, "bias": False}),
    ("GRU", {}),
    ("GRU", {"num_layers": 3, "bidirectional": True, "batch_first": True}),
    ("GRU", {"bias": False}),
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bidirectional": True}),
    ("RNN", {"nonlinearity": "relu", "bias": False, "batch_first": True}),
]


def _states(cls, hx_shape, rng, dtype):
    if cls == "LSTM":
        return tuple(rng.standard_normal(hx_shape).astype(dtype) for _ in range(2))
    return rng.standard_normal(hx_shape).astype(dtype)


def _to(lib, states, grad=True):
    if states is None:
        return None
    if isinstance(states, tuple):
        return tuple(lib.tensor(s, requires_grad=grad) for s in states)
    return lib.tensor(states, requires_grad=grad)


def _flat(states):
    return list(states) if isinstance(states, tuple) else [states]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls,kw", CONFIGS, ids=[f"{c}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                                                 for c, kw in CONFIGS])
@pytest.mark.parametrize("with_h0", [False, True])
def test_recurrent_module_matches_torch(cls, kw, dtype, with_h0, rng):
    tm, fm = _build(cls, dtype, 5, 7, **kw)
    nd = 2 if kw.get("bidirectional") else 1
    nl = kw.get("num_layers", 1)
    seq, batch = 6, 3
    shape = (batch, seq, 5) if kw.get("batch_first") else (seq, batch, 5)
    x = rng.standard_normal(shape).astype(dtype)
    h0 = _states(cls, (nd * nl, batch, 7), rng, dtype) if with_h0 else None
    fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fh, th = _to(fl, h0), _to(torch, h0)
    fo, fs = fm(fx, fh)
    to, ts = tm(tx, th)
    _close(fo, to, dtype)
    for a, b in zip(_flat(fs), _flat(ts)):
        _close(a, b, dtype)
    w = rng.standard_normal(tuple(to.shape)).astype(dtype)
    floss = (fo * fl.tensor(w)).sum() + sum((s * s).sum() for s in _flat(fs))
    tloss = (to * torch.tensor(w)).sum() + sum((s * s).sum() for s in _flat(ts))
    floss.backward()
    tloss.backward()
    _close(fx.grad, tx.grad, dtype, 10)
    if with_h0:
        for a, b in zip(_flat(fh), _flat(th)):
            _close(a.grad, b.grad, dtype, 10)
    for (name, p), (tname, q) in zip(fm.named_parameters(), tm.named_parameters()):
        assert name == tname
        _close(p.grad, q.grad, dtype, 10)


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_unbatched_input(cls, rng):
    tm, fm = _build(cls, "float64", 4, 3, num_layers=2, bidirectional=True)
    x = rng.standard_normal((5, 4))
    h0 = _states(cls, (4, 3), rng, np.float64)
    fo, fs = fm(fl.tensor(x), _to(fl, h0, False))
    to, ts = tm(torch.tensor(x), _to(torch, h0, False))
    assert tuple(fo.shape) == (5, 6)
    _close(fo, to, "float64")
    for a, b in zip(_flat(fs), _flat(ts)):
        assert a.shape == tuple(b.shape)
        _close(a, b, "float64")


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_dropout_between_layers(cls, rng):
    tm, fm = _build(cls, "float64", 4, 6, num_layers=3, dropout=0.5)
    x = rng.standard_normal((5, 2, 4))
    fm.eval()
    tm.eval()
    eval_out = fm(fl.tensor(x))[0].detach().numpy()
    _close(eval_out, tm(torch.tensor(x))[0], "float64")
    fm.train()
    fl.manual_seed(5)
    a = fm(fl.tensor(x))[0].detach().numpy()
    fl.manual_seed(5)
    b = fm(fl.tensor(x))[0].detach().numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, eval_out)
    fm.dropout = 0.0
    _close(fm(fl.tensor(x))[0], tm(torch.tensor(x))[0], "float64")


@pytest.mark.parametrize("cls,gates", [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
def test_parameters_and_init(cls, gates):
    fl.manual_seed(0)
    m = getattr(nn, cls)(10, 20, num_layers=2, bidirectional=True)
    t = getattr(tnn, cls)(10, 20, num_layers=2, bidirectional=True)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t.named_parameters()]
    assert m.weight_ih_l1_reverse.shape == (gates * 20, 40)
    bound = 1 / math.sqrt(20)
    allw = np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])
    assert np.abs(allw).max() <= bound
    np.testing.assert_allclose(allw.std(), bound / math.sqrt(3), rtol=0.05)
    assert len(m.all_weights) == 4 and len(m.all_weights[0]) == 4
    assert repr(m) == repr(t)


def test_repr_matches_torch():
    for args, kw in (((3, 4), {}), ((3, 4), {"num_layers": 2, "bias": False, "batch_first": True, "dropout": 0.2,
                                            "bidirectional": True})):
        for cls in ("LSTM", "GRU"):
            assert repr(getattr(nn, cls)(*args, **kw)) == repr(getattr(tnn, cls)(*args, **kw))
    assert repr(nn.RNN(3, 4, nonlinearity="relu")) == repr(tnn.RNN(3, 4, nonlinearity="relu"))
    assert repr(nn.LSTMCell(3, 4, bias=False)) == repr(tnn.LSTMCell(3, 4, bias=False))
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == repr(tnn.RNNCell(3, 4, nonlinearity="relu"))


def test_module_errors():
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.GRU(3, 0)
    with pytest.raises(ValueError, match="num_layers must be greater than zero"):
        nn.GRU(3, 4, num_layers=0)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.5)
    m = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        m(fl.randn(2, 2, 2, 3))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 3, got 5"):
        m(fl.randn(2, 2, 5))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 2, 4\), got \[1, 2, 4\]"):
        m(fl.randn(5, 2, 3), (fl.randn(1, 2, 4), fl.randn(2, 2, 4)))
    with pytest.raises(RuntimeError, match="hx and cx should also be 3-D"):
        m(fl.randn(5, 2, 3), (fl.randn(2, 4), fl.randn(2, 4)))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 4\), got \[1, 3, 4\]"):
        nn.GRU(3, 4)(fl.randn(5, 2, 3), fl.randn(1, 3, 4))


# --- cells -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls,kw", [("LSTMCell", {}), ("GRUCell", {}), ("RNNCell", {}),
                                    ("RNNCell", {"nonlinearity": "relu"}), ("GRUCell", {"bias": False}),
                                    ("LSTMCell", {"bias": False})])
@pytest.mark.parametrize("batch", [3, None])
@pytest.mark.parametrize("with_hx", [False, True])
def test_cell_matches_torch(cls, kw, dtype, batch, with_hx, rng):
    tm, fm = _build(cls, dtype, 5, 4, **kw)
    lead = (batch,) if batch else ()
    x = rng.standard_normal(lead + (5,)).astype(dtype)
    hx = _states("LSTM" if cls == "LSTMCell" else cls, lead + (4,), rng, dtype) if with_hx else None
    fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fh, th = _to(fl, hx), _to(torch, hx)
    fo, to = fm(fx, fh), tm(tx, th)
    floss, tloss = 0, 0
    for a, b in zip(_flat(fo), _flat(to)):
        assert a.shape == tuple(b.shape)
        _close(a, b, dtype)
        w = rng.standard_normal(tuple(b.shape)).astype(dtype)
        floss = floss + (a * fl.tensor(w)).sum()
        tloss = tloss + (b * torch.tensor(w)).sum()
    floss.backward()
    tloss.backward()
    _close(fx.grad, tx.grad, dtype, 10)
    if with_hx:
        for a, b in zip(_flat(fh), _flat(th)):
            _close(a.grad, b.grad, dtype, 10)
    for p, q in zip(fm.parameters(), tm.parameters()):
        _close(p.grad, q.grad, dtype, 10)


def test_cell_unrolled_equals_layer(rng):
    """Stepping LSTMCell over a sequence gives what LSTM computes with the same weights."""
    cell = nn.LSTMCell(3, 5).double()
    layer = nn.LSTM(3, 5).double()
    layer.load_state_dict({k + "_l0": v for k, v in cell.state_dict().items()})
    x = fl.tensor(rng.standard_normal((4, 2, 3)))
    h = c = fl.zeros(2, 5, dtype=fl.float64)
    outs = []
    for t in range(4):
        h, c = cell(x[t], (h, c))
        outs.append(h)
    out, (hn, cn) = layer(x)
    np.testing.assert_allclose(fl.stack(outs).detach().numpy(), out.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(cn[0].detach().numpy(), c.detach().numpy(), rtol=1e-12)


def test_cell_errors():
    with pytest.raises(ValueError, match="GRUCell: Expected input to be 1D or 2D, got 3D instead"):
        nn.GRUCell(3, 4)(fl.randn(1, 2, 3))
    with pytest.raises(RuntimeError, match="Expected hidden to be 2D"):
        nn.RNNCell(3, 4)(fl.randn(2, 3), fl.randn(4))
    with pytest.raises(RuntimeError, match="Unknown nonlinearity: gelu"):
        m = nn.RNNCell(3, 4)
        m.nonlinearity = "gelu"
        m(fl.randn(2, 3))


def test_lstm_trains(rng):
    """A few SGD steps on a tiny sequence task reduce the loss."""
    fl.manual_seed(0)
    model = nn.LSTM(2, 8, batch_first=True)
    head = nn.Linear(8, 1)
    x = fl.tensor(rng.standard_normal((16, 10, 2)).astype(np.float32))
    y = x[:, -3:, :1].sum(1)
    params = list(model.parameters()) + list(head.parameters())
    losses = []
    for _ in range(30):
        out, (hn, _) = model(x)
        loss = ((head(hn[0]) - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with fl.no_grad():
            for p in params:
                p -= 0.2 * p.grad
        losses.append(float(loss))
    assert losses[-1] < 0.3 * losses[0], losses


def test_bias_gradients_do_not_share_memory_so_clipping_scales_each_once():
    # the layer kernels compute one bias gradient for b_ih and b_hh; each .grad must own its memory
    import torch

    fl.manual_seed(0)
    for fl_cls, th_cls in ((fl.nn.LSTM, torch.nn.LSTM), (fl.nn.RNN, torch.nn.RNN), (fl.nn.GRU, torch.nn.GRU)):
        m, t = fl_cls(3, 4), th_cls(3, 4)
        with torch.no_grad():
            for name, p in t.named_parameters():
                p.copy_(torch.tensor(getattr(m, name).detach().numpy()))
        x = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32)
        m(fl.tensor(x))[0].sum().backward()
        t(torch.tensor(x))[0].sum().backward()
        fl.nn.utils.clip_grad_norm_(m.parameters(), 0.1)
        torch.nn.utils.clip_grad_norm_(t.parameters(), 0.1)
        for name, p in t.named_parameters():
            np.testing.assert_allclose(getattr(m, name).grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-7,
                                       err_msg=f"{fl_cls.__name__}.{name}")
