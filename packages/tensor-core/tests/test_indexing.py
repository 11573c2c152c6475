"""Tests of flambeau/_ops/indexing.py: __getitem__/__setitem__, gather/scatter, index_*, masked_*, take/put."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")


def arr(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 5
    return a.astype(dtype) if dtype is not np.bool_ else a > 0


def pair(a):
    return fl.tensor(a), torch.from_numpy(np.array(a))


def same(f, t):
    np.testing.assert_array_equal(np.asarray(f.numpy()), t.numpy())
    assert tuple(f.shape) == tuple(t.shape)
    assert str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


def conv_key(key, to_torch):
    """The same key for torch (tensors converted) as for flambeau."""
    if isinstance(key, tuple):
        return tuple(conv_key(k, to_torch) for k in key)
    if isinstance(key, fl.Tensor) and to_torch:
        return torch.from_numpy(np.array(key.numpy()))
    return key


BASIC_KEYS = [0, -1, 2, slice(None), slice(1, 3), slice(None, None, 2), slice(-3, None, 3), slice(5, 1),
              (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 1), (1, None, slice(0, 2)), (Ellipsis, None),
              (slice(1, None), Ellipsis, slice(None, 2)), Ellipsis, None, (0, 0, 0), (slice(100, 200),),
              (slice(None), slice(None), -1)]


def I(*v):  # noqa: E743 - an int64 index tensor
    return fl.tensor(list(v), dtype=fl.int64)


ADV_KEYS = [[0, 2], (I(0, 2),), (slice(None), I(1, 0, 1)), (I(0, 1), I(2, 0)), (I(0, 1), slice(None), I(2, 0)),
            (Ellipsis, I(3, -1)), (I(-1, 0)[:, None], I(0, 2)), (slice(1, 3), [0, 0, 1]),
            (0, I(1, 2)), (None, I(0), 1), ([True, False, True],), (slice(None), [[0], [1]], 0),
            (fl.tensor(1),), (fl.tensor([[True, False, True, True], [False] * 4, [True] * 4]),)]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=repr)
@pytest.mark.parametrize("contig", [True, False])
def test_getitem_basic_is_view(key, contig):
    a = arr((3, 4, 5))
    f, t = pair(a)
    if not contig:
        f, t = f.transpose(0, 1).transpose(0, 1)[:, ::1], t.transpose(0, 1).transpose(0, 1)[:, ::1]
        f, t = f.permute(0, 2, 1).permute(0, 2, 1), t.permute(0, 2, 1).permute(0, 2, 1)
    r, tr = f[key], t[key]
    same(r, tr)
    assert r._storage is f._storage
    assert r._base is (f if f._base is None else f._base)
    assert r.stride() == tr.stride()
    if tr.numel():
        assert r.storage_offset() == tr.storage_offset()
        assert r.data_ptr() == f.data_ptr() + tr.storage_offset() * 4 - t.storage_offset() * 4


def test_getitem_views_share_writes():
    f = fl.zeros(3, 4)
    v = f[1:, ::2]
    v[0, 1] = 7.0
    assert f[1, 2].item() == 7.0
    assert f._version == v._version == 1
    w = f.t()[2]
    assert w[1].item() == 7.0
    assert not f[:, 1].is_contiguous() and f[1].is_contiguous()


@pytest.mark.parametrize("key", ADV_KEYS, ids=repr)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_getitem_advanced_is_copy(key, dtype):
    a = arr((3, 4, 5), dtype)
    f, t = pair(a)
    r, tr = f[key], t[conv_key(key, True)]
    same(r, tr)
    assert r._storage is not f._storage and r._base is None
    fn, tn = f.transpose(0, 2).transpose(0, 2), t.transpose(0, 2).transpose(0, 2)
    same(fn[key], tn[conv_key(key, True)])


def test_getitem_0d_and_empty():
    f, t = pair(np.float32(3.5))
    same(f[...], t[...])
    same(f[None], t[None])
    same(f[()], t[()])
    f, t = pair(np.zeros((0, 3), np.float32))
    same(f[:, 1], t[:, 1])
    same(f[fl.tensor([], dtype=fl.int64)], t[torch.tensor([], dtype=torch.int64)])


def test_getitem_errors():
    f = fl.zeros(3, 4)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        f[5]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with size 3"):
        f[-4]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 4"):
        f[:, [5]]  # torch says 'dimension 0' here (the position among the index tensors)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        f[::-1]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        f[:, ::0]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        f[1, 2, 3]
    with pytest.raises(IndexError, match=r"The shape of the mask \[2\] at index 0 does not match"):
        f[fl.tensor([True, False])]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        f[fl.tensor([1.0])]
    with pytest.raises(IndexError, match="shape mismatch"):
        f[I(0, 1), I(0, 1, 2)]


@pytest.mark.parametrize("key", BASIC_KEYS + ADV_KEYS, ids=repr)
@pytest.mark.parametrize("value", ["scalar", "tensor", "float_into_int", "broadcast"])
def test_setitem(key, value):
    a = arr((3, 4, 5), np.int64 if value == "float_into_int" else np.float32)
    f, t = pair(a)
    shape = tuple(t[conv_key(key, True)].shape)
    if value == "scalar":
        v = 2.5
        fv, tv = v, v
    elif value == "tensor":
        fv, tv = pair(arr(shape, seed=3))
    elif value == "float_into_int":
        fv, tv = pair(arr(shape, seed=3))
        items = key if isinstance(key, tuple) else ()
        if isinstance(key, list) or any(isinstance(k, (list, fl.Tensor)) for k in items):
            tv = tv.to(torch.int64)  # torch's index_put refuses other dtypes; flambeau casts as numpy does
    else:
        fv, tv = pair(arr(shape[-1:] if shape else (), seed=4))
    version = f._version
    f[key] = fv
    t[conv_key(key, True)] = tv
    same(f, t)
    assert f._version == version + 1


def test_setitem_through_views_and_overlap():
    f, t = pair(np.arange(10, dtype=np.float32))
    f[1:] = f[:-1]
    t[1:] = t[:-1].clone()
    same(f, t)
    g = fl.zeros(2, 3)
    v = g.t()
    v[1] = fl.tensor([1, 2], dtype=fl.int32)
    np.testing.assert_array_equal(g.numpy(), [[0, 1, 0], [0, 2, 0]])
    assert v._version == g._version == 1


def test_setitem_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(3\) must match the existing size \(2\)"):
        f[0] = fl.ones(2)
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[2, 2\] cannot be broadcast to "
                                           r"indexing result of shape \[2, 3\]"):
        f[[0, 1]] = fl.ones(2, 2)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 2"):
        f[3] = 1.0
    with pytest.raises(ValueError, match="step must be greater than zero"):
        f[::-1] = 1.0


def test_index_put():
    f, t = pair(np.zeros((4, 3), np.float32))
    idx, tidx = pair(np.array([0, 2, 0, 3]))
    vals, tvals = pair(np.arange(12, dtype=np.float32).reshape(4, 3))
    for acc in [False, True]:
        same(f.index_put((idx,), vals, accumulate=acc), t.index_put((tidx,), tvals, accumulate=acc))
    same(fl.index_put(f, (idx, fl.tensor([0, 2, 0, 0])), fl.tensor(1.5), True),
         torch.index_put(t, (tidx, torch.tensor([0, 2, 0, 0])), torch.tensor(1.5), True))
    g, u = f.clone(), t.clone()
    g.index_put_((None, fl.tensor([1, 1, 2])), fl.tensor([1.0, 2.0, 3.0]), accumulate=True)
    u.index_put_((torch.tensor([0, 1, 2, 3])[:, None], torch.tensor([1, 1, 2])), torch.tensor([1.0, 2.0, 3.0]),
                 accumulate=True)
    same(g, u)
    g, u = f.clone(), t.clone()
    m = np.array([True, False, True, True])
    g.index_put_((fl.tensor(m),), fl.tensor(4.0), accumulate=True)
    u.index_put_((torch.from_numpy(m),), torch.tensor(4.0), accumulate=True)
    same(g, u)
    with pytest.raises(IndexError, match="out of bounds"):
        f.index_put_((fl.tensor([7]),), fl.tensor(1.0), accumulate=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.float16, np.uint8])
def test_index_put_accumulate_duplicates(dtype):
    rng = np.random.default_rng(0)
    base = (rng.standard_normal((50, 4)) * 3).astype(dtype)
    i0, i1 = rng.integers(-50, 50, 300), rng.integers(0, 4, 300)
    vals = (rng.standard_normal(300) * 3).astype(dtype)
    f, t = pair(base)
    f.index_put_((fl.tensor(i0), fl.tensor(i1)), fl.tensor(vals), accumulate=True)
    t.index_put_((torch.from_numpy(i0), torch.from_numpy(i1)), torch.from_numpy(vals), accumulate=True)
    np.testing.assert_allclose(f.numpy().astype(np.float64), t.numpy().astype(np.float64),
                               rtol=1e-2 if dtype is np.float16 else 1e-5, atol=1e-2 if dtype is np.float16 else 1e-4)
    fn, tn = pair(base)
    fn, tn = fn.t(), tn.t()
    fn.index_put_((fl.tensor(i1),), fl.tensor(vals[:50]), accumulate=True)
    tn.index_put_((torch.from_numpy(i1),), torch.from_numpy(vals[:50]), accumulate=True)
    np.testing.assert_allclose(fn.numpy().astype(np.float64), tn.numpy().astype(np.float64),
                               rtol=1e-2 if dtype is np.float16 else 1e-5, atol=1e-2 if dtype is np.float16 else 1e-4)


# --- nonzero / masked --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (), (0, 3)])
def test_nonzero_argwhere(shape):
    f, t = pair(arr(shape) > 1)
    same(f.nonzero(), t.nonzero())
    same(fl.argwhere(f), torch.argwhere(t))
    for x, y in zip(fl.nonzero(f, as_tuple=True), torch.nonzero(t, as_tuple=True), strict=True):
        same(x, y)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_masked_fill_select_scatter(dtype):
    f, t = pair(arr((3, 4), dtype))
    fm, tm = pair(arr((4,), seed=2) > 0)
    same(f.masked_fill(fm, 1), t.masked_fill(tm, 1))
    same(fl.masked_fill(f.t(), fm[:3], fl.tensor(0)), torch.masked_fill(t.t(), tm[:3], torch.tensor(0)))
    same(f.masked_select(fm), t.masked_select(tm))
    same(fl.masked_select(f.t(), fm[:, None]), torch.masked_select(t.t(), tm[:, None]))
    src, tsrc = pair(arr((12,), dtype, seed=5))
    same(f.masked_scatter(fm, src), t.masked_scatter(tm, tsrc))
    g, u = f.clone(), t.clone()
    v = g._version
    g.masked_fill_(fm, 0)
    u.masked_fill_(tm, 0)
    same(g, u)
    assert g._version == v + 1
    g.masked_scatter_(fm, src)
    u.masked_scatter_(tm, tsrc)
    same(g, u)


def test_masked_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks, but got mask with dtype"):
        f.masked_fill(fl.ones(2, 3), 1)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        f.masked_fill(fl.ones(2, 3) > 0, fl.ones(2))
    with pytest.raises(RuntimeError, match="must match the size"):
        fl.zeros(3).masked_fill(fl.ones(2, 3) > 0, 1.0) if False else fl.zeros(3).masked_fill_(fl.ones(2, 3) > 0, 1.0)
    with pytest.raises(RuntimeError, match="at least as many elements"):
        f.masked_scatter(fl.ones(2, 3) > 0, fl.zeros(2))


# --- gather / scatter ------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.bool_])
def test_gather_scatter(dim, dtype):
    rng = np.random.default_rng(0)
    a = arr((4, 5, 3), dtype)
    f, t = pair(a)
    ishape = (3, 4, 2)
    index = rng.integers(0, a.shape[dim], ishape)
    fi, ti = pair(index)
    same(f.gather(dim, fi), t.gather(dim, ti))
    same(fl.gather(f.transpose(0, 2).transpose(0, 2), dim, fi.transpose(0, 2).transpose(0, 2)),
         torch.gather(t, dim, ti))
    src, tsrc = pair(arr((3, 5, 2), dtype, seed=2))
    same(f.scatter(dim, fi, src), t.scatter(dim, ti, tsrc)) if dim != 1 else None
    uniq = np.stack(np.meshgrid(*[np.arange(n) for n in ishape], indexing="ij"))[0]  # unique positions along dim 0
    fu, tu = pair(np.broadcast_to(uniq, ishape).copy() % a.shape[0])
    if dim == 0:
        same(f.scatter(0, fu, src), t.scatter(0, tu, tsrc))
    same(f.scatter(dim, fi, 1), t.scatter(dim, ti, 1))
    same(f.scatter(dim, fi, value=0), t.scatter(dim, ti, value=0))
    if dtype not in (np.bool_,):
        same(f.scatter_add(dim, fi, src), t.scatter_add(dim, ti, tsrc)) if dtype != np.float16 else \
            np.testing.assert_allclose(f.scatter_add(dim, fi, src).numpy(), t.scatter_add(dim, ti, tsrc).numpy(),
                                       rtol=1e-2)
        g, u = f.t() if f.ndim == 2 else f.transpose(0, 2).transpose(0, 2), t
        g = g.clone().transpose(1, 2).contiguous().transpose(1, 2)  # non-contiguous destination
        v = g._version
        g.scatter_add_(dim, fi, src)
        u = u.clone().scatter_add_(dim, ti, tsrc)
        np.testing.assert_allclose(g.numpy().astype(np.float64), u.numpy().astype(np.float64), rtol=1e-2)
        assert g._version == v + 1
        for red in ["add", "multiply"]:
            np.testing.assert_allclose(f.scatter(dim, fi, src, reduce=red).numpy().astype(np.float64),
                                       t.scatter(dim, ti, tsrc, reduce=red).numpy().astype(np.float64), rtol=1e-2)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_scatter_reduce(reduce, include_self, dtype):
    rng = np.random.default_rng(1)
    f, t = pair((arr((5, 3), np.float32) * 2).astype(dtype))
    fi, ti = pair(rng.integers(0, 5, (6, 3)))
    src, tsrc = pair((arr((6, 3), np.float32, seed=3)).astype(dtype))
    np.testing.assert_allclose(f.scatter_reduce(0, fi, src, reduce, include_self=include_self).numpy(),
                               t.scatter_reduce(0, ti, tsrc, reduce, include_self=include_self).numpy(), rtol=1e-5)


def test_gather_scatter_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1 with size 3"):
        f.gather(1, I(5)[None])
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 3"):
        f.scatter_(1, I(-1)[None], 1.0)
    with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index"):
        f.gather(1, fl.zeros(1, 1))
    for small in (fl.uint8, fl.int8, fl.int16):  # (torch refuses them too; they were taken)
        with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index"):
            f.gather(1, fl.zeros(2, 1, dtype=small))
        with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index"):
            fl.take(f, fl.zeros(2, dtype=small))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        f.gather(1, I(0))
    with pytest.raises(RuntimeError, match="Size does not match at dimension 0"):
        f.gather(1, I(0, 0, 0)[:, None])


# --- index_select / add / copy / fill --------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.bool_])
def test_index_family(dim, dtype):
    f, t = pair(arr((4, 5, 3), dtype))
    n = t.shape[dim]
    idx = np.array([n - 1, 0, 1, 0])
    fi, ti = pair(idx)
    same(f.index_select(dim, fi), t.index_select(dim, ti))
    m = t.transpose(0, 1).shape[dim]
    same(fl.index_select(f.transpose(0, 1), dim, fi % m if hasattr(fi, "__mod__") else fl.tensor(idx % m)),
         torch.index_select(t.transpose(0, 1), dim, ti % m))
    same(f.index_select(dim, fl.tensor(1)), t.index_select(dim, torch.tensor(1)))
    sshape = list(t.shape)
    sshape[dim] = 4
    src, tsrc = pair(arr(tuple(sshape), dtype, seed=7))
    uniq, tuniq = pair(np.array([n - 1, 0, 1, 2]))
    same(f.index_copy(dim, uniq, src), t.index_copy(dim, tuniq, tsrc))
    same(f.index_fill(dim, fi, 1), t.index_fill(dim, ti, 1))
    if dtype is not np.bool_:
        for alpha in [1, 2]:
            np.testing.assert_allclose(f.index_add(dim, fi, src, alpha=alpha).numpy().astype(np.float64),
                                       t.index_add(dim, ti, tsrc, alpha=alpha).numpy().astype(np.float64), rtol=1e-2)
        g, u = f.transpose(0, 1).clone().transpose(0, 1), t.clone()  # non-contiguous destination
        v = g._version
        g.index_add_(dim, fi, src)
        u.index_add_(dim, ti, tsrc)
        np.testing.assert_allclose(g.numpy().astype(np.float64), u.numpy().astype(np.float64), rtol=1e-2)
        assert g._version == v + 1


def test_index_family_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        f.index_select(1, I(3))
    with pytest.raises(IndexError, match="out of bounds"):
        f.index_select(1, I(-1))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        f.index_select(1, I(0, 1)[None])
    with pytest.raises(RuntimeError, match="must have same slice shapes"):
        f.index_add(0, I(0), fl.zeros(1, 2))
    with pytest.raises(RuntimeError, match="same scalar type"):
        f.index_copy(0, I(0), fl.zeros(1, 3, dtype=fl.int64))


# --- take / put ------------------------------------------------------------------------------------
def test_take_put():
    f, t = pair(arr((3, 4)))
    fi, ti = pair(np.array([[0, -1], [11, 5]]))
    same(f.take(fi), t.take(ti))
    same(fl.take(f.t(), fi), torch.take(t.t(), ti))
    src, tsrc = pair(arr((2, 2), seed=3))
    same(f.put(fi, src), t.put(ti, tsrc))
    dup, tdup = pair(np.array([1, 1, 2, -1]))
    s4, ts4 = pair(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    same(f.put(dup, s4, accumulate=True), t.put(tdup, ts4, accumulate=True))
    g, u = f.t().clone().t(), t.clone()
    g.put_(dup, s4, accumulate=True)
    u.put_(tdup, ts4, accumulate=True)
    same(g, u)
    with pytest.raises(IndexError, match="out of range: tried to access index 12 on a tensor of 12 elements"):
        f.take(I(12))


def test_recording_hooks():
    """getitem/setitem hand the autograd engine normalised keys (lists become tensors)."""
    from flambeau import _grad_mode

    seen = []

    class Engine:
        def record(self, op, inputs, attrs, outputs):
            seen.append((op.name, inputs, attrs))

        def apply_inplace(self, op, inputs, attrs):  # in-place ops on tensors requiring grad go through here
            seen.append((op.name, inputs, {"inplace": True, **attrs}))
            return inputs[0]

    old = _grad_mode._engine[0]
    _grad_mode.install_engine(Engine())
    try:
        x = fl.zeros(3, 4).requires_grad_()
        x[1]
        x[[0, 2], 1:]
        with fl.no_grad():
            x[0]
        y = fl.zeros(3, 4)
        y[[0, 1]] = fl.zeros(4).requires_grad_()
    finally:
        _grad_mode._engine[0] = old
    names = [s[0] for s in seen]
    assert names == ["index", "index", "index_put"]
    key = seen[1][1][1]
    assert isinstance(key[0], fl.Tensor) and key[0].dtype is fl.int64 and key[1] == slice(1, None)
    assert seen[2][2] == {"inplace": True, "accumulate": False}


def test_cuda_index_on_cpu_tensor_raises():
    class FakeCuda:
        type = "cuda"

    f = fl.zeros(3)
    idx = I(0)
    idx._device = fl.device("cuda") if _cuda_device_constructible() else FakeCuda()
    with pytest.raises(RuntimeError, match="indices should be either on cpu or on the same device"):
        f[idx]


def _cuda_device_constructible():
    try:
        fl.device("cuda")
        return True
    except Exception:
        return False


@pytest.mark.parametrize("dim", [0, 1])
def test_large_inputs_use_parallel_kernels(dim):
    """Inputs above the parallel threshold (Note [Parallel index kernels]) agree with torch too."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 400)).astype(np.float32)
    f, t = pair(a)
    index = rng.integers(0, a.shape[dim], (300, 400))
    fi, ti = pair(index)
    same(f.gather(dim, fi), t.gather(dim, ti))
    uniq = np.argsort(rng.random((300, 400)), axis=dim)[:300, :300] if dim == 0 else \
        np.argsort(rng.random((300, 400)), axis=1)
    fu, tu = pair(uniq)
    src, tsrc = pair(rng.standard_normal(uniq.shape).astype(np.float32))
    same(fl.zeros(300, 400).scatter_(dim, fu, src), torch.zeros(300, 400).scatter_(dim, tu, tsrc))
    np.testing.assert_allclose(fl.zeros(300, 400).scatter_add_(dim, fi, f).numpy(),
                               torch.zeros(300, 400).scatter_add_(dim, ti, t).numpy(), rtol=1e-5, atol=1e-5)
    same(fl.zeros(300, 400).scatter_(dim, fi, 2.0), torch.zeros(300, 400).scatter_(dim, ti, 2.0))
    sel = rng.integers(0, a.shape[dim], 200)
    fs, ts = pair(sel)
    same(f.index_select(dim, fs), t.index_select(dim, ts))
    same(f.reshape(-1).index_select(0, fl.tensor(index.reshape(-1))), t.reshape(-1).index_select(0, ti.reshape(-1)))
    shape = list(a.shape)
    shape[dim] = 200
    s2, ts2 = pair(rng.standard_normal(shape).astype(np.float32))
    np.testing.assert_allclose(f.index_add(dim, fs, s2, alpha=3).numpy(), t.index_add(dim, ts, ts2, alpha=3).numpy(),
                               rtol=1e-5, atol=1e-4)
    bad = index.copy()
    bad[-1, -1] = 1000
    with pytest.raises(RuntimeError, match=f"index 1000 is out of bounds for dimension {dim}"):
        f.gather(dim, fl.tensor(bad))
    with pytest.raises(RuntimeError, match=f"index 1000 is out of bounds for dimension {dim}"):
        fl.zeros(300, 400).scatter_add_(dim, fl.tensor(bad), f)
    with pytest.raises(IndexError, match="index 120000 is out of bounds for dimension 0 with size 120000"):
        f.reshape(-1).index_select(0, fl.tensor(np.append(index.reshape(-1), a.size)))


# --- None and ... with everything else, forward and gradient ------------------------------------------
def _mask(*rows):
    return fl.tensor(rows[0] if len(rows) == 1 else rows, dtype=fl.bool)


NEW_AXIS_KEYS = [
    (None, Ellipsis, slice(1, None)), (Ellipsis, None), (None, Ellipsis, None, 0), (None, None),
    (Ellipsis, None, None), (None, 1, Ellipsis), (1, None, Ellipsis, None), (slice(None), None, Ellipsis, -1),
    (None, [0, 1], Ellipsis, None), (Ellipsis, None, [2, 0]), ([1, 0], None, [0, 3]),
    (None, I(1, 0), Ellipsis, I(3, 3)), (I(0, 1), Ellipsis, None, slice(None, None, 2)),
    (None, [True, False, True], Ellipsis), (Ellipsis, [True, False, True, True], None),
    (None, _mask([True, False, True, True], [False] * 4, [True] * 4), None),
    (_mask([True, False, True]), None, 0), (None, 2, None, [1, 1, 0]), (Ellipsis, None, 1, None, [0, 2]),
    (None, slice(0, 2), None, [3, 0], None), ([[0], [2]], None, [1, 3]),
]
# ints, ``...`` and index arrays in 3-d: torch applies ints first (Note [Advanced indexing order])
MIXED_KEYS_3D = [
    (1, slice(None), [0, 2]), (slice(None), 1, [0, 2]), ([0, 1], slice(None), 1), (0, None, [0, 1]),
    (Ellipsis, 1, [0, 3]), ([1, 0], Ellipsis, [3, 3]), (I(1), Ellipsis, I(2, 0)), (-1, [2, 0], None, [1, 1]),
    (slice(1, None), [True, False, True], Ellipsis), (None, 0, Ellipsis, [1, 0], None),
    (fl.tensor(1), slice(None), [0, 2]), ([0, 1], fl.tensor(2), [0, 2]), (fl.tensor(0), slice(1, None)),
]


def _is_basic(key):
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in key)


GRAD_KEYS = [((3, 4), k) for k in NEW_AXIS_KEYS] + [((2, 3, 4), k) for k in MIXED_KEYS_3D]


@pytest.mark.parametrize("shape,key", GRAD_KEYS, ids=repr)
def test_getitem_with_new_axes_forward_and_gradient_match_torch(shape, key):
    pytest.importorskip("flambeau.autograd")
    a = arr(shape, np.float64)
    f, t = pair(a)
    same(f[key], t[conv_key(key, True)])  # without autograd too
    x = fl.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    y, ty = x[key], tx[conv_key(key, True)]
    same(y.detach(), ty.detach())
    if _is_basic(key):
        assert y.stride() == ty.stride() and f[key].stride() == ty.stride()
        assert y._base is x
    w = arr(tuple(ty.shape), np.float64, seed=1)  # a gradient that tells positions apart
    (y * fl.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("shape,key", GRAD_KEYS, ids=repr)
def test_setitem_with_new_axes_forward_and_gradient_match_torch(shape, key):
    pytest.importorskip("flambeau.autograd")
    a = arr(shape, np.float64)
    x = fl.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    vshape = tuple(torch.tensor(a)[conv_key(key, True)].shape)
    v = fl.tensor(arr(vshape, np.float64, seed=2), requires_grad=True)
    tv = torch.tensor(v.detach().numpy(), requires_grad=True)
    f, t = pair(a)
    f[key] = v.detach()
    t[conv_key(key, True)] = tv.detach()
    same(f, t)  # without autograd too
    y, ty = x * 1, tx * 1
    y[key] = v
    ty[conv_key(key, True)] = tv
    same(y.detach(), ty.detach())
    w = arr(shape, np.float64, seed=3)
    (y * fl.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy())


@pytest.mark.parametrize("key", [k for k in MIXED_KEYS_3D if None not in k], ids=repr)
def test_index_put_accumulate_with_ints_and_arrays_matches_torch(key):
    a = arr((2, 3, 4), np.float64)
    f, t = pair(a)
    tkey = conv_key(key, True)
    v = arr(tuple(t[tkey].shape), np.float64, seed=4)
    f.index_put_(key, fl.tensor(v), accumulate=True)
    t[tkey] += torch.tensor(v)  # no position repeats in these keys: += is index_put with accumulate
    same(f, t)


def test_indexing_a_0_dim_tensor_points_to_item_like_torch():
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError) as theirs:
        torch.tensor(1.0)[0]
    with pytest.raises(IndexError) as ours:
        fl.tensor(1.0)[0]
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("target, key, value", [
    ((3,), 0, (1,)), ((3,), slice(1, None), (1, 1, 2)), ((2, 3), 1, (1, 1, 3)), ((4,), [0, 3], (1, 2)),
    ((2, 3), (slice(None), 0), (1, 2)), ((3,), 2, (1, 1)),
])
def test_setitem_drops_the_values_leading_dims_of_one(target, key, value):
    # torch's setitem drops them before broadcasting: ``t[0] = v`` of a (1,) ``v`` (it raised "setting an array
    # element with a sequence"); the gradient of such a value keeps its shape
    values = np.arange(1.0, 1.0 + np.prod(value)).reshape(value)
    weights = np.arange(float(np.prod(target))).reshape(target)
    grads = []
    for lib in (fl, torch):
        t = lib.zeros(target, dtype=lib.float64, requires_grad=True).clone()
        v = lib.tensor(values, requires_grad=True)
        t[key] = v * 2
        (t * lib.tensor(weights)).sum().backward()
        grads.append((t.detach().numpy(), v.grad.numpy()))
        plain = lib.zeros(target, dtype=lib.float64)
        plain[key] = lib.tensor(values)
        np.testing.assert_array_equal(plain.numpy(), t.detach().numpy() / 2)
    (got_t, got_g), (want_t, want_g) = grads
    np.testing.assert_array_equal(got_t, want_t)
    np.testing.assert_array_equal(got_g, want_g)
    assert got_g.shape == value
    with pytest.raises((RuntimeError, ValueError)):
        fl.zeros(3)[0] = fl.tensor([5.0, 6.0])  # (two values for one element: still refused)
