"""The fused CUDA optimizer and gradient-clipping kernels compile to PTX for sm_80 and sm_90 without a GPU (tier 2).

Every optimizer family's multi-tensor kernel (the GPU path, which the simulator cannot run: Note [Multi-tensor
CUDA updates]) for float32 on both architectures, and its per-parameter kernel for float64;
``FLAMBEAU_PTX_FULL=1`` compiles every (family, kernel, dtype, arch). clip_grad_norm_'s multi-tensor kernels
(Note [Fused gradient clipping]) for both dtypes and architectures; their per-gradient kernels, which share
their device functions, run under the simulator (``cuda/test_clip_grad_sim.py``).
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
    from flambeau.nn.utils import _cuda_clip
    from flambeau.optim import _cuda_kernels

    yield {label: (fn, sig) for label, fn, sig in _cuda_kernels.ptx_cases() + _cuda_clip.ptx_cases()}
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


@pytest.mark.parametrize("kernel", ["partials_multi", "finish", "scale_multi"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)])
def test_clip_kernels_compile(cases, kernel, dtype, cc):
    fn, sig = cases[f"clip:{kernel}:{dtype}"]
    ptx, _ = ncuda.compile_ptx(fn, sig, cc=cc)
    assert ".entry" in ptx and "st.global" in ptx, (kernel, dtype)
