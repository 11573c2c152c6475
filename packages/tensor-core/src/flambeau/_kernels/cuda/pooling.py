"""CUDA kernels of the pooling operators (being written; see flambeau._kernels.cpu.pooling)."""

from __future__ import annotations

__all__ = ["ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of this family's kernels, for the PTX compilation test."""
    return []
