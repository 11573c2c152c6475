"""Complex tensors on CUDA (Note [Complex on CUDA] in ``flambeau._kernels.cuda.complex``) against the CPU.

numba's simulator runs cmath as Python's, which raises at singular points where numpy returns inf or
NaN, so the values here are finite and away from them (on a GPU numba's cmath follows numpy's).
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._kernels.cuda.elementwise import COMPLEX_VARIANTS, UNARY

VALUES = [3 + 4j, -0.5j, 0.5 - 0.25j, -0.3 + 0.2j, 0.1 + 0.9j, -2.0 - 0.7j]


def _close(got, want):
    got = got.cpu()
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=1e-6)


COMPLEX_UNARY = sorted(n for n, (_, kinds) in UNARY.items() if "c" in kinds and hasattr(fl, n))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", COMPLEX_UNARY)
def test_unary_math_matches_the_cpu(name, dtype):
    z = fl.tensor(VALUES, dtype=getattr(fl, dtype))
    f = getattr(fl, name)
    _close(f(z.cuda()), f(z))


def test_every_complex_variant_has_an_operator_taking_complex():
    assert set(COMPLEX_VARIANTS) <= set(COMPLEX_UNARY)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "eq", "ne", "logical_and", "logical_xor"])
def test_binary_matches_the_cpu(name):
    z = fl.tensor(VALUES, dtype=fl.complex64)
    w = z.flip(0) * 0.5
    f = getattr(fl, name)
    _close(f(z.cuda(), w.cuda()), f(z, w))


def test_views_share_storage_on_cuda():
    z = fl.tensor(VALUES, dtype=fl.complex64).cuda()
    _close(z.real, z.cpu().real)
    _close(z.imag, z.cpu().imag)
    pairs = fl.view_as_real(z)
    _close(pairs, fl.view_as_real(z.cpu()))
    z.imag[1:3] = 0  # writes through the view reach z
    assert z.cpu().numpy()[1].imag == 0 and z.cpu().numpy()[0].imag == 4
    back = fl.view_as_complex(pairs[2:])
    _close(back, z.cpu()[2:])
    with pytest.raises(RuntimeError, match="stride divisible by 2"):
        fl.view_as_complex(fl.zeros(3, 3, device="cuda")[:, 1:])


def test_angle_conj_complex_polar_and_gradients_match_the_cpu():
    z = fl.tensor(VALUES, dtype=fl.complex128)
    r = fl.tensor([1.0, -2.0, 0.0, 3.5, -0.25, 2.0])
    for f in (fl.angle, fl.conj_physical, fl.conj):
        _close(f(z.cuda()), f(z))
    _close(fl.angle(r.cuda()), fl.angle(r))
    _close(fl.angle(r.int().cuda()), fl.angle(r.int()))
    _close(fl.complex(r.cuda(), r.flip(0).cuda()), fl.complex(r, r.flip(0)))
    _close(fl.polar(r.abs().cuda(), r.cuda()), fl.polar(r.abs(), r))
    for loss in (lambda t: (fl.polar(t.abs(), t) * (1 - 2j)).abs().sum(),
                 lambda t: fl.complex(t, t.exp()).exp().real.sum(), lambda t: fl.view_as_real(fl.complex(t, t)).sum()):
        a, b = r.clone().requires_grad_(), r.cuda().requires_grad_()
        loss(a).backward()
        loss(b).backward()
        _close(b.grad, a.grad)


def test_sums_means_and_products_match_the_cpu():
    rng = np.random.default_rng(1)

    def c(*shape):
        return fl.tensor((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64))

    z, A, B, v = c(3, 4, 5), c(2, 3, 4), c(2, 4, 5), c(4)
    for f in (lambda t: t.sum(), lambda t: t.sum(1), lambda t: t.mean((0, 2), keepdim=True),
              lambda t: t[:, ::2].sum(-1), lambda t: t.mT.mean(0)):
        _close(f(z.cuda()), f(z))
    with pytest.raises(RuntimeError, match="not implemented for 'ComplexFloat'"):
        z.cuda().prod()
    for f in (lambda a, b: a @ b, fl.bmm, lambda a, b: fl.einsum("bij,bjk->bik", a, b),
              lambda a, b: fl.addmm(a[0, :, :1], a[0], b[0][:, :1], beta=0.5, alpha=2)):
        _close(f(A.cuda(), B.cuda()), f(A, B))
    w = v.flip(0)
    for f in (fl.dot, fl.vdot, lambda x, y: A[0].to(x.device) @ x):
        _close(f(v.cuda(), w.cuda()), f(v, w))
