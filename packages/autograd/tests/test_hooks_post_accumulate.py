"""Post-accumulate-grad hooks, hooks on AccumulateGrad nodes and end-of-backward callbacks, against torch.

Each scenario runs once with flambeau and once with torch (``m`` is the module, ``queue`` its
end-of-backward callback queue) and returns a log of what the hooks saw; the logs must be equal.
"""

from __future__ import annotations

import pytest

import flambeau as fl
import flambeau.autograd  # noqa: F401  - installs the engine
from flambeau.autograd.graph import queue_callback

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")

BACKENDS = {
    "flambeau": (fl, queue_callback),
    "torch": (torch, lambda cb: torch.autograd.Variable._execution_engine.queue_callback(cb)),
}


def same_in_both(scenario):
    """The log of ``scenario(m, queue)`` under flambeau, asserted equal to torch's."""
    logs = {name: scenario(m, q) for name, (m, q) in BACKENDS.items()}
    assert logs["flambeau"] == logs["torch"]
    return logs["flambeau"]


def leaf(m, values):
    return m.tensor(values, dtype=m.float64, requires_grad=True)


def accumulator(t):
    return t.view_as(t).grad_fn.next_functions[0][0]


# --- register_post_accumulate_grad_hook --------------------------------------------------------------
def test_hook_order_around_accumulation():
    """tensor hook -> AccumulateGrad pre hook -> accumulation -> post-accumulate hook -> AccumulateGrad post hook."""
    def scenario(m, queue):
        log = []
        a = leaf(m, [1.0, 2.0])
        acc = accumulator(a)
        a.register_hook(lambda g: log.append(("tensor", g.tolist(), a.grad is None)))
        acc.register_prehook(lambda go: log.append(("pre", [g.tolist() for g in go], a.grad is None)))
        a.register_post_accumulate_grad_hook(lambda t: log.append(("post_acc", t is a, t.grad.tolist())))
        acc.register_hook(lambda gi, go: log.append(("post", gi, [g.tolist() for g in go], a.grad.tolist())))
        (a * 2).sum().backward()
        (a * 2 + a * 3).sum().backward()  # two paths into one leaf: one accumulation of their sum
        return log

    log = same_in_both(scenario)
    assert [e[0] for e in log] == ["tensor", "pre", "post_acc", "post"] * 2
    assert log[6] == ("post_acc", True, [7.0, 7.0])


def test_hooks_run_in_registration_order_and_see_the_accumulated_grad():
    def scenario(m, queue):
        log = []
        a, b = leaf(m, [1.0, 2.0]), leaf(m, [3.0])
        for k in range(3):
            a.register_post_accumulate_grad_hook(lambda t, k=k: log.append((k, t.grad.tolist())) and None)
        b.register_post_accumulate_grad_hook(lambda t: log.append(("b", t.grad.tolist())) and None)
        a.grad = m.ones(2, dtype=m.float64)  # an existing .grad: the hook sees the sum
        ((a * a).sum() * b).sum().backward()
        return log

    same_in_both(scenario)


def test_hook_on_a_root_leaf_and_with_create_graph():
    def scenario(m, queue):
        log = []
        a = leaf(m, [2.0])
        a.register_post_accumulate_grad_hook(
            lambda t: log.append((t.grad.tolist(), t.grad.requires_grad, m.is_grad_enabled())) and None)
        a.backward()  # the leaf itself is the root
        a.grad = None
        (a * a).sum().backward(create_graph=True)
        a.grad = None  # breaks the grad <-> graph cycle
        return log

    same_in_both(scenario)


def test_retain_graph_and_repeated_backward_fire_every_time():
    def scenario(m, queue):
        log = []
        a = leaf(m, [1.0, -1.0])
        a.register_post_accumulate_grad_hook(lambda t: log.append(t.grad.tolist()) and None)
        out = (a * a * 3).sum()
        out.backward(retain_graph=True)
        out.backward()
        (a * 2).sum().backward()
        return log

    assert same_in_both(scenario) == [[6.0, -6.0], [12.0, -12.0], [14.0, -10.0]]


def test_handle_remove():
    def scenario(m, queue):
        log = []
        a = leaf(m, [1.0])
        h1 = a.register_post_accumulate_grad_hook(lambda t: log.append("first") and None)
        a.register_post_accumulate_grad_hook(lambda t: log.append("second") and None)
        a.backward()
        h1.remove()
        h1.remove()  # removing twice is harmless
        a.backward()
        return log

    assert same_in_both(scenario) == ["first", "second", "second"]


def test_only_leaves_that_require_grad_and_hooks_return_none():
    for m, _q in BACKENDS.values():
        a = leaf(m, [1.0])
        with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
            (a * 2).register_post_accumulate_grad_hook(lambda t: None)
        with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
            m.ones(1).register_post_accumulate_grad_hook(lambda t: None)
        a.register_post_accumulate_grad_hook(lambda t, m=m: m.zeros(1, dtype=m.float64))
        with pytest.raises(RuntimeError, match="Tensor post accumulate grad hooks should return None"):
            (a * 2).sum().backward()


def test_grad_and_backward_inputs_fire_only_where_grad_is_accumulated():
    def scenario(m, queue):
        log = []
        a, b = leaf(m, [1.0]), leaf(m, [2.0])
        a.register_post_accumulate_grad_hook(lambda t: log.append(("a", t.grad.tolist())) and None)
        b.register_post_accumulate_grad_hook(lambda t: log.append(("b", t.grad.tolist())) and None)
        acc = accumulator(a)
        acc.register_hook(lambda gi, go: log.append(("acc_post", a.grad.tolist())) and None)
        m.autograd.grad((a * b).sum(), (a, b))  # nothing is accumulated: no hook
        (a * b).sum().backward(inputs=[a])
        return log

    assert same_in_both(scenario) == [("a", [2.0]), ("acc_post", [2.0])]


# --- hooks on AccumulateGrad nodes -------------------------------------------------------------------
def test_accumulate_grad_post_hook_fires_after_accumulation():
    def scenario(m, queue):
        log = []
        a = leaf(m, [1.0, 2.0])
        acc = accumulator(a)
        h = acc.register_hook(lambda gi, go: log.append((gi, [g.tolist() for g in go], a.grad.tolist())))
        (a * 3).sum().backward()
        (a * 3).sum().backward()
        h.remove()
        (a * 3).sum().backward()
        return log

    assert same_in_both(scenario) == [((), [[3.0, 3.0]], [3.0, 3.0]), ((), [[3.0, 3.0]], [6.0, 6.0])]


def test_accumulate_grad_pre_hook_may_replace_the_gradient():
    def scenario(m, queue):
        log = []
        a = leaf(m, [1.0, 2.0])
        acc = accumulator(a)
        acc.register_prehook(lambda go: (go[0] * 10,))
        acc.register_hook(lambda gi, go: log.append(go[0].tolist()))
        out = (a * 2).sum()
        out.backward(retain_graph=True)
        out.backward()
        return log, a.grad.tolist()

    assert same_in_both(scenario) == ([[20.0, 20.0], [20.0, 20.0]], [40.0, 40.0])


def test_hook_on_a_dropped_accumulator_does_not_fire():
    """A leaf refers to its AccumulateGrad weakly, as torch: a hook on a node nobody keeps dies with it."""
    def scenario(m, queue):
        log = []
        a = leaf(m, [1.0])
        accumulator(a).register_hook(lambda gi, go: log.append("fired"))
        (a * 2).sum().backward()
        return log

    assert same_in_both(scenario) == []


# --- queue_callback ----------------------------------------------------------------------------------
def test_callback_runs_once_after_every_gradient_is_accumulated():
    def scenario(m, queue):
        log = []
        a, b = leaf(m, [1.0]), leaf(m, [2.0])

        def hook(t):
            log.append("hook")
            if len(log) == 1:  # queued by the first hook: runs after b's accumulation too
                queue(lambda: log.append(("cb", a.grad.tolist(), b.grad.tolist(), m.is_grad_enabled())))

        a.register_post_accumulate_grad_hook(hook)
        b.register_post_accumulate_grad_hook(hook)
        (a * b * 5).sum().backward()
        log.append("returned")
        (a * b).sum().backward()  # the callback was cleared: it does not run again
        return log

    assert same_in_both(scenario) == ["hook", "hook", ("cb", [10.0], [5.0], False), "returned", "hook", "hook"]


def test_callbacks_order_nesting_and_grad_mode():
    def scenario(m, queue):
        log = []
        a = leaf(m, [1.0, 2.0])

        def make(k):
            def hook(t):
                log.append(("hook", k))
                queue(lambda: (log.append(("cb", k, m.is_grad_enabled())),
                               queue(lambda: log.append(("nested", k)))) and None)
            return hook

        for k in range(2):
            a.register_post_accumulate_grad_hook(make(k))
        (a * a).sum().backward(create_graph=True)
        a.grad = None
        return log

    assert same_in_both(scenario)[-2:] == [("nested", 0), ("nested", 1)]


def test_callback_from_a_tensor_hook_and_in_autograd_grad():
    def scenario(m, queue):
        log = []
        a = leaf(m, [3.0])
        y = a * 2
        y.register_hook(lambda g: queue(lambda: log.append("cb")) and None)
        (gx,) = m.autograd.grad((y * y).sum(), a)
        log.append(gx.tolist())
        return log

    assert same_in_both(scenario) == ["cb", [24.0]]


def test_reentrant_backward_runs_its_own_callbacks():
    def scenario(m, queue):
        log = []
        x, y = leaf(m, [1.0]), leaf(m, [1.0])

        def inner_hook(t):
            queue(lambda: log.append("inner-cb"))

        def outer_hook(g):
            queue(lambda: log.append("outer-cb"))
            with m.enable_grad():
                h = y.register_post_accumulate_grad_hook(inner_hook)
                (y * 3).sum().backward()
                h.remove()
            log.append("inner-returned")

        x.register_hook(outer_hook)
        (x * 2).sum().backward()
        return log

    assert same_in_both(scenario) == ["inner-cb", "inner-returned", "outer-cb"]


def test_callbacks_outside_backward_errors_and_clearing():
    def scenario(m, queue):
        log = []
        with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass"):
            queue(lambda: None)
        a = leaf(m, [1.0])

        def failing(g):
            queue(lambda: log.append("dropped"))
            raise ValueError("boom")

        h = a.register_hook(failing)
        with pytest.raises(ValueError, match="boom"):
            (a * 2).sum().backward()
        h.remove()
        h = a.register_hook(lambda g: queue(lambda: 1 / 0) and None)
        with pytest.raises(ZeroDivisionError):
            (a * 2).sum().backward()  # a callback's error reaches the caller
        h.remove()
        (a * 2).sum().backward()  # neither callback is still queued
        with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass"):
            queue(lambda: None)
        log.append(a.grad.tolist())
        return log

    assert same_in_both(scenario) == [[4.0]]  # the ValueError came before accumulation
