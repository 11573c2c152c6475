"""The six Table 1 models of benchmarks/paper/models.py: flambeau against torch, one training step each.

Each model, at its "tiny" size (dropout off, BatchNorm in training mode), is built in torch and copied into
flambeau; one step on each side must give the same loss and the same gradients. Deep BatchNorm networks
this small amplify float32 rounding (torch's own float32 gradients of the tiny ResNet-50 stem are off by
~0.3% of their scale from float64 ones), so the gradient tolerance adds twice torch's own float32 error,
measured against a float64 copy of the torch model, to the usual float32 tolerance.

torch runs on one thread here (the one_torch_thread fixture of conftest.py): these models are tiny, and on a
busy 2-core machine torch's two OpenMP threads next to numba's made a tiny MobileNet step take seconds.
"""

from __future__ import annotations

import copy
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flambeau as fl  # noqa: E402
import flambeau.nn  # noqa: E402, F401
import flambeau.optim  # noqa: E402, F401

PAPER = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "paper"
if not (PAPER / "models.py").exists():
    pytest.skip("benchmarks/paper/models.py is not in this checkout", allow_module_level=True)
sys.path.insert(0, str(PAPER))
import models  # noqa: E402


def _float64_grads(model, module, inputs, targets) -> dict[str, np.ndarray]:
    """Gradients of one forward and backward of a float64 copy of the torch ``module``."""
    ref = copy.deepcopy(module).double()
    inputs = [a.double() if a.is_floating_point() else a for a in inputs]
    targets = targets.double() if targets.is_floating_point() else targets
    getattr(torch.nn.functional, model.loss)(ref(*inputs), targets).backward()
    return {k: p.grad.numpy() for k, p in ref.named_parameters()}


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_same_loss_and_gradients_as_torch(name, one_torch_thread):
    model = models.MODELS[name]
    fl_module, th_module, fl_step, th_step = models.build_pair(torch, fl, name, "tiny")
    reference = _float64_grads(model, th_module, *th_step.args)
    fl_loss, th_loss = float(fl_step().item()), float(th_step().item())
    assert np.isclose(fl_loss, th_loss, rtol=1e-4, atol=1e-5), (fl_loss, th_loss)

    fl_params = dict(fl_module.named_parameters())
    th_params = dict(th_module.named_parameters())
    assert fl_params.keys() == th_params.keys()
    scale = max(float(np.abs(g).max()) for g in reference.values())
    for key, p in th_params.items():
        th_grad, fl_grad = p.grad.numpy(), fl_params[key].grad.numpy()
        assert fl_grad.shape == th_grad.shape, key
        torch_error = float(np.abs(th_grad - reference[key]).max())
        tolerance = 1e-4 * scale + 1e-3 * float(np.abs(th_grad).max()) + 2 * torch_error
        difference = float(np.abs(fl_grad - th_grad).max())
        assert difference <= tolerance, f"{name} {key}: gradients differ by {difference:.3g} (> {tolerance:.3g})"
