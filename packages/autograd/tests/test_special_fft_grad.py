"""Gradients of flambeau.special and flambeau.fft against torch (formulas: _formulas_spectral.py).

Special functions: first derivatives against torch at points including the edges where the
formulas special-case (i1/i1e at 0, sinc at 0, xlog1py at input 0), and double backward by
gradgradcheck. FFT: gradients of real losses of every transform against torch.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

POINTS = [-3.5, -0.7, 0.0, 0.3, 1.0, 2.5, 9.0]
POSITIVE = [0.2, 0.7, 1.0, 2.5, 9.0, 15.0]
UNIT = [0.01, 0.2, 0.5, 0.8, 0.99]
SPECIAL = [  # (flambeau callable, torch callable, points)
    (fl.lgamma, torch.lgamma, POSITIVE + [-0.5, -2.5]),
    (fl.digamma, torch.digamma, POSITIVE + [-0.5, -2.5]),
    (lambda x: fl.polygamma(2, x), lambda x: torch.polygamma(2, x), POSITIVE),
    (fl.i0, torch.i0, POINTS),
    (fl.special.i0e, torch.special.i0e, POINTS),
    (fl.special.i1, torch.special.i1, POINTS),
    (fl.special.i1e, torch.special.i1e, POINTS),
    (fl.special.ndtri, torch.special.ndtri, UNIT),
    (fl.special.ndtr, torch.special.ndtr, POINTS),
    (fl.special.log_ndtr, torch.special.log_ndtr, POINTS + [-30.0]),
    (fl.special.erfcx, torch.special.erfcx, POINTS + [20.0]),
    (fl.special.entr, torch.special.entr, POSITIVE),
    (fl.sinc, torch.sinc, POINTS),
    (lambda x: fl.special.multigammaln(x, 3), lambda x: torch.special.multigammaln(x, 3), [1.2, 2.5, 9.0]),
    (fl.special.erfinv, torch.special.erfinv, [-0.9, 0.0, 0.5]),
    (fl.special.gammaln, torch.special.gammaln, POSITIVE),
]


def _ours_and_theirs(points):
    x = np.array(points)
    return fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


@pytest.mark.parametrize("i", range(len(SPECIAL)))
def test_special_gradient_matches_torch(i):
    f, tf, points = SPECIAL[i]
    ours, theirs = _ours_and_theirs(points)
    w = np.linspace(0.5, 1.5, len(points))
    (f(ours) * fl.tensor(w)).sum().backward()
    (tf(theirs) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("i", range(len(SPECIAL)))
def test_special_double_backward(i):
    f, _, points = SPECIAL[i]
    pts = [p for p in points if p != 0.0]  # gradgradcheck's finite differences straddle sinc's / i1's 0 special case
    x = fl.tensor(np.array(pts), requires_grad=True)
    assert gradgradcheck(lambda t: f(t), (x,))


def test_binary_special_gradients_match_torch():
    a = np.array([0.0, 0.0, 1.5, -2.0, 0.7])
    b = np.array([-1.0, 0.5, 2.0, 0.3, -0.5])
    for name in ("xlog1py", "xlogy"):
        oa, ta = _ours_and_theirs(a)
        ob, tb = _ours_and_theirs(np.abs(b) if name == "xlogy" else b)
        getattr(fl.special, name)(oa, ob).sum().backward()
        getattr(torch.special, name)(ta, tb).sum().backward()
        np.testing.assert_allclose(oa.grad.numpy(), ta.grad.numpy(), rtol=1e-10)
        np.testing.assert_allclose(ob.grad.numpy(), tb.grad.numpy(), rtol=1e-10)
    # zeta: only in the offset ``other`` (torch has no derivative in the exponent either)
    q, tq = _ours_and_theirs([0.5, 1.0, 3.5])
    fl.special.zeta(fl.tensor([2.0, 3.0, 2.5], dtype=fl.float64), q).sum().backward()
    torch.special.zeta(torch.tensor([2.0, 3.0, 2.5], dtype=torch.float64), tq).sum().backward()
    np.testing.assert_allclose(q.grad.numpy(), tq.grad.numpy(), rtol=1e-10)
    s = fl.tensor([2.0], dtype=fl.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        fl.special.zeta(s, fl.tensor([1.0], dtype=fl.float64)).sum().backward()
    # incomplete gamma: only in ``other`` as well
    a = np.array([0.5, 2.0, 7.5])
    for name in ("gammainc", "gammaincc"):
        x, tx = _ours_and_theirs([0.3, 2.0, 9.0])
        getattr(fl.special, name)(fl.tensor(a), x).sum().backward()
        getattr(torch.special, name)(torch.tensor(a), tx).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    with pytest.raises(NotImplementedError, match="igamma: input"):
        fl.igamma(fl.tensor(a, requires_grad=True), fl.tensor(a)).sum().backward()


def test_binary_special_gradcheck():
    a = fl.tensor(np.array([0.4, 1.5, -2.0]), requires_grad=True)
    b = fl.tensor(np.array([0.5, 2.0, 0.3]), requires_grad=True)
    assert gradcheck(fl.special.xlog1py, (a, b))
    assert gradgradcheck(fl.special.xlog1py, (a, b))
    assert gradgradcheck(lambda q: fl.special.zeta(2.5, q), (b,))
    assert gradgradcheck(lambda x: fl.igamma(fl.tensor([0.5, 2.0, 3.0], dtype=fl.float64), x), (b,))


# --- fft -----------------------------------------------------------------------------------------
RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 6))
Z = X + 1j * RNG.normal(size=(4, 6))
W = RNG.normal(size=(16, 16))  # weights of the real losses (cropped to each output's shape)


def _loss(lib, y):
    """A real loss weighting the real and imaginary parts (or the real outputs) differently."""
    w = lib.tensor(W[:y.shape[-2], :y.shape[-1]] if y.ndim == 2 else W[0, :y.shape[-1]])
    if y.is_complex():
        re, im = lib.view_as_real(y.resolve_conj()).unbind(-1)
        return (w * re * re).sum() + (w.flip(-1) * im).sum()
    return (w * y ** 3).sum()


FFT_CASES = [  # (name, kwargs, input)
    ("fft", {}, X), ("fft", {"norm": "ortho"}, Z), ("fft", {"n": 8, "dim": 0}, Z), ("fft", {"n": 3}, X),
    ("ifft", {}, Z), ("ifft", {"norm": "forward", "n": 9}, X),
    ("fft2", {}, Z), ("ifft2", {"s": (3, 8), "norm": "ortho"}, Z), ("fftn", {"dim": (0,)}, X),
    ("ifftn", {"s": (5, 4)}, X),
    ("rfft", {}, X), ("rfft", {"n": 9, "norm": "ortho"}, X), ("rfft", {"dim": 0, "norm": "forward"}, X),
    ("rfft2", {}, X), ("rfftn", {"s": (3, 7)}, X),
    ("irfft", {}, Z), ("irfft", {"n": 7}, Z), ("irfft", {"n": 12, "norm": "ortho", "dim": 0}, Z),
    ("irfft2", {}, Z), ("irfftn", {"s": (5, 9), "norm": "forward"}, Z), ("irfft", {}, X),
    ("hfft", {}, Z), ("hfft", {"n": 5, "norm": "ortho"}, Z), ("ihfft", {}, X),
    ("ihfft", {"n": 7, "norm": "forward"}, X), ("hfft2", {"norm": "ortho"}, Z), ("hfftn", {"s": (3, 5)}, X),
    ("ihfft2", {}, X), ("ihfftn", {"s": (5, 4), "norm": "forward"}, X),
]


@pytest.mark.parametrize("name, kwargs, inp", FFT_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(FFT_CASES)])
def test_fft_gradient_matches_torch(name, kwargs, inp):
    ours, theirs = fl.tensor(inp, requires_grad=True), torch.tensor(inp, requires_grad=True)
    y = getattr(fl.fft, name)(ours, **kwargs)
    ty = getattr(torch.fft, name)(theirs, **kwargs)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().resolve_conj().numpy(), atol=1e-10)
    _loss(fl, y).backward()
    _loss(torch, ty).backward()
    assert ours.grad.dtype.name == str(theirs.grad.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.resolve_conj().numpy(), atol=1e-9)


def test_fft_real_losses_of_the_issue():
    x, tx = fl.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    fl.fft.rfft(x).abs().sum().backward()
    torch.fft.rfft(tx).abs().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-10)
    x.grad = None
    tx.grad = None
    (fl.fft.fft(x).real ** 2).sum().backward()
    (torch.fft.fft(tx).real ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("name, kwargs", [("rfft", {"n": 7}), ("fft2", {"norm": "ortho"}), ("irfft", {"n": 5}),
                                          ("ihfft", {}), ("hfft", {"norm": "forward"})])
def test_fft_gradcheck_and_double_backward(name, kwargs):
    x = fl.tensor(X[:2, :5], requires_grad=True)

    def f(t):
        y = getattr(fl.fft, name)(t, **kwargs)
        return fl.view_as_real(y) if y.is_complex() else y

    assert gradcheck(f, (x,))
    assert gradgradcheck(lambda t: (f(t) ** 2).sum(), (x,))


# --- gradcheck cases for test_derivatives.CASES (one per operator of _formulas_spectral) ----------
def _t(*shape, low=-2.0, high=2.0):
    return fl.tensor(RNG.uniform(low, high, size=shape), requires_grad=True)


def _real(y):
    return fl.view_as_real(y) if y.is_complex() else y


_c2c, _r2c, _c2r = (fl._ops.get_op(n).fn for n in ("_fft_c2c", "_fft_r2c", "_fft_c2r"))
CASES: dict = {
    "lgamma": (fl.lgamma, (_t(3, 2, low=0.3, high=4.0),)),
    "digamma": (fl.digamma, (_t(2, 3, low=0.3, high=4.0),)),
    "polygamma": (lambda a: fl.polygamma(2, a), (_t(4, low=0.5, high=3.0),)),
    "mvlgamma": (lambda a: fl.mvlgamma(a, 2), (_t(2, 2, low=1.0, high=4.0),)),
    "i0": (fl.i0, (_t(2, 3, low=-9.0, high=9.0),)),
    "sinc": (fl.sinc, (_t(2, 3),)),
    "special_i0e": (fl.special.i0e, (_t(5, low=-9.0, high=9.0),)),
    "special_i1": (fl.special.i1, (_t(5, low=-9.0, high=9.0),)),
    "special_i1e": (fl.special.i1e, (_t(5, low=-9.0, high=9.0),)),
    "special_ndtri": (fl.special.ndtri, (_t(4, low=0.05, high=0.95),)),
    "special_ndtr": (fl.special.ndtr, (_t(4),)),
    "special_erfcx": (fl.special.erfcx, (_t(4, low=-2.0, high=12.0),)),
    "special_log_ndtr": (fl.special.log_ndtr, (_t(4, low=-8.0, high=3.0),)),
    "special_entr": (fl.special.entr, (_t(4, low=0.1, high=3.0),)),
    "special_xlog1py": (fl.special.xlog1py, (_t(2, 3), _t(3, low=-0.5, high=3.0))),
    "special_zeta": (lambda q: fl.special.zeta(2.5, q), (_t(3, low=0.5, high=3.0),)),
    "igamma": (lambda x: fl.igamma(fl.tensor([0.5, 2.0, 7.5], dtype=fl.float64), x), (_t(3, low=0.2, high=9.0),)),
    "igammac": (lambda x: fl.igammac(fl.tensor([[0.5], [3.0]], dtype=fl.float64), x), (_t(3, low=0.2, high=9.0),)),
    "_fft_c2c": (lambda z: _real(_c2c(fl.view_as_complex(z), (0, 1), "ortho", False)), (_t(3, 4, 2),)),
    "_fft_r2c": (lambda a: _real(_r2c(a, (1,), "backward", True, True)), (_t(2, 5),)),
    "_fft_c2r": (lambda z: _c2r(fl.view_as_complex(z), (1,), "forward", 5), (_t(2, 3, 2),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases_gradcheck(name):
    fn, inputs = CASES[name]
    assert gradcheck(fn, inputs)
