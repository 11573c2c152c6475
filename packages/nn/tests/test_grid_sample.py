"""F.grid_sample and F.affine_grid against torch: values, gradients of input, grid and theta, errors."""

import itertools
import warnings

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def _pair(rng, shape, grid_shape, dtype=np.float64):
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.uniform(-1.3, 1.3, grid_shape).astype(dtype)
    return x, g


def _check_against_torch(x_shape, g_shape, mode, padding_mode, align_corners):
    """Values and gradients (input and grid) of one float64 grid_sample call against torch's."""
    rng = np.random.default_rng(hash((mode, padding_mode, align_corners, len(x_shape))) % 2**32)
    x, g = _pair(rng, x_shape, g_shape)
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
    out_t = TF.grid_sample(xt, gt, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    go = rng.standard_normal(tuple(out_t.shape))
    out_t.backward(torch.tensor(go))
    xf, gf = fl.tensor(x, requires_grad=True), fl.tensor(g, requires_grad=True)
    out_f = F.grid_sample(xf, gf, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    assert out_f.dtype is fl.float64 and tuple(out_f.shape) == tuple(out_t.shape)
    out_f.backward(fl.tensor(go))
    np.testing.assert_allclose(out_f.detach().numpy(), out_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gf.grad.numpy(), gt.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode,padding_mode,align_corners", list(itertools.product(MODES, PADDINGS, (False, True))))
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    _check_against_torch((2, 3, 5, 4), (2, 4, 3, 2), mode, padding_mode, align_corners)


@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_float32_and_noncontiguous(mode):
    rng = np.random.default_rng(7)
    x, g = _pair(rng, (2, 2, 4, 6), (2, 3, 5, 2), np.float32)
    xt = torch.tensor(x).transpose(2, 3).contiguous().transpose(2, 3)
    out_t = TF.grid_sample(xt, torch.tensor(g), mode=mode, padding_mode="reflection", align_corners=False)
    xf = fl.tensor(x.transpose(0, 1, 3, 2).copy()).transpose(2, 3)
    assert not xf.is_contiguous()
    out_f = F.grid_sample(xf, fl.tensor(g), mode=mode, padding_mode="reflection", align_corners=False)
    assert out_f.dtype is fl.float32
    np.testing.assert_allclose(out_f.numpy(), out_t.numpy(), rtol=1e-5, atol=1e-5)


def test_grid_sample_nearest_rounds_halves_to_even():
    x = np.arange(5.0).reshape(1, 1, 1, 5)
    # align_corners=True maps -1..1 onto 0..4: the x coordinates below land on 0.5, 1.5, 2.5, 3.5
    g = np.zeros((1, 1, 4, 2))
    g[0, 0, :, 0] = [-0.75, -0.25, 0.25, 0.75]
    out = F.grid_sample(fl.tensor(x), fl.tensor(g), mode="nearest", align_corners=True)
    ref = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode="nearest", align_corners=True)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    np.testing.assert_array_equal(out.numpy().ravel(), [0.0, 2.0, 2.0, 4.0])


def test_grid_sample_empty_channels_and_points():
    x = fl.zeros(1, 0, 3, 4)
    assert tuple(F.grid_sample(x, fl.zeros(1, 3, 3, 2), align_corners=False).shape) == (1, 0, 3, 3)
    assert tuple(F.grid_sample(fl.zeros(1, 2, 3, 4), fl.zeros(1, 0, 3, 2), align_corners=False).shape) == (1, 2, 0, 3)


def test_grid_sample_default_align_corners_warns():
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(fl.zeros(1, 1, 2, 2), fl.zeros(1, 1, 1, 2))


def _error(fn_fl, fn_t):
    with pytest.raises(Exception) as et:
        fn_t()
    with pytest.raises(type(et.value)) as ef:
        fn_fl()
    assert str(ef.value) == str(et.value).replace("torch.", "flambeau.")


@pytest.mark.parametrize("x_shape,g_shape,kw", [
    ((1, 2, 3, 4), (1, 3, 3), {}),                       # grid's last dim != 2 (and wrong rank)
    ((1, 2, 3, 4), (1, 3, 3, 3), {}),                    # grid's last dim != 2
    ((1, 2, 3, 4), (2, 3, 3, 2), {}),                    # batch sizes differ
    ((1, 2, 3, 4), (1, 3, 2), {}),                       # ranks differ
    ((2, 3, 4), (2, 3, 1), {}),                          # 3-D input
    ((1, 2, 0, 4), (1, 3, 3, 2), {}),                    # empty spatial dim
    ((1, 2, 3, 4, 2), (1, 3, 3, 2, 3), {"mode": "bicubic"}),
    ((1, 2, 3, 4, 2), (1, 3, 3, 3), {}),                 # 5-D input, 4-D grid
    ((1, 2, 3, 4, 2), (2, 3, 3, 2, 3), {}),              # 5-D, batch sizes differ
    ((1, 2, 3, 4), (1, 3, 3, 2), {"mode": "area"}),
    ((1, 2, 3, 4), (1, 3, 3, 2), {"padding_mode": "circular"}),
])
def test_grid_sample_errors_match_torch(x_shape, g_shape, kw):
    _error(lambda: F.grid_sample(fl.zeros(*x_shape), fl.zeros(*g_shape), align_corners=False, **kw),
           lambda: TF.grid_sample(torch.zeros(*x_shape), torch.zeros(*g_shape), align_corners=False, **kw))


def test_grid_sample_dtype_mismatch_error():
    _error(lambda: F.grid_sample(fl.zeros(1, 1, 2, 2), fl.zeros(1, 1, 1, 2, dtype=fl.float64), align_corners=False),
           lambda: TF.grid_sample(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 1, 2, dtype=torch.float64),
                                  align_corners=False))


@pytest.mark.parametrize("mode,padding_mode,align_corners",
                         list(itertools.product(("bilinear", "nearest"), PADDINGS, (False, True))))
def test_grid_sample_5d_matches_torch(mode, padding_mode, align_corners):
    _check_against_torch((2, 2, 3, 4, 3), (2, 2, 3, 2, 3), mode, padding_mode, align_corners)


def test_volumetric_spatial_transformer():
    """3-D affine_grid -> 5-D grid_sample: gradients of theta and of the input match torch's."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, 3, 4, 3))
    theta = np.eye(3, 4)[None] + 0.1 * rng.standard_normal((1, 3, 4))
    res = []
    for fn, wrap in ((TF, torch.tensor), (F, fl.tensor)):
        xs, th = wrap(x).requires_grad_(), wrap(theta).requires_grad_()
        out = fn.grid_sample(xs, fn.affine_grid(th, (1, 2, 2, 3, 3), align_corners=True), align_corners=True)
        (out * out).sum().backward()
        res.append([np.asarray(t.detach().numpy()) for t in (out, xs.grad, th.grad)])
    for a, b in zip(res[1], res[0]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_grid_sample_double_backward_refused():
    x = fl.randn(1, 1, 3, 3, dtype=fl.float64, requires_grad=True)
    g = (fl.rand(1, 2, 2, 2, dtype=fl.float64) * 2 - 1).requires_grad_()
    out = F.grid_sample(x, g, align_corners=False).sum()
    with pytest.raises(RuntimeError, match="double backward through grid_sampler_2d"):
        fl.autograd.grad(out, (x, g), create_graph=True)


@pytest.mark.parametrize("size,align_corners", [((2, 3, 4, 5), False), ((2, 3, 4, 5), True), ((2, 1, 1, 3), False),
                                                ((2, 3, 2, 3, 4), False), ((2, 3, 2, 3, 4), True)])
def test_affine_grid_matches_torch(size, align_corners):
    rng = np.random.default_rng(len(size) + align_corners)
    k = len(size) - 2
    theta = rng.standard_normal((size[0], k, k + 1))
    tt = torch.tensor(theta, requires_grad=True)
    ref = TF.affine_grid(tt, size, align_corners=align_corners)
    go = rng.standard_normal(tuple(ref.shape))
    ref.backward(torch.tensor(go))
    tf = fl.tensor(theta, requires_grad=True)
    out = F.affine_grid(tf, size, align_corners=align_corners)
    assert tuple(out.shape) == tuple(ref.shape) and out.dtype is fl.float64
    out.backward(fl.tensor(go))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tf.grad.numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_affine_grid_float32():
    theta = np.array([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]], np.float32)
    out = F.affine_grid(fl.tensor(theta), (1, 1, 5, 7), align_corners=False)
    ref = TF.affine_grid(torch.tensor(theta), (1, 1, 5, 7), align_corners=False)
    assert out.dtype is fl.float32
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("theta_shape,size", [((2, 2, 3), (2, 3, 4, 5, 6)), ((2, 3, 4), (2, 3, 4, 5)),
                                              ((2, 2, 3), (2, 3)), ((2, 2, 3), (2, 3, 0, 5))])
def test_affine_grid_errors_match_torch(theta_shape, size):
    _error(lambda: F.affine_grid(fl.zeros(*theta_shape), size, align_corners=False),
           lambda: TF.affine_grid(torch.zeros(*theta_shape), size, align_corners=False))


def test_affine_grid_integer_theta_error():
    _error(lambda: F.affine_grid(fl.zeros(1, 2, 3, dtype=fl.int64), (1, 1, 2, 2), align_corners=False),
           lambda: TF.affine_grid(torch.zeros(1, 2, 3, dtype=torch.int64), (1, 1, 2, 2), align_corners=False))


def test_affine_grid_unit_size_warns():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        F.affine_grid(fl.zeros(1, 2, 3), (1, 1, 1, 4), align_corners=True)
    assert any("unit-size grids" in str(x.message) for x in w)


def test_spatial_transformer_end_to_end():
    """theta -> affine_grid -> grid_sample -> loss: the theta and input gradients match torch's."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 5))
    theta = np.array([[[0.8, -0.3, 0.1], [0.25, 0.9, -0.05]], [[1.1, 0.2, -0.2], [-0.1, 0.7, 0.3]]])
    res = []
    for fn, wrap in ((TF, torch.tensor), (F, fl.tensor)):
        xs, th = wrap(x).requires_grad_(), wrap(theta).requires_grad_()
        out = fn.grid_sample(xs, fn.affine_grid(th, (2, 3, 4, 4), align_corners=False), padding_mode="border",
                             align_corners=False)
        (out * out).sum().backward()
        res.append([np.asarray(t.detach().numpy()) for t in (out, xs.grad, th.grad)])
    for a, b in zip(res[1], res[0]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
