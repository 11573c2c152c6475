"""bfloat16 on CUDA (Note [bfloat16 on CUDA] in ``flambeau._kernels.cuda.bfloat16``).

numba cannot type a bfloat16 array on a GPU, but its simulator runs kernels as Python and would
accept one; so every test here runs with a spy on the simulator's launches that fails on any
bfloat16 argument: what passes here launches the same kernels on a GPU. The conversions are checked
bit for bit against ml_dtypes; every operator with a CUDA kernel and float32 samples is run on
bfloat16 copies of them, on CUDA and on the CPU (which computes bfloat16 in float32 too).
"""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _op_samples import bfloat16_copy, call_sample, compare, flambeau_call, float32_copy, map_structure  # noqa: E402

import flambeau as fl  # noqa: E402
from flambeau._ops._registry import OPS  # noqa: E402
from flambeau._ops._samples import generate  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(autouse=True)
def no_bfloat16_launch(monkeypatch):
    """Fail any kernel launch that receives a bfloat16 array or scalar (numba could not type it)."""
    from numba.cuda.simulator import kernel as sim_kernel

    call = sim_kernel.FakeCUDAKernel.__call__

    def checked(self, *args):
        if not self._device:
            for i, a in enumerate(args):
                if getattr(a, "dtype", None) == BF16:
                    raise AssertionError(f"kernel {self.fn.__name__} launched with a bfloat16 argument at {i}")
        return call(self, *args)

    monkeypatch.setattr(sim_kernel.FakeCUDAKernel, "__call__", checked)


def _edge_patterns() -> np.ndarray:
    """Every bfloat16 bit pattern of the signs, the top and bottom exponents and a sweep between."""
    rng = np.random.default_rng(0)
    bits = np.concatenate([np.arange(0, 0x0100), np.arange(0x7E00, 0x8100), np.arange(0xFE00, 0x10000),
                           rng.integers(0, 0x10000, 512)])
    return bits.astype(np.uint16)


def test_widen_is_exact_for_every_kind_of_bit_pattern():
    host = _edge_patterns().view(BF16)
    got = fl.tensor(host, device="cuda").float().cpu().numpy()
    want = host.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))  # -0.0 too


def test_narrow_rounds_to_nearest_even_as_ml_dtypes():
    rng = np.random.default_rng(1)
    ties = (np.arange(0x3F800000, 0x3F800000 + 0x80000, 0x8000, dtype=np.uint32)).view(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 3.4e38, -3.4e38, 1e-40, -1e-45,
                        1.0039062, 1.0117188, 65504.0], np.float32)
    host = np.concatenate([ties, special, rng.standard_normal(400).astype(np.float32) * 1e3,
                           rng.integers(0, 2**32, 400, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    got = fl.tensor(host, device="cuda").to(fl.bfloat16).cpu().numpy()
    want = host.astype(BF16)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint16), want[ok].view(np.uint16))


def test_fill_copy_and_strided_views_move_bits():
    x = fl.full((3, 4), 1.7, dtype=fl.bfloat16, device="cuda")
    assert x.cpu().numpy().view(np.uint16)[0, 0] == np.array(1.7, BF16).view(np.uint16)
    src = fl.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), dtype=fl.bfloat16, device="cuda")
    x.t().copy_(src.t())  # strided on both sides: bits between two bfloat16 views
    np.testing.assert_array_equal(x.cpu().float().numpy(), np.arange(12).reshape(3, 4))
    x[:, 1].copy_(fl.tensor([0.1, 0.2, 0.3], dtype=fl.float64, device="cuda"))  # rounded once into a view
    np.testing.assert_array_equal(x.cpu().numpy()[:, 1], np.array([0.1, 0.2, 0.3]).astype(BF16))
    assert x.t().contiguous().dtype is fl.bfloat16


def test_inplace_and_out_arguments_write_the_callers_array():
    a = fl.tensor([1.0, 2.0, 3.0], dtype=fl.bfloat16, device="cuda")
    view = a[1:]
    view.mul_(1.5)  # an in-place kernel writes through the view
    np.testing.assert_array_equal(a.cpu().float().numpy(), [1.0, 3.0, 4.5])
    idx = fl.tensor([0, 2], device="cuda")
    a.index_add_(0, idx, fl.tensor([10.0, 20.0], dtype=fl.bfloat16, device="cuda"))
    np.testing.assert_array_equal(a.cpu().float().numpy(), [11.0, 3.0, 24.5])
    a.normal_()
    assert a.dtype is fl.bfloat16 and np.isfinite(a.cpu().float().numpy()).all()


def test_results_keep_the_dtype_torch_gives():
    a = fl.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=fl.bfloat16, device="cuda")
    assert (a @ a).dtype is fl.bfloat16
    assert a.sum(dtype=fl.float32).dtype is fl.float32
    assert (a < 2).dtype is fl.bool
    assert a.argmax().dtype is fl.int64
    assert (a + fl.ones(2, device="cuda")).dtype is fl.float32  # promotion, as torch
    assert fl.cat([a, a.float()]).dtype is fl.float32
    m = fl.nn.Linear(2, 3).to("cuda", fl.bfloat16)
    out = m(a)
    out.float().sum().backward()
    assert out.dtype is fl.bfloat16 and m.weight.grad.dtype is fl.bfloat16


def _cuda_ops_with_float32_samples():
    return [pytest.param(name, id=name) for name, op in sorted(OPS.items())
            if op.info is not None and "cuda" in op.kernels and "float32" in op.info.dtypes]


@pytest.mark.parametrize("name", _cuda_ops_with_float32_samples())
def test_operator_on_bfloat16_matches_the_cpu(name):
    """The first two float32 samples, as bfloat16: CUDA gives the CPU's values (both compute in
    float32 and round once, so they differ by at most a bfloat16 rounding of float32 noise)."""
    op = OPS[name]
    if op.info.nondeterministic:
        pytest.skip(f"{name} is random: its values are compared in the random tests")
    call = flambeau_call(op)
    ran = 0
    for s in generate(op, "cpu", fl.float32)[:2]:
        s.input, s.args, s.kwargs = (map_structure(bfloat16_copy, v) for v in (s.input, s.args, s.kwargs))
        try:
            want = call_sample(call, s)
        except (RuntimeError, TypeError, NotImplementedError, ValueError) as e:  # the CPU refuses bfloat16:
            with pytest.raises(type(e)):  # so does CUDA (before or in a kernel)
                call_sample(call, s, lambda x: x.to("cuda") if isinstance(x, fl.Tensor) else x)
            continue
        got = call_sample(call, s, lambda x: x.to("cuda") if isinstance(x, fl.Tensor) else x)
        dtypes = map_structure(lambda t: t.dtype if isinstance(t, fl.Tensor) else None, got)
        assert dtypes == map_structure(lambda t: t.dtype if isinstance(t, fl.Tensor) else None, want), name
        compare(map_structure(float32_copy, got), map_structure(float32_copy, want), rtol=2e-2, atol=2e-2,
                what=name)
        ran += 1
    if not ran:
        pytest.skip(f"{name}: the CPU takes none of its samples in bfloat16")


def test_nextafter_steps_in_bfloat16_bits_as_ml_dtypes():
    """nextafter cannot go through float32 (a float32 step rounds back): it runs on the bit patterns."""
    rng = np.random.default_rng(2)
    edges = np.array([0, 0x8000, 1, 0x8001, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0xBF80], np.uint16)
    a = np.concatenate([edges, rng.integers(0, 0x10000, 300).astype(np.uint16)]).view(BF16)
    b = np.roll(a, 1)
    b[:11] = np.array([1, -1, 0, 0, np.inf, -np.inf, 0, 0, 1, 2, -2], BF16)
    want = np.nextafter(a, b)
    got = fl.nextafter(fl.tensor(a, device="cuda"), fl.tensor(b, device="cuda")).cpu().numpy()
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def test_a_bfloat16_model_trains_on_cuda_as_on_the_cpu():
    """Forward, backward and Adam's update on bfloat16 parameters, with no bfloat16 launch."""
    fl.manual_seed(0)
    model = fl.nn.Sequential(fl.nn.Linear(4, 6), fl.nn.ReLU(), fl.nn.LayerNorm(6), fl.nn.Linear(6, 3))
    on_cpu = fl.nn.Sequential(fl.nn.Linear(4, 6), fl.nn.ReLU(), fl.nn.LayerNorm(6), fl.nn.Linear(6, 3))
    on_cpu.load_state_dict(model.state_dict())
    model.to("cuda", fl.bfloat16)
    on_cpu.to(dtype=fl.bfloat16)
    opts = [fl.optim.Adam(m.parameters(), lr=1e-2) for m in (model, on_cpu)]
    x, y = fl.randn(5, 4).to(fl.bfloat16), fl.tensor([0, 2, 1, 1, 0])
    for _ in range(3):
        for m, opt, dev in ((model, opts[0], "cuda"), (on_cpu, opts[1], "cpu")):
            opt.zero_grad()
            fl.nn.functional.cross_entropy(m(x.to(dev)).float(), y.to(dev)).backward()
            opt.step()
    for p, q in zip(model.parameters(), on_cpu.parameters()):
        assert p.dtype is fl.bfloat16
        np.testing.assert_allclose(p.detach().cpu().float().numpy(), q.detach().float().numpy(), rtol=2e-2, atol=2e-2)
