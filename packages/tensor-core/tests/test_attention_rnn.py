"""scaled_dot_product_attention and the recurrent cells/layers against torch (values and gradients)."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _pair(a, requires_grad=True):
    """A flambeau leaf and a torch leaf holding the same values."""
    return (fl.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f"),
            torch.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f"))


def _close(f, t, dtype=np.float64, scale=1.0):
    tol = TOL[dtype]
    f = f.detach().numpy() if isinstance(f, fl.Tensor) else f
    np.testing.assert_allclose(f, t.detach().numpy(), rtol=tol["rtol"] * scale, atol=tol["atol"] * scale)


# --- scaled_dot_product_attention ----------------------------------------------------------------------
SHAPES = [((5, 4), (6, 4), (6, 3)), ((2, 5, 4), (2, 6, 4), (2, 6, 7)), ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 8)),
          ((2, 3, 5, 4), (1, 3, 6, 4), (2, 1, 6, 2)), ((1, 2, 64, 16), (1, 2, 64, 16), (1, 2, 64, 16))]


def _mask(kind, rng, lq, ls, dtype, nb=2):
    if kind is None:
        return None
    if kind == "bool":
        m = rng.random((lq, ls)) > 0.3
        m[:, 0] = True
        return m
    if kind == "bool4d":
        m = rng.random((nb, 1, lq, ls)) > 0.3
        m[..., 0] = True
        return m
    if kind == "float":
        return rng.standard_normal((lq, ls)).astype(dtype)
    if kind == "float_row":
        return rng.standard_normal((1, ls)).astype(dtype)
    raise AssertionError(kind)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "x".join(map(str, s[0])) + "-" + "x".join(map(str, s[1])))
@pytest.mark.parametrize("mask", [None, "bool", "bool4d", "float", "float_row", "causal"])
def test_sdpa_matches_torch(dtype, shapes, mask, rng):
    qs, ks, vs = shapes
    if mask == "bool4d" and len(qs) < 4:
        pytest.skip("4-D mask needs 4-D inputs")
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in shapes)
    causal = mask == "causal"
    m = None if causal else _mask(mask, rng, qs[-2], ks[-2], dtype, qs[0])
    (fq, tq), (fk, tk), (fv, tv) = _pair(q), _pair(k), _pair(v)
    fm, tm = _pair(m) if m is not None else (None, None)
    out = fl.scaled_dot_product_attention(fq, fk, fv, attn_mask=fm, is_causal=causal)
    ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, is_causal=causal)
    _close(out, ref, dtype)
    g = rng.standard_normal(ref.shape).astype(dtype)
    out.backward(fl.tensor(g))
    ref.backward(torch.tensor(g))
    for a, b in ((fq, tq), (fk, tk), (fv, tv)) + (((fm, tm),) if m is not None and m.dtype != bool else ()):
        _close(a.grad, b.grad, dtype, scale=10)


def test_sdpa_scale_and_noncontiguous(rng):
    q = rng.standard_normal((2, 4, 6, 3))
    k = rng.standard_normal((2, 4, 5, 12))
    v = rng.standard_normal((4, 2, 5, 2))
    fq, fk, fv = fl.tensor(q).transpose(-1, -2), fl.tensor(k)[..., ::2], fl.tensor(v).transpose(0, 1)
    tq, tk, tv = torch.tensor(q).transpose(-1, -2), torch.tensor(k)[..., ::2], torch.tensor(v).transpose(0, 1)
    assert not fq.is_contiguous() and not fk.is_contiguous()
    ref = F.scaled_dot_product_attention(tq, tk, tv, scale=0.3)
    _close(fl.scaled_dot_product_attention(fq, fk, fv, scale=0.3), ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_nan_scores_make_nan_rows(dtype, causal, rng):
    # a NaN in a query makes its row of scores NaN; the float32 kernel's vectorised exp would take it to 0
    q, k, v = (rng.standard_normal((2, 3, 17, 8)).astype(dtype) for _ in range(3))
    q[0, 1, 4, 2] = np.nan
    k[1, 2, 9, 0] = np.nan  # a NaN key: every row that sees it
    out = fl.scaled_dot_product_attention(*map(fl.from_numpy, (q, k, v)), is_causal=causal).numpy()
    ref = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), is_causal=causal).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_sdpa_heads_split_from_a_fused_projection(rng):
    # q, k and v as GPT makes them: strided views of one (B, T, 3, H, d) tensor (the kernels make them
    # contiguous first); values and the gradient reaching the fused tensor
    x = rng.standard_normal((3, 9, 3, 2, 4)).astype(np.float32)
    g = rng.standard_normal((3, 2, 9, 4)).astype(np.float32)
    grads = []
    for m in (fl, torch):
        qkv = m.tensor(x, requires_grad=True)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        out = m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(m.tensor(g))
        grads.append((out.detach().numpy(), qkv.grad.numpy()))
    assert not fl.tensor(x)[:, :, 0].transpose(1, 2).is_contiguous()
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_causal_rectangular(causal, rng):
    for lq, ls in ((3, 7), (7, 3)):
        q, k, v = rng.standard_normal((2, lq, 4)), rng.standard_normal((2, ls, 4)), rng.standard_normal((2, ls, 5))
        (fq, tq), (fk, tk), (fv, tv) = _pair(q), _pair(k), _pair(v)
        _close(fl.scaled_dot_product_attention(fq, fk, fv, is_causal=causal),
               F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal))


def test_sdpa_gqa_matches_torch(rng):
    q, k, v = rng.standard_normal((2, 6, 4, 3)), rng.standard_normal((2, 2, 5, 3)), rng.standard_normal((2, 3, 5, 4))
    (fq, tq), (fk, tk), (fv, tv) = _pair(q), _pair(k), _pair(v)
    out = fl.scaled_dot_product_attention(fq, fk, fv, enable_gqa=True)
    ref = F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)
    _close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    for a, b in ((fq, tq), (fk, tk), (fv, tv)):
        _close(a.grad, b.grad)


def test_sdpa_fully_masked_rows_give_zeros(rng):
    q, k, v = rng.standard_normal((1, 3, 4)), rng.standard_normal((1, 5, 4)), rng.standard_normal((1, 5, 2))
    m = np.ones((3, 5), bool)
    m[1] = False
    (fq, tq), (fk, tk), (fv, tv) = _pair(q), _pair(k), _pair(v)
    out = fl.scaled_dot_product_attention(fq, fk, fv, attn_mask=fl.tensor(m))
    ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(m))
    _close(out, ref)
    assert (out.detach().numpy()[0, 1] == 0).all()
    out.sum().backward()
    ref.sum().backward()
    _close(fq.grad, tq.grad)
    assert np.isfinite(fk.grad.numpy()).all()


def test_sdpa_float16_runs_in_float32(rng):
    q, k, v = (rng.standard_normal((2, 4, 8)).astype(np.float16) for _ in range(3))
    out = fl.scaled_dot_product_attention(fl.tensor(q), fl.tensor(k), fl.tensor(v))
    ref = F.scaled_dot_product_attention(*(torch.tensor(a.astype(np.float32)) for a in (q, k, v)))
    assert out.dtype is fl.float16
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.numpy(), atol=2e-3)


def test_sdpa_dropout(rng):
    q, k, v = (fl.tensor(rng.standard_normal((2, 8, 4))) for _ in range(3))
    fl.manual_seed(3)
    a = fl.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    fl.manual_seed(3)
    b = fl.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    c = fl.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert not np.array_equal(a.numpy(), c.numpy())
    assert (fl.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy() == 0).all()
    # The expectation over masks is the plain attention.
    plain = fl.scaled_dot_product_attention(q, k, v).numpy()
    mean = np.mean([fl.scaled_dot_product_attention(q, k, v, dropout_p=0.3).numpy() for _ in range(400)], 0)
    np.testing.assert_allclose(mean, plain, atol=0.15)


def test_sdpa_dropout_gradient_uses_the_same_mask(rng):
    q, k, v = (fl.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True) for _ in range(3))

    def f(q, k, v):
        fl.manual_seed(11)
        return fl.scaled_dot_product_attention(q, k, v, dropout_p=0.4)

    assert gradcheck(f, (q, k, v))


def test_sdpa_double_backward(rng):
    q, k, v = (fl.tensor(rng.uniform(-1, 1, s), requires_grad=True) for s in ((2, 3, 2), (2, 4, 2), (2, 4, 3)))
    m = fl.tensor(rng.uniform(-1, 1, (3, 4)), requires_grad=True)
    assert gradgradcheck(lambda q, k, v, m: fl.scaled_dot_product_attention(q, k, v, attn_mask=m), (q, k, v, m))
    assert gradgradcheck(lambda q, k, v: fl.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v))


def test_sdpa_errors():
    q = fl.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="same dtype"):
        fl.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(RuntimeError, match="last dim of query"):
        fl.scaled_dot_product_attention(q, fl.randn(2, 3, 5), q)
    with pytest.raises(RuntimeError, match="same sequence length"):
        fl.scaled_dot_product_attention(q, q, fl.randn(2, 5, 4))
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        fl.scaled_dot_product_attention(q, q, q, attn_mask=fl.ones(3, 3, dtype=fl.bool), is_causal=True)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        fl.scaled_dot_product_attention(q, q, q, attn_mask=fl.zeros(2, 3))
    with pytest.raises(RuntimeError, match="attn_mask must be bool or floating"):
        fl.scaled_dot_product_attention(q, q, q, attn_mask=fl.zeros(3, 3, dtype=fl.int64))
    with pytest.raises(ValueError, match="dropout probability"):
        fl.scaled_dot_product_attention(q, q, q, dropout_p=1.5)
    with pytest.raises(RuntimeError, match="multiple of the key"):
        fl.scaled_dot_product_attention(fl.randn(1, 3, 2, 4), fl.randn(1, 2, 2, 4), fl.randn(1, 2, 2, 4),
                                        enable_gqa=True)
    with pytest.raises(RuntimeError, match="floating dtype"):
        fl.scaled_dot_product_attention(*(fl.ones(2, 2, dtype=fl.int64),) * 3)
    with pytest.raises(TypeError, match="argument 'key' must be Tensor"):
        fl.scaled_dot_product_attention(q, None, q)


# --- recurrent cells -------------------------------------------------------------------------------------
CELLS = {"lstm_cell": 4, "gru_cell": 3, "rnn_tanh_cell": 1, "rnn_relu_cell": 1}


def _cell_args(name, rng, dtype, batch, bias, nin=5, nh=4):
    g = CELLS[name]
    shape = (batch,) if batch else ()
    arrays = [rng.standard_normal(shape + (nin,)), rng.standard_normal(shape + (nh,))]
    if name == "lstm_cell":
        arrays.append(rng.standard_normal(shape + (nh,)))
    arrays += [rng.standard_normal((g * nh, nin)) * 0.5, rng.standard_normal((g * nh, nh)) * 0.5]
    if bias:
        arrays += [rng.standard_normal(g * nh) * 0.5, rng.standard_normal(g * nh) * 0.5]
    return [a.astype(dtype) for a in arrays]


def _call(mod, name, ts):
    fn = getattr(mod, name)
    if name == "lstm_cell":
        return fn(ts[0], (ts[1], ts[2]), *ts[3:])
    return fn(*ts)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("batch,bias", [(3, True), (3, False), (0, True)])
def test_cell_matches_torch(name, dtype, batch, bias, rng):
    arrays = _cell_args(name, rng, dtype, batch, bias)
    pairs = [_pair(a) for a in arrays]
    fts, tts = [p[0] for p in pairs], [p[1] for p in pairs]
    if not batch:  # torch's cell functions take 2-D inputs only: compare against a batch of one
        tts_call = [t.unsqueeze(0) if i < (3 if name == "lstm_cell" else 2) else t for i, t in enumerate(tts)]
    else:
        tts_call = tts
    out, ref = _call(fl, name, fts), _call(torch, name, tts_call)
    outs, refs = (out, ref) if name == "lstm_cell" else ((out,), (ref,))
    loss_f, loss_t = 0, 0
    for o, r in zip(outs, refs):
        r = r.squeeze(0) if not batch else r
        assert tuple(o.shape) == tuple(r.shape)
        _close(o, r, dtype)
        w = rng.standard_normal(tuple(r.shape)).astype(dtype)
        loss_f = loss_f + (o * fl.tensor(w)).sum()
        loss_t = loss_t + (r * torch.tensor(w)).sum()
    loss_f.backward()
    loss_t.backward()
    for a, b in zip(fts, tts):
        _close(a.grad, b.grad, dtype, scale=10)


def test_cell_noncontiguous_weights(rng):
    x, h = rng.standard_normal((3, 5)), rng.standard_normal((3, 4))
    w_ih, w_hh = rng.standard_normal((5, 12)).T, rng.standard_normal((4, 12)).T  # transposed views
    out = fl.gru_cell(fl.tensor(x), fl.tensor(h), fl.tensor(np.ascontiguousarray(w_ih)).t().t(),
                      fl.tensor(w_hh.T).t())
    ref = torch.gru_cell(torch.tensor(x), torch.tensor(h), torch.tensor(w_ih), torch.tensor(w_hh))
    _close(out, ref)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_double_backward_raises(name, rng):
    ts = [fl.tensor(a, requires_grad=True) for a in _cell_args(name, rng, np.float64, 2, True)]
    out = _call(fl, name, ts)
    out = out[0] if name == "lstm_cell" else out
    (g,) = fl.autograd.grad(out.sum(), ts[0], create_graph=False)
    assert g.shape == ts[0].shape
    out = _call(fl, name, ts)
    out = out[0] if name == "lstm_cell" else out
    with pytest.raises(RuntimeError, match="double backward through .* is not supported"):
        fl.autograd.grad(out.sum(), ts[0], create_graph=True)


def test_cell_errors():
    x, h = fl.randn(3, 5), fl.randn(3, 4)
    with pytest.raises(RuntimeError, match="expected w_ih of shape"):
        fl.gru_cell(x, h, fl.randn(11, 5), fl.randn(12, 4))
    with pytest.raises(RuntimeError, match="inconsistent input_size: got 5 expected 6"):
        fl.rnn_tanh_cell(x, h, fl.randn(4, 6), fl.randn(4, 4))
    with pytest.raises(RuntimeError, match="expected hx of shape"):
        fl.rnn_tanh_cell(x, fl.randn(2, 4), fl.randn(4, 5), fl.randn(4, 4))
    with pytest.raises(RuntimeError, match="b_ih and b_hh must both be given"):
        fl.rnn_relu_cell(x, h, fl.randn(4, 5), fl.randn(4, 4), fl.randn(4))
    with pytest.raises(RuntimeError, match="expected b_hh of shape"):
        fl.rnn_relu_cell(x, h, fl.randn(4, 5), fl.randn(4, 4), fl.randn(4), fl.randn(3))
    with pytest.raises(RuntimeError, match="dtype"):
        fl.rnn_relu_cell(x, h.double(), fl.randn(4, 5), fl.randn(4, 4))
    with pytest.raises(RuntimeError, match="hx must be a pair"):
        fl.lstm_cell(x, h, fl.randn(16, 5), fl.randn(16, 4))
    with pytest.raises(RuntimeError, match="float16 is not supported"):
        fl.gru_cell(x.half(), h.half(), fl.randn(12, 5).half(), fl.randn(12, 4).half())
    with pytest.raises(RuntimeError, match="expected a floating input"):
        fl.gru_cell(x.long(), h.long(), fl.randn(12, 5).long(), fl.randn(12, 4).long())
    with pytest.raises(RuntimeError, match="Expected input to be 1D or 2D"):
        fl.gru_cell(fl.randn(1, 3, 5), h, fl.randn(12, 5), fl.randn(12, 4))


# --- whole-sequence layers -----------------------------------------------------------------------------
def _torch_layer(kind, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, nonlinearity="tanh"):
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    h, c, outs = h0, c0, [None] * x.shape[0]
    for t in steps:
        if kind == "lstm":
            h, c = torch.lstm_cell(x[t], (h, c), w_ih, w_hh, b_ih, b_hh)
        elif kind == "gru":
            h = torch.gru_cell(x[t], h, w_ih, w_hh, b_ih, b_hh)
        else:
            h = getattr(torch, f"rnn_{nonlinearity}_cell")(x[t], h, w_ih, w_hh, b_ih, b_hh)
        outs[t] = h
    return torch.stack(outs), h, c


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_matches_torch_cells(kind, dtype, reverse, rng):
    g = {"lstm": 4, "gru": 3}.get(kind, 1)
    nt, nb, ni, nh = 6, 3, 5, 4
    arrays = [rng.standard_normal((nt, nb, ni)), rng.standard_normal((nb, nh)), rng.standard_normal((nb, nh)),
              rng.standard_normal((g * nh, ni)) * 0.5, rng.standard_normal((g * nh, nh)) * 0.5,
              rng.standard_normal(g * nh) * 0.5, rng.standard_normal(g * nh) * 0.5]
    pairs = [_pair(a.astype(dtype)) for a in arrays]
    f, t = [p[0] for p in pairs], [p[1] for p in pairs]
    nl = kind[4:] if kind.startswith("rnn") else "tanh"
    if kind == "lstm":
        outs = fl._lstm_layer(*f, reverse=reverse)
    elif kind == "gru":
        outs = fl._gru_layer(f[0], f[1], *f[3:], reverse=reverse)
    else:
        outs = fl._rnn_layer(f[0], f[1], *f[3:], nonlinearity=nl, reverse=reverse)
    refs = _torch_layer(kind[:3] if kind != "lstm" else kind, *t, reverse, nl)[:len(outs)]
    loss_f, loss_t = 0, 0
    for o, r in zip(outs, refs):
        _close(o, r, dtype)
        w = rng.standard_normal(tuple(r.shape)).astype(dtype)
        loss_f = loss_f + (o * fl.tensor(w)).sum()
        loss_t = loss_t + (r * torch.tensor(w)).sum()
    loss_f.backward()
    loss_t.backward()
    for a, b in zip(f, t):
        if b.grad is not None:
            _close(a.grad, b.grad, dtype, scale=10)


def test_layer_errors():
    with pytest.raises(RuntimeError, match="expected a 3-D input"):
        fl._lstm_layer(fl.randn(3, 5), fl.randn(3, 4), fl.randn(3, 4), fl.randn(16, 5), fl.randn(16, 4))
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        fl._rnn_layer(fl.randn(2, 3, 5), fl.randn(3, 4), fl.randn(4, 5), fl.randn(4, 4), nonlinearity="sigmoid")


def test_sdpa_heads_in_parallel_match_torch_and_restore_blas_threads(rng):
    """Large batches split the per-head GEMMs over threads with BLAS on one thread meanwhile."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from flambeau._blas import _controllers, blas_is_controllable, single_threaded_blas

    numpy_blas = {c.filepath for c in _controllers()}

    def blas_threads():  # of the BLAS numpy calls (numba's compiler may load scipy's own copy as well)
        return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["filepath"] in numpy_blas]

    before = blas_threads()
    q, k, v = (rng.standard_normal((4, 8, 64, 32)).astype(np.float32) for _ in range(3))
    (fq, tq), (fk, tk), (fv, tv) = _pair(q), _pair(k), _pair(v)
    out = fl.scaled_dot_product_attention(fq, fk, fv, is_causal=True)
    ref = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    _close(out, ref, np.float32)
    out.sum().backward()
    ref.sum().backward()
    for a, b in ((fq, tq), (fk, tk), (fv, tv)):
        _close(a.grad, b.grad, np.float32, scale=10)
    assert blas_threads() == before
    if blas_is_controllable():
        with single_threaded_blas():
            with single_threaded_blas():
                assert set(blas_threads()) == {1}
            assert set(blas_threads()) == {1}
        assert blas_threads() == before
