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
