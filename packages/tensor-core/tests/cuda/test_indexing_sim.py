"""CUDA kernels of the indexing operators beyond their samples (tier 2: numba's simulator; also on a GPU).

Strided and transposed operands, every scatter_reduce mode, widened accumulation, ``t[key]`` and
``t[key] = v`` with tensors and masks, autograd on 'cuda' against the CPU, the device-side index
checks (Note [Device-side index checks] in ``flambeau._kernels.cuda.indexing``) and the host
synchronisations of the data-dependent shapes. Sizes are tiny: the simulator runs every thread in Python.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.cuda._sync import host_sync_count

RNG = np.random.default_rng(0)


def _t(shape, dtype=fl.float32, low=-5, high=5):
    if dtype is fl.bool:
        return fl.tensor(RNG.random(shape) > 0.5)
    if dtype.is_floating_point:
        return fl.tensor(RNG.uniform(low, high, shape).astype(dtype.np))
    return fl.tensor(RNG.integers(low, high, shape).astype(dtype.np))


def _idx(shape, high):
    return fl.tensor(RNG.integers(0, high, shape).astype(np.int64))


def _cu(x):
    return x.to("cuda") if isinstance(x, fl.Tensor) else x


def _same(got, want, rtol=1e-5, atol=1e-6):
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    g, w = got.cpu().numpy(), want.numpy()
    if want.dtype is fl.float16:  # CUDA accumulates float16 in float32, rounding once
        rtol, atol = 2e-3, 2e-3
    if want.dtype.is_floating_point:
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


def _both(fn, *args, **kw):
    """``fn`` on the CPU and on CUDA (tensor arguments moved), compared."""
    want = fn(*args, **kw)
    got = fn(*[_cu(a) for a in args], **{k: _cu(v) for k, v in kw.items()})
    _same(got, want)


# --- strided operands -----------------------------------------------------------------------------
def test_gather_index_select_take_on_transposed_operands():
    x = _t((4, 5)).t()  # (5, 4), strided
    i = _idx((4, 3), 5).t()  # (3, 4), strided
    _both(lambda a, b: a.gather(0, b), x, i)
    _both(lambda a, b: a.index_select(1, b), x, fl.tensor([3, 0, 3]))
    _both(lambda a, b: fl.take(a, b), x, fl.tensor([[-1, 0], [7, 19]]))
    _both(lambda a, b: a.gather(1, b), x[1:, ::2], fl.tensor([[1, 0], [0, 0], [1, 1], [0, 1]]))


def test_scatter_family_into_strided_views():
    for dt in (fl.float32, fl.int64):
        base = _t((4, 6), dt)
        src = _t((3, 3), dt)
        idx = fl.tensor([[0, 1, 2], [2, 0, 1], [1, 2, 0]])

        def scatter_view(b, s, i):
            b = b.clone()
            b[:3, ::2].scatter_(1, i, s)
            return b

        def scatter_add_view(b, s, i):
            b = b.clone()
            b.t()[1:4, :3].scatter_add_(0, i, s)
            return b

        _both(scatter_view, base, src, idx)
        _both(scatter_add_view, base, src, idx)
        _both(lambda b, s: b.t().index_add(0, fl.tensor([5, 0, 5], device=b.device), s.t().repeat(1, 2)[:, :4],
                                           alpha=2), base, src)
        _both(lambda b, s: b.t().index_copy(1, fl.tensor([3, 1], device=b.device), s[:2, :].t().repeat(2, 1)),
              base, src)
        _both(lambda b: b[:, 1:].index_fill(0, fl.tensor([2, 0], device=b.device), 7), base)
        _both(lambda b: b.index_fill(1, fl.tensor([-1, 0], device=b.device), 7), base)  # wraps, as torch


def test_put_take_non_contiguous():
    x = _t((3, 4))
    for acc in (False, True):
        _both(lambda a, i, s, acc=acc: a.t().put(i, s, accumulate=acc), x, fl.tensor([0, -1, 5, 5 if acc else 6]),
              fl.tensor([1.0, 2.0, 3.0, 4.0]))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_every_mode(reduce, include_self):
    for dt in (fl.float32, fl.int64):
        x = _t((3, 4), dt, 1, 4)
        src = _t((3, 5), dt, 1, 4)
        idx = _idx((3, 5), 4)
        _both(lambda a, i, s: a.scatter_reduce(1, i, s, reduce, include_self=include_self), x, idx, src)
        _both(lambda a, i, s: a.t().scatter_reduce(0, i.t()[:, :2], s.t(), reduce, include_self=include_self),
              x, idx, src)


def test_scatter_reduce_amax_propagates_nan_and_multiply():
    x = fl.tensor([[0.0, 1.0, 2.0]])
    src = fl.tensor([[float("nan"), 5.0, -1.0]])
    idx = fl.tensor([[0, 0, 2]])
    _both(lambda a, i, s: a.scatter_reduce(1, i, s, "amax"), x, idx, src)
    _both(lambda a, i, s: a.scatter(1, i, s, reduce="multiply"), x, idx, src)
    _both(lambda a, i: a.scatter(1, i, 2.0, reduce="add"), x, idx)


@pytest.mark.parametrize("dt", [fl.float16, fl.int16])
def test_accumulation_in_a_widened_copy(dt):
    x = _t((4, 3), dt, 0, 5)
    src = _t((5, 3), dt, 0, 5)
    idx = fl.tensor([0, 3, 0, 0, 1])
    _both(lambda a, i, s: a.index_add(0, i, s), x, idx, src)
    _both(lambda a, i, s: a.index_put((i,), s, accumulate=True), x, idx, src)
    _both(lambda a, i, s: a.scatter_add(0, i.reshape(5, 1).repeat(1, 3), s), x, idx, src)


@pytest.mark.parametrize("dt", [fl.float16, fl.bool, fl.int8, fl.float64])
def test_copies_of_every_item_size(dt):
    x = _t((3, 4), dt)
    m = _t((3, 4), fl.bool)
    _both(lambda a, i: a.gather(1, i), x, _idx((3, 2), 4))
    _both(lambda a, mm: a.masked_select(mm), x, m)
    _both(lambda a, mm: a.masked_fill(mm, 1), x, m)
    _both(lambda a, i: a[i], x, fl.tensor([2, 0, 2]))
    _both(lambda a: fl.nonzero(a), x)


# --- t[key], t[key] = v ---------------------------------------------------------------------------
def test_getitem_tensor_keys():
    x = _t((3, 4, 5))
    i, j = fl.tensor([2, 0, -1]), fl.tensor([[1], [2]])
    for key in [(i,), (slice(None), i), (i, j), (j, slice(1, None, 2), i), (Ellipsis, i), (slice(None), j, i),
                (i, 1, j), ([0, 2],), (fl.tensor([True, False, True]),), (slice(None), fl.tensor([[True] * 5] * 4))]:
        want = x[key]
        got = x.to("cuda")[tuple(_cu(k) for k in key)]
        _same(got, want)
    _same(x.to("cuda")[fl.tensor([1, 0])], x[fl.tensor([1, 0])])  # a CPU index for a CUDA tensor


NEW_AXIS_KEYS = [(True,), (False,), (None, True), (True, [0, 1]), (0, True), (Ellipsis, True),
                 (slice(None), True, [0, 2]), ([0, 1], True), (True, True), (np.bool_(True), 1, [0]),
                 (None, [0, 1]), ([0, 1], None, [1, 2]), (slice(None), None, [0, 2]), (Ellipsis, None, [1, 3]),
                 ([1], Ellipsis, None), (None, Ellipsis, [0, 1], None), (True, Ellipsis, [0, 2]),
                 ([0, 1], slice(None), True), ("mask", None), (None, "mask2")]


def _new_axis_key(key):
    masks = {"mask": fl.tensor([True, False]), "mask2": fl.tensor([[True, False, True], [False, False, True]])}
    return tuple(masks.get(k, k) if isinstance(k, str) else k for k in key)


@pytest.mark.parametrize("key", NEW_AXIS_KEYS, ids=[str(k) for k in NEW_AXIS_KEYS])
def test_none_and_boolean_scalars_among_index_arrays(key):
    # Note [New axes among index arrays]: they raised on CUDA
    x = _t((2, 3, 4))
    key = _new_axis_key(key)
    _same(x.to("cuda")[tuple(_cu(k) for k in key)], x[key])
    wide = _t((2, 3, 8))
    want = wide.clone()
    want[:, :, ::2][key] = -1.0
    got = wide.to("cuda")
    got[:, :, ::2][tuple(_cu(k) for k in key)] = -1.0  # (a strided view: written through its view with the new axes)
    _same(got, want)
    for flag in (True, False):  # a 0-dim boolean tensor on the device
        _same(x.to("cuda")[fl.tensor(flag).to("cuda")], x[fl.tensor(flag)])


def test_setitem_tensor_keys_and_masks():
    x = _t((3, 4))
    m = x > 0
    cases = [((fl.tensor([2, 0]),), fl.tensor([1.0, 2.0, 3.0, 4.0])), ((slice(None), fl.tensor([3, 1])), 5.0),
             ((fl.tensor([0, 2]), fl.tensor([1, 3])), fl.tensor([7.0, 8.0])), ((m,), 0.0), ((m,), fl.tensor(3.0)),
             ((fl.tensor([True, False, True]),), fl.tensor([1.0, 2.0, 3.0, 4.0])),
             ((m,), fl.arange(int(m.sum().item()), dtype=fl.float32)), ((fl.tensor([1, 1]),), fl.tensor([[9]]))]
    for key, value in cases:
        want = x.clone()
        want[key] = value
        got = x.to("cuda")
        got[tuple(_cu(k) for k in key)] = _cu(value)
        _same(got, want)


def test_setitem_basic_keys_with_an_ellipsis():
    # a basic key is completed with a trailing ``...``, except where it holds one already (it raised)
    x = _t((2, 3, 2))
    for key, value in [((Ellipsis, 0), 1.0), ((Ellipsis,), 2.0), ((0, Ellipsis), fl.ones(3, 2)),
                       ((Ellipsis, slice(1, 3), 0), 5.0), ((Ellipsis, None, 1), 7.0), ((1, Ellipsis, 1), 3.0)]:
        want = x.clone()
        want[key] = value
        got = x.to("cuda")
        got[key] = _cu(value)
        _same(got, want)


def test_index_put_accumulate_repeats_add_up():
    x = fl.zeros(4, 3)
    i, j = fl.tensor([0, 0, 3, 0]), fl.tensor([2, 2, 1, 0])
    _both(lambda a, ii, jj: a.index_put((ii, jj), fl.tensor(1.0, device=a.device), accumulate=True), x, i, j)
    _both(lambda a, ii: a.index_put((ii,), fl.ones(4, 3, device=a.device), accumulate=True), x, i)
    _both(lambda a, m: a.index_put((m,), fl.tensor(2.0, device=a.device), accumulate=True), x, x == 0)


def test_masked_scatter_and_select_broadcast():
    x = _t((3, 4))
    m = fl.tensor([True, False, True, True])
    _both(lambda a, mm, s: a.masked_scatter(mm, s), x, m, _t((12,)))
    _both(lambda a, mm: a.masked_select(mm), x, m)
    _both(lambda a, mm: a.t().masked_select(mm), x, fl.tensor([[True], [False], [True], [False]]))
    _both(lambda a: fl.nonzero(a, as_tuple=True)[1], x > 0)
    _both(lambda a: fl.nonzero(a, as_tuple=True)[0], fl.tensor(3.0))
    _both(lambda a: fl.nonzero(a), fl.zeros(0, 3))


# --- synchronisations -----------------------------------------------------------------------------
def test_data_dependent_shapes_sync_once_and_the_rest_never():
    x = _t((3, 4)).to("cuda")
    m = x > 0
    i = fl.tensor([2, 0]).to("cuda")
    n0 = host_sync_count()
    fl.nonzero(x)
    x.masked_select(m)
    assert host_sync_count() - n0 == 2
    n0 = host_sync_count()
    y = x.clone()
    x.masked_fill(m, 1.0), x.gather(0, i.reshape(2, 1).repeat(1, 4)), x.index_select(1, i), x[i], fl.take(x, i)
    y[m] = 0.0
    y[i] = 1.0
    y.index_add_(0, i, x[:2]), y.scatter_add_(1, i.reshape(1, 2).repeat(3, 1), x), y.masked_scatter_(m, x)
    y.scatter_reduce_(1, i.reshape(1, 2).repeat(3, 1), x, "amax"), y.put_(i, x[0, :2], accumulate=True)
    assert host_sync_count() == n0


# --- device-side index checks ---------------------------------------------------------------------
def _raises_at_sync(result, index, size):
    with pytest.raises(RuntimeError, match=rf"index {index} is out of bounds for dimension with size {size}"):
        result.cpu()
    result.cpu()  # reported once


def test_bad_indices_raise_at_the_next_sync_and_write_nothing_out_of_bounds():
    x = fl.arange(12, dtype=fl.float32).reshape(3, 4).to("cuda")
    bad = fl.tensor([[0, 4], [1, -1], [2, 3]]).to("cuda")
    _raises_at_sync(x.gather(1, bad.clamp_min(0)), 4, 4)
    _raises_at_sync(x.index_select(0, fl.tensor([0, 3]).to("cuda")), 3, 3)
    _raises_at_sync(fl.take(x, fl.tensor([0, -13]).to("cuda")), -13, 12)
    _raises_at_sync(x[fl.tensor([1, 5]).to("cuda")], 5, 3)
    _raises_at_sync(x[:, fl.tensor([-5]).to("cuda")], -5, 4)
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension with size 4"):
        x.gather(1, bad[1:2, 1:]).item()
    # writes: a view in the middle of a buffer; nothing outside the view (nor at the bad index) changes
    buf = fl.zeros(5, 6, device="cuda")
    view = buf[1:4, 1:5]
    view.scatter_add_(1, bad, fl.ones(3, 2, device="cuda"))
    view.index_add_(0, fl.tensor([3, 0]).to("cuda"), fl.ones(2, 4, device="cuda"))
    view.scatter_(0, fl.tensor([[7, 0, 0, 0]]).to("cuda"), 5.0)
    view.index_fill_(1, fl.tensor([4]).to("cuda"), 9.0)
    view[fl.tensor([3]).to("cuda")] = 4.0
    view.index_put_((fl.tensor([0, 3]).to("cuda"),), fl.tensor(1.0, device="cuda"), accumulate=True)
    view.put_(fl.tensor([12]).to("cuda"), fl.tensor([2.0], device="cuda"))
    with pytest.raises(RuntimeError, match="out of bounds"):
        buf.cpu()
    want = np.zeros((5, 6), np.float32)
    want[1:4, 1:5] = [[3, 6, 6, 6],  # scatter_add, index_add (row 0), scatter_ (5), index_put (+1)
                      [0, 1, 0, 0],  # scatter_add
                      [0, 0, 1, 1]]  # scatter_add
    np.testing.assert_array_equal(buf.cpu().numpy(), want)


def test_masked_scatter_short_source_raises_at_the_next_sync():
    x = fl.zeros(2, 3, device="cuda")
    x.masked_scatter_(fl.ones(2, 3, dtype=fl.bool, device="cuda"), fl.ones(4, device="cuda"))
    with pytest.raises(RuntimeError, match="index [45] is out of bounds for dimension with size 4"):
        x.sum().item()
    np.testing.assert_array_equal(x.cpu().numpy(), [[1, 1, 1], [1, 0, 0]])


def test_bad_input_raises_on_the_host():
    x = fl.zeros(3, 4, device="cuda")
    with pytest.raises(RuntimeError, match="Expected dtype int32/int64"):
        x.gather(1, fl.zeros(3, 1, device="cuda"))
    with pytest.raises(RuntimeError):
        x.gather(1, fl.zeros(3, 1, dtype=fl.int64))  # index on another device
    with pytest.raises(IndexError, match="shape mismatch"):
        x[fl.tensor([0, 1]).to("cuda"), fl.tensor([0, 1, 2]).to("cuda")]
    with pytest.raises(IndexError, match="The shape of the mask"):
        x[fl.tensor([True, False]).to("cuda")]
    with pytest.raises(IndexError, match="too many indices"):
        x[fl.tensor([0]).to("cuda"), 0, 0]
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[fl.tensor([0, 1]).to("cuda")] = fl.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_fill(fl.zeros(3, 4, dtype=fl.int64, device="cuda"), 1.0)


# --- autograd on 'cuda' equals the CPU's ----------------------------------------------------------
BACKWARD = {
    "gather": lambda x: x.gather(1, fl.tensor([[0, 3], [1, 1], [2, 0]], device=x.device)),
    "index_select": lambda x: x.index_select(0, fl.tensor([2, 0, 2], device=x.device)),
    "getitem": lambda x: x[fl.tensor([2, 0, 2], device=x.device), 1:],
    "getitem_mask": lambda x: x[x > 0],
    "masked_fill": lambda x: x.masked_fill(x > 0, 0.5),
    "masked_select": lambda x: x.masked_select(fl.tensor([True, False, True, True], device=x.device)),
    "take": lambda x: fl.take(x, fl.tensor([0, 11, 0], device=x.device)),
    "scatter_add": lambda x: fl.zeros(3, 5, device=x.device).scatter_add(1, fl.tensor([[0, 4, 4, 0]] * 3,
                                                                                      device=x.device), x),
    "index_add": lambda x: fl.ones(5, 4, device=x.device).index_add(0, fl.tensor([1, 1, 4], device=x.device), x),
    "scatter_reduce_amax": lambda x: fl.zeros(3, 2, device=x.device).scatter_reduce(
        1, fl.tensor([[0, 1, 0, 1]] * 3, device=x.device), x, "amax", include_self=False),
}


@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_backward_on_cuda_matches_cpu(name):
    fn = BACKWARD[name]
    h = _t((3, 4))
    grads = []
    for dev in ("cpu", "cuda"):
        x = h.to(dev).detach().requires_grad_(True)
        y = fn(x)
        w = fl.arange(y.numel(), dtype=fl.float32).reshape(y.shape).to(dev)
        (y * w).sum().backward()
        assert x.grad.device.type == dev
        grads.append(x.grad.cpu().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)


def test_setitem_backward_on_cuda_matches_cpu():
    grads = []
    for dev in ("cpu", "cuda"):
        x = fl.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4)).to(dev).requires_grad_(True)
        v = fl.tensor([1.0, 2.0, 3.0, 4.0]).to(dev).requires_grad_(True)
        y = x * 1
        y[fl.tensor([2, 0], device=dev)] = v
        (y * y).sum().backward()
        grads.append((x.grad.cpu().numpy(), v.grad.cpu().numpy()))
    for g, w in zip(grads[1], grads[0]):
        np.testing.assert_allclose(g, w)


def test_zero_dim_cpu_tensors_join_cuda_operations():
    x = _t((3, 4))
    _both(lambda a: a.index_select(0, fl.tensor(1)), x)
    _both(lambda a: fl.take(a, fl.tensor(5)), x)
    _both(lambda a: a.masked_fill(fl.tensor(True), 2.0), x)
    _both(lambda a: fl.zeros(3, device=a.device).index_add(0, fl.tensor([1], device=a.device), fl.tensor(5.0)), x)


def test_setitem_of_values_from_the_other_device():
    # a CUDA value written into a CPU tensor and back, with leading dims of one dropped as torch's setitem
    cpu = fl.zeros(2, 3)
    cpu[0] = fl.tensor([[1.0, 2.0, 3.0]]).to("cuda")
    cpu[1, 2] = fl.tensor([7.0]).to("cuda")
    np.testing.assert_array_equal(cpu.numpy(), [[1, 2, 3], [0, 0, 7]])
    dev = fl.zeros(2, 3, device="cuda")
    dev[1] = fl.tensor([[4.0, 5.0, 6.0]])
    dev[0, 0] = fl.tensor([9.0]).to("cuda")
    np.testing.assert_array_equal(dev.cpu().numpy(), [[9, 0, 0], [4, 5, 6]])


@pytest.mark.parametrize("reduce", ["mean", "prod", "amin"])
def test_scatter_reduce_float16_accumulates_in_float32(reduce):
    x = _t((2, 3), fl.float16, 1, 3)
    src = _t((2, 4), fl.float16, 1, 3)
    _both(lambda a, i, s: a.scatter_reduce(1, i, s, reduce, include_self=False), x, _idx((2, 4), 3), src)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_scatter_reduce_by_atomics(reduce, monkeypatch):
    from flambeau._kernels.cuda import indexing as K

    monkeypatch.setattr(K, "PULL_MAX_SIZE", 0)  # every output extent takes the atomic path
    for dt in (fl.float32, fl.int64, fl.float16):
        x = _t((3, 4), dt, 1, 4)
        src = _t((3, 5), dt, 1, 4)
        idx = _idx((3, 5), 4)
        for include_self in (True, False):
            _both(lambda a, i, s, inc=include_self: a.scatter_reduce(1, i, s, reduce, include_self=inc), x, idx, src)
    nan = fl.tensor([[0.0, 1.0, 2.0]])
    _both(lambda a, i, s: a.scatter_reduce(1, i, s, reduce), nan, fl.tensor([[0, 0, 2]]),
          fl.tensor([[float("nan"), 5.0, -1.0]]))
    bad = fl.zeros(2, 3, device="cuda").scatter_reduce(1, fl.tensor([[0, 3]], device="cuda"),
                                                         fl.ones(1, 2, device="cuda"), reduce)
    _raises_at_sync(bad, 3, 3)


def test_slicing_backward_and_basic_index_put_on_cuda():
    """index_put with only basic items (slicing's backward writes through it) is a copy into the view."""
    import flambeau.autograd  # noqa: F401 - the engine

    x = np.random.default_rng(3).standard_normal((5, 2, 4)).astype(np.float32)
    grads = []
    for device in ("cpu", "cuda"):
        a = fl.tensor(x, device=device, requires_grad=True)
        (a[:, :-1, 1:] * 3).sum().backward()
        grads.append(a.grad.cpu().numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    d = fl.zeros(4, device="cuda")
    for _ in range(2):
        d.index_put_((slice(1, 3),), fl.tensor([1.0, 2.0], device="cuda"), accumulate=True)
    d[3:] = 7.0
    np.testing.assert_array_equal(d.cpu().numpy(), [0.0, 2.0, 4.0, 7.0])
