"""default_collate / default_convert (flambeau/data/_collate.py) against torch's on every element type."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import flambeau as fl
from flambeau.data import collate, default_collate, default_collate_fn_map, default_convert

try:
    import torch
    from torch.utils.data import default_collate as torch_collate
    from torch.utils.data import default_convert as torch_convert
except ImportError:  # the torch comparisons are skipped; the rest runs
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

Point = collections.namedtuple("Point", "x y")


def to_torch(obj):
    """The same structure with flambeau tensors replaced by torch tensors (for building inputs)."""
    if isinstance(obj, fl.Tensor):
        return torch.from_numpy(obj.numpy().copy())
    if isinstance(obj, dict):
        return type(obj)((k, to_torch(v)) for k, v in obj.items())
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_torch(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_torch(v) for v in obj)
    return obj


def same(ours, theirs):
    """Structure, types, dtypes and values agree (flambeau tensor vs torch tensor)."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, fl.Tensor), type(ours)
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        return
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for k in theirs:
            same(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            same(a, b)
    elif isinstance(theirs, np.ndarray):
        np.testing.assert_array_equal(ours, theirs)
    else:
        assert ours == theirs


BATCHES = {
    "tensors": [fl.arange(6).reshape(2, 3) * i for i in range(4)],
    "float_tensors": [fl.tensor([1.5, 2.5]), fl.tensor([3.0, 4.0])],
    "0d_tensors": [fl.tensor(1.0), fl.tensor(2.0)],
    "numpy_arrays": [np.arange(4, dtype=np.float32) + i for i in range(3)],
    "numpy_int_arrays": [np.arange(4, dtype=np.int16), np.arange(4, dtype=np.int16)],
    "numpy_scalars": [np.float64(1.5), np.float64(2.5)],
    "numpy_int_scalars": [np.int32(1), np.int32(2)],
    "numpy_bool_scalars": [np.bool_(True), np.bool_(False)],
    "floats": [1.0, 2.5, -3.0],
    "ints": [1, 2, 3],
    "bools": [True, False],
    "strings": ["a", "bc"],
    "bytes": [b"a", b"bc"],
    "tuples": [(1, 2.0, "a"), (3, 4.0, "b")],
    "namedtuples": [Point(1, fl.tensor([1.0])), Point(2, fl.tensor([2.0]))],
    "dicts": [{"a": 1, "b": fl.tensor([1, 2])}, {"a": 2, "b": fl.tensor([3, 4])}],
    "lists": [[1, 2.0], [3, 4.0]],
    "nested": [{"x": [(1, np.float32(2.0))], "y": {"z": "s"}}, {"x": [(3, np.float32(4.0))], "y": {"z": "t"}}],
    "ordered_dict": [collections.OrderedDict(a=1), collections.OrderedDict(a=2)],
}


@needs_torch
@pytest.mark.parametrize("name", list(BATCHES))
def test_default_collate_matches_torch(name):
    batch = BATCHES[name]
    same(default_collate(batch), torch_collate(to_torch(batch)))


@needs_torch
@pytest.mark.parametrize("name", list(BATCHES))
def test_default_convert_matches_torch(name):
    sample = BATCHES[name][0]
    same(default_convert(sample), torch_convert(to_torch(sample)))


def test_collate_keeps_custom_sequence_and_mapping_types():
    class MyList(list):
        pass

    out = default_collate([MyList([1, 2]), MyList([3, 4])])
    assert type(out) is MyList and out[0].tolist() == [1, 3]

    class Frozen(collections.abc.Mapping):  # immutable, cannot be rebuilt from a dict: falls back to dict
        def __init__(self, *a, **k):
            if a or not k:
                raise TypeError("no positional construction")
            self._d = dict(k)

        def __getitem__(self, k):
            return self._d[k]

        def __iter__(self):
            return iter(self._d)

        def __len__(self):
            return len(self._d)

    out = default_collate([Frozen(a=1), Frozen(a=2)])
    assert type(out) is dict and out["a"].tolist() == [1, 2]


def test_default_convert_shares_numpy_memory():
    a = np.zeros(3)
    t = default_convert(a)
    a[0] = 5
    assert t[0].item() == 5
    strings = np.array(["a", "b"])
    assert default_convert(strings) is strings


@pytest.mark.parametrize("bad", [[None, None], [object(), object()], [np.array(["a"]), np.array(["b"])]])
def test_default_collate_errors_like_torch(bad):
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                                        "or lists; found"):
        default_collate(bad)
    if torch is not None:
        with pytest.raises(TypeError, match="default_collate: batch must contain tensors"):
            torch_collate(bad)


def test_unequal_sizes():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        default_collate([fl.zeros(2), fl.zeros(3)])


def test_collate_fn_map_extension():
    class Box:
        def __init__(self, v):
            self.v = v

    def collate_box(batch, *, collate_fn_map=None):
        return sum(b.v for b in batch)

    fn_map = {**default_collate_fn_map, Box: collate_box}
    out = collate([(Box(1), 2), (Box(3), 4)], collate_fn_map=fn_map)
    assert out[0] == 4 and out[1].tolist() == [2, 4]


def test_worker_collate_goes_through_shared_stack(monkeypatch):
    """Inside a worker, tensors are stacked by _shared_stack (into shared memory when flambeau can)."""
    from flambeau.data import _collate, _worker

    monkeypatch.setattr(_worker, "_worker_info", _worker.WorkerInfo(0, 1, 0, None))
    calls = []
    real = _collate._shared_stack
    monkeypatch.setattr(_collate, "_shared_stack", lambda b: calls.append(len(b)) or real(b))
    out = default_collate([fl.ones(2, 2), fl.zeros(2, 2)])
    assert calls == [2] and out.shape == (2, 2, 2) and out.sum().item() == 4
    assert out.is_shared()


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 7])
def test_large_batch_stacked_by_threads(monkeypatch, threads, n):
    """In the main process a large batch is copied by several threads (Note [Parallel stack]):
    the result is np.stack's, whatever the number of threads and samples."""
    from flambeau.data import _collate

    monkeypatch.setattr(_collate, "_PARALLEL_STACK_MIN_BYTES", 0)
    old = fl.get_num_threads()
    fl.set_num_threads(threads)
    try:
        rng = np.random.default_rng(n)
        arrays = [rng.standard_normal((3, 5, 4)).astype(np.float32) for _ in range(n)]
        arrays[0] = arrays[0].transpose(1, 0, 2).copy().transpose(1, 0, 2)  # a non-contiguous sample
        samples = [fl.from_numpy(a) for a in arrays]
        out = default_collate(samples)
        assert out.dtype is fl.float32 and out.shape == (n, 3, 5, 4)
        np.testing.assert_array_equal(out.numpy(), np.stack(arrays))
        assert not np.shares_memory(out.numpy(), arrays[0])
        ints = default_collate([fl.arange(6) * i for i in range(20)])  # int64, many samples
        np.testing.assert_array_equal(ints.numpy(), np.stack([np.arange(6) * i for i in range(20)]))
    finally:
        fl.set_num_threads(old)


def test_large_batch_fallbacks(monkeypatch):
    """Mixed dtypes promote, unequal shapes raise fl.stack's error and samples that require grad
    are recorded by autograd, as with fl.stack."""
    from flambeau.data import _collate

    monkeypatch.setattr(_collate, "_PARALLEL_STACK_MIN_BYTES", 0)
    old = fl.get_num_threads()
    fl.set_num_threads(2)
    try:
        mixed = default_collate([fl.ones(4, dtype=fl.float32), fl.ones(4, dtype=fl.float64)])
        assert mixed.dtype is fl.float64 and mixed.tolist() == [[1.0] * 4] * 2
        with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
            default_collate([fl.ones(4), fl.ones(5)])
        a, b = fl.ones(3), fl.ones(3, requires_grad=True)
        out = default_collate([a, b])
        assert out.requires_grad and out.grad_fn is not None
        out.sum().backward()
        assert b.grad.tolist() == [1.0, 1.0, 1.0]
    finally:
        fl.set_num_threads(old)


def test_large_batch_copy_error_reaches_caller():
    """An exception in any copying thread is raised in the calling thread."""
    from flambeau.data import _collate

    arrays = [np.ones((2, 3))] * 5 + [np.ones((2, 4))]  # the last one does not fit
    out = np.empty((6, 2, 3))
    with pytest.raises(ValueError, match="could not broadcast"):
        _collate._StackCopy(arrays, out).run(1)


def test_torchs_module_path_of_collation():
    # ``from torch.utils.data._utils.collate import ...``: the same objects, so registrations reach the DataLoader
    from flambeau.data import _collate
    from flambeau.utils.data._utils.collate import default_collate, default_collate_fn_map

    assert default_collate is _collate.default_collate and default_collate_fn_map is _collate.default_collate_fn_map
