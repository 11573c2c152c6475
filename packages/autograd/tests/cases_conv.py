"""Gradcheck cases of the conv operators, merged into test_derivatives.CASES."""

from __future__ import annotations

CASES: dict = {}
