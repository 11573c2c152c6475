"""CUDA attention and recurrent kernels against the CPU ones, beyond the operator samples (tier 2; also on a GPU).

Autograd through ``scaled_dot_product_attention`` and the recurrent layers on 'cuda' (every input's
gradient equal to the CPU's), broadcast batches, masks, dropout factors drawn on the host, float16,
strided inputs, unbatched cells and host-side errors. Sizes are tiny (seq 3, batch 2, hidden 4):
the simulator runs every thread in Python.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

RNG = np.random.default_rng(0)
T, B, I, H = 3, 2, 3, 4


def _t(shape, dtype=fl.float64, requires_grad=False, scale=1.0):
    return fl.tensor((RNG.uniform(-1, 1, shape) * scale).astype(dtype.np), requires_grad=requires_grad)


def _cuda(t):
    if not isinstance(t, fl.Tensor):
        return t
    return t.detach().to("cuda").requires_grad_(t.requires_grad)


def _close(got, want, rtol=1e-6, atol=1e-8):
    assert got.device.type == "cuda" and got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


def _loss(outs, gs):
    total = None
    for o, g in zip(outs, gs):
        term = (o * g).sum()
        total = term if total is None else total + term
    return total


def _check_autograd(fn, args, kwargs=None, n_out=1):
    """``fn(*args)`` and the gradients of every argument that requires grad, on CUDA against the CPU."""
    kwargs = kwargs or {}
    want = fn(*args, **kwargs)
    want = want if isinstance(want, tuple) else (want,)
    gs = [_t(tuple(o.shape)) for o in want[:n_out]]
    _loss(want[:n_out], gs).backward()
    cargs = [_cuda(a) for a in args]
    got = fn(*cargs, **kwargs)
    got = got if isinstance(got, tuple) else (got,)
    for g_, w_ in zip(got, want):
        _close(g_, w_)
    _loss(got[:n_out], [g.to("cuda") for g in gs]).backward()
    for a, ca in zip(args, cargs):
        if isinstance(a, fl.Tensor) and a.requires_grad:
            _close(ca.grad, a.grad)


# --- attention --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"is_causal": True, "scale": 0.3}])
def test_sdpa_autograd(kw):
    q, k, v = (_t(s, requires_grad=True) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 3)))
    _check_autograd(fl.scaled_dot_product_attention, (q, k, v), kw)


def _record_kernels(module, monkeypatch) -> list:
    """The names of the kernels ``module._kernel`` builds from now on, in order (a path's launches)."""
    launched = []
    real = module._kernel

    def kernel(name, *args):
        launched.append(name)
        return real(name, *args)

    monkeypatch.setattr(module, "_kernel", kernel)
    return launched


@pytest.fixture(params=["fused", "composite"])
def attention_path(request, monkeypatch):
    """Both CUDA paths of unmasked attention without dropout (Note [Fused small attention]): the fused kernels,
    and the GEMMs around the softmax kernel that longer sequences take (the limit lowered to 0); which ran is
    checked by the kernels launched."""
    from flambeau._kernels.cuda import attention

    if request.param == "composite":
        monkeypatch.setattr(attention, "FUSED_MAX_SEQ", 0)
    launched = _record_kernels(attention, monkeypatch)
    yield request.param
    fused = {"fused_forward", "fused_backward_q", "fused_backward_kv"}
    assert (set(launched) <= fused) if request.param == "fused" else not (set(launched) & fused), launched
    assert launched


@pytest.mark.parametrize("kw", [{}, {"is_causal": True, "scale": 0.3}])
def test_sdpa_paths_with_strided_heads(attention_path, kw):
    """GPT's layout: the heads of one fused qkv projection, (batch, heads, seq, head dim) views whose batch dims
    no one stride spans; keys longer than queries when not causal, a value dim of its own."""
    nb, nh, L, S, E, Ev = 2, 3, 4, 4 if kw else 5, 2, 3
    qk = _t((nb, L, nh * 2 * E), requires_grad=True)
    k = _t((nb, S, nh, E), requires_grad=True)
    v = _t((nb, nh, S, Ev), requires_grad=True)

    def attend(qk, k, v):
        q = qk.split(nh * E, dim=2)[0].view(nb, L, nh, E).transpose(1, 2)
        return fl.scaled_dot_product_attention(q, k.transpose(1, 2), v, **kw)

    _check_autograd(attend, (qk, k, v))


def test_fused_attention_gradients_come_in_their_operands_layout():
    """Note [Gradients in their operands' layout]: the heads of a fused qkv projection get gradients laid out as
    the projection is, so the view's backward needs no copy (the gradient of ``qkv`` is then one concatenation):
    each gradient's strides order its dims as its operand's do, densely, and its values are the CPU's."""
    nb, nh, L, E = 2, 3, 4, 2
    qkv = _t((nb, L, 3 * nh * E))
    g = _t((nb, nh, L, E))

    def heads(x):
        return [z.view(nb, L, nh, E).transpose(1, 2) for z in x.split(nh * E, dim=2)]

    q, k, v = heads(qkv)
    out, attn = fl.scaled_dot_product_attention(q, k, v, is_causal=True), None
    s = q @ k.mT * E ** -0.5
    attn = s.masked_fill(fl.ones(L, L, dtype=fl.bool).tril().logical_not(), float("-inf")).softmax(-1)
    want = fl._scaled_dot_product_attention_backward(g, q, k, v, attn, None, E ** -0.5)
    cq, ck, cv = heads(_cuda(qkv))
    got = fl._scaled_dot_product_attention_backward(_cuda(g), cq, ck, cv, _cuda(attn), None, E ** -0.5)
    for grad, ref in zip(got[:3], want[:3]):
        _close(grad, ref)
        assert grad.stride() == (L * nh * E, E, nh * E, 1)  # (batch, seq, heads, head dim), dense
        assert grad.transpose(1, 2).is_contiguous()
    # the output in the query's layout, and the backward reading such a gradient in place
    cout = fl.scaled_dot_product_attention(cq, ck, cv, is_causal=True)
    _close(cout, out)
    assert cout.stride() == (L * nh * E, E, nh * E, 1)
    strided_g = _cuda(g).transpose(1, 2).contiguous().transpose(1, 2)
    assert not strided_g.is_contiguous()
    for grad, ref in zip(fl._scaled_dot_product_attention_backward(strided_g, cq, ck, cv, _cuda(attn), None,
                                                                  E ** -0.5), want):
        _close(grad, ref)


def test_sdpa_float_mask_gradient_and_broadcast_batch():
    q, k, v = _t((1, 3, 2), requires_grad=True), _t((2, 1, 4, 2), requires_grad=True), _t((2, 1, 4, 3),
                                                                                           requires_grad=True)
    m = _t((1, 2, 3, 4), requires_grad=True)
    _check_autograd(fl.scaled_dot_product_attention, (q, k, v, m))


def test_sdpa_bool_mask_with_fully_masked_row():
    q, k, v = _t((2, 3, 4)), _t((2, 5, 4)), _t((2, 5, 3))
    keep = fl.tensor(np.array([[True, False, True, True, False], [False] * 5, [True] * 5]))
    want = fl.scaled_dot_product_attention(q, k, v, keep)
    got = fl.scaled_dot_product_attention(q.to("cuda"), k.to("cuda"), v.to("cuda"), keep.to("cuda"))
    _close(got, want)
    assert np.all(got.cpu().numpy()[:, 1] == 0)


def test_sdpa_strided_float16_and_dropout():
    q, k, v = _t((2, 4, 3)), _t((2, 4, 5)), _t((2, 3, 5))  # used transposed: (2, 3, 4), (2, 5, 4), (2, 5, 3)
    qc, kc, vc = (x.to("cuda").transpose(1, 2) for x in (q, k, v))
    _close(fl.scaled_dot_product_attention(qc, kc, vc[:, :, :2]),
           fl.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)[:, :, :2]))
    q, k, v = _t((2, 3, 4)), _t((2, 5, 4)), _t((2, 5, 3))
    h = [x.to(fl.float16) for x in (q, k, v)]
    _close(fl.scaled_dot_product_attention(*(x.to("cuda") for x in h)), fl.scaled_dot_product_attention(*h),
           rtol=2e-3, atol=2e-3)
    fl.manual_seed(3)
    want = fl.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    fl.manual_seed(3)
    got = fl.scaled_dot_product_attention(q.to("cuda"), k.to("cuda"), v.to("cuda"), dropout_p=0.4)
    _close(got, want)


def test_sdpa_errors_before_launch():
    q, k, v = _t((2, 3, 4)).to("cuda"), _t((2, 5, 4)).to("cuda"), _t((2, 5, 3))
    with pytest.raises(RuntimeError, match="device"):
        fl.scaled_dot_product_attention(q, k, v)
    with pytest.raises(RuntimeError, match="dtype"):
        fl.scaled_dot_product_attention(q, k, v.to("cuda").to(fl.float32))


# --- recurrent --------------------------------------------------------------------------------------
def _weights(gates, bias=True):
    w = [_t((gates * H, I), requires_grad=True), _t((gates * H, H), requires_grad=True)]
    return w + ([_t((gates * H,), requires_grad=True), _t((gates * H,), requires_grad=True)] if bias else [None, None])


@pytest.fixture(params=["sequence", "steps", "sequence in warps"])
def lstm_path(request, monkeypatch):
    """Both CUDA paths of an LSTM layer: the whole-sequence kernels (Note [Whole-sequence LSTM kernels]), in
    blocks of the hidden size or, as on a GPU, of whole warps (idle threads past the hidden units), and the
    step loop that larger hidden sizes take (the limit lowered to 0); which ran is checked by the kernels
    launched."""
    from flambeau._kernels.cuda import rnn

    if request.param == "steps":
        monkeypatch.setattr(rnn, "SEQ_MAX_HIDDEN", 0)
    if request.param == "sequence in warps":
        monkeypatch.setattr(rnn, "sim", lambda: False)  # 32 threads a block (the step GEMMs stay unused)
    launched = _record_kernels(rnn, monkeypatch)
    yield request.param
    seq = {"lstm_seq_fwd", "lstm_seq_bwd"}
    if request.param == "steps":
        assert launched and not set(launched) & seq, launched
    else:
        assert "lstm_seq_fwd" in launched and set(launched) <= seq, launched


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_layer_autograd(lstm_path, reverse):
    x = _t((T, B, I), requires_grad=True)
    h0, c0 = _t((B, H), requires_grad=True), _t((B, H), requires_grad=True)
    _check_autograd(fl._lstm_layer, (x, h0, c0, *_weights(4), reverse), n_out=3)


def test_lstm_layer_without_bias_longer_and_odd_sized(lstm_path):
    """A hidden size that fills no warp, more steps and rows, no biases, gradients of h_n and c_n only."""
    x = _t((6, 3, I), requires_grad=True)
    h0, c0 = _t((3, 5), requires_grad=True), _t((3, 5), requires_grad=True)
    w = [_t((20, I), requires_grad=True), _t((20, 5), requires_grad=True)]
    _check_autograd(lambda *a: fl._lstm_layer(*a)[1:3], (x, h0, c0, *w, None, None, True), n_out=2)


@pytest.mark.parametrize("bias", [True, False])
def test_gru_layer_autograd(bias):
    x, h0 = _t((T, B, I), requires_grad=True), _t((B, H), requires_grad=True)
    _check_autograd(fl._gru_layer, (x, h0, *_weights(3, bias), not bias), n_out=2)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_layer_autograd(nonlinearity):
    x, h0 = _t((T, B, I), requires_grad=True), _t((B, H), requires_grad=True)
    _check_autograd(fl._rnn_layer, (x, h0, *_weights(1), nonlinearity, True), n_out=2)


def test_strided_sequence_and_weights(lstm_path):
    xb = _t((B, T, I))  # batch-first storage: the (T, B, I) input is a transposed view
    w_ih, w_hh = _t((I, 4 * H)), _t((H, 4 * H))
    h0, c0 = _t((B, H)), _t((B, H))
    want = fl._lstm_layer(xb.transpose(0, 1), h0, c0, w_ih.transpose(0, 1), w_hh.transpose(0, 1))
    got = fl._lstm_layer(xb.to("cuda").transpose(0, 1), h0.to("cuda"), c0.to("cuda"), w_ih.to("cuda").transpose(0, 1),
                         w_hh.to("cuda").transpose(0, 1))
    for g, w in zip(got, want):
        _close(g, w)


def test_unbatched_cells():
    x, h, c = _t((I,)), _t((H,)), _t((H,))
    w = _weights(4)
    want = fl.lstm_cell(x, (h, c), *w)
    got = fl.lstm_cell(x.to("cuda"), (h.to("cuda"), c.to("cuda")), *(_cuda(a) for a in w))
    for g, ww in zip(got, want):
        _close(g, ww)
    w3 = _weights(3, False)
    _close(fl.gru_cell(x.to("cuda"), h.to("cuda"), *(_cuda(a) for a in w3)), fl.gru_cell(x, h, *w3))
    w1 = _weights(1)
    _close(fl.rnn_tanh_cell(x.to("cuda"), h.to("cuda"), *(_cuda(a) for a in w1)), fl.rnn_tanh_cell(x, h, *w1))


def test_float32_layers():
    x, h0 = _t((T, B, I), fl.float32), _t((B, H), fl.float32)
    w = [_t((3 * H, n), fl.float32) for n in (I, H)] + [_t((3 * H,), fl.float32) for _ in range(2)]
    want = fl._gru_layer(x, h0, *w)
    got = fl._gru_layer(x.to("cuda"), h0.to("cuda"), *(a.to("cuda") for a in w))
    for g, ww in zip(got, want):
        _close(g, ww, rtol=1e-5, atol=1e-6)


def test_rnn_errors_before_launch():
    x, h0 = _t((T, B, I)).to("cuda"), _t((B, H))
    w = _weights(1)
    with pytest.raises(RuntimeError, match="device"):
        fl._rnn_layer(x, h0, *(a.detach() for a in w))
    with pytest.raises(RuntimeError, match="dtype"):
        fl._rnn_layer(x, h0.to("cuda").to(fl.float32), *(_cuda(a) for a in w))
