"""The autograd seam (DESIGN.md seam 2): when core calls the engine, and what it hands over."""

from __future__ import annotations

import sys
import threading

import pytest

import flambeau as fl
from flambeau import _grad_mode


class RecordingEngine:
    def __init__(self):
        self.calls = []
        self.inplace_calls = []

    def record(self, op, inputs, attrs, outputs):
        self.calls.append((op.name, inputs, attrs, outputs))

    def apply_inplace(self, op, inputs, attrs):
        self.inplace_calls.append((op.name, inputs, attrs))
        return inputs[0]


@pytest.fixture
def installed():
    """Restore whatever engine was installed before the test."""
    saved = _grad_mode._engine[0]
    yield _grad_mode.install_engine
    _grad_mode.install_engine(saved)


@pytest.fixture
def engine(installed):
    eng = RecordingEngine()
    installed(eng)
    return eng


@pytest.fixture
def no_engine(installed, monkeypatch):
    installed(None)
    # Make `import flambeau.autograd` fail as it would without the distribution installed.
    monkeypatch.setitem(sys.modules, "flambeau.autograd", None)


def test_records_when_an_input_requires_grad(engine):
    a = fl.ones(3, requires_grad=True)
    b = fl.ones(3)
    out = a * b
    assert [c[0] for c in engine.calls] == ["mul"]
    name, inputs, attrs, outputs = engine.calls[0]
    assert inputs[0] is a and inputs[1] is b and outputs is out and attrs == {}


def test_no_record_without_requires_grad(engine):
    fl.ones(3) + fl.ones(3)
    fl.exp(fl.ones(2))
    assert engine.calls == []


def test_no_record_under_no_grad(engine):
    a = fl.ones(3, requires_grad=True)
    with fl.no_grad():
        a + 1
        assert not fl.is_grad_enabled()
    assert fl.is_grad_enabled()
    assert engine.calls == []


def test_scalar_operand_records_with_the_scalar(engine):
    a = fl.ones(2, requires_grad=True)
    2.0 * a
    name, inputs, attrs, _ = engine.calls[-1]
    assert name == "mul" and inputs[0] == 2.0 and inputs[1] is a


def test_inplace_is_handed_to_the_engine_when_recording_is_needed(engine):
    # Note [In-place operators under autograd]: the engine runs the operator itself, so that it can
    # keep the old value and refuse leaves before anything changes.
    a = fl.zeros(3)
    b = fl.ones(3, requires_grad=True)
    v = a._version
    assert a.add_(b) is a
    assert a._version == v and a.tolist() == [0.0, 0.0, 0.0]  # the recording engine did not run it
    name, inputs, attrs = engine.inplace_calls[-1]
    assert name == "add" and inputs[0] is a and inputs[1] is b and attrs.get("inplace")
    a.add_(fl.ones(3))  # nothing requires grad: the kernel runs here and bumps the version
    assert a._version == v + 1 and a.tolist() == [1.0, 1.0, 1.0]


def test_unary_records(engine):
    a = fl.ones(2, requires_grad=True)
    fl.exp(a)
    assert engine.calls[-1][0] == "exp"


def test_backward_without_engine_names_the_package(no_engine):
    a = fl.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="flambeau-autograd"):
        (a * 2).backward(fl.ones(2))


def test_without_engine_requires_grad_still_propagates(no_engine):
    """Only backward() needs flambeau-autograd: results of differentiable ops require grad as in torch."""
    a = fl.ones(2, requires_grad=True)
    out = a * 2
    assert out.requires_grad and not out.is_leaf and a.is_leaf
    assert out.grad_fn is not None and out.grad_fn.next_functions == ()  # a marker: nothing was recorded
    assert "grad_fn=<MulBackward0>" in repr(out)
    with pytest.raises(RuntimeError, match=r"pip install flambeau-autograd"):
        out.sum().backward()
    with pytest.raises(RuntimeError, match="flambeau-autograd"):
        out.register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="leaf variables"):
        out.requires_grad_(False)
    assert not out.detach().requires_grad


# (expression, inputs requiring grad): requires_grad and is_leaf of every result must be torch's
FLAG_CASES = {
    "mul": lambda m, a, b: a * 2,
    "add_plain": lambda m, a, b: a + b,
    "plain_only": lambda m, a, b: b * 2,
    "chain": lambda m, a, b: (a * b).exp().sum(),
    "view": lambda m, a, b: a[0],
    "reshape": lambda m, a, b: a.reshape(3, 2),
    "transpose": lambda m, a, b: a.t(),
    "compare": lambda m, a, b: a > 0,
    "argmax": lambda m, a, b: a.argmax(),
    "to_int": lambda m, a, b: a.long(),
    "to_double": lambda m, a, b: a.double(),
    "int_then_float": lambda m, a, b: a.long().float(),
    "max_dim": lambda m, a, b: m.max(a, 0),
    "sort": lambda m, a, b: m.sort(a, 1),
    "cat": lambda m, a, b: m.cat([b, a]),
    "where": lambda m, a, b: m.where(b > 0, a, b),
    "matmul": lambda m, a, b: a @ b.t(),
    "floor": lambda m, a, b: a.floor(),
    "detach": lambda m, a, b: a.detach(),
    "clone": lambda m, a, b: b.clone(),
}


def _flags(out):
    outs = out if isinstance(out, tuple) else (out,)
    return [(o.requires_grad, o.is_leaf) for o in outs]


# torch's views made under no_grad keep requires_grad=True (its CreationMeta); flambeau's, recorded or
# not, don't: those cases are compared in grad mode only.
_VIEWS = {"view", "reshape", "transpose"}


@pytest.mark.parametrize("name, grad_mode", [(n, g) for n in sorted(FLAG_CASES) for g in (True, False)
                                             if g or n not in _VIEWS])
def test_without_engine_requires_grad_follows_torch(no_engine, name, grad_mode):
    torch = pytest.importorskip("torch")
    values = [[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]]
    a, b = fl.tensor(values, requires_grad=True), fl.tensor(values)
    ta, tb = torch.tensor(values, requires_grad=True), torch.tensor(values)
    fn = FLAG_CASES[name]
    with fl.set_grad_enabled(grad_mode), torch.set_grad_enabled(grad_mode):
        got, want = fn(fl, a, b), fn(torch, ta, tb)
    assert _flags(got) == _flags(want)


def test_without_engine_inplace_ops_propagate_and_guard_leaves(no_engine):
    a = fl.tensor([1.0, 2.0], requires_grad=True)
    b = fl.zeros(2)
    assert b.add_(a) is b and b.requires_grad and not b.is_leaf and b.tolist() == [1.0, 2.0]
    c = a * 1
    c.mul_(3).sub_(1)
    assert c.requires_grad and c.tolist() == [2.0, 5.0]
    d = fl.zeros(3)
    d[1:] = a
    assert d.requires_grad and d.tolist() == [0.0, 1.0, 2.0]
    e = fl.zeros(2)
    e.copy_(a)
    assert e.requires_grad and e.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        a.add_(1)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
        a[0].mul_(2)
    assert a.tolist() == [1.0, 2.0]
    with fl.no_grad():
        a.add_(1)  # allowed under no_grad, as in torch
    assert a.tolist() == [2.0, 3.0] and a.is_leaf
    f = fl.zeros(2)
    f.add_(fl.ones(2))
    assert not f.requires_grad


def test_grad_mode_is_per_thread():
    seen = []
    with fl.no_grad():
        t = threading.Thread(target=lambda: seen.append(fl.is_grad_enabled()))
        t.start()
        t.join()
        assert not fl.is_grad_enabled()
    assert seen == [True]


def test_grad_mode_decorators_and_set_grad_enabled():
    @fl.no_grad()
    def f():
        return fl.is_grad_enabled()

    @fl.enable_grad()
    def g():
        return fl.is_grad_enabled()

    assert f() is False
    with fl.no_grad():
        assert g() is True
    fl.set_grad_enabled(False)
    try:
        assert not fl.is_grad_enabled()
    finally:
        fl.set_grad_enabled(True)
    with fl.set_grad_enabled(False):
        assert not fl.is_grad_enabled()
    assert fl.is_grad_enabled()

    @fl.set_grad_enabled(False)
    def h():
        return fl.is_grad_enabled()

    assert fl.is_grad_enabled() and h() is False and fl.is_grad_enabled()


def test_grad_mode_restored_after_exception():
    with pytest.raises(ValueError):
        with fl.no_grad():
            raise ValueError
    assert fl.is_grad_enabled()


def test_register_kernel_replaces_cpu_kernel():
    from flambeau._ops import get_op, register_kernel

    op = get_op("neg")
    original = op.kernels["cpu"]
    calls = []

    def kernel(a, dtype, out=None):
        calls.append(a.shape)
        return original(a, dtype, out=out)

    register_kernel("neg", "cpu", kernel)
    try:
        assert (-fl.ones(2)).tolist() == [-1.0, -1.0]
        assert calls == [(2,)]
    finally:
        register_kernel("neg", "cpu", original)


def test_register_kernel_errors():
    from flambeau._ops import register_kernel

    with pytest.raises(KeyError, match="no operator named 'nope'"):
        register_kernel("nope", "cpu", lambda: None)
    with pytest.raises(ValueError, match="device_type must be"):
        register_kernel("neg", "tpu", lambda: None)
