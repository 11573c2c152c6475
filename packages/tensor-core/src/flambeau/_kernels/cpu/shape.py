"""CPU kernels of the copying operators of ``flambeau._ops.shape`` (whose docstring gives the calling
conventions): the copy a reshape falls back to, cat and stack, repeats, flips, rolls, rotations,
triangles, padding, one-hot, sort and unique, on numpy.

Views (``view``, ``permute``, ``expand``, ``narrow`` ...) have no kernel: their geometry is front
logic, computed for every device in ``flambeau._ops.shape`` (Note [Device-agnostic views]).
"""

from __future__ import annotations

import numpy as np

from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel


@kernel("reshape", "cpu")
@takes_bfloat16  # moves data: bfloat16 as any dtype
def _cpu_reshape_copy(arr, shape):
    return np.array(arr, order="C").reshape(shape)


@kernel("cat", "cpu")
@takes_bfloat16  # moves data: bfloat16 as any dtype
def _cpu_cat(arrays, dim, np_dtype):
    return np.concatenate(arrays, axis=dim, dtype=np_dtype, casting="unsafe")


@kernel("stack", "cpu")
@takes_bfloat16  # moves data: bfloat16 as any dtype
def _cpu_stack(arrays, dim, np_dtype):
    # np.stack's Python layer costs more than the copy for small inputs
    key = (slice(None),) * dim + (None,)
    return np.concatenate([a[key] for a in arrays], axis=dim, dtype=np_dtype, casting="unsafe")


@kernel("repeat", "cpu")
def _cpu_repeat(arr, repeats):
    return np.tile(arr, repeats)


@kernel("repeat_interleave", "cpu")
def _cpu_repeat_interleave(arr, repeats, dim):
    if dim is None:
        return np.repeat(arr.reshape(-1), repeats)
    return np.repeat(arr, repeats, axis=dim)


@kernel("flip", "cpu")
def _cpu_flip(arr, dims):
    return np.ascontiguousarray(np.flip(arr, dims)) if dims else arr.copy()


@kernel("roll", "cpu")
def _cpu_roll(arr, shifts, dims):
    if not dims:
        return np.roll(arr.reshape(-1), shifts[0]).reshape(arr.shape)
    return np.roll(arr, shifts, dims)


@kernel("rot90", "cpu")
def _cpu_rot90(arr, k, dims):
    return np.ascontiguousarray(np.rot90(arr, k, dims))


@kernel("tril", "cpu")
def _cpu_tril(arr, diagonal):
    return np.tril(arr, diagonal)


@kernel("triu", "cpu")
def _cpu_triu(arr, diagonal):
    return np.triu(arr, diagonal)


_NP_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@kernel("pad", "cpu")
def _cpu_pad(arr, pairs, mode, value):
    # Negative padding crops: crop first, then pad with the positive parts.
    crop = tuple(slice(max(-a, 0), n - max(-b, 0)) for (a, b), n in zip(pairs, arr.shape))
    arr = arr[crop]
    pos = tuple((max(a, 0), max(b, 0)) for a, b in pairs)
    if mode == "constant":
        return np.pad(arr, pos, mode="constant", constant_values=value)
    return np.pad(arr, pos, mode=_NP_PAD_MODES[mode])


@kernel("one_hot", "cpu")
def _cpu_one_hot(arr, num_classes):
    out = np.zeros(arr.shape + (num_classes,), np.int64)
    np.put_along_axis(out, arr[..., None], 1, axis=-1)
    return out


@kernel("sort", "cpu")
def _cpu_sort(arr, dim, descending, stable):
    # numpy's stable sort puts NaN last, like torch's ascending order; descending sorts the reversed
    # array ascending and reverses back, which keeps equal elements in their original order.
    if descending:
        n = arr.shape[dim]
        idx = np.flip(np.argsort(np.flip(arr, dim), axis=dim, kind="stable"), dim)
        idx = (n - 1) - idx
    else:
        idx = np.argsort(arr, axis=dim, kind="stable")
    return np.take_along_axis(arr, idx, dim), np.ascontiguousarray(idx, dtype=np.int64)


@kernel("unique", "cpu")
def _cpu_unique(arr, sorted, return_inverse, return_counts, dim):
    if dim is None:
        flat = arr.reshape(-1)
        # equal_nan=False: every NaN is its own value, as in torch
        values, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True, equal_nan=False)
        inverse = inverse.reshape(arr.shape)
    else:
        values, inverse, counts = np.unique(arr, return_inverse=True, return_counts=True, axis=dim)
        inverse = inverse.reshape(-1)
    return values, inverse.astype(np.int64, copy=False), counts.astype(np.int64, copy=False)


@kernel("unique_consecutive", "cpu")
def _cpu_unique_consecutive(arr, return_inverse, return_counts, dim):
    if dim is None:
        flat = arr.reshape(-1)
        if flat.size == 0:
            return flat.copy(), np.zeros(arr.shape, np.int64), np.zeros(0, np.int64)
        change = np.empty(flat.size, bool)
        change[0] = True
        np.not_equal(flat[1:], flat[:-1], out=change[1:])
        inv_shape = arr.shape
        values_of = flat
    else:
        moved = np.moveaxis(arr, dim, 0)
        n = moved.shape[0]
        if n == 0:
            return arr.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64)
        change = np.empty(n, bool)
        change[0] = True
        rest = moved.reshape(n, -1)
        np.any(rest[1:] != rest[:-1], axis=1, out=change[1:])
        inv_shape = (n,)
        values_of = None
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, change.size)).astype(np.int64)
    inverse = (np.cumsum(change) - 1).astype(np.int64).reshape(inv_shape)
    values = values_of[starts] if values_of is not None else np.take(arr, starts, axis=dim)
    return values, inverse, counts
