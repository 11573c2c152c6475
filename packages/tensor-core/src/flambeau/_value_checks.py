"""Checks of values given to integer dtypes (``flambeau._dtype.dtype``), outside ``flambeau._dtype``, whose source is
part of every CUDA kernel family's PTX key (Note [PTX matrix cached by source]): the fronts' business, not the
kernels'."""

from __future__ import annotations

import numpy as np

__all__ = ["check_fits"]


def check_fits(values, d) -> None:
    """RuntimeError as torch's where the numbers ``values`` (a Python or numpy number, or a numpy array) cannot be
    held by integer dtype ``d`` (NaN, an infinity, or beyond its range: torch refuses what numpy's cast would wrap
    or make up). Other dtypes take any value (bool anything, the floats rounding or saturating)."""
    if d._category != 1:  # (integers)
        return
    a = np.asarray(values)
    if a.size == 0 or a.dtype.kind not in "fiub":
        return
    info = np.iinfo(d.np)
    if a.dtype.kind == "f":
        bad = not np.isfinite(a).all() or a.min() < info.min or a.max() > info.max
    else:
        bad = a.dtype.kind != "b" and (a.min().item() < info.min or a.max().item() > info.max)
    if bad:
        raise RuntimeError(f"value cannot be converted to type {d.name} without overflow")
