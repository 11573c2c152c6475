"""The fused CUDA optimizer kernels compile to PTX for sm_80 and sm_90 without a GPU (tier 2).

Every family's multi-tensor kernel (the GPU path, which the simulator cannot run: Note [Multi-tensor
CUDA updates]) for float32 on both architectures, and its per-parameter kernel for float64;
``FLAMBEAU_PTX_FULL=1`` compiles every (family, kernel, dtype, arch).
"""

from __future__ import annotations

import os
import types as pytypes

import pytest

numba = pytest.importorskip("numba")
ncuda = pytest.importorskip("numba.cuda")

pytestmark = pytest.mark.skipif(bool(numba.config.ENABLE_CUDASIM),
                                reason="compile_ptx needs numba-cuda without the simulator")
FULL = os.environ.get("FLAMBEAU_PTX_FULL") == "1"


@pytest.fixture(scope="module")
def cases():
    import numba.cuda.dispatcher as disp

    saved = disp.get_current_device
    if not ncuda.is_available():  # device functions compile for the current device: fake one
        disp.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(8, 0))
    from flambeau.optim import _cuda_kernels

    yield {label: (fn, sig) for label, fn, sig in _cuda_kernels.ptx_cases()}
    disp.get_current_device = saved


FAMILIES = ["sgd", "adam", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "radam"]


@pytest.mark.parametrize("family", FAMILIES)
def test_family_compiles(cases, family):
    wanted = [(f"optim:{family}:multi:float32", (8, 0)), (f"optim:{family}:multi:float32", (9, 0)),
              (f"optim:{family}:each:float64", (8, 0))]
    if FULL:
        wanted = [(f"optim:{family}:{kind}:{t}", cc) for kind in ("multi", "each") for t in ("float32", "float64")
                  for cc in ((8, 0), (9, 0))]
    for label, cc in wanted:
        fn, sig = cases[label]
        ptx, _ = ncuda.compile_ptx(fn, sig, cc=cc)
        assert "st.global" in ptx or "st." in ptx, label
