"""The derivative table: operator name -> :class:`~flambeau.autograd._opnode.Derivative`.

``flambeau.autograd`` fills it from the ``TABLE`` of each ``_formulas*`` module when it is imported;
the engine (backward), in-place operators and forward AD read it. It lives in a module of its own,
below all three, so that they need not import one another for it.
"""

from __future__ import annotations

__all__ = ["DERIVATIVES"]

DERIVATIVES: dict = {}  # op name -> Derivative
