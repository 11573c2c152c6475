"""CUDA tests of flambeau-nn: whole models on the device (tier 2 under numba's simulator, tier 3 on a GPU).

Run this directory in its own pytest process (``nox -s tests`` does, with ``NUMBA_ENABLE_CUDASIM=1``):
without the simulator and without a GPU every test here is skipped with the reason.
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


def pytest_collection_modifyitems(config, items):
    try:
        import flambeau as fl

        available, sim = fl.cuda.is_available(), fl.cuda.is_simulator()
        why = "no CUDA device and NUMBA_ENABLE_CUDASIM is not set"
    except Exception as e:  # numba-cuda missing
        available, sim, why = False, False, f"numba-cuda unavailable: {e}"
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
    # the simulator computes with numpy scalars, which warn where a GPU does not
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
