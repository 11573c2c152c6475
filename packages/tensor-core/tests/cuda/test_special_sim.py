"""CUDA kernels of the special functions (flambeau/_kernels/cuda/special.py) against the CPU kernels.

The random samples of every special operator run in ``test_op_samples_sim.py``; here: the edge
values (poles, 0, +-inf, NaN, tails), every polygamma order, integer and float16 inputs, strided
and broadcast operands. Tiny shapes: the simulator runs each GPU thread in Python.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import flambeau as fl

INF, NAN = math.inf, math.nan
EDGES = [-3.5, -2.0, -0.5, 0.0, 0.3, 2.5, 9.0, 12.0, 40.0, INF, -INF, NAN]
UNARY = ["gammaln", "digamma", "i0", "i0e", "i1", "i1e", "erfcx", "log_ndtr", "entr", "sinc", "bessel_j0", "bessel_j1"]


def _same(got, want, rtol=1e-12):
    assert got.device.type == "cuda" and got.dtype is want.dtype
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=rtol, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", UNARY)
def test_unary_edges_match_cpu(name):
    x = fl.tensor(EDGES, dtype=fl.float64)
    f = getattr(fl.special, name)
    _same(f(x.cuda()), f(x))


def test_ndtri_and_polygamma_match_cpu():
    p = fl.tensor([0.0, 1e-20, 0.1, 0.5, 0.97, 1.0, 1.5, NAN], dtype=fl.float64)
    _same(fl.special.ndtri(p.cuda()), fl.special.ndtri(p))
    x = fl.tensor([-2.5, 0.0, 0.25, 3.0, 15.0, INF], dtype=fl.float64)
    for n in (0, 1, 2, 5):
        _same(fl.polygamma(n, x.cuda()), fl.polygamma(n, x))


def test_binary_operands_scalars_and_broadcasting():
    q = fl.tensor([[0.5, 1.0, -1.5], [3.0, INF, NAN]], dtype=fl.float64)
    s = fl.tensor([2.0, 3.5, 2.0], dtype=fl.float64)
    _same(fl.special.zeta(s.cuda(), q.cuda()), fl.special.zeta(s, q))
    _same(fl.special.zeta(2.0, q.cuda()), fl.special.zeta(2.0, q))
    y = fl.tensor([[-1.0, NAN, 0.5], [2.0, -3.0, 0.0]], dtype=fl.float64)
    x = fl.tensor([0.0, 1.0, 2.0], dtype=fl.float64)
    _same(fl.special.xlog1py(x.cuda(), y.cuda()), fl.special.xlog1py(x, y))
    a = fl.tensor([0.0, 0.5, 2.0, 30.0, INF, -1.0], dtype=fl.float64)
    z = fl.tensor([1.0, 0.3, 4.0, 25.0, 1.0, 1.0], dtype=fl.float64)
    _same(fl.igamma(a.cuda(), z.cuda()), fl.igamma(a, z))
    _same(fl.igammac(a.cuda(), z.cuda()), fl.igammac(a, z))


def test_float32_float16_int_and_strided_inputs():
    x = fl.tensor([[0.5, 1.5, 3.0], [4.0, 7.5, 9.5]])
    _same(fl.digamma(x.cuda().T), fl.digamma(x.T), rtol=1e-6)
    h = x.to(fl.float16)
    _same(fl.special.i1e(h.cuda()), fl.special.i1e(h), rtol=1e-3)
    n = fl.tensor([1, 2, 3])
    _same(fl.lgamma(n.cuda()), fl.lgamma(n), rtol=1e-6)
    t = x.cuda()
    assert t.polygamma_(1) is t
    _same(t, fl.polygamma(1, x), rtol=1e-6)
