"""CUDA kernels of the discrete Fourier transforms (``flambeau._ops.spectral``), in numba.cuda.

The calling conventions are the CPU kernels' (``flambeau._kernels.cpu.spectral``). A transform over
several dims is one 1-d transform per dim, each along the last axis of a contiguous copy with that
dim moved last (:func:`_along`). The 1-d transform of length ``n`` (:func:`_dft_last`):

* ``n`` a power of two: iterative radix-2 (Cooley-Tukey): a bit-reversing gather, then ``log2 n``
  butterfly launches over every row at once, twiddles computed on the host in float64;
* any other ``n``: Bluestein's chirp-z transform, a circular convolution of length ``m >= 2n - 1``
  (a power of two) through three power-of-two transforms, the chirp ``exp(-i pi k^2 / n)`` taken with
  ``k^2 mod 2n`` in integers so that it stays exact for long rows.

Real inputs are widened to complex first; onesided outputs are the first ``n // 2 + 1`` entries; the
inverse of a onesided transform rebuilds the full Hermitian row (:func:`_hermitian_kernel`) and
keeps the real parts. Normalisation (``"backward"``, ``"ortho"``, ``"forward"``) is one scaling at
the end. Host-side tables (bit reversals, twiddles, chirps) are cached per length, direction, dtype
and device.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import complex_np, from_numpy_dtype
from flambeau._kernels.cuda._launch import be, bind_numba_cuda, c_elem_strides, jit, launch_1d, stream
from flambeau._kernels.cuda.core import cast_to, contiguous, leading, permuted, real_pairs
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._ops._registry import kernel

cuda = None



# --- kernels ---------------------------------------------------------------------------------------------
def _gather_py():
    bind_numba_cuda(globals())

    def gather(src, n_src, dst, n_dst, idx, mult, use_mult, total):
        # dst[b, j] = src[b, idx[j]] (* mult[j]); idx[j] < 0 writes zero (Bluestein's padding)
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            b = i // n_dst
            j = i - b * n_dst
            k = idx[j]
            if k < 0:
                dst[i] = 0
            elif use_mult:
                dst[i] = src[b * n_src + k] * mult[j]
            else:
                dst[i] = src[b * n_src + k]
            i += step

    return gather


def _butterfly_py():
    bind_numba_cuda(globals())

    def butterfly(data, m, half, tw, tw_step, total):
        # one radix-2 stage over every row of data (rows of length m): total = rows * m / 2 butterflies
        t = cuda.grid(1)
        step = cuda.gridsize(1)
        hm = m // 2
        while t < total:
            row = t // hm
            r = t - row * hm
            group = r // half
            pos = r - group * half
            i = row * m + group * 2 * half + pos
            j = i + half
            v = data[j] * tw[pos * tw_step]
            u = data[i]
            data[i] = u + v
            data[j] = u - v
            t += step

    return butterfly


def _hermitian_py():
    bind_numba_cuda(globals())

    def hermitian(src, m_src, dst, n, total):
        # dst[b, k] = src[b, k] for k <= n // 2, conj(src[b, n - k]) above; zero beyond src's length
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            b = i // n
            k = i - b * n
            if k <= n // 2:
                dst[i] = src[b * m_src + k] if k < m_src else 0
            else:
                j = n - k
                dst[i] = src[b * m_src + j].conjugate() if j < m_src else 0
            i += step

    return hermitian


@functools.cache
def _compiled(name: str):
    bind_numba_cuda(globals())
    return jit({"gather": _gather_py, "butterfly": _butterfly_py, "hermitian": _hermitian_py}[name]())


# --- host tables (cached) ---------------------------------------------------------------------------------
def _device(host: np.ndarray):
    return be().from_numpy(np.ascontiguousarray(host))


@functools.cache
def _bit_reversal(m: int, device: int):
    bits = m.bit_length() - 1
    k = np.arange(m, dtype=np.int64)
    rev = np.zeros(m, np.int64)
    for b in range(bits):
        rev |= ((k >> b) & 1) << (bits - 1 - b)
    return _device(rev)


@functools.cache
def _twiddles(m: int, inverse: bool, dtype: str, device: int):
    sign = 1.0 if inverse else -1.0
    return _device(np.exp(sign * 2j * np.pi * np.arange(max(m // 2, 1)) / m).astype(dtype))


@functools.cache
def _identity_index(n_dst: int, n_valid: int, device: int):
    idx = np.arange(n_dst, dtype=np.int64)
    idx[n_valid:] = -1
    return _device(idx)


@functools.cache
def _bluestein(n: int, inverse: bool, dtype: str, device: int):
    """(m, chirp w, chirp / m, FFT_m of the conjugate chirp's circular kernel) for rows of length n."""
    m = 1 << (2 * n - 2).bit_length()
    k = np.arange(n, dtype=np.int64)
    angle = np.pi * ((k * k) % (2 * n)) / n  # k^2 mod 2n: exact phases for long rows
    w = np.exp((1j if inverse else -1j) * angle)
    kernel_row = np.zeros(m, np.complex128)
    kernel_row[:n] = np.conj(w)
    kernel_row[m - n + 1:] = np.conj(w[1:])[::-1]
    return (m, _device(w.astype(dtype)), _device((w / m).astype(dtype)),
            _device(np.fft.fft(kernel_row).astype(dtype)))


# --- the 1-d transform along the last axis ------------------------------------------------------------------
def _launch(name: str, total: int, *args) -> None:
    grid, block = launch_1d(total)
    _compiled(name)[grid, block, stream()](*args, total)


def _flat(a):
    return be().flat_view(a)


def _gather(src, n_src: int, rows: int, n_dst: int, idx, mult=None):
    out = be().empty((rows, n_dst), src.dtype)
    if rows * n_dst:
        use = mult is not None
        _launch("gather", rows * n_dst, _flat(src), n_src, _flat(out), n_dst, idx, mult if use else idx, use)
    return out


def _fft_pow2(x, rows: int, m: int, inverse: bool, dev: int):
    """Unnormalised DFT of the contiguous rows ``x`` ``(rows, m)``, ``m`` a power of two, on device
    ``dev``: a new array."""
    y = _gather(x, m, rows, m, _bit_reversal(m, dev))
    tw = _twiddles(m, inverse, y.dtype.name, dev)
    half = 1
    while half < m:
        _launch("butterfly", rows * m // 2, _flat(y), m, half, tw, m // (2 * half))
        half *= 2
    return y


def _device_index() -> int:
    from flambeau.cuda._streams import current_device

    return current_device()


def _dft_last(x, inverse: bool):
    """Unnormalised DFT along the last axis of contiguous complex ``x``: a new contiguous array."""
    shape = tuple(x.shape)
    n = shape[-1]
    rows = math.prod(shape[:-1])
    if n <= 1 or rows == 0:
        return contiguous(x)
    dev = _device_index()
    if n & (n - 1) == 0:
        y = _fft_pow2(x, rows, n, inverse, dev)
    else:
        m, w, w_over_m, kernel_fft = _bluestein(n, inverse, x.dtype.name, dev)
        # the index is -1 past n: the gather writes the padding zeros and reads no multiplier there
        a = _gather(x, n, rows, m, _identity_index(m, n, dev), w)
        spectrum = _fft_pow2(a, rows, m, False, dev)
        product = binary_launcher("mul")(spectrum, kernel_fft, from_numpy_dtype(x.dtype))
        conv = _fft_pow2(product, rows, m, True, dev)
        y = _gather(conv, m, rows, n, _identity_index(n, n, dev), w_over_m)
    return be().as_strided(_flat(y), shape, c_elem_strides(shape), 0)


def _moved(a, src: int, dst: int):
    """``a`` with axis ``src`` moved to position ``dst``, contiguous: a copy, or ``a`` itself when nothing
    moves and it is contiguous already."""
    if src == dst and be().is_c_contiguous(a):
        return a
    order = [d for d in range(a.ndim) if d != src]
    order.insert(dst, src)
    return permuted(a, order)


def _along(a, dims, inverse: bool):
    """Unnormalised DFT of complex ``a`` over ``dims``, one dim at a time: a new contiguous array."""
    last = a.ndim - 1
    out = None
    for d in dims:
        if a.shape[d] > 1:
            out = a = _moved(_dft_last(_moved(a, d, last), inverse), last, d)
    return contiguous(a) if out is None else out


def _scale(a, dims_sizes: int, norm: str, forward: bool):
    """``a`` scaled for ``norm`` in the direction transformed (numpy's and torch's conventions)."""
    if norm == "ortho":
        s = 1.0 / math.sqrt(dims_sizes)
    elif (norm == "forward") == forward:
        s = 1.0 / dims_sizes
    else:
        return a
    if s == 1.0:
        return a
    return binary_launcher("mul")(a, s, from_numpy_dtype(a.dtype))


def _size(a, dims) -> int:
    return math.prod(a.shape[d] for d in dims) if dims else 1


# --- the operators' kernels ---------------------------------------------------------------------------------
@kernel("_fft_c2c", "cuda")
def _cuda_fft_c2c(a, dims, norm, forward):
    out = _along(cast_to(a, complex_np(a.dtype)), dims, not forward)
    return _scale(out, _size(a, dims), norm, forward)


@kernel("_fft_r2c", "cuda")
def _cuda_fft_r2c(a, dims, norm, forward, onesided):
    out = _scale(_along(cast_to(a, complex_np(a.dtype)), dims, not forward), _size(a, dims), norm, forward)
    if dims and onesided:
        last = dims[-1]
        out = leading(out, last, a.shape[last] // 2 + 1)
    return out


@kernel("_fft_c2r", "cuda")
def _cuda_fft_c2r(a, dims, norm, last_dim_size):
    last = dims[-1]
    a = _along(a, dims[:-1], True)  # the other dims first, as numpy's irfftn
    rows_last = _moved(a, last, a.ndim - 1)
    shape = tuple(rows_last.shape)
    m_src, n = shape[-1], int(last_dim_size)
    rows = math.prod(shape[:-1])
    full = be().empty(shape[:-1] + (n,), a.dtype)
    if rows * n:
        _launch("hermitian", rows * n, _flat(rows_last), m_src, _flat(full), n)
    spectrum = _moved(_dft_last(full, True), a.ndim - 1, last)
    # the real parts: the imaginary ones are rounding noise of a Hermitian row
    out = leading(real_pairs(spectrum), spectrum.ndim, 1).reshape(tuple(spectrum.shape))
    sizes = math.prod(a.shape[d] for d in dims[:-1]) * n
    return _scale(out, sizes, norm, False)


# --- concrete signatures (PTX test) -------------------------------------------------------------------------
def ptx_cases() -> list:
    """(label, python function, signature) for every kernel template x dtype this family launches."""
    from numba import types

    i64, b = types.int64, types.boolean
    a64 = types.Array(i64, 1, "C")
    cases = []
    for dn in ("complex64", "complex128"):
        c = types.Array(getattr(types, dn), 1, "C")
        cases += [(f"fft_gather:{dn}", _gather_py(), (c, i64, c, i64, a64, c, b, i64)),
                  (f"fft_gather_index:{dn}", _gather_py(), (c, i64, c, i64, a64, a64, b, i64)),
                  (f"fft_butterfly:{dn}", _butterfly_py(), (c, i64, i64, c, i64, i64)),
                  (f"fft_hermitian:{dn}", _hermitian_py(), (c, i64, c, i64, i64))]
    return cases
