"""Fixtures of the cuda-alloc tests (the distribution is installed by tox/nox, alone or with the rest)."""

from __future__ import annotations

import pytest

from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice
from flambeau.cuda_alloc._config import AllocatorConfig


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a real CUDA GPU")


@pytest.fixture
def device() -> SimulatedDevice:
    return SimulatedDevice(capacity=1 << 30)


@pytest.fixture
def alloc(device: SimulatedDevice) -> CachingAllocator:
    return CachingAllocator(device, AllocatorConfig())
