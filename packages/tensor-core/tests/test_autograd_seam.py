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


def test_without_engine_nothing_is_recorded(no_engine):
    a = fl.ones(2, requires_grad=True)
    out = a * 2
    assert out.grad_fn is None and not out.requires_grad


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
