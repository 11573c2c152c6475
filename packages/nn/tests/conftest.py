"""Fixtures shared by flambeau-nn's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test: next to numba's threads on a busy 2-core machine, torch's two OpenMP
    threads made a tiny model's step take seconds instead of milliseconds."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
