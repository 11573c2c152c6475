"""Property tests (hypothesis) of broadcasting, views and indexing against numpy and torch."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import flambeau as fl  # noqa: E402

torch = pytest.importorskip("torch")

SETTINGS = settings(max_examples=60, deadline=None, database=None, derandomize=True, print_blob=False)
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


def data_for(shape):
    return np.asarray(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1)


def geometry(x):
    return tuple(x.shape), tuple(x.stride()), x.storage_offset()


@st.composite
def basic_keys(draw, shape):
    """A basic-indexing key (ints, positive-step slices, None, one Ellipsis) valid for ``shape``."""
    items = []
    dim = 0
    used_ellipsis = False
    while dim < len(shape) and draw(st.booleans()):
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis"]))
        n = shape[dim]
        if kind == "int" and n > 0:
            items.append(draw(st.integers(-n, n - 1)))
            dim += 1
        elif kind == "slice":
            start = draw(st.none() | st.integers(-n - 2, n + 2))
            stop = draw(st.none() | st.integers(-n - 2, n + 2))
            step = draw(st.none() | st.integers(1, 3))
            items.append(slice(start, stop, step))
            dim += 1
        elif kind == "none":
            items.append(None)
        elif kind == "ellipsis" and not used_ellipsis:
            items.append(Ellipsis)
            used_ellipsis = True
            dim = len(shape)  # the rest is consumed
    return tuple(items)


@SETTINGS
@given(st.data())
def test_basic_indexing_views_match_numpy_and_torch(data):
    shape = data.draw(shapes)
    key = data.draw(basic_keys(shape))
    a = data_for(shape)
    f = fl.tensor(a)
    t = torch.from_numpy(a.copy())
    r = f[key]
    np.testing.assert_array_equal(r.numpy(), a[key])
    tr = t[key]
    assert tuple(r.shape) == tuple(tr.shape)
    if tr.numel():
        assert geometry(r) == geometry(tr)
    assert r._storage is f._storage and r._base is f
    # writes through the view land in the base, and the version counter is shared
    if r.numel():
        r.fill_(-7.0)
        a[key] = -7.0
        np.testing.assert_array_equal(f.numpy(), a)
        assert f._version == r._version == 1


VIEW_OPS = ["permute", "transpose", "unsqueeze", "squeeze", "narrow", "expand", "select", "flatten", "unfold",
            "t", "movedim", "split"]


@st.composite
def view_chain(draw, shape):
    ops = []
    cur = list(shape)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(VIEW_OPS))
        nd = len(cur)
        if op == "permute" and nd:
            perm = draw(st.permutations(range(nd)))
            ops.append((op, (tuple(perm),)))
            cur = [cur[p] for p in perm]
        elif op == "transpose" and nd:
            d0, d1 = draw(st.integers(-nd, nd - 1)), draw(st.integers(-nd, nd - 1))
            ops.append((op, (d0, d1)))
            cur[d0], cur[d1] = cur[d1], cur[d0]
        elif op == "unsqueeze" and nd < 5:
            d = draw(st.integers(-nd - 1, nd))
            ops.append((op, (d,)))
            cur.insert(d % (nd + 1), 1)
        elif op == "squeeze" and nd:
            d = draw(st.integers(-nd, nd - 1))
            ops.append((op, (d,)))
            if cur[d] == 1:
                cur.pop(d)
        elif op == "narrow" and nd:
            d = draw(st.integers(0, nd - 1))
            start = draw(st.integers(0, cur[d]))
            length = draw(st.integers(0, cur[d] - start))
            ops.append((op, (d, start, length)))
            cur[d] = length
        elif op == "expand" and nd:
            new = [draw(st.integers(0, 3)) if n == 1 else n for n in cur]
            lead = draw(st.lists(st.integers(1, 2), max_size=1))
            ops.append((op, (tuple(lead + new),)))
            cur = lead + new
        elif op == "select" and nd and all(cur):
            d = draw(st.integers(0, nd - 1))
            ops.append((op, (d, draw(st.integers(-cur[d], cur[d] - 1)))))
            cur.pop(d)
        elif op == "flatten" and nd:
            s = draw(st.integers(0, nd - 1))
            e = draw(st.integers(s, nd - 1))
            ops.append((op, (s, e)))
            cur = cur[:s] + [int(np.prod(cur[s:e + 1]))] + cur[e + 1:]
        elif op == "unfold" and nd:
            d = draw(st.integers(0, nd - 1))
            size = draw(st.integers(0, cur[d]))
            step = draw(st.integers(1, 3))
            ops.append((op, (d, size, step)))
            cur = cur[:d] + [(cur[d] - size) // step + 1] + cur[d + 1:] + [size]
        elif op == "t" and nd <= 2:
            ops.append((op, ()))
            cur = cur[::-1]
        elif op == "movedim" and nd:
            ops.append((op, (draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1)))))
            s, d = ops[-1][1]
            cur.insert(d, cur.pop(s))
        elif op == "split" and nd and cur[0]:
            ops.append((op, (draw(st.integers(1, cur[0])),)))
            cur[0] = min(ops[-1][1][0], cur[0])
    return ops


def apply(x, ops):
    for name, args in ops:
        x = getattr(x, name)(*args)
        if name == "split":
            x = x[0]
    return x


@SETTINGS
@given(st.data())
def test_view_chains_match_torch(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    ops = data.draw(view_chain(shape))
    a = data_for(shape)
    f = fl.tensor(a)
    t = torch.from_numpy(a.copy())
    r = apply(f, ops)
    tr = apply(t, ops)
    np.testing.assert_array_equal(r.numpy(), tr.numpy())
    if tr.numel():
        assert geometry(r) == geometry(tr)
        assert r.is_contiguous() == tr.is_contiguous()
    assert r._storage is f._storage
    assert r is f or r._base is f


@SETTINGS
@given(st.data())
def test_view_and_reshape_after_permute(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    perm = data.draw(st.permutations(range(len(shape))))
    a = data_for(shape)
    f = fl.tensor(a).permute(perm)
    t = torch.from_numpy(a.copy()).permute(perm)
    n = int(np.prod(shape))
    # a random factorisation of n, possibly with a -1 and size-1 dims
    dims = []
    rest = n
    while rest > 1 and data.draw(st.booleans()):
        divs = [d for d in range(2, rest + 1) if rest % d == 0]
        d = data.draw(st.sampled_from(divs))
        dims.append(d)
        rest //= d
    dims.append(rest)
    dims = data.draw(st.permutations(dims))
    if data.draw(st.booleans()):
        dims = list(dims) + [1]
    if data.draw(st.booleans()):
        dims = list(dims)
        dims[data.draw(st.integers(0, len(dims) - 1))] = -1
    try:
        tv = t.view(dims)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            f.view(dims)
        r = f.reshape(dims)
        assert r._storage is not f._storage
        np.testing.assert_array_equal(r.numpy(), t.reshape(dims).numpy())
        return
    r = f.view(dims)
    np.testing.assert_array_equal(r.numpy(), tv.numpy())
    assert geometry(r) == geometry(tv)
    assert f.reshape(dims)._storage is f._storage


@SETTINGS
@given(hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=4))
def test_broadcasting(shapes_):
    fs = [fl.tensor(data_for(s)) for s in shapes_.input_shapes]
    outs = fl.broadcast_tensors(*fs)
    for o, f, s in zip(outs, fs, shapes_.input_shapes, strict=True):
        assert tuple(o.shape) == shapes_.result_shape
        np.testing.assert_array_equal(o.numpy(), np.broadcast_to(data_for(s), shapes_.result_shape))
        assert o._storage is f._storage
        ref = torch.from_numpy(data_for(s)).expand(shapes_.result_shape)
        assert o.stride() == ref.stride()
        assert tuple(f.expand_as(o).shape) == shapes_.result_shape


@st.composite
def advanced_keys(draw, shape):
    items = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "ints", "bool", "int", "stop"]))
        if kind == "stop":
            break
        if kind == "slice":
            items.append(slice(draw(st.integers(0, n)), None, draw(st.integers(1, 2))))
        elif kind == "int" and n:
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "ints" and n:
            items.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=3)), dtype=np.int64))
        else:
            items.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool))
    return tuple(items)


def to_fl_key(key):
    return tuple(fl.tensor(k) if isinstance(k, np.ndarray) else k for k in key)


@SETTINGS
@given(st.data())
def test_advanced_indexing_matches_numpy(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    key = data.draw(advanced_keys(shape))
    a = data_for(shape)
    f = fl.tensor(a)
    int_arrays = [k for k in key if isinstance(k, np.ndarray)]
    try:
        expected = a[key]
    except IndexError:
        with pytest.raises(IndexError):
            f[to_fl_key(key)]
        return
    r = f[to_fl_key(key)]
    np.testing.assert_array_equal(r.numpy(), expected)
    if int_arrays:
        assert r._storage is not f._storage
    # __setitem__ with the same key and a broadcast value agrees with numpy
    value = np.float32(-1.5) if data.draw(st.booleans()) else \
        (np.arange(expected.shape[-1], dtype=np.float64) if expected.ndim else np.float64(3))
    b = a.copy()
    b[key] = value
    f[to_fl_key(key)] = fl.tensor(value) if isinstance(value, np.ndarray) else float(value)
    np.testing.assert_array_equal(f.numpy(), b)
    assert f._version == 1


@SETTINGS
@given(st.data())
def test_gather_scatter_roundtrip(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = data_for(shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    idx = np.argsort(rng.random(shape), axis=dim)  # a permutation along dim: scatter inverts gather
    f, fi = fl.tensor(a), fl.tensor(idx)
    g = f.gather(dim, fi)
    np.testing.assert_array_equal(g.numpy(), np.take_along_axis(a, idx, dim))
    back = fl.zeros(*shape).scatter_(dim, fi, g)
    np.testing.assert_array_equal(back.numpy(), a)
    added = fl.zeros(*shape).scatter_add_(dim, fi, g)
    np.testing.assert_array_equal(added.numpy(), a)
