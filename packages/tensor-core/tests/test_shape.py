"""Tests of flambeau/_ops/shape.py: views, joins, reorderings, sorting, unique (against numpy and torch)."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops.shape import one_hot, pad

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_]


def arr(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 5
    return a.astype(dtype) if dtype is not np.bool_ else a > 0


def pair(a):
    """The same data as a flambeau and a torch tensor."""
    return fl.tensor(a), torch.from_numpy(np.array(a))


def noncontig(a):
    """A flambeau tensor, torch tensor and numpy array all transposed (non-contiguous) views of ``a``."""
    f, t = pair(a)
    return f.transpose(0, -1), t.transpose(0, -1), a.swapaxes(0, -1)


def same(f, t):
    np.testing.assert_array_equal(np.asarray(f.numpy()), t.numpy())
    assert tuple(f.shape) == tuple(t.shape)
    assert str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


def same_view(f, t, base):
    same(f, t)
    assert f._storage is base._storage
    assert f._base is (base if base._base is None else base._base)
    assert f.stride() == t.stride()
    if t.numel():  # numpy puts empty slices at offset 0; torch keeps the start
        assert f.storage_offset() == t.storage_offset()
    if t.numel():  # _tensor._is_contiguous calls empty tensors with odd strides non-contiguous (torch: contiguous)
        assert f.is_contiguous() == t.is_contiguous()


# --- view / reshape --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,new", [((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((2, 3, 4), (4, -1, 2)),
                                       ((0, 3), (3, 0)), ((), (1, 1)), ((1,), ()), ((5,), (5, 1, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_view_contiguous(shape, new, dtype):
    a = arr(shape, dtype)
    f, t = pair(a)
    if new:
        same_view(f.view(*new), t.view(*new), f)
    same_view(f.view(new), t.view(new), f)
    same_view(f.reshape(list(new)), t.reshape(list(new)), f)


@pytest.mark.parametrize("shape,perm,new", [((2, 3, 4), (1, 0, 2), (3, 8)), ((2, 3, 4), (0, 2, 1), (2, 12)),
                                            ((4, 1, 3), (1, 0, 2), (2, 2, 3)), ((2, 3, 4), (0, 2, 1), (2, 4, 3))])
def test_view_noncontiguous(shape, perm, new):
    a = arr(shape)
    f, t = pair(a)
    fp, tp = f.permute(perm), t.permute(perm)
    try:
        tv = tp.view(new)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            fp.view(new)
        same(fp.reshape(new), tp.reshape(new))
        assert fp.reshape(new)._storage is not f._storage
        return
    same_view(fp.view(new), tv, f)
    same_view(fp.reshape(new), tp.reshape(new), f)


def test_view_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        f.view(-1, -1)
    with pytest.raises(RuntimeError, match=r"shape '\[4, 2\]' is invalid for input of size 6"):
        f.view(4, 2)
    with pytest.raises(RuntimeError, match="invalid shape dimension -2"):
        f.view(-2, 3)
    with pytest.raises(RuntimeError, match="can be any value and is ambiguous"):
        fl.zeros(0, 3).view(-1, 0)
    with pytest.raises(RuntimeError, match=r"Use \.reshape"):
        f.t().view(6)


def test_view_writes_and_version():
    f = fl.zeros(2, 3)
    v = f.view(6)
    v2 = v.view(3, 2)
    assert v2._base is f
    v2[1, 1] = 5.0
    assert f[1, 0].item() == 5.0
    assert f._version == v._version == v2._version == 1
    f.add_(1) if hasattr(f, "add_") else f.fill_(1)
    assert v2._version == f._version
    assert v.data_ptr() == f.data_ptr()
    assert f[1].data_ptr() == f.data_ptr() + 3 * 4


def test_view_as_reshape_as():
    f, t = pair(arr((2, 6)))
    same_view(f.view_as(fl.zeros(3, 4)), t.view_as(torch.zeros(3, 4)), f)
    same(f.reshape_as(fl.zeros(4, 3)), t.reshape_as(torch.zeros(4, 3)))


@pytest.mark.parametrize("shape,s,e", [((2, 3, 4), 0, -1), ((2, 3, 4), 1, 2), ((2, 3, 4), -2, -1), ((2, 3), 1, 1),
                                       ((), 0, -1), ((2, 0, 3), 0, 1)])
def test_flatten(shape, s, e):
    f, t = pair(arr(shape))
    same(f.flatten(s, e), t.flatten(s, e))
    fn, tn, _ = noncontig(arr(shape)) if len(shape) >= 2 else (f, t, None)
    same(fl.flatten(fn, s, e), torch.flatten(tn, s, e))


def test_flatten_unflatten_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        f.flatten(1, 0)
    with pytest.raises(RuntimeError, match=r"don't multiply up to the size of dim 1 \(3\)"):
        f.unflatten(1, (2, 2))
    with pytest.raises(IndexError, match="Dimension out of range"):
        f.flatten(0, 5)


@pytest.mark.parametrize("dim,sizes", [(1, (2, 2)), (-1, (2, -1)), (0, (3, 1))])
def test_unflatten(dim, sizes):
    f, t = pair(arr((3, 4)))
    same(f.unflatten(dim, sizes), t.unflatten(dim, sizes))


# --- permutations --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_permute_transpose_t(dtype):
    a = arr((2, 3, 4), dtype)
    f, t = pair(a)
    same_view(f.permute(2, 0, 1), t.permute(2, 0, 1), f)
    same_view(fl.permute(f, (-1, 0, 1)), torch.permute(t, (-1, 0, 1)), f)
    same_view(f.transpose(0, 2), t.transpose(0, 2), f)
    same_view(f.swapaxes(-1, 1), t.swapaxes(-1, 1), f)
    same_view(fl.swapdims(f, 0, 1), torch.swapdims(t, 0, 1), f)
    m, tm = f[0], t[0]
    same_view(m.t(), tm.t(), f)
    same_view(m.T, tm.T, f)
    same_view(f.mT, t.mT, f)
    same_view(f.mH, t.mH, f)
    same_view(m.H, tm.H, f)
    same_view(f[0, 0].t(), t[0, 0].t(), f)
    same_view(f[0, 0, 0].T, t[0, 0, 0].T, f)


def test_permute_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(RuntimeError, match="duplicate dims are not allowed"):
        f.permute(0, 0)
    with pytest.raises(RuntimeError, match="does not match the length"):
        f.permute(0)
    with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= 2 dimensions"):
        fl.zeros(2, 3, 4).t()
    with pytest.raises(RuntimeError, match="mT is only supported on matrices"):
        _ = fl.zeros(3).mT
    with pytest.raises(IndexError, match="Dimension out of range"):
        f.transpose(0, 2)


def test_inplace_views():
    f, t = pair(arr((2, 1, 3)))
    for fo, to in [(f.squeeze_(1), t.squeeze_(1)), (f.unsqueeze_(0), t.unsqueeze_(0)),
                   (f.transpose_(0, 2), t.transpose_(0, 2))]:
        same(fo, to)
        assert f.stride() == t.stride()
    assert f.squeeze_() is f
    g = fl.zeros(2, 3)
    assert g.t_() is g and tuple(g.shape) == (3, 2) and g.stride() == (1, 3)


@pytest.mark.parametrize("src,dst", [(0, 2), (-1, 0), ((0, 1), (2, 0)), ([1], [-1])])
def test_movedim(src, dst):
    f, t = pair(arr((2, 3, 4)))
    same_view(f.movedim(src, dst), t.movedim(src, dst), f)
    same_view(fl.moveaxis(f, src, dst), torch.moveaxis(t, src, dst), f)


def test_movedim_errors():
    with pytest.raises(RuntimeError, match="should contain the same number of dims"):
        fl.zeros(2, 3).movedim((0, 1), (1,))
    with pytest.raises(RuntimeError, match="repeated dim"):
        fl.zeros(2, 3).movedim((0, 0), (1, 0))


# --- expand / broadcasting ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape,size", [((3, 1), (3, 4)), ((1,), (2, 3, 5)), ((2, 1, 3), (-1, 4, -1)), ((), (2, 2)),
                                        ((1, 0), (3, 0)), ((2, 3), (2, 3))])
def test_expand(shape, size):
    f, t = pair(arr(shape))
    same_view(f.expand(*size), t.expand(*size), f)
    same_view(f.expand(size), t.expand(size), f)
    same_view(fl.broadcast_to(f, size), torch.broadcast_to(t, size), f)
    same_view(f.expand_as(fl.zeros(*t.expand(size).shape)), t.expand_as(torch.zeros(t.expand(size).shape)), f)


def test_expand_errors():
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(3\) must match the existing size \(2\) "
                                           r"at non-singleton dimension 0.  Target sizes: \[3, 3\].  "
                                           r"Tensor sizes: \[2, 3\]"):
        fl.zeros(2, 3).expand(3, 3)
    with pytest.raises(RuntimeError, match="the number of sizes provided"):
        fl.zeros(2, 3).expand(3)


def test_broadcast_tensors():
    fs, ts = zip(*(pair(arr(s)) for s in [(3, 1), (1, 4), (4,), ()]))
    for fo, to, fi in zip(fl.broadcast_tensors(*fs), torch.broadcast_tensors(*ts), fs):
        same_view(fo, to, fi)
    with pytest.raises(RuntimeError, match="must match the size"):
        fl.broadcast_tensors(fl.zeros(2), fl.zeros(3))


# --- squeeze / unsqueeze / narrow / select / unfold / as_strided -------------------------------------
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2), (1, 3), 2])
def test_squeeze(dim):
    f, t = pair(arr((1, 3, 1, 1)))
    ref = t.squeeze() if dim is None else t.squeeze(dim)
    same_view(f.squeeze() if dim is None else f.squeeze(dim), ref, f)
    same_view(fl.squeeze(f, dim), ref, f)


def test_squeeze_0d_and_errors():
    f, t = pair(np.float32(3.0))
    same(f.squeeze(0), t.squeeze(0))
    same(f.unsqueeze(-1), t.unsqueeze(-1))
    with pytest.raises(IndexError, match="Dimension out of range"):
        fl.zeros(2, 3).squeeze(5)
    with pytest.raises(IndexError, match="Dimension out of range"):
        fl.zeros(2, 3).unsqueeze(3 + 1)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_unsqueeze(dim):
    f, t = pair(arr((2, 3)))
    same_view(f.unsqueeze(dim), t.unsqueeze(dim), f)
    fn, tn, _ = noncontig(arr((2, 3)))
    same(fl.unsqueeze(fn, dim), torch.unsqueeze(tn, dim))


@pytest.mark.parametrize("dim,start,length", [(0, 0, 2), (1, 1, 2), (-1, -3, 3), (1, 3, 0), (0, -1, 1)])
def test_narrow(dim, start, length):
    f, t = pair(arr((3, 4)))
    same_view(f.narrow(dim, start, length), t.narrow(dim, start, length), f)
    fn, tn, _ = noncontig(arr((4, 3)))
    same(fn.narrow(dim, start, length), tn.narrow(dim, start, length))


def test_narrow_select_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"start \(2\) \+ length \(3\) exceeds dimension size \(3\)"):
        f.narrow(1, 2, 3)
    with pytest.raises(IndexError, match=r"select\(\): index 4 out of range for tensor of size \[2, 3\] at "
                                         r"dimension 1"):
        f.select(1, 4)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 1 is 3 but size is 4"):
        f.unfold(1, 4, 1)


@pytest.mark.parametrize("dim,index", [(0, 1), (1, -1), (-1, 0), (2, 3)])
def test_select(dim, index):
    f, t = pair(arr((2, 3, 4)))
    same_view(f.select(dim, index), t.select(dim, index), f)
    same_view(fl.select(f.transpose(0, 2), dim, index % 2), torch.select(t.transpose(0, 2), dim, index % 2), f)


@pytest.mark.parametrize("shape,dim,size,step", [((10,), 0, 3, 2), ((4, 7), 1, 2, 3), ((4, 7), 0, 4, 1),
                                                 ((3, 5), -1, 5, 1), ((), 0, 1, 1), ((5, 2), 0, 0, 1)])
def test_unfold(shape, dim, size, step):
    f, t = pair(arr(shape))
    same_view(f.unfold(dim, size, step), t.unfold(dim, size, step), f)
    if len(shape) == 2:
        fn, tn, _ = noncontig(arr(shape[::-1]))
        same(fn.unfold(dim, size, step), tn.unfold(dim, size, step))


def test_as_strided():
    f, t = pair(arr((4, 5)))
    same_view(f.as_strided((3, 3), (5, 1), 2), t.as_strided((3, 3), (5, 1), 2), f)
    same_view(fl.as_strided(f[1:], (2, 2), (1, 1)), torch.as_strided(t[1:], (2, 2), (1, 1)), f)
    with pytest.raises(RuntimeError, match="out of bounds for storage of size"):
        f.as_strided((3, 3), (1, 1), 30)


# --- split family ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind_split_chunk(dim):
    f, t = pair(arr((5, 7)))
    for fo, to in zip(f.unbind(dim), t.unbind(dim), strict=True):
        same_view(fo, to, f)
    for arg in [1, 2, 3, 10]:
        for fo, to in zip(f.split(arg, dim), t.split(arg, dim), strict=True):
            same_view(fo, to, f)
    sizes = [2, 3] if f.shape[dim] == 5 else [3, 0, 4]
    for fo, to in zip(fl.split(f, sizes, dim), torch.split(t, sizes, dim), strict=True):
        same_view(fo, to, f)
    for n in [1, 2, 3, 4, 6, 8]:
        for fo, to in zip(f.chunk(n, dim), t.chunk(n, dim), strict=True):
            same_view(fo, to, f)
    for ios in [1, 3, 4, 9, [1, 3], [-2, 10], [4, 2], [0]]:
        for fo, to in zip(f.tensor_split(ios, dim), t.tensor_split(ios, dim), strict=True):
            same_view(fo, to, f)


def test_split_errors():
    f = fl.zeros(2, 3)
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 2"):
        f.split([1, 2], 0)
    with pytest.raises(RuntimeError, match="chunk expects `chunks` to be greater than 0, got: 0"):
        f.chunk(0)


def test_empty_split():
    f, t = pair(np.zeros((0, 3), np.float32))
    for fo, to in zip(f.split(2), t.split(2), strict=True):
        same(fo, to)
    for fo, to in zip(f.chunk(2), t.chunk(2), strict=True):
        same(fo, to)


# --- cat / stack ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.int64, np.float32), (np.uint8, np.bool_),
                                    (np.int32, np.float64)])
def test_cat_stack(dim, dtypes):
    a, b = arr((2, 3), dtypes[0]), arr((2, 3), dtypes[1], seed=1)
    (fa, ta), (fb, tb) = pair(a), pair(b)
    same(fl.cat([fa, fb], dim), torch.cat([ta, tb], dim))
    same(fl.concat((fa, fb.t().t()), dim), torch.concat((ta, tb), dim))
    same(fl.concatenate([fa.t(), fb.t()], dim), torch.concatenate([ta.t(), tb.t()], dim))
    same(fl.stack([fa, fb], dim), torch.stack([ta, tb], dim))
    same(fl.stack([fa, fb.t().t()], 2), torch.stack([ta, tb], 2))


def test_cat_legacy_empty_and_errors():
    f, t = pair(arr((2, 3)))
    same(fl.cat([f, fl.zeros(0)]), torch.cat([t, torch.zeros(0)]))
    same(fl.cat([fl.zeros(0, 3), f]), torch.cat([torch.zeros(0, 3), t]))
    with pytest.raises(ValueError, match="expected a non-empty list of Tensors"):
        fl.cat([])
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0. Expected size 3 but got "
                                           "size 4 for tensor number 1 in the list."):
        fl.cat([f, fl.zeros(2, 4)])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        fl.cat([fl.tensor(1.0), fl.tensor(2.0)])
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 "
                                           r"and \[3, 3\] at entry 1"):
        fl.stack([f, fl.zeros(3, 3)])
    with pytest.raises(TypeError, match="must be tuple of Tensors"):
        fl.cat(f)


@pytest.mark.parametrize("shapes", [[(3,), (3,)], [(2, 3), (2, 3)], [(), ()], [(2, 3, 4), (2, 3, 4)], [(3,), (3, 1)]])
def test_hvd_column_stack(shapes):
    fs, ts = zip(*(pair(arr(s, seed=i)) for i, s in enumerate(shapes)))
    for name in ["hstack", "vstack", "dstack", "column_stack", "row_stack"]:
        try:
            ref = getattr(torch, name)(ts)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                getattr(fl, name)(fs)
            continue
        same(getattr(fl, name)(fs), ref)


# --- repeat / tile / repeat_interleave --------------------------------------------------------------
@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 2)), ((2, 3), (1, 2, 3)), ((), (3,)), ((3,), (0, 2)),
                                        ((2, 1, 2), (1, 3, 1))])
def test_repeat_tile(shape, reps):
    f, t = pair(arr(shape))
    same(f.repeat(*reps), t.repeat(*reps))
    same(f.repeat(reps), t.repeat(reps))
    same(fl.tile(f, reps[1:]), torch.tile(t, reps[1:]))
    same(f.tile(reps), t.tile(reps))
    if len(shape) >= 2:
        fn, tn, _ = noncontig(arr(shape))
        same(fn.repeat(reps), tn.repeat(reps))
    with pytest.raises(RuntimeError, match="can not be smaller than number of dimensions"):
        fl.zeros(2, 3).repeat(2)


def test_repeat_interleave():
    f, t = pair(arr((2, 3)))
    same(f.repeat_interleave(2), t.repeat_interleave(2))
    same(f.repeat_interleave(2, dim=1), t.repeat_interleave(2, dim=1))
    same(fl.repeat_interleave(f, fl.tensor([1, 0, 3]), dim=-1),
         torch.repeat_interleave(t, torch.tensor([1, 0, 3]), dim=-1))
    same(fl.repeat_interleave(fl.tensor([2, 0, 1])), torch.repeat_interleave(torch.tensor([2, 0, 1])))
    same(f.repeat_interleave(fl.tensor(2), dim=0), t.repeat_interleave(torch.tensor(2), dim=0))
    with pytest.raises(RuntimeError, match="repeats must have the same size as input along dim"):
        f.repeat_interleave(fl.tensor([1, 2]), dim=1)
    with pytest.raises(RuntimeError, match="negative"):
        f.repeat_interleave(-1)


# --- flips / roll / rot90 / tril / triu -----------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_roll_rot90(dtype):
    a = arr((3, 4, 2), dtype)
    f, t = pair(a)
    fn, tn, _ = noncontig(a)
    for dims in [(0,), (1, 2), (-1,), (0, 1, 2), ()]:
        same(f.flip(dims), t.flip(dims))
        same(fl.flip(fn, dims), torch.flip(tn, dims))
    assert f.flip(0)._storage is not f._storage
    same(fl.fliplr(f), torch.fliplr(t))
    same(fl.flipud(fn), torch.flipud(tn))
    for shifts, dims in [(1, 0), (-2, 1), ((1, 2), (0, 2)), (5, None), (3, -1)]:
        same(f.roll(shifts, dims), t.roll(shifts, dims))
        same(fl.roll(fn, shifts, dims), torch.roll(tn, shifts, dims))
    for k in [-1, 0, 1, 2, 3, 5]:
        same(f.rot90(k, (0, 1)), t.rot90(k, (0, 1)))
        same(fn.rot90(k, (2, 0)), tn.rot90(k, (2, 0)))


def test_flip_rot90_errors():
    with pytest.raises(RuntimeError, match="dims has duplicates"):
        fl.zeros(2, 3).flip(0, 0)
    with pytest.raises(RuntimeError, match="expected total rotation dims == 2"):
        fl.zeros(2, 3).rot90(1, (0,))
    with pytest.raises(RuntimeError, match="expected rotation dims to be different"):
        fl.zeros(2, 3).rot90(1, (0, 0))
    with pytest.raises(RuntimeError, match="Input must be >= 2-d"):
        fl.fliplr(fl.zeros(3))


@pytest.mark.parametrize("diag", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 3, 4), (0, 3)])
def test_tril_triu(shape, diag):
    f, t = pair(arr(shape))
    same(f.tril(diag), t.tril(diag))
    same(fl.triu(f, diag), torch.triu(t, diag))
    same(fl.triu(f.mT, diagonal=diag), torch.triu(t.mT, diagonal=diag))
    g, u = f.clone(), t.clone()
    v = g._version
    g.tril_(diag)
    u.tril_(diag)
    same(g, u)
    assert g._version == v + 1
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        fl.tril(fl.zeros(3))


# --- pad / one_hot ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("p", [(1, 2), (2, 0, 1, 1), (0, 0, 0, 2, 1, 1)])
def test_pad(mode, p):
    a = arr((2, 3, 4))
    f, t = pair(a)
    if mode != "constant" and len(p) == 6:
        ref = torch.nn.functional.pad(t[None], p, mode=mode)[0]
    else:
        ref = torch.nn.functional.pad(t, p, mode=mode) if mode != "constant" else \
            torch.nn.functional.pad(t, p, mode=mode, value=2.5)
    same(pad(f, p, mode) if mode != "constant" else pad(f, p, mode, 2.5), ref)


def test_pad_negative_and_errors():
    f, t = pair(arr((3, 4)))
    same(pad(f, (-1, 2, 0, -2)), torch.nn.functional.pad(t, (-1, 2, 0, -2)))
    with pytest.raises(RuntimeError, match="divisible by 2"):
        pad(f, (1,))
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        pad(f, (4, 4), "reflect")
    with pytest.raises(NotImplementedError):
        pad(f, (1, 1), "bogus")


def test_one_hot():
    f, t = pair(np.array([[0, 2], [1, 4]], np.int64))
    same(one_hot(f), torch.nn.functional.one_hot(t))
    same(one_hot(f, 6), torch.nn.functional.one_hot(t, 6))
    with pytest.raises(RuntimeError, match="LongTensor"):
        one_hot(fl.tensor([1, 2], dtype=fl.int32))
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        one_hot(f, 3)
    with pytest.raises(RuntimeError, match="non-negative"):
        one_hot(fl.tensor([-1]))
    with pytest.raises(RuntimeError, match="Can not infer total number of classes from empty tensor"):
        one_hot(fl.zeros(0, dtype=fl.int64))
    assert not hasattr(fl, "one_hot") and not hasattr(fl, "pad")


# --- sorting -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("dim", [0, -1, 1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort(dtype, dim, descending):
    a = (arr((5, 6, 3), dtype) if dtype is np.bool_ else (arr((5, 6, 3)) * 0.5).round().astype(dtype))
    f, t = pair(a)
    fs, ts = f.sort(dim=dim, descending=descending, stable=True), t.sort(dim=dim, descending=descending, stable=True)
    same(fs.values, ts.values)
    same(fs.indices, ts.indices)
    fv, fi = fl.sort(f.transpose(0, 1), dim, descending)
    tv, ti = torch.sort(t.transpose(0, 1), dim=dim, descending=descending, stable=True)
    same(fv, tv)
    same(fi, ti)
    same(f.argsort(dim, descending), t.argsort(dim=dim, descending=descending, stable=True))
    same(fl.argsort(f, dim=dim, descending=descending, stable=True),
         torch.argsort(t, dim=dim, descending=descending, stable=True))


def test_sort_nan_and_0d():
    f, t = pair(np.array([3.0, np.nan, -1.0, np.nan, 2.0], np.float32))
    for desc in [False, True]:
        fs, ts = f.sort(descending=desc), t.sort(descending=desc, stable=True)
        same(fs.values, ts.values)
        same(fs.indices, ts.indices)
    f0, t0 = pair(np.float32(2.0))
    same(f0.sort().values, t0.sort().values)
    same(f0.sort().indices, t0.sort().indices)
    fe, te = pair(np.zeros((0, 3), np.float32))
    same(fe.sort(0).values, te.sort(0).values)
    same(fl.msort(f), torch.msort(t))


@pytest.mark.parametrize("k,dim,largest", [(1, -1, True), (3, -1, False), (2, 0, True), (0, 1, True), (4, 1, False)])
def test_topk_kthvalue(k, dim, largest):
    a = np.random.default_rng(0).permutation(60).reshape(3, 4, 5).astype(np.float32)
    f, t = pair(a)
    fv, fi = f.topk(k, dim, largest)
    tv, ti = t.topk(k, dim, largest)
    same(fv, tv)
    same(fi, ti)
    if k >= 1:
        for keep in [False, True]:
            fk, tk = f.kthvalue(k, dim, keep), t.kthvalue(k, dim, keep)
            same(fk.values, tk.values)
            same(fk.indices, tk.indices)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        f.topk(9, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_unique(dtype):
    a = (np.random.default_rng(0).integers(0, 4, (4, 5))).astype(dtype)
    f, t = pair(a)
    same(f.unique(), t.unique())
    for inv in [False, True]:
        for cnt in [False, True]:
            r, tr = fl.unique(f, return_inverse=inv, return_counts=cnt), \
                torch.unique(t, return_inverse=inv, return_counts=cnt)
            for x, y in zip(r if isinstance(r, tuple) else (r,), tr if isinstance(tr, tuple) else (tr,), strict=True):
                same(x, y)
            r, tr = fl.unique(f, return_inverse=inv, return_counts=cnt, dim=0), \
                torch.unique(t, return_inverse=inv, return_counts=cnt, dim=0)
            for x, y in zip(r if isinstance(r, tuple) else (r,), tr if isinstance(tr, tuple) else (tr,), strict=True):
                same(x, y)


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_consecutive(dim):
    a = np.array([[1, 1, 2], [1, 1, 2], [3, 3, 3], [1, 1, 2]], np.int64)
    f, t = pair(a)
    r = fl.unique_consecutive(f, return_inverse=True, return_counts=True, dim=dim)
    tr = torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=dim)
    for x, y in zip(r, tr, strict=True):
        same(x, y)
    same(f.unique_consecutive(dim=dim), t.unique_consecutive(dim=dim))


def test_table_flags():
    from flambeau._ops._registry import get_op

    for name in ["view", "permute", "transpose", "expand", "squeeze", "unsqueeze", "narrow", "select", "unfold",
                 "as_strided", "split", "chunk", "unbind"]:
        assert get_op(name).view, name
    for name in ["argsort", "unique", "one_hot"]:
        assert not get_op(name).differentiable
    assert get_op("pad").fn is pad and not get_op("pad").function


@pytest.mark.parametrize("name,shape,arg", [("hsplit", (4, 6), 3), ("hsplit", (6,), [1, 4]), ("vsplit", (4, 6), 2),
                                            ("dsplit", (2, 3, 4), [1]), ("vsplit", (4, 6), [3, 1])])
def test_direction_splits(name, shape, arg):
    f, t = pair(arr(shape))
    for fo, to in zip(getattr(fl, name)(f, arg), getattr(torch, name)(t, arg), strict=True):
        same_view(fo, to, f)
    with pytest.raises(RuntimeError, match="requires a tensor with at least"):
        getattr(fl, name)(fl.zeros(()), 1)


def test_split_with_sizes_adjoint():
    f, t = pair(arr((5, 3)))
    for fo, to in zip(f.split_with_sizes([2, 3]), t.split_with_sizes([2, 3]), strict=True):
        same_view(fo, to, f)
    same_view(f.adjoint(), t.adjoint(), f)
    same_view(fl.adjoint(f), torch.adjoint(t), f)
    same_view(f.unflatten(0, (5, 1)), t.unflatten(0, (5, 1)), f)
    same_view(f.t().unflatten(1, (5, 1)), t.t().unflatten(1, (5, 1)), f)


@pytest.mark.parametrize("call", [lambda: fl.cat([]), lambda: fl.stack([]), lambda: fl.hsplit(fl.zeros(()), 1),
                                  lambda: fl.vsplit(fl.zeros(3, 2), 2), lambda: fl.dsplit(fl.zeros(2, 2), 2)],
                         ids=["cat", "stack", "hsplit", "vsplit", "dsplit"])
def test_messages_say_flambeau_not_torch(call):
    with pytest.raises((ValueError, RuntimeError)) as info:
        call()
    assert "torch" not in str(info.value) and "flambeau." in str(info.value)


def test_repeat_too_large_names_repeats_and_bytes():
    with pytest.raises(RuntimeError, match=r"^repeat\(\): not enough memory: you tried to allocate 80000000000000 "
                                           r"bytes \(repeats=\[10000000000000, 1\] of a tensor of size \[2\], dtype "
                                           r"flambeau.float32\)$"):
        fl.ones(2).repeat(10 ** 13, 1)


def test_unique_keeps_every_nan_apart_as_torch():
    import torch

    values = [2.0, float("nan"), 1.0, float("nan"), 2.0]
    got = fl.unique(fl.tensor(values), return_inverse=True, return_counts=True)
    want = torch.unique(torch.tensor(values), return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
