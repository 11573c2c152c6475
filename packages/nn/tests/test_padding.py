"""The padding layers (``flambeau/nn/modules/padding.py``) and F.pad's checks against torch."""

from __future__ import annotations

import re

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(5)

CASES = [
    ("ZeroPad1d", (2,), (3, 4)), ("ZeroPad1d", ((1, 3),), (2, 3, 4)), ("ZeroPad1d", ((-1, 2),), (2, 3, 4)),
    ("ZeroPad2d", (1,), (2, 3, 4)), ("ZeroPad2d", ((1, 0, 2, 3),), (1, 2, 3, 4)),
    ("ZeroPad3d", ((1, 0, 2, 1, 0, 2),), (1, 2, 3, 4, 2)), ("ZeroPad3d", (1,), (2, 3, 4, 2)),
    ("ConstantPad1d", (2, 3.5), (3, 4)), ("ConstantPad2d", ((1, 0, 2, 3), -1.0), (2, 3, 4)),
    ("ConstantPad3d", (1, 0.25), (1, 2, 3, 4, 2)),
    ("ReflectionPad1d", (2,), (3, 4)), ("ReflectionPad1d", ((3, 1),), (2, 3, 4)),
    ("ReflectionPad2d", (1,), (2, 3, 4)), ("ReflectionPad2d", ((2, 0, 1, 2),), (1, 2, 3, 4)),
    ("ReflectionPad3d", ((1, 0, 2, 1, 1, 1),), (1, 2, 3, 4, 2)), ("ReflectionPad3d", (1,), (2, 3, 4, 2)),
    ("ReplicationPad1d", (3,), (3, 4)), ("ReplicationPad2d", ((2, 0, 1, 4),), (1, 2, 3, 4)),
    ("ReplicationPad3d", ((1, 0, 2, 1, 3, 1),), (2, 3, 4, 2)),
    ("CircularPad1d", ((1, 4),), (2, 3, 4)), ("CircularPad2d", ((1, 0, 2, 3),), (2, 3, 4)),
    ("CircularPad3d", ((1, 0, 2, 1, 1, 2),), (1, 2, 3, 4, 2)),
]


@pytest.mark.parametrize("name,args,shape", CASES, ids=lambda v: str(v))
def test_padding_module_matches_torch(name, args, shape):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    assert ours.padding == theirs.padding
    a = RNG.standard_normal(shape)
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    y, ty = ours(x), theirs(tx)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    g = RNG.standard_normal(tuple(ty.shape))
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_double_backward(mode):
    x = fl.from_numpy(RNG.standard_normal((1, 2, 3, 4))).requires_grad_(True)
    assert gradgradcheck(lambda t: F.pad(t, (1, 2, 2, 0), mode) ** 2, (x,))


def errors(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares whatever torch raises
        return type(e), str(e)
    return None


@pytest.mark.parametrize("call", [
    lambda m, t: m.ReflectionPad2d(1)(t.zeros(2, 3)),
    lambda m, t: m.ReflectionPad1d(3)(t.zeros(2, 3)),
    lambda m, t: m.ReflectionPad1d(1)(t.zeros(2, 3, 4, 5)),
    lambda m, t: m.ReplicationPad3d(1)(t.zeros(2, 3, 4)),
    lambda m, t: m.ReplicationPad2d(1)(t.zeros(2, 3, 4, 5, 6)),
    lambda m, t: m.CircularPad1d(5)(t.zeros(2, 3, 4)),
    lambda m, t: m.CircularPad2d(1)(t.zeros(2, 3)),
    lambda m, t: m.CircularPad3d(1)(t.zeros(2, 3, 4, 5, 6, 7)),
    lambda m, t: m.ReflectionPad2d((0, 0, 3, 0))(t.zeros(1, 2, 3, 4)),
    lambda m, t: m.functional.pad(t.zeros(2, 3, 4), (1, 1), "reflect", 2.0),
    lambda m, t: m.functional.pad(t.zeros(2, 3, 4), (1, 1, 1), "constant"),
    lambda m, t: m.functional.pad(t.zeros(2, 3, 4), (1, 1), "bogus"),
], ids=range(12))
def test_errors_match_torch(call):
    ours, theirs = errors(lambda: call(nn, fl)), errors(lambda: call(torch.nn, torch))
    assert theirs is not None and ours is not None
    assert ours[0] is theirs[0], (ours, theirs)
    # tensor-core numbers every reflect-size error "Argument #4" (torch: the pad's position); compared without it
    assert re.sub(r"Argument #\d+", "", ours[1]) == re.sub(r"Argument #\d+", "", theirs[1]), (ours, theirs)
