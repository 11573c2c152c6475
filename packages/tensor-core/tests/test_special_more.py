"""flambeau.special's orthogonal polynomials, spherical_bessel_j0 and the modified_bessel_i* names vs torch."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flambeau as fl  # noqa: E402
import flambeau.special as S  # noqa: E402

POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]
DTYPES = {"float32": (np.float32, torch.float32), "float64": (np.float64, torch.float64)}


def _grid(np_dtype):
    """x along rows (interior, |x| > 1, the end points of both the interval and the shifted one, 0, 0.5),
    n along columns (negative, 0, 1, 2, around the closed-form thresholds, up to 30)."""
    # the float just below 1 reaches torch's fallbacks where cos(acos(y) / 2) rounds to 1 (shifted W: +-1)
    below_one, above_zero = np.nextafter(np_dtype(1), np_dtype(0)), np.nextafter(np_dtype(0), np_dtype(1))
    x = np.concatenate([np.linspace(-1.6, 1.6, 33), [-1.0, 0.0, 0.5, 1.0, 0.999, -0.999, 1e-3, 2.5, -3.0],
                        [below_one, -below_one, above_zero]])
    n = np.array([-3, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 20, 30])
    return x.astype(np_dtype)[:, None], n[None, :]


def _close(ours, ref, rtol, atol):
    assert ours.dtype == getattr(fl, str(ref.dtype).removeprefix("torch.")), (ours.dtype, ref.dtype)
    assert tuple(ours.shape) == tuple(ref.shape)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_grid_matches_torch(name, dtype):
    np_dtype, torch_dtype = DTYPES[dtype]
    x, n = _grid(np_dtype)
    ref = getattr(torch.special, name)(torch.from_numpy(x), torch.from_numpy(n))
    ours = getattr(S, name)(fl.tensor(x), fl.tensor(n))
    rtol = 2e-4 if dtype == "float32" else 1e-10
    # near-zero values of large-degree polynomials lose absolute accuracy in the recurrence: scale atol by size
    atol = rtol * max(1.0, float(np.nanmax(np.abs(np.where(np.isfinite(ref.numpy()), ref.numpy(), 0)))) ** 0.5)
    _close(ours, ref, rtol, atol)
    assert ours.dtype == getattr(fl, dtype)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_number_operands_and_dtypes(name):
    fn, ref = getattr(S, name), getattr(torch.special, name)
    x = np.array([-1.2, -0.4, 0.0, 0.7, 1.0], dtype=np.float32)
    ni = np.array([0, 1, 2, 5, 9])
    cases = [
        ((fl.tensor(x), 4), (torch.from_numpy(x), 4)),                                  # Python int n
        ((fl.tensor(x), 4.9), (torch.from_numpy(x), 4.9)),                              # float n truncates
        ((fl.tensor(x), -2), (torch.from_numpy(x), -2)),                                # negative n: 0
        ((0.3, fl.tensor(ni)), (0.3, torch.from_numpy(ni))),                            # Python float x
        ((2, fl.tensor(ni)), (2, torch.from_numpy(ni))),                                # Python int x
        ((fl.tensor(ni), fl.tensor(ni)), (torch.from_numpy(ni), torch.from_numpy(ni))),  # integral: default float
        ((fl.tensor(x), fl.tensor(ni.astype(np.float64))),                              # float32 x, float64 n
         (torch.from_numpy(x), torch.from_numpy(ni.astype(np.float64)))),
        ((fl.tensor(x[:, None]), fl.tensor(ni)), (torch.from_numpy(x[:, None]), torch.from_numpy(ni))),  # broadcast
        ((fl.tensor([True, False]), 3), (torch.tensor([True, False]), 3)),
    ]
    for ours_args, ref_args in cases:
        _close(fn(*ours_args), ref(*ref_args), 1e-5, 1e-5)


@pytest.mark.parametrize("name", ["hermite_polynomial_h", "hermite_polynomial_he"])
def test_hermite_limits_and_nonfinite_n(name):
    # torch gives NaN beyond n = 128 (float32) / 512 (float64), and 0 for a NaN or infinite float n
    for np_dtype in (np.float32, np.float64):
        x = np.array([0.1, -0.5, 0.9], dtype=np_dtype)[:, None]
        n = np.array([127, 128, 129, 511, 512, 513, math.nan, math.inf, -math.inf], dtype=np_dtype)[None, :]
        ref = getattr(torch.special, name)(torch.from_numpy(x), torch.from_numpy(n))
        ours = getattr(S, name)(fl.tensor(x), fl.tensor(n))
        np.testing.assert_array_equal(np.isnan(ours.numpy()), np.isnan(ref.numpy()))
        np.testing.assert_array_equal(ours.numpy()[:, 6:], ref.numpy()[:, 6:])


def test_polynomials_not_differentiable_and_bad_input():
    x = fl.tensor([0.3, 0.6], requires_grad=True)
    for name in POLYNOMIALS:
        assert not getattr(S, name)(x, 3).requires_grad
        assert not torch.special.chebyshev_polynomial_t(torch.tensor([0.3], requires_grad=True), 3).requires_grad
    with pytest.raises(RuntimeError, match="not implemented for 'Half'"):
        torch.special.chebyshev_polynomial_t(torch.ones(2, dtype=torch.float16), 2)
    with pytest.raises(RuntimeError, match="not implemented for 'Half'"):
        S.chebyshev_polynomial_t(fl.ones(2, dtype=fl.float16), 2)
    with pytest.raises(TypeError):
        torch.special.legendre_polynomial_p(0.5, 2)
    with pytest.raises(TypeError, match="Tensor"):
        S.legendre_polynomial_p(0.5, 2)
    with pytest.raises(TypeError, match="'n'"):
        S.legendre_polynomial_p(fl.ones(2), "2")


def test_empty():
    ref = torch.special.laguerre_polynomial_l(torch.ones(0, 3), torch.tensor([1, 2, 3]))
    _close(S.laguerre_polynomial_l(fl.ones(0, 3), fl.tensor([1, 2, 3])), ref, 0, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_spherical_bessel_j0(dtype):
    np_dtype, _ = DTYPES[dtype]
    x = np.concatenate([np.linspace(-20, 20, 401), [0.0, -0.0, 0.4999, 0.5, -0.5, 1e-8, 1e30, -1e30,
                                                    math.inf, -math.inf, math.nan]]).astype(np_dtype)
    ref = torch.special.spherical_bessel_j0(torch.from_numpy(x))
    ours = S.spherical_bessel_j0(fl.tensor(x))
    tol = 1e-6 if dtype == "float32" else 1e-14
    _close(ours, ref, tol, tol)
    t = fl.tensor([0.2, 1.0], requires_grad=True)
    assert not S.spherical_bessel_j0(t).requires_grad
    _close(S.spherical_bessel_j0(fl.tensor([0, 1, 3])), torch.special.spherical_bessel_j0(torch.tensor([0, 1, 3])),
           1e-6, 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_modified_bessel_i0_i1_names(dtype):
    np_dtype, _ = DTYPES[dtype]
    x = np.linspace(-30, 30, 601).astype(np_dtype)
    tol = 2e-6 if dtype == "float32" else 1e-14
    _close(S.modified_bessel_i0(fl.tensor(x)), torch.special.modified_bessel_i0(torch.from_numpy(x)), tol, 0)
    _close(S.modified_bessel_i1(fl.tensor(x)), torch.special.modified_bessel_i1(torch.from_numpy(x)), tol, 1e-30)
    assert S.modified_bessel_i0 is fl.i0 and S.modified_bessel_i1 is S.i1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", [p for p in POLYNOMIALS if "chebyshev" in p])
def test_chebyshev_end_points_match_torch(name, dtype):
    # torch's special cases at the ends of [-1, 1] (shifted: [0, 1]) and its fallbacks next to them; inside
    # every value is at most 2 n + 1 in size, so a tolerance per n (not the grid's) catches a wrong case
    np_dtype, _ = DTYPES[dtype]
    below_one, above_zero = np.nextafter(np_dtype(1), np_dtype(0)), np.nextafter(np_dtype(0), np_dtype(1))
    x = np.array([-1.0, -below_one, 0.0, above_zero, 0.5, below_one, 1.0], dtype=np_dtype)[:, None]
    n = np.arange(-2, 31)[None, :]
    ref = getattr(torch.special, name)(torch.from_numpy(x), torch.from_numpy(n)).numpy()
    ours = getattr(S, name)(fl.tensor(x), fl.tensor(n)).numpy()
    # float32: sin((n + 1) t) / sin(t) next to t = pi loses digits, differently in torch's sin and acos
    tol = 5e-4 if dtype == "float32" else 1e-9
    bad = ~(np.abs(ours - ref) <= tol * (2 * np.abs(n) + 1 + np.abs(ref)))  # NaN anywhere fails too
    assert not bad.any(), [(x[i, 0], n[0, j], ours[i, j], ref[i, j]) for i, j in np.argwhere(bad)[:5]]


@pytest.mark.skipif(not fl.cuda.is_available(), reason="needs CUDA (or NUMBA_ENABLE_CUDASIM=1)")
def test_composites_on_cuda_match_cpu():
    x, n = fl.tensor([0.3, 1.0, -0.5, 2.0]), fl.tensor([3, 9, 2, 7])
    for name in ("chebyshev_polynomial_u", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                 "laguerre_polynomial_l"):
        on_cuda = getattr(S, name)(x.to("cuda"), n.to("cuda"))
        assert on_cuda.device.type == "cuda"
        np.testing.assert_allclose(on_cuda.cpu().numpy(), getattr(S, name)(x, n).numpy(), rtol=1e-6)
    np.testing.assert_allclose(S.spherical_bessel_j0(x.to("cuda")).cpu().numpy(), S.spherical_bessel_j0(x).numpy(),
                               rtol=1e-6)
