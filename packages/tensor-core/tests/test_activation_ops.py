"""The activation operators of ``_ops/activation.py`` against torch: values, layouts, in-place forms,
gradients and error messages."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops import OPS

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(7)

# name -> (flambeau fn, torch fn, in-place flambeau fn or None)
OPS_UNDER_TEST = {
    "leaky_relu": (lambda x: fl.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2),
                   lambda x: x.leaky_relu_(0.2)),
    "leaky_relu#default": (lambda x: fl.leaky_relu(x), lambda x: TF.leaky_relu(x), lambda x: x.leaky_relu_()),
    "elu": (lambda x: fl.elu(x, 1.3), lambda x: TF.elu(x, 1.3), lambda x: x.elu_(1.3)),
    "elu#scales": (lambda x: fl.elu(x, 0.5, 2.0, 1.5), lambda x: torch.ops.aten.elu(x, 0.5, 2.0, 1.5), None),
    "selu": (fl.selu, torch.selu, lambda x: x.selu_()),
    "celu": (lambda x: fl.celu(x, 0.7), lambda x: torch.celu(x, 0.7), lambda x: x.celu_(0.7)),
    "hardtanh": (lambda x: fl.hardtanh(x, -0.5, 2.0), lambda x: TF.hardtanh(x, -0.5, 2.0),
                 lambda x: x.hardtanh_(-0.5, 2.0)),
    "mish": (fl.mish, TF.mish, lambda x: x.mish_()),
    "hardswish": (fl.hardswish, TF.hardswish, lambda x: x.hardswish_()),
    "hardsigmoid": (fl.hardsigmoid, TF.hardsigmoid, lambda x: x.hardsigmoid_()),
    "log_sigmoid": (fl.log_sigmoid, TF.logsigmoid, None),
    "threshold": (lambda x: fl.threshold(x, 0.3, -2.0), lambda x: torch.threshold(x, 0.3, -2.0),
                  lambda x: x.threshold_(0.3, -2.0)),
    "hardshrink": (lambda x: fl.hardshrink(x, 0.6), lambda x: torch.hardshrink(x, 0.6), None),
    "softshrink": (lambda x: fl.softshrink(x, 0.6), lambda x: TF.softshrink(x, 0.6), None),
}
NAMES = sorted(OPS_UNDER_TEST)
TOL = {np.float32: dict(rtol=2e-6, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}


def _data(shape, dtype):
    # values spread over the interesting ranges (around 0, +-3, large magnitudes)
    return np.asarray(RNG.standard_normal(shape) * 4).astype(dtype)


def _layouts(a: np.ndarray):
    """(flambeau tensor, torch tensor) pairs: contiguous, transposed and strided views of ``a``."""
    yield fl.from_numpy(a.copy()), torch.from_numpy(a.copy())
    if a.ndim >= 2:
        yield fl.from_numpy(a.copy()).transpose(0, 1), torch.from_numpy(a.copy()).transpose(0, 1)
    if a.ndim >= 1 and a.shape[-1] > 2:
        yield fl.from_numpy(a.copy())[..., ::2], torch.from_numpy(a.copy())[..., ::2]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 3, 4)])
def test_values_match_torch(name, dtype, shape):
    f, tf, _ = OPS_UNDER_TEST[name]
    for x, tx in _layouts(_data(shape, dtype)):
        out = f(x)
        ref = tf(tx)
        assert out.dtype == {np.float32: fl.float32, np.float64: fl.float64}[dtype]
        assert tuple(out.shape) == tuple(ref.shape)
        np.testing.assert_allclose(out.numpy(), ref.numpy(), **TOL[dtype])


@pytest.mark.parametrize("name", [n for n in NAMES if OPS_UNDER_TEST[n][2] is not None])
def test_inplace_forms(name):
    f, _, f_ = OPS_UNDER_TEST[name]
    a = _data((4, 6), np.float32)
    x = fl.from_numpy(a.copy())
    v = x._version
    y = f_(x)
    assert y is x and x._version > v
    np.testing.assert_allclose(x.numpy(), f(fl.from_numpy(a)).numpy(), rtol=1e-6, atol=1e-7)
    # into a strided view: only the view changes
    base = fl.from_numpy(a.copy())
    f_(base[:, ::2])
    np.testing.assert_array_equal(base.numpy()[:, 1::2], a[:, 1::2])
    np.testing.assert_allclose(base.numpy()[:, ::2], f(fl.from_numpy(a[:, ::2].copy())).numpy(), rtol=1e-6,
                               atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_match_torch(name):
    f, tf, _ = OPS_UNDER_TEST[name]
    a = _data((5, 4), np.float64)
    g = RNG.standard_normal((5, 4))
    x = fl.from_numpy(a.copy()).requires_grad_()
    tx = torch.from_numpy(a.copy()).requires_grad_()
    f(x).backward(fl.from_numpy(g.copy()))
    tf(tx).backward(torch.from_numpy(g.copy()))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **_grad_tol(name))


# torch's celu and hardsigmoid backward use float32 constants (1 / alpha, 1 / 6) even for float64
def _grad_tol(name):
    return dict(rtol=1e-6, atol=1e-12) if name in ("celu", "hardsigmoid") else dict(rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", [n for n in NAMES if OPS_UNDER_TEST[n][2] is not None])
def test_inplace_under_autograd_matches_torch(name):
    f, tf, f_ = OPS_UNDER_TEST[name]
    a = _data((3, 4), np.float64)
    x = fl.from_numpy(a.copy()).requires_grad_()
    tx = torch.from_numpy(a.copy()).requires_grad_()
    y = x * 1.5
    ty = tx * 1.5
    f_(y)
    ty = tf(ty)  # torch's out-of-place form gives the reference gradient
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **_grad_tol(name))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        f_(fl.ones(2, requires_grad=True))


def test_saturation_and_special_values():
    x = fl.tensor([-1e4, -100.0, -20.0, 0.0, 20.0, 100.0, 1e4, float("inf"), float("-inf")])
    tx = torch.tensor(x.tolist())
    with np.errstate(all="raise", under="ignore"):  # no floating-point warnings leak from the kernels
        for f, tf in [(fl.log_sigmoid, TF.logsigmoid), (fl.mish, TF.mish), (fl.elu, TF.elu), (fl.selu, torch.selu),
                      (lambda t: fl.celu(t, 2.0), lambda t: torch.celu(t, 2.0)), (fl.hardswish, TF.hardswish)]:
            np.testing.assert_allclose(f(x).numpy(), tf(tx).numpy(), rtol=1e-6, atol=1e-30)
    nan = fl.tensor([float("nan")])
    for f in (fl.leaky_relu, fl.elu, fl.mish, fl.log_sigmoid, fl.hardtanh, fl.hardswish):
        assert np.isnan(f(nan).item())


def test_float16():
    a = _data((10,), np.float16)
    for name in ("leaky_relu", "hardtanh", "hardswish", "elu"):
        f, tf, _ = OPS_UNDER_TEST[name]
        out = f(fl.from_numpy(a.copy()))
        assert out.dtype == fl.float16
        np.testing.assert_allclose(out.numpy().astype(np.float32),
                                   tf(torch.from_numpy(a.copy()).float()).numpy(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("wshape, xshape", [((1,), (4, 3, 2, 2)), ((3,), (4, 3, 2, 2)), ((3,), (5, 3)),
                                            ((1,), (6,)), ((1,), ()), ((3,), (2, 3, 5))])
def test_prelu_matches_torch(wshape, xshape):
    a = _data(xshape, np.float64)
    w = RNG.uniform(-0.5, 0.5, wshape)
    g = RNG.standard_normal(xshape)
    x = fl.from_numpy(a.copy()).requires_grad_()
    wt = fl.from_numpy(w.copy()).requires_grad_()
    tx = torch.from_numpy(a.copy()).requires_grad_()
    twt = torch.from_numpy(w.copy()).requires_grad_()
    out, ref = fl.prelu(x, wt), torch.prelu(tx, twt)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    out.backward(fl.from_numpy(g.copy()))
    ref.backward(torch.from_numpy(g.copy()))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(wt.grad.numpy(), twt.grad.numpy(), rtol=1e-10)
    assert x.prelu(wt).shape == x.shape  # also a Tensor method, as in torch


def test_errors():
    with pytest.raises(NotImplementedError, match='"leaky_relu_cpu" not implemented for \'Long\''):
        fl.leaky_relu(fl.arange(3))
    with pytest.raises(TypeError, match=r"elu\(\): argument 'input' \(position 1\) must be Tensor, not list"):
        fl.elu([1.0])
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        fl.hardtanh(fl.ones(2), 2.0, 1.0)
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
        fl.prelu(fl.ones(2, 3), fl.ones(2))
    with pytest.raises(RuntimeError, match="lambda must be greater or equal to 0"):
        fl.softshrink(fl.ones(2), -1.0)


def test_table_declarations():
    for name in ("leaky_relu", "elu", "selu", "celu", "hardtanh", "mish", "hardswish", "hardsigmoid", "prelu",
                 "log_sigmoid", "threshold", "hardshrink", "softshrink"):
        op = OPS[name]
        assert op.category == "activation_ext" and op.differentiable
        assert callable(getattr(fl, name))
    for name in ("leaky_relu_", "elu_", "selu_", "celu_", "hardtanh_", "mish_", "hardswish_", "hardsigmoid_",
                 "threshold_"):
        assert callable(getattr(fl.Tensor, name))
    assert hasattr(fl.Tensor, "prelu") and hasattr(fl.Tensor, "hardshrink")
    assert not hasattr(fl.Tensor, "leaky_relu")  # torch has no such method


def _away_from_kinks(shape, kinks):
    v = RNG.uniform(-4, 4, size=shape)
    for k in kinks:
        close = np.abs(v - k) < 0.05
        v[close] = k + 0.1
    return fl.tensor(v, dtype=fl.float64, requires_grad=True)


SECOND_ORDER = {
    "leaky_relu": (lambda x: fl.leaky_relu(x, 0.2), (0.0,)),
    "elu": (lambda x: fl.elu(x, 1.3, 1.2, 0.7), (0.0,)),
    "selu": (fl.selu, (0.0,)),
    "celu": (lambda x: fl.celu(x, 0.6), (0.0,)),
    "hardtanh": (lambda x: fl.hardtanh(x, -1.5, 2.0), (-1.5, 2.0)),
    "mish": (fl.mish, ()),
    "hardswish": (fl.hardswish, (-3.0, 3.0)),
    "hardsigmoid": (fl.hardsigmoid, (-3.0, 3.0)),
    "log_sigmoid": (fl.log_sigmoid, ()),
    "threshold": (lambda x: fl.threshold(x, 0.5, -2.0), (0.5,)),
    "hardshrink": (lambda x: fl.hardshrink(x, 0.5), (-0.5, 0.5)),
    "softshrink": (lambda x: fl.softshrink(x, 0.5), (-0.5, 0.5)),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_derivatives(name):
    from flambeau.autograd import gradgradcheck

    f, kinks = SECOND_ORDER[name]
    assert gradgradcheck(f, (_away_from_kinks((3, 4), kinks),))


def test_second_derivatives_prelu_and_hardtanh_backward():
    from flambeau.autograd import gradgradcheck

    x = _away_from_kinks((2, 3, 4), (0.0,))
    w = fl.tensor([0.1, -0.4, 0.3], dtype=fl.float64, requires_grad=True)
    assert gradgradcheck(fl.prelu, (x, w))
    g = _away_from_kinks((2, 3), ())
    y = _away_from_kinks((2, 3), (-1.0, 1.0))
    assert gradgradcheck(lambda a, b: fl.hardtanh_backward(a, b, -1.0, 1.0), (g, y))


def test_hardtanh_backward_op():
    g = fl.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    x = fl.tensor([-2.0, -1.0, 0.0, 1.0, 2.0])
    assert fl.hardtanh_backward(g, x, -1.0, 1.0).tolist() == [0.0, 0.0, 3.0, 0.0, 0.0]
    tg = torch.tensor(g.tolist())
    tx = torch.tensor(x.tolist())
    assert torch.ops.aten.hardtanh_backward(tg, tx, -1.0, 1.0).tolist() == [0.0, 0.0, 3.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="does not match input of shape"):
        fl.hardtanh_backward(fl.ones(2), fl.ones(3), -1.0, 1.0)



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_hardtanh_backward_fused_kernel_matches_torch(dtype, layout):
    # large enough for the fused kernel; the bounds themselves and infinities included (NaN: torch's
    # vectorised loop gives 0, its scalar loop the gradient; ours gives 0 for every layout)
    rng = np.random.default_rng(3)
    x = rng.uniform(-8, 8, (96, 130)).astype(dtype)
    x.flat[:8] = [0.0, 6.0, 0.0, 6.0, float("inf"), -float("inf"), 6.000001, -1e-30]
    g = rng.standard_normal((96, 130)).astype(dtype)
    if layout == "transposed":
        x, g = x.T, g.T
    elif layout == "strided":
        x, g = x[:, ::2], g[:, ::2]
    got = fl.hardtanh_backward(fl.from_numpy(g), fl.from_numpy(x), 0.0, 6.0)
    ref = torch.ops.aten.hardtanh_backward(torch.from_numpy(g), torch.from_numpy(x), 0.0, 6.0)
    assert got.dtype == (fl.float32 if dtype == np.float32 else fl.float64)
    np.testing.assert_array_equal(got.numpy(), ref.numpy())
    x[0, 0] = np.nan
    assert fl.hardtanh_backward(fl.from_numpy(g), fl.from_numpy(x), 0.0, 6.0)[0, 0].item() == 0.0

# --- the fused kernels: gelu, silu (declared in elementwise.py), mish, hardswish and their *_backward ----
GELU_TOL = {np.float32: dict(rtol=1e-5, atol=3e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}
BWD_TOL = {np.float32: dict(rtol=2e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
SPECIALS = [0.0, -0.0, 1e-30, -1e-30, 2.9, -2.9, 3.0, -3.0, 3.9, -3.9, 5.7, -5.7, 8.5, -8.5, 19.9, 20.5, 30.0,
            -30.0, 90.0, -90.0, 1e4, -1e4, float("inf"), float("-inf"), float("nan")]
# Note [torch's float32 GELU at infinity]: on CPUs with AVX-512, torch 2.13's vectorised float32
# GELU gives NaN for +inf and inf for 3e38 (its erf overflows); GELU(inf) is inf and float64 torch
# says so. Forward values are therefore compared with torch computing in float64, rounded to the
# input's dtype: the more exact reference, on every CPU.
# name -> (flambeau forward, torch forward, flambeau backward op, torch backward op)
FUSED = {
    "gelu": (fl.gelu, TF.gelu, fl.gelu_backward, torch.ops.aten.gelu_backward),
    "gelu_tanh": (lambda x: fl.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"),
                  lambda g, x: fl.gelu_backward(g, x, approximate="tanh"),
                  lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate="tanh")),
    "silu": (fl.silu, TF.silu, fl.silu_backward, torch.ops.aten.silu_backward),
    "mish": (fl.mish, TF.mish, fl.mish_backward, torch.ops.aten.mish_backward),
    "hardswish": (fl.hardswish, TF.hardswish, fl.hardswish_backward, torch.ops.aten.hardswish_backward),
}


def _fused_data(shape, dtype):
    a = np.asarray(RNG.standard_normal(shape) * 4)
    flat = a.reshape(-1)
    flat[: min(flat.size, len(SPECIALS))] = SPECIALS[: flat.size]
    return a.astype(dtype)


def _fused_layouts(a: np.ndarray):
    yield from _layouts(a)
    if a.ndim >= 1:  # a broadcast (stride 0) view
        yield fl.from_numpy(a[..., :1].copy()).expand(*a.shape), torch.from_numpy(a[..., :1].copy()).expand(*a.shape)


@pytest.mark.parametrize("name", sorted(FUSED))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (70, 300)])
def test_fused_values_match_torch(name, dtype, shape):
    f, tf, _, _ = FUSED[name]
    for x, tx in _fused_layouts(_fused_data(shape, dtype)):
        out = f(x)
        ref = tf(tx.double()).to(tx.dtype)  # Note [torch's float32 GELU at infinity]
        assert out.dtype == {np.float32: fl.float32, np.float64: fl.float64}[dtype]
        assert tuple(out.shape) == tuple(ref.shape)
        np.testing.assert_allclose(out.numpy(), ref.numpy(), equal_nan=True, **GELU_TOL[dtype])


@pytest.mark.parametrize("name", sorted(FUSED))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 3, 4), (70, 300)])
def test_fused_backward_matches_torch(name, dtype, shape):
    _, _, fb, tfb = FUSED[name]
    a = _fused_data(shape, dtype)
    gn = RNG.standard_normal(shape).astype(dtype)
    for (x, tx), (g, tg) in zip(_fused_layouts(a), _fused_layouts(gn)):
        for g_, tg_ in ((g, tg), (g.contiguous(), tg.contiguous())):  # mixed layouts too
            out = fb(g_, x)
            ref = tfb(tg_, tx).numpy()
            if name == "hardswish":  # torch's vectorised loop gives NaN at x = NaN, its scalar tail grad_output
                ref = np.where(np.isnan(tx.numpy()), np.nan, ref)
            assert out.dtype == x.dtype and tuple(out.shape) == ref.shape
            np.testing.assert_allclose(out.numpy(), ref, equal_nan=True, **BWD_TOL[dtype])


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_float16(name):
    f, tf, fb, tfb = FUSED[name]
    a = _fused_data((30,), np.float16)
    gn = RNG.standard_normal(30).astype(np.float16)
    out = f(fl.from_numpy(a.copy()))
    assert out.dtype == fl.float16
    ref = tf(torch.from_numpy(a.copy()).double()).numpy().astype(np.float16)  # Note [torch's float32 GELU ...]
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3, equal_nan=True)
    out = fb(fl.from_numpy(gn.copy()), fl.from_numpy(a.copy()))
    assert out.dtype == fl.float16
    ref = tfb(torch.from_numpy(gn.copy()).float(), torch.from_numpy(a.copy()).float()).numpy().astype(np.float16)
    ref[np.isnan(a)] = np.nan  # hardswish: see test_fused_backward_matches_torch
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3, equal_nan=True)


def test_fused_fortran_layout_kept():
    x = fl.from_numpy(np.asfortranarray(_fused_data((6, 5), np.float32)))
    out = fl.gelu(x)
    assert out.numpy().flags.f_contiguous  # the layout of a dense input is kept, as torch does
    np.testing.assert_allclose(out.numpy(), TF.gelu(torch.from_numpy(x.numpy())).numpy(), equal_nan=True,
                               **GELU_TOL[np.float32])


@pytest.mark.parametrize("name", sorted(FUSED))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_autograd_matches_torch(name, dtype):
    f, tf, _, _ = FUSED[name]
    a = (RNG.standard_normal((40, 30)) * 3).astype(dtype)
    g = RNG.standard_normal((40, 30)).astype(dtype)
    x = fl.from_numpy(a.copy()).requires_grad_()
    tx = torch.from_numpy(a.copy()).requires_grad_()
    f(x).backward(fl.from_numpy(g.copy()))
    tf(tx).backward(torch.from_numpy(g.copy()))
    tol = dict(rtol=2e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)
    assert x.grad.grad_fn is None  # backward() ran the fused kernel without recording it
    # double backward: d/dx sum(w * (g * f'(x))), against torch's
    x.grad = tx.grad = None
    (gx,) = fl.autograd.grad(f(x), x, fl.from_numpy(g.copy()), create_graph=True)
    (tgx,) = torch.autograd.grad(tf(tx), tx, torch.from_numpy(g.copy()), create_graph=True)
    assert gx.grad_fn is not None
    w = RNG.standard_normal((40, 30)).astype(dtype)
    (gx * fl.from_numpy(w.copy())).sum().backward()
    (tgx * torch.from_numpy(w.copy())).sum().backward()
    # float32 second derivatives cancel in 1 - tanh(u)^2 (both libraries) where tanh saturates
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **(dict(rtol=1e-4, atol=1e-4) if dtype == np.float32
                                                                   else tol))


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_second_derivatives(name):
    from flambeau.autograd import gradgradcheck

    f, _, fb, _ = FUSED[name]
    x = _away_from_kinks((3, 4), (-3.0, 3.0) if name == "hardswish" else ())
    assert gradgradcheck(f, (x,))
    g = fl.tensor(RNG.standard_normal((3, 4)), dtype=fl.float64, requires_grad=True)
    assert gradgradcheck(fb, (g, x))


def test_fused_backward_errors():
    for name in ("gelu_backward", "silu_backward", "mish_backward", "hardswish_backward"):
        assert OPS[name].category == "activation_ext" and OPS[name].differentiable
        fb = getattr(fl, name)
        with pytest.raises(RuntimeError, match=f"{name}\\(\\): grad_output of shape \\[2\\] does not match input"):
            fb(fl.ones(2), fl.ones(3))
        with pytest.raises(TypeError, match="argument 'grad_output' \\(position 1\\) must be Tensor"):
            fb([1.0], fl.ones(1))
        with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
            fb(fl.ones(2), fl.arange(2))
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        fl.gelu_backward(fl.ones(2), fl.ones(2), approximate="erf")


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_backward_composite_fallback(name, monkeypatch):
    # devices without a kernel of the *_backward op (CUDA) compute it from differentiable operators
    from flambeau.autograd import gradgradcheck

    _, _, fb, _ = FUSED[name]
    opname = "gelu_backward" if name.startswith("gelu") else f"{name}_backward"
    x = _away_from_kinks((3, 4), (-3.0, 3.0) if name == "hardswish" else ())
    g = fl.tensor(RNG.standard_normal((3, 4)), dtype=fl.float64, requires_grad=True)
    fused = fb(g, x).detach().numpy()
    monkeypatch.delitem(OPS[opname].kernels, "cpu")
    out = fb(g, x)
    assert out.grad_fn is not None and out.grad_fn.name() != opname  # recorded through its primitives
    np.testing.assert_allclose(out.detach().numpy(), fused, rtol=1e-12, atol=1e-14)
    assert gradgradcheck(fb, (g, x))


def test_shrink_and_threshold_keep_nan_and_prelu_ignores_infinite_weights_for_positive_inputs():
    import torch

    x = [float("nan"), 1.0, -1.0, 0.2, 0.5, -0.5]
    for name, args in (("threshold", (0.5, 9.0)), ("hardshrink", (0.5,)), ("softshrink", (0.5,))):
        got = getattr(fl, name)(fl.tensor(x), *args).numpy()
        want = getattr(torch.nn.functional, name)(torch.tensor(x), *args).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
    got = fl.prelu(fl.tensor([2.0, -1.0]), fl.tensor([float("inf")])).numpy()
    np.testing.assert_array_equal(got, [2.0, -float("inf")])


_FUSED_FORWARD = {
    "leaky_relu": (lambda m, x: m.nn.functional.leaky_relu(x, 0.2), 0),
    "leaky_relu_": (lambda m, x: m.nn.functional.leaky_relu_(x, 0.2), 0),
    "elu": (lambda m, x: m.nn.functional.elu(x, 1.3), 1),
    "elu_": (lambda m, x: m.nn.functional.elu_(x, 1.3), 1),
    "selu": (lambda m, x: m.nn.functional.selu(x), 1),
    "celu": (lambda m, x: m.nn.functional.celu(x, 0.7), 1),
    "hardsigmoid": (lambda m, x: m.nn.functional.hardsigmoid(x), 0),
    "log_sigmoid": (lambda m, x: m.nn.functional.logsigmoid(x), 2),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(_FUSED_FORWARD))
def test_fused_forward_activations_on_large_tensors(name, dtype):
    """leaky_relu, the elu family and hardsigmoid of large C-contiguous float tensors run one fused pass
    (``activation.fusable``): torch's values for NaN, infinities, signed zeros and inputs near 0 (elu's
    expm1 by its series there), in place and on transposed and strided views (numpy's path)."""
    fn, ulps = _FUSED_FORWARD[name]
    x = np.concatenate([RNG.normal(size=6000) * 5, -np.logspace(-9, 2, 3000), np.logspace(-9, 2, 3000)])
    x[:7] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -3.0, 3.0]
    x = x.astype(dtype).reshape(96, 125)
    rtol = ulps * 4 * np.finfo(dtype).eps
    for fused, view in ((True, lambda a: a), (False, lambda a: a.T), (False, lambda a: a[:, ::2])):
        got = fn(fl, view(fl.from_numpy(x.copy()))).numpy()
        want = fn(torch, view(torch.from_numpy(x.copy()))).numpy()
        np.testing.assert_allclose(got, want, rtol=rtol, atol=np.finfo(dtype).tiny)  # (subnormals: absolute)
        if fused:  # (numpy's forms may give elu(-0.0) = +0.0; torch and the fused kernel keep -0.0)
            real = ~np.isnan(want)  # (a NaN's sign bit means nothing)
            assert np.array_equal(np.signbit(got[real]), np.signbit(want[real]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["relu", "relu6", "hardtanh"])
def test_fused_clamps_on_large_tensors(name, dtype):
    """relu, relu6 and hardtanh of large C-contiguous float tensors take the fused parallel kernel
    (``activation.fusable``): the same values as torch, NaN, infinities and the sign of zero included;
    transposed and strided inputs (numpy's path) too."""
    fns = {"relu": (fl.relu, torch.relu), "relu6": (fl.nn.functional.relu6, TF.relu6),
           "hardtanh": (lambda x: fl.hardtanh(x, -0.5, 0.7), lambda x: TF.hardtanh(x, -0.5, 0.7))}
    ours, theirs = fns[name]
    x = RNG.normal(size=(96, 130)).astype(dtype)
    x.reshape(-1)[:7] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 6.0, -0.5]
    for fused, view in ((True, lambda a: a), (False, lambda a: a.T), (False, lambda a: a[:, ::2])):
        got = ours(view(fl.from_numpy(x))).numpy()
        want = theirs(view(torch.from_numpy(x))).numpy()
        np.testing.assert_array_equal(got, want)
        if fused:  # (numpy's maximum makes relu(-0.0) +0.0; torch and the fused kernel keep -0.0)
            assert np.array_equal(np.signbit(got), np.signbit(want))
    inplace = {"relu": lambda t: t.relu_(), "relu6": lambda t: fl.nn.functional.relu6(t, inplace=True),
               "hardtanh": lambda t: fl.nn.functional.hardtanh_(t, -0.5, 0.7)}[name]
    for view in (lambda a: a, lambda a: a.T, lambda a: a[:, ::2]):  # the fused kernel writes into self
        t = fl.from_numpy(x.copy())
        v = view(t)
        assert inplace(v) is v
        np.testing.assert_array_equal(v.numpy(), theirs(view(torch.from_numpy(x))).numpy())
