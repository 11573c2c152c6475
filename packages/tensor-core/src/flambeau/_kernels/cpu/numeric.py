"""CPU kernels of the numeric family (``flambeau._ops.numeric`` documents the operators).

nextafter: ``kernel(a, b) -> array``, ``a`` and ``b`` contiguous arrays of one floating dtype and shape
(numpy's ufunc covers float16 and ml_dtypes' bfloat16 too).
"""

from __future__ import annotations

import numpy as np

from flambeau._ops._registry import kernel

__all__ = []


@kernel("nextafter", "cpu")
def nextafter(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.nextafter(a, b)
