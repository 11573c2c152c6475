"""F.interpolate and the upsampling / pixel-shuffle modules against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _compare(fl_fn, torch_fn, x, rtol=1e-12, atol=1e-13):
    fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = fl_fn(fx), torch_fn(tx)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    g = np.random.default_rng(1).standard_normal(tuple(ref.shape)).astype(x.dtype)
    out.backward(fl.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=rtol * 10, atol=atol * 10)


CASES = [
    ("nearest", 4, {"scale_factor": 2}),
    ("nearest", 4, {"scale_factor": (1.5, 2.7)}),
    ("nearest", 4, {"size": (7, 3)}),
    ("nearest", 4, {"size": 9}),
    ("nearest", 4, {"scale_factor": 1.7, "recompute_scale_factor": True}),
    ("nearest", 3, {"scale_factor": 2.5}),
    ("nearest", 3, {"size": 11}),
    ("bilinear", 4, {"scale_factor": 2}),
    ("bilinear", 4, {"scale_factor": 2, "align_corners": True}),
    ("bilinear", 4, {"scale_factor": (0.7, 1.9)}),
    ("bilinear", 4, {"scale_factor": (0.7, 1.9), "recompute_scale_factor": True}),
    ("bilinear", 4, {"size": (10, 4), "align_corners": True}),
    ("bilinear", 4, {"size": (10, 4), "align_corners": False}),
    ("linear", 3, {"scale_factor": 3.3}),
    ("linear", 3, {"size": 4, "align_corners": True}),
    ("trilinear", 5, {"scale_factor": 2}),
    ("trilinear", 5, {"scale_factor": (0.7, 1.9, 1.3)}),
    ("trilinear", 5, {"size": (3, 8, 5), "align_corners": True}),
    ("trilinear", 5, {"size": (7, 4, 1), "align_corners": False}),
    ("nearest", 5, {"scale_factor": (1.5, 2.7, 0.6)}),
    ("nearest", 5, {"size": (2, 7, 9)}),
    ("nearest-exact", 3, {"scale_factor": 2.5}),
    ("nearest-exact", 4, {"scale_factor": (1.5, 0.7)}),
    ("nearest-exact", 4, {"size": (3, 11)}),
    ("nearest-exact", 5, {"scale_factor": 1.7, "recompute_scale_factor": True}),
    ("area", 5, {"size": (3, 4, 2)}),
    ("bilinear", 4, {"scale_factor": 0.3, "antialias": True}),
    ("bilinear", 4, {"size": (2, 9), "antialias": True}),
    ("bilinear", 4, {"size": (3, 2), "align_corners": True, "antialias": True}),
    ("bicubic", 4, {"scale_factor": (0.45, 0.7), "antialias": True}),
    ("bicubic", 4, {"size": (11, 3), "antialias": True}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode,ndim,kw", CASES, ids=[f"{m}{n}d-{kw}" for m, n, kw in CASES])
def test_interpolate_matches_torch(mode, ndim, kw, dtype, rng):
    x = rng.standard_normal((2, 3, 5, 6, 4)[:ndim]).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else {}
    _compare(lambda t: F.interpolate(t, mode=mode, **kw), lambda t: TF.interpolate(t, mode=mode, **kw), x, **tol)


@pytest.mark.parametrize("module,kw", [
    ("Upsample", {"scale_factor": 2}),
    ("Upsample", {"size": (7, 9), "mode": "bilinear"}),
    ("Upsample", {"scale_factor": (2.0, 3.0), "mode": "bilinear", "align_corners": True}),
    ("UpsamplingNearest2d", {"scale_factor": 3}),
    ("UpsamplingNearest2d", {"size": (4, 11)}),
    ("UpsamplingBilinear2d", {"scale_factor": 2}),
    ("UpsamplingBilinear2d", {"size": 8}),
])
def test_upsample_modules(module, kw, rng):
    x = rng.standard_normal((2, 3, 4, 5))
    fm, tm = getattr(nn, module)(**kw), getattr(torch.nn, module)(**kw)
    assert repr(fm) == repr(tm)
    _compare(fm, tm, x)


def test_upsample_1d_module(rng):
    x = rng.standard_normal((2, 3, 5))
    for kw in ({"scale_factor": 2, "mode": "linear"}, {"size": 8, "mode": "nearest"}):
        _compare(nn.Upsample(**kw), torch.nn.Upsample(**kw), x)


@pytest.mark.parametrize("r", [1, 2, 3])
def test_pixel_shuffle_modules(r, rng):
    x = rng.standard_normal((2, 2 * r * r, 3, 4))
    fm, tm = nn.PixelShuffle(r), torch.nn.PixelShuffle(r)
    assert repr(fm) == repr(tm)
    _compare(fm, tm, x)
    y = rng.standard_normal((2, 3, 2 * r, 3 * r))
    fm, tm = nn.PixelUnshuffle(r), torch.nn.PixelUnshuffle(r)
    assert repr(fm) == repr(tm)
    _compare(fm, tm, y)
    _compare(lambda t: F.pixel_shuffle(t, r), lambda t: TF.pixel_shuffle(t, r), x)


def test_deprecated_functions_warn(rng):
    x = rng.standard_normal((1, 2, 3, 3))
    with pytest.warns(UserWarning, match="deprecated"):
        out = F.upsample_bilinear(fl.tensor(x), scale_factor=2)
    np.testing.assert_allclose(out.numpy(), TF.interpolate(torch.tensor(x), scale_factor=2, mode="bilinear",
                                                           align_corners=True).numpy(), rtol=1e-12)
    with pytest.warns(UserWarning, match="deprecated"):
        out = F.upsample_nearest(fl.tensor(x), size=5)
    np.testing.assert_array_equal(out.numpy(), TF.interpolate(torch.tensor(x), size=5).numpy())
    with pytest.warns(UserWarning, match="deprecated"):
        F.upsample(fl.tensor(x), size=4, mode="bilinear")


def test_interpolate_errors():
    x = fl.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=4, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="Input and output must have the same number of spatial dimensions"):
        F.interpolate(x, size=(4, 4, 4))
    with pytest.raises(ValueError, match="Input and scale_factor must have the same number of spatial dimensions"):
        F.interpolate(x, scale_factor=(2.0,))
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful with an explicit size"):
        F.interpolate(x, size=4, recompute_scale_factor=True)
    with pytest.raises(NotImplementedError, match="Got 3D input, but bilinear mode needs 4D input"):
        F.interpolate(fl.randn(1, 2, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="Got 4D input, but trilinear mode needs 5D input"):
        F.interpolate(x, scale_factor=2, mode="trilinear")
    with pytest.raises(NotImplementedError, match="is not one of"):
        F.interpolate(x, scale_factor=2, mode="cubic")
    with pytest.raises(ValueError, match="Anti-alias option is restricted to bilinear and bicubic modes"):
        F.interpolate(x, scale_factor=0.5, mode="nearest", antialias=True)
    with pytest.raises(NotImplementedError, match=r"Only 3D, 4D and 5D input Tensors supported \(got 6D\)"):
        F.interpolate(fl.randn(1, 2, 3, 4, 5, 2), scale_factor=2)
    with pytest.raises(RuntimeError, match=r"sizes should be greater than 0, but got input \(H: 1, W: 4\) output "
                                           r"\(H: 0, W: 1\)"):
        F.interpolate(fl.randn(1, 2, 1, 4), scale_factor=0.3, mode="nearest-exact")


@pytest.mark.parametrize("shape, mode, kw", [
    ((1, 2, 5), "nearest", {"scale_factor": 1.7}), ((1, 2, 5, 4), "nearest", {"scale_factor": 2}),
    ((1, 1, 3, 4, 4), "nearest", {"size": (5, 2, 7)}), ((1, 1, 5, 4), "nearest-exact", {"scale_factor": 0.6}),
    ((2, 3, 9, 7), "bilinear", {"scale_factor": 1.5}),
    ((2, 3, 9, 7), "bilinear", {"scale_factor": 0.5, "antialias": True}),
    ((2, 3, 9, 7), "bilinear", {"size": (4, 11), "align_corners": True}),
    ((2, 3, 9, 8), "bicubic", {"size": (5, 11)}), ((2, 3, 9, 8), "bicubic", {"size": (13, 4), "align_corners": True}),
    ((2, 3, 9, 8), "bicubic", {"size": (4, 4), "antialias": True}), ((1, 3, 6, 7), "bicubic", {"scale_factor": 2}),
    ((1, 3, 9, 8), "bicubic", {"scale_factor": (0.5, 1.7), "antialias": True}),
])
def test_interpolate_uint8_images(shape, mode, kw, rng):
    x = rng.integers(0, 256, shape).astype(np.uint8)
    out = F.interpolate(fl.tensor(x), mode=mode, **kw)
    ref = TF.interpolate(torch.tensor(x), mode=mode, **kw).numpy()
    assert out.dtype is fl.uint8 and tuple(out.shape) == ref.shape
    # the nearest modes gather: exact; bilinear and bicubic round float32 results (torch: fixed point, Note [Integer
    # images]); bicubic's first pass clipped to [0, 255] as torch's (in one pass values differed by up to 17)
    assert np.abs(out.numpy().astype(int) - ref.astype(int)).max() <= (0 if "nearest" in mode else 1)


def test_interpolate_refuses_zero_and_infinite_scales():
    # bicubic divided by a zero scale (ZeroDivisionError) and an infinite one overflowed int (OverflowError)
    x = fl.randn(1, 2, 5, 4)
    with pytest.raises(RuntimeError, match=r"sizes should be greater than 0, but got input \(H: 5, W: 4\) output "
                                           r"\(H: 0, W: 0\)"):
        F.interpolate(x, scale_factor=0.0, mode="bicubic")
    with pytest.raises(RuntimeError, match="without overflow"):
        F.interpolate(x, scale_factor=float("inf"))


@pytest.mark.parametrize("shape, mode, size", [((1, 1, 10), "linear", 20), ((1, 1, 10), "linear", 4),
                                                ((1, 2, 4, 4), "bilinear", 8), ((1, 2, 6, 6), "bilinear", (3, 4))])
def test_a_non_finite_value_reaches_its_neighbours_only(shape, mode, size):
    # Note [Linear resampling by taps]: the weight-matrix GEMM spread one NaN or inf over the whole row
    x = np.arange(float(np.prod(shape))).reshape(shape)
    x.flat[0], x.flat[-1] = np.nan, np.inf
    got = F.interpolate(fl.tensor(x), size=size, mode=mode).numpy()
    want = TF.interpolate(torch.tensor(x), size=size, mode=mode).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    assert np.isfinite(got).any()
