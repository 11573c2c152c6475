"""The FFT on CUDA (``flambeau._kernels.cuda.spectral``: radix-2 and Bluestein) against the CPU's pocketfft.

Lengths cover powers of two, primes and composites (Bluestein), dims several at once, every norm,
onesided and full real transforms, the inverse of a onesided transform with cropped and padded
last dims, the public ``flambeau.fft`` functions and gradients through them.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops.spectral import fft_c2c, fft_c2r, fft_r2c

RNG = np.random.default_rng(0)
CASES = [((8,), (0,)), ((6,), (0,)), ((5,), (0,)), ((3, 7), (1,)), ((4, 6), (0, 1)), ((2, 3, 5), (0, 2)),
         ((16, 3), (0,)), ((1,), (0,)), ((12,), (0,)), ((2, 4), ())]


def _close(got, want, tol=1e-5):
    got = got.cpu()
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    w = want.numpy()
    scale = max(1.0, float(np.abs(w).max())) if w.size else 1.0
    np.testing.assert_allclose(got.numpy(), w, rtol=0, atol=tol * scale)


@pytest.mark.parametrize("shape, dims", CASES, ids=[f"{s}-{d}" for s, d in CASES])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_c2c_and_r2c_match_the_cpu(shape, dims, norm):
    z = fl.tensor((RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(np.complex64))
    for forward in (True, False):
        _close(fft_c2c(z.cuda(), dims, norm, forward), fft_c2c(z, dims, norm, forward))
    r = fl.tensor(RNG.standard_normal(shape).astype(np.float32))
    for forward, onesided in itertools.product((True, False), (True, False)):
        _close(fft_r2c(r.cuda(), dims, norm, forward, onesided), fft_r2c(r, dims, norm, forward, onesided))


@pytest.mark.parametrize("shape, dims", [c for c in CASES if c[1]], ids=[f"{s}-{d}" for s, d in CASES if d])
def test_c2r_matches_the_cpu_for_cropped_and_padded_rows(shape, dims):
    r = fl.tensor(RNG.standard_normal(shape).astype(np.float64))
    h = fft_r2c(r, dims, "backward", True, True)
    n = shape[dims[-1]]
    for last in sorted({n, n + 1, max(1, n - 1)}):
        _close(fft_c2r(h.cuda(), dims, "backward", last), fft_c2r(h, dims, "backward", last), 1e-12)


def test_public_functions_and_gradients_match_the_cpu():
    x = fl.tensor(RNG.standard_normal((3, 10)).astype(np.float32))
    for f in (lambda t: fl.fft.fft(t), lambda t: fl.fft.rfft(t, n=12), lambda t: fl.fft.irfft(fl.fft.rfft(t)),
              lambda t: fl.fft.fft2(t), lambda t: fl.fft.ifftn(t, s=(4, 7)), lambda t: fl.fft.fftshift(fl.fft.fft(t)),
              lambda t: fl.fft.hfft(fl.fft.rfft(t)), lambda t: fl.fft.rfft(t).abs()):
        _close(f(x.cuda()), f(x))
    for loss in (lambda t: fl.fft.rfft(t).abs().sum(), lambda t: fl.fft.fft(t).real.sum(),
                 lambda t: (fl.fft.irfft(fl.fft.rfft(t), n=10) ** 2).sum()):
        a, b = x.clone().requires_grad_(), x.cuda().requires_grad_()
        loss(a).backward()
        loss(b).backward()
        _close(b.grad, a.grad)


def test_a_transform_over_length_one_dims_is_a_new_tensor():
    # nothing to transform (every dim of length 1): the result is still a copy, as on the CPU
    x = fl.tensor(RNG.standard_normal((3, 1)) + 1j * RNG.standard_normal((3, 1))).cuda()
    y = fft_c2c(x, [1], "backward", True)
    _close(y, x.cpu())
    assert y.data_ptr() != x.data_ptr()


def test_stft_and_istft_on_the_device_match_the_cpu():
    x = fl.tensor(RNG.standard_normal((2, 20)))
    window = fl.hann_window(8, dtype=fl.float64)
    spectrum = fl.stft(x, 8, hop_length=2, window=window, return_complex=True)
    on_device = fl.stft(x.cuda(), 8, hop_length=2, window=window.cuda(), return_complex=True)
    assert on_device.device.type == "cuda"
    _close(on_device, spectrum, 1e-12)
    _close(fl.istft(on_device, 8, hop_length=2, window=window.cuda(), length=20), x, 1e-12)
