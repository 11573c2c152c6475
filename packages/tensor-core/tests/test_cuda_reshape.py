"""numpy's no-copy reshape rule, as the CUDA backend's device arrays use it (numba's own reshape refuses
every non-contiguous array): the strides it computes must be numpy's, and None exactly where numpy
would have to copy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba.cuda")

from flambeau._backends.cuda import nocopy_strides  # noqa: E402


def _numpy_view_strides(a: np.ndarray, shape: tuple):
    v = a.view()
    try:
        v.shape = shape  # numpy's in-place reshape never copies: it raises where a copy is needed
    except AttributeError:
        return None
    return v.strides


def test_strides_are_numpys_and_none_where_numpy_copies():
    rng = np.random.default_rng(0)
    seen = {"view": 0, "copy": 0}
    for _ in range(2000):
        shape = tuple(int(n) for n in rng.integers(1, 5, int(rng.integers(1, 4))))
        steps = tuple(int(s) for s in rng.integers(1, 3, len(shape)))
        base = np.arange(int(np.prod(shape)) * 16, dtype=np.float32)
        strides = tuple(st * s for st, s in zip(steps, np.empty(shape, np.float32).strides))
        a = np.lib.stride_tricks.as_strided(base, shape, strides).transpose(rng.permutation(len(shape)))
        n = a.size
        for new in {(n,), (1, n), (n, 1), a.shape[::-1], (a.shape[0], n // a.shape[0])}:
            got = nocopy_strides(a.shape, a.strides, new, a.itemsize)
            want = _numpy_view_strides(a, new)
            if want is None:
                assert got is None, (a.shape, a.strides, new)
                seen["copy"] += 1
            else:
                assert got is not None, (a.shape, a.strides, new)
                np.testing.assert_array_equal(np.lib.stride_tricks.as_strided(a, new, got), a.reshape(new))
                seen["view"] += 1
    assert seen["view"] > 100 and seen["copy"] > 100  # both branches were exercised


def test_empty_and_one_element_arrays_get_c_strides():
    assert nocopy_strides((0, 3), (12, 4), (3, 0), 4) == (4, 4)
    assert nocopy_strides((1, 1), (40, 8), (1,), 8) == (8,)
