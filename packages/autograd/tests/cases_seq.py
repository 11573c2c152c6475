"""Gradcheck cases of the seq operators, merged into test_derivatives.CASES."""

from __future__ import annotations

CASES: dict = {}
