"""Gradients through complex intermediates (flambeau/autograd/_formulas_complex.py) against torch's,
which follow the conjugate-Wirtinger convention: for a real loss L of z = x + iy, z.grad = dL/dx + i dL/dy.

Real leaves go through complex operators (view_as_complex, complex, polar) to a real loss, so each
case compares the real leaves' gradients with torch's.

The engine records operators with complex results (``dtype.is_differentiable``), and the core
formulas (abs, mul, div, exp, log, sqrt, reciprocal, mm, matmul, bmm, mv, dot) conjugate for
complex inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.autograd import gradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 2))
B = RNG.standard_normal((3, 4))


def _compare(loss_fn):
    got = []
    for lib in (fl, torch):
        a = lib.tensor(A, requires_grad=True)
        b = lib.tensor(B, requires_grad=True)
        loss = loss_fn(lib, a, b)
        ga, gb = (lib.autograd.grad(loss, (a, b), allow_unused=True) if lib is torch
                  else fl.autograd.grad(loss, (a, b), allow_unused=True))
        got.append((loss.item(), *(None if g is None else g.numpy() for g in (ga, gb))))
    (fl_loss, *fl_grads), (t_loss, *t_grads) = got
    assert np.isclose(fl_loss, t_loss)
    for f, t in zip(fl_grads, t_grads):
        assert (f is None) == (t is None)
        if f is not None:
            np.testing.assert_allclose(f, t, rtol=1e-6, atol=1e-9)


OWN = {  # only the formulas of _formulas_complex (and add/sub/sum, which need no conjugation)
    "real*imag": lambda L, a, b: (L.view_as_complex(a).real * L.view_as_complex(a).imag * b).sum(),
    "angle": lambda L, a, b: (L.view_as_complex(a).angle() * b).sum(),
    "view_as_real": lambda L, a, b: (L.view_as_real(L.view_as_complex(a) + 1j) ** 2 * b[..., None]).sum(),
    "complex": lambda L, a, b: (L.view_as_real(L.complex(a[..., 0], b)) ** 3).sum(),
    "polar": lambda L, a, b: L.view_as_real(L.polar(b.abs() + 0.5, a[..., 0])).pow(3).sum(),
    "polar-angle": lambda L, a, b: (L.polar(b.abs() + 0.5, a[..., 0]).angle() * b).sum(),
    "conj": lambda L, a, b: (L.view_as_complex(a).conj_physical().imag * b).sum(),
    "sum-add": lambda L, a, b: L.view_as_real((L.view_as_complex(a) + L.complex(b, b) - 1j).sum(0)).pow(2).sum(),
}
CORE = {  # also the conjugating formulas of the core operators
    "abs": lambda L, a, b: L.view_as_complex(a).abs().sum() + b.sum(),
    "z*w": lambda L, a, b: (L.view_as_complex(a) * L.complex(b, b * 2)).abs().sum(),
    "z/w": lambda L, a, b: (L.view_as_complex(a) / L.complex(b, b * 2)).abs().sum(),
    "z*real": lambda L, a, b: (L.view_as_complex(a) * b).abs().sum(),
    "exp": lambda L, a, b: (L.view_as_complex(a).exp().real * b).sum(),
    "mm": lambda L, a, b: (L.view_as_complex(a) @ L.complex(b, b).mT).abs().sum(),
}


def _t(*shape, low=-2.0, high=2.0):
    return fl.tensor(RNG.uniform(low, high, shape), dtype=fl.float64, requires_grad=True)


# Gradcheck cases (real inputs and outputs through complex intermediates), merged into
# test_derivatives.CASES as the other families' cases are.
CASES: dict = {
    "real": (lambda a: fl.real(fl.view_as_complex(a)), (_t(3, 2),)),
    "imag": (lambda a: fl.imag(fl.view_as_complex(a)), (_t(3, 2),)),
    "view_as_real": (lambda a, b: fl.view_as_real(fl.complex(a, b)), (_t(3), _t(3))),
    "view_as_complex": (lambda a: fl.view_as_real(fl.view_as_complex(a)), (_t(2, 3, 2),)),
    "angle": (lambda a: fl.angle(fl.view_as_complex(a)), (_t(4, 2, low=0.5),)),
    "conj_physical": (lambda a: fl.view_as_real(fl.conj_physical(fl.view_as_complex(a))), (_t(3, 2),)),
    "conj": (lambda a: fl.view_as_real(fl.conj(fl.view_as_complex(a))), (_t(3, 2),)),
    "complex": (lambda a, b: fl.view_as_real(fl.complex(a, b)), (_t(2, 3), _t(3))),
    "polar": (lambda a, b: fl.view_as_real(fl.polar(a, b)), (_t(2, 3, low=0.5), _t(3))),
    "resolve_conj": (lambda a: fl.resolve_conj(a) * 1, (_t(3),)),
    "resolve_neg": (lambda a: fl.resolve_neg(a) * 1, (_t(3),)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_gradcheck(case):
    fn, inputs = CASES[case]
    assert gradcheck(fn, inputs)


@pytest.mark.parametrize("name", list(OWN))
def test_complex_operator_gradients_match_torch(name):
    _compare(OWN[name])


@pytest.mark.parametrize("name", list(CORE))
def test_core_operator_gradients_on_complex_match_torch(name):
    _compare(CORE[name])


def test_complex_leaf_gradient_is_conjugate_wirtinger():
    z = fl.tensor([1 + 2j, -0.5 + 0.25j], requires_grad=True)
    tz = torch.tensor([1 + 2j, -0.5 + 0.25j], requires_grad=True)
    (fl.view_as_real(z) ** 2).sum().backward()
    (torch.view_as_real(tz) ** 2).sum().backward()
    assert z.grad.dtype is fl.complex64
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy())  # 2x + 2iy


def test_formulas_are_declared_for_every_differentiable_complex_operator():
    from flambeau._ops import OPS
    from flambeau.autograd._formulas_complex import TABLE

    declared = {n for n, op in OPS.items() if op.category == "complex" and op.differentiable and not op.composite}
    assert declared == set(TABLE)
