"""Gradcheck cases of the act operators, merged into test_derivatives.CASES."""

from __future__ import annotations

CASES: dict = {}
