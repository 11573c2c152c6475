"""torch's keyword forms of operator calls (Note [torch's keyword forms]): numpy's ``axis=``/``keepdims=``, the
schema's own keyword names, and ``out=``, each against torch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops import OPS
from flambeau._ops._keywords import schema_params
from flambeau._ops._modes import DispatchMode

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((4, 5)).astype(np.float32)


def both(*arrays):
    return [fl.from_numpy(a.copy()) for a in arrays], [torch.from_numpy(a.copy()) for a in arrays]


def same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert tuple(got.shape) == tuple(want.shape)


# (what, call(lib, x)) with numpy's keyword names, the same text for both libraries
NUMPY_NAMES = {
    "sum axis": lambda lib, x: lib.sum(x, axis=1),
    "sum keepdims": lambda lib, x: lib.sum(x, axis=0, keepdims=True),
    "method sum": lambda lib, x: x.sum(axis=1, keepdims=True),
    "mean": lambda lib, x: x.mean(axis=0),
    "amax": lambda lib, x: lib.amax(x, axis=1, keepdims=True),
    "argmax": lambda lib, x: lib.argmax(x, axis=1),
    "max values, indices": lambda lib, x: tuple(lib.max(x, axis=1, keepdims=True)),
    "std": lambda lib, x: x.std(axis=0, keepdims=True),
    "var": lambda lib, x: lib.var(x, axis=1),
    "logsumexp": lambda lib, x: lib.logsumexp(x, axis=1),
    "any": lambda lib, x: lib.any(x > 0, axis=0),
    "cumsum": lambda lib, x: x.cumsum(axis=1),
    "softmax": lambda lib, x: lib.softmax(x, axis=1),
    "cat": lambda lib, x: lib.cat([x, x], axis=1),
    "squeeze": lambda lib, x: x[None].squeeze(axis=0),
}


@pytest.mark.parametrize("case", sorted(NUMPY_NAMES))
def test_numpy_keyword_names(case):
    (x,), (tx,) = both(A)
    got, want = NUMPY_NAMES[case](fl, x), NUMPY_NAMES[case](torch, tx)
    same(got, want)


# the schema's keyword names where flambeau's front names the parameter otherwise
SCHEMA_NAMES = {
    "pow exponent": lambda lib, a, b, m: lib.pow(a, exponent=2),
    "method pow": lambda lib, a, b, m: a.pow(exponent=3),
    "float_power": lambda lib, a, b, m: lib.float_power(a, exponent=2),
    "mm mat2": lambda lib, a, b, m: lib.mm(a, mat2=b),
    "method mm": lambda lib, a, b, m: a.mm(mat2=b),
    "mv vec": lambda lib, a, b, m: lib.mv(a, vec=b[:, 0]),
    "bmm mat2": lambda lib, a, b, m: lib.bmm(a[None], mat2=b[None]),
    "addmm": lambda lib, a, b, m: lib.addmm(m, mat1=a, mat2=b, beta=0.5),
    "addmv": lambda lib, a, b, m: lib.addmv(m[:, 0], mat=a, vec=b[:, 0]),
    "baddbmm": lambda lib, a, b, m: lib.baddbmm(m[None], batch1=a[None], batch2=b[None]),
    "max other": lambda lib, a, b, m: lib.max(a, other=a.flip(0)),
    "min other": lambda lib, a, b, m: a.min(other=a.flip(1)),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_NAMES))
def test_schema_keyword_names(case):
    m = RNG.standard_normal((3, 5)).astype(np.float32)
    ours, theirs = both(A, B, m)
    same(SCHEMA_NAMES[case](fl, *ours), SCHEMA_NAMES[case](torch, *theirs))


def test_a_keyword_given_twice_is_refused():
    x = fl.from_numpy(A)
    with pytest.raises(TypeError, match="sum.*multiple values for argument 'dim'"):
        fl.sum(x, dim=0, axis=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'axes'"):
        fl.sum(x, axes=0)  # (what neither library takes stays an error)


# out= on function variants: (call(lib, x, y, out=...), the out tensors' (shape, dtype name))
OUT = {
    "add": (lambda lib, x, y, out: lib.add(x, y, alpha=2, out=out), [((3, 4), "float32")]),
    "mul into float64": (lambda lib, x, y, out: lib.mul(x, y, out=out), [((3, 4), "float64")]),
    "matmul": (lambda lib, x, y, out: lib.matmul(x, y.T, out=out), [((3, 3), "float32")]),
    "sum dim": (lambda lib, x, y, out: lib.sum(x, 1, out=out), [((3,), "float32")]),
    "cat": (lambda lib, x, y, out: lib.cat([x, y], 0, out=out), [((6, 4), "float32")]),
    "where": (lambda lib, x, y, out: lib.where(x > 0, x, y, out=out), [((3, 4), "float32")]),
    "max dim": (lambda lib, x, y, out: lib.max(x, 1, out=out), [((3,), "float32"), ((3,), "int64")]),
    "sort": (lambda lib, x, y, out: lib.sort(x, 1, out=out), [((3, 4), "float32"), ((3, 4), "int64")]),
    "comparison": (lambda lib, x, y, out: lib.gt(x, y, out=out), [((3, 4), "bool")]),
    "empty out resized": (lambda lib, x, y, out: lib.sub(x, y, out=out), [((0,), "float32")]),
}


@pytest.mark.parametrize("case", sorted(OUT))
def test_out_keyword(case):
    call, outs = OUT[case]
    y = RNG.standard_normal((3, 4)).astype(np.float32)
    (x, yy), (tx, ty) = both(A, y)
    ours = [fl.empty(*shape, dtype=getattr(fl, dt)) for shape, dt in outs]
    theirs = [torch.empty(*shape, dtype=getattr(torch, dt)) for shape, dt in outs]
    given, given_t = (ours[0], theirs[0]) if len(outs) == 1 else (tuple(ours), tuple(theirs))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (an empty out is resized without a warning)
        got, want = call(fl, x, yy, given), call(torch, tx, ty, given_t)
    if len(outs) == 1:
        assert got is ours[0]
    else:
        assert all(g is o for g, o in zip(got, ours)) and got.values is ours[0] and want.values is theirs[0]
    same(got, want)
    for o, t in zip(ours, theirs):
        same(o, t)
        assert o.dtype.scalar_name == {torch.float32: "Float", torch.float64: "Double", torch.int64: "Long",
                                       torch.bool: "Bool"}[t.dtype]


def test_out_aliasing_an_input():
    (x, y), (tx, ty) = both(A, A[::-1].copy())
    fl.add(x, y, out=x)
    torch.add(tx, ty, out=tx)
    same(x, tx)


def test_out_of_another_shape_is_resized_with_torchs_warning():
    (x,), (tx,) = both(A)
    out, tout = fl.empty(5), torch.empty(5)
    with pytest.warns(UserWarning, match=r"resized since it had shape \[5\]") as ours:
        fl.neg(x, out=out)
    with pytest.warns(UserWarning) as theirs:
        torch.neg(tx, out=tout)
    assert str(theirs[0].message).startswith(str(ours[0].message))  # (torch's names its C++ source after it)
    same(out, tout)


def _message(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


def test_out_errors_are_torchs():
    (x,), (tx,) = both(A)
    long_out, tlong_out = fl.empty(3, 4, dtype=fl.int64), torch.empty(3, 4, dtype=torch.int64)
    assert _message(lambda: fl.add(x, 1, out=long_out)) == _message(lambda: torch.add(tx, 1, out=tlong_out))
    x.requires_grad_()
    tx.requires_grad_()
    ours = _message(lambda: fl.mul(x, 2, out=fl.empty(3, 4)))
    assert ours == _message(lambda: torch.mul(tx, 2, out=torch.empty(3, 4)))
    with fl.no_grad():  # (without grad mode nothing would be recorded: allowed, as in torch)
        out = fl.mul(x, 2, out=fl.empty(3, 4))
    same(out, (tx * 2).detach())
    with pytest.raises(TypeError, match="argument 'out' must be Tensor, not list"):
        fl.neg(x.detach(), out=[fl.empty(3, 4)])
    with pytest.raises(TypeError, match="must be a tuple of 2 Tensors"):
        fl.max(x.detach(), 1, out=fl.empty(3))
    assert fl.neg(x.detach(), out=None).shape == (3, 4)


def test_out_is_not_taken_where_torch_takes_none():
    x = fl.from_numpy(A)
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        x.add(1, out=fl.empty(3, 4))  # (methods take no out=, as torch's)
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        fl.nn.functional.conv2d(x[None, None], x[None, None, :1, :1], out=fl.empty(1))


class Names(DispatchMode):
    def __init__(self):
        self.kwargs = []

    def dispatch(self, name, fn, args, kwargs):
        self.kwargs.append((name, sorted(kwargs)))
        return fn(*args, **kwargs)


def test_dispatch_modes_see_the_schemas_names():
    x = fl.from_numpy(A)
    with Names() as mode:
        got = x.sum(axis=0, keepdims=True)
        fl.mm(x, mat2=x.T)
    assert mode.kwargs == [("sum", ["dim", "keepdim"]), ("mm", ["other"])]
    np.testing.assert_allclose(got.numpy(), A.sum(0, keepdims=True), rtol=1e-6)
    assert fl.sum is OPS["sum"].bindings[0]  # put back


def test_schema_params():
    assert schema_params("split(Tensor(a -> *) tensor, SymInt[] split_size_or_sections, int dim=0) -> Tensor(a)[]") \
        == ("tensor", "split_size_or_sections", "dim")
    assert schema_params("var(Tensor input, int[1]? dim=None, *, Scalar? correction=1, bool keepdim=False) -> Tensor") \
        == ("input", "dim", "correction", "keepdim")
