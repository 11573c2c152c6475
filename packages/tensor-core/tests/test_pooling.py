"""Pooling operators (``flambeau/_ops/pooling.py``) against torch: every option, indices, dtypes, errors."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops import get_op

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}


def check(out, ref, dtype=np.float64):
    assert isinstance(out, fl.Tensor)
    assert tuple(out.shape) == tuple(ref.shape), (out.shape, ref.shape)
    assert str(out.dtype).split(".")[1] == str(ref.dtype).split(".")[1], (out.dtype, ref.dtype)
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref.numpy().astype(np.float64), equal_nan=True,
                               **TOL.get(dtype, TOL[np.float64]))


def both(a):
    return fl.from_numpy(a.copy()), torch.from_numpy(a.copy())


MAX2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True),
    dict(kernel_size=(2, 4), stride=3, padding=(1, 2), ceil_mode=True),
    dict(kernel_size=1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 7, 10)])
@pytest.mark.parametrize("kw", MAX2D)
def test_max_pool2d_matches_torch(rng, kw, shape, dtype):
    x, tx = both(rng.standard_normal(shape).astype(dtype))
    out, idx = fl.max_pool2d(x, return_indices=True, **kw)
    ref, ridx = F.max_pool2d(tx, return_indices=True, **kw)
    check(out, ref, dtype)
    check(idx, ridx)
    check(fl.max_pool2d(x, **kw), F.max_pool2d(tx, **kw), dtype)
    check(fl.max_pool2d_with_indices(x, **kw)[1], ridx)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=3, dilation=2, padding=1), dict(kernel_size=4, stride=1)])
@pytest.mark.parametrize("shape", [(2, 3, 11), (3, 9)])
def test_max_pool1d_matches_torch(rng, kw, shape):
    x, tx = both(rng.standard_normal(shape))
    out, idx = fl.max_pool1d(x, return_indices=True, **kw)
    ref, ridx = F.max_pool1d(tx, return_indices=True, **kw)
    check(out, ref)
    check(idx, ridx)
    out, idx = fl.max_pool1d_with_indices(x, **kw)
    check(idx, ridx)


def test_max_pool_nan_ties_and_inf(rng):
    a = np.array([[[[1.0, np.nan, 3.0, 3.0], [2.0, 2.0, -np.inf, -np.inf], [5.0, 5.0, 5.0, 5.0],
                    [-np.inf, -np.inf, 0.0, 1.0]]]])
    x, tx = both(a)
    for kw in (dict(kernel_size=2), dict(kernel_size=2, stride=1, padding=1)):
        out, idx = fl.max_pool2d(x, return_indices=True, **kw)
        ref, ridx = F.max_pool2d(tx, return_indices=True, **kw)
        check(out, ref)
        check(idx, ridx)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=2, ceil_mode=True),
                                dict(kernel_size=3, stride=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, ceil_mode=True),
                                dict(kernel_size=3, stride=1, padding=1)])
def test_max_pool_fast_windows_with_ties_nan_and_inf(rng, kw, dtype):
    # 2x2 at stride 2 and 3x3 at stride 1 or 2 have kernels of their own (Note [Branch-free max pooling]):
    # few distinct values make ties in most windows (the first maximum wins), NaNs in some rows (the last
    # NaN wins), a plane of -inf (the first tap wins), odd sizes clip ceil_mode's last row and column
    a = rng.integers(-2, 3, (3, 4, 11, 13)).astype(dtype)
    a[0, 1, 4, 5] = a[0, 1, 4, 6] = a[2, 3, 10, 12] = a[1, 0, 0, 0] = np.nan
    a[1, 2] = -np.inf
    a[2, 1, 3:6, 3:6] = np.inf
    x, tx = both(a)
    out, idx = fl.max_pool2d(x, return_indices=True, **kw)
    ref, ridx = F.max_pool2d(tx, return_indices=True, **kw)
    check(out, ref, dtype)
    check(idx, ridx)


def test_max_pool_integer_and_half(rng):
    xi, txi = both(rng.integers(-100, 100, (2, 3, 6, 7)))
    check(fl.max_pool2d(xi, 3, 2, 1), F.max_pool2d(txi, 3, 2, 1))
    xh, txh = both(rng.standard_normal((2, 3, 6, 7)).astype(np.float16))
    check(fl.max_pool2d(xh, 2), F.max_pool2d(txh, 2))


AVG2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True, count_include_pad=False),
    dict(kernel_size=3, stride=2, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, stride=1, padding=1, divisor_override=3),
    dict(kernel_size=4, stride=3, padding=2, ceil_mode=True),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 7, 10)])
@pytest.mark.parametrize("kw", AVG2D)
def test_avg_pool2d_matches_torch(rng, kw, shape, dtype):
    x, tx = both(rng.standard_normal(shape).astype(dtype))
    check(fl.avg_pool2d(x, **kw), F.avg_pool2d(tx, **kw), dtype)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)])
@pytest.mark.parametrize("shape", [(2, 3, 11), (3, 10)])
def test_avg_pool1d_matches_torch(rng, kw, shape):
    x, tx = both(rng.standard_normal(shape))
    check(fl.avg_pool1d(x, **kw), F.avg_pool1d(tx, **kw))


def test_avg_pool_integer_truncates_like_torch(rng):
    x, tx = both(rng.integers(-50, 50, (2, 3, 7, 6)))
    check(fl.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(tx, 3, 2, 1))
    check(fl.avg_pool2d(x, 2, count_include_pad=False, divisor_override=3),
          F.avg_pool2d(tx, 2, count_include_pad=False, divisor_override=3))


SIZES2D = [1, 3, (4, 5), (None, 2), (9, 8), (11, 13), (2, 1), (0, 3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 7, 10)])
@pytest.mark.parametrize("size", SIZES2D)
def test_adaptive_pool2d_matches_torch(rng, size, shape, dtype):
    x, tx = both(rng.standard_normal(shape).astype(dtype))
    check(fl.adaptive_avg_pool2d(x, size), F.adaptive_avg_pool2d(tx, size), dtype)
    out, idx = fl.adaptive_max_pool2d(x, size, return_indices=True)
    ref, ridx = F.adaptive_max_pool2d(tx, size, return_indices=True)
    check(out, ref, dtype)
    check(idx, ridx)
    check(fl.adaptive_max_pool2d(x, size), ref, dtype)


@pytest.mark.parametrize("size", [1, 3, 7, 11, (4,)])
@pytest.mark.parametrize("shape", [(2, 3, 9), (3, 7)])
def test_adaptive_pool1d_matches_torch(rng, size, shape):
    x, tx = both(rng.standard_normal(shape))
    check(fl.adaptive_avg_pool1d(x, size), F.adaptive_avg_pool1d(tx, size))
    out, idx = fl.adaptive_max_pool1d(x, size, return_indices=True)
    ref, ridx = F.adaptive_max_pool1d(tx, size, return_indices=True)
    check(out, ref)
    check(idx, ridx)


def test_non_contiguous_inputs(rng):
    base = rng.standard_normal((9, 2, 3, 16))
    x = fl.from_numpy(base).permute(1, 2, 0, 3)[..., ::2]
    tx = torch.from_numpy(base).permute(1, 2, 0, 3)[..., ::2]
    check(fl.max_pool2d(x, 3, 2, 1), F.max_pool2d(tx, 3, 2, 1))
    check(fl.avg_pool2d(x, 2), F.avg_pool2d(tx, 2))
    check(fl.adaptive_avg_pool2d(x, (2, 3)), F.adaptive_avg_pool2d(tx, (2, 3)))
    check(fl.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(tx, 1))
    check(fl.adaptive_max_pool2d(x, 3), F.adaptive_max_pool2d(tx, 3))


@pytest.mark.parametrize("op,args", [
    ("max_pool2d", dict(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)),
    ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ("adaptive_avg_pool2d", dict(output_size=(3, 5))),
    ("adaptive_max_pool2d", dict(output_size=(4, 3))),
])
def test_gradients_match_torch(rng, op, args):
    a = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    x, tx = both(a)
    x.requires_grad_(True)
    tx.requires_grad_(True)
    out, ref = getattr(fl, op)(x, **args), getattr(F, op)(tx, **args)
    g = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(fl.from_numpy(g))
    ref.backward(torch.from_numpy(g))
    check(x.grad, tx.grad, np.float32)


def test_backward_operators_are_not_bound():
    for name in ("max_pool2d_backward", "avg_pool2d_backward", "adaptive_avg_pool2d_backward"):
        assert get_op(name).category == "pooling" and not hasattr(fl, name)


ERRORS = [
    (lambda x: fl.max_pool2d(x, 10), RuntimeError, r"Given input size: \(4x8x8\). Calculated output size: "
                                                    r"\(4x0x0\). Output size is too small"),
    (lambda x: fl.max_pool2d(x, 3, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3 and dilation=1"),
    (lambda x: fl.max_pool2d(x[0, 0, 0], 2), RuntimeError, "non-empty 3D or 4D"),
    (lambda x: fl.max_pool2d(x, 2, stride=0), RuntimeError, "stride should not be zero"),
    (lambda x: fl.max_pool2d(x, 0), RuntimeError, "kernel_size must be greater than zero"),
    (lambda x: fl.max_pool2d(x, 2, dilation=0), RuntimeError, "dilation should be greater than zero"),
    (lambda x: fl.max_pool2d(x, (2, 2, 2)), RuntimeError, "kernel_size must either be a single int, or a tuple of 2"),
    (lambda x: fl.max_pool2d(x, 2.5), TypeError, "'kernel_size' must be an int or a tuple of 2 ints"),
    (lambda x: fl.max_pool1d(x, 2), RuntimeError, r"max_pool1d: Expected 2D or 3D \(batch mode\) tensor"),
    (lambda x: fl.avg_pool2d(x, 3, padding=2), RuntimeError, "pad should be at most half"),
    (lambda x: fl.max_pool1d(x[0], 3, padding=2, dilation=2), RuntimeError,
     "pad should be smaller than or equal to half of kernel size, but got padW = 2, padH = 0, kW = 3, kH = 1"),
    (lambda x: fl.avg_pool2d(x, 10), RuntimeError, "Output size is too small"),
    (lambda x: fl.avg_pool2d(x, 2, divisor_override=0), RuntimeError, "divisor must be not zero"),
    (lambda x: fl.avg_pool1d(x[0], 2, padding=2), RuntimeError, "pad should be at most half"),
    (lambda x: fl.adaptive_avg_pool2d(x[0, 0, 0], 2), RuntimeError,
     r"adaptive_avg_pool2d\(\): Expected 3D or 4D tensor, but got \[8\]"),
    (lambda x: fl.adaptive_max_pool2d(x, (2, 2, 2)), RuntimeError, "output_size.size.. must be 2"),
    (lambda x: fl.adaptive_avg_pool2d(x, -1), RuntimeError, "greater than or equal to 0"),
    (lambda x: fl.adaptive_avg_pool1d(x, 2), RuntimeError, r"adaptive_avg_pool1d\(\): Expected 2D or 3D tensor"),
    (lambda x: fl.max_pool2d(x.numpy(), 2), TypeError, r"argument 'input' must be Tensor"),
    (lambda x: fl.max_pool2d(x.bool(), 2), NotImplementedError, "not implemented for 'Bool'"),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors(i):
    fn, exc, match = ERRORS[i]
    with pytest.raises(exc, match=match):
        fn(fl.zeros(2, 4, 8, 8))
