"""batch_norm, layer_norm, group_norm and their fused backward operators, against torch.

The backward operators are called directly (``OPS[...].fn``) with the statistics the forward kernel
returns, so these tests need no autograd engine; torch's autograd gives the reference gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops import OPS

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}
RNG = np.random.default_rng(7)


def arr(shape, dtype, scale=2.0, shift=1.0):
    return (RNG.standard_normal(shape) * scale + shift).astype(dtype)


def layout(a: np.ndarray, kind: str) -> fl.Tensor:
    """``a`` as a flambeau tensor: contiguous, or with the same values in a non-contiguous layout."""
    if kind == "contiguous":
        return fl.from_numpy(a.copy())
    perm = tuple(reversed(range(a.ndim)))
    return fl.from_numpy(np.ascontiguousarray(a.transpose(perm))).permute(*perm)


def close(x, y, dtype):
    """``x`` matches the reference ``y`` to ``dtype``'s tolerance, relative to the largest reference value."""
    x = x.numpy() if isinstance(x, fl.Tensor) else x
    y = y.detach().numpy() if isinstance(y, torch.Tensor) else y
    tol = TOL[dtype]
    np.testing.assert_allclose(x, y, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, float(np.abs(y).max(initial=0))))


def torch_grads(fn, arrays, go):
    """torch's output and gradients, computed in float64 (the reference for float32 inputs too)."""
    ts = [None if a is None else torch.from_numpy(a.astype(np.float64)).requires_grad_(True) for a in arrays]
    out = fn(*ts)
    out.backward(torch.from_numpy(go.astype(np.float64)))
    return out, [None if t is None else t.grad for t in ts]


# --- batch_norm -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5), (3, 2, 1, 2, 2)])
@pytest.mark.parametrize("kind", ["contiguous", "transposed"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_forward_and_running_stats(dtype, shape, kind, training):
    x = arr(shape, dtype)
    c = shape[1]
    w, b = arr(c, dtype), arr(c, dtype)
    rm, rv = arr(c, dtype, 0.5, 0.0), np.abs(arr(c, dtype)) + 0.5
    frm, frv = fl.from_numpy(rm.copy()), fl.from_numpy(rv.copy())
    trm, trv = torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())
    for _ in range(3):  # running statistics over several steps
        y = fl.batch_norm(layout(x, kind), frm, frv, fl.from_numpy(w), fl.from_numpy(b), training, 0.3, 1e-4)
        ty = torch.nn.functional.batch_norm(torch.from_numpy(x), trm, trv, torch.from_numpy(w), torch.from_numpy(b),
                                            training, 0.3, 1e-4)
        close(y, ty, dtype)
        close(frm, trm, dtype)
        close(frv, trv, dtype)
    assert y.dtype == fl.from_numpy(x).dtype and tuple(y.shape) == shape


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm_without_affine_or_running_stats(dtype):
    x = arr((5, 4, 3), dtype)
    y = fl.batch_norm(fl.from_numpy(x), None, None, training=True)
    close(y, torch.nn.functional.batch_norm(torch.from_numpy(x), None, None, training=True), dtype)


def test_batch_norm_bumps_running_stats_version_and_keeps_views():
    x = fl.randn(4, 3, 2)
    buf = fl.zeros(6)
    rm, rv = buf[:3], fl.ones(3)
    v = rm._version
    fl.batch_norm(x, rm, rv, training=True)
    assert rm._version > v
    assert not np.allclose(buf.numpy()[:3], 0) and np.allclose(buf.numpy()[3:], 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_backward(dtype, shape, training, affine):
    x = arr(shape, dtype)
    c = shape[1]
    w = arr(c, dtype) if affine else None
    b = arr(c, dtype) if affine else None
    rm, rv = arr(c, dtype, 0.5, 0.0), np.abs(arr(c, dtype)) + 0.5
    go = arr(shape, dtype)
    _, mean, invstd = OPS["batch_norm"].kernel("cpu")(x, rm.copy(), rv.copy(), w, b, training, 0.1, 1e-5)
    rm, rv = rm.astype(np.float64), rv.astype(np.float64)
    dx, dw, db = OPS["batch_norm_backward"].fn(
        fl.from_numpy(go), fl.from_numpy(x), None if w is None else fl.from_numpy(w), fl.from_numpy(mean),
        fl.from_numpy(invstd), training, (True, affine, affine))
    _, (tx, tw, tb) = torch_grads(
        lambda x, w, b: torch.nn.functional.batch_norm(x, torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy()),
                                                       w, b, training, 0.1, 1e-5), [x, w, b], go)
    close(dx, tx, dtype)
    if affine:
        close(dw, tw, dtype)
        close(db, tb, dtype)
    else:
        assert dw is None and db is None


def test_batch_norm_float16_computes_in_float32():
    x = arr((4, 3, 5), np.float16)
    y = fl.batch_norm(fl.from_numpy(x), None, None, training=True)
    assert y.dtype == fl.float16
    ref = torch.nn.functional.batch_norm(torch.from_numpy(x.astype(np.float32)), None, None, training=True)
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref.numpy(), rtol=2e-3, atol=2e-3)


def test_batch_norm_float16_running_stats_and_weight():
    """float16 running statistics, weight and bias (Note [Per-channel coefficients in one call] works in a
    float32 copy of them): updated in place like torch's float32 computation, gradients too."""
    x, w, b = arr((4, 3, 5), np.float16), arr(3, np.float16), arr(3, np.float16)
    rm, rv = fl.zeros(3, dtype=fl.float16), fl.ones(3, dtype=fl.float16)
    trm, trv = torch.zeros(3), torch.ones(3)
    xs = [fl.from_numpy(x).requires_grad_(True), fl.from_numpy(w).requires_grad_(True),
          fl.from_numpy(b).requires_grad_(True)]
    ts = [torch.from_numpy(a.astype(np.float32)).requires_grad_(True) for a in (x, w, b)]
    y = fl.batch_norm(xs[0], rm, rv, xs[1], xs[2], True, 0.5, 1e-5)
    ty = torch.nn.functional.batch_norm(ts[0], trm, trv, ts[1], ts[2], True, 0.5, 1e-5)
    tol = dict(rtol=5e-3, atol=5e-3)
    np.testing.assert_allclose(y.detach().numpy().astype(np.float32), ty.detach().numpy(), **tol)
    np.testing.assert_allclose(rm.numpy().astype(np.float32), trm.numpy(), **tol)
    np.testing.assert_allclose(rv.numpy().astype(np.float32), trv.numpy(), **tol)
    assert rm.dtype == fl.float16 and not np.allclose(rv.numpy(), 1)
    go = arr((4, 3, 5), np.float16)
    y.backward(fl.from_numpy(go))
    ty.backward(torch.from_numpy(go.astype(np.float32)))
    for a, t in zip(xs, ts):
        assert a.grad.dtype == fl.float16
        np.testing.assert_allclose(a.grad.numpy().astype(np.float32), t.grad.numpy(), rtol=2e-2, atol=2e-2)


def test_batch_norm_empty_batch():
    y = fl.batch_norm(fl.zeros(0, 4, 3), fl.zeros(4), fl.ones(4), training=True)
    assert tuple(y.shape) == (0, 4, 3)


def test_batch_norm_errors():
    x = fl.randn(4, 3, 5)
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        fl.batch_norm(x, fl.zeros(4), fl.ones(3), training=True)
    with pytest.raises(RuntimeError, match="running_var should contain 3 elements not 4"):
        fl.batch_norm(x, fl.zeros(3), fl.ones(4), training=True)
    with pytest.raises(RuntimeError, match="weight should contain 3 elements not 4"):
        fl.batch_norm(x, None, None, fl.ones(4), training=True)
    with pytest.raises(RuntimeError, match="bias should contain 3 elements not 2"):
        fl.batch_norm(x, None, None, None, fl.ones(2), training=True)
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, got input size "
                                         r"flambeau.Size\(\[1, 3\]\)"):
        fl.batch_norm(fl.randn(1, 3), None, None, training=True)
    with pytest.raises(RuntimeError, match="running_mean must be defined in evaluation mode"):
        fl.batch_norm(x, None, None, training=False)
    with pytest.raises(ValueError, match=r"expected input of shape \(N, C\)"):
        fl.batch_norm(fl.randn(3), None, None, training=True)
    with pytest.raises(RuntimeError, match="expected a floating point input"):
        fl.batch_norm(fl.ones(2, 3, dtype=fl.int64), None, None, training=True)
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        fl.batch_norm(np.ones((2, 3)), None, None, training=True)


# --- layer_norm -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,normalized", [((4, 7), (7,)), ((2, 3, 5), (5,)), ((2, 3, 4), (3, 4)), ((6,), (6,))])
@pytest.mark.parametrize("kind", ["contiguous", "transposed"])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_forward_and_backward(dtype, shape, normalized, kind, affine):
    x = arr(shape, dtype)
    w = arr(normalized, dtype) if affine != "none" else None
    b = arr(normalized, dtype) if affine == "both" else None
    y = fl.layer_norm(layout(x, kind), normalized, None if w is None else fl.from_numpy(w),
                      None if b is None else fl.from_numpy(b), 1e-4)
    go = arr(shape, dtype)
    ty, (tx, tw, tb) = torch_grads(lambda x, w, b: torch.nn.functional.layer_norm(x, normalized, w, b, 1e-4),
                                   [x, w, b], go)
    close(y, ty, dtype)
    _, mean, rstd = OPS["layer_norm"].kernel("cpu")(x, len(normalized), w, b, 1e-4)
    dx, dw, db = OPS["layer_norm_backward"].fn(fl.from_numpy(go), layout(x, kind), normalized, fl.from_numpy(mean),
                                               fl.from_numpy(rstd), None if w is None else fl.from_numpy(w),
                                               (True, w is not None, b is not None))
    close(dx, tx, dtype)
    if w is not None:
        close(dw, tw, dtype)
    if b is not None:
        close(db, tb, dtype)


def test_layer_norm_accepts_int_shape_and_large_mean():
    x = arr((3, 50), np.float32, scale=1.0, shift=1000.0)
    y = fl.layer_norm(fl.from_numpy(x), 50)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x.astype(np.float64)), (50,)).numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-3, atol=1e-3)


def test_layer_norm_errors():
    x = fl.randn(4, 3, 5)
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], "
                                           r"but got input of size\[4, 3, 5\]"):
        fl.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match=r"Expected weight to be of same shape as normalized_shape, but got weight "
                                           r"of shape \[4\] and normalized_shape = \[5\]"):
        fl.layer_norm(x, (5,), fl.ones(4))
    with pytest.raises(RuntimeError, match=r"Expected bias to be of same shape"):
        fl.layer_norm(x, (5,), None, fl.ones(3))


# --- group_norm -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,groups", [((3, 6), 3), ((2, 6, 5), 2), ((2, 4, 3, 3), 4), ((2, 4, 3, 3), 1)])
@pytest.mark.parametrize("kind", ["contiguous", "transposed"])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_forward_and_backward(dtype, shape, groups, kind, affine):
    x = arr(shape, dtype)
    c = shape[1]
    w = arr(c, dtype) if affine else None
    b = arr(c, dtype) if affine else None
    y = fl.group_norm(layout(x, kind), groups, None if w is None else fl.from_numpy(w),
                      None if b is None else fl.from_numpy(b), 1e-4)
    go = arr(shape, dtype)
    ty, (tx, tw, tb) = torch_grads(lambda x, w, b: torch.nn.functional.group_norm(x, groups, w, b, 1e-4),
                                   [x, w, b], go)
    close(y, ty, dtype)
    _, mean, rstd = OPS["group_norm"].kernel("cpu")(x, groups, w, b, 1e-4)
    dx, dw, db = OPS["group_norm_backward"].fn(fl.from_numpy(go), fl.from_numpy(x), groups, fl.from_numpy(mean),
                                               fl.from_numpy(rstd), None if w is None else fl.from_numpy(w),
                                               (True, affine, affine))
    close(dx, tx, dtype)
    if affine:
        close(dw, tw, dtype)
        close(db, tb, dtype)


def test_group_norm_errors():
    x = fl.randn(4, 3, 5)
    with pytest.raises(RuntimeError, match=r"Expected number of channels in input to be divisible by num_groups, but "
                                           r"got input of shape \[4, 3, 5\] and num_groups=2"):
        fl.group_norm(x, 2)
    with pytest.raises(RuntimeError, match=r"Expected weight to be a vector of size equal to the number of channels "
                                           r"in input, but got weight of shape \[4\] and input of shape \[4, 3, 5\]"):
        fl.group_norm(x, 3, fl.ones(4))
    with pytest.raises(RuntimeError, match="Expected at least 2 dimensions for input tensor but received 1"):
        fl.group_norm(fl.randn(3), 1)


def test_empty_inputs():
    assert tuple(fl.group_norm(fl.zeros(0, 4, 3), 2).shape) == (0, 4, 3)
    assert tuple(fl.layer_norm(fl.zeros(0, 4), (4,)).shape) == (0, 4)
