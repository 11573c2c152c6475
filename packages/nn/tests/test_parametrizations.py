"""nn.utils.parametrizations (``flambeau/nn/utils/parametrizations.py``): weight_norm, spectral_norm and
orthogonal, and the matrix functions under them, against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
from flambeau.nn.utils import parametrizations as PZ
from flambeau.nn.utils.parametrizations import _householder_product, _matrix_exp

torch = pytest.importorskip("torch")
TPZ = torch.nn.utils.parametrizations

RNG = np.random.default_rng(10)


def twin(name, *args):
    """The same float64 layer in torch and flambeau, with torch's random parameters copied over."""
    theirs = getattr(torch.nn, name)(*args, dtype=torch.float64)
    ours = getattr(nn, name)(*args, dtype=fl.float64)
    ours.load_state_dict({k: fl.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def copy_state(ours, theirs):
    ours.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()})


def assert_same_state(ours, theirs, rtol=1e-12, atol=1e-13):
    sd, tsd = ours.state_dict(), theirs.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        assert tuple(sd[k].shape) == tuple(tsd[k].shape), k
        np.testing.assert_allclose(sd[k].numpy(), tsd[k].numpy(), rtol=rtol, atol=atol, err_msg=k)


def forward_backward(ours, theirs, shape):
    a = RNG.standard_normal(shape)
    y, ty = ours(fl.from_numpy(a)), theirs(torch.from_numpy(a))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-11, atol=1e-12)
    g = RNG.standard_normal(tuple(ty.shape))
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-11, err_msg=name)


# --- weight_norm ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("layer,args,shape", [("Linear", (4, 6), (3, 4)), ("Conv2d", (3, 4, 3), (2, 3, 5, 5))],
                         ids=["Linear", "Conv2d"])
@pytest.mark.parametrize("dim", [0, 1, None, -1, -2])
def test_weight_norm_matches_torch(layer, args, shape, dim):
    ours, theirs = twin(layer, *args)
    PZ.weight_norm(ours, dim=dim)
    TPZ.weight_norm(theirs, dim=dim)
    assert repr(ours) == repr(theirs).replace("torch.float64", "flambeau.float64")
    assert_same_state(ours, theirs)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-13)
    forward_backward(ours, theirs, shape)


def test_weight_norm_loads_the_legacy_keys():
    src = torch.nn.Linear(3, 5, dtype=torch.float64)
    with pytest.warns(FutureWarning):
        legacy = torch.nn.utils.weight_norm(src).state_dict()  # keys weight_g, weight_v
    assert "weight_g" in legacy
    ours = PZ.weight_norm(nn.Linear(3, 5, dtype=fl.float64))
    ours.load_state_dict({k: fl.from_numpy(v.numpy().copy()) for k, v in legacy.items()})
    np.testing.assert_allclose(ours.parametrizations.weight.original1.detach().numpy(), legacy["weight_v"].numpy())
    np.testing.assert_allclose(ours.weight.detach().numpy(), src.weight.detach().numpy(), rtol=1e-12)


# --- spectral_norm -------------------------------------------------------------------------------------
@pytest.mark.parametrize("layer,args,shape,kw", [
    ("Linear", (4, 6), (3, 4), {}), ("Linear", (5, 3), (2, 5), dict(n_power_iterations=3, eps=1e-6)),
    ("Conv2d", (3, 4, 3), (2, 3, 5, 5), {}), ("ConvTranspose2d", (3, 4, 2), (2, 3, 4, 4), {}),
    ("Conv1d", (2, 5, 3), (2, 2, 7), dict(dim=1))], ids=str)
def test_spectral_norm_matches_torch(layer, args, shape, kw):
    # seeded: 15 power iterations from an unlucky random u can stop short of the 2% asked below
    torch.manual_seed(0)
    fl.manual_seed(0)
    ours, theirs = twin(layer, *args)
    TPZ.spectral_norm(theirs, **kw)
    PZ.spectral_norm(ours, **kw)
    assert repr(ours) == repr(theirs).replace("torch.float64", "flambeau.float64")
    sn = ours.parametrizations.weight[0]
    # 15 power iterations at registration: the estimate u.W v approaches the largest singular value from
    # below (how close depends on the gap to the second one: within 10% for these shapes)
    w = theirs.parametrizations.weight.original.detach().numpy()
    mat = np.moveaxis(w, sn.dim, 0).reshape(w.shape[sn.dim], -1)
    sigma = np.linalg.svd(mat, compute_uv=False)[0]
    ours.eval()
    top = np.linalg.svd(np.moveaxis(ours.weight.detach().numpy(), sn.dim, 0).reshape(mat.shape), compute_uv=False)[0]
    estimate = float(fl.vdot(sn._u, fl.mv(fl.from_numpy(mat), sn._v)))
    assert 0.9 * sigma < estimate <= sigma * (1 + 1e-9)
    np.testing.assert_allclose(top, sigma / estimate, rtol=1e-9)  # the weight is divided by the estimate
    ours.train()
    # from torch's u and v (random at registration), every step must follow torch's
    copy_state(ours, theirs)
    for _ in range(3):
        forward_backward(ours, theirs, shape)
        assert_same_state(ours, theirs, rtol=1e-10, atol=1e-12)
        ours.zero_grad()
        theirs.zero_grad()
    ours.eval()
    theirs.eval()
    forward_backward(ours, theirs, shape)
    assert_same_state(ours, theirs, rtol=1e-10, atol=1e-12)


def test_spectral_norm_of_a_vector_and_errors():
    ours, theirs = twin("Linear", 3, 4)
    PZ.spectral_norm(ours, "bias")
    TPZ.spectral_norm(theirs, "bias")
    np.testing.assert_allclose(ours.bias.detach().numpy(), theirs.bias.detach().numpy(), rtol=1e-13)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive, but got n_power_iterations=0"):
        PZ.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\] but got 2\)"):
        PZ.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'w'"):
        PZ.spectral_norm(nn.Linear(2, 2), "w")


# --- orthogonal ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 5), (7, 3), (3, 7)], ids=str)
@pytest.mark.parametrize("orthogonal_map", [None, "matrix_exp", "householder"])
def test_orthogonal_matches_torch(shape, orthogonal_map):
    ours, theirs = twin("Linear", shape[1], shape[0])
    PZ.orthogonal(ours, orthogonal_map=orthogonal_map)
    torch.manual_seed(0)  # non-square: the random completion of the base
    TPZ.orthogonal(theirs, orthogonal_map=orthogonal_map)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == \
        ["bias", "parametrizations.weight.original", "parametrizations.weight.0.base"]
    # the first min(m, n) columns of the base are the orthogonalised weight (deterministic), so is the weight
    q, tq = ours.weight.detach().numpy(), theirs.weight.detach().numpy()
    np.testing.assert_allclose(q, tq, rtol=1e-10, atol=1e-12)
    k = min(shape)
    np.testing.assert_allclose(q @ q.T if shape[0] < shape[1] else q.T @ q, np.eye(k), atol=1e-12)
    # then from one random original and base, values and gradients follow torch's (the householder map
    # takes the signs of its columns from the integer part of the diagonal, -1 at registration: kept)
    x = RNG.standard_normal(shape) * 0.7
    np.fill_diagonal(x, -1.0)
    with torch.no_grad():
        theirs.parametrizations.weight.original.copy_(torch.from_numpy(x))
    copy_state(ours, theirs)
    forward_backward(ours, theirs, (4, shape[1]))
    w = ours.weight.detach().numpy()
    np.testing.assert_allclose(w @ w.T if shape[0] < shape[1] else w.T @ w, np.eye(k), atol=1e-12)


@pytest.mark.parametrize("shape", [(6, 6), (7, 3), (3, 7)], ids=str)
def test_orthogonal_householder_without_trivialization(shape):
    ours, theirs = twin("Linear", shape[1], shape[0])
    PZ.orthogonal(ours, orthogonal_map="householder", use_trivialization=False)
    TPZ.orthogonal(theirs, orthogonal_map="householder", use_trivialization=False)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert_same_state(ours, theirs, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-10, atol=1e-12)
    forward_backward(ours, theirs, (4, shape[1]))


def test_orthogonal_assignment_and_errors():
    m = PZ.orthogonal(nn.Linear(4, 4, dtype=fl.float64))
    q = np.linalg.qr(RNG.standard_normal((4, 4)))[0]
    m.weight = fl.from_numpy(q.copy())
    np.testing.assert_allclose(m.weight.detach().numpy(), q, atol=1e-12)
    with pytest.raises(ValueError, match=r"Expected a matrix or batch of matrices of shape"):
        m.weight = fl.zeros(3, 4, dtype=fl.float64)
    with pytest.raises(NotImplementedError, match="cayley"):
        PZ.orthogonal(nn.Linear(3, 3), orthogonal_map="cayley")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                                         "Got: qr"):
        PZ.orthogonal(nn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."):
        PZ.orthogonal(nn.Linear(3, 3), "bias")
    m = PZ.orthogonal(nn.Linear(3, 3), orthogonal_map="matrix_exp", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="It is not possible to assign to the matrix exponential"):
        m.weight = fl.eye(3)


def test_orthogonal_trains_and_stays_orthogonal():
    m = PZ.orthogonal(nn.Linear(5, 5))
    opt = fl.optim.Adam(m.parameters(), lr=0.05)
    x = fl.randn(16, 5)
    for _ in range(5):
        opt.zero_grad()
        (m(x) - 1).pow(2).mean().backward()
        opt.step()
    w = m.weight.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(w.T @ w, np.eye(5), atol=1e-5)


# --- the matrix functions --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (2, 7, 5), (6, 1), (9, 6), (3, 10, 10)], ids=str)
def test_householder_product_matches_torch(shape):
    a = RNG.standard_normal(shape)
    tau = RNG.uniform(0, 2, shape[:-2] + (shape[-1],))
    x, t = fl.from_numpy(a).requires_grad_(True), fl.from_numpy(tau).requires_grad_(True)
    tx, tt = torch.from_numpy(a).requires_grad_(True), torch.from_numpy(tau).requires_grad_(True)
    q, tq = _householder_product(x, t), torch.linalg.householder_product(tx, tt)
    np.testing.assert_allclose(q.detach().numpy(), tq.detach().numpy(), rtol=1e-12, atol=1e-13)
    g = RNG.standard_normal(shape)
    q.backward(fl.from_numpy(g))
    tq.backward(torch.from_numpy(g))
    # rounding differs from LAPACK's by up to ~3e-10 of the gradient's largest entry (300 random draws), so small
    # entries are compared against that scale, not their own
    for ours, ref in ((x.grad, tx.grad), (t.grad, tt.grad)):
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-10, atol=1e-9 * np.abs(ref.numpy()).max())


@pytest.mark.parametrize("n,norm", [(1, 0.3), (3, 0.1), (6, 2.0), (10, 9.0), (20, 40.0)])
def test_matrix_exp_matches_torch(n, norm):
    a = RNG.standard_normal((2, n, n))
    a *= norm / np.abs(a).sum(-2).max()
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    e, te = _matrix_exp(x), torch.matrix_exp(tx)
    scale = np.abs(te.detach().numpy()).max()
    np.testing.assert_allclose(e.detach().numpy(), te.detach().numpy(), rtol=0, atol=1e-13 * scale * max(1, norm))
    g = RNG.standard_normal(a.shape)
    e.backward(fl.from_numpy(g))
    te.backward(torch.from_numpy(g))
    gscale = np.abs(tx.grad.numpy()).max()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=0, atol=1e-12 * gscale * max(1, norm))
    # float32 against the float64 truth, as accurate as torch's float32
    truth = te.detach().numpy()
    err32 = np.abs(_matrix_exp(fl.from_numpy(a.astype(np.float32))).numpy() - truth).max()
    terr32 = np.abs(torch.matrix_exp(torch.from_numpy(a.astype(np.float32))).numpy() - truth).max()
    assert err32 <= max(4 * terr32, 1e-6 * scale)


@pytest.mark.parametrize("angle", [0.01, 0.049, 0.29, 1.0, 1.09, 2.9, 10.0, 123.0])
def test_matrix_exp_of_skew_matrices_is_the_rotation(angle):
    # exp([[0, t], [-t, 0]]) = [[cos t, sin t], [-sin t, cos t]]: a normal matrix, where the Taylor
    # remainder is as large as its bound (random matrices hide a too-low degree)
    a = np.zeros((2, 4, 4))
    for b, t in enumerate((angle, angle / 3)):
        a[b, 0, 1], a[b, 1, 0], a[b, 2, 3], a[b, 3, 2] = t, -t, 2 * t, -2 * t
    expected = np.zeros_like(a)
    for b, t in enumerate((angle, angle / 3)):
        for i, u in ((0, t), (2, 2 * t)):
            expected[b, i:i + 2, i:i + 2] = [[np.cos(u), np.sin(u)], [-np.sin(u), np.cos(u)]]
    # squaring s times multiplies the rounding error by about 2^s ~ the angle
    np.testing.assert_allclose(_matrix_exp(fl.from_numpy(a)).numpy(), expected, rtol=0, atol=4e-15 * max(1, angle))
    np.testing.assert_allclose(_matrix_exp(fl.from_numpy(a.astype(np.float32))).numpy(), expected, rtol=0,
                               atol=2e-6 * max(1, angle))


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "householder"])
@pytest.mark.parametrize("shape", [(3, 5, 4), (2, 4, 4)], ids=str)
def test_orthogonal_of_a_batch_of_matrices(orthogonal_map, shape):
    w = RNG.standard_normal(shape)

    def holder(lib):
        m = lib.nn.Module()
        m.w = lib.nn.Parameter(lib.from_numpy(w.copy()))
        return m

    ours, theirs = PZ.orthogonal(holder(fl), "w", orthogonal_map), TPZ.orthogonal(holder(torch), "w", orthogonal_map)
    q = ours.w.detach().numpy()
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(shape[-1]), q.shape[:-2] +
                                                                         (shape[-1],) * 2), atol=1e-12)
    if shape[-1] == shape[-2]:  # no random completion: the same matrices as torch
        np.testing.assert_allclose(q, theirs.w.detach().numpy(), rtol=1e-10, atol=1e-12)
    copy_state(ours, theirs)
    x = RNG.standard_normal(shape[:-1])
    with torch.no_grad():
        theirs.parametrizations.w.original.copy_(theirs.parametrizations.w.original + 0.3 * torch.randn(shape,
                                                 dtype=torch.float64).tril(-1))
    copy_state(ours, theirs)
    y, ty = (ours.w * fl.from_numpy(x)[..., None]).sum(), (theirs.w * torch.from_numpy(x)[..., None]).sum()
    y.backward()
    ty.backward()
    np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-12)
    np.testing.assert_allclose(ours.parametrizations.w.original.grad.numpy(),
                               theirs.parametrizations.w.original.grad.numpy(), rtol=1e-10, atol=1e-12)
