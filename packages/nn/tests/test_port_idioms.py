"""Idioms of PyTorch programs that a probe of ported scripts found failing, against torch."""

from __future__ import annotations

import warnings

import pytest

import flambeau as fl
import flambeau.nn as nn

torch = pytest.importorskip("torch")


def test_module_bfloat16_and_compile():
    for lib in (fl, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Embedding(4, 2))
        assert m.bfloat16() is m and m[0].weight.dtype is lib.bfloat16
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert hasattr(m, "compile") and (m.compile() if lib is fl else None) is None


def test_old_lr_scheduler_base_class():
    lrs = []
    for lib in (fl, torch):
        class Halving(lib.optim.lr_scheduler._LRScheduler):
            def get_lr(self):
                return [g["lr"] * 0.5 for g in self.optimizer.param_groups]

        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        sched = Halving(opt)
        for _ in range(3):
            opt.step()
            sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        assert Halving.__mro__[1].__name__ == "_LRScheduler"
    assert lrs[0] == lrs[1]


def test_legacy_tensor_constructor_shapes():
    assert tuple(fl.Tensor().shape) == tuple(torch.Tensor().shape) == (0,)
    assert tuple(fl.Tensor(2, 3).shape) == (2, 3) and fl.Tensor([1, 2]).dtype is fl.float32
    assert isinstance(nn.Linear(1, 1).weight, fl.Tensor)


@pytest.mark.parametrize("p", [2.0, 1.0, float("inf"), 0.5])
def test_pdist_matches_torch(p):
    import numpy as np

    x = np.random.default_rng(0).standard_normal((5, 3))
    ours, theirs = fl.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
    a, b = nn.functional.pdist(ours, p), torch.nn.functional.pdist(theirs, p)
    (a * fl.arange(1.0, 11.0, dtype=fl.float64)).sum().backward()
    (b * torch.arange(1.0, 11.0, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10)
    assert tuple(nn.functional.pdist(fl.ones(1, 3)).shape) == (0,)
