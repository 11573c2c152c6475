"""grid_sampler_2d's and grid_sampler_3d's CUDA kernels against torch (numba's simulator; also runs on a GPU).

Every interpolation x padding mode x align_corners (2-D and 3-D) for the forward and for the backward (atomic
scatter into grad_input, grad_grid per point), float16 computed in float32, and the PTX of both
kernels for sm_80 / sm_90 where a CUDA compiler is present. Shapes are tiny: the simulator runs every
thread in Python. The reference is torch's CPU kernel, not flambeau's: compiling the numba CPU
kernels would cost this file more than all its simulated launches. The last test runs the sparse
COO composites (``flambeau._sparse``: existing operators, no kernels of their own) on CUDA.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)
COMBOS = list(itertools.product((0, 1, 2), (0, 1, 2), (False, True)))


def _inputs(dtype=np.float64):
    x = RNG.standard_normal((1, 2, 3, 3)).astype(dtype)
    g = RNG.uniform(-1.3, 1.3, (1, 2, 2, 2)).astype(dtype)
    go = RNG.standard_normal((1, 2, 2, 2)).astype(dtype)
    return x, g, go


def _check_cuda_against_torch(nd, x, g, go, mode, pad, align):
    """grid_sampler_{nd}d and its backward on 'cuda' equal torch's (float64, to rounding)."""
    fwd, bwd = getattr(fl, f"grid_sampler_{nd}d"), getattr(fl, f"grid_sampler_{nd}d_backward")
    want = getattr(torch, f"grid_sampler_{nd}d")(torch.tensor(x), torch.tensor(g), mode, pad, align)
    got = fwd(fl.tensor(x).to("cuda"), fl.tensor(g).to("cuda"), mode, pad, align)
    assert got.device.type == "cuda" and got.dtype is fl.float64
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    wants = getattr(torch.ops.aten, f"grid_sampler_{nd}d_backward")(torch.tensor(go), torch.tensor(x),
                                                                    torch.tensor(g), mode, pad, align, [True, True])
    gots = bwd(fl.tensor(go).to("cuda"), fl.tensor(x).to("cuda"), fl.tensor(g).to("cuda"), mode, pad, align)
    for got, want in zip(gots, wants):
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode,pad,align", COMBOS)
def test_grid_sampler_2d_forward_backward_match_torch(mode, pad, align):
    _check_cuda_against_torch(2, *_inputs(), mode, pad, align)


@pytest.mark.parametrize("mode,pad,align", [c for c in COMBOS if c[0] != 2])
def test_grid_sampler_3d_forward_backward_match_torch(mode, pad, align):
    x = RNG.standard_normal((1, 2, 2, 3, 2))
    g = RNG.uniform(-1.3, 1.3, (1, 2, 1, 2, 3))
    go = RNG.standard_normal((1, 2, 2, 1, 2))
    _check_cuda_against_torch(3, x, g, go, mode, pad, align)


def test_grid_sampler_2d_float16_and_autograd():
    x, g, _ = _inputs(np.float16)
    want = torch.grid_sampler_2d(torch.tensor(x).float(), torch.tensor(g).float(), 0, 0, False)
    got = fl.grid_sampler_2d(fl.tensor(x).to("cuda"), fl.tensor(g).to("cuda"), 0, 0, False)
    assert got.dtype is fl.float16
    np.testing.assert_allclose(got.cpu().numpy().astype(np.float32), want.numpy(), rtol=2e-3, atol=2e-3)

    x, g, _ = _inputs(np.float32)
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
    (torch.grid_sampler_2d(xt, gt, 2, 2, True) ** 2).sum().backward()
    xs = fl.tensor(x).to("cuda").requires_grad_()
    gs = fl.tensor(g).to("cuda").requires_grad_()
    (fl.grid_sampler_2d(xs, gs, 2, 2, True) ** 2).sum().backward()
    assert xs.grad.device.type == "cuda"
    np.testing.assert_allclose(xs.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gs.grad.cpu().numpy(), gt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_grid_sampler_2d_kernels_compile_to_ptx():
    pytest.importorskip("numba.cuda")
    from flambeau._kernels.cuda.resample import ptx_cases

    cases = [c for c in ptx_cases() if c[0].startswith("grid_sampler")]
    assert len(cases) == 8
    try:
        from numba.cuda import compile_ptx
    except ImportError:
        pytest.skip("numba.cuda.compile_ptx is unavailable")
    from numba.core import config

    if config.ENABLE_CUDASIM:
        pytest.skip("PTX needs the real CUDA target (tests/test_cuda_ptx.py compiles every ptx_case)")
    for _, fn, sig in cases:
        for cc in ((8, 0), (9, 0)):
            ptx, _ = compile_ptx(fn, sig, cc=cc)
            assert "atom" in ptx or "st.global" in ptx


def test_sparse_coo_composites_run_on_cuda():
    """Sparse COO on CUDA runs on existing operators (coalesce, to_dense, sparse.mm and its gradients)."""
    import flambeau.sparse  # noqa: F401
    from flambeau._sparse import sparse_coo_tensor

    idx = [[0, 1, 1, 0], [2, 0, 2, 2]]
    val = np.array([3.0, 4.0, 5.0, -1.0])
    d = RNG.standard_normal((3, 2))
    st = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), (2, 3), check_invariants=True)
    s = sparse_coo_tensor(idx, val, (2, 3), device="cuda", requires_grad=True)
    assert s.device.type == "cuda" and s._indices().device.type == "cuda"
    c = s.coalesce()
    np.testing.assert_array_equal(c.indices().cpu().numpy(), st.coalesce().indices().numpy())
    np.testing.assert_allclose(s.to_dense().detach().cpu().numpy(), st.to_dense().numpy())
    dd = fl.tensor(d).to("cuda").requires_grad_()
    out = fl.sparse.mm(s, dd)
    np.testing.assert_allclose(out.detach().cpu().numpy(), (st @ torch.tensor(d)).numpy(), rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(dd.grad.cpu().numpy(), (st.t() @ torch.ones(2, 2, dtype=torch.float64)).numpy(),
                               rtol=1e-12)
    assert s.grad.is_sparse and s.grad.device.type == "cuda"
