"""CUDA kernels against numpy and the CPU backend (tier 2: numba's simulator; also runs on a GPU).

Sizes are small: the simulator runs every CUDA thread as a Python thread.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

DTYPES = [fl.float32, fl.float64, fl.int32, fl.int64]
RNG = np.random.default_rng(0)


def _host(shape, dtype, low=-5, high=5):
    if dtype is fl.bool:
        return RNG.random(shape) > 0.5
    if dtype.is_floating_point:
        return RNG.uniform(low, high, shape).astype(dtype.np)
    return RNG.integers(low, high, shape).astype(dtype.np)


def _pair(shape, dtype, **kw):
    h = _host(shape, dtype, **kw)
    c = fl.tensor(h)
    return c, c.to("cuda")


def _check(got, want, rtol=1e-5, atol=1e-6):
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    g, w = got.cpu().numpy(), want.numpy()
    if want.dtype.is_floating_point:
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


# --- moves ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [fl.float32, fl.float64, fl.int32, fl.int64, fl.bool, fl.int8, fl.uint8,
                                   fl.float16])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4), (3, 0, 2)])
def test_round_trip(dtype, shape):
    h = _host(shape, dtype)
    t = fl.tensor(h).to("cuda")
    assert t.device == fl.device("cuda:0") and t.is_cuda and t.dtype is dtype
    assert tuple(t.shape) == shape and t.is_contiguous()
    back = t.cpu()
    assert back.device.type == "cpu" and back.dtype is dtype
    np.testing.assert_array_equal(back.numpy(), h)
    np.testing.assert_array_equal(t.to("cpu").numpy(), h)
    np.testing.assert_array_equal(np.asarray(t), h)


def test_round_trip_non_contiguous_and_views():
    h = np.arange(24, dtype=np.float32).reshape(4, 6)
    c = fl.from_numpy(h).cuda()
    np.testing.assert_array_equal(fl.from_numpy(h).T.cuda().cpu().numpy(), h.T)
    np.testing.assert_array_equal(c.T.cpu().numpy(), h.T)
    np.testing.assert_array_equal(c[1:3, ::2].cpu().numpy(), h[1:3, ::2])
    np.testing.assert_array_equal(c[2].cpu().numpy(), h[2])
    assert c[1].data_ptr() == c.data_ptr() + 6 * 4
    assert c[1:, 2:].storage_offset() == 8
    assert c[1]._storage is c._storage
    assert c[2, 3].item() == 15.0
    assert c.tolist() == h.tolist()


@pytest.mark.parametrize("src", DTYPES + [fl.bool])
@pytest.mark.parametrize("dst", DTYPES + [fl.bool, fl.int8])
def test_device_dtype_cast(src, dst):
    cpu, gpu = _pair((3, 4), src)
    _check(gpu.to(dst), cpu.to(dst))
    _check(gpu.T.to(dst), cpu.T.to(dst))


def test_factories_on_device():
    z = fl.zeros(2, 3, device="cuda")
    assert z.device.type == "cuda"
    np.testing.assert_array_equal(z.cpu().numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(fl.ones(4, dtype=fl.int64, device="cuda").cpu().numpy(), np.ones(4, np.int64))
    np.testing.assert_array_equal(fl.full((2, 2), 7, device="cuda").cpu().numpy(), np.full((2, 2), 7))
    np.testing.assert_array_equal(fl.arange(5, device="cuda").cpu().numpy(), np.arange(5))
    assert fl.empty(0, device="cuda").numel() == 0


# --- copies ---------------------------------------------------------------------------------------
def test_clone_contiguous_copy_fill_zero():
    cpu, gpu = _pair((4, 5), fl.float32)
    _check(gpu.T.clone(), cpu.T.clone())
    c = gpu.T.contiguous()
    assert c.is_contiguous()
    _check(c, cpu.T.contiguous())
    assert gpu.contiguous() is gpu
    dst = fl.zeros(5, 4, device="cuda")
    dst.copy_(gpu.T)
    _check(dst, cpu.T.contiguous())
    dst.copy_(fl.tensor([1.0, 2.0, 3.0, 4.0]))  # from the CPU, broadcast
    np.testing.assert_array_equal(dst.cpu().numpy(), np.tile([1.0, 2.0, 3.0, 4.0], (5, 1)))
    dst[:, 1].fill_(9)  # through a strided view
    assert dst.cpu().numpy()[:, 1].tolist() == [9.0] * 5
    dst[1:3].zero_()
    assert dst.cpu().numpy()[1:3].sum() == 0
    i = fl.zeros(3, dtype=fl.int32, device="cuda")
    i.copy_(fl.tensor([1.7, -2.2, 3.9], device="cuda"))
    assert i.cpu().tolist() == [1, -2, 3]
    v = dst._version
    dst.fill_(fl.tensor(2.0))
    assert dst._version == v + 1 and dst.sum().item() == 40.0


# --- elementwise ----------------------------------------------------------------------------------
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "pow",
          "atan2", "hypot", "copysign", "fmax", "fmin", "logaddexp", "logaddexp2", "xlogy", "remainder",
          "floor_divide", "fmod", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
          "bitwise_xor"]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (3,)), ((0, 3), (3,))]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_vs_cpu(name, dtype):
    fn = getattr(fl, name, None)
    if fn is None:
        pytest.skip(f"flambeau.{name} not declared")
    low = 0 if name == "pow" else -5
    high = 3 if name == "pow" else 5
    for sa, sb in SHAPES:
        ca, ga = _pair(sa, dtype, low=low, high=high)
        cb, gb = _pair(sb, dtype, low=low, high=high)
        if name in ("div", "remainder", "floor_divide", "fmod"):
            cb, gb = cb + (cb == 0).to(dtype), gb + (gb == 0).to(dtype)
        try:
            want = fn(ca, cb)
        except RuntimeError:  # not defined for this dtype on CPU: an error on CUDA too
            with pytest.raises(RuntimeError):
                fn(ga, gb)
            continue
        _check(fn(ga, gb), want, rtol=1e-4)


@pytest.mark.parametrize("name", ["add", "mul", "sub", "div", "lt", "maximum"])
def test_binary_scalars_and_promotion(name):
    fn = getattr(fl, name)
    ca, ga = _pair((2, 3), fl.int32)
    cf, gf = _pair((2, 3), fl.float32)
    for x, y, cx, cy in [(ga, 2, ca, 2), (2.5, ga, 2.5, ca), (ga, gf, ca, cf), (gf, 3, cf, 3)]:
        _check(fn(x, y), fn(cx, cy), rtol=1e-5)


def test_binary_non_contiguous_operands():
    h = _host((4, 6), fl.float64)
    c = fl.tensor(h)
    g = c.cuda()
    _check(g.T + g.T, c.T + c.T)
    _check(g[:, ::2] * g[:, 1::2], c[:, ::2] * c[:, 1::2])
    _check(g[1:3].T - g[0, :2], c[1:3].T - c[0, :2])
    _check(g[:, 1:2] / g[0:1, ::3], c[:, 1:2] / c[0:1, ::3])


def test_binary_bool_and_comparisons_give_bool():
    ca, ga = _pair((3, 3), fl.bool)
    cb, gb = _pair((3, 3), fl.bool)
    _check(ga + gb, ca + cb)
    _check(ga == gb, ca == cb)
    cf, gf = _pair((3, 3), fl.float32)
    r = gf > 0
    assert r.dtype is fl.bool
    _check(r, cf > 0)


def test_inplace_through_views():
    cpu, gpu = _pair((4, 6), fl.float32)
    cpu[:, ::2].mul_(2)
    gpu[:, ::2].mul_(2)
    _check(gpu, cpu)
    cpu.T.add_(1.0)
    gpu.T.add_(1.0)
    _check(gpu, cpu)
    gpu[1] += gpu[2]
    cpu[1] += cpu[2]
    _check(gpu, cpu)
    v = gpu._version
    gpu.exp_()
    assert gpu._version == v + 1
    _check(gpu, cpu.exp())


UNARY = ["neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "exp2", "expm1",
         "log1p", "log2", "log10", "rsqrt", "tan", "atan", "sinh", "cosh", "erf", "reciprocal", "square",
         "sign", "silu", "asin", "acos", "erfc", "acosh", "asinh", "atanh", "deg2rad", "rad2deg", "signbit",
         "isposinf", "isneginf", "positive", "logical_not", "bitwise_not", "isnan", "isinf", "isfinite"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_vs_cpu(name, dtype):
    fn = getattr(fl, name, None)
    if fn is None:
        pytest.skip(f"flambeau.{name} not declared")
    lo, hi = ((-0.9, 0.9) if dtype.is_floating_point else (-1, 2)) if name in ("asin", "acos", "atanh") \
        else (1, 4) if name == "acosh" else (-3, 3)
    h = _host((3, 5), dtype, low=lo, high=hi)
    if name in ("log", "sqrt", "log2", "log10", "rsqrt", "log1p") and dtype.is_floating_point:
        h = np.abs(h) + 0.5
    c = fl.tensor(h)
    g = c.cuda()
    try:
        want = fn(c)
    except RuntimeError as e:  # not defined for this dtype on CPU: same error family on CUDA
        with pytest.raises(RuntimeError):
            fn(g)
        pytest.skip(f"{name} not defined for {dtype}: {e}")
    _check(fn(g), want, rtol=1e-4, atol=1e-5)
    _check(fn(g.T), fn(c.T), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [1, 7, 24, 25, 31, 32, 33, 57, 100])
def test_grouped_loads_cover_every_element(n):
    """The elementwise kernels take four elements a thread, the last ones one at a time (Note [Grouped loads];
    under the simulator a grid of at most 8 threads, so every length from 25 on takes both loops): unary,
    binary with an array or a scalar, in place, ternary with a scalar operand, a strided 1-d view, and 2-d
    broadcast and transposed operands."""
    rng = np.random.default_rng(n)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    da, db, dc = (fl.tensor(v, device="cuda") for v in (a, b, c))
    np.testing.assert_array_equal((da + db).cpu().numpy(), a + b)
    np.testing.assert_array_equal((da * 2).cpu().numpy(), a * np.float32(2))
    np.testing.assert_array_equal((3 - da).cpu().numpy(), np.float32(3) - a)
    np.testing.assert_array_equal(da.relu().cpu().numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(fl.where(da > 0, db, 0.5).cpu().numpy(), np.where(a > 0, b, np.float32(0.5)))
    np.testing.assert_array_equal(fl.addcmul(da, db, dc, value=2).cpu().numpy(),
                                  fl.addcmul(*(fl.tensor(v) for v in (a, b, c)), value=2).numpy())
    dd = fl.tensor(np.repeat(a, 2), device="cuda")[::2]  # 1-d, stride 2
    np.testing.assert_array_equal((dd + 1).cpu().numpy(), a + np.float32(1))
    m, v = rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    dm, dv = fl.tensor(m, device="cuda"), fl.tensor(v, device="cuda")
    np.testing.assert_array_equal((dm + dv).cpu().numpy(), m + v)  # broadcast: a 2-d kernel
    np.testing.assert_array_equal((dm.t() * 2).cpu().numpy(), m.T * np.float32(2))  # transposed
    np.testing.assert_array_equal(fl.clamp(dm.t(), dv[:, None], 1.0).cpu().numpy(), np.clip(m.T, v[:, None], 1))
    da.add_(db)
    np.testing.assert_array_equal(da.cpu().numpy(), a + b)


def test_unary_special_values():
    h = np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 1e-30], np.float32)
    c = fl.tensor(h)
    g = c.cuda()
    for name in ("log", "sqrt", "exp", "sigmoid", "tanh", "abs", "neg", "relu", "sign"):
        _check(getattr(fl, name)(g), getattr(fl, name)(c))
    for name in ("isnan", "isinf", "isfinite"):
        if hasattr(fl, name):
            _check(getattr(fl, name)(g), getattr(fl, name)(c))


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3)])
def test_zero_dim_and_empty(shape):
    c, g = _pair(shape, fl.float32)
    _check(g + 1, c + 1)
    _check(fl.exp(g), fl.exp(c))
    _check(g * g, c * c)
    _check(g.sum(), c.sum())


def test_unsupported_dtype_error_names_op():
    g = fl.tensor([True, False], device="cuda")
    with pytest.raises(RuntimeError, match="\"hypot_cuda\" not implemented for 'Bool'"):
        fl._OPS["hypot"].kernel("cuda")(g._data, g._data, fl.bool)  # the kernel's own check, under the front's
    h = fl.tensor([1.0, 2.5], dtype=fl.float16)
    _check(h.cuda() + h.cuda(), h + h)  # float16 computes in float32
    _check(fl.exp(h.cuda()) > 3, fl.exp(h) > 3)


# --- reductions -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES + [fl.bool])
def test_sum(dtype):
    c, g = _pair((2, 3, 4), dtype)
    _check(g.sum(), c.sum(), rtol=1e-5)
    for dim, keepdim in ((0, False), (-1, True), ((0, 2), False), ((1, 2), True)):
        _check(g.sum(dim, keepdim=keepdim), c.sum(dim, keepdim=keepdim), rtol=1e-5)
    _check(g.transpose(0, 2).sum(1), c.transpose(0, 2).sum(1), rtol=1e-5)
    _check(g[:, ::2].sum((0, 2)), c[:, ::2].sum((0, 2)), rtol=1e-5)


def test_sum_dtype_and_edge_cases():
    c, g = _pair((4, 3), fl.int32)
    assert g.sum().dtype is fl.int64
    _check(g.sum(dtype=fl.float64), c.sum(dtype=fl.float64))
    _check(fl.zeros(0, 3, device="cuda").sum(0), fl.zeros(0, 3).sum(0))
    _check(fl.zeros(0, 3, device="cuda").sum(), fl.zeros(0, 3).sum())
    _check(fl.tensor(2.5, device="cuda").sum(), fl.tensor(2.5).sum())
    big_c, big_g = _pair((300,), fl.float64)  # several blocks per output, then a second pass (simulator)
    _check(big_g.sum(), big_c.sum(), rtol=1e-9)
    assert abs(g.sum().item() - int(c.sum().item())) == 0


def test_mean():
    if "mean" not in fl._OPS:
        pytest.skip("mean not declared")
    c, g = _pair((3, 4), fl.float32)
    _check(g.mean(), c.mean())
    _check(g.mean(1, keepdim=True), c.mean(1, keepdim=True))


# --- matmul ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", [((3, 5), (5, 2)), ((5,), (5, 3)), ((3, 5), (5,)), ((5,), (5,)),
                                   ((2, 3, 4), (4, 2)), ((2, 1, 3, 4), (3, 4, 2)), ((0, 3), (3, 2)),
                                   ((3, 0), (0, 2))])
def test_matmul(dtype, sa, sb):
    ca, ga = _pair(sa, dtype, low=-3, high=3)
    cb, gb = _pair(sb, dtype, low=-3, high=3)
    _check(fl.matmul(ga, gb), fl.matmul(ca, cb), rtol=1e-4, atol=1e-4)
    _check(ga @ gb, ca @ cb, rtol=1e-4, atol=1e-4)


def test_mm_bmm_transposed_operands():
    ca, ga = _pair((5, 3), fl.float32)
    cb, gb = _pair((2, 5), fl.float32)
    _check(fl.mm(ga.T, gb.T), fl.mm(ca.T, cb.T), rtol=1e-4)
    ca3, ga3 = _pair((2, 4, 3), fl.float64)
    cb3, gb3 = _pair((2, 4, 5), fl.float64)
    _check(fl.bmm(ga3.transpose(1, 2), gb3), fl.bmm(ca3.transpose(1, 2), cb3))


# --- devices --------------------------------------------------------------------------------------
def test_mixing_devices_raises():
    g = fl.ones(3, device="cuda")
    c = fl.ones(3)
    msg = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    with pytest.raises(RuntimeError, match=msg.replace("(", r"\(")):
        g + c
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        c * g
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        fl.matmul(fl.ones(2, 3, device="cuda"), fl.ones(3, 2))


def test_zero_dim_cpu_tensor_joins_cuda_op():
    g = fl.ones(3, device="cuda")
    c = fl.ones(3)
    _check(g + fl.tensor(2.0), c + 2.0)  # a 0-dim CPU tensor joins as a scalar
    _check(fl.tensor(2.0) * g, c * 2.0)
    _check(fl.tensor(2, dtype=fl.int32) * g, c * 2)


def test_missing_kernel_raises_not_implemented():
    from flambeau._ops import OPS

    missing = [op for op in OPS.values() if "cuda" not in op.kernels]
    if not missing:
        pytest.skip("every op has a CUDA kernel")
    with pytest.raises(NotImplementedError, match=f"flambeau.{missing[0].name} has no kernel for device type 'cuda'"):
        missing[0].kernel("cuda")
    if "cumsum" in OPS and "cuda" not in OPS["cumsum"].kernels:
        with pytest.raises(NotImplementedError, match="cumsum.*'cuda'"):
            fl.cumsum(fl.ones(3, device="cuda"), 0)


def test_repr_shows_device():
    g = fl.tensor([1.0, 2.0], device="cuda")
    assert repr(g) == "tensor([1., 2.], device='cuda:0')"
    assert g.type() == "torch.cuda.FloatTensor"
    assert g.get_device() == 0


def test_numpy_requires_cpu():
    g = fl.ones(2, device="cuda")
    with pytest.raises(TypeError, match="can't convert cuda"):
        g.numpy()
    np.testing.assert_array_equal(g.numpy(force=True), np.ones(2, np.float32))
