"""CPU kernels of the discrete Fourier transforms (``flambeau._ops.spectral``): numpy's pocketfft.

Conventions (arrays in, a new array out; ``dims`` a tuple of axes, ``norm`` one of numpy's and
torch's ``"backward"``, ``"ortho"``, ``"forward"``, always for the direction transformed):
    ``_fft_c2c(a, dims, norm, forward)``: complex to complex, forward or inverse;
    ``_fft_r2c(a, dims, norm, forward, onesided)``: real to complex (``onesided``: only the first
        ``n // 2 + 1`` outputs along the last of ``dims``, the others follow by Hermitian symmetry);
    ``_fft_c2r(a, dims, norm, last_dim_size)``: the inverse of a onesided transform, Hermitian
        ``a`` (``last_dim_size // 2 + 1`` along the last of ``dims``) to real.
Results are complex64 / float32 for single-precision inputs and complex128 / float64 for double,
as in torch (numpy may compute single precision in double: the result is cast back).
"""

from __future__ import annotations

import numpy as np

from flambeau._dtype import complex_np, real_np
from flambeau._ops._registry import kernel


@kernel("_fft_c2c", "cpu")
def _cpu_fft_c2c(a, dims, norm, forward):
    if not dims:  # a transform over no dims is the identity (numpy would make a 0-d input 1-d)
        return a.astype(complex_np(a.dtype))
    transform = np.fft.fftn if forward else np.fft.ifftn
    return transform(a, axes=dims, norm=norm).astype(complex_np(a.dtype), copy=False)


@kernel("_fft_r2c", "cpu")
def _cpu_fft_r2c(a, dims, norm, forward, onesided):
    if not dims:
        return a.astype(complex_np(a.dtype))
    if forward and onesided:
        r = np.fft.rfftn(a, axes=dims, norm=norm)
    else:
        r = (np.fft.fftn if forward else np.fft.ifftn)(a, axes=dims, norm=norm)
        if onesided:
            last = dims[-1]
            r = r[(slice(None),) * (last % a.ndim) + (slice(0, a.shape[last] // 2 + 1),)]
    return np.ascontiguousarray(r, dtype=complex_np(a.dtype))


@kernel("_fft_c2r", "cpu")
def _cpu_fft_c2r(a, dims, norm, last_dim_size):
    sizes = [a.shape[d] for d in dims[:-1]] + [last_dim_size]
    return np.fft.irfftn(a, s=sizes, axes=dims, norm=norm).astype(real_np(a.dtype), copy=False)
