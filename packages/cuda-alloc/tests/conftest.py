"""Fixtures of the cuda-alloc tests (the distribution is installed by tox/nox, alone or with the rest)."""

from __future__ import annotations

import pytest
from invariants import c_core_available

from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice
from flambeau.cuda_alloc._allocator import PURE_PYTHON_VAR
from flambeau.cuda_alloc._config import AllocatorConfig

CORES = ("c", "python")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "core" in metafunc.fixturenames and metafunc.definition.get_closest_marker("own_cores") is None:
        metafunc.parametrize("core", CORES, indirect=True)


@pytest.fixture(autouse=True)
def core(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test function runs against both allocator cores (see Note [Two cores]); the
    hypothesis state machines and the tests marked ``own_cores`` choose theirs themselves."""
    if request.node.get_closest_marker("own_cores") is not None:
        return "own"
    name = getattr(request, "param", "c")
    if name == "python":
        monkeypatch.setenv(PURE_PYTHON_VAR, "1")
    elif not c_core_available():
        pytest.skip("the C core cannot be built here (see flambeau.cuda_alloc._ccore.load_error)")
    return name


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a real CUDA GPU")
    config.addinivalue_line("markers", "own_cores: the test picks the allocator cores itself (run once)")


@pytest.fixture
def device() -> SimulatedDevice:
    return SimulatedDevice(capacity=1 << 30)


@pytest.fixture
def alloc(device: SimulatedDevice) -> CachingAllocator:
    return CachingAllocator(device, AllocatorConfig())
