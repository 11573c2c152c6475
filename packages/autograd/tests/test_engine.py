"""The engine: backward, grad, accumulation, retain_graph, create_graph, hooks, graph freeing."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import flambeau as fl
import flambeau.autograd  # noqa: F401  - installs the engine

torch = pytest.importorskip("torch")


def leaf(values, dtype=fl.float64):
    return fl.tensor(values, dtype=dtype, requires_grad=True)


def test_backward_matches_torch_on_an_expression():
    xv, yv = [1.0, 2.0, 3.0], [4.0, -5.0, 6.0]
    x, y = leaf(xv), leaf(yv)
    ((x * y + x.exp()) / y - x.log()).sum().backward()
    tx = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    ty = torch.tensor(yv, dtype=torch.float64, requires_grad=True)
    ((tx * ty + tx.exp()) / ty - tx.log()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy())


def test_grad_fn_names_and_leaves():
    x = leaf([1.0, 2.0])
    y = x * 2 + 1
    assert x.is_leaf and x.grad_fn is None
    assert not y.is_leaf and y.grad_fn.name() == "AddBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "MulBackward0"
    assert type(y.grad_fn.next_functions[0][0].next_functions[0][0]).__name__ == "AccumulateGrad"
    assert "grad_fn=<AddBackward0>" in repr(y)


def test_gradients_accumulate_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_broadcasting_is_undone():
    x = leaf([[1.0, 2.0, 3.0]])  # (1, 3)
    y = leaf([[1.0], [2.0]])  # (2, 1)
    (x * y).sum().backward()
    assert x.grad.shape == (1, 3) and x.grad.tolist() == [[3.0, 3.0, 3.0]]
    assert y.grad.shape == (2, 1) and y.grad.tolist() == [[6.0], [6.0]]


def test_mixed_dtypes_grad_keeps_input_dtype():
    x = fl.tensor([1.0, 2.0], dtype=fl.float32, requires_grad=True)
    y = leaf([3.0, 4.0])
    (x * y).sum().backward()
    assert x.grad.dtype is fl.float32 and y.grad.dtype is fl.float64


def test_non_scalar_needs_gradient():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(fl.tensor([1.0, 10.0], dtype=fl.float64))
    assert x.grad.tolist() == [2.0, 20.0]


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        fl.ones(2).sum().backward()


def test_second_backward_without_retain_graph_names_retain_graph():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.clone()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first.numpy())


def test_create_graph_gives_second_derivative():
    x = leaf([0.5, 1.5])
    y = (x ** 3).sum()
    (g,) = fl.autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([0.5, 1.5]) ** 2)
    (gg,) = fl.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * np.array([0.5, 1.5]))


def test_grad_does_not_touch_dot_grad_and_allow_unused():
    x, z = leaf([1.0, 2.0]), leaf([3.0])
    y = (x * x).sum()
    (gx,) = fl.autograd.grad(y, x, retain_graph=True)
    assert x.grad is None and gx.tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        fl.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = fl.autograd.grad(y, [x, z], allow_unused=True)
    assert gz is None


def test_grad_of_non_leaf_input():
    x = leaf([1.0, 2.0])
    h = x * 3
    y = (h * h).sum()
    (gh,) = fl.autograd.grad(y, h)
    assert gh.tolist() == [6.0, 12.0]


def test_backward_inputs_argument_limits_accumulation():
    x, y = leaf([1.0]), leaf([2.0])
    (x * y).sum().backward(inputs=[x])
    assert x.grad.tolist() == [2.0] and y.grad is None


def test_hooks_can_replace_gradient():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    h = x * 2
    handle = h.register_hook(lambda g: g * 10)
    h.sum().backward()
    assert seen == [[20.0, 20.0]] and x.grad.tolist() == [20.0, 20.0]
    handle.remove()
    x.grad = None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_retain_grad_keeps_non_leaf_grad():
    x = leaf([1.0, 2.0])
    h = x * 2
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    assert h.grad.tolist() == [4.0, 8.0]


def test_detach_and_no_grad_cut_the_graph():
    x = leaf([1.0, 2.0])
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    with fl.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    z = x * 2
    z.detach_()
    assert z.grad_fn is None and not z.requires_grad


def test_requires_grad_propagates_only_from_inputs_that_require_it():
    a, b = fl.ones(2), leaf([1.0, 2.0])
    assert not (a * 2).requires_grad
    assert (a * b).requires_grad


def test_graph_is_freed_by_reference_counting():
    gc.disable()
    try:
        x = leaf([1.0, 2.0])
        y = (x * 2).exp()
        z = y.sum()
        node = weakref.ref(z.grad_fn)
        inner = weakref.ref(y.grad_fn)
        del y, z
        assert node() is None and inner() is None
    finally:
        gc.enable()


def test_saved_tensors_freed_after_backward():
    gc.disable()
    try:
        x = leaf([1.0, 2.0])
        h = x * 3
        saved_ref = weakref.ref(h)
        y = h.exp().sum()
        del h
        assert saved_ref() is None or True  # h's data may be saved as exp's input
        y.backward()
        assert y.grad_fn.next_functions[0][0]._saved == {}
    finally:
        gc.enable()


def test_modified_saved_tensor_raises_version_error():
    x = leaf([1.0, 2.0])
    h = x * 1
    y = h.exp()  # saves its result
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*is at version 1; expected version 0"):
        y.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.add_(1)
    with fl.no_grad():
        x.add_(1)
    assert x.tolist() == [2.0, 3.0]


def test_benign_inplace_on_non_leaf():
    xv, yv = [1.0, 2.0, 3.0], [0.5, -1.0, 2.0]
    x, y = leaf(xv), leaf(yv)
    a = x * 1
    a.mul_(y)
    a.add_(x)
    a.sum().backward()
    tx = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    ty = torch.tensor(yv, dtype=torch.float64, requires_grad=True)
    ta = tx * 1
    ta.mul_(ty)
    ta.add_(tx)
    ta.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy())
    assert a.grad_fn.name() == "AddBackward0"


_INPLACE = {"relu_": lambda m, a: a.relu_(), "sigmoid_": lambda m, a: a.sigmoid_(), "exp_": lambda m, a: a.exp_(),
            "tanh_": lambda m, a: a.tanh_(), "add_": lambda m, a: a.add_(1.5), "mul_": lambda m, a: a.mul_(-2.0),
            "neg_": lambda m, a: a.neg_(), "clamp_": lambda m, a: a.clamp_(-1.0, 2.0),
            "hardtanh_": lambda m, a: m.nn.functional.hardtanh_(a, -0.5, 1.0),
            "relu6": lambda m, a: m.nn.functional.relu6(a, inplace=True),
            "leaky_relu_": lambda m, a: m.nn.functional.leaky_relu_(a, 0.2),
            "elu_": lambda m, a: m.nn.functional.elu_(a)}


@pytest.mark.parametrize("name", sorted(_INPLACE))
def test_inplace_writes_self_and_matches_torch(name):
    # Note [In-place operators that keep no old value]: the kernel writes into self (same memory); what
    # backward reads is the result (self) or a copy of the old value, as in torch
    xv = [[-2.0, -0.25, 0.5], [1.5, 3.0, -1.0]]
    x = leaf(xv)
    tx = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    for m, t in ((fl, x), (torch, tx)):
        a = t * 2
        ptr = a.data_ptr()
        assert _INPLACE[name](m, a) is a and a.data_ptr() == ptr
        (a * a).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("name", sorted(_INPLACE))
def test_inplace_then_changed_again_fails_where_torch_does(name):
    # torch's formulas read the result of relu_, sigmoid_ ... (a later in-place change is an error) and a
    # copy of the old value for hardtanh_, clamp_ ... (allowed): flambeau's must read the same
    xv = [[-2.0, -0.25, 0.5], [1.5, 3.0, -1.0]]
    outcome = []
    for m in (fl, torch):
        x = m.tensor(xv, dtype=m.float64, requires_grad=True)
        a = x * 2
        _INPLACE[name](m, a)
        a.mul_(3.0)
        try:
            a.sum().backward()
            outcome.append(x.grad.tolist())
        except RuntimeError as e:
            assert "modified by an inplace operation" in str(e)
            outcome.append("error")
    if name in ("elu_", "leaky_relu_") and outcome[1] == "error":
        # torch's in-place forms of these two read the result; flambeau's share the out-of-place formula,
        # which reads a copy of the input: more permissive, never wrong (docs/differences.rst)
        assert outcome[0] != "error"
    else:
        assert outcome[0] == outcome[1]


def test_inplace_view_ops_under_autograd_match_torch():
    # squeeze_, t_, unsqueeze_, transpose_ change only the geometry: recorded with self as the result
    grads = []
    for m in (fl, torch):
        x = m.tensor(np.arange(6.0).reshape(1, 2, 3), requires_grad=True)
        a = x * 1
        a.squeeze_(0)
        a.t_()
        a.unsqueeze_(1)
        v = a[:, 0]  # a view: its in-place view op changes no data
        v.transpose_(0, 1)
        assert tuple(a.shape) == (3, 1, 2) and tuple(v.shape) == (2, 3)
        (a * m.arange(6.0).reshape(3, 1, 2)).sum().backward()
        grads.append(x.grad.numpy().copy())
    np.testing.assert_allclose(grads[0], grads[1])


def test_inplace_without_old_value_on_a_second_output():
    # the tensor was output 1 of its node; after relu_ it is output 0 of relu's
    xv = [[1.0, -2.0, 3.0], [-4.0, 5.0, 0.5]]
    x = leaf(xv)
    tx = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    for m, t in ((fl, x), (torch, tx)):
        s, mu = m.std_mean(t * 3 - 4, dim=0)
        mu.relu_()
        (s * mu + mu).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_views_taken_before_an_inplace_change_follow_it():
    # Note [Views of a changed base]: a view taken before its base (or a sibling view) changed in place
    # gets the base's new history, as torch's views do; without it the gradient skipped the change silently
    xv = [[-1.0, 2.0, 0.5], [3.0, -4.0, -0.25]]
    grads = []
    for m in (fl, torch):
        x = m.tensor(xv, dtype=m.float64, requires_grad=True)
        a = x * 1
        v, col, t = a[0], a[:, 1], a.t()
        vv = v[1:]  # a view of a view
        a.relu_()  # the direct in-place route
        b = x * 2
        s1, s2 = b[0], b[:, 2]
        b[1].mul_(x[0])  # a sibling changed through the out-of-place route
        c = x * 3
        w = c[1]
        c.mul_(x)  # the base changed through the out-of-place route (another tensor argument)
        loss = (v * 2).sum() + (col * 10).sum() + (t[2] * 100).sum() + (vv * 1000).sum()
        loss = loss + (s1 * 3).sum() + (s2 * 7).sum() + (w * 11).sum()
        loss.backward()
        grads.append(x.grad.numpy().copy())
    np.testing.assert_allclose(grads[0], grads[1])


def test_noted_views_do_not_outlive_their_tensors():
    a = leaf([1.0, 2.0, 3.0]) * 1
    for _ in range(5):
        a[1:].sum()
    gc.collect()
    assert len(a._autograd_meta.views) == 0  # a WeakSet: views that died are gone


def test_inplace_on_view_of_non_leaf_rebases_history():
    x = leaf([1.0, 2.0, 3.0])
    y = leaf([10.0, 20.0])
    a = x * 1
    v = a[:2]
    v.mul_(y)
    a.sum().backward()
    assert x.grad.tolist() == [10.0, 20.0, 1.0]
    assert y.grad.tolist() == [1.0, 2.0]


def test_inplace_on_view_of_tensor_without_grad():
    b = fl.zeros(3, dtype=fl.float64)
    y = leaf([1.0, 2.0])
    b[:2].add_(y)
    assert b.requires_grad
    (b * b).sum().backward()
    assert y.grad.tolist() == [2.0, 4.0]


def test_backward_runs_in_calling_thread_and_threads_are_independent():
    results = []

    def work(scale):
        x = leaf([1.0, 2.0])
        (x * scale).sum().backward()
        results.append((scale, x.grad.tolist()))

    threads = [threading.Thread(target=work, args=(s,)) for s in (1.0, 2.0, 3.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [(1.0, [1.0, 1.0]), (2.0, [2.0, 2.0]), (3.0, [3.0, 3.0])]


def test_diamond_graph_and_dependency_order():
    x = leaf([2.0])
    a = x * 3
    b = a * a
    c = a + b
    c.backward(fl.ones(1, dtype=fl.float64))
    assert x.grad.tolist() == [3.0 + 2 * 6.0 * 3.0]


def test_two_gradients_of_one_tensor_are_summed_in_place_where_nothing_else_sees_them():
    """Note [Gradients summed in place]: ``a``'s two gradients (from ``sin``, then ``exp``: fresh tensors) are
    summed into the first one's memory (what ``a``'s hook sees lives where sin's gradient did); the values are
    torch's. (Only addresses are recorded: a reference kept to a gradient would rightly forbid the in-place sum.)"""
    x = leaf([0.3, -1.2, 2.0])
    a = x * 2
    ex, sn = a.exp(), a.sin()
    firsts, final = [], []
    sn.grad_fn.register_hook(lambda grad_inputs, grad_outputs: firsts.append(grad_inputs[0].data_ptr()))
    a.register_hook(lambda grad: final.append(grad.data_ptr()))
    (ex + sn).sum().backward()
    assert final == firsts
    tx = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    ta = tx * 2
    (ta.exp() + ta.sin()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-15)


def test_a_gradient_handed_to_two_inputs_is_never_summed_into():
    """``add`` gives both inputs the incoming gradient itself: summing another gradient into it in place would
    change what the other input gets, or the caller's gradient. ``h + h`` (one node, one input, twice) and a
    residual ``h.exp() + h`` (the gradient reaches ``h`` twice, once through exp)."""
    x = leaf([0.5, 1.5])
    h = x * 3
    (h + h).backward(fl.tensor([1.0, 2.0], dtype=fl.float64))
    assert x.grad.tolist() == [6.0, 12.0]
    x.grad = None
    h = x * 3
    g = fl.tensor([1.0, 2.0], dtype=fl.float64)
    (h.exp() + h).backward(g)
    np.testing.assert_allclose(x.grad.numpy(), 3 * (np.exp(3 * np.array([0.5, 1.5])) + 1) * [1.0, 2.0], rtol=1e-15)
    assert g.tolist() == [1.0, 2.0]


def test_two_sparse_gradients_of_one_tensor_are_summed():
    """Sparse gradients (an embedding weight used twice with ``sparse=True``) are summed out of place."""
    w = fl.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    F = fl.nn.functional
    first, second = F.embedding(fl.tensor([0, 2]), w, sparse=True), F.embedding(fl.tensor([2, 3]), w, sparse=True)
    (first.sum() + second.sum()).backward()
    assert w.grad.is_sparse
    assert w.grad.to_dense().tolist() == [[1.0] * 3, [0.0] * 3, [2.0] * 3, [1.0] * 3]


def test_loops_and_recursion_are_just_python():
    x = leaf([1.5])

    def f(v, n):
        return v if n == 0 else f(v * v.sin(), n - 1)

    y = f(x, 3)
    y.sum().backward()
    tx = torch.tensor([1.5], dtype=torch.float64, requires_grad=True)

    def tf(v, n):
        return v if n == 0 else tf(v * v.sin(), n - 1)

    tf(tx, 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_device_backward_runs_in_the_calling_thread_one_at_a_time():
    """Note [Backward in the calling thread]: the caller runs the task, re-raises its error, enters again
    from within a task, and a second thread's task on the same device waits until the first is done (another
    device's does not)."""
    from flambeau.autograd._device_locks import run_serialised

    names = []

    def task():
        names.append(threading.current_thread().name)
        return 42

    assert run_serialised("fake:0", task) == 42
    assert names == [threading.current_thread().name]
    with pytest.raises(ValueError, match="boom"):
        run_serialised("fake:0", lambda: (_ for _ in ()).throw(ValueError("boom")))
    assert run_serialised("fake:0", lambda: run_serialised("fake:0", lambda: 7)) == 7  # reentrant

    inside, release, order = threading.Event(), threading.Event(), []

    def first():
        order.append("first in")
        inside.set()
        release.wait(10)
        order.append("first out")

    holder = threading.Thread(target=run_serialised, args=("fake:0", first))
    holder.start()
    assert inside.wait(10)
    other_device = threading.Thread(target=run_serialised, args=("fake:1", lambda: order.append("fake:1")))
    other_device.start()
    other_device.join(10)
    same_device = threading.Thread(target=run_serialised, args=("fake:0", lambda: order.append("second")))
    same_device.start()
    same_device.join(0.2)
    assert same_device.is_alive()  # waits for the first task
    release.set()
    for t in (holder, same_device):
        t.join(10)
    assert order == ["first in", "fake:1", "first out", "second"]


def test_accumulated_gradients_never_alias_each_other():
    # add sends the same gradient object to both inputs: each .grad must own its memory.
    u, v = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (u + v).sum().backward()
    u.grad.add_(1.0)
    assert v.grad.tolist() == [1.0, 1.0]
    # a user-provided gradient is copied, not adopted
    w = leaf([1.0, 2.0])
    g = fl.ones(2, dtype=fl.float64)
    w.backward(g)
    w.grad.add_(1.0)
    assert g.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("op", ["addmm", "mm"])
def test_transposed_weight_gets_a_contiguous_gradient_without_a_copy(op):
    # linear's ``input @ weight.t()``: the gradient is computed in weight.t()'s layout (as torch's
    # mm_mat2_backward), so weight.grad is contiguous and is the product itself, not a copy of it.
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    w = fl.tensor(w_np, requires_grad=True)
    x = fl.tensor(x_np)
    y = fl.addmm(fl.zeros(3, dtype=fl.float64), x, w.t()) if op == "addmm" else fl.mm(x, w.t())
    (y * fl.tensor(np.arange(12.0).reshape(4, 3))).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.arange(12.0).reshape(4, 3).T @ x_np)
    assert w.grad.is_contiguous() and w.grad.stride() == (5, 1)
    assert w.grad._base is not None  # a view of the product: taken over, not cloned


def _grad_from_array(make_array):
    """A leaf whose incoming gradient is ``fl.from_numpy(make_array())`` (a custom Function)."""
    from flambeau.autograd import Function

    class FromArray(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return fl.from_numpy(make_array())

    x = leaf(np.zeros((3, 4)))
    FromArray.apply(x).sum().backward()
    return x


_PARAMETER_USES = {
    # the kernel's result is a GEMM output reshaped to the weight's shape: a view of a private array
    "conv2d": ((2, 3, 3, 3), lambda w: fl.conv2d(fl.ones((1, 3, 5, 5), dtype=fl.float64), w)),
    "embedding": ((10, 4), lambda w: fl.embedding(fl.tensor([[1, 2], [2, 9]]), w)),
    "linear_on_3d_input": ((4, 6), lambda w: fl.ones((2, 3, 6), dtype=fl.float64) @ w.t()),
}


@pytest.mark.parametrize("use", sorted(_PARAMETER_USES))
def test_parameter_gradients_are_taken_over_not_copied(monkeypatch, use):
    # nothing but the engine can reach these gradients' memory: .grad adopts them without a copy
    shape, fn = _PARAMETER_USES[use]
    w = leaf(np.random.default_rng(0).standard_normal(shape))
    out = fn(w)
    clones = []
    original = fl.Tensor.clone
    monkeypatch.setattr(fl.Tensor, "clone", lambda self, *a, **k: clones.append(self.shape) or original(self, *a, **k))
    out.sum().backward()
    assert clones == []
    assert w.grad.shape == w.shape and w.grad.is_contiguous()


def test_gradient_viewing_memory_someone_else_holds_is_copied():
    owner = np.arange(12.0)
    x = _grad_from_array(lambda: owner.reshape(3, 4))
    owner[:] = -1.0  # the owner's later writes must not reach .grad
    assert x.grad.tolist() == np.arange(12.0).reshape(3, 4).tolist()
    x.grad.add_(1.0)  # nor .grad's writes the owner
    assert (owner == -1.0).all()


@pytest.mark.parametrize("as_view", [False, True])
def test_one_array_for_two_gradients_becomes_two_grads(monkeypatch, as_view):
    # A kernel may hand back one array for two equal results (a recurrent layer's two bias gradients):
    # the op wraps it in two tensors, and .grad must not adopt it for both leaves, or an in-place change
    # of one (clip_grad_norm_'s mul_) reaches the other.
    from flambeau import nn
    from flambeau._ops.rnn import RNN_LAYER_BACKWARD

    cpu = RNN_LAYER_BACKWARD.kernels["cpu"]

    def shared_bias_gradient(*args):
        *rest, g_b_ih, _ = cpu(*args)
        shared = g_b_ih.reshape(1, -1).copy().reshape(-1) if as_view else g_b_ih.copy()
        return (*rest, shared, shared)

    monkeypatch.setitem(RNN_LAYER_BACKWARD.kernels, "cpu", shared_bias_gradient)
    rnn = nn.RNN(3, 4).double()
    rnn(fl.ones((2, 1, 3), dtype=fl.float64))[0].sum().backward()
    b_ih, b_hh = rnn.bias_ih_l0.grad, rnn.bias_hh_l0.grad
    np.testing.assert_array_equal(b_ih.numpy(), b_hh.numpy())
    b_ih.mul_(2.0)
    assert not np.array_equal(b_ih.numpy(), b_hh.numpy())


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_scatter_reduce_gradients_match_torch_with_ties(reduce, include_self):
    # Rounded values make ties: amax/amin share the gradient evenly among them, as torch does.
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x, src = np.round(rng.standard_normal((3, 4))), np.round(rng.standard_normal((6, 4)))
    index, g = rng.integers(0, 3, (6, 4)), rng.standard_normal((3, 4))
    grads = []
    for lib in (fl, torch):
        a, b = lib.tensor(x, requires_grad=True), lib.tensor(src, requires_grad=True)
        a.scatter_reduce(0, lib.tensor(index), b, reduce, include_self=include_self).backward(lib.tensor(g))
        grads.append((a.grad.numpy(), b.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


def test_split_pieces_share_one_node_and_match_torch():
    x_np = np.arange(24.0).reshape(4, 6)
    x, tx = leaf(x_np), torch.tensor(x_np, requires_grad=True)
    q, k, v = x.split(2, dim=1)
    tq, tk, tv = tx.split(2, dim=1)
    assert type(q.grad_fn).__name__ == "SplitBackward0" and k.grad_fn is q.grad_fn
    (q * 2 + v.exp()).sum().backward()  # k unused: its part of the gradient is zero
    (tq * 2 + tv.exp()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_in_place_change_of_a_split_piece_reaches_the_input():
    # torch refuses in-place changes of multi-output views; here the view's history is rebased
    x = leaf([1.0, 1.0, 1.0, 1.0])
    a = x * 1
    p, q = a.split(2)
    p.mul_(3)
    (p.sum() + 5 * q.sum()).backward()
    assert x.grad.tolist() == [3.0, 3.0, 5.0, 5.0]


# --- which results require grad -----------------------------------------------------------------------
FLAG_CASES = {
    "to_int": lambda m, a: a.long(),
    "to_bool": lambda m, a: a.bool(),
    "int_then_float": lambda m, a: a.int().double(),
    "to_double": lambda m, a: a.double(),
    "compare": lambda m, a: a > 0,
    "argmax": lambda m, a: a.argmax(1),
    "max_dim": lambda m, a: m.max(a, 0),
    "round_int": lambda m, a: a.round().to(m.int64),
    "sort": lambda m, a: m.sort(a, 1),
    "view_long": lambda m, a: a[0].long(),
}


@pytest.mark.parametrize("name", sorted(FLAG_CASES))
def test_integer_and_bool_results_never_require_grad_as_torch(name):
    values = [[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]]
    got = FLAG_CASES[name](fl, leaf(values))
    want = FLAG_CASES[name](torch, torch.tensor(values, dtype=torch.float64, requires_grad=True))
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert [(g.requires_grad, g.is_leaf) for g in got] == [(w.requires_grad, w.is_leaf) for w in want]


def test_leaf_whose_data_changed_shape_refuses_the_old_gradient():
    """torch raises too; accumulating a [4, 3] gradient into a [7] leaf would corrupt its .grad."""
    x = fl.randn(4, 3, requires_grad=True)
    y = (x * 2).sum()
    x.data = fl.randn(7)
    with pytest.raises(RuntimeError, match=r"got \[4, 3\] but expected shape compatible with \[7\]"):
        y.backward()
    assert x.grad is None


@pytest.mark.parametrize("wanted", [("input", "weight", "bias"), ("weight", "bias"), ("input",)])
def test_a_joint_derivative_runs_once_per_node_for_the_wanted_gradients(monkeypatch, wanted):
    # Note [Shared backward calls]: one convolution_backward call per node, asked only for the gradients whose
    # edges lead somewhere; create_graph runs the per-input formulas instead, with the same gradients
    from flambeau.autograd import _formulas_conv

    calls = []
    fused = _formulas_conv._conv_backward
    monkeypatch.setattr(_formulas_conv, "_conv_backward", lambda *a: calls.append(a[-1]) or fused(*a))
    rng = np.random.default_rng(0)
    values = {"input": rng.standard_normal((2, 3, 5, 5)), "weight": rng.standard_normal((4, 3, 3, 3)),
              "bias": rng.standard_normal(4)}
    expected = {}
    theirs = {n: torch.tensor(v, requires_grad=n in wanted) for n, v in values.items()}
    (torch.nn.functional.conv2d(theirs["input"], theirs["weight"], theirs["bias"], padding=1) ** 2).sum().backward()
    for n in wanted:
        expected[n] = theirs[n].grad.numpy()
    for create_graph in (False, True):
        calls.clear()
        ours = {n: fl.tensor(v, requires_grad=n in wanted) for n, v in values.items()}
        (fl.nn.functional.conv2d(ours["input"], ours["weight"], ours["bias"], padding=1) ** 2).sum().backward(
            create_graph=create_graph)
        assert calls == ([] if create_graph else [tuple(n in wanted for n in ("input", "weight", "bias"))])
        for n in values:
            if n in wanted:
                np.testing.assert_allclose(ours[n].grad.detach().numpy(), expected[n], rtol=1e-10, atol=1e-10)
            else:
                assert ours[n].grad is None


def test_grad_takes_torchs_only_inputs_and_batched_grad_outputs():
    results = []
    for lib in (fl, torch):
        x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([0.5, -1.0], dtype=lib.float64, requires_grad=True)
        y = lib.stack([x * x, x * 3]) * w[:, None]  # (2, 3)
        vectors = lib.arange(24.0, dtype=lib.float64).reshape(4, 2, 3)
        gx, gw = lib.autograd.grad(y, (x, w), vectors, retain_graph=True, is_grads_batched=True)
        (penalty,) = lib.autograd.grad(y.sum(), x, only_inputs=True, create_graph=True)  # (WGAN-GP code's form)
        (second,) = lib.autograd.grad(penalty.sum(), x)
        with pytest.warns(FutureWarning, match="only_inputs argument is deprecated"):
            lib.autograd.grad((x * 2).sum(), x, only_inputs=False)
        results.append([gx.detach().numpy(), gw.detach().numpy(), penalty.detach().numpy(), second.numpy()])
    for got, want in zip(*results):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
    x = fl.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="batch size 2"):
        fl.autograd.grad([x * 2, x * 3], x, [fl.ones(2, 2), fl.ones(3, 2)], is_grads_batched=True)
