"""flambeau-autograd's tools on CUDA tensors: gradcheck, gradgradcheck and autograd.functional's Jacobians and
Hessians work on the device as torch's do (they built their finite differences and basis vectors on the host).
(Here because this directory is the simulator tier; flambeau-autograd has no CUDA tier of its own.)"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.autograd import Function, GradcheckError
from flambeau.autograd import functional as AF


def _x(*shape):
    return fl.from_numpy(np.random.default_rng(0).standard_normal(shape)).to("cuda").requires_grad_()


class _WrongSquare(Function):
    """``x ** 2`` whose backward is off by a factor (what gradcheck must catch)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g


def test_gradcheck_and_gradgradcheck_on_cuda():
    x = _x(2, 3)[:, 1:]  # a strided view: its elements are nudged in place through the view
    assert fl.autograd.gradcheck(lambda t: (t.sin() * t).sum(dim=1), (x,))
    assert fl.autograd.gradgradcheck(lambda t: (t ** 3).sum(), (x,))
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        fl.autograd.gradcheck(_WrongSquare.apply, (x,))
    np.testing.assert_array_equal(x.detach().cpu().numpy(), _x(2, 3)[:, 1:].detach().cpu().numpy())  # restored


def test_functional_jacobian_and_hessian_on_cuda_match_cpu():
    x = _x(3).detach()
    for fn, args in ((AF.jacobian, (lambda t: t.sin() * t[0],)), (AF.hessian, (lambda t: (t ** 3).prod(),))):
        on_gpu, on_cpu = fn(*args, x), fn(*args, x.cpu())
        assert on_gpu.device.type == "cuda"
        np.testing.assert_allclose(on_gpu.cpu().numpy(), on_cpu.numpy(), rtol=1e-12)
