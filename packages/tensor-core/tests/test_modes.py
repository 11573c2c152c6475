"""Dispatch modes (flambeau/_ops/_modes.py): every operator variant reaches the active modes, per thread,
nested in stack order, and nothing stays rebound after the last one exits."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops._modes import (
    DispatchMode,
    active_modes,
    call,
    pop_global_mode,
    pop_mode,
    push_global_mode,
    push_mode,
)
from flambeau._ops._registry import OPS


class Counting(DispatchMode):
    def __init__(self):
        self.names: list = []

    def dispatch(self, name, fn, args, kwargs):
        self.names.append(name)
        return fn(*args, **kwargs)


class Named(DispatchMode):
    """Records (label, operator) in ``order``."""

    def __init__(self, label, order):
        self.label, self.order = label, order

    def dispatch(self, name, fn, args, kwargs):
        self.order.append((self.label, name))
        return fn(*args, **kwargs)


def _assert_unbound():
    assert fl.add is OPS["add"].bindings[0] and fl.Tensor.add is OPS["add"].bindings[1] is OPS["add"].fn
    assert fl.Tensor.__add__ is OPS["add"].dunders["__add__"]
    assert fl.Tensor.add_ is OPS["add"].inplace_fn
    assert fl.exp is OPS["exp"].bindings[0]


def test_every_variant_reaches_the_mode():
    x = fl.ones(2, 3)
    with Counting() as mode:
        fl.exp(x)          # function
        x.neg()            # method
        y = x.clone()
        y.mul_(2)          # in-place
        y += 1             # in-place dunder
        y[0] = 1.0         # ... and __setitem__
        x + 1              # dunder
        x @ x.T            # dunder of another operator (x.T is a property: the transpose inside it is not seen)
        fl.cat([x, x])     # a list argument
    assert mode.names == ["exp", "neg", "clone", "mul_", "add_", "index_put_", "add", "matmul", "cat"]
    _assert_unbound()


def test_references_held_by_other_modules_are_rebound():
    nn = pytest.importorskip("flambeau.nn")
    layer = nn.Conv2d(1, 2, 3)
    with Counting() as mode:
        layer(fl.ones(1, 1, 5, 5))
    assert "conv2d" in mode.names


def test_a_mode_can_change_arguments_and_results():
    class Doubling(DispatchMode):
        def dispatch(self, name, fn, args, kwargs):
            out = fn(*args, **kwargs)
            return out * 2 if name == "exp" else out  # the mul inside is not seen by this mode again

    with Doubling():
        y = fl.exp(fl.zeros(2))
    np.testing.assert_array_equal(y.numpy(), [2, 2])
    np.testing.assert_array_equal(fl.exp(fl.zeros(2)).numpy(), [1, 1])


def test_nesting_top_first_and_own_calls_go_below():
    order = []

    class Negating(Named):
        def dispatch(self, name, fn, args, kwargs):
            self.order.append((self.label, name))
            if name == "exp":
                args = (args[0].neg(),)  # an operator the mode itself calls: only "outer" sees it
            return fn(*args, **kwargs)

    with Named("outer", order) as outer, Negating("inner", order) as inner:
        assert active_modes()[-2:] == (outer, inner)
        fl.exp(fl.ones(1))
    assert order == [("inner", "exp"), ("outer", "neg"), ("outer", "exp")]
    assert active_modes() == ()
    _assert_unbound()


def test_a_bottom_mode_goes_below_the_modes_pushed_before_it():
    order = []
    low = Named("bottom", order)
    with Named("top", order):
        push_mode(low, bottom=True)
        try:
            assert active_modes()[-2] is low
            fl.ones(1).exp()
            call("exp", OPS["exp"].fn, (fl.ones(1),), {})  # a caller holding the front itself
        finally:
            assert pop_mode(low) is low
        fl.ones(1).exp()
    assert [label for label, name in order if name == "exp"] == ["top", "bottom", "top", "bottom", "top"]
    _assert_unbound()


def test_modes_are_per_thread():
    seen_there = []

    def other():
        with Counting() as mode:
            fl.ones(2).exp()
            barrier.wait()  # both threads inside their modes
            barrier.wait()
        seen_there.extend(mode.names)

    barrier = threading.Barrier(2)
    t = threading.Thread(target=other)
    with Counting() as here:
        t.start()
        barrier.wait()
        fl.ones(2).neg()
        barrier.wait()
    t.join()
    assert here.names == ["neg"] and seen_there == ["exp"]
    _assert_unbound()


def test_a_thread_without_modes_runs_the_operators_plainly():
    names = []
    with Counting() as here:
        t = threading.Thread(target=lambda: names.append(fl.ones(2).exp().sum().item()))
        t.start()
        t.join()
    assert here.names == [] and names == [pytest.approx(2 * np.e)]


def test_global_modes_see_every_thread_below_the_thread_modes():
    glob = Counting()
    push_global_mode(glob)
    try:
        t = threading.Thread(target=lambda: fl.ones(1).exp())
        t.start()
        t.join()
        with Counting() as local:
            fl.ones(1).neg()
    finally:
        pop_global_mode(glob)
    assert glob.names == ["exp", "neg"] and local.names == ["neg"]
    _assert_unbound()


def test_exceptions_restore_everything():
    class Failing(DispatchMode):
        def dispatch(self, name, fn, args, kwargs):
            raise ValueError("from the mode")

    with pytest.raises(ValueError, match="from the mode"):
        with Failing():
            fl.ones(1).exp()
    with pytest.raises(RuntimeError, match="must match|size"):
        with Counting():
            fl.ones(2) + fl.ones(3)
    assert active_modes() == ()
    _assert_unbound()


def test_push_and_pop_errors():
    with pytest.raises(TypeError, match="dispatch"):
        push_mode(object())
    with pytest.raises(RuntimeError, match="no dispatch mode"):
        pop_mode()
    a, b = Counting(), Counting()
    push_mode(a)
    push_mode(b)
    try:
        with pytest.raises(RuntimeError, match="reverse order"):
            pop_mode(a)
    finally:
        assert pop_mode() is b and pop_mode(a) is a
    with pytest.raises(RuntimeError, match="not an active global mode"):
        pop_global_mode(a)
    _assert_unbound()
