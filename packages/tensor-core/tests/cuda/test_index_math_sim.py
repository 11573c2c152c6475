"""The 64-bit index math of the CUDA kernels against the CPU (Note [Narrow index math] in the CUDA elementwise
kernels): launches of 2**31 elements or more address their operands with 64-bit divisions, fewer with 32-bit
ones. No test can allocate such tensors, so the bound is lowered to 0 for these: every launch takes the 64-bit
path, which must give what the 32-bit one gives (the other tests) and what the CPU gives. Simulator only: it
reads the bound when a kernel runs, a GPU when the kernel compiles."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

pytestmark = pytest.mark.cudasim(reason="the bound is read at run time by the simulator, compiled in on a GPU")
RNG = np.random.default_rng(5)


@pytest.fixture(params=["narrow", "wide"])
def index_math(request, monkeypatch):
    if request.param == "wide":
        from flambeau._kernels.cuda import _index_math, elementwise

        for module in (elementwise, _index_math):
            monkeypatch.setattr(module, "NARROW", 0)
    return request.param


def _pair(*shape):
    h = RNG.standard_normal(shape).astype(np.float32)
    return fl.tensor(h), fl.tensor(h, device="cuda")


def _close(got, want):
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_strided_elementwise(index_math):
    """A channel bias (broadcast), a transposed operand and a ternary op over 3-d shapes."""
    (xc, xd), (bc, bd) = _pair(2, 3, 5), _pair(3, 1)
    _close(xd + bd, xc + bc)
    _close(xd.transpose(0, 2).exp(), xc.transpose(0, 2).exp())
    _close(fl.where(xd > 0, xd.transpose(1, 2).transpose(1, 2), bd), fl.where(xc > 0, xc, bc))


def test_reductions_over_strided_dims(index_math):
    xc, xd = _pair(3, 4, 5)
    for dims in ((0, 2), 1, (1, 2)):
        _close(xd.sum(dims), xc.sum(dims))
    _close(xd.transpose(0, 2).amax(1), xc.transpose(0, 2).amax(1))


@pytest.mark.parametrize("norm", ["batch_norm", "layer_norm", "group_norm"])
def test_norms_forward_and_backward(index_math, norm):
    F = fl.nn.functional
    (xc, xd), (wc, wd), (bc, bd) = _pair(3, 4, 5), _pair(4), _pair(4)
    if norm == "layer_norm":
        (wc, wd), (bc, bd) = _pair(4, 5), _pair(4, 5)
    outs = []
    for x, w, b in ((xc, wc, bc), (xd, wd, bd)):
        for t in (x, w, b):
            t.requires_grad_(True)
        if norm == "batch_norm":
            y = F.batch_norm(x, None, None, w, b, True)
        elif norm == "layer_norm":
            y = F.layer_norm(x, (4, 5), w, b)
        else:
            y = F.group_norm(x, 2, w, b)
        (y * y.detach().cpu().to(x.device).cos()).sum().backward()
        outs.append((y, x.grad, w.grad, b.grad))
    for want, got in zip(*outs):
        _close(got, want)


def test_fill_cat_embedding_and_indexing(index_math):
    """The kernels addressing through ``_index_math``: a strided fill, cat along a middle dim, an embedding
    gather, an index_put and a gather."""
    xc, xd = _pair(3, 4, 5)
    yd = xd.clone()
    yd.transpose(0, 2).fill_(2.5)
    _close(yd, xc.clone().transpose(0, 2).fill_(2.5).transpose(0, 2))
    (ac, ad), (bc, bd) = _pair(3, 2, 5), _pair(3, 3, 5)
    _close(fl.cat([ad, bd.transpose(0, 2).transpose(0, 2)], 1), fl.cat([ac, bc], 1))
    parts = [_pair(2, j % 3 + 1, 3) for j in range(10)]  # more inputs than one launch takes (GROUP, 8)
    _close(fl.cat([d for _, d in parts], 1), fl.cat([c for c, _ in parts], 1))
    ic = fl.tensor(np.array([[0, 2], [3, 1]]))
    wc, wd = _pair(4, 6)
    _close(fl.nn.functional.embedding(ic.to("cuda"), wd), fl.nn.functional.embedding(ic, wc))
    gc = fl.tensor(np.array([[0, 4, 1], [2, 2, 3], [1, 0, 4]]))
    _close(xd[:, 1].gather(1, gc.to("cuda")), xc[:, 1].gather(1, gc))
    zc, zd = _pair(4, 3, 2)
    zc[ic] = 7.0
    zd[ic.to("cuda")] = 7.0
    _close(zd, zc)
