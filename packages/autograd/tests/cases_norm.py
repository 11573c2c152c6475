"""Gradcheck cases of the norm operators, merged into test_derivatives.CASES."""

from __future__ import annotations

CASES: dict = {}
