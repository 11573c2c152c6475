"""Every operator's declared sample inputs against PyTorch, and gradcheck (Note [Sample inputs]).

The operator table is the list: an operator that declares samples next to its declaration
(``OP.samples(...)`` in ``flambeau/_ops/<family>.py``, or the defaults of the elementwise,
reduction and activation factories) is tested here with no change to this file.

- ``test_against_torch``: the CPU result equals ``torch.<name>`` (or the declared reference) on the
  same inputs, values and dtype;
- ``test_gradcheck``: finite differences agree with the derivative in float64;
- ``test_operators_without_samples``: the burn-down list of operators with a CPU kernel and no
  samples (xfails with the list while it is not empty).
"""

from __future__ import annotations

import functools
import math
import warnings

import pytest
import torch
from _op_samples import (
    bfloat16_copy,
    call_sample,
    compare,
    flambeau_call,
    float32_copy,
    leaves,
    map_structure,
    ops_with_samples,
    run_checks,
)

import flambeau as fl
from flambeau._ops._registry import OPS
from flambeau._ops._samples import generate


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _torch_attr(path: str):
    obj = torch
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


@functools.cache
def torch_reference(name: str):
    """The PyTorch callable operator ``name`` is compared with, or None."""
    ref = OPS[name].info.ref
    if ref is None or callable(ref):
        return ref
    if ref != "default":
        found = _torch_attr(ref)
        assert found is not None, f"{name}: reference torch.{ref} does not exist"
        return found
    for path in (name, f"nn.functional.{name}", f"special.{name}"):
        found = _torch_attr(path)
        if found is not None:
            return found
    if hasattr(torch.Tensor, name):
        return lambda input, *args, **kwargs: getattr(input, name)(*args, **kwargs)
    return None


def _to_torch(x):
    if isinstance(x, fl.Tensor):
        return torch.from_numpy(x.detach().numpy().copy())
    if isinstance(x, fl.dtype):
        return getattr(torch, x.name)
    if isinstance(x, fl.device):
        return torch.device(str(x))
    return x


@pytest.mark.parametrize("name, dtype", ops_with_samples())
def test_against_torch(name, dtype):
    op = OPS[name]
    info = op.info
    ref = torch_reference(name)
    if ref is None:
        pytest.skip(f"{name}: no PyTorch reference")
    d = getattr(fl, dtype)
    call = flambeau_call(op)

    def body(s):
        want = call_sample(ref, s, _to_torch)
        got = call_sample(call, s)
        if info.nondeterministic:
            want = map_structure(lambda t: t.shape if isinstance(t, torch.Tensor) else t, want)
            got = map_structure(lambda t: t.shape if isinstance(t, fl.Tensor) else t, got)
        compare(got, want, rtol=info.rtol, atol=info.atol, dtype=d)

    run_checks(op, "ref", generate(op, "cpu", d), body, dtype)


def _poisoned(x):
    """A copy of a floating tensor of three or more elements with inf, NaN, -inf and a value near float32's
    largest written in; anything else as it is."""
    if not (isinstance(x, fl.Tensor) and x.dtype.is_floating_point and x.numel() >= 3 and x.is_contiguous()):
        return x
    y = x.detach().clone()
    flat = y.view(-1)
    flat[0], flat[1], flat[-1] = math.inf, math.nan, -math.inf
    if flat.numel() > 3:
        flat[2] = 3e38
    return y.requires_grad_(x.requires_grad)


@pytest.mark.parametrize("name, dtype", [p for p in ops_with_samples() if p.values[1] == "float32"])
def test_non_finite_inputs_raise_no_numpy_warnings(name, dtype):
    """torch warns about no overflow, inf - inf or NaN; numpy does unless told not to (Note [Quiet floating-point
    errors] in the CPU elementwise kernels). Every operator's samples, with non-finite values written in, run
    with RuntimeWarnings as errors. An operator may refuse such input with an error (torch's linalg does)."""
    op = OPS[name]
    call = flambeau_call(op)
    for s in generate(op, "cpu", fl.float32):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            try:
                call_sample(call, s, _poisoned)
            except RuntimeWarning:
                raise
            except Exception:  # noqa: BLE001, S110 - refusing non-finite input is allowed; warning about it is not
                pass


def test_kernels_split_over_threads_raise_no_numpy_warnings():
    """The chunks a kernel hands to worker threads (``flambeau._parallel.run_chunks``) run in the caller's numpy
    error state too: a batched matrix product and a convolution of overflowing values, on two threads."""
    threads = fl.get_num_threads()
    fl.set_num_threads(2)
    try:
        a = fl.full((64, 128, 128), 1e30)
        x, w = fl.full((8, 16, 64, 64), 1e30), fl.full((16, 16, 3, 3), 1e30)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            assert math.isinf(fl.bmm(a, a)[0, 0, 0].item())
            assert math.isinf(fl.conv2d(x, w)[0, 0, 0, 0].item())
    finally:
        fl.set_num_threads(threads)


def _gradcheck_cases():
    def pred(op):
        g = op.info.gradcheck
        return (op.differentiable if g is None else g) and "float64" in op.info.dtypes

    return [p for p in ops_with_samples(pred) if p.values[1] == "float64"]


@pytest.mark.parametrize("name, dtype", _gradcheck_cases())
def test_gradcheck(name, dtype):
    from flambeau.autograd import gradcheck

    op = OPS[name]
    call = flambeau_call(op)

    def body(s):
        structure = (s.input, s.args, s.kwargs)
        ts = [t for t in leaves(structure) if isinstance(t, fl.Tensor) and t.requires_grad]
        if not ts:
            return False
        ids = {id(t): i for i, t in enumerate(ts)}

        def fn(*xs):
            inp, args, kwargs = map_structure(
                lambda t: xs[ids[id(t)]] if isinstance(t, fl.Tensor) and id(t) in ids else t, structure)
            out = call(inp, *args, **kwargs)
            return tuple(o for o in leaves(out) if isinstance(o, fl.Tensor))

        assert gradcheck(fn, tuple(ts))
        return True

    run_checks(op, "grad", generate(op, "cpu", fl.float64, True), body, dtype)


def test_operators_without_samples():
    """The burn-down list: operators with a CPU kernel that declare no samples yet."""
    missing = sorted(name for name, op in OPS.items() if "cpu" in op.kernels and op.info is None)
    with_samples = sum(op.info is not None for op in OPS.values())
    if missing:
        pytest.xfail(f"{len(missing)} operators with a CPU kernel have no samples "
                     f"({with_samples} of {len(OPS)} operators have): {', '.join(missing)}")


def _to_torch_bfloat16(x):
    if isinstance(x, fl.Tensor) and x.dtype is fl.bfloat16:  # numpy has no bfloat16 torch.from_numpy takes
        return torch.from_numpy(x.detach().float().numpy()).bfloat16()
    return _to_torch(x)


def _dtype_names(x):
    return map_structure(lambda t: str(t.dtype).split(".")[-1] if isinstance(t, (fl.Tensor, torch.Tensor)) else None, x)


@pytest.mark.parametrize("name", [p.values[0] for p in ops_with_samples() if p.values[1] == "float32"])
def test_bfloat16_against_torch(name):
    """The first float32 samples rounded to bfloat16: the result dtypes are torch's for bfloat16, and the
    values are the float32 result of the same (rounded) inputs rounded once (bfloat16 computes in
    float32, Note [bfloat16 through float32]); torch's own bfloat16 kernels round more often, some
    far more (its matrix_exp overflows), so they give the dtypes and float32 gives the values."""
    op = OPS[name]
    ref = torch_reference(name)
    if ref is None or op.info.nondeterministic:
        pytest.skip(f"{name}: no PyTorch reference" if ref is None else f"{name} is random")
    call = flambeau_call(op)
    ran = 0
    for s in generate(op, "cpu", fl.float32)[:3]:
        s.input, s.args, s.kwargs = (map_structure(bfloat16_copy, v) for v in (s.input, s.args, s.kwargs))
        try:
            want = call_sample(ref, s, _to_torch_bfloat16)
        except (RuntimeError, NotImplementedError, TypeError):
            continue  # torch has no bfloat16 kernel for it: no dtypes to hold ours to
        got = call_sample(call, s)
        assert _dtype_names(got) == _dtype_names(want), name
        exact = call_sample(call, s, float32_copy)
        compare(map_structure(float32_copy, got), exact, rtol=2e-2, atol=1e-2, what=name)  # composites round per step
        ran += 1
    if not ran:
        pytest.skip(f"{name}: torch takes none of its samples in bfloat16")
