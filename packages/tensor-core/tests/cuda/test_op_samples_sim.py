"""Every operator with a CUDA kernel and samples: the CUDA result equals the CPU result.

Table-driven (Note [Sample inputs] in ``flambeau._ops._registry``): the samples an operator
declares next to its declaration run on the CPU and, moved to the device, on CUDA; a new CUDA
kernel is tested here as soon as it registers. Runs under numba's simulator
(``NUMBA_ENABLE_CUDASIM=1``) and on a GPU.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _op_samples import call_sample, compare, flambeau_call, leaves, map_structure, ops_with_samples, run_checks  # noqa: E402

import flambeau as fl  # noqa: E402
from flambeau._ops._registry import OPS  # noqa: E402
from flambeau._ops._samples import generate  # noqa: E402


def _to_cuda(x):
    return x.to("cuda") if isinstance(x, fl.Tensor) else x


@pytest.mark.parametrize("name, dtype", ops_with_samples(lambda op: "cuda" in op.kernels))
def test_cuda_matches_cpu(name, dtype):
    op = OPS[name]
    info = op.info
    d = getattr(fl, dtype)
    call = flambeau_call(op)

    def body(s):
        want = call_sample(call, s)
        got = call_sample(call, s, _to_cuda)
        for t in leaves(got):
            if isinstance(t, fl.Tensor):
                assert t.device.type == "cuda", f"{name}: an output is on {t.device}"
        if info.nondeterministic:
            want = map_structure(lambda t: t.shape if isinstance(t, fl.Tensor) else t, want)
            got = map_structure(lambda t: t.shape if isinstance(t, fl.Tensor) else t, got)
        compare(got, want, rtol=info.rtol, atol=info.atol, dtype=d)

    run_checks(op, "cuda", generate(op, "cpu", d), body, dtype)
