"""The flambeau-nn distribution installs and imports as its own distribution."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["flambeau.nn", "flambeau.optim", "flambeau.distributions"]


@pytest.mark.parametrize("name", MODULES)
def test_importable_with_docstring(name):
    module = importlib.import_module(name)
    assert module.__doc__ and module.__doc__.strip(), f"{name} has no module docstring"
    assert module.__name__ == name


def test_installed_as_its_own_distribution():
    from importlib.metadata import distribution

    assert distribution("flambeau-nn").metadata["Name"] == "flambeau-nn"
