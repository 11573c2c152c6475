"""Tensor repr, formatted like torch's."""

from __future__ import annotations

import numpy as np

from flambeau import _dtype as dt


def tensor_repr(t) -> str:
    arr = t.numpy(force=True)
    body = np.array2string(arr, separator=", ", prefix="tensor(", precision=4)
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    if t.dtype not in (dt.get_default_dtype(), dt.int64, dt.bool):
        extras.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
