"""nn.EmbeddingBag and F.embedding_bag on CUDA: the CPU's results and gradients, without host synchronisation
(Note [Bags on the device])."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn

F = nn.functional


def _bags(dev, weight: np.ndarray, input: np.ndarray, offsets, **kwargs):
    """``(output, weight gradient, per-sample-weight gradient or None)`` of embedding_bag on ``dev``."""
    w = fl.from_numpy(weight.copy()).to(dev).requires_grad_()
    x = fl.from_numpy(input).to(dev)
    psw = kwargs.pop("per_sample_weights", None)
    if psw is not None:
        psw = fl.from_numpy(psw.copy()).to(dev).requires_grad_()
    before = fl.cuda.host_sync_count()
    out = F.embedding_bag(x, w, None if offsets is None else fl.from_numpy(offsets).to(dev),
                          per_sample_weights=psw, **kwargs)
    if dev == "cuda":
        assert fl.cuda.host_sync_count() == before
    grad = np.arange(out.numel(), dtype=np.float64).reshape(tuple(out.shape)) % 5 - 2.0
    out.backward(fl.from_numpy(grad).to(dev))
    return out.detach().cpu().numpy(), w.grad.cpu().numpy(), None if psw is None else psw.grad.cpu().numpy()


FLAT = np.array([1, 2, 4, 5, 4, 3, 2, 6, 2])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", [
    {"input": FLAT, "offsets": np.array([0, 3, 3, 7])},  # an empty bag in the middle
    {"input": FLAT, "offsets": np.array([0, 3, 3, 7, 8]), "include_last_offset": True},  # a position in no bag
    {"input": FLAT, "offsets": np.array([0, 4]), "padding_idx": 2},
    {"input": FLAT.reshape(3, 3), "offsets": None},
])
def test_embedding_bag_on_cuda_matches_cpu(mode, case):
    case = dict(case)
    weight = np.random.default_rng(0).standard_normal((7, 3))
    input, offsets = case.pop("input"), case.pop("offsets")
    cpu = _bags("cpu", weight, input, offsets, mode=mode, **case)
    cuda = _bags("cuda", weight, input, offsets, mode=mode, **case)
    for a, b in zip(cuda, cpu):
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_embedding_bag_per_sample_weights_and_module_on_cuda():
    rng = np.random.default_rng(1)
    weight, psw = rng.standard_normal((7, 3)), rng.standard_normal(FLAT.shape)
    offsets = np.array([0, 2, 6])
    cpu = _bags("cpu", weight, FLAT, offsets, mode="sum", per_sample_weights=psw)
    cuda = _bags("cuda", weight, FLAT, offsets, mode="sum", per_sample_weights=psw)
    for a, b in zip(cuda, cpu):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    bag = nn.EmbeddingBag(7, 3, mode="mean").to("cuda")
    assert tuple(bag(fl.tensor([[1, 2], [3, 4]], device="cuda")).shape) == (2, 3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        bag(fl.tensor([[1, 2]]))
