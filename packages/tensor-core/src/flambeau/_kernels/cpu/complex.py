"""CPU kernels of the complex family (``flambeau._ops.complex``): ``angle``, ``conj_physical``,
``complex`` and ``polar``, numpy expressions on the host arrays.

Conventions: ``angle(a, out_dtype)``, ``conj_physical(a)``, ``complex(real, imag, complex_dtype)``
and ``polar(abs, angle, complex_dtype)`` return new arrays (the views of the family run no kernel).
"""

from __future__ import annotations

import numpy as np

from flambeau._ops._registry import kernel


@kernel("angle", "cpu")
def _cpu_angle(a, out_dtype):
    npdt = out_dtype.np
    if a.dtype.kind == "c":
        return np.angle(a).astype(npdt, copy=False)
    x = a.astype(out_dtype.compute.np, copy=False)
    # torch: pi for negative reals, 0 otherwise, NaN kept (np.angle gives pi for -0.0 too)
    return np.where(x < 0, np.pi, np.where(np.isnan(x), x, 0)).astype(npdt)


@kernel("conj_physical", "cpu")
def _cpu_conj(a):
    return np.conj(a) if a.dtype.kind == "c" else a.copy()


@kernel("complex", "cpu")
def _cpu_complex(real, imag, complex_dtype):
    shape = np.broadcast_shapes(real.shape, imag.shape)
    out = np.empty(shape, complex_dtype.np)
    out.real = real
    out.imag = imag
    return out


@kernel("polar", "cpu")
def _cpu_polar(abs_, angle, complex_dtype):
    return _cpu_complex(abs_ * np.cos(angle), abs_ * np.sin(angle), complex_dtype)
