"""benchmarks/paper/figure1.py: which host spans its host row draws.

On a GPU the backward's autograd nodes run on the engine's device thread, outside the main thread's
"backward" annotation; the host row must still show them (the first GPU run drew an empty backward).
"""

from __future__ import annotations

import pathlib
import sys
import threading

import pytest

pytest.importorskip("torch")  # benchmarks/paper/models.py is imported by figure1.py

import flambeau as fl  # noqa: E402
from flambeau.profiler import ProfilerActivity, profile, record_function  # noqa: E402

PAPER = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "paper"
pytestmark = pytest.mark.skipif(not PAPER.exists(), reason="needs the repository's benchmarks/")


def test_a_phase_takes_the_spans_other_threads_ran_inside_it():
    sys.path.insert(0, str(PAPER))
    import figure1

    x = fl.ones(4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("forward"):
            x * 2
        with record_function("backward"):  # the work runs on another thread, as the CUDA engine's does
            worker = threading.Thread(target=lambda: x + 1)
            worker.start()
            worker.join()
        x - 1  # outside every phase: in none
    phases = {name: spans for name, _, _, spans in figure1.host_spans(prof)}
    assert [name for name, *_ in phases["forward"]] == ["flambeau::mul"]
    assert [name for name, *_ in phases["backward"]] == ["flambeau::add"]
