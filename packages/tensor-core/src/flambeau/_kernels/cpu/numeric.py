"""CPU kernels of the numeric family (``flambeau._ops.numeric`` documents the operators).

nextafter: ``kernel(a, b) -> array``, ``a`` and ``b`` contiguous arrays of one floating dtype and shape
(numpy's ufunc covers float16 and ml_dtypes' bfloat16 too).
"""

from __future__ import annotations

import numpy as np

from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel

__all__ = []


@kernel("nextafter", "cpu")
@takes_bfloat16  # ml_dtypes' ufunc steps in bfloat16's own spacing (float32's would round back)
def nextafter(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.nextafter(a, b)
