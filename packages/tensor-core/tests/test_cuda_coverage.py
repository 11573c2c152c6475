"""Every operator with a CPU kernel has a CUDA kernel, or a documented reason why not (issue: every
operator on CUDA). The reasons live in one table, ``flambeau._kernels.cuda.NOT_ON_CUDA``, which the
operator reference of the docs prints."""

from __future__ import annotations

from flambeau._kernels.cuda import NOT_ON_CUDA
from flambeau._ops._registry import OPS


def test_every_cpu_kernel_has_a_cuda_kernel_or_a_reason():
    missing = sorted(name for name, op in OPS.items()
                     if "cpu" in op.kernels and "cuda" not in op.kernels and name not in NOT_ON_CUDA)
    assert not missing, f"operators with a CPU kernel and no CUDA kernel (add one, or a reason): {missing}"


def test_reasons_are_current():
    stale = sorted(name for name, reason in NOT_ON_CUDA.items()
                   if name not in OPS or "cuda" in OPS[name].kernels or "cpu" not in OPS[name].kernels
                   or not reason.strip())
    assert not stale, f"NOT_ON_CUDA lists operators that are not missing on CUDA (or gives no reason): {stale}"
