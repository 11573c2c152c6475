"""CUDA kernels of the spectral family: none yet (Note [numba.cuda bound on first use] in ``_launch``).

An FFT on CUDA needs cuFFT, which flambeau does not bind yet: the operators of
``flambeau._ops.spectral`` raise NotImplementedError on CUDA tensors, and the kernel table's
NOT_ON_CUDA lists them with that reason.
"""

from __future__ import annotations

cuda = None


def ptx_cases() -> list:
    """(label, python function, signature) for every kernel template x dtype this family launches."""
    return []
