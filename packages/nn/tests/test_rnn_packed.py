"""Recurrent layers on packed sequences (``pack_padded_sequence`` -> ``nn.LSTM`` -> ``pad_packed_sequence``), against
torch: outputs, final states in the caller's batch order, and the gradients of the inputs, states and weights."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn

torch = pytest.importorskip("torch")
R, TR = nn.utils.rnn, torch.nn.utils.rnn


def _pair(kind: str, **kwargs):
    """The same layer in torch and in flambeau (float64, torch's parameters copied)."""
    cls = {"LSTM": (torch.nn.LSTM, nn.LSTM), "GRU": (torch.nn.GRU, nn.GRU), "RNN": (torch.nn.RNN, nn.RNN)}[kind]
    torch.manual_seed(0)
    ref = cls[0](**kwargs).double()
    ours = cls[1](**kwargs).double()
    ours.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in ref.state_dict().items()})
    return ref, ours


def _states(kind: str, shape: tuple, rng, proj: int = 0):
    h = rng.standard_normal(shape[:2] + (proj or shape[2],))
    return (h, rng.standard_normal(shape)) if kind == "LSTM" else (h,)


def _run(lib, layer, padded: np.ndarray, lengths: list, states, enforce_sorted: bool, batch_first: bool):
    """Pack, run, unpack; returns the padded output, the final states and the leaves whose gradients count."""
    R_ = R if lib is fl else TR
    x = (fl.from_numpy(padded.copy()) if lib is fl else torch.from_numpy(padded.copy())).requires_grad_()
    hs = None
    if states is not None:
        hs = [(fl.from_numpy(s.copy()) if lib is fl else torch.from_numpy(s.copy())).requires_grad_() for s in states]
    packed = R_.pack_padded_sequence(x, lib.tensor(lengths), batch_first=batch_first, enforce_sorted=enforce_sorted)
    out, final = layer(packed, None if hs is None else (hs[0] if len(hs) == 1 else tuple(hs)))
    assert type(out).__name__ == "PackedSequence"
    padded_out, out_lengths = R_.pad_packed_sequence(out, batch_first=batch_first)
    finals = list(final) if isinstance(final, tuple) else [final]
    return padded_out, out_lengths, finals, [x] + (hs or [])


@pytest.mark.parametrize("kind, extra", [("LSTM", {}), ("GRU", {}), ("RNN", {}), ("RNN", {"nonlinearity": "relu"}),
                                         ("LSTM", {"proj_size": 2})])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("enforce_sorted, with_states", [(True, False), (False, True)])
def test_packed_sequences_match_torch(kind, extra, bidirectional, enforce_sorted, with_states):
    rng = np.random.default_rng(1)
    lengths = [5, 3, 3, 1] if enforce_sorted else [2, 5, 1, 3]  # equal lengths: one run covers two steps
    batch_first = not enforce_sorted
    kwargs = dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=bidirectional, batch_first=batch_first,
                  **extra)
    ref, ours = _pair(kind, **kwargs)
    shape = (len(lengths), max(lengths), 3) if batch_first else (max(lengths), len(lengths), 3)
    padded = rng.standard_normal(shape)
    nd = 2 if bidirectional else 1
    states = _states(kind, (2 * nd, len(lengths), 4), rng, extra.get("proj_size", 0)) if with_states else None
    out, lens, finals, leaves = _run(fl, ours, padded, lengths, states, enforce_sorted, batch_first)
    t_out, t_lens, t_finals, t_leaves = _run(torch, ref, padded, lengths, states, enforce_sorted, batch_first)
    np.testing.assert_array_equal(lens.numpy(), t_lens.numpy())
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    for f, tf in zip(finals, t_finals):
        np.testing.assert_allclose(f.detach().numpy(), tf.detach().numpy(), rtol=1e-10, atol=1e-12)
    # every output and final state feeds the loss, with weights so that no gradient is uniform
    w = rng.standard_normal(out.shape)
    loss = (out * fl.from_numpy(w)).sum() + sum((f * (i + 2)).sum() for i, f in enumerate(finals))
    t_loss = (t_out * torch.from_numpy(w)).sum() + sum((f * (i + 2)).sum() for i, f in enumerate(t_finals))
    loss.backward()
    t_loss.backward()
    for a, b in zip(leaves, t_leaves):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (name, p), (_, tp) in zip(ours.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


def test_packed_input_errors_name_the_sizes():
    _, lstm = _pair("LSTM", input_size=3, hidden_size=4)
    packed = R.pack_sequence([fl.zeros(3, 5), fl.zeros(2, 5)])
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 3, got 5"):
        lstm(packed)
    packed = R.pack_sequence([fl.zeros(3, 3), fl.zeros(2, 3)])
    with pytest.raises(RuntimeError, match="Expected hidden\\[0\\] size \\(1, 2, 4\\), got \\[1, 3, 4\\]"):
        lstm(packed, (fl.zeros(1, 3, 4), fl.zeros(1, 3, 4)))
