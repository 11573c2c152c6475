"""``stft`` and ``istft`` against torch: values over the parameters, errors, warnings and gradients."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def _window(lib, kind, length):
    return None if kind is None else lib.hann_window(length, dtype=lib.float64)


def _cases():
    for shape, n_fft, hop, win_length, window, center, normalized, onesided, is_complex in itertools.product(
            [(40,), (2, 37)], [8, 9], [None, 3], [None, 5], [None, "hann"], [True, False], [False, True],
            [None, False], [False, True]):
        if (n_fft + (hop or 0) + (win_length or 0)) % 3 == 0:  # (a third of the grid: every value of each parameter)
            yield shape, n_fft, dict(hop_length=hop, win_length=win_length, center=center, normalized=normalized,
                                     onesided=onesided), window, is_complex
    for pad_mode in ("constant", "replicate", "circular"):
        yield (2, 30), 8, dict(pad_mode=pad_mode, hop_length=4), "hann", False
    for shape in [(40,), (1, 37)]:  # (torch's frames overrun a batch of several: its bug, not compared)
        yield shape, 9, dict(win_length=5, center=False, align_to_window=True), "hann", False
        yield shape, 8, dict(win_length=5, center=False, align_to_window=False), None, True


CASES = list(_cases())


@pytest.mark.parametrize("shape, n_fft, kwargs, window, is_complex", CASES)
def test_stft_and_its_inverse_match_torch(shape, n_fft, kwargs, window, is_complex):
    a = RNG.standard_normal(shape) + (1j * RNG.standard_normal(shape) if is_complex else 0)
    win_length = kwargs.get("win_length") or n_fft
    want = torch.stft(torch.from_numpy(a), n_fft, window=_window(torch, window, win_length), return_complex=True,
                      **kwargs)
    got = fl.stft(fl.from_numpy(a), n_fft, window=_window(fl, window, win_length), return_complex=True, **kwargs)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype.name == str(want.dtype).split(".")[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)
    if window is None or is_complex or "align_to_window" in kwargs or "pad_mode" in kwargs:
        return
    inverse = {k: kwargs[k] for k in ("hop_length", "win_length", "center", "normalized", "onesided")}
    for length in (None, 30, 45):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the zero-padding warning: checked below)
            try:
                want_y = torch.istft(want, n_fft, window=_window(torch, window, win_length), length=length, **inverse)
            except RuntimeError as e:  # (a Hann window's first zero without centring: refused by both)
                assert "window overlap add min" in str(e)
                with pytest.raises(RuntimeError, match="window overlap add min"):
                    fl.istft(got, n_fft, window=_window(fl, window, win_length), length=length, **inverse)
                continue
            got_y = fl.istft(got, n_fft, window=_window(fl, window, win_length), length=length, **inverse)
        assert tuple(got_y.shape) == tuple(want_y.shape)
        np.testing.assert_allclose(got_y.numpy(), want_y.numpy(), rtol=1e-9, atol=1e-9)


def test_round_trip_restores_the_signal():
    x = fl.randn(3, 50, dtype=fl.float64)
    window = fl.hann_window(16, dtype=fl.float64)
    spectrum = fl.stft(x, 16, hop_length=4, window=window, return_complex=True)
    np.testing.assert_allclose(fl.istft(spectrum, 16, hop_length=4, window=window, length=50).numpy(), x.numpy(),
                               atol=1e-12)


def test_gradients_match_torch():
    a = RNG.standard_normal((2, 30))
    w = RNG.random(8) + 0.5
    ours = [fl.tensor(v, requires_grad=True) for v in (a, w)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (a, w)]
    for lib, (x, win) in ((fl, ours), (torch, theirs)):
        spectrum = lib.stft(x, 8, hop_length=3, window=win, return_complex=True)
        y = lib.istft(spectrum * 1.5, 8, hop_length=3, window=win, length=28)
        (spectrum.abs().sum() + (y * y).sum()).backward()
    for got, want in zip(ours, theirs):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-9, atol=1e-9)


def _error(call):
    with pytest.raises(RuntimeError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("kwargs, match", [
    ({}, "stft requires the return_complex parameter be given for real inputs"),
    ({"return_complex": True, "hop_length": 0}, "expected hop_length > 0, but got hop_length=0"),
    ({"return_complex": True, "win_length": 20}, "expected 0 < win_length <= n_fft, but got win_length=20"),
    ({"return_complex": True, "window": "short"}, "expected a 1D window tensor of size equal to win_length=16, but "
                                                  "got window with size \\[5\\]"),
    ({"return_complex": True, "center": True, "align_to_window": True},
     "stft align_to_window should only be set when center = false"),
])
def test_stft_errors_are_torchs(kwargs, match):
    for lib in (fl, torch):
        x = lib.zeros(100, dtype=lib.float64)
        given = dict(kwargs, window=lib.ones(5, dtype=lib.float64)) if kwargs.get("window") == "short" else kwargs
        with pytest.raises(RuntimeError, match=match):
            lib.stft(x, 16, **given)
    with pytest.raises(RuntimeError, match="expected a 1D or 2D tensor"):
        fl.stft(fl.zeros(2, 3, 100), 16, return_complex=True)
    with pytest.raises(RuntimeError, match="expected 0 < n_fft <= 100"):
        fl.stft(fl.zeros(100), 200, center=False, return_complex=True)


def test_istft_errors_and_warnings_are_torchs():
    for lib in (fl, torch):
        window = lib.hann_window(16, dtype=lib.float64)
        spectrum = lib.stft(lib.ones(100, dtype=lib.float64), 16, window=window, return_complex=True)
        with pytest.raises(RuntimeError, match="istft requires a complex-valued input tensor"):
            lib.istft(spectrum.real, 16, window=window)
        with pytest.raises(RuntimeError, match="expected 0 < hop_length <= win_length"):
            lib.istft(spectrum, 16, window=window, hop_length=20)
        with pytest.raises(RuntimeError, match="match n_fft / 2 \\+ 1 when onesided=True, but got 9"):
            lib.istft(spectrum, 20, window=lib.hann_window(20, dtype=lib.float64))
        with pytest.raises(RuntimeError, match="window overlap add min: 1"):
            lib.istft(spectrum, 16, window=window * 0)
    window = fl.hann_window(16, dtype=fl.float64)
    spectrum = fl.stft(fl.ones(100, dtype=fl.float64), 16, window=window, return_complex=True)
    with pytest.warns(UserWarning, match="Result is being padded with zeros in the tail"):  # (torch's warn once)
        assert fl.istft(spectrum, 16, window=window, length=120).shape == (120,)
    with pytest.warns(UserWarning, match="A window was not provided. A rectangular window will be applied"):
        fl.istft(spectrum, 16)


def test_return_complex_false_is_view_as_real_with_torchs_warning():
    x = RNG.standard_normal(64)
    with pytest.warns(UserWarning, match="stft with return_complex=False is deprecated"):
        got = fl.stft(fl.tensor(x), 16, return_complex=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.stft(torch.tensor(x), 16, return_complex=False)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    assert fl.Tensor.stft is fl.stft and fl.Tensor.istft is fl.istft
