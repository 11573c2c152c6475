"""The seven models of benchmarks/train.py at their GPU sizes (``train.GPU_MODELS``, timed by
``benchmarks/gpu.py --size gpu``): each builds in torch and in flambeau, and with torch's parameters
copied in, flambeau's forward over two samples of the GPU batch gives torch's output.

A lent GPU's minutes are few: a size that fails to build or to agree should fail here, on the CPU,
not there. Two samples keep the CPU's work small; torch runs on one thread (conftest.py).
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flambeau as fl  # noqa: E402
import flambeau.nn  # noqa: E402, F401

BENCHMARKS = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"
if not (BENCHMARKS / "train.py").exists():
    pytest.skip("benchmarks/train.py is not in this checkout", allow_module_level=True)
sys.path.insert(0, str(BENCHMARKS))
import train  # noqa: E402


def _two_samples(name: str, inputs: np.ndarray) -> np.ndarray:
    return inputs[:, :2] if name == "lstm_lm" else inputs[:2]  # (the language model's tokens are (seq, batch))


@pytest.mark.parametrize("name", sorted(train.GPU_MODELS))
def test_gpu_size_builds_and_agrees_with_torch(name, one_torch_thread):
    spec = train.GPU_MODELS[name]
    assert spec.sizes or spec.batch != train.MODELS[name].batch, f"{name}: the GPU size is the CPU one"
    torch.manual_seed(0)
    th_model = spec.build(torch).eval()
    fl_model = spec.build(fl).eval()
    fl_model.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in th_model.state_dict().items()})
    inputs, targets = spec.make_batch(np.random.default_rng(0))
    assert len(inputs) == spec.batch or inputs.shape[1] == spec.batch, f"{name}: the batch is not {spec.batch}"
    x = _two_samples(name, inputs)
    with torch.no_grad(), fl.no_grad():
        want = th_model(torch.from_numpy(x)).numpy()
        got = fl_model(fl.from_numpy(x)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
