"""The flambeau-nn distribution installs and imports; until its issue lands it holds only its
docstring, so no half-written API can be mistaken for a real one.
"""

from __future__ import annotations

import importlib

import pytest

MODULES = ["flambeau.nn", "flambeau.optim"]


@pytest.mark.parametrize("name", MODULES)
def test_importable_with_docstring(name):
    module = importlib.import_module(name)
    assert module.__doc__ and module.__doc__.strip(), f"{name} has no module docstring"
    assert module.__name__ == name


def test_installed_as_its_own_distribution():
    from importlib.metadata import distribution

    assert distribution("flambeau-nn").metadata["Name"] == "flambeau-nn"


@pytest.mark.parametrize("name", MODULES)
def test_holds_only_its_docstring(name):
    """Until the package is implemented it exposes nothing: no stub can pass for a real API.

    Replace this test with the package's real tests when its issue lands.
    """
    module = importlib.import_module(name)
    public = sorted(n for n in vars(module) if not n.startswith("_") and n != "annotations")
    assert not public, f"{name} exposes {public} but has no tests: replace this placeholder test"
