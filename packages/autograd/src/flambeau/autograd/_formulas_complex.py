"""Derivatives of the complex-number operators (see _formulas.py for the convention).

torch's convention for complex inputs (Wirtinger calculus): the gradient of a real loss ``L`` with
respect to ``z = x + iy`` is ``dL/dx + i dL/dy`` (the conjugate Wirtinger derivative, times 2), so
that ``z - lr * z.grad`` descends. With that convention:

* ``real(z)``: ``g`` (a real ``g`` widened to complex: ``g + 0i``); ``imag(z)``: ``i g``;
* ``view_as_real`` / ``view_as_complex`` are each other's gradients (pairs <-> complex numbers);
* ``conj(z)``: ``conj(g)``;
* ``angle(z) = atan2(y, x)``: ``i g z / |z|^2`` (0 at 0; a real input's angle is piecewise
  constant: 0);
* ``complex(a, b) = a + ib``: ``real(g)`` and ``imag(g)``;
* ``polar(r, t) = r e^{it}``: ``Re(g e^{-it})`` for ``r`` and ``r Im(g e^{-it})`` for ``t``.

The formulas use flambeau operators only, so they differentiate again.
"""

from __future__ import annotations

import flambeau as fl
from flambeau.autograd._opnode import Derivative as D

__all__ = ["TABLE"]


def _angle_grad(g, z):
    if not z.is_complex():
        return g * 0
    return fl.where(z == 0, 0, g * z / (z.abs() ** 2) * 1j)


def _polar_grads(g, s):
    """``(grad of abs, grad of angle)`` of ``polar(abs, angle)``: the real and imaginary parts of
    ``g e^{-i angle}``, the second one times ``abs``."""
    c, sn = fl.cos(s.angle), fl.sin(s.angle)
    gr, gi = fl.real(g), fl.imag(g)
    return gr * c + gi * sn, s.abs * (gi * c - gr * sn)


TABLE: dict = {
    "real": D({"input": lambda g, s: g}),  # widened to the complex input's dtype by reduce_grad
    "imag": D({"input": lambda g, s: g * 1j}),
    "view_as_real": D({"input": lambda g, s: fl.view_as_complex(g.contiguous())}),
    "view_as_complex": D({"input": lambda g, s: fl.view_as_real(g)}),
    "conj_physical": D({"input": lambda g, s: fl.conj_physical(g)}),
    "angle": D({"input": lambda g, s: _angle_grad(g, s.input)}, save=("input",)),
    "complex": D({"real": lambda g, s: fl.real(g), "imag": lambda g, s: fl.imag(g)}),
    "polar": D({"abs": lambda g, s: _polar_grads(g, s)[0], "angle": lambda g, s: _polar_grads(g, s)[1]},
               save=("abs", "angle")),
}
