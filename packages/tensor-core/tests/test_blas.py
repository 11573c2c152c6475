"""numpy's BLAS under flambeau: OpenBLAS's idle spin shortened at import (Note [OpenBLAS's idle threads])."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROGRAM = """
import os, sys
if sys.argv[1] == "numpy-first":
    import numpy as np
    a = np.random.default_rng(0).standard_normal((300, 300))
    before = a @ a  # OpenBLAS's threads are running
import flambeau
import numpy as np
a = np.random.default_rng(0).standard_normal((300, 300))
assert np.allclose((a @ a) @ a, a @ (a @ a))  # the restarted threads compute correctly
print(os.environ.get("OPENBLAS_THREAD_TIMEOUT"))
"""


def _run(order: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    environ.update(env, OPENBLAS_NUM_THREADS="2")
    done = subprocess.run([sys.executable, "-c", _PROGRAM, order], env=environ, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("order", ["flambeau-first", "numpy-first"])
def test_import_shortens_openblas_spin_unless_the_user_chose(order):
    assert _run(order) == "4"
    assert _run(order, OPENBLAS_THREAD_TIMEOUT="20") == "20"
