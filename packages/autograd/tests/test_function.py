"""Custom differentiable functions (flambeau.autograd.Function)."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.autograd import Function, gradcheck, gradgradcheck, once_differentiable


def leaf(values):
    return fl.tensor(values, dtype=fl.float64, requires_grad=True)


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class MulConstant(Function):
    @staticmethod
    def forward(ctx, x, c):
        ctx.c = c
        return x * c

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.c, None


class SplitTwo(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3


def test_custom_function_forward_backward_and_name():
    x = leaf([0.0, 1.0])
    y = Exp.apply(x)
    assert y.grad_fn.name() == "ExpBackward"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0]))


def test_non_tensor_arguments_and_ctx_attributes():
    x = leaf([1.0, 2.0])
    MulConstant.apply(x, 5.0).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_needs_input_grad():
    seen = []

    class F(Function):
        @staticmethod
        def forward(ctx, a, b):
            seen.append(ctx.needs_input_grad)
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, g

    F.apply(leaf([1.0]), fl.ones(1, dtype=fl.float64))
    assert seen == [(True, False)]


def test_multiple_outputs_with_materialized_zero_grads():
    x = leaf([1.0])
    a, b = SplitTwo.apply(x)
    a.sum().backward()  # b unused: its gradient reaches backward as zeros
    assert x.grad.tolist() == [2.0]


def test_set_materialize_grads_false_gives_none():
    seen = []

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 1

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append(g2)
            return g1

    x = leaf([1.0])
    a, _ = F.apply(x)
    a.sum().backward()
    assert seen == [None]


def test_mark_non_differentiable():
    class ArgmaxLike(Function):
        @staticmethod
        def forward(ctx, x):
            idx = fl.zeros(1, dtype=fl.float64)
            ctx.mark_non_differentiable(idx)
            return x * 1, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            return g

    x = leaf([1.0])
    y, idx = ArgmaxLike.apply(x)
    assert y.requires_grad and not idx.requires_grad


def test_mark_dirty_inplace_function():
    class AddOneInplace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = leaf([1.0])
    h = x * 2
    out = AddOneInplace.apply(h)
    assert out is h and h.grad_fn.name() == "AddOneInplaceBackward"
    out.sum().backward()
    assert x.grad.tolist() == [2.0]
    with pytest.raises(RuntimeError, match="leaf Variable"):
        AddOneInplace.apply(leaf([1.0]))


def test_wrong_number_of_gradients():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(leaf([1.0]), leaf([1.0])).sum().backward()


def test_saved_tensor_modified_inplace_raises():
    x = leaf([1.0])
    y = Exp.apply(x)
    with fl.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_reentrant_backward_inside_function_backward():
    class Reentrant(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with fl.enable_grad():
                inner = x.detach().requires_grad_(True)
                (inner * inner).sum().backward()
            return g * inner.grad

    x = leaf([3.0])
    Reentrant.apply(x).sum().backward()
    assert x.grad.tolist() == [6.0]


def test_gradcheck_and_gradgradcheck_on_custom_function():
    x = leaf([0.3, -0.7])
    assert gradcheck(Exp.apply, (x,))
    assert gradgradcheck(Exp.apply, (x,))


def test_gradcheck_detects_a_wrong_backward():
    class WrongExp(Exp):
        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y * 1.1

    with pytest.raises(fl.autograd.GradcheckError, match="Jacobian mismatch"):
        gradcheck(WrongExp.apply, (leaf([0.3, -0.7]),))
    assert gradcheck(WrongExp.apply, (leaf([0.3]),), raise_exception=False) is False


def test_once_differentiable_blocks_double_backward():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = leaf([2.0])
    y = Sq.apply(x)
    (g,) = fl.autograd.grad(y, x, leaf([1.0]), create_graph=True)
    assert g.tolist() == [4.0]
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_setup_context_style_matches_torch():
    import numpy as np
    import torch

    results = []
    for lib in (torch, fl):
        class ScaledCube(lib.autograd.Function):
            @staticmethod
            def forward(x, k):  # the newer style: no ctx here
                return x ** 3 * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, k = inputs
                ctx.save_for_backward(x, output)
                ctx.k = k

            @staticmethod
            def backward(ctx, g):
                x, out = ctx.saved_tensors
                return g * 3 * x ** 2 * ctx.k + 0 * out, None

        x = lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64, requires_grad=True)
        y = ScaledCube.apply(x, 2.0)
        y.backward(lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64))
        results.append((y.detach().numpy(), x.grad.numpy()))
        with lib.no_grad():  # not recording: forward alone
            assert ScaledCube.apply(x, 1.0).tolist() == [1.0, -8.0, 0.125]
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b)
