"""MultiheadAttention, transformer layers and stacks, F.scaled_dot_product_attention against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F

torch = pytest.importorskip("torch")
tnn = torch.nn

TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-10, atol=1e-12)}


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _copy(tm, fm):
    fm.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


def _close(a, b, dtype="float64", scale=1.0):
    tol = TOL[dtype]
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol["rtol"] * scale,
                               atol=tol["atol"] * scale)


def _build(cls, dtype, *args, **kw):
    torch.manual_seed(0)
    tm = getattr(tnn, cls)(*args, **kw).to(getattr(torch, dtype))
    fm = getattr(nn, cls)(*args, **kw).to(getattr(fl, dtype))
    assert list(fm.state_dict()) == list(tm.state_dict())
    _copy(tm, fm)
    return tm, fm


def _check_grads(fm, tm, pairs, dtype, scale=20):
    for a, b in pairs:
        _close(a.grad, b.grad, dtype, scale)
    for (n, p), (tn, q) in zip(fm.named_parameters(), tm.named_parameters()):
        assert n == tn
        if q.grad is None:
            assert p.grad is None or not p.grad.detach().numpy().any()
        else:
            _close(p.grad, q.grad, dtype, scale)


def _leaves(arrays):
    return [(fl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)) for a in arrays]


# --- MultiheadAttention ----------------------------------------------------------------------------------
MHA_CASES = [
    ({}, {}),
    ({}, {"need_weights": False}),
    ({"batch_first": True}, {"need_weights": False}),
    ({"batch_first": True}, {"average_attn_weights": False}),
    ({"kdim": 5, "vdim": 6}, {}),
    ({"kdim": 5, "vdim": 6}, {"need_weights": False}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {}),
    ({"add_bias_kv": True}, {"need_weights": False}),
    ({"bias": False}, {"need_weights": False}),
]


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw,call", MHA_CASES, ids=[f"{a}-{b}" for a, b in MHA_CASES])
@pytest.mark.parametrize("masks", ["none", "kpm", "attn_bool", "attn_float3d", "both"])
def test_mha_matches_torch(kw, call, masks, dtype, rng):
    e, h, lq, s, n = 8, 2, 4, 5, 3
    tm, fm = _build("MultiheadAttention", dtype, e, h, **kw)
    kd, vd = kw.get("kdim", e), kw.get("vdim", e)
    arrays = [rng.standard_normal((lq, n, e)), rng.standard_normal((s, n, kd)), rng.standard_normal((s, n, vd))]
    if kw.get("batch_first"):
        arrays = [a.transpose(1, 0, 2).copy() for a in arrays]
    pairs = _leaves([a.astype(dtype) for a in arrays])
    fargs, targs = {}, {}
    if masks in ("kpm", "both"):
        kpm = np.zeros((n, s), bool)
        kpm[0, -2:] = True
        fargs["key_padding_mask"], targs["key_padding_mask"] = fl.tensor(kpm), torch.tensor(kpm)
    if masks in ("attn_bool", "both"):
        am = rng.random((lq, s)) > 0.7
        am[:, 0] = False
        fargs["attn_mask"], targs["attn_mask"] = fl.tensor(am), torch.tensor(am)
    if masks == "attn_float3d":
        am = rng.standard_normal((n * h, lq, s)).astype(dtype)
        fargs["attn_mask"], targs["attn_mask"] = fl.tensor(am), torch.tensor(am)
    fo, fw = fm(*(p[0] for p in pairs), **fargs, **call)
    to, tw = tm(*(p[1] for p in pairs), **targs, **call)
    _close(fo, to, dtype)
    if tw is None:
        assert fw is None
    else:
        _close(fw, tw, dtype)
    w = rng.standard_normal(tuple(to.shape)).astype(dtype)
    (fo * fl.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    _check_grads(fm, tm, pairs, dtype)


def test_mha_self_attention_and_unbatched(rng):
    tm, fm = _build("MultiheadAttention", "float64", 6, 3)
    x = rng.standard_normal((4, 6))
    (fx, tx), = _leaves([x])
    fo, fw = fm(fx, fx, fx)
    to, tw = tm(tx, tx, tx)
    _close(fo, to)
    _close(fw, tw)
    fo.sum().backward()
    to.sum().backward()
    _check_grads(fm, tm, [(fx, tx)], "float64")


def test_mha_causal_hint(rng):
    tm, fm = _build("MultiheadAttention", "float64", 8, 4, batch_first=True)
    x = rng.standard_normal((2, 5, 8))
    mask = np.triu(np.full((5, 5), -np.inf), 1)
    (fx, tx), = _leaves([x])
    fo = fm(fx, fx, fx, attn_mask=fl.tensor(mask), is_causal=True, need_weights=False)[0]
    to = tm(tx, tx, tx, attn_mask=torch.tensor(mask), is_causal=True, need_weights=False)[0]
    _close(fo, to)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        fm(fx, fx, fx, is_causal=True)


def test_mha_init_and_errors():
    fl.manual_seed(0)
    m = nn.MultiheadAttention(16, 4, add_bias_kv=True)
    assert not m.in_proj_bias.detach().numpy().any() and not m.out_proj.bias.detach().numpy().any()
    bound = math.sqrt(6 / (16 + 48))
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and w.std() > 0.8 * bound / math.sqrt(3)
    assert m.bias_k.shape == (1, 1, 16)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tnn.MultiheadAttention(16, 4, add_bias_kv=True)
                                                    .named_parameters()]
    sep = nn.MultiheadAttention(8, 2, kdim=3, vdim=5)
    assert sep.in_proj_weight is None and sep.k_proj_weight.shape == (8, 3) and sep.v_proj_weight.shape == (8, 5)
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        nn.MultiheadAttention(0, 1)
    with pytest.raises(RuntimeError, match="The shape of the 2D attn_mask is"):
        m(fl.randn(3, 2, 16), fl.randn(3, 2, 16), fl.randn(3, 2, 16), attn_mask=fl.zeros(2, 2))
    assert repr(nn.MultiheadAttention(8, 2)) == repr(tnn.MultiheadAttention(8, 2)).replace(
        "NonDynamicallyQuantizableLinear", "Linear")


# --- transformer layers ------------------------------------------------------------------------------------
LAYER_CASES = [{}, {"norm_first": True}, {"activation": "gelu", "batch_first": True}, {"bias": False},
               {"norm_first": True, "batch_first": True, "layer_norm_eps": 1e-3}]


def _seq(rng, shape, batch_first, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    return a.transpose(1, 0, 2).copy() if batch_first else a


@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", LAYER_CASES, ids=str)
@pytest.mark.parametrize("masked", [False, True])
def test_encoder_layer_matches_torch(kw, masked, dtype, rng):
    tm, fm = _build("TransformerEncoderLayer", dtype, 8, 2, 16, **kw)
    tm.eval()
    fm.eval()
    x = _seq(rng, (5, 3, 8), kw.get("batch_first"), dtype)
    (fx, tx), = _leaves([x])
    fa, ta = {}, {}
    if masked:
        mask = np.triu(np.full((5, 5), -np.inf), 1).astype(dtype)
        kpm = np.zeros((3, 5), bool)
        kpm[1, -1] = True
        fa = {"src_mask": fl.tensor(mask), "src_key_padding_mask": fl.tensor(kpm)}
        ta = {"src_mask": torch.tensor(mask), "src_key_padding_mask": torch.tensor(kpm)}
    fo, to = fm(fx, **fa), tm(tx, **ta)
    _close(fo, to, dtype, 5)
    w = rng.standard_normal(tuple(to.shape)).astype(dtype)
    (fo * fl.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    _check_grads(fm, tm, [(fx, tx)], dtype, 50)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", LAYER_CASES, ids=str)
def test_decoder_layer_matches_torch(kw, dtype, rng):
    tm, fm = _build("TransformerDecoderLayer", dtype, 8, 2, 16, dropout=0.0, **kw)
    bf = kw.get("batch_first")
    x, mem = _seq(rng, (4, 3, 8), bf, dtype), _seq(rng, (6, 3, 8), bf, dtype)
    (fx, tx), (fm_, tm_) = _leaves([x, mem])
    mask = np.triu(np.full((4, 4), -np.inf), 1).astype(dtype)
    mkpm = np.zeros((3, 6), bool)
    mkpm[2, :2] = True
    fo = fm(fx, fm_, tgt_mask=fl.tensor(mask), memory_key_padding_mask=fl.tensor(mkpm), tgt_is_causal=True)
    to = tm(tx, tm_, tgt_mask=torch.tensor(mask), memory_key_padding_mask=torch.tensor(mkpm), tgt_is_causal=True)
    _close(fo, to, dtype, 5)
    w = rng.standard_normal(tuple(to.shape)).astype(dtype)
    (fo * fl.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    _check_grads(fm, tm, [(fx, tx), (fm_, tm_)], dtype, 50)


def test_stacks_and_transformer_match_torch(rng):
    torch.manual_seed(0)
    tenc = tnn.TransformerEncoder(tnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, norm=tnn.LayerNorm(8),
                                  enable_nested_tensor=False).double()
    fenc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, norm=nn.LayerNorm(8)).double()
    assert list(fenc.state_dict()) == list(tenc.state_dict())
    _copy(tenc, fenc)
    x = rng.standard_normal((5, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=fl.float64)
    np.testing.assert_array_equal(mask.numpy(), tnn.Transformer.generate_square_subsequent_mask(5).numpy())
    _close(fenc(fl.tensor(x), mask=mask, is_causal=True),
           tenc(torch.tensor(x), mask=torch.tensor(mask.numpy()), is_causal=True))
    tdec = tnn.TransformerDecoder(tnn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2).double()
    fdec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2).double()
    _copy(tdec, fdec)
    mem = rng.standard_normal((3, 2, 8))
    _close(fdec(fl.tensor(x), fl.tensor(mem)), tdec(torch.tensor(x), torch.tensor(mem)))
    ttr = tnn.Transformer(8, 2, 1, 1, 16, dropout=0.0).double()
    ftr = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0).double()
    assert list(ftr.state_dict()) == list(ttr.state_dict())
    _copy(ttr, ftr)
    (fs, ts), (ft, tt) = _leaves([mem, x])
    fo, to = ftr(fs, ft), ttr(ts, tt)
    _close(fo, to)
    fo.sum().backward()
    to.sum().backward()
    _check_grads(ftr, ttr, [(fs, ts), (ft, tt)], "float64", 100)


def test_dropout_in_training_is_seeded(rng):
    m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.3)
    x = fl.tensor(rng.standard_normal((5, 2, 8)).astype(np.float32))
    fl.manual_seed(1)
    a = m(x).detach().numpy()
    fl.manual_seed(1)
    b = m(x).detach().numpy()
    np.testing.assert_array_equal(a, b)
    m.eval()
    assert not np.allclose(a, m(x).detach().numpy())


def test_layer_options_and_errors():
    layer = nn.TransformerEncoderLayer(8, 2, 16, activation=fl.tanh)
    assert layer.activation is fl.tanh
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not swish"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    assert repr(nn.TransformerEncoderLayer(8, 2, 16)) == repr(tnn.TransformerEncoderLayer(8, 2, 16)).replace(
        "NonDynamicallyQuantizableLinear", "Linear")


def test_functional_sdpa_is_the_operator(rng):
    assert F.scaled_dot_product_attention is fl.scaled_dot_product_attention
    q = rng.standard_normal((2, 2, 4, 8)).astype(np.float32)
    out = F.scaled_dot_product_attention(fl.tensor(q), fl.tensor(q), fl.tensor(q), is_causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(q),) * 3, is_causal=True)
    _close(out, ref, "float32")
