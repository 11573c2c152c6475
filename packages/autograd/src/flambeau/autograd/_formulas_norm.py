"""Derivatives of the norm operators (see _formulas.py for the convention). Being written."""

from __future__ import annotations

__all__ = ["TABLE"]

TABLE: dict = {}
