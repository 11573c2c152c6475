"""clip_grad_norm_ on CUDA: the norm and the scaling stay on the device (no host synchronisation)."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn  # noqa: F401


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_on_cuda_equals_cpu_without_syncs(norm_type):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,))]
    results = {}
    for dev in ("cpu", "cuda"):
        params = [fl.zeros(g.shape, device=dev, requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = fl.tensor(g).to(dev)
        before = fl.cuda.host_sync_count()
        total = fl.nn.utils.clip_grad_norm_(params, 0.5, norm_type)
        if dev == "cuda":
            assert fl.cuda.host_sync_count() == before
            assert total.device.type == "cuda"
        results[dev] = (float(total), [p.grad.cpu().numpy() for p in params])
    assert results["cuda"][0] == pytest.approx(results["cpu"][0], rel=1e-5)
    for g, w in zip(results["cuda"][1], results["cpu"][1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def _clip_on(dev, arrays, max_norm, norm_type, layout=None):
    params = [fl.zeros(a.shape, dtype=fl.float64 if a.dtype == np.float64 else fl.float32, device=dev,
                       requires_grad=True) for a in arrays]
    for p, a in zip(params, arrays):
        g = fl.tensor(a).to(dev)
        p.grad = layout(g) if layout is not None else g
    versions = [p.grad._version for p in params]
    total = fl.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    return float(total), [p.grad.cpu().numpy() for p in params], versions, [p.grad._version for p in params]


@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])  # clipped, and left as they are (the coefficient clamps at 1)
def test_fused_clip_takes_many_chunks_and_empty_gradients(norm_type, dtype, max_norm):
    """Note [Fused gradient clipping]: gradients of several chunks each (eight elements a chunk under the
    simulator), an empty one, both dtypes, both norms; the same total and gradients as the CPU's, versions bumped."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s).astype(dtype) for s in ((7, 9), (0,), (1,), (33,), (2, 2, 5))]
    cpu, cuda = _clip_on("cpu", arrays, max_norm, norm_type), _clip_on("cuda", arrays, max_norm, norm_type)
    assert cuda[0] == pytest.approx(cpu[0], rel=1e-6 if dtype == np.float32 else 1e-12)
    for g, w in zip(cuda[1], cpu[1]):
        np.testing.assert_allclose(g, w, rtol=1e-6 if dtype == np.float32 else 1e-12)
    assert all(after == before + 1 for before, after in zip(cuda[2], cuda[3]) if max_norm < 1)


@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
def test_fused_clip_propagates_nan_and_inf(norm_type):
    for bad in (np.nan, np.inf):
        arrays = [np.ones(20, np.float32), np.array([1.0, bad, 2.0], np.float32)]
        cpu, cuda = _clip_on("cpu", arrays, 1.0, norm_type), _clip_on("cuda", arrays, 1.0, norm_type)
        np.testing.assert_equal(cuda[0], cpu[0])
        for g, w in zip(cuda[1], cpu[1]):
            np.testing.assert_array_equal(g, w)


def test_clip_of_gradients_the_fused_path_does_not_take():
    """A strided gradient, mixed dtypes and the 1-norm go through the tensor operators, with the same results."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    strided = lambda g: g.t().contiguous().t() if g.ndim == 2 else g  # (4, 6) with column-major strides  # noqa: E731
    for kwargs in ({"layout": strided}, {}):
        for norm_type in (2.0, 1.0):
            cpu = _clip_on("cpu", arrays, 0.5, norm_type, **kwargs)
            cuda = _clip_on("cuda", arrays, 0.5, norm_type, **kwargs)
            assert cuda[0] == pytest.approx(cpu[0], rel=1e-5)
            for g, w in zip(cuda[1], cpu[1]):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
    mixed = [arrays[0], arrays[1].astype(np.float64)]
    cpu, cuda = _clip_on("cpu", mixed, 0.5, 2.0), _clip_on("cuda", mixed, 0.5, 2.0)
    assert cuda[0] == pytest.approx(cpu[0], rel=1e-5)


def test_fused_clip_of_a_gradient_listed_twice_scales_it_twice():
    """The same parameter twice in the list: its norm counts twice and it is scaled twice, as by the CPU's mul_
    (the fused scaling would race two blocks over one gradient: it leaves such lists to the tensor operators)."""
    g = np.arange(1, 21, dtype=np.float32)
    results = {}
    for dev in ("cpu", "cuda"):
        p = fl.zeros(20, device=dev, requires_grad=True)
        p.grad = fl.tensor(g).to(dev)
        total = fl.nn.utils.clip_grad_norm_([p, p], 1.0)
        results[dev] = (float(total), p.grad.cpu().numpy())
        if dev == "cuda":
            from flambeau.nn.utils import _cuda_clip

            assert not _cuda_clip.fused_scale_([p.grad, p.grad], 1.0, total)  # left to the tensor operators
    assert results["cuda"][0] == pytest.approx(results["cpu"][0], rel=1e-6)
    np.testing.assert_allclose(results["cuda"][1], results["cpu"][1], rtol=1e-6)
