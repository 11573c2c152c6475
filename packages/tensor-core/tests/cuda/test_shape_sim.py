"""CUDA kernels of the shape family (flambeau._kernels.cuda.shape) against the CPU, beyond the samples.

Strided inputs, every storage dtype, sort rows long enough for the merge passes, NaN and ties,
unique along a dim, the host synchronisations of the data-dependent ops, the device error flag of
one_hot, bad input refused before a launch, and backward on 'cuda' equal to the CPU's. Runs under
numba's simulator (tiny sizes) and on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

RNG = np.random.default_rng(7)
STORAGE = [fl.float16, fl.float32, fl.float64, fl.int8, fl.int32, fl.int64, fl.uint8, fl.bool]


def _host(shape, dtype, low=-5, high=5):
    if dtype is fl.bool:
        return RNG.random(shape) > 0.5
    if dtype.is_floating_point:
        return RNG.uniform(low, high, shape).astype(dtype.np)
    lo = 0 if dtype is fl.uint8 else low
    return RNG.integers(lo, high, shape).astype(dtype.np)


def _pair(shape, dtype=fl.float32, **kw):
    c = fl.tensor(_host(shape, dtype, **kw))
    return c, c.to("cuda")


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


def _both(fn, *tensors):
    _same(fn(*[t.to("cuda") for t in tensors]), fn(*tensors))


# --- remap family: every storage dtype, strided inputs ----------------------------------------------
@pytest.mark.parametrize("dtype", STORAGE)
def test_copies_every_dtype_strided(dtype):
    c = fl.tensor(_host((3, 4), dtype)).T  # a transposed view
    _both(lambda x: x.reshape(12), c)
    _both(lambda x: x.flip(0, 1), c)
    _both(lambda x: x.roll(2), c)
    _both(lambda x: x.roll((1, -1), (0, 1)), c)
    _both(lambda x: fl.rot90(x, 1, (0, 1)), c)
    _both(lambda x: x.repeat(2, 1, 2), c)
    _both(lambda x: x.tril(-1), c)
    _both(lambda x: x.triu(1), c)
    _both(lambda x: x.repeat_interleave(2, 1), c)
    _both(lambda x: fl.cat([x, x[:1]], 0), c)
    _both(lambda x: fl.stack([x, x], 1), c)
    _both(lambda x: x.clone().tril_(1), c)


def test_rot90_every_k_and_0d_flip():
    c = fl.tensor(_host((2, 3, 4), fl.float32))[:, :, 1:]
    for k in range(-1, 5):
        _both(lambda x, k=k: fl.rot90(x, k, (2, 0)), c)
    _both(lambda x: x.flip(()), fl.tensor(3.0))
    _both(lambda x: x.roll(1), fl.tensor([[1, 2], [3, 4]])[:, 1])


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes(mode):
    import flambeau.nn.functional as F

    c = fl.tensor(_host((2, 3, 5), fl.float64)).transpose(1, 2)
    _both(lambda x: F.pad(x, (1, 2, 2, 1), mode), c)
    if mode == "constant":
        _both(lambda x: F.pad(x, (-1, 2, 0, -2), value=7.5), c)
        _both(lambda x: F.pad(x, (1, 1), value=3.7), fl.tensor([[1, 2], [3, 4]], dtype=fl.int32))


def test_cat_groups_mixed_dtypes_and_empty_inputs():
    parts = [fl.tensor(_host((2, i % 3), fl.float32)) for i in range(11)]  # > one launch's group; some empty
    _both(lambda *xs: fl.cat(xs, 1), *parts)
    mixed = [fl.tensor(_host((2, 2), d)) for d in (fl.int32, fl.float32, fl.bool, fl.float64)]
    _both(lambda *xs: fl.cat(xs, 0), *mixed)
    _both(lambda *xs: fl.stack(xs, 2), *mixed)
    _both(lambda a, b: fl.cat([a, b]), fl.tensor([]), fl.tensor(_host((2, 3), fl.float32)))
    _both(lambda *xs: fl.hstack(xs), *mixed[:2])
    _both(lambda *xs: fl.column_stack(xs), fl.tensor([1.0, 2.0]), fl.tensor([3.0, 4.0]))


def test_cat_stack_errors_before_launch():
    a, b = fl.zeros(2, 3, device="cuda"), fl.zeros(3, 2, device="cuda")
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        fl.cat([a, b])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        fl.stack([a, b])
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        fl.nn.functional.pad(a, (3, 3), "reflect")


def test_repeat_interleave_tensor_repeats_syncs_once():
    c = fl.tensor(_host((3, 4), fl.float32))
    reps = fl.tensor([2, 0, 3])
    _both(lambda x, r: x.repeat_interleave(r, 0), c, reps)
    _both(lambda x, r: x.T.repeat_interleave(r, 1), c, reps)
    _both(lambda x, r: x.repeat_interleave(r, 1), c, fl.tensor([2]))
    _both(lambda x, r: x.repeat_interleave(r), c[:, :1], reps)
    _both(lambda r: fl.repeat_interleave(r), fl.tensor([1, 0, 2, 1]))
    g, r = c.to("cuda"), reps.to("cuda")
    before = fl.cuda.host_sync_count()
    g.repeat_interleave(r, 0)
    assert fl.cuda.host_sync_count() == before + 1
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        g.repeat_interleave(fl.tensor([1, -1, 1], device="cuda"), 0)


# --- sort and its composites -------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 5, 13, 40])  # under the simulator: small tile, big tile, 3 tiles (2 merges)
def test_sort_rows_ties_nan_descending(n):
    h = RNG.integers(-3, 3, (2, n)).astype(np.float32)
    h[RNG.random((2, n)) < 0.2] = np.nan
    c = fl.tensor(h)
    _both(lambda x: tuple(fl.sort(x, -1, False, stable=True)), c)
    _both(lambda x: tuple(fl.sort(x.T, 0, True, stable=True)), c)


@pytest.mark.parametrize("dtype", [fl.float16, fl.float64, fl.int8, fl.int64, fl.uint8, fl.bool])
def test_sort_every_dtype(dtype):
    c = fl.tensor(_host((2, 5), dtype)).T
    _both(lambda x: tuple(fl.sort(x, 0)), c)
    _both(lambda x: tuple(fl.sort(x, 1, True)), c)


def test_sort_composites_on_cuda():
    c = fl.tensor(_host((4, 6), fl.float64))
    _both(lambda x: fl.argsort(x, 1, True), c)
    _both(lambda x: fl.msort(x), c)
    _both(lambda x: tuple(fl.topk(x, 3, 0)), c)
    _both(lambda x: tuple(fl.topk(x, 2, 1, largest=False)), c)
    _both(lambda x: tuple(fl.kthvalue(x, 2, 1, keepdim=True)), c)


def test_sort_needs_no_host_sync():
    g = fl.tensor(_host((2, 20), fl.float32)).to("cuda")
    before = fl.cuda.host_sync_count()
    v, i = fl.sort(g, 1, True)
    fl.cat([g, g], 0).flip(0).roll(1, 1)
    assert fl.cuda.host_sync_count() == before


# --- unique ------------------------------------------------------------------------------------------
def _unique_all(fn, **kw):
    return lambda x: fn(x, return_inverse=True, return_counts=True, **kw)


@pytest.mark.parametrize("dtype", [fl.float32, fl.bool])
def test_unique_flat(dtype):
    c = fl.tensor(_host((3, 5), dtype, low=-2, high=3)).T
    _both(_unique_all(fl.unique), c)
    _both(_unique_all(fl.unique_consecutive), c)
    _both(lambda x: fl.unique(x), c)


def test_unique_nan_and_empty():
    c = fl.tensor([2.0, np.nan, 1.0, np.nan, 2.0, np.nan, np.nan])
    _both(_unique_all(fl.unique), c)
    _both(_unique_all(fl.unique_consecutive), c)
    _both(_unique_all(fl.unique), fl.tensor([], dtype=fl.int64))
    _both(_unique_all(fl.unique_consecutive), fl.tensor([], dtype=fl.int64))


def test_unique_along_dim():
    h = RNG.integers(0, 2, (9, 3)).astype(np.int64)
    h[4] = h[1]
    c = fl.tensor(h)
    _both(_unique_all(fl.unique, dim=0), c)
    _both(_unique_all(fl.unique, dim=1), c.T)
    _both(_unique_all(fl.unique_consecutive, dim=0), fl.tensor(np.repeat(h, 2, axis=0)))


def test_unique_syncs_once():
    g = fl.tensor(_host((20,), fl.int64, low=0, high=4)).to("cuda")
    before = fl.cuda.host_sync_count()
    fl.unique(g, return_counts=True, return_inverse=True)
    assert fl.cuda.host_sync_count() == before + 1


# --- one_hot -----------------------------------------------------------------------------------------
def test_one_hot_infers_and_flags_bad_classes():
    import flambeau.nn.functional as F

    c = fl.tensor([[0, 3], [1, 2], [2, 2]]).T
    _both(lambda x: F.one_hot(x), c)
    _both(lambda x: F.one_hot(x, 6), c)
    g = c.to("cuda")
    F.one_hot(g, 3)  # class 3 >= 3: recorded on the device, raised at the next synchronisation
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension with size 3"):
        fl.cuda.synchronize()
    out = F.one_hot(fl.tensor([1, -2]).to("cuda"), 4)
    with pytest.raises(RuntimeError, match="index -2 is out of bounds"):
        out.cpu()
    with pytest.raises(RuntimeError, match="Can not infer total number of classes"):
        F.one_hot(fl.tensor([], dtype=fl.int64).to("cuda"))
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(fl.tensor([1, 2], dtype=fl.int32).to("cuda"))


# --- autograd on cuda ---------------------------------------------------------------------------------
GRAD_CASES = {
    "cat": lambda x: fl.cat([x, x * 2], 1),
    "stack": lambda x: fl.stack([x, x.T.T], 0),
    "flip": lambda x: x.flip(1),
    "roll": lambda x: x.roll((1, 2), (0, 1)),
    "rot90": lambda x: fl.rot90(x, 3),
    "repeat": lambda x: x.repeat(2, 1),
    "tril": lambda x: x.tril(),
    "pad": lambda x: fl.nn.functional.pad(x, (1, 2), "replicate"),
    "reshape": lambda x: x.T.reshape(-1),
    "sort": lambda x: fl.sort(x, 1, True).values,
    "topk": lambda x: fl.topk(x, 2, 1).values,
    "repeat_interleave": lambda x: x.repeat_interleave(2, 0),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_backward_on_cuda_equals_cpu(name):
    fn = GRAD_CASES[name]
    h = _host((3, 4), fl.float64)
    w = _host(tuple(fn(fl.tensor(h)).shape), fl.float64)
    grads = []
    for dev in ("cpu", "cuda"):
        x = fl.tensor(h).to(dev).requires_grad_()
        (fn(x) * fl.tensor(w).to(dev)).sum().backward()
        assert x.grad.device.type == dev
        grads.append(x.grad.cpu().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-12)
