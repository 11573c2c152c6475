"""The flambeau-autograd distribution is installed as its own distribution and imports."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["flambeau.autograd", "flambeau.func", "flambeau.amp", "flambeau.utils.checkpoint"]


@pytest.mark.parametrize("name", MODULES)
def test_importable_with_docstring(name):
    module = importlib.import_module(name)
    assert module.__doc__ and module.__doc__.strip(), f"{name} has no module docstring"
    assert module.__name__ == name


def test_installed_as_its_own_distribution():
    from importlib.metadata import distribution

    assert distribution("flambeau-autograd").metadata["Name"] == "flambeau-autograd"
