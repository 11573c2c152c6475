"""``Tensor.share_memory_()`` / ``is_shared()``, storages in shared memory and the reducers, in one process.

Tests ``flambeau/_sharing.py`` and ``flambeau/multiprocessing/reductions.py``; processes are in
test_multiprocessing.py.
"""

from __future__ import annotations

import importlib
import multiprocessing
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import flambeau as fl
import flambeau.multiprocessing as mp
from flambeau import _sharing

STRATEGIES = ["file_descriptor", "file_system"]
ALL_DTYPES = [fl.bool, fl.uint8, fl.int8, fl.int16, fl.int32, fl.int64, fl.float16, fl.float32, fl.float64]


def geometry(t):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.tolist())


def in_segment(t) -> bool:
    seg = t._storage._shared
    return seg is not None and 0 <= t.data_ptr() - seg.base < max(seg.nbytes, 1)


# --- share_memory_ ------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("numel", [24, 24 * 1024])  # an arena's storage, a storage of its own
def test_share_memory_moves_in_place_and_views_follow(strategy, numel):
    mp.set_sharing_strategy(strategy)
    a = fl.arange(numel, dtype=fl.float32).reshape(4, -1)
    v = a[1:, ::2]  # offset, non-contiguous
    t = v.t()  # transposed view
    s = a[2]  # 1-d row
    before = [geometry(x) for x in (a, v, t, s)]
    assert not a.is_shared() and not v.is_shared()
    assert a.share_memory_() is a
    assert all(x.is_shared() for x in (a, v, t, s))
    assert [geometry(x) for x in (a, v, t, s)] == before
    assert all(in_segment(x) for x in (a, v, t, s))
    assert a._storage.is_shared() and a.untyped_storage() is v.untyped_storage()
    v.fill_(-1.0)  # writes through a view land in the shared memory every view sees
    expected = np.arange(numel, dtype=np.float32).reshape(4, -1)
    expected[1:, ::2] = -1
    np.testing.assert_array_equal(a.numpy(), expected)
    np.testing.assert_array_equal(t.numpy(), expected[1:, ::2].T)
    np.testing.assert_array_equal(s.numpy(), expected[2])
    seg = a._storage._shared
    assert seg.strategy == strategy
    if strategy == "file_system":
        assert seg.name in _sharing.shm_names()
    else:
        assert seg.name is None


def test_share_memory_is_idempotent():
    a = fl.ones(3).share_memory_()
    seg, data = a._storage._shared, a._data
    a.share_memory_()
    a._storage.share_memory_()
    assert a._storage._shared is seg and a._data is data


def test_small_storages_share_an_arena_large_ones_do_not():
    a, b = fl.ones(10).share_memory_(), fl.zeros(10).share_memory_()
    assert a._storage._shared is b._storage._shared  # Note [Arenas]
    assert a._storage is not b._storage
    a.add_(1)
    assert b.tolist() == [0.0] * 10
    big = fl.ones(_sharing.SMALL_BYTES // 4 + 1).share_memory_()
    assert big._storage._shared is not a._storage._shared
    assert big._storage._shared.nbytes == big.nbytes


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_share_memory_every_dtype(dtype):
    src = np.arange(-3, 9).reshape(3, 4) % 5
    t = fl.tensor(src.astype(dtype.np))[:, 1:]
    before = geometry(t)
    t.share_memory_()
    assert geometry(t) == before and t.is_shared() and in_segment(t)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("shape", [(2, 3), (0,), (), (129, 128)])
def test_empty_shared_makes_tensors_in_shared_memory(strategy, shape):
    t = _sharing.empty_shared(shape, fl.float32, strategy)
    assert t.shape == shape and t.dtype is fl.float32 and t.is_contiguous()
    assert t.is_shared() and t._storage._shared.strategy == strategy
    t.fill_(2.0)
    r = roundtrip(t)
    assert r._storage is t._storage and (r.numpy() == 2.0).all()


def test_share_memory_empty_and_zero_dim():
    e = fl.empty(0, 3).share_memory_()
    z = fl.tensor(2.5).share_memory_()
    assert e.is_shared() and e.shape == (0, 3)
    assert z.is_shared() and z.item() == 2.5 and z.ndim == 0


def test_share_memory_from_numpy_and_storage_api():
    arr = np.arange(6.0)
    t = fl.from_numpy(arr)
    st = t.untyped_storage()
    assert not st.is_shared()
    assert st.share_memory_() is st and st.is_shared() and t.is_shared()
    t.add_(1)
    # the tensor moved to shared memory: the numpy array it came from keeps the old memory
    assert arr.tolist() == [0, 1, 2, 3, 4, 5] and t.tolist() == [1, 2, 3, 4, 5, 6]


def test_share_memory_keeps_autograd_state():
    w = fl.randn(3, requires_grad=True)
    w.share_memory_()
    assert w.requires_grad and w.is_leaf
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.detach().numpy())


# --- strategies -----------------------------------------------------------------------------------------
def test_sharing_strategies_api():
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    assert mp.get_sharing_strategy() == "file_descriptor"
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    with pytest.raises(ValueError, match=r"strategy must be one of \['file_descriptor', 'file_system'\], got 'x'"):
        mp.set_sharing_strategy("x")
    assert mp.get_sharing_strategy() == "file_system"


# --- reducers (sender and receiver in one process) ----------------------------------------------------
def roundtrip(obj):
    return ForkingPickler.loads(ForkingPickler.dumps(obj))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_forking_pickler_shares_and_caches(strategy):
    mp.set_sharing_strategy(strategy)
    a = fl.arange(12.0).reshape(3, 4)
    b = roundtrip(a[1:, 1::2])
    assert a.is_shared() and b._storage is a._storage  # rebuilt from the cache: one storage per process
    assert geometry(b) == geometry(a[1:, 1::2])
    x, y = roundtrip([a, a.t()])  # one message, one storage
    assert x._storage is a._storage and y._storage is a._storage


def test_plain_pickle_still_copies():
    a = fl.arange(4.0)
    b = pickle.loads(pickle.dumps(a))
    b.add_(1)
    assert a.tolist() == [0, 1, 2, 3] and not a.is_shared()


def test_requires_grad_travels_as_leaf_and_non_leaf_is_refused():
    w = fl.ones(3, requires_grad=True)
    r = roundtrip(w)
    assert r.requires_grad and r.is_leaf and r._storage is w._storage
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(w * 2)
    d = roundtrip((w * 2).detach())
    assert not d.requires_grad and d.tolist() == [2.0, 2.0, 2.0]


def test_parameter_keeps_its_class():
    nn = pytest.importorskip("flambeau.nn")
    p = nn.Parameter(fl.zeros(2, 2))
    q = roundtrip(p)
    assert type(q) is nn.Parameter and q.requires_grad and q._storage is p._storage
    frozen = roundtrip(nn.Parameter(fl.zeros(2), requires_grad=False))
    assert type(frozen) is nn.Parameter and not frozen.requires_grad


class Mine(fl.Tensor):
    """A subclass defined after flambeau.multiprocessing was imported, with a __dict__."""


def test_subclass_defined_after_import_is_shared():
    t = object.__new__(Mine)
    src = fl.ones(2)
    for slot in ("_data", "_storage", "_device", "dtype", "_requires_grad", "_grad", "grad_fn", "_base",
                 "_autograd_meta"):
        setattr(t, slot, getattr(src, slot))
    t.note = "kept"
    r = roundtrip(t)
    assert type(r) is Mine and r._storage is t._storage and r.note == "kept"


# --- the drop-in --------------------------------------------------------------------------------------
def test_drop_in_names():
    for name in multiprocessing.__all__:
        assert getattr(mp, name) is getattr(multiprocessing, name), name
    assert set(multiprocessing.__all__) <= set(mp.__all__)
    for name in ["spawn", "ProcessRaisedException", "ProcessExitedException", "set_sharing_strategy",
                 "get_sharing_strategy", "get_all_sharing_strategies"]:
        assert name in mp.__all__ and hasattr(mp, name)
    assert mp.get_context("spawn").get_start_method() == "spawn"
    assert importlib.import_module("flambeau.multiprocessing").__doc__
