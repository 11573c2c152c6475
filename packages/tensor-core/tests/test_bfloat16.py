"""bfloat16 (flambeau/_dtype.py and the float32 routing of the CPU kernels) against torch's bfloat16:
values (bitwise, or within one bfloat16 ulp where torch's kernel rounds differently), result dtypes,
promotion with every dtype, conversions, printing, autograd and checkpoints."""

from __future__ import annotations

import io
import itertools

import ml_dtypes
import numpy as np
import pytest

import flambeau as fl
import flambeau.nn.functional as F
from flambeau import _dtype as dt

torch = pytest.importorskip("torch")

BF16 = dt.bfloat16
NAMES = [d.name for d in dt.ALL_DTYPES]
DATA = [[1.1, -2.3, 3.7, 0.5], [0.1, 1e-3, 7.25, -0.75], [2.0, -1.5, 0.3, 4.4]]


def _pair(data=DATA):
    return fl.tensor(data, dtype=BF16), torch.tensor(data, dtype=torch.bfloat16)


def _same(r, t, ulps: int = 0):
    """``r`` (flambeau) equals ``t`` (torch) in dtype and value, or within ``ulps`` bfloat16 ulps."""
    assert r.dtype.name == str(t.dtype).split(".")[1]
    a = r.float().numpy() if r.dtype is BF16 else r.numpy()
    b = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
    if r.dtype is not BF16 and r.dtype.is_floating_point:  # float32 results: numpy's and torch's libm
        np.testing.assert_allclose(a, b, rtol=1e-6)
    elif ulps == 0:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=ulps * 2.0 ** -7, atol=1e-6)


# --- the dtype ----------------------------------------------------------------------------------
def test_dtype_attributes():
    assert BF16.is_floating_point and not BF16.is_complex and BF16.is_signed
    assert BF16.itemsize == 2 and BF16.scalar_name == "BFloat16"
    assert BF16.to_numpy() == np.dtype(ml_dtypes.bfloat16)
    assert BF16.compute is dt.float32
    assert dt.to_dtype("bfloat16") is BF16 and dt.to_dtype(ml_dtypes.bfloat16) is BF16
    assert dt.from_numpy_dtype(np.dtype(ml_dtypes.bfloat16)) is BF16
    assert "bfloat16" in dt.__all__


@pytest.mark.parametrize("a,b", list(itertools.product(NAMES, NAMES)))
def test_promote_types_matches_torch(a, b):
    assert dt.promote_types(getattr(dt, a), getattr(dt, b)).name == \
        str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[1]
    assert dt.can_cast(getattr(dt, a), getattr(dt, b)) == torch.can_cast(getattr(torch, a), getattr(torch, b))


@pytest.mark.parametrize("other", [2, 2.5, True, "f16", "f32-0dim", "i64"])
def test_result_type_with_scalars_and_tensors(other):
    x = fl.ones(2, dtype=BF16)
    tx = torch.ones(2, dtype=torch.bfloat16)
    o, to = {"f16": (fl.ones(2, dtype=fl.float16), torch.ones(2, dtype=torch.float16)),
             "f32-0dim": (fl.tensor(1.0), torch.tensor(1.0)),
             "i64": (fl.ones(2, dtype=fl.int64), torch.ones(2, dtype=torch.int64))}.get(other, (other, other))
    assert (x + o).dtype.name == str((tx + to).dtype).split(".")[1]


# --- creation, conversion, printing -------------------------------------------------------------
def test_creation_and_conversions():
    x, t = _pair()
    _same(x, t)
    for f in ("zeros", "ones", "empty"):
        assert getattr(fl, f)(2, 3, dtype=BF16).dtype is BF16
    _same(fl.full((2,), 1.7, dtype=BF16), torch.full((2,), 1.7, dtype=torch.bfloat16))
    _same(fl.arange(0, 1, 0.25, dtype=BF16), torch.arange(0, 1, 0.25, dtype=torch.bfloat16))
    _same(fl.tensor(DATA).to(BF16), torch.tensor(DATA).to(torch.bfloat16))
    _same(x.to(fl.float32), t.to(torch.float32))
    _same(x.to(fl.float16), t.to(torch.float16))
    _same(x.to(fl.int64), t.to(torch.int64))
    assert x.numpy().dtype == np.dtype(ml_dtypes.bfloat16)  # torch has no numpy bfloat16; ml_dtypes does
    assert fl.from_numpy(np.ones(3, ml_dtypes.bfloat16)).dtype is BF16
    assert fl.tensor(np.ones(3, ml_dtypes.bfloat16)).dtype is BF16
    assert fl.tensor(2.5, dtype=BF16).item() == 2.5 and isinstance(fl.tensor(2.5, dtype=BF16).item(), float)
    assert x.tolist() == t.tolist()


@pytest.mark.parametrize("data", [DATA, [1.123456, 3.0], 2.5, [1e-5, 3e8], [[1.0, 2.0]]])
def test_repr_matches_torch(data):
    expected = repr(torch.tensor(data, dtype=torch.bfloat16)).replace("torch.", "flambeau.")
    assert repr(fl.tensor(data, dtype=BF16)) == expected


# --- compute: float32 kernels, rounded once ---------------------------------------------------------
UNARY = ["neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "reciprocal", "floor", "round",
         "relu", "square", "expm1", "log1p", "atan", "sign", "isnan"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_bitwise(name):
    x, t = _pair()
    x, t = x.abs() + 0.1, t.abs() + 0.1  # in every operator's domain
    _same(getattr(x, name)(), getattr(t, name)())


def test_rsqrt_within_one_ulp():
    x, t = _pair()
    _same((x.abs() + 0.1).rsqrt(), (t.abs() + 0.1).rsqrt(), ulps=1)  # torch's rsqrt is not 1 / sqrt


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "remainder", "atan2", "lt", "eq"])
@pytest.mark.parametrize("other", ["tensor", "scalar", "float32"])
def test_binary_bitwise(name, other):
    x, t = _pair()
    y, ty = {"tensor": (x.flip(0) + 0.5, t.flip(0) + 0.5), "scalar": (1.5, 1.5),
             "float32": (fl.tensor(DATA) * 0.3, torch.tensor(DATA) * 0.3)}[other]
    if name in ("atan2", "maximum") and other == "scalar":  # torch takes tensors only
        y, ty = fl.full((4,), 1.5, dtype=BF16), torch.full((4,), 1.5, dtype=torch.bfloat16)
    _same(getattr(fl, name)(x, y), getattr(torch, name)(t, ty))


def test_inplace_keeps_bfloat16():
    x, t = _pair()
    x.mul_(1.001).add_(fl.ones(4))
    t.mul_(1.001).add_(torch.ones(4))
    _same(x, t)


@pytest.mark.parametrize("call", [
    lambda L, x: x.sum(), lambda L, x: x.sum(1), lambda L, x: x.mean(0), lambda L, x: x.prod(),
    lambda L, x: x.var(), lambda L, x: x.std(1), lambda L, x: x.norm(), lambda L, x: x.max(),
    lambda L, x: x.amax(1), lambda L, x: x.argmax(), lambda L, x: x.cumsum(1), lambda L, x: x.logsumexp(1),
    lambda L, x: x.clamp(-1, 2), lambda L, x: L.where(x > 1, x, 0), lambda L, x: x.lerp(x * 2, 0.3),
    lambda L, x: x.addcmul(x, x),
], ids=["sum", "sum1", "mean0", "prod", "var", "std1", "norm", "max", "amax1", "argmax", "cumsum", "logsumexp",
        "clamp", "where", "lerp", "addcmul"])
def test_reductions_and_misc_bitwise(request, call):
    x, t = _pair()
    # prod: torch's vectorised product rounds in another order
    one_ulp = request.node.callspec.id == "prod"
    _same(call(fl, x), call(torch, t), ulps=int(one_ulp))


@pytest.mark.parametrize("call", [
    lambda L, F_, x: x @ x.mT, lambda L, F_, x: L.mm(x, x.mT), lambda L, F_, x: L.bmm(x[None], x.mT[None]),
    lambda L, F_, x: L.mv(x, x[0]), lambda L, F_, x: L.dot(x[0], x[1]),
    lambda L, F_, x: L.addmm(x[:, :3], x, x.mT[:, :3]), lambda L, F_, x: F_.linear(x, x[:2], x[0, :2]),
    lambda L, F_, x: L.einsum("ij,kj->ik", x, x), lambda L, F_, x: L.tensordot(x, x, dims=([1], [1])),
    lambda L, F_, x: L.trace(x[:, :3]),
    lambda L, F_, x: F_.conv1d(x[None, :2], x[:2, None, :3].expand(2, 2, 3).contiguous()),
], ids=["matmul", "mm", "bmm", "mv", "dot", "addmm", "linear", "einsum", "tensordot", "trace", "conv1d"])
def test_products_accumulate_in_float32(call):
    x, t = _pair()
    _same(call(fl, F, x), call(torch, torch.nn.functional, t))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_is_the_float32_result_rounded_once(name):
    """Every step in float32, one rounding (Note [bfloat16 through float32]); torch's bfloat16 kernels
    round in steps (4 ulps off for softmax; log_softmax gives 0.0 for -0.00183 in DATA's second row)."""
    x, t = _pair()
    got = getattr(x, name)(1)
    want = getattr(x.float(), name)(1).to(BF16)
    assert got.dtype is BF16 and str(getattr(t, name)(1).dtype) == "torch.bfloat16"
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


# --- autograd ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("graph", ["elementwise", "matmul"])
def test_gradients_flow_through_bfloat16_to_float32_leaves(graph):
    def loss(lib, x, w):
        a, b = x.to(lib.bfloat16), w.to(lib.bfloat16)
        return (a * b).exp().sum() if graph == "elementwise" else ((a * b).tanh() @ a.mT).sum()

    x = fl.tensor(DATA, requires_grad=True)
    w = fl.tensor([[0.5, -1.25, 2.0, 0.75]], requires_grad=True)
    tx = torch.tensor(DATA, requires_grad=True)
    tw = torch.tensor([[0.5, -1.25, 2.0, 0.75]], requires_grad=True)
    fl_ns = type("ns", (), {"bfloat16": BF16})
    loss(fl_ns, x, w).backward()
    loss(torch, tx, tw).backward()
    assert x.grad.dtype is fl.float32 and w.grad.dtype is fl.float32
    # the backward runs in bfloat16 on both sides: the same rounding for elementwise graphs; the
    # products' and broadcast sums' partial sums round in another order
    rtol = 0 if graph == "elementwise" else 2.0 ** -5
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=rtol)


def test_bfloat16_module():
    lin = fl.nn.Linear(4, 2).to(BF16)
    assert lin.weight.dtype is BF16
    out = lin(fl.tensor(DATA, dtype=BF16))
    assert out.dtype is BF16
    out.sum().backward()
    assert lin.weight.grad.dtype is BF16


# --- checkpoints ---------------------------------------------------------------------------------------
def test_torch_checkpoint_round_trip(tmp_path):
    t = torch.tensor(DATA, dtype=torch.bfloat16)
    sd = {"w": t, "col": t[:, 1], "c": torch.tensor([1 + 2j, -3j])}
    torch.save(sd, tmp_path / "a.pt")
    loaded = fl.load(tmp_path / "a.pt")
    assert loaded["w"].dtype is BF16 and loaded["col"].dtype is BF16
    _same(loaded["w"], t)
    _same(loaded["col"], t[:, 1])
    fl.save(loaded, tmp_path / "b.pt", format="torch")
    back = torch.load(tmp_path / "b.pt", weights_only=True)
    assert back["w"].dtype == torch.bfloat16 and torch.equal(back["w"], t) and torch.equal(back["col"], t[:, 1])
    assert torch.equal(back["c"], sd["c"])


def test_flambeau_checkpoint_round_trip():
    x = fl.tensor(DATA, dtype=BF16)
    buf = io.BytesIO()
    fl.save({"x": x, "view": x[:, 1]}, buf)
    buf.seek(0)
    got = fl.load(buf)
    assert got["x"].dtype is BF16
    assert fl.equal(got["x"], x) and fl.equal(got["view"], x[:, 1])


# --- NaN and ordering: numpy treats ml_dtypes' kind 'V' as not floating (sorting, isnan, nan*) -----------
NAN_DATA = [[1.5, float("nan"), -2.25, 3.0], [0.5, -1.0, float("nan"), 2.0], [4.0, 1.0, -3.0, 0.0]]
_NAN_CASES = {
    "nansum": lambda L, F, x: x.nansum(1), "nanmean": lambda L, F, x: x.nanmean(1),
    "cummax": lambda L, F, x: x.cummax(1), "cummin": lambda L, F, x: x.cummin(1),
    "median": lambda L, F, x: x.median(), "median_dim": lambda L, F, x: x.median(1),
    "nanmedian": lambda L, F, x: x.nanmedian(), "sort": lambda L, F, x: x.sort(1),
    "topk": lambda L, F, x: x.topk(2, 1), "kthvalue": lambda L, F, x: x.kthvalue(2, 1),
    "mode": lambda L, F, x: x[2:].mode(1), "unique": lambda L, F, x: x.unique(),
    "max": lambda L, F, x: x.max(1), "argmax": lambda L, F, x: x.argmax(1),
    "elu": lambda L, F, x: F.elu(x), "hardsigmoid": lambda L, F, x: F.hardsigmoid(x),
    "hardtanh": lambda L, F, x: F.hardtanh(x), "isin": lambda L, F, x: L.isin(x, x[0]),
    "scatter_amax": lambda L, F, x: L.zeros(3, 2, dtype=x.dtype).scatter_reduce(
        1, L.tensor([[0, 1, 0, 1]] * 3), x, "amax", include_self=False),
    "scatter_mean": lambda L, F, x: L.ones(3, 2, dtype=x.dtype).scatter_reduce(
        1, L.tensor([[0, 1, 0, 1]] * 3), x, "mean"),
    "searchsorted": lambda L, F, x: L.searchsorted(L.tensor([-1.0, 0.0, 2.0]).to(x.dtype), x.nan_to_num()),
    "bucketize": lambda L, F, x: L.bucketize(x.nan_to_num(), L.tensor([-1.0, 0.0, 2.0]).to(x.dtype)),
}


def _as_numpy(r):
    if isinstance(r, (tuple, list)):
        return [_as_numpy(y) for y in r]
    return str(r.dtype).split(".")[-1], (r.float() if r.dtype.is_floating_point else r).numpy()


@pytest.mark.parametrize("name", sorted(_NAN_CASES))
def test_nan_and_order_as_torch(name):
    f = _NAN_CASES[name]
    x, t = _pair(NAN_DATA)
    ours, theirs = _as_numpy(f(fl, F, x)), _as_numpy(f(torch, torch.nn.functional, t))
    for (od, ov), (td, tv) in zip(*(r if isinstance(r, list) else [r] for r in (ours, theirs))):
        assert od == td, name
        np.testing.assert_allclose(ov, tv, rtol=2.0 ** -7, equal_nan=True, err_msg=name)


def test_the_float32_route_rounds_only_what_the_call_asks_for():
    """``via_float32`` (Note [bfloat16 through float32]) on host arrays: a bfloat16 result where the call
    is bfloat16's, float32 where a float32 dtype argument asks for it, written arguments rounded back."""
    from flambeau._kernels._low_precision import HOST, via_float32

    def kernel(a, b, np_dtype, out=None):
        assert a.dtype == np.float32 and b.dtype == np.float32  # the kernel never sees bfloat16
        r = (a + b).astype(np_dtype)
        if out is not None:
            out[...] = r
            return out
        return r

    wrapped = via_float32(kernel, HOST)
    a = np.array([1.0, 2.5], ml_dtypes.bfloat16)
    f = np.array([0.5], np.float32)  # broadcast: the result has the shape of no float32 operand
    assert wrapped(a, a, ml_dtypes.bfloat16).dtype == ml_dtypes.bfloat16
    assert wrapped(a, f, np.dtype(np.float32)).dtype == np.float32
    assert wrapped(f, f, np.dtype(np.float32)).dtype == np.float32  # no bfloat16: straight through
    out = np.zeros(2, ml_dtypes.bfloat16)
    assert wrapped(a, a, ml_dtypes.bfloat16, out=out) is out
    np.testing.assert_array_equal(out.astype(np.float32), [2.0, 5.0])
