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
    import sys

    # numba's simulator runs every GPU thread as a Python thread and takes a lock around each device
    # function call; with the default 5 ms switch interval a contended lock is handed over once per
    # interval, which made a tiny MobileNet's training step take minutes. 0.1 ms: seconds.
    sys.setswitchinterval(1e-4)
    config.addinivalue_line("markers", "gpu: needs a real CUDA GPU (skipped under the simulator or without CUDA)")
    config.addinivalue_line("markers", "cudasim(reason=...): only under numba's CUDA simulator (skipped on a real GPU)")


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
        elif "cudasim" in item.keywords and not sim:
            reason = item.get_closest_marker("cudasim").kwargs.get("reason", "reads device memory as host memory")
            item.add_marker(pytest.mark.skip(reason=f"{reason}: simulator only"))


@pytest.fixture(autouse=True)
def _quiet_fp_warnings():
    # The simulator computes with numpy scalars, which warn on division by zero, log(0) ...;
    # real kernels (and torch) do not.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


@pytest.fixture(autouse=True)
def _full_float32_convolutions():
    # These tests hold CUDA results to the CPU's within float32 rounding; on a real GPU cuDNN would run
    # float32 convolutions on TF32 tensor cores by default (~1e-3 relative), as torch's test suite
    # also turns off for its comparisons. The TF32 switch itself is tested in test_cuda_host_paths.
    import flambeau as fl

    cudnn = fl.backends.cudnn
    with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                     allow_tf32=False):
        yield
