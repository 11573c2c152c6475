"""Forward-mode AD: tangents of dual tensors against Jacobian-vector products from reverse mode."""

from __future__ import annotations

import numpy as np
import pytest
from test_derivatives import CASES  # noqa: E402  - the same functions and inputs as the gradchecks

import flambeau as fl
import flambeau.autograd.forward_ad as fwAD
from flambeau._ops import OPS
from flambeau.autograd import functional

RNG = np.random.default_rng(7)

# Operators whose tangent rule covers elementwise, reduction, matmul and shape operators.
FORWARD_CASES = sorted(
    k for k in CASES
    if k.split("#")[0] in OPS and OPS[k.split("#")[0]].category in
    {"arithmetic", "math", "rounding", "activation", "view", "joining", "reordering", "linalg", "reduction", "nn",
     "conversion"}
    and k.split("#")[0] not in {"cumprod", "nansum", "embedding", "dropout", "mode"}
)


def _jvp_reverse(fn, inputs, tangents):
    """J·v computed from the reverse-mode Jacobian of the (single) output."""
    jac = functional.jacobian(lambda *xs: fn(*xs), tuple(x.detach() for x in inputs))
    out = fn(*inputs)
    total = np.zeros(tuple(out.shape))
    for j, t in zip(jac, tangents):
        jn = j.numpy().reshape(out.numel(), -1)
        total += (jn @ t.numpy().ravel()).reshape(tuple(out.shape))
    return total


@pytest.mark.parametrize("case", FORWARD_CASES)
def test_forward_matches_reverse(case):
    fn, inputs, *_ = CASES[case]
    inputs = tuple(x.detach() for x in inputs)
    tangents = tuple(fl.tensor(RNG.standard_normal(tuple(x.shape)), dtype=fl.float64) for x in inputs)
    expected = _jvp_reverse(fn, inputs, tangents)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, t) for x, t in zip(inputs, tangents)]
        out = fn(*duals)
        tangent = fwAD.unpack_dual(out).tangent
    assert tangent is not None, f"{case}: no tangent propagated"
    np.testing.assert_allclose(tangent.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_dual_level_scopes_tangents():
    x = fl.tensor([1.0, 2.0], dtype=fl.float64)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, fl.ones(2, dtype=fl.float64))
        assert not d.requires_grad
        y = d * 2
        assert fwAD.unpack_dual(y).tangent.tolist() == [2.0, 2.0]
    with fwAD.dual_level():
        assert fwAD.unpack_dual(y).tangent is None


def test_make_dual_outside_level_and_bad_tangent():
    x = fl.ones(2, dtype=fl.float64)
    with pytest.raises(RuntimeError, match="dual_level"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level():
        with pytest.raises(ValueError, match="different size"):
            fwAD.make_dual(x, fl.ones(3, dtype=fl.float64))


def test_forward_and_reverse_together():
    x = fl.tensor([0.5, 1.5], dtype=fl.float64, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, fl.ones(2, dtype=fl.float64))
        y = (d.sin() * d).sum()
        jvp = fwAD.unpack_dual(y).tangent
    y.backward()
    xv = np.array([0.5, 1.5])
    grad = np.cos(xv) * xv + np.sin(xv)
    np.testing.assert_allclose(x.grad.numpy(), grad)
    np.testing.assert_allclose(jvp.item(), grad.sum())
