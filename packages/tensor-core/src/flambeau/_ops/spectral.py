"""The discrete Fourier transform primitives behind ``flambeau.fft`` (torch's ``_fft_c2c``,
``_fft_r2c``, ``_fft_c2r``).

Every function of ``flambeau.fft`` (``fft``, ``rfft2``, ``irfftn``, ``hfft`` ...) resizes its input
(cropping or zero-padding, which autograd records) and calls one of three operators, as torch
does; their derivatives are in flambeau-autograd (``_formulas_spectral``). The operators take
the transformed dims (a tuple of non-negative ints, already checked), ``norm`` (``"backward"``,
``"ortho"`` or ``"forward"``, for the direction transformed) and:

- ``_fft_c2c(input, dim, norm, forward)``: complex to complex of the same shape and dtype;
- ``_fft_r2c(input, dim, norm, forward, onesided)``: float32/float64 to complex64/complex128;
  ``onesided`` keeps the first ``n // 2 + 1`` outputs along ``dim[-1]``;
- ``_fft_c2r(input, dim, norm, last_dim_size)``: a onesided Hermitian complex input to real,
  ``last_dim_size`` long along ``dim[-1]``.

CPU kernels: numpy's pocketfft (``flambeau._kernels.cpu.spectral``); CUDA kernels: radix-2 and
Bluestein transforms in numba.cuda (``flambeau._kernels.cuda.spectral``; cuFFT is not bound).
"""

from __future__ import annotations

from flambeau._ops._common import Tensor, _wrap, record_if_needed
from flambeau._ops._registry import declare
from flambeau._ops._samples import FLOAT, SampleInput, make_tensor

__all__ = ["fft_c2c", "fft_r2c", "fft_c2r"]

FFT_C2C = declare("_fft_c2c(Tensor input, int[] dim, str norm, bool forward) -> Tensor", function=False,
                  method=False, category="spectral")
FFT_R2C = declare("_fft_r2c(Tensor input, int[] dim, str norm, bool forward, bool onesided) -> Tensor",
                  function=False, method=False, category="spectral")
FFT_C2R = declare("_fft_c2r(Tensor input, int[] dim, str norm, int last_dim_size) -> Tensor", function=False,
                  method=False, category="spectral")


def _run(op, input: Tensor, dim: tuple, *params) -> Tensor:
    dev = input._device
    out = _wrap(op.kernel(dev.type)(input._data, dim, *params), dev)
    record_if_needed(op, (input, dim, *params), {}, out)
    return out


@FFT_C2C.front
def fft_c2c(input: Tensor, dim: tuple, norm: str, forward: bool) -> Tensor:
    """The forward (``forward=True``) or inverse DFT of complex ``input`` over ``dim``; same shape and dtype."""
    return _run(FFT_C2C, input, tuple(dim), norm, bool(forward))


@FFT_R2C.front
def fft_r2c(input: Tensor, dim: tuple, norm: str, forward: bool, onesided: bool) -> Tensor:
    """The DFT of real ``input`` over ``dim`` (complex64 for float32, complex128 for float64); ``onesided``:
    ``n // 2 + 1`` outputs along ``dim[-1]`` instead of ``n``."""
    return _run(FFT_R2C, input, tuple(dim), norm, bool(forward), bool(onesided))


@FFT_C2R.front
def fft_c2r(input: Tensor, dim: tuple, norm: str, last_dim_size: int) -> Tensor:
    """The inverse DFT of onesided Hermitian ``input`` over ``dim``, real and ``last_dim_size`` long along
    ``dim[-1]`` (float32 for complex64, float64 for complex128)."""
    return _run(FFT_C2R, input, tuple(dim), norm, int(last_dim_size))


# --- sample inputs (Note [Sample inputs] in _registry): real inputs, references from torch.fft -----
def _complex(device, dtype, shape, requires_grad):
    import flambeau as fl

    pairs = make_tensor((*shape, 2), device=device, dtype=dtype)
    return fl.view_as_complex(pairs).clone().requires_grad_(requires_grad)


@FFT_R2C.samples(dtypes=FLOAT, ref=lambda x, dim, norm, forward, onesided: __import__("torch").fft.rfftn(
    x, dim=dim, norm=norm))
def _r2c_samples(device, dtype, requires_grad):
    mk = make_tensor
    yield SampleInput(mk((6,), device=device, dtype=dtype, requires_grad=requires_grad), (0,), "backward", True, True)
    yield SampleInput(mk((3, 5), device=device, dtype=dtype, requires_grad=requires_grad, noncontiguous=True),
                      (0, 1), "ortho", True, True).named("2-d ortho")
    yield SampleInput(mk((2, 4, 3), device=device, dtype=dtype, requires_grad=requires_grad), (1,), "forward",
                      True, True).named("middle dim forward norm")


def _c2c_ref(x, dim, norm, forward):
    import torch

    return (torch.fft.fftn if forward else torch.fft.ifftn)(x, dim=dim, norm=norm)


def _c2r_ref(x, dim, norm, last_dim_size):
    import torch

    return torch.fft.irfftn(x, s=[x.shape[d] for d in dim[:-1]] + [last_dim_size], dim=dim, norm=norm)


# complex inputs of the precision of ``dtype`` (the tests walk real dtypes; gradcheck runs float64)
@FFT_C2C.samples(dtypes=FLOAT, ref=_c2c_ref)
def _c2c_samples(device, dtype, requires_grad):
    yield SampleInput(_complex(device, dtype, (5,), requires_grad), (0,), "backward", True)
    yield SampleInput(_complex(device, dtype, (3, 4), requires_grad), (0, 1), "ortho", False).named("2-d inverse")
    yield SampleInput(_complex(device, dtype, (2, 3, 4), requires_grad), (2, 0), "forward", True).named("dims")


@FFT_C2R.samples(dtypes=FLOAT, ref=_c2r_ref)
def _c2r_samples(device, dtype, requires_grad):
    yield SampleInput(_complex(device, dtype, (4,), requires_grad), (0,), "backward", 6)
    yield SampleInput(_complex(device, dtype, (3, 4), requires_grad), (0, 1), "ortho", 7).named("2-d odd")
    yield SampleInput(_complex(device, dtype, (3, 2), requires_grad), (1,), "forward", 3).named("forward norm")
