"""Upsampling (nearest, linear, bilinear) and pixel_shuffle against torch: values, gradients, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import flambeau as fl
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")
NN = torch._C._nn

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _check(fl_fn, torch_fn, x, dtype, rng):
    fx = fl.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    out, ref = fl_fn(fx), torch_fn(tx)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), **TOL[dtype])
    g = rng.standard_normal(tuple(ref.shape)).astype(dtype)
    out.backward(fl.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=TOL[dtype]["rtol"] * 10,
                               atol=TOL[dtype]["atol"] * 10)


SIZES_2D = [((4, 5), (8, 10)), ((4, 5), (7, 3)), ((5, 5), (5, 5)), ((3, 4), (11, 13)), ((6, 6), (2, 3)),
            ((1, 1), (3, 2)), ((4, 3), (1, 1))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", SIZES_2D, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_bilinear2d(dtype, sizes, align_corners, rng):
    (h, w), out = sizes
    x = rng.standard_normal((2, 3, h, w)).astype(dtype)
    _check(lambda t: fl.upsample_bilinear2d(t, out, align_corners),
           lambda t: NN.upsample_bilinear2d(t, list(out), align_corners), x, dtype, rng)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", SIZES_2D, ids=str)
def test_nearest2d(dtype, sizes, rng):
    (h, w), out = sizes
    x = rng.standard_normal((2, 3, h, w)).astype(dtype)
    _check(lambda t: fl.upsample_nearest2d(t, out), lambda t: NN.upsample_nearest2d(t, list(out)), x, dtype, rng)


@pytest.mark.parametrize("scales", [(2.0, 2.0), (1.7, 2.3), (0.6, 3.1), (2.5, 0.5)])
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bilinear_ac"])
def test_2d_with_scales(scales, mode, rng):
    x = rng.standard_normal((1, 2, 5, 7))
    out = (int(np.floor(5 * scales[0])), int(np.floor(7 * scales[1])))
    if mode == "nearest":
        _check(lambda t: fl.upsample_nearest2d(t, out, *scales),
               lambda t: NN.upsample_nearest2d(t, list(out), *scales), x, np.float64, rng)
    else:
        ac = mode == "bilinear_ac"
        _check(lambda t: fl.upsample_bilinear2d(t, out, ac, *scales),
               lambda t: NN.upsample_bilinear2d(t, list(out), ac, *scales), x, np.float64, rng)
        x32 = x.astype(np.float32)
        _check(lambda t: fl.upsample_bilinear2d(t, out, ac, *scales),
               lambda t: NN.upsample_bilinear2d(t, list(out), ac, *scales), x32, np.float32, rng)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_in,n_out,scale", [(5, 10, None), (5, 13, None), (7, 3, None), (4, 9, 2.3), (6, 6, None)])
def test_1d(dtype, n_in, n_out, scale, rng):
    x = rng.standard_normal((2, 3, n_in)).astype(dtype)
    _check(lambda t: fl.upsample_nearest1d(t, (n_out,), scale),
           lambda t: NN.upsample_nearest1d(t, [n_out], scale), x, dtype, rng)
    for ac in (False, True):
        _check(lambda t, ac=ac: fl.upsample_linear1d(t, (n_out,), ac, scale),
               lambda t, ac=ac: NN.upsample_linear1d(t, [n_out], ac, scale), x, dtype, rng)


def test_noncontiguous_input(rng):
    x = rng.standard_normal((3, 2, 6, 5))
    fx = fl.tensor(x).transpose(0, 1)[..., ::2, :]
    tx = torch.tensor(x).transpose(0, 1)[..., ::2, :]
    np.testing.assert_allclose(fl.upsample_bilinear2d(fx, (7, 9), False).numpy(),
                               NN.upsample_bilinear2d(tx, [7, 9], False).numpy(), rtol=1e-12)
    np.testing.assert_allclose(fl.upsample_nearest2d(fx, (7, 9)).numpy(), NN.upsample_nearest2d(tx, [7, 9]).numpy())


def test_float16_and_empty_batch(rng):
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float16)
    out = fl.upsample_bilinear2d(fl.tensor(x), (6, 8), False)
    assert out.dtype is fl.float16
    ref = NN.upsample_bilinear2d(torch.tensor(x.astype(np.float32)), [6, 8], False).numpy()
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref, atol=5e-3)
    assert fl.upsample_nearest2d(fl.zeros(0, 3, 2, 2), (4, 4)).shape == (0, 3, 4, 4)
    assert fl.upsample_bilinear2d(fl.zeros(2, 0, 2, 2), (4, 4), True).shape == (2, 0, 4, 4)


def test_double_backward(rng):
    x = fl.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)
    assert gradgradcheck(lambda t: fl.upsample_bilinear2d(t, (5, 6), False), (x,))
    assert gradgradcheck(lambda t: fl.upsample_nearest2d(t, (5, 7)), (x,))


@given(h=st.integers(1, 6), w=st.integers(1, 6), k=st.integers(1, 4))
def test_nearest_integer_scale_is_repeat(h, w, k):
    x = np.arange(h * w, dtype=np.float32).reshape(1, 1, h, w)
    out = fl.upsample_nearest2d(fl.tensor(x), (h * k, w * k)).numpy()
    np.testing.assert_array_equal(out, x.repeat(k, 2).repeat(k, 3))


@given(h=st.integers(1, 6), w=st.integers(2, 6))
def test_bilinear_align_corners_keeps_corners(h, w):
    x = np.random.default_rng(h * 7 + w).standard_normal((1, 1, h, w))
    out = fl.upsample_bilinear2d(fl.tensor(x), (2 * h + 1, 3 * w), True).numpy()
    for i, j in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
        np.testing.assert_allclose(out[0, 0, i, j], x[0, 0, i, j], rtol=1e-12)


def test_upsample_errors():
    x = fl.randn(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match="Expected 4D input tensor, but got 3D"):
        fl.upsample_bilinear2d(fl.randn(2, 3, 4), (5, 5), False)
    with pytest.raises(RuntimeError, match="It is expected output_size equals to 2, but got size 1"):
        fl.upsample_nearest2d(x, (5,))
    with pytest.raises(RuntimeError, match="should be greater than 0"):
        fl.upsample_nearest2d(x, (0, 4))
    with pytest.raises(RuntimeError, match="should be greater than 0"):
        fl.upsample_nearest1d(fl.randn(1, 2, 0), (3,))
    with pytest.raises(RuntimeError, match="expected a floating input"):
        fl.upsample_nearest1d(fl.ones(1, 2, 3, dtype=fl.int64), (3,))
    with pytest.raises(RuntimeError, match="expected grad_output of shape"):
        fl.upsample_bilinear2d_backward(fl.randn(1, 2, 5, 5), (5, 6), (1, 2, 3, 4), False)
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        fl.upsample_linear1d([1.0], (3,), False)


# --- pixel shuffle ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,r", [((2, 8, 3, 4), 2), ((18, 2, 3), 3), ((2, 2, 4, 1, 2), 2), ((1, 1, 1), 1)])
def test_pixel_shuffle_roundtrip_matches_torch(shape, r, rng):
    x = rng.standard_normal(shape)
    fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = fl.pixel_shuffle(fx, r), torch.pixel_shuffle(tx, r)
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(fl.pixel_unshuffle(out, r).detach().numpy(), x)
    np.testing.assert_array_equal(fl.pixel_unshuffle(fl.tensor(ref.detach().numpy()), r).numpy(),
                                  torch.pixel_unshuffle(ref, r).detach().numpy())
    g = rng.standard_normal(tuple(ref.shape))
    out.backward(fl.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_array_equal(fx.grad.numpy(), tx.grad.numpy())


def test_pixel_shuffle_errors():
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        fl.pixel_shuffle(fl.randn(1, 6, 2, 2), 2)
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        fl.pixel_shuffle(fl.randn(4, 4), 2)
    with pytest.raises(RuntimeError, match="positive upscale_factor"):
        fl.pixel_shuffle(fl.randn(1, 4, 2, 2), 0)
    with pytest.raises(RuntimeError, match="divisible by downscale_factor"):
        fl.pixel_unshuffle(fl.randn(1, 1, 3, 4), 2)
