"""Helpers of the table-driven operator tests (Note [Sample inputs] in ``flambeau._ops._registry``).

Shared by ``test_op_samples.py`` (CPU against PyTorch, gradcheck) and
``cuda/test_op_samples_sim.py`` (CUDA against CPU): walking the operator table, calling an
operator on a sample, comparing results, and running a check over every sample of an operator
with its declared expected failures.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops._registry import OPS


def ops_with_samples(pred=lambda op: True):
    """``(name, dtype name)`` pairs for every operator with samples for which ``pred(op)`` holds."""
    return [pytest.param(name, d, id=f"{name}-{d}")
            for name, op in sorted(OPS.items()) if op.info is not None and pred(op)
            for d in op.info.dtypes]


def flambeau_call(op):
    info = op.info
    if info.call is not None:
        return info.call
    if op.fn is not None:
        return op.fn
    name = op.name
    return lambda input, *args, **kwargs: getattr(input, name)(*args, **kwargs)


def map_structure(fn, x):
    """Apply ``fn`` to every leaf of nested lists, tuples and dicts."""
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(map_structure(fn, y) for y in x))
    if isinstance(x, (list, tuple)):
        return type(x)(map_structure(fn, y) for y in x)
    if isinstance(x, dict):
        return {k: map_structure(fn, v) for k, v in x.items()}
    return fn(x)


def leaves(x):
    out = []
    map_structure(out.append, x)
    return out


def call_sample(fn, sample, convert=lambda x: x):
    conv = lambda x: map_structure(convert, x)  # noqa: E731
    return fn(conv(sample.input), *conv(sample.args), **conv(sample.kwargs))


def to_numpy(t) -> np.ndarray:
    return np.array(t.detach().cpu().numpy(), copy=True)


def compare(got, want, *, rtol=None, atol=None, dtype=None, what="result"):
    """Compare a flambeau result with a torch or flambeau one: values, dtype and shape."""
    import torch

    if rtol is None and atol is None and dtype is not None and dtype.name == "float32":
        rtol, atol = 1e-5, 1e-5  # flambeau's float32 kernels may sum in a different order than torch
    elif (rtol is None) != (atol is None):
        rtol, atol = rtol or 0.0, atol or 0.0
    if isinstance(want, (torch.Tensor, fl.Tensor)):
        assert isinstance(got, fl.Tensor), f"{what}: expected a tensor, got {type(got).__name__}"
        g = torch.from_numpy(to_numpy(got))
        w = want.detach() if isinstance(want, torch.Tensor) else torch.from_numpy(to_numpy(want))
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True, check_stride=False,
                                   msg=lambda m: f"{what}: {m}")
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)), f"{what}: expected a sequence, got {type(got).__name__}"
        assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            compare(g, w, rtol=rtol, atol=atol, dtype=dtype, what=f"{what}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=rtol or 1e-7, abs=atol or 1e-7, nan_ok=True), what
    else:
        assert got == want, f"{what}: {got!r} != {want!r}"


def run_checks(op, check: str, samples, body, dtype: str = ""):
    """Run ``body(sample)`` for every sample; honour ``op.info.xfail`` for ``check``.

    Unexpected failures fail the test (all of them listed); a sample listed as an expected failure
    that passes fails it too; expected failures alone make the test xfail with their reasons.
    """
    info = op.info
    failed, expected, passed_listed, ran = [], [], [], 0
    for s in samples:
        reason = info.expected_failure(check, s, dtype)
        try:
            ran += body(s) is not False
        except Exception as e:  # noqa: BLE001 - reported below with the sample
            if reason is None:
                failed.append(f"{s!r}: {type(e).__name__}: {str(e)[:800]}")
            else:
                expected.append(f"{s!r}: {reason}")
        else:
            if reason is not None:
                passed_listed.append(f"{s!r} (listed: {reason})")
    if failed:
        pytest.fail(f"{op.name} [{check}]: {len(failed)} sample(s) failed:\n" + "\n".join(failed), pytrace=False)
    if passed_listed:
        pytest.fail(f"{op.name} [{check}]: listed as expected failures but pass (remove them from xfail):\n"
                    + "\n".join(passed_listed), pytrace=False)
    if expected:
        pytest.xfail(f"{op.name} [{check}]: " + "; ".join(expected))
    if not ran:
        pytest.skip(f"{op.name} [{check}]: no applicable sample")


def bfloat16_copy(x):
    """A float32 tensor as bfloat16 (detached); anything else as it is (the bfloat16 walks' samples)."""
    return x.detach().to(fl.bfloat16) if isinstance(x, fl.Tensor) and x.dtype is fl.float32 else x


def float32_copy(x):
    """A bfloat16 tensor as float32 (``compare`` goes through torch.from_numpy, which takes no bfloat16)."""
    return x.float() if isinstance(x, fl.Tensor) and x.dtype is fl.bfloat16 else x
