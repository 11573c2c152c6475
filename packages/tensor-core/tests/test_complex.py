"""complex64 / complex128 (flambeau/_dtype.py, flambeau/_ops/complex.py and the complex paths of the
elementwise, reduction and product operators) against torch: creation, promotion, printing, values,
result dtypes, views sharing storage, and torch's errors for operators complex numbers don't have."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau import _dtype as dt

torch = pytest.importorskip("torch")

C64, C128 = dt.complex64, dt.complex128
DATA = [[1 + 2j, 3 - 1j, -0.5j], [2, -1.5 + 0.25j, 0.75 + 3j]]


def _pair(data=DATA, dtype="complex64"):
    return fl.tensor(data, dtype=getattr(dt, dtype)), torch.tensor(data, dtype=getattr(torch, dtype))


def _same(r, t, rtol=1e-6):
    assert r.dtype.name == str(t.dtype).split(".")[1], (r.dtype, t.dtype)
    np.testing.assert_allclose(r.numpy(), t.detach().resolve_conj().numpy(), rtol=rtol, atol=1e-6)


# --- the dtypes ------------------------------------------------------------------------------------
def test_dtype_attributes():
    for d, scalar, real in ((C64, "ComplexFloat", dt.float32), (C128, "ComplexDouble", dt.float64)):
        assert d.is_complex and not d.is_floating_point and d.is_signed
        assert d.scalar_name == scalar and dt.to_real(d) is real and dt.to_complex(real) is d
    assert dt.cfloat is C64 and dt.cdouble is C128
    assert dt.to_dtype("cfloat") is C64 and dt.to_dtype(complex) is C64 and dt.to_dtype(np.complex128) is C128
    assert {"complex64", "complex128", "cfloat", "cdouble"} <= set(dt.__all__)


@pytest.mark.parametrize("operand", [1j, "c128-0dim", "c64", "i64"])
@pytest.mark.parametrize("base", ["float32", "float64", "int32", "bool", "complex64"])
def test_result_type_matches_torch(base, operand):
    x, tx = fl.ones(2, dtype=getattr(dt, base)), torch.ones(2, dtype=getattr(torch, base))
    o, to = {"c128-0dim": (fl.tensor(1j, dtype=C128), torch.tensor(1j, dtype=torch.complex128)),
             "c64": (fl.ones(2, dtype=C64), torch.ones(2, dtype=torch.complex64)),
             "i64": (fl.ones(2, dtype=fl.int64), torch.ones(2, dtype=torch.int64))}.get(operand, (operand, operand))
    assert fl.result_type(x, o).name == str(torch.result_type(tx, to)).split(".")[1]


def test_default_complex_dtype_follows_default_dtype():
    fl.set_default_dtype(fl.float64)
    try:
        assert fl.tensor([1j]).dtype is C128 and (fl.ones(2) * 1j).dtype is C128
    finally:
        fl.set_default_dtype(fl.float32)
    assert fl.tensor([1j]).dtype is C64


# --- creation, conversion, printing -------------------------------------------------------------------
def test_creation():
    x, t = _pair(DATA, "complex128")
    _same(x, t)
    assert fl.tensor([1 + 2j, 3]).dtype is C64 and fl.tensor([True, 1j]).dtype is C64
    assert fl.tensor(np.array([1j], np.complex128)).dtype is C128
    assert fl.from_numpy(np.zeros(2, np.complex64)).dtype is C64
    for f in ("zeros", "ones", "empty"):
        assert getattr(fl, f)(2, dtype=C128).dtype is C128
    _same(fl.full((2,), 1 + 1j), torch.full((2,), 1 + 1j))
    _same(fl.eye(2, dtype=C64), torch.eye(2, dtype=torch.complex64))
    assert fl.tensor(1 + 2j).item() == 1 + 2j and x.tolist() == t.tolist()


def test_creation_errors_match_torch():
    with pytest.raises(NotImplementedError, match="\"arange_cpu\" not implemented for 'ComplexFloat'"):
        fl.arange(3, dtype=C64)
    with pytest.raises(TypeError, match="must be real number, not complex"):
        fl.tensor([1j], dtype=fl.float32)


def test_conversions():
    x, t = _pair()
    _same(x.to(C128), t.to(torch.complex128))
    _same(fl.tensor([1.5, -2.0]).to(C64), torch.tensor([1.5, -2.0]).to(torch.complex64))
    _same(x.to(fl.float32), t.real.to(torch.float32))  # the real parts (torch also warns)
    assert x.numpy().dtype == np.complex64


@pytest.mark.parametrize("data", [DATA, [1 + 2j, 3], 1 + 2j, [[1 + 2j, 3.25 - 1j], [0j, -1e-5j]], [1 + 1j] * 2000])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_repr_matches_torch(data, dtype):
    assert repr(fl.tensor(data, dtype=getattr(dt, dtype))) == \
        repr(torch.tensor(data, dtype=getattr(torch, dtype))).replace("torch.", "flambeau.")


# --- views ---------------------------------------------------------------------------------------------
def test_real_imag_are_views():
    x, t = _pair()
    for part in ("real", "imag"):
        v = getattr(x, part)
        _same(v, getattr(t, part))
        assert v._storage is x._storage and v._base is x
        assert v.storage_offset() == getattr(t, part).storage_offset()
        assert v.stride() == getattr(t, part).stride()
        assert getattr(fl, part)(x).dtype is fl.float32
    x.real[0, 0] = 7.0
    x.imag = fl.zeros(2, 3)
    assert x[0, 0].item() == 7 and not x.imag.any()
    y = fl.tensor([1.0, 2.0])
    assert fl.real(y) is y and y.real is y
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes."):
        _ = y.imag


def test_view_as_real_and_complex_share_storage():
    x, t = _pair(DATA, "complex128")
    for xs, ts in ((x, t), (x.mT, t.mT), (x[:, 1:], t[:, 1:])):
        r = fl.view_as_real(xs)
        _same(r, torch.view_as_real(ts))
        assert r.stride() == torch.view_as_real(ts).stride() and r._storage is x._storage
        back = fl.view_as_complex(r)
        _same(back, ts)
        assert back._storage is x._storage and back.storage_offset() == ts.storage_offset()
    r = fl.view_as_real(x)
    r[0, 0, 1] = -9.0
    assert x[0, 0].item() == 1 - 9j


@pytest.mark.parametrize("make, msg", [
    (lambda: fl.view_as_real(fl.ones(2)), "view_as_real is only supported for complex tensors"),
    (lambda: fl.view_as_complex(fl.ones(2, 3)), "Tensor must have a last dimension of size 2"),
    (lambda: fl.view_as_complex(fl.ones(2, 2).t()), "Tensor must have a last dimension with stride 1"),
    (lambda: fl.view_as_complex(fl.ones(2, 3, 2)[:, ::1, :][:, :, :].as_strided((2, 2), (3, 1))),
     "Tensor must have a stride divisible by 2"),
    (lambda: fl.view_as_complex(fl.ones(5)[1:].view(2, 2)), "Tensor must have a storage_offset divisible by 2"),
    (lambda: fl.view_as_complex(fl.ones(2, 2, dtype=fl.float16)),
     "view_as_complex is only supported for float and double tensors, but got a tensor of scalar type: Half"),
])
def test_view_errors_match_torch(make, msg):
    with pytest.raises(RuntimeError, match=msg):
        make()


# --- elementwise ---------------------------------------------------------------------------------------------
UNARY = ["neg", "abs", "reciprocal", "sgn", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "rsqrt",
         "square", "angle", "conj", "conj_physical", "isnan", "isfinite", "log10", "expm1"]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype):
    x, t = _pair(DATA, dtype)
    _same(getattr(fl, name)(x), getattr(torch, name)(t), rtol=1e-5)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "eq", "ne"])
@pytest.mark.parametrize("other", ["complex", "float64", "int", "py-float", "py-complex", "0-dim"])
def test_binary(name, other):
    x, t = _pair()
    o, to = {"complex": (x.flip(1), t.flip(1)),
             "float64": (fl.tensor([[0.5, 2.0, -1.0]], dtype=fl.float64), torch.tensor([[0.5, 2.0, -1.0]],
                                                                                       dtype=torch.float64)),
             "int": (fl.tensor([1, 2, 3]), torch.tensor([1, 2, 3])), "py-float": (1.5, 1.5),
             "py-complex": (0.5 - 2j, 0.5 - 2j),
             "0-dim": (fl.tensor(2 + 1j, dtype=C128), torch.tensor(2 + 1j, dtype=torch.complex128))}[other]
    _same(getattr(fl, name)(x, o), getattr(torch, name)(t, to), rtol=1e-5)
    if isinstance(o, fl.Tensor):
        _same(getattr(fl, name)(o, x), getattr(torch, name)(to, t), rtol=1e-5)


def test_inplace_and_dunders():
    x, t = _pair()
    x.mul_(1j).add_(1)
    t.mul_(1j).add_(1)
    _same(x, t)
    _same(-x / 2 + 1j * x, -t / 2 + 1j * t)
    _same(abs(x), abs(t))
    with pytest.raises(RuntimeError, match="can't be cast"):
        fl.ones(2).add_(1j)


def test_complex_and_polar():
    a, b = fl.tensor([1.0, -2.0]), fl.tensor([[0.5], [3.0]])
    ta, tb = torch.tensor([1.0, -2.0]), torch.tensor([[0.5], [3.0]])
    _same(fl.complex(a, b), torch.complex(ta, tb))
    _same(fl.polar(a.abs(), b), torch.polar(ta.abs(), tb))
    _same(fl.complex(a.double(), b.double()), torch.complex(ta.double(), tb.double()))
    with pytest.raises(RuntimeError, match="Expected both inputs to be Half, Float or Double tensors but got Float "
                                           "and Double"):
        fl.complex(a, b.double())


def test_angle_of_real_tensors():
    x = fl.tensor([-1.0, 0.0, 2.0, float("nan")])
    tx = torch.tensor([-1.0, 0.0, 2.0, float("nan")])
    _same(fl.angle(x), torch.angle(tx))
    _same(fl.angle(fl.tensor([-2, 3])), torch.angle(torch.tensor([-2, 3])))


def test_predicates_and_conj():
    x, _ = _pair()
    y = fl.ones(2)
    assert x.is_complex() and fl.is_complex(x) and not y.is_complex() and not x.is_floating_point()
    assert not fl.is_conj(x.conj()) and x.resolve_conj() is x and x.resolve_neg() is x
    assert fl.conj(y) is y  # as torch, conj of a real tensor is the tensor
    c = x.conj()
    assert c._storage is not x._storage  # a copy (the module's Note [Conjugation is a copy])


# --- reductions and products ------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda L, x: x.sum(), lambda L, x: x.sum(0), lambda L, x: x.mean(1), lambda L, x: x.prod(),
    lambda L, x: x.cumsum(1), lambda L, x: x.var(), lambda L, x: x.std(0), lambda L, x: x.norm(),
    lambda L, x: x @ x.mT, lambda L, x: L.mm(x, x.mT), lambda L, x: L.bmm(x[None], x.mT[None]),
    lambda L, x: L.matmul(x[0], x[1]), lambda L, x: L.einsum("ij,kj->ik", x, x), lambda L, x: L.trace(x[:, :2]),
    lambda L, x: L.where(x.real > 0, x, 0), lambda L, x: L.cat([x, x]), lambda L, x: x.t().contiguous(),
], ids=["sum", "sum0", "mean1", "prod", "cumsum", "var", "std0", "norm", "matmul", "mm", "bmm", "dot", "einsum",
        "trace", "where", "cat", "contiguous"])
def test_reductions_and_products(call):
    x, t = _pair(DATA, "complex128")
    _same(call(fl, x), call(torch, t))


@pytest.mark.parametrize("call, exc, msg", [
    (lambda L, x: x.max(), NotImplementedError, "\"max_all\" not implemented for 'ComplexFloat'"),
    (lambda L, x: x.amin(), NotImplementedError, "\"min_values_cpu\" not implemented for 'ComplexFloat'"),
    (lambda L, x: x.argmax(), RuntimeError, "argmax\\(\\): does not support complex input"),
    (lambda L, x: x.median(), NotImplementedError, "\"median_cpu\" not implemented for 'ComplexFloat'"),
    (lambda L, x: x.cummax(0), NotImplementedError, "\"cummax_cpu\" not implemented for 'ComplexFloat'"),
    (lambda L, x: x < x, NotImplementedError, "\"lt_cpu\" not implemented for 'ComplexFloat'"),
    (lambda L, x: x.gt(1), NotImplementedError, "\"gt_cpu\" not implemented for 'ComplexFloat'"),
    (lambda L, x: L.relu(x), NotImplementedError, "not implemented for 'ComplexFloat'"),
    (lambda L, x: x.floor(), NotImplementedError, "not implemented for 'ComplexFloat'"),
    (lambda L, x: L.maximum(x, x), NotImplementedError, "not implemented for 'ComplexFloat'"),
    (lambda L, x: x.clamp(0, 1), NotImplementedError, "clamp is not supported for complex types"),
    (lambda L, x: x.sign(), NotImplementedError, "Please use (torch|flambeau).sgn instead"),
    (lambda L, x: x.erf(), NotImplementedError, "not implemented for 'ComplexFloat'"),
])
def test_unsupported_operators_raise(call, exc, msg):
    x, t = _pair()
    with pytest.raises(exc, match=msg):
        call(fl, x)
    with pytest.raises((RuntimeError, NotImplementedError)):  # torch refuses them too
        call(torch, t)


# --- storage, checkpoints ----------------------------------------------------------------------------------
def test_checkpoint_round_trip(tmp_path):
    x, t = _pair(DATA, "complex128")
    fl.save({"x": x, "re": x.real}, tmp_path / "a.fl")
    got = fl.load(tmp_path / "a.fl")
    assert got["x"].dtype is C128 and fl.equal(got["x"], x) and fl.equal(got["re"], x.real)
    fl.save({"x": x}, tmp_path / "b.pt", format="torch")
    assert torch.equal(torch.load(tmp_path / "b.pt", weights_only=True)["x"], t)


_SIM_SCRIPT = """
import numpy as np, flambeau as fl
z = fl.tensor([[1 + 2j, 3 - 1j]]); w = fl.tensor([[0.5, 2.0]])
zc, wc = z.to("cuda"), w.to("cuda")
for got, want in ((zc + zc, z + z), (zc * wc, z * w), (zc / 2, z / 2), (zc - 1j, z - 1j), (-zc, -z),
                  (zc == zc, z == z), (zc.t().contiguous(), z.t()),
                  (zc * zc.to(fl.complex128), z * z.to(fl.complex128))):
    assert got.dtype is want.dtype and np.allclose(got.cpu().numpy(), want.numpy()), (got, want)
assert np.allclose(zc.sum().cpu().numpy(), z.sum().numpy())
try:
    zc.prod()
except RuntimeError as e:
    assert "not implemented for 'ComplexFloat'" in str(e)
else:
    raise AssertionError("prod of a complex CUDA tensor should raise")
"""


def test_cuda_arithmetic_in_the_simulator():
    """The complex kind of the CUDA elementwise templates, run by numba's CUDA simulator (tiny shapes)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("numba")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
