"""Derivatives at the edges of their domains, against torch (where a gradcheck at random points cannot see them)."""

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")


def test_xlogy_gradient_where_input_is_zero():
    # torch: d/dx xlogy(x, y) = log(y) also at x == 0, except where y <= 0 (there 0)
    xs = [0.0, 0.0, 1.0, 0.0, 2.0, 0.0]
    ys = [0.0, 0.5, 0.0, -1.0, 3.0, float("nan")]
    theirs = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
    torch.xlogy(theirs, torch.tensor(ys, dtype=torch.float64)).sum().backward()
    ours = fl.tensor(xs, dtype=fl.float64, requires_grad=True)
    fl.xlogy(ours, fl.tensor(ys, dtype=fl.float64)).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


@pytest.mark.parametrize("values", [[0.0, 1.5, -2.0], [1.5, 0.0, -2.0, 3.0], [2.0, 0.0, 0.0, 3.0], [1.0, 2.0, 3.0]])
def test_cumprod_gradient_with_zeros(values):
    weights = np.arange(1.0, len(values) + 1)
    theirs = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    (theirs.cumprod(0) * torch.tensor(weights)).sum().backward()
    ours = fl.tensor(values, dtype=fl.float64, requires_grad=True)
    (ours.cumprod(0) * fl.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)


def test_cumprod_gradient_with_zeros_2d_and_gradgrad():
    from flambeau.autograd import gradcheck, gradgradcheck

    x = fl.tensor([[0.5, 0.0, 2.0], [1.5, -1.0, 0.0]], dtype=fl.float64, requires_grad=True)
    assert gradcheck(lambda t: t.cumprod(1), (x,))
    assert gradgradcheck(lambda t: t.cumprod(1), (x,))


def test_legacy_variable_like_torch():
    from flambeau.autograd import Variable

    t = fl.ones(2)
    v = Variable(t, requires_grad=True)
    tv = torch.autograd.Variable(torch.ones(2), requires_grad=True)
    assert v.requires_grad == tv.requires_grad and v is not t and v.data_ptr() == t.data_ptr()
    assert not Variable(t).requires_grad and isinstance(t, Variable) and Variable().shape == (0,)
    x = fl.ones(2, requires_grad=True) * 2
    assert Variable(x).grad_fn is None and not Variable(x).requires_grad
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1.0])
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype can require gradients"):
        Variable(fl.ones(2, dtype=fl.int64), requires_grad=True)


@pytest.mark.parametrize("dtype", [fl.float16, fl.bfloat16])
def test_embedding_double_backward_counts_exactly_in_low_precision(dtype):
    # scale_grad_by_freq's counts past float16's 2048 (bfloat16's 256) integers: counted in int64
    from flambeau._ops import OPS

    g = fl.ones(5000, 1, dtype=dtype, requires_grad=True)
    gw = OPS["embedding_dense_backward"].fn(g, fl.zeros(5000, dtype=fl.int64), 1, -1, True)
    (gg,) = fl.autograd.grad(gw.sum(), g)
    np.testing.assert_allclose(gg.float().numpy(), np.full((5000, 1), 1 / 5000), rtol=1e-2)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("dim", [1, 2])
def test_transposed_convolution_input_gradient_with_output_padding_over_the_stride(create_graph, dim):
    # output_padding 1 >= stride 1 (allowed below the dilation 2): the input's gradient is cut to its size
    rng = np.random.default_rng(0)
    xs, ws = (1, 2) + (5,) * dim, (2, 3) + (3,) * dim
    xv, wv = rng.standard_normal(xs), rng.standard_normal(ws)
    conv = {1: "conv_transpose1d", 2: "conv_transpose2d"}[dim]
    tx, tw = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
    (getattr(torch.nn.functional, conv)(tx, tw, stride=1, output_padding=1, dilation=2) ** 2).sum().backward()
    x, w = fl.tensor(xv, requires_grad=True), fl.tensor(wv, requires_grad=True)
    (getattr(fl.nn.functional, conv)(x, w, stride=1, output_padding=1, dilation=2) ** 2).sum().backward(
        create_graph=create_graph)
    np.testing.assert_allclose(x.grad.detach().numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(w.grad.detach().numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce_has_no_derivative_as_torch(reduce):
    # the plain scatter's gradients (zero where written) would be silently wrong for a reducing scatter
    idx = np.array([[0, 1, 2], [2, 0, 1]])
    for lib in (torch, fl):
        a, s = lib.ones(3, 3, requires_grad=True), lib.ones(2, 3, requires_grad=True)
        out = a.scatter(0, lib.tensor(idx), s, reduce=reduce).sum()
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
            out.backward()


def _grads_against_torch(fn, values):
    weights = np.arange(1.0, np.asarray(values).size + 1).reshape(np.shape(values)) if np.ndim(values) else 1.0
    out = []
    for lib in (torch, fl):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        y = fn(lib, x)
        (y * lib.tensor(np.resize(weights, tuple(y.shape)), dtype=lib.float64)).sum().backward()
        out.append(x.grad.numpy())
    return out


@pytest.mark.parametrize("values, fn", [
    ([1.0, 2.0, 0.0, 4.0], lambda T, x: x.prod()),  # one zero: the others' product there, 0 elsewhere
    ([0.0], lambda T, x: x.prod()),
    ([0.0, 2.0, 0.0, 4.0], lambda T, x: x.prod()),  # two zeros: all 0
    (3.0, lambda T, x: x.prod()),
    ([[1.0, 0.0, 3.0], [2.0, 2.0, 2.0]], lambda T, x: x.prod(1)),
    ([[1.0, 0.0, 3.0], [0.0, 2.0, 2.0]], lambda T, x: x.prod(0, keepdim=True)),
    ([[[1.0, 2.0], [3.0, 0.0]]], lambda T, x: x.prod()),
    ([3.0, 3.0, 3.0], lambda T, x: (x - x.mean()) / (x.std() + 1e-8)),  # a constant line: std 0, gradient 0
    ([[1.0, 2.0], [1.0, 5.0]], lambda T, x: x.std(0)),
    ([2.0, 2.0], lambda T, x: T.std_mean(x)[0]),
    ([0.0, 1.0], lambda T, x: T.atan2(x, x * 0)),  # atan2(0, 0): gradient 0, as torch
])
def test_gradients_stay_finite_where_torchs_do(values, fn):
    ours, theirs = _grads_against_torch(fn, values)
    assert np.isfinite(ours).all()
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


def test_prod_with_zeros_double_backward():
    x = fl.tensor([[1.5, 0.0, -2.0], [0.5, 3.0, 2.0]], dtype=fl.float64, requires_grad=True)
    assert fl.autograd.gradgradcheck(lambda t: t.prod(1), (x,))
    assert fl.autograd.gradgradcheck(lambda t: t.prod(), (x,))


@pytest.mark.parametrize("size, stride, offset", [((2, 2), (1, 1), 0), ((3,), (0,), 1), ((2, 3), (3, 1), 0),
                                                  ((2, 2), (1, 2), 1), ((3, 2), (1, 0), 2)])
def test_as_strided_gradient_sums_overlapping_reads(size, stride, offset):
    grads = []
    for lib in (torch, fl):
        x = lib.arange(6.0, dtype=lib.float64, requires_grad=True)
        y = x.as_strided(size, stride, offset)
        (y * lib.arange(1.0, 1 + y.numel(), dtype=lib.float64).reshape(size)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
