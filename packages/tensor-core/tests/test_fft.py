"""Tests of flambeau.fft and flambeau/_ops/spectral.py (kernels: flambeau/_kernels/cpu/spectral.py).

Values and result dtypes against torch.fft for every transform, norm, signal size (cropping and
zero-padding), dims and input dtype; the frequency helpers and shifts; torch's errors. The
primitives' samples run in ``test_op_samples.py``; gradients in flambeau-autograd's
``test_special_fft_grad.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 4, 6))
Z = X + 1j * RNG.normal(size=(3, 4, 6))
NORMS = [None, "backward", "ortho", "forward"]


def _same(got: fl.Tensor, want, tol: float = 1e-10) -> None:
    want = want.resolve_conj()
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)


def _both(name, inp, **kwargs):
    return getattr(fl.fft, name)(fl.tensor(inp), **kwargs), getattr(torch.fft, name)(torch.tensor(inp), **kwargs)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "hfft", "hfft2", "hfftn"])
@pytest.mark.parametrize("inp", [X, Z], ids=["real", "complex"])
def test_complex_transforms(name, norm, inp):
    _same(*_both(name, inp, norm=norm))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["rfft", "rfft2", "rfftn", "ihfft", "ihfft2", "ihfftn"])
def test_real_to_complex(name, norm):
    _same(*_both(name, X, norm=norm))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["irfft", "irfft2", "irfftn"])
@pytest.mark.parametrize("inp", [Z, X], ids=["complex", "real"])
def test_complex_to_real(name, norm, inp):
    _same(*_both(name, inp, norm=norm))


@pytest.mark.parametrize("name, kwargs", [
    ("fft", {"n": 9}), ("fft", {"n": 2, "dim": 1}), ("ifft", {"n": 5, "dim": 0}), ("rfft", {"n": 7}),
    ("rfft", {"n": 3, "dim": -2}), ("irfft", {"n": 7}), ("irfft", {"n": 12}), ("irfft", {"n": 1}),
    ("hfft", {"n": 9, "dim": 1}), ("ihfft", {"n": 5}),
    ("fft2", {"s": (5, 3)}), ("fftn", {"s": (2, -1, 8)}), ("fftn", {"s": (5,)}), ("ifftn", {"dim": (0, 2)}),
    ("rfftn", {"s": (4, 9), "dim": (0, 1)}), ("rfft2", {"dim": (0, 2)}), ("irfftn", {"s": (3, 5, 9)}),
    ("irfft2", {"s": (6, 6), "dim": (2, 0)}), ("fftn", {"dim": ()}), ("hfftn", {"s": (5, 7)}),
    ("hfft2", {"dim": (0, 2)}), ("ihfftn", {"s": (2, 5), "dim": (1, 0)}), ("ihfft2", {"s": (3, 3)}),
])
def test_signal_sizes_and_dims(name, kwargs):
    inp = X if name.startswith(("rfft", "ihfft")) else Z
    _same(*_both(name, inp, **kwargs))


def test_single_precision_and_integer_inputs():
    x32 = X.astype(np.float32)
    for name in ("fft", "rfft", "ifft2", "ihfft"):
        _same(*_both(name, x32), tol=1e-5)
    _same(*_both("irfft", Z.astype(np.complex64)), tol=1e-5)
    _same(*_both("fft", np.arange(6)), tol=1e-5)
    _same(*_both("rfft", np.array([True, False, True])), tol=1e-5)
    _same(*_both("fftn", np.array(2.5)), tol=1e-5)  # 0-dim: a transform over no dims
    with pytest.raises(IndexError, match="has no dimensions"):
        fl.fft.fft(fl.tensor(2.5))


def test_frequencies_and_shifts():
    for n, d in ((1, 1.0), (6, 0.5), (7, 2.0)):
        _same(fl.fft.fftfreq(n, d), torch.fft.fftfreq(n, d), 1e-7)
        _same(fl.fft.rfftfreq(n, d), torch.fft.rfftfreq(n, d), 1e-7)
    _same(fl.fft.fftfreq(5, dtype=fl.float64), torch.fft.fftfreq(5, dtype=torch.float64))
    assert fl.fft.fftfreq(4, requires_grad=True).requires_grad
    for dim in (None, 0, (1, 2), -1):
        _same(fl.fft.fftshift(fl.tensor(Z), dim), torch.fft.fftshift(torch.tensor(Z), dim))
        _same(fl.fft.ifftshift(fl.tensor(X), dim=dim), torch.fft.ifftshift(torch.tensor(X), dim=dim))
    y = fl.fft.fftshift(fl.fft.fftfreq(7))
    _same(fl.fft.ifftshift(y), torch.fft.fftfreq(7), 1e-7)


def test_round_trips():
    x = fl.tensor(X)
    np.testing.assert_allclose(fl.fft.ifft(fl.fft.fft(x)).real.numpy(), X, atol=1e-12)
    np.testing.assert_allclose(fl.fft.irfftn(fl.fft.rfftn(x), s=X.shape).numpy(), X, atol=1e-12)
    np.testing.assert_allclose(fl.fft.hfft(fl.fft.ihfft(x), n=6).numpy(), X, atol=1e-12)


def test_errors():
    x = fl.tensor(X)
    with pytest.raises(RuntimeError, match='Invalid normalization mode: "bogus"'):
        fl.fft.fft(x, norm="bogus")
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\)"):
        fl.fft.fft(x, n=0)
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\)"):
        fl.fft.irfft(fl.tensor(Z[..., :1]))
    with pytest.raises(RuntimeError, match="expects a real input"):
        fl.fft.rfft(fl.tensor(Z))
    with pytest.raises(RuntimeError, match="same length"):
        fl.fft.fftn(x, s=(2, 3), dim=(0,))
    with pytest.raises(IndexError, match="Dimension out of range"):
        fl.fft.fft(x, dim=3)
    with pytest.raises(RuntimeError, match="FFT dims must be unique"):
        fl.fft.fftn(x, dim=(0, 0))
    with pytest.raises(TypeError, match="argument 'input'"):
        fl.fft.fft([1.0, 2.0])
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        fl.fft.fft(x.to(fl.float16))


def test_names_are_torchs():
    for name in fl.fft.__all__:
        assert hasattr(torch.fft, name), name
    assert fl.fft.rfft.__doc__ and "n // 2 + 1" in fl.fft.rfft.__doc__
