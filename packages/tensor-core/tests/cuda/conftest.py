"""Configuration of the CUDA tests (tiers 2 and 3 of DESIGN.md "Execution").

Run this directory in its own pytest process:

- tier 2, numba's simulator (no GPU):
  ``NUMBA_ENABLE_CUDASIM=1 python -m pytest packages/tensor-core/tests/cuda -q``
- tier 3, a real GPU: ``python -m pytest packages/tensor-core/tests/cuda -q`` (tests marked
  ``gpu`` run only there).

Without the simulator and without a GPU every test here is skipped with the reason.
"""

from __future__ import annotations

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a real CUDA GPU (skipped under the simulator or without CUDA)")


def _state():
    from numba.core import config as nconfig

    import flambeau as fl

    sim = bool(nconfig.ENABLE_CUDASIM)
    return sim, fl.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    try:
        sim, available = _state()
    except Exception as e:  # numba-cuda missing
        sim, available, why = False, False, f"numba-cuda unavailable: {e}"
    else:
        why = "no CUDA device and NUMBA_ENABLE_CUDASIM is not set"
    here = __file__.rsplit("/", 1)[0]
    for item in items:
        if not str(item.fspath).startswith(here):
            continue
        if not available:
            item.add_marker(pytest.mark.skip(reason=why))
        elif "gpu" in item.keywords and sim:
            item.add_marker(pytest.mark.skip(reason="needs a real GPU (running under numba's CUDA simulator)"))


@pytest.fixture(autouse=True)
def _quiet_fp_warnings():
    # The simulator computes with numpy scalars, which warn on division by zero, log(0) ...;
    # real kernels (and torch) do not.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
