"""Tests of flambeau.special and flambeau/_ops/special.py (kernels: flambeau/_kernels/cpu/special.py).

Values against torch at float32 and float64 on points that exercise every branch of the formulas
and the edge values (0, -0, poles, negative numbers, +-inf, NaN, tails); result dtypes, aliases,
errors. Random samples and gradcheck are in ``test_op_samples.py`` (declared with the operators);
gradients against torch in flambeau-autograd's ``test_special_fft_grad.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")

INF, NAN = math.inf, math.nan
EDGES = [0.0, -0.0, INF, -INF, NAN]
# points of every branch: poles and negatives, the [0, 8] / (8, inf) split of the Bessel
# expansions, the asymptotic digamma (x >= 10), erfcx's series (x >= 10) and negative side
GENERAL = [-30.5, -3.5, -2.0, -1.0, -0.5, 1e-8, 0.3, 1.0, 2.5, 7.9, 8.1, 10.0, 12.5, 30.0, 700.0, 1e20] + EDGES

UNARY = [  # (flambeau.special name, torch.special name, points)
    ("gammaln", "gammaln", GENERAL),
    ("digamma", "digamma", GENERAL),
    ("psi", "psi", GENERAL),
    ("i0", "i0", GENERAL),
    ("i0e", "i0e", GENERAL),
    ("i1", "i1", GENERAL),
    ("i1e", "i1e", GENERAL),
    ("erfcx", "erfcx", [-30.0, -26.0, -10.0, -6.5, -3.0, -0.5, 0.5, 5.0, 9.9, 10.1, 60.0, 1e10] + EDGES),
    ("log_ndtr", "log_ndtr", [-1e3, -40.0, -5.0, -1.5, -0.9, 0.5, 3.0, 10.0] + EDGES),
    ("ndtr", "ndtr", [-40.0, -5.0, -1.5, 0.5, 3.0, 10.0] + EDGES),
    ("ndtri", "ndtri", [1e-300, 1e-20, 1e-5, 0.1, 0.3, 0.5, 0.7, 0.95, 1 - 1e-10, 1.0, 1.5, -0.5] + EDGES),
    ("entr", "entr", [-1.0, 1e-30, 0.5, 1.0, 3.0] + EDGES),
    ("sinc", "sinc", [-2.5, -1.0, 1e-9, 0.5, 1.0, 3.25, 1e6] + EDGES),
    ("bessel_j0", "bessel_j0", GENERAL),
    ("bessel_j1", "bessel_j1", GENERAL),
    ("erf", "erf", [-3.0, 0.5, 5.0] + EDGES),
    ("erfc", "erfc", [-3.0, 0.5, 5.0] + EDGES),
    ("erfinv", "erfinv", [-1.0, -0.5, 0.9, 1.0, 2.0] + EDGES),
    ("expit", "expit", [-50.0, 0.5, 50.0] + EDGES),
    ("expm1", "expm1", [-1.0, 1e-10, 2.0] + EDGES),
    ("exp2", "exp2", [-1.0, 3.5] + EDGES),
    ("log1p", "log1p", [-1.0, -0.5, 1e-10, 2.0] + EDGES),
]


def _close(got: fl.Tensor, want, dtype: str) -> None:
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), (got.dtype, want.dtype)
    tol = {"float32": 2e-6, "float64": 1e-12}[dtype]
    # atol: float32 torch computes sin(pi x) etc. in float32 (sinc(1) = -2.8e-8, ours 3.9e-17)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol * 0.05, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, tname, points", UNARY, ids=[u[0] for u in UNARY])
def test_unary_values_against_torch(name, tname, points, dtype):
    x = np.array(points, dtype=dtype)
    want = getattr(torch.special, tname)(torch.tensor(x))
    if name == "ndtr" and dtype == "float32":
        # torch's float32 ndtr cancels in the lower tail (ndtr(-5) = 2.98e-7, not 2.87e-7); ours
        # computes in float64: compare with torch's float64 result rounded
        want = torch.special.ndtr(torch.tensor(x, dtype=torch.float64)).float()
    _close(getattr(fl.special, name)(fl.tensor(x)), want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_polygamma_values(n, dtype):
    pts = [-2.5, -0.5, 0.25, 1.0, 3.0, 12.0, 1e10, 0.0] + EDGES[2:]
    if dtype == "float64":  # at a pole torch's float32 trigamma divides by float32's sin(pi x): junk either way
        pts.append(-2.0)
    x = np.array(pts, dtype=dtype)
    want = torch.special.polygamma(n, torch.tensor(x))
    _close(fl.special.polygamma(n, fl.tensor(x)), want, dtype)
    _close(fl.polygamma(n, fl.tensor(x)), want, dtype)
    _close(fl.tensor(x).polygamma(n), want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_values(dtype):
    a = np.array([0.0, 0.0, 0.0, 1.0, 2.0, -1.5, 3.0, NAN, 1.0, 2.0], dtype=dtype)
    b = np.array([NAN, -1.0, -3.0, -1.0, -2.0, 0.5, 1e-10, 1.0, INF, -INF], dtype=dtype)
    for name in ("xlogy", "xlog1py"):
        _close(getattr(fl.special, name)(fl.tensor(a), fl.tensor(b)),
               getattr(torch.special, name)(torch.tensor(a), torch.tensor(b)), dtype)
    s = np.array([2.0, 3.5, 1.0, 0.5, 2.0, 2.0, 2.0, 1.5, 4.0, NAN, 30.0], dtype=dtype)
    q = np.array([0.5, 1.0, 2.0, 1.0, -1.5, -2.0, -INF, 3.3, INF, 1.0, 1.0], dtype=dtype)
    _close(fl.special.zeta(fl.tensor(s), fl.tensor(q)), torch.special.zeta(torch.tensor(s), torch.tensor(q)), dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_incomplete_gamma_values(dtype):
    a = np.array([0.0, 0.0, 1.0, 2.0, -1.0, 1.0, INF, 1.0, 3.0, 0.5, 1e-3, 50.0, 7.5, 100.0, 1000.0, 1e4, NAN])
    x = np.array([0.0, 1.0, 0.0, 1.5, 1.0, -1.0, 1.0, INF, NAN, 30.0, 2.0, 20.0, 9.0, 300.0, 1010.0, 1.01e4, 1.0])
    # series / continued fraction: relative accuracy about 1e-10 for a >= 1000 (torch: an asymptotic expansion)
    tol = 2e-6 if dtype == "float32" else 1e-9
    for ours, theirs in ((fl.special.gammainc, torch.special.gammainc), (fl.igammac, torch.igammac)):
        got = ours(fl.tensor(a.astype(dtype)), fl.tensor(x.astype(dtype)))
        # ours computes in float64: compare float32 with torch's float64 result rounded (torch's float32
        # loses digits at a = 1e4 and flushes denormal results to 0)
        want = theirs(torch.tensor(a.astype(dtype)).double(), torch.tensor(x.astype(dtype)).double())
        want = want.float() if dtype == "float32" else want
        assert got.dtype.name == dtype
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=1e-300, equal_nan=True)
    t = fl.tensor([0.5, 2.0])
    assert t.igamma_(fl.tensor([1.0, 1.0])) is t
    _close(t, torch.igamma(torch.tensor([0.5, 2.0]), torch.tensor([1.0, 1.0])), "float32")
    with pytest.raises(TypeError, match="argument 'other' \\(position 2\\) must be Tensor, not float"):
        fl.igamma(fl.tensor([1.0]), 2.0)
    with pytest.raises(NotImplementedError, match="\"igamma_cpu\" not implemented for 'Long'"):
        fl.igamma(fl.tensor([1]), fl.tensor([2]))


def test_binary_scalars_and_broadcasting():
    q = np.linspace(0.5, 3.0, 6).reshape(2, 3)
    _close(fl.special.zeta(2.0, fl.tensor(q)), torch.special.zeta(2.0, torch.tensor(q)), "float64")
    _close(fl.special.zeta(fl.tensor(q), 2.0), torch.special.zeta(torch.tensor(q), 2.0), "float64")
    _close(fl.special.xlog1py(fl.tensor(q), fl.tensor(q[0])), torch.special.xlog1py(torch.tensor(q),
                                                                                     torch.tensor(q[0])), "float64")


def test_integer_inputs_compute_in_the_default_float_dtype():
    x = [0, 1, 2, 5]
    for name in ("gammaln", "digamma", "i0", "i0e", "i1", "i1e", "ndtri", "erfcx", "log_ndtr", "ndtr", "entr", "sinc"):
        got = getattr(fl.special, name)(fl.tensor(x))
        want = getattr(torch.special, name)(torch.tensor(x))
        _close(got, want, "float32")
    _close(fl.polygamma(1, fl.tensor(x)), torch.polygamma(1, torch.tensor(x)), "float32")
    _close(fl.special.zeta(fl.tensor([2, 3]), fl.tensor([1, 2])), torch.special.zeta(torch.tensor([2, 3]),
                                                                                     torch.tensor([1, 2])), "float32")


def test_float16_computes_in_float32():
    x = np.array([0.5, 1.5, 3.0], dtype=np.float16)
    got = fl.special.i0e(fl.tensor(x))
    assert got.dtype is fl.float16
    np.testing.assert_allclose(got.numpy().astype(np.float32), torch.special.i0e(torch.tensor(x)).float().numpy(),
                               rtol=1e-3)


def test_strided_and_large_inputs():
    # a transposed view and an array big enough for the threaded path of the elementwise kernels
    x = np.random.default_rng(0).uniform(0.1, 5.0, (300, 400))
    _close(fl.digamma(fl.tensor(x).T), torch.digamma(torch.tensor(x).T), "float64")
    _close(fl.lgamma(fl.tensor(x)), torch.lgamma(torch.tensor(x)), "float64")


def test_mvlgamma():
    x = np.array([[2.5, 3.0], [4.0, 10.0]])
    for p in (1, 2, 4):
        want = torch.special.multigammaln(torch.tensor(x), p)
        _close(fl.special.multigammaln(fl.tensor(x), p), want, "float64")
        _close(fl.tensor(x).mvlgamma(p), want, "float64")
    t = fl.tensor(x)
    assert t.mvlgamma_(2) is t
    _close(t, torch.mvlgamma(torch.tensor(x), 2), "float64")
    with pytest.raises(RuntimeError, match="All elements must be greater than"):
        fl.mvlgamma(fl.tensor([0.5, 3.0]), 2)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        fl.mvlgamma(fl.tensor([2.5]), 0)


def test_in_place_variants():
    x = np.array([0.5, 1.5, 3.0])
    for name in ("lgamma", "digamma", "i0", "sinc"):
        t = fl.tensor(x)
        assert getattr(t, name + "_")() is t
        _close(t, getattr(torch, name)(torch.tensor(x)), "float64")
    t = fl.tensor(x)
    assert t.polygamma_(2) is t
    _close(t, torch.tensor(x).polygamma_(2), "float64")
    with pytest.raises(RuntimeError, match="can't be cast"):
        fl.tensor([1, 2]).lgamma_()


def test_errors_match_torch():
    with pytest.raises(RuntimeError, match="does not support negative n"):
        fl.polygamma(-1, fl.tensor([1.0]))
    with pytest.raises(TypeError, match="argument 'n'"):
        fl.polygamma(1.5, fl.tensor([1.0]))
    with pytest.raises(TypeError, match="argument 'input'"):
        fl.special.i0e([1.0])
    with pytest.raises(TypeError, match="argument 'input'"):
        fl.polygamma(1, [1.0])
    with pytest.raises(TypeError):
        fl.special.zeta(2.0, 3.0)


def test_names_and_aliases_are_torchs():
    for name in fl.special.__all__:
        assert hasattr(torch.special, name), name
    assert fl.special.gammaln is fl.lgamma and fl.special.psi is fl.digamma
    assert fl.special.expit is fl.sigmoid and fl.special.multigammaln is fl.mvlgamma
    assert fl.special.gammainc is fl.igamma and fl.special.gammaincc is fl.igammac
    assert fl.special.logit is fl.logit and fl.special.xlogy is fl.xlogy and fl.special.softmax is fl.softmax
    # torch has these at the top level and as methods, the others in torch.special only
    for name in ("lgamma", "digamma", "polygamma", "mvlgamma", "i0", "sinc", "erfinv", "xlogy", "logit", "igamma",
                 "igammac"):
        assert hasattr(fl, name) and hasattr(fl.Tensor, name), name
    for name in ("i0e", "i1", "ndtri", "erfcx", "log_ndtr", "entr", "zeta", "xlog1py", "bessel_j0"):
        assert not hasattr(fl, name) and not hasattr(torch, name), name
    assert fl.special.i0e.__doc__ and "exp(-|x|)" in fl.special.i0e.__doc__
    # torch does not differentiate the Bessel functions J0, J1: neither do we
    assert not fl.special.bessel_j0(fl.tensor([1.0], requires_grad=True)).requires_grad


def test_reductions_and_softmax_through_special():
    x = np.random.default_rng(1).normal(size=(3, 4))
    _close(fl.special.logsumexp(fl.tensor(x), 1), torch.special.logsumexp(torch.tensor(x), 1), "float64")
    _close(fl.special.softmax(fl.tensor(x), 0), torch.special.softmax(torch.tensor(x), 0), "float64")
    _close(fl.special.log_softmax(fl.tensor(x), 1), torch.special.log_softmax(torch.tensor(x), 1), "float64")
    _close(fl.special.logit(fl.tensor([0.01, 0.5, 0.999]), eps=0.1),
           torch.special.logit(torch.tensor([0.01, 0.5, 0.999]), eps=0.1), "float32")
    _close(fl.special.round(fl.tensor([0.5, 1.5, 2.456]), decimals=1),
           torch.special.round(torch.tensor([0.5, 1.5, 2.456]), decimals=1), "float32")
