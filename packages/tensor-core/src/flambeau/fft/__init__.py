"""Discrete Fourier transforms, as ``torch.fft``: ``import flambeau as fl; fl.fft.rfft(x)``.

Every transform takes torch's arguments: ``n`` / ``s`` (the signal length(s): the input is
zero-padded or cropped to it along the transformed dims first), ``dim`` and ``norm``:
``"backward"`` (default: the forward transform unscaled, the inverse scaled by ``1/n``),
``"ortho"`` (both by ``1/sqrt(n)``) or ``"forward"`` (the forward by ``1/n``). Real inputs are
promoted to complex where the transform is complex (float32 -> complex64, float64 -> complex128;
integer and bool inputs go through the default float dtype first); the ``r*`` transforms take a
real input and return the ``n // 2 + 1`` non-redundant outputs along the last transformed dim,
the ``ir*`` ones return real results. Gradients follow torch's (``flambeau-autograd``).

The transforms run on the CPU (numpy's pocketfft); CUDA tensors raise NotImplementedError (an
FFT on CUDA needs cuFFT, which flambeau does not bind yet).
"""

from __future__ import annotations

from collections.abc import Sequence

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, wrap_dim
from flambeau._ops.spectral import fft_c2c, fft_c2r, fft_r2c

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")
# the scaling of the opposite direction that makes the same total scaling (hfft, ihfft)
_SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


# --- argument handling --------------------------------------------------------------------------
def _norm(norm) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}" (expected None, "backward", "ortho" or "forward")')
    return norm


def _check_input(input, fname: str) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"fft_{fname}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        input = input.to(dt.get_default_dtype())  # torch: integers transform in the default float dtype
    if input.dtype.is_floating_point and input.dtype not in (dt.float32, dt.float64):
        raise RuntimeError(f"Unsupported dtype {input.dtype.scalar_name}: the CPU FFT takes float32, float64, "
                           "complex64 and complex128")
    return input


def _wrap_dims(dims, ndim: int) -> tuple:
    out = []
    for d in dims:
        if ndim == 0:
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
        out.append(wrap_dim(d, ndim))
    if len(set(out)) != len(out):
        raise RuntimeError("FFT dims must be unique")
    return tuple(out)


def _dims_and_sizes(input: Tensor, s, dim) -> tuple:
    """``(dims, sizes)`` of an n-dimensional transform from torch's ``s`` and ``dim`` (``-1`` in ``s``:
    the input's size); all dims when both are None, the last ``len(s)`` when only ``s`` is given."""
    if isinstance(dim, int):
        dim = (dim,)
    if isinstance(s, int):
        s = (s,)
    if dim is None:
        dims = tuple(range(input.ndim - len(s), input.ndim)) if s is not None else tuple(range(input.ndim))
        if s is not None and len(s) > input.ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {input.ndim} dimensions.")
    else:
        dims = _wrap_dims(dim, input.ndim)
    if s is not None and len(s) != len(dims):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    sizes = tuple(input.shape[d] for d in dims) if s is None else tuple(
        input.shape[d] if n == -1 else n for d, n in zip(dims, s))
    for n in sizes:
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return dims, sizes


def _resize(input: Tensor, dims: tuple, sizes: tuple) -> Tensor:
    """``input`` cropped or zero-padded (at the end) to ``sizes`` along ``dims`` (recorded by autograd)."""
    import flambeau as fl

    for d, n in zip(dims, sizes):
        have = input.shape[d]
        if n < have:
            input = input.narrow(d, 0, n)
        elif n > have:
            shape = list(input.shape)
            shape[d] = n - have
            input = fl.cat([input, fl.zeros(shape, dtype=input.dtype, device=input.device)], d)
    return input


def _n_dims(n, dim) -> tuple:
    return (None if n is None else (n,)), (dim,)


# --- complex to complex ---------------------------------------------------------------------------
def _c2c(input, s, dim, norm, forward: bool, fname: str) -> Tensor:
    input = _check_input(input, fname)
    dims, sizes = _dims_and_sizes(input, s, dim)
    x = _resize(input, dims, sizes)
    if x.dtype.is_complex:
        return fft_c2c(x, dims, _norm(norm), forward)
    return fft_r2c(x, dims, _norm(norm), forward, False)  # a real input: its full transform


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-d discrete Fourier transform of ``input`` along ``dim``.

    ``input``: real or complex, any shape; ``n``: the signal length (crop or zero-pad to it).
    Returns a complex tensor (complex64 for float32 and complex64 inputs, complex128 for double)
    of ``input``'s shape with ``n`` along ``dim``.
    """
    return _c2c(input, *_n_dims(n, dim), norm, True, "fft")


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-d inverse discrete Fourier transform along ``dim`` (scaled by ``1/n`` with ``norm="backward"``);
    shapes and dtypes as :func:`fft`."""
    return _c2c(input, *_n_dims(n, dim), norm, False, "ifft")


def fft2(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
         norm: str | None = None) -> Tensor:
    """The 2-d discrete Fourier transform over ``dim`` (default the last two); see :func:`fftn`."""
    return _c2c(input, s, dim, norm, True, "fft2")


def ifft2(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Tensor:
    """The 2-d inverse discrete Fourier transform over ``dim`` (default the last two); see :func:`ifftn`."""
    return _c2c(input, s, dim, norm, False, "ifft2")


def fftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
         norm: str | None = None) -> Tensor:
    """The n-dimensional discrete Fourier transform over ``dim`` (all dims by default; the last ``len(s)``
    when only ``s`` is given), each cropped or zero-padded to ``s``. Complex result (see :func:`fft`)."""
    return _c2c(input, s, dim, norm, True, "fftn")


def ifftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """The n-dimensional inverse discrete Fourier transform; arguments as :func:`fftn`."""
    return _c2c(input, s, dim, norm, False, "ifftn")


# --- real to complex (onesided) and back -------------------------------------------------------
def _r2c(input, s, dim, norm, forward: bool, fname: str) -> Tensor:
    input = _check_input(input, fname)
    if input.dtype.is_complex:
        raise RuntimeError(f"{fname} expects a real input tensor, but got {input.dtype.scalar_name}")
    dims, sizes = _dims_and_sizes(input, s, dim)
    return fft_r2c(_resize(input, dims, sizes), dims, _norm(norm), forward, True)


def _c2r(input, s, dim, norm, fname: str) -> Tensor:
    input = _check_input(input, fname)
    if not input.dtype.is_complex:
        import flambeau as fl

        input = fl.complex(input, fl.zeros_like(input))  # torch promotes a real input
    dims, sizes = _dims_and_sizes(input, s, dim)
    last = sizes[-1] if s is not None and s[-1] != -1 else 2 * (input.shape[dims[-1]] - 1)
    if last < 1:
        raise RuntimeError(f"Invalid number of data points ({last}) specified")
    x = _resize(input, dims, sizes[:-1] + (last // 2 + 1,))
    return fft_c2r(x, dims, _norm(norm), last)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-d Fourier transform of real ``input`` along ``dim``: the ``n // 2 + 1`` non-negative
    frequencies (the others are their conjugates). complex64 for float32, complex128 for float64."""
    return _r2c(input, *_n_dims(n, dim), norm, True, "rfft")


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfft`: a real tensor of length ``n`` (default ``2 * (m - 1)`` for ``m`` inputs)
    along ``dim``; float32 for complex64 inputs, float64 for complex128."""
    return _c2r(input, *_n_dims(n, dim), norm, "irfft")


def rfft2(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Tensor:
    """The 2-d :func:`rfftn` over ``dim`` (default the last two)."""
    return _r2c(input, s, dim, norm, True, "rfft2")


def irfft2(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Tensor:
    """The 2-d :func:`irfftn` over ``dim`` (default the last two)."""
    return _c2r(input, s, dim, norm, "irfft2")


def rfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """The n-dimensional Fourier transform of real ``input``, onesided along the last of ``dim``
    (``s[-1] // 2 + 1`` outputs there); arguments as :func:`fftn`."""
    return _r2c(input, s, dim, norm, True, "rfftn")


def irfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
           norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfftn`: real, ``s[-1]`` long (default ``2 * (m - 1)``) along the last of ``dim``."""
    return _c2r(input, s, dim, norm, "irfftn")


def _hermitian(input, s, dim, norm, fname: str) -> Tensor:
    # the forward transform of a Hermitian signal is the unscaled inverse of its conjugate, real
    input = _check_input(input, fname)
    if input.dtype.is_complex:
        input = input.conj()
    return _c2r(input, s, dim, _SWAPPED[_norm(norm)], fname)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The Fourier transform of a Hermitian-symmetric signal given by its first half ``input``: a real
    tensor of length ``n`` (default ``2 * (m - 1)``) along ``dim`` (the inverse of :func:`ihfft`)."""
    return _hermitian(input, *_n_dims(n, dim), norm, "hfft")


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of :func:`hfft`: the ``n // 2 + 1`` first outputs of the inverse transform of real
    ``input`` along ``dim`` (complex64 for float32, complex128 for float64)."""
    return _r2c(input, *_n_dims(n, dim), norm, False, "ihfft")


def hfft2(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Tensor:
    """The 2-d :func:`hfftn` over ``dim`` (default the last two)."""
    return _hermitian(input, s, dim, norm, "hfft2")


def ihfft2(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Tensor:
    """The 2-d :func:`ihfftn` over ``dim`` (default the last two)."""
    return _r2c(input, s, dim, norm, False, "ihfft2")


def hfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """The n-dimensional :func:`hfft`: real, ``s[-1]`` long (default ``2 * (m - 1)``) along the last of
    ``dim``; arguments as :func:`irfftn`."""
    return _hermitian(input, s, dim, norm, "hfftn")


def ihfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
           norm: str | None = None) -> Tensor:
    """The n-dimensional :func:`ihfft` of real ``input``: onesided along the last of ``dim``; arguments as
    :func:`rfftn`."""
    return _r2c(input, s, dim, norm, False, "ihfftn")


# --- frequencies and shifts ----------------------------------------------------------------------
def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``, a 1-d tensor of ``dtype`` (default float)."""
    import flambeau as fl

    k = fl.arange(n, dtype=dtype, device=device)
    r = fl.where(k >= (n + 1) // 2, k - n, k) / (d * n)
    return r.to(dtype or dt.get_default_dtype()).requires_grad_(requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The non-negative sample frequencies of :func:`rfft`: ``[0, 1, ..., n // 2] / (d * n)``."""
    import flambeau as fl

    r = fl.arange(n // 2 + 1, dtype=dtype, device=device) / (d * n)
    return r.to(dtype or dt.get_default_dtype()).requires_grad_(requires_grad)


def _shift(input: Tensor, dim, sign: int) -> Tensor:
    import flambeau as fl

    if dim is None:
        dim = tuple(range(input.ndim))
    elif isinstance(dim, int):
        dim = (dim,)
    dims = _wrap_dims(dim, input.ndim)
    if not dims:
        return input
    return fl.roll(input, tuple(sign * (input.shape[d] // 2) for d in dims), dims)


def fftshift(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """``input`` rolled so that the zero frequency is in the middle of each of ``dim`` (default all)."""
    return _shift(input, dim, 1)


def ifftshift(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """The inverse of :func:`fftshift` (they differ for odd lengths)."""
    return _shift(input, dim, -1)
