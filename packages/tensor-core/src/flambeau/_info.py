"""Numeric limits of dtypes (``finfo``, ``iinfo``) and small predicates (``is_tensor`` ...)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from flambeau import _dtype as dt

__all__ = ["finfo", "iinfo", "is_tensor", "is_floating_point", "is_nonzero", "numel"]


class finfo:
    """Machine limits of a floating dtype: ``bits``, ``eps``, ``max``, ``min``, ``tiny``, ``resolution``.

    ``finfo()`` describes the default dtype (float32 unless changed); a complex dtype is described by
    its parts' dtype (complex64: float32), as torch does.
    """

    def __init__(self, type=None):  # noqa: A002 - torch's argument name
        d = dt.get_default_dtype() if type is None else dt.to_dtype(type, "type")
        if d.is_complex:  # torch describes a complex dtype by its parts' dtype
            d = dt.to_real(d)
        if not d.is_floating_point:
            raise TypeError(f"finfo(): expected a floating point dtype, got {d}")
        info = ml_dtypes.finfo(d.np)  # numpy's finfo does not know bfloat16
        self.dtype = d.name
        self.bits = info.bits
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny)
        self.resolution = 10.0 ** -int(info.precision)  # exactly torch's (a float, not the dtype's rounding)

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype: ``bits``, ``max``, ``min``."""

    def __init__(self, type):  # noqa: A002
        d = dt.to_dtype(type, "type")
        if d.is_floating_point or d is dt.bool:
            raise TypeError(f"iinfo(): expected an integer dtype, got {d}")
        info = np.iinfo(d.np)
        self.dtype = d.name
        self.bits = info.bits
        self.max = int(info.max)
        self.min = int(info.min)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def is_tensor(obj) -> bool:
    """Whether ``obj`` is a flambeau Tensor."""
    from flambeau._tensor import Tensor

    return isinstance(obj, Tensor)


def is_floating_point(input) -> bool:
    """Whether ``input``'s dtype is a floating dtype."""
    return input.dtype.is_floating_point


def is_nonzero(input) -> bool:
    """The truth value of a one-element tensor (RuntimeError for other sizes)."""
    return bool(input)


def numel(input) -> int:
    """Number of elements of ``input``."""
    return input.numel()
