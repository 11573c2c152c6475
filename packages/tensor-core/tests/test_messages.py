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
