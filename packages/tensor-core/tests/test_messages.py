"""Error and warning messages speak of flambeau: no ``torch.`` names copied from PyTorch's messages.

Every string (f-string parts included) inside a ``raise`` statement or a ``warnings.warn`` call of
every package's sources is checked; docstrings and comments may cite PyTorch freely.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

PACKAGES = pathlib.Path(__file__).resolve().parents[2]
SOURCES = sorted(PACKAGES.glob("*/src/flambeau/**/*.py"))
TORCH_NAME = re.compile(r"\btorch\.|\bpytorch github\b", re.IGNORECASE)


def _message_strings(tree: ast.AST):
    for node in ast.walk(tree):
        is_warn = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                   and node.func.attr == "warn")
        if isinstance(node, ast.Raise) or is_warn:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    yield inner.lineno, inner.value


@pytest.mark.skipif(not SOURCES, reason="not run from a checkout of the monorepo")
def test_no_message_names_torch():
    found = []
    for path in SOURCES:
        for line, text in _message_strings(ast.parse(path.read_text(), str(path))):
            if TORCH_NAME.search(text):
                found.append(f"{path.relative_to(PACKAGES)}:{line}: {text[:80]!r}")
    assert not found, "messages naming torch:\n" + "\n".join(found)


@pytest.mark.skipif(not SOURCES, reason="not run from a checkout of the monorepo")
def test_scalar_type_names_live_in_one_table():
    """torch's scalar-type names (``Float``, ``Double`` ...) are ``dtype.scalar_name``: one table, in _dtype.py."""
    names = {"Float", "Double", "Half", "Long", "Int", "Short", "Char", "Byte", "Bool"}
    copies = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Dict) and sum(isinstance(v, ast.Constant) and v.value in names
                                                  for v in node.values) >= 3:
                copies.add(str(path.relative_to(PACKAGES)))
    assert not copies, f"tables of scalar-type names outside flambeau/_dtype.py: {sorted(copies)}"
    import flambeau as fl

    assert [d.scalar_name for d in (fl.float32, fl.int64, fl.bool)] == ["Float", "Long", "Bool"]
