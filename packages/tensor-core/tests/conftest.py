"""Shared test set-up of flambeau-tensor-core.

- hypothesis: no deadline (the first call of a numba kernel compiles it, which takes seconds and
  says nothing about the code under test); in CI (``CI`` set) examples are derandomized so a red
  run can be reproduced from the log.
- ``rng``: a seeded numpy generator for test data.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("dev"), derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def rng() -> np.random.Generator:
    """A numpy generator with a fixed seed, fresh for each test."""
    return np.random.default_rng(0)

