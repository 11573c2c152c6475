"""examples/hogwild.py: processes training one shared model without locks match a single process."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "hogwild.py"


def _load():
    if not EXAMPLE.exists():
        pytest.skip("examples/hogwild.py is not in this checkout")
    pytest.importorskip("flambeau.data")
    pytest.importorskip("flambeau.nn")
    pytest.importorskip("flambeau.optim")
    spec = importlib.util.spec_from_file_location("hogwild_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hogwild_reaches_single_process_accuracy(capsys):
    hogwild = _load()
    acc_hog, acc_single = hogwild.main(["--procs", "2", "--epochs", "10", "--start-method", "fork"])
    assert acc_single > 0.9
    assert acc_hog > 0.9 and acc_hog >= acc_single - 0.03, (acc_hog, acc_single)
    assert "Hogwild, 2 processes" in capsys.readouterr().out
