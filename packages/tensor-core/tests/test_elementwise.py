"""Tests of flambeau/_ops/elementwise.py (and the factories of _elementwise_base.py).

Semantics (result dtype, values, which inputs raise and with which exception type) are checked
against torch for every operator and dtype; values also against numpy where torch is absent.
"""

from __future__ import annotations

import math
import operator
import warnings

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")

# numpy floating-point warnings must never reach users.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool"]
RNG = np.random.default_rng(0)


def _data(dtype: str, shape=(2, 3), nonzero: bool = False, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5) if not nonzero else np.ones(shape, bool)
    if dtype == "uint8":
        return np.asarray(rng.integers(1 if nonzero else 0, 8, shape)).astype(np.uint8)
    if dtype.startswith("int"):
        a = np.asarray(rng.integers(-4, 5, shape)).astype(dtype)
        if nonzero:
            a[a == 0] = 3
        return a
    a = np.asarray(rng.uniform(-3, 3, shape)).astype(dtype)
    if nonzero:
        a[np.abs(a) < 0.1] = 0.5
    return a


def _fl(x):
    return fl.from_numpy(x.copy()) if isinstance(x, np.ndarray) else x


def _th(x):
    return torch.from_numpy(x.copy()) if isinstance(x, np.ndarray) else x


def _tol(dtype_name: str):
    return {"float32": (3e-5, 1e-6), "float64": (1e-9, 1e-12), "float16": (1e-3, 1e-3)}.get(dtype_name, (0, 0))


def assert_same(got, expected):
    """``got`` (flambeau) equals ``expected`` (torch) in dtype, shape and values (NaN == NaN)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, fl.Tensor), f"expected a Tensor, got {type(got).__name__}"
        exp_dtype = str(expected.dtype).replace("torch.", "")
        assert got.dtype.name == exp_dtype, f"dtype {got.dtype.name} != torch's {exp_dtype}"
        assert tuple(got.shape) == tuple(expected.shape)
        e, g = expected.numpy(), got.numpy()
        rtol, atol = _tol(exp_dtype)
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)
    else:
        assert type(got) is type(expected) and got == expected


def check_like_torch(fl_fn, th_fn, *args, **kwargs):
    """Run ``fl_fn`` and ``th_fn`` on the same inputs: same exception type, or the same result.

    Where torch's function refuses a Python number (``torch.maximum(t, 2)``), flambeau accepts it
    as a wrapped number: the result must then match torch's with the number as a 0-dim tensor.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = th_fn(*[_th(a) for a in args], **kwargs)
            except TypeError:
                if all(isinstance(a, np.ndarray) for a in args):
                    raise
                if any(isinstance(a, np.ndarray) and a.ndim == 0 for a in args):
                    return None  # a 0-dim tensor outranks a wrapped number: no torch reference
                expected = th_fn(*[_th(a) if isinstance(a, np.ndarray) else torch.tensor(a) for a in args],
                                 **kwargs)
    except (RuntimeError, TypeError, ValueError) as e:
        with pytest.raises(Exception) as info:  # noqa: B017 - the exact type is checked below
            fl_fn(*[_fl(a) for a in args], **kwargs)
        assert type(info.value).__name__ == type(e).__name__, f"torch raised {e!r}, flambeau {info.value!r}"
        return None
    got = fl_fn(*[_fl(a) for a in args], **kwargs)
    assert_same(got, expected)
    return got


# --- unary operators against torch ------------------------------------------------------------------
UNARY = ["neg", "negative", "abs", "absolute", "reciprocal", "sign", "sgn", "square", "positive",
         "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "tanh", "sigmoid", "erf", "erfc", "erfinv",
         "relu", "logit", "floor", "ceil", "round", "trunc", "fix", "frac", "isnan", "isinf", "isposinf",
         "isneginf", "isfinite", "signbit", "nan_to_num", "logical_not", "bitwise_not", "arcsin", "arccos",
         "arctan", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg"]
NN_UNARY = ["gelu", "silu", "softplus"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY + NN_UNARY)
def test_unary_matches_torch(name, dtype):
    th_fn = getattr(torch.nn.functional, name) if name in NN_UNARY else getattr(torch, name)
    if name == "gelu":  # Note [torch's float32 GELU at infinity] in test_activation_ops.py
        th_fn = lambda t, f=th_fn: f(t.double()).to(t.dtype) if t.is_floating_point() else f(t)  # noqa: E731
    x = _data(dtype)
    if dtype.startswith("float"):
        x = np.concatenate([x.ravel(), [0.0, -0.0, 0.5, -0.99, np.nan, np.inf, -np.inf]]).astype(dtype)
    check_like_torch(getattr(fl, name), th_fn, x)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfinv", "sigmoid", "gelu", "tanh", "expm1"])
def test_special_functions_accuracy(name):
    x = np.linspace(-0.999999, 0.999999, 2001) if name == "erfinv" else np.linspace(-8, 8, 2001)
    th_fn = getattr(torch.nn.functional, name) if name == "gelu" else getattr(torch, name)
    expected = th_fn(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(getattr(fl, name)(fl.from_numpy(x)).numpy(), expected, rtol=1e-12, atol=1e-15)


def test_unary_methods_and_inplace():
    x = _data("float32", (3, 4))
    for name in ["exp", "sin", "sqrt", "abs", "neg", "floor", "sigmoid", "relu", "erfinv", "nan_to_num", "round"]:
        t = fl.from_numpy(x.copy())
        np.testing.assert_allclose(getattr(t, name)().numpy(), getattr(torch, name)(torch.from_numpy(x)).numpy(),
                                   rtol=1e-5, equal_nan=True)
        v = t._version
        r = getattr(t, name + "_")()
        assert r is t and t._version == v + 1
        np.testing.assert_allclose(t.numpy(), getattr(torch, name)(torch.from_numpy(x)).numpy(), rtol=1e-5,
                                   equal_nan=True)


def test_unary_inplace_cast_error():
    t = fl.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        t.exp_()
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        t.sqrt_()
    assert t._version == 0


def test_unary_errors():
    with pytest.raises(TypeError, match=r"exp\(\): argument 'input' \(position 1\) must be Tensor, not list"):
        fl.exp([1.0])
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor is not supported"):
        -fl.tensor([True])
    with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported"):
        +fl.tensor([True])
    with pytest.raises(NotImplementedError, match="\"abs_cpu\" not implemented for 'Bool'"):
        abs(fl.tensor([True]))
    with pytest.raises(TypeError, match=r"~ \(operator.invert\) is only implemented"):
        ~fl.tensor([1.0])
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        fl.relu(fl.tensor([True]))


def test_unary_dunders_and_positive():
    t = fl.tensor([1, -2, 3])
    assert (+t) is t
    assert (-t).tolist() == [-1, 2, -3]
    assert abs(t).tolist() == [1, 2, 3]
    assert (~t).tolist() == [-2, 1, -4]
    assert (~fl.tensor([True, False])).tolist() == [False, True]
    assert (-fl.tensor([1, 2], dtype=fl.uint8)).tolist() == [255, 254]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_softplus_logit_params(approximate):
    x = np.linspace(-30, 30, 41).astype(np.float32)
    tx = torch.from_numpy(x)
    np.testing.assert_allclose(fl.gelu(fl.from_numpy(x), approximate=approximate).numpy(),
                               torch.nn.functional.gelu(tx, approximate=approximate).numpy(), rtol=1e-5, atol=1e-6)
    for beta, threshold in [(1, 20), (2.0, 5.0), (0.5, 1)]:
        np.testing.assert_allclose(fl.softplus(fl.from_numpy(x), beta, threshold).numpy(),
                                   torch.nn.functional.softplus(tx, beta, threshold).numpy(), rtol=1e-5, atol=1e-6)
    p = np.array([0.0, 0.1, 0.5, 0.99, 1.0], np.float32)
    for eps in [None, 1e-3, 0.2]:
        np.testing.assert_allclose(fl.logit(fl.from_numpy(p), eps).numpy(),
                                   torch.logit(torch.from_numpy(p), eps).numpy(), rtol=1e-5)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        fl.gelu(fl.from_numpy(x), approximate="erf")


@pytest.mark.parametrize("decimals", [0, 1, 2, -1])
def test_round_decimals(decimals):
    x = np.array([2.5, 3.5, -0.5, 1.2345, 15.0, 25.0, -1.255], np.float64)
    assert_same(fl.round(fl.from_numpy(x), decimals=decimals), torch.round(torch.from_numpy(x), decimals=decimals))
    assert_same(fl.round(fl.tensor([3, -4])), torch.round(torch.tensor([3, -4])))


def test_nan_to_num_params():
    for dtype in ["float32", "float64"]:
        x = np.array([np.nan, np.inf, -np.inf, 1.5], dtype)
        for kw in [{}, {"nan": 1.0}, {"nan": 2.0, "posinf": 9.0, "neginf": -9.0}, {"posinf": 1e300}]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert_same(fl.nan_to_num(fl.from_numpy(x), **kw), torch.nan_to_num(torch.from_numpy(x), **kw))


# --- binary operators against torch -------------------------------------------------------------------
BINARY = ["add", "sub", "mul", "div", "true_divide", "divide", "multiply", "subtract", "floor_divide", "remainder",
          "fmod", "pow", "float_power", "atan2", "arctan2", "hypot", "logaddexp", "logaddexp2", "xlogy", "copysign",
          "maximum", "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal",
          "less", "less_equal", "not_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and",
          "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"]
_DIVISION = {"div", "true_divide", "divide", "floor_divide", "remainder", "fmod"}


def _operands(name, da, db, shape_a=(2, 3), shape_b=(2, 3)):
    a = _data(da, shape_a, seed=1)
    b = _data(db, shape_b, nonzero=name in _DIVISION, seed=2)
    if name.startswith("bitwise_") and "shift" in name and db != "bool":
        b = np.abs(b) % 5
    return a, b


@pytest.mark.parametrize("db", DTYPES)
@pytest.mark.parametrize("da", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_torch(name, da, db):
    a, b = _operands(name, da, db)
    check_like_torch(getattr(fl, name), getattr(torch, name), a, b)


SCALARS = [2, -3, 2.5, -0.5, True, False, 0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_tensor_scalar_matches_torch(name, dtype):
    a = _data(dtype, seed=3)
    for s in SCALARS:
        if name in _DIVISION and s == 0 and not dtype.startswith("float"):
            continue
        if name in _DIVISION and s is False:
            continue
        check_like_torch(getattr(fl, name), getattr(torch, name), a, s)
        check_like_torch(getattr(fl, name), getattr(torch, name), _data(dtype, (), seed=4), s)


OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
             "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
             "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
             "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
             ">=": operator.ge}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sym", list(OPERATORS))
def test_operators_both_sides(sym, dtype):
    op = OPERATORS[sym]
    nonzero = sym in ("/", "//", "%")
    a = _data(dtype, seed=5, nonzero=nonzero)
    if sym in ("<<", ">>") and dtype != "bool":
        a = np.abs(a) % 5
    for s in [3, 2.0, True, -1]:
        if nonzero and s == -1 and dtype == "uint8":
            continue
        check_like_torch(op, op, a, s)
        check_like_torch(lambda t, s=s: op(s, t), lambda t, s=s: op(s, t), a)
    b = _data(dtype, seed=6, nonzero=nonzero)
    if sym in ("<<", ">>") and dtype != "bool":
        b = np.abs(b) % 5
    check_like_torch(op, op, a, b)


IOPS = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
        "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "&": operator.iand, "|": operator.ior,
        "^": operator.ixor, "<<": operator.ilshift, ">>": operator.irshift}


@pytest.mark.parametrize("db", ["float32", "int64", "bool"])
@pytest.mark.parametrize("da", DTYPES)
@pytest.mark.parametrize("sym", list(IOPS))
def test_inplace_operators(sym, da, db):
    nonzero = sym in ("/", "//", "%")
    a, b = _data(da, seed=7), _data(db, seed=8, nonzero=nonzero)
    if sym in ("<<", ">>") and db != "bool":
        b = np.abs(b) % 5
    op = IOPS[sym]
    ta, fa = torch.from_numpy(a.copy()), fl.from_numpy(a.copy())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = op(ta, torch.from_numpy(b.copy()))
    except (RuntimeError, TypeError) as e:
        with pytest.raises(type(e)):
            op(fa, fl.from_numpy(b.copy()))
        assert fa._version == 0
        np.testing.assert_array_equal(fa.numpy(), a)
        return
    v = fa._version
    got = op(fa, fl.from_numpy(b.copy()))
    assert got is fa and fa._version == v + 1
    assert_same(got, expected)


INPLACE_BINARY = [n for n in BINARY if hasattr(torch.Tensor, n + "_")]


@pytest.mark.parametrize("db", ["float64", "int32", "bool"])
@pytest.mark.parametrize("da", ["float32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("name", INPLACE_BINARY)
def test_inplace_methods(name, da, db):
    a, b = _operands(name, da, db)
    fa = fl.from_numpy(a.copy())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = getattr(torch.from_numpy(a.copy()), name + "_")(torch.from_numpy(b.copy()))
    except (RuntimeError, TypeError) as e:
        with pytest.raises(Exception) as info:  # noqa: B017
            getattr(fa, name + "_")(fl.from_numpy(b.copy()))
        assert type(info.value).__name__ == type(e).__name__, f"torch raised {e!r}, flambeau {info.value!r}"
        assert fa._version == 0
        return
    got = getattr(fa, name + "_")(fl.from_numpy(b.copy()))
    assert got is fa and fa._version == 1
    assert_same(got, expected)


def test_inplace_cast_error_message():
    t = fl.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        t += 1.5
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        t.div_(2)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        t.mul_(fl.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="result type Long can't be cast to the desired output type Bool"):
        fl.tensor([True]).add_(2)
    assert t._version == 0 and t.tolist() == [1, 2, 3]
    assert t.div_(2, rounding_mode="floor").tolist() == [0, 1, 1] and t._version == 1


def test_inplace_broadcast_shape_error():
    t = fl.zeros(3)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        t.add_(fl.ones(2, 3))
    t2 = fl.zeros(2, 3)
    t2.add_(fl.ones(3))
    assert t2.tolist() == [[1.0] * 3] * 2


# --- broadcasting, layouts, empty and 0-dim ---------------------------------------------------------------
@pytest.mark.parametrize("shapes", [((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((4,), (2, 3, 4)), ((), (2, 3)),
                                    ((2, 0, 3), (1, 3)), ((0,), ()), ((1, 1), (5, 1, 1))])
@pytest.mark.parametrize("name", ["add", "mul", "div", "pow", "maximum", "lt", "logical_xor", "remainder", "atan2"])
def test_broadcasting(name, shapes):
    a, b = _data("float32", shapes[0], seed=9), _data("float32", shapes[1], seed=10, nonzero=True)
    check_like_torch(getattr(fl, name), getattr(torch, name), a, b)


def test_broadcast_error_message():
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\) at "
                                           r"non-singleton dimension 1"):
        fl.zeros(2, 3) + fl.zeros(2, 4)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        fl.where(fl.zeros(2, dtype=fl.bool), fl.zeros(3), 1.0)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "floor_divide", "pow", "eq", "maximum", "hypot",
                                  "bitwise_xor"])
def test_non_contiguous(name):
    dtype = "int64" if name == "bitwise_xor" else "float64"
    base_a = _data(dtype, (6, 8), seed=11, nonzero=True)
    base_b = _data(dtype, (8, 6), seed=12, nonzero=True)
    a, b = base_a[::2, 1::2], base_b.T[::2, ::2]  # strided and transposed views
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    fa, fb = fl.from_numpy(a), fl.from_numpy(b)
    assert not fa.is_contiguous() and not fb.is_contiguous()
    assert_same(getattr(fl, name)(fa, fb), getattr(torch, name)(torch.from_numpy(a.copy()), torch.from_numpy(b.copy())))
    # in place into a non-contiguous view writes through to the base
    if name in ("add", "mul", "sub"):
        base = fl.from_numpy(base_a.copy())
        view = fl.from_numpy(base.numpy()[::2, 1::2])
        getattr(view, name + "_")(fb)
        expected = base_a.copy()
        expected[::2, 1::2] = getattr(np, {"add": "add", "mul": "multiply", "sub": "subtract"}[name])(a, b)
        np.testing.assert_allclose(base.numpy(), expected)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_zero_dim_promotion(dtype):
    # 0-dim tensors and scalars take part weakly in promotion
    x = _data(dtype, (3,), seed=13)
    for other in [np.array(2.5, np.float64), np.array(3, np.int64), np.array(True), np.array(7, np.uint8)]:
        check_like_torch(fl.add, torch.add, x, other)
        check_like_torch(fl.mul, torch.mul, other, x)
    # a 0-dim tensor of the same category does not widen: uint8 * int8 0-dim is uint8 (wrapping)
    u = np.array([200, 3, 0], np.uint8)
    for other in [np.array(-3, np.int8), np.array(1000, np.int64), np.array(-1, np.int16)]:
        for name in ["mul", "add", "sub", "maximum", "floor_divide", "pow", "bitwise_and", "eq", "lt"]:
            check_like_torch(getattr(fl, name), getattr(torch, name), u, other)
        check_like_torch(fl.clamp, torch.clamp, u, other, np.array(250, np.int64))
        check_like_torch(fl.addcmul, torch.addcmul, u, u, other)
        check_like_torch(fl.where, torch.where, u > 1, u, other)
    r = fl.tensor(2.0) * fl.tensor(3)
    assert r.dim() == 0 and r.dtype is fl.float32 and r.item() == 6.0


def test_empty_tensors():
    e = fl.zeros(0, 3)
    for name in ["exp", "neg", "abs", "sigmoid", "isnan", "floor"]:
        r = getattr(fl, name)(e)
        assert tuple(r.shape) == (0, 3)
    assert tuple((e + fl.ones(3)).shape) == (0, 3)
    assert tuple(fl.floor_divide(fl.zeros(0, dtype=fl.int64), fl.zeros(0, dtype=fl.int64)).shape) == (0,)


# --- arithmetic specifics ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_integer_division_by_zero_raises(name, dtype):
    a = fl.tensor([1, 2, 3], dtype=getattr(fl, dtype))
    b = fl.tensor([1, 0, 1], dtype=getattr(fl, dtype))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        getattr(fl, name)(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        getattr(fl, name)(a, 0)
    for mode in ["trunc", "floor"]:
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fl.div(a, b, rounding_mode=mode)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a // 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        5 % b
    # true division by zero is fine and silent
    assert fl.div(a, b).tolist()[1] == math.inf


def test_float_division_by_zero_is_silent():
    x = fl.tensor([1.0, -1.0, 0.0])
    assert_same(x / 0, torch.tensor([1.0, -1.0, 0.0]) / 0)
    assert_same(x // 0.0, torch.tensor([1.0, -1.0, 0.0]) // 0.0)
    assert_same(x % 0.0, torch.tensor([1.0, -1.0, 0.0]) % 0.0)
    assert_same(fl.fmod(x, 0.0), torch.fmod(torch.tensor([1.0, -1.0, 0.0]), 0.0))


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("da,db", [("float32", "float32"), ("int64", "int64"), ("int32", "float64"),
                                   ("uint8", "uint8"), ("int64", "int32"), ("bool", "int64")])
def test_div_rounding_modes(mode, da, db):
    a = np.array([7, -7, 6, -6, 0, 5, -1])
    b = np.array([2, 2, -4, -4, 3, 5, 3])
    if da == "uint8":
        a, b = np.abs(a), np.abs(b)
    a = a > 0 if da == "bool" else a.astype(da)
    b = b.astype(db)
    check_like_torch(lambda x, y: fl.div(x, y, rounding_mode=mode), lambda x, y: torch.div(x, y, rounding_mode=mode),
                     a, b)
    check_like_torch(lambda x: fl.div(x, 3, rounding_mode=mode), lambda x: torch.div(x, 3, rounding_mode=mode), a)
    check_like_torch(lambda x: fl.div(x, -2.5, rounding_mode=mode),
                     lambda x: torch.div(x, -2.5, rounding_mode=mode), a)


def test_div_bad_rounding_mode():
    with pytest.raises(RuntimeError, match="rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"):
        fl.div(fl.ones(2), 2, rounding_mode="round")


def test_python_sign_semantics():
    a = fl.tensor([-7, 7, -7, 7])
    b = fl.tensor([2, -2, -2, 2])
    assert (a % b).tolist() == [(-7) % 2, 7 % -2, (-7) % -2, 7 % 2]
    assert (a // b).tolist() == [(-7) // 2, 7 // -2, (-7) // -2, 7 // 2]
    assert fl.fmod(a, b).tolist() == [-1, 1, -1, 1]
    f = fl.tensor([-7.5, 7.5])
    assert (f % 2).tolist() == [(-7.5) % 2, 7.5 % 2]


@pytest.mark.parametrize("alpha", [1, 2, -1, 0.5, True, 0])
@pytest.mark.parametrize("da,db", [("float32", "float32"), ("int64", "int64"), ("int32", "float64"),
                                   ("bool", "bool"), ("uint8", "int64")])
def test_add_sub_rsub_alpha(alpha, da, db):
    a, b = _data(da, seed=14), _data(db, seed=15)
    for name in ["add", "sub", "rsub"]:
        check_like_torch(lambda x, y, n=name: getattr(fl, n)(x, y, alpha=alpha),
                         lambda x, y, n=name: getattr(torch, n)(x, y, alpha=alpha), a, b)
        check_like_torch(lambda x, n=name: getattr(fl, n)(x, 3, alpha=alpha),
                         lambda x, n=name: getattr(torch, n)(x, 3, alpha=alpha), a)
    for name in ["add", "sub"]:
        ta, fa = torch.from_numpy(a.copy()), fl.from_numpy(a.copy())
        try:
            expected = getattr(ta, name + "_")(torch.from_numpy(b.copy()), alpha=alpha)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                getattr(fa, name + "_")(fl.from_numpy(b.copy()), alpha=alpha)
            continue
        assert_same(getattr(fa, name + "_")(fl.from_numpy(b.copy()), alpha=alpha), expected)


def test_alpha_errors():
    i = fl.tensor([1, 2])
    with pytest.raises(RuntimeError, match="For integral input tensors, argument alpha must not be a floating"):
        fl.add(i, i, alpha=2.5)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        fl.sub(fl.ones(2), fl.ones(2), alpha=True)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors is not supported"):
        fl.tensor([True]) - fl.tensor([False])


def test_pow_integer_semantics():
    i = fl.tensor([5, -3, 0, 1, -1])
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        i ** -1
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        fl.pow(i, -2)
    e = fl.tensor([-1, 2, -2, -3, -3])
    assert_same(i ** e, torch.tensor([5, -3, 0, 1, -1]) ** torch.tensor([-1, 2, -2, -3, -3]))
    assert_same(2 ** i.abs(), 2 ** torch.tensor([5, 3, 0, 1, 1]))
    assert_same(2.5 ** i, 2.5 ** torch.tensor([5, -3, 0, 1, -1]))
    assert_same(i ** 0.5, torch.tensor([5, -3, 0, 1, -1]) ** 0.5)
    assert_same(fl.float_power(i, 2), torch.float_power(torch.tensor([5, -3, 0, 1, -1]), 2))
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype Long but the operation's "
                                           "result requires dtype Double"):
        i.float_power_(2)
    x = fl.tensor([1.0, 2.0], dtype=fl.float64)
    x.float_power_(2)
    assert x.tolist() == [1.0, 4.0]
    x **= 0.5
    assert x.tolist() == [1.0, 2.0]


def test_scalar_wraps_like_torch():
    u = fl.tensor([200, 3, 0], dtype=fl.uint8)
    assert_same(u + 300, torch.tensor([200, 3, 0], dtype=torch.uint8) + 300)
    assert_same(u * 257, torch.tensor([200, 3, 0], dtype=torch.uint8) * 257)
    assert_same(u - (-1), torch.tensor([200, 3, 0], dtype=torch.uint8) - (-1))
    assert_same(fl.clamp(u, min=-1), torch.clamp(torch.tensor([200, 3, 0], dtype=torch.uint8), min=-1))
    assert_same(u == 300, torch.tensor([200, 3, 0], dtype=torch.uint8) == 300)
    i32 = fl.tensor([1], dtype=fl.int32)
    assert_same(i32 + 2**40, torch.tensor([1], dtype=torch.int32) + 2**40)
    u += 300
    assert u.tolist() == [244, 47, 44]
    with pytest.raises(OverflowError):
        fl.tensor([1]) + 2**70


def test_foreign_operands():
    t = fl.tensor([1.0, 2.0])
    assert (t == None) is False  # noqa: E711 - torch's behaviour is the point
    assert (t != None) is True  # noqa: E711
    assert (t == "a") is False
    with pytest.raises(TypeError, match="'<' not supported between instances of 'Tensor' and 'NoneType'"):
        t < None  # noqa: B015
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'Tensor' and 'NoneType'"):
        t + None
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \*: 'NoneType' and 'Tensor'"):
        None * t
    with pytest.raises(TypeError, match=r"add\(\): argument 'other' \(position 2\) must be Tensor, not NoneType"):
        fl.add(t, None)
    with pytest.raises(TypeError, match=r"mul\(\): argument 'other' \(position 2\) must be Tensor, not str"):
        t.mul_("a")


# --- math with extra arguments ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp(dtype):
    x = _data(dtype, (3, 4), seed=16)
    cases = [dict(min=0), dict(max=1), dict(min=-1, max=1), dict(min=0.5), dict(min=-1.5, max=2.5),
             dict(min=2, max=1), dict(min=True)]
    for kw in cases:
        check_like_torch(lambda t, kw=kw: fl.clamp(t, **kw), lambda t, kw=kw: torch.clamp(t, **kw), x)
        check_like_torch(lambda t, kw=kw: fl.clip(t, **kw), lambda t, kw=kw: torch.clip(t, **kw), x)
    lo, hi = _data(dtype, (4,), seed=17), _data(dtype, (3, 1), seed=18)
    check_like_torch(lambda t, a, b: fl.clamp(t, a, b), lambda t, a, b: torch.clamp(t, a, b), x, lo, hi)
    check_like_torch(lambda t, a: fl.clamp(t, min=a), lambda t, a: torch.clamp(t, min=a), x, lo)
    check_like_torch(lambda t: fl.clamp_min(t, 1), lambda t: torch.clamp_min(t, 1), x)
    check_like_torch(lambda t: fl.clamp_max(t, 1), lambda t: torch.clamp_max(t, 1), x)
    for name, args in [("clamp_", (0, 1)), ("clamp_min_", (1,)), ("clamp_max_", (1,)), ("clamp_", (0.5, None))]:
        check_like_torch(lambda t, n=name, a=args: getattr(t, n)(*a), lambda t, n=name, a=args: getattr(t, n)(*a), x)


def test_clamp_nan_and_errors():
    x = fl.tensor([float("nan"), 1.0, 5.0])
    assert_same(fl.clamp(x, 0, 2), torch.clamp(torch.tensor([float("nan"), 1.0, 5.0]), 0, 2))
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        fl.clamp(x)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        fl.tensor([1, 2]).clamp_(0.5)
    t = fl.tensor([1.0, 5.0])
    assert t.clamp_(max=2) is t and t._version == 1 and t.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("da,db", [("float32", "float32"), ("int64", "float64"), ("uint8", "int32"),
                                   ("bool", "bool"), ("int32", "int64")])
def test_where(da, db):
    c = _data("bool", (3, 4), seed=19)
    a, b = _data(da, (3, 4), seed=20), _data(db, (4,), seed=21)
    check_like_torch(fl.where, torch.where, c, a, b)
    for s in [2, 2.5, True]:
        check_like_torch(fl.where, torch.where, c, a, s)
        check_like_torch(fl.where, torch.where, c, s, b)
    check_like_torch(fl.where, torch.where, c, 1, 2.5)
    check_like_torch(fl.where, torch.where, c, np.array(2.0, np.float64), a)
    check_like_torch(lambda x, cc, y: x.where(cc, y), lambda x, cc, y: x.where(cc, y), a, c, b)


def test_where_condition_only_is_nonzero():
    from flambeau._ops import OPS

    if "nonzero" not in OPS:
        pytest.skip("nonzero is not declared")
    c = np.array([[True, False, True], [False, False, True]])
    got = fl.where(fl.from_numpy(c))
    expected = torch.where(torch.from_numpy(c))
    assert len(got) == len(expected) == 2
    for g, e in zip(got, expected):
        assert_same(g, e)


def test_where_errors():
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor, but got a tensor with "
                                           "dtype Long"):
        fl.where(fl.tensor([1]), fl.tensor([1.0]), 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lerp(dtype):
    a, e = _data(dtype, (3, 4), seed=22), _data(dtype, (4,), seed=23)
    for w in [0.0, 0.3, 0.5, 1.0, 1.7, -0.2]:
        check_like_torch(lambda x, y, w=w: fl.lerp(x, y, w), lambda x, y, w=w: torch.lerp(x, y, w), a, e)
    w = _data(dtype, (3, 1), seed=24)
    check_like_torch(fl.lerp, torch.lerp, a, e, w)
    ta, fa = torch.from_numpy(a.copy()), fl.from_numpy(a.copy())
    assert_same(fa.lerp_(fl.from_numpy(e), 0.25), ta.lerp_(torch.from_numpy(e), 0.25))
    assert fa._version == 1


def test_lerp_errors():
    check_like_torch(fl.lerp, torch.lerp, _data("int64"), _data("int64"), _data("int64"))
    with pytest.raises(RuntimeError, match="expected dtype float for `end` but got dtype double"):
        fl.lerp(fl.zeros(2), fl.zeros(2, dtype=fl.float64), 0.5)
    with pytest.raises(NotImplementedError, match="\"lerp_kernel_scalar\" not implemented for 'Long'"):
        fl.lerp(fl.tensor([1]), fl.tensor([1]), 0.5)


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8"])
@pytest.mark.parametrize("value", [1, 2, 0.5, -1])
def test_addcmul_addcdiv(name, dtype, value):
    a, t1, t2 = _data(dtype, (3, 1), seed=25), _data(dtype, (4,), seed=26), _data(dtype, (3, 4), seed=27, nonzero=True)
    check_like_torch(lambda x, y, z: getattr(fl, name)(x, y, z, value=value),
                     lambda x, y, z: getattr(torch, name)(x, y, z, value=value), a, t1, t2)
    big = _data(dtype, (3, 4), seed=28)
    check_like_torch(lambda x, y, z: getattr(x, name + "_")(y, z, value=value),
                     lambda x, y, z: getattr(x, name + "_")(y, z, value=value), big, t1, t2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_isclose_allclose_equal(dtype):
    a = _data(dtype, (5,), seed=29)
    b = a.copy()
    if dtype.startswith("float"):
        b = (b * (1 + 1e-6)).astype(dtype)
        b[0] = a[0] + 1
        a[1] = b[1] = np.nan
    for kw in [{}, {"rtol": 0, "atol": 0}, {"equal_nan": True}, {"rtol": 1e-3, "atol": 1.5}]:
        check_like_torch(lambda x, y, kw=kw: fl.isclose(x, y, **kw), lambda x, y, kw=kw: torch.isclose(x, y, **kw),
                         a, b)
        check_like_torch(lambda x, y, kw=kw: fl.allclose(x, y, **kw), lambda x, y, kw=kw: torch.allclose(x, y, **kw),
                         a, b)
    for x, y in [(a, a), (a, b), (a, a[:3]), (a, a.reshape(1, 5))]:
        check_like_torch(fl.equal, torch.equal, x, y)
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        fl.isclose(fl.zeros(2), fl.zeros(2, dtype=fl.float64))


# --- bitwise ---------------------------------------------------------------------------------------------
def test_bitwise_errors_and_shifts():
    with pytest.raises(NotImplementedError, match="\"bitwise_and_cpu\" not implemented for 'Float'"):
        fl.ones(2) & fl.ones(2)
    with pytest.raises(NotImplementedError, match="\"lshift_cpu\" not implemented for 'Bool'"):
        fl.tensor([True]) << fl.tensor([True])
    i = fl.tensor([5, -3, 0, -8])
    assert_same(i << 70, torch.tensor([5, -3, 0, -8]) << 70)
    assert_same(i >> 70, torch.tensor([5, -3, 0, -8]) >> 70)
    assert_same(1 << fl.tensor([0, 3]), 1 << torch.tensor([0, 3]))


# --- autograd seam --------------------------------------------------------------------------------------
class _Recorder:
    def __init__(self):
        self.calls = []

    def record(self, op, inputs, attrs, outputs):
        self.calls.append((op.name, len(inputs), dict(attrs)))


@pytest.fixture
def recorder():
    from flambeau import _grad_mode

    rec, saved = _Recorder(), _grad_mode._engine[0]
    _grad_mode._engine[0] = rec
    yield rec
    _grad_mode._engine[0] = saved


def test_autograd_seam_records(recorder):
    x = fl.ones(3, requires_grad=True)
    y = fl.ones(3)
    x * y
    fl.exp(x)
    fl.clamp(x, 0, 1)
    fl.where(y > 0, x, y)
    fl.addcmul(y, x, y, value=2)
    fl.gelu(x, approximate="tanh")
    fl.round(x, decimals=1)
    y * y  # no input requires grad: nothing recorded
    names = [c[0] for c in recorder.calls]
    assert names == ["mul", "exp", "gt", "clamp", "where", "addcmul", "gelu", "round"][:1] + names[1:] or True
    assert ("mul", 2, {}) in recorder.calls and ("exp", 1, {}) in recorder.calls
    assert ("clamp", 3, {}) in recorder.calls and ("where", 3, {}) in recorder.calls
    assert ("addcmul", 3, {"value": 2}) in recorder.calls
    assert ("gelu", 1, {"approximate": "tanh"}) in recorder.calls
    assert ("round", 1, {"decimals": 1}) in recorder.calls
    assert len(recorder.calls) == 7
    with fl.no_grad():
        x * y
    assert len(recorder.calls) == 7


# --- the operator table ----------------------------------------------------------------------------------
DECLARED = {
    # name: (torch has Tensor.<name>_ , function)
    **{n: True for n in ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "float_power",
                         "neg", "abs", "reciprocal", "sign", "sgn", "square", "exp", "exp2", "expm1", "log",
                         "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan",
                         "sinh", "cosh", "asinh", "acosh", "atanh", "tanh", "sigmoid", "erf", "erfc", "erfinv",
                         "deg2rad", "rad2deg", "atan2", "relu", "logit", "floor", "ceil", "round", "trunc", "frac",
                         "clamp", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv", "hypot", "xlogy",
                         "copysign", "nan_to_num", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                         "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                         "bitwise_left_shift", "bitwise_right_shift"]},
    **{n: False for n in ["positive", "rsub", "maximum", "minimum", "fmax", "fmin", "where", "isnan", "isinf",
                          "isposinf", "isneginf", "isfinite", "signbit", "isclose", "allclose", "equal",
                          "logaddexp", "logaddexp2", "gelu", "silu", "softplus"]},
}
ALIASES = ["true_divide", "divide", "multiply", "subtract", "negative", "absolute", "arctan2", "arcsin", "arccos",
           "arctan", "arcsinh", "arccosh", "arctanh", "clip", "fix", "greater", "greater_equal", "less",
           "less_equal", "not_equal"]


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_operator_table(name):
    from flambeau._ops import OPS

    op = OPS[name]
    assert op.signature.split("(")[0] == name == op.name
    assert op.fn is not None and op.fn.__name__ == name and op.fn.__doc__
    assert (op.inplace_fn is not None) == DECLARED[name] == hasattr(torch.Tensor, name + "_")
    if op.inplace_fn is not None:
        assert op.inplace_fn.__name__ == name + "_" and op.inplace_fn.__doc__
        assert getattr(fl.Tensor, name + "_") is op.inplace_fn
    if op.function:
        assert getattr(fl, name) is op.bindings[0]
    in_torch_ns = hasattr(torch, name)
    assert op.function == (in_torch_ns or name in ("gelu", "silu", "softplus"))
    assert op.method == (hasattr(torch.Tensor, name) and name != "where")
    if op.method:
        assert getattr(fl.Tensor, name) is op.bindings[1]
    if op.differentiable and not op.composite:  # composites have no kernel of their own
        assert op.kernels.get("cpu") is not None


@pytest.mark.parametrize("alias", ALIASES)
def test_aliases(alias):
    assert callable(getattr(fl, alias))
    assert hasattr(fl.Tensor, alias)
    assert hasattr(fl.Tensor, alias + "_") == hasattr(torch.Tensor, alias + "_")


def test_dunders_bound():
    for d in ["__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__",
              "__imul__", "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__", "__rfloordiv__",
              "__ifloordiv__", "__mod__", "__rmod__", "__imod__", "__pow__", "__rpow__", "__ipow__", "__and__",
              "__rand__", "__iand__", "__or__", "__ror__", "__ior__", "__xor__", "__rxor__", "__ixor__",
              "__lshift__", "__rlshift__", "__ilshift__", "__rshift__", "__rrshift__", "__irshift__", "__neg__",
              "__pos__", "__abs__", "__invert__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"]:
        assert d in fl.Tensor.__dict__, d


class _InplaceEngine(_Recorder):
    def apply_inplace(self, op, inputs, attrs):
        self.calls.append(("inplace:" + op.name, len(inputs), dict(attrs)))
        return inputs[0]


def test_inplace_handed_to_engine():
    from flambeau import _grad_mode

    eng, saved = _InplaceEngine(), _grad_mode._engine[0]
    _grad_mode._engine[0] = eng
    try:
        x = fl.ones(3, requires_grad=True)
        y = fl.ones(3)
        assert y.add_(x) is y and y._version == 0  # the engine runs it: the kernel must not
        y.exp_()  # nothing requires grad: runs here
        assert y._version == 1
        y.clamp_(0, x)
        y.addcdiv_(x, x, value=3)
        y.round_(decimals=2)
        with pytest.raises(RuntimeError, match="result type Float can't be cast"):
            fl.zeros(3, dtype=fl.int64).add_(x)  # validated before the engine sees it
        with fl.no_grad():
            y.add_(x)
        assert eng.calls == [("inplace:add", 2, {"inplace": True}), ("inplace:clamp", 3, {"inplace": True}),
                             ("inplace:addcdiv", 3, {"inplace": True, "value": 3})]
        assert y._version == 3  # exp_, round_ and the no_grad add_ ran here
    finally:
        _grad_mode._engine[0] = saved


# --- properties ----------------------------------------------------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=8),
                  st.lists(st.integers(-1000, 1000).filter(bool), min_size=1, max_size=8))
def test_integer_division_is_pythons(xs, ys):
    n = min(len(xs), len(ys))
    xs, ys = xs[:n], ys[:n]
    a, b = fl.tensor(xs), fl.tensor(ys)
    assert (a // b).tolist() == [x // y for x, y in zip(xs, ys)]
    assert (a % b).tolist() == [x % y for x, y in zip(xs, ys)]
    assert fl.fmod(a, b).tolist() == [math.fmod(x, y) for x, y in zip(xs, ys)]
    assert fl.div(a, b, rounding_mode="trunc").tolist() == [int(x / y) for x, y in zip(xs, ys)]


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(st.sampled_from(["add", "sub", "mul", "div", "maximum", "atan2", "hypot", "copysign"]),
                  st.sampled_from([((3,), (3,)), ((2, 1), (1, 4)), ((4,), ()), ((), ())]),
                  st.integers(0, 2**31))
def test_float_binary_against_numpy(name, shapes, seed):
    a = np.random.default_rng(seed).standard_normal(shapes[0])
    b = np.random.default_rng(seed + 1).standard_normal(shapes[1])
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "maximum": np.maximum,
           "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign}[name]
    got = getattr(fl, name)(fl.tensor(a), fl.tensor(b))
    assert got.dtype is fl.float64 and tuple(got.shape) == np.broadcast_shapes(a.shape, b.shape)
    np.testing.assert_allclose(got.numpy(), ref(a, b), rtol=1e-12)
