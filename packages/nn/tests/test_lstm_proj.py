"""LSTM with ``proj_size`` (``flambeau/nn/modules/rnn.py``) against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")

RNG = np.random.default_rng(21)


@pytest.mark.parametrize("num_layers,bidirectional,batch_first,bias", [
    (1, False, False, True), (2, True, True, True), (2, False, False, False), (3, True, False, True)], ids=str)
@pytest.mark.parametrize("with_hx", [False, True])
def test_lstm_proj_matches_torch(num_layers, bidirectional, batch_first, bias, with_hx):
    kw = dict(num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias, proj_size=2)
    theirs = torch.nn.LSTM(3, 5, dtype=torch.float64, **kw)
    ours = nn.LSTM(3, 5, dtype=fl.float64, **kw)
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    ours.load_state_dict({k: fl.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    d = 2 if bidirectional else 1
    a = RNG.standard_normal((4, 6, 3))
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    hx = thx = None
    if with_hx:
        h0, c0 = RNG.standard_normal((d * num_layers, 4 if batch_first else 6, 2)), \
            RNG.standard_normal((d * num_layers, 4 if batch_first else 6, 5))
        hx = (fl.from_numpy(h0).requires_grad_(True), fl.from_numpy(c0).requires_grad_(True))
        thx = (torch.from_numpy(h0).requires_grad_(True), torch.from_numpy(c0).requires_grad_(True))
    out, (h, c) = ours(x, hx)
    tout, (th, tc) = theirs(tx, thx)
    for ours_t, theirs_t in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(ours_t.detach().numpy(), theirs_t.detach().numpy(), rtol=1e-12, atol=1e-13)
    go, gh, gc = (RNG.standard_normal(tuple(t.shape)) for t in (tout, th, tc))
    fl.autograd.backward([out, h, c], [fl.from_numpy(go), fl.from_numpy(gh), fl.from_numpy(gc)])
    torch.autograd.backward([tout, th, tc], [torch.from_numpy(go), torch.from_numpy(gh), torch.from_numpy(gc)])
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-11, atol=1e-12)
    for (name, p), tp in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-11, atol=1e-12, err_msg=name)
    if with_hx:
        for ours_t, theirs_t in zip(hx, thx):
            np.testing.assert_allclose(ours_t.grad.numpy(), theirs_t.grad.numpy(), rtol=1e-11, atol=1e-12)


def test_unbatched_and_float32():
    theirs = torch.nn.LSTM(3, 4, proj_size=3)
    ours = nn.LSTM(3, 4, proj_size=3)
    ours.load_state_dict({k: fl.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    a = RNG.standard_normal((5, 3)).astype(np.float32)
    out, (h, c) = ours(fl.from_numpy(a))
    tout, (th, tc) = theirs(torch.from_numpy(a))
    assert out.shape == (5, 3) and h.shape == (1, 3) and c.shape == (1, 4) and out.dtype == fl.float32
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.detach().numpy(), tc.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_proj_errors_match_torch():
    for kw, msg in ((dict(proj_size=-1), "proj_size should be a positive integer or zero to disable projections"),
                    (dict(proj_size=5), "proj_size has to be smaller than hidden_size")):
        with pytest.raises(ValueError, match=msg):
            torch.nn.LSTM(3, 5, **kw)
        with pytest.raises(ValueError, match=msg):
            nn.LSTM(3, 5, **kw)
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM, not RNN or GRU"):
        nn.GRU(3, 5, proj_size=2)
    m = nn.LSTM(3, 5, num_layers=2, proj_size=2, bidirectional=True)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(4, 7, 2\), got \[4, 7, 5\]"):
        m(fl.zeros(6, 7, 3), (fl.zeros(4, 7, 5), fl.zeros(4, 7, 5)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(4, 7, 5\), got \[4, 7, 2\]"):
        m(fl.zeros(6, 7, 3), (fl.zeros(4, 7, 2), fl.zeros(4, 7, 2)))
