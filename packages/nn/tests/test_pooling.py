"""Pooling layers (``flambeau/nn/modules/pooling.py``) and ``nn.functional`` pooling against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")
tnn = torch.nn
TF = torch.nn.functional


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def close(a, b, tol=1e-12):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def run_both(ours, ref, shape, rng, dtype=torch.float64):
    a = rng.permutation(int(np.prod(shape))).reshape(shape) / 10.0  # no ties: a unique maximum per window
    x = fl.from_numpy(a.astype(np.float32 if dtype == torch.float32 else np.float64)).requires_grad_(True)
    tx = torch.from_numpy(a).to(dtype).requires_grad_(True)
    out, tout = ours(x), ref(tx)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    if isinstance(tout, tuple):
        close(out[1], tout[1])
        out, tout = out[0], tout[0]
    close(out, tout, tol)
    g = rng.standard_normal(tuple(tout.shape))
    out.backward(fl.from_numpy(g.astype(np.float32 if dtype == torch.float32 else np.float64)))
    tout.backward(torch.from_numpy(g).to(dtype))
    close(x.grad, tx.grad, tol)


LAYERS = [
    ("MaxPool2d", (2,), {}, (2, 3, 8, 8)),
    ("MaxPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True), (2, 3, 9, 8)),
    ("MaxPool2d", ((3, 2),), dict(stride=(2, 1), dilation=(2, 1), return_indices=True), (3, 9, 8)),
    ("MaxPool1d", (3,), dict(stride=2, padding=1, return_indices=True), (2, 3, 11)),
    ("MaxPool1d", (2,), dict(ceil_mode=True), (3, 11)),
    ("AvgPool2d", (2,), {}, (2, 3, 8, 8)),
    ("AvgPool2d", (3,), dict(stride=2, padding=1, count_include_pad=False, ceil_mode=True), (2, 3, 9, 8)),
    ("AvgPool2d", ((3, 2),), dict(stride=1, padding=(1, 0), divisor_override=5), (3, 9, 8)),
    ("AvgPool1d", (3,), dict(stride=2, padding=1, count_include_pad=False), (2, 3, 11)),
    ("AvgPool1d", (4,), dict(ceil_mode=True), (3, 11)),
    ("AdaptiveAvgPool2d", (1,), {}, (2, 3, 8, 8)),
    ("AdaptiveAvgPool2d", ((3, None),), {}, (2, 3, 9, 7)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 11)),
    ("AdaptiveMaxPool2d", ((4, 3),), dict(return_indices=True), (2, 3, 9, 7)),
    ("AdaptiveMaxPool2d", (2,), {}, (3, 9, 7)),
    ("AdaptiveMaxPool1d", (5,), dict(return_indices=True), (2, 3, 11)),
    ("LPPool2d", (2, 3), dict(stride=2), (2, 3, 9, 8)),
    ("LPPool1d", (3, 2), {}, (2, 3, 11)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,args,kw,shape", LAYERS)
def test_layer_matches_torch(rng, name, args, kw, shape, dtype):
    ours, ref = getattr(nn, name)(*args, **kw), getattr(tnn, name)(*args, **kw)
    assert repr(ours) == repr(ref)
    if name.startswith("LP"):
        shape_rng = np.random.default_rng(1)
        a = shape_rng.uniform(0.5, 2.0, shape)
        x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
        out, tout = ours(x), ref(tx)
        close(out, tout, 1e-10)
        out.sum().backward()
        tout.sum().backward()
        close(x.grad, tx.grad, 1e-10)
        return
    run_both(ours, ref, shape, rng, dtype)


def test_layers_have_no_parameters_and_train_eval_agree(rng):
    m = nn.MaxPool2d(2)
    assert list(m.parameters()) == []
    x = fl.from_numpy(rng.standard_normal((1, 2, 4, 4)))
    a = m(x)
    m.eval()
    close(m(x), a)


@pytest.mark.parametrize("name,kw", [
    ("max_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("adaptive_avg_pool2d", dict(output_size=(3, 2))),
    ("adaptive_max_pool2d", dict(output_size=(3, 2))),
    ("max_pool1d", dict(kernel_size=3, stride=2)),
    ("avg_pool1d", dict(kernel_size=3, stride=2, padding=1)),
    ("adaptive_avg_pool1d", dict(output_size=3)),
])
def test_double_backward(rng, name, kw):
    shape = (2, 2, 7, 6) if name.endswith("2d") else (2, 2, 9)
    a = rng.permutation(int(np.prod(shape))).reshape(shape) / 10.0
    x = fl.from_numpy(a).requires_grad_(True)
    assert gradgradcheck(lambda t: getattr(F, name)(t, **kw), (x,))


def test_functional_names_and_indices(rng):
    assert F.max_pool2d is fl.max_pool2d and F.adaptive_avg_pool2d is fl.adaptive_avg_pool2d
    a = rng.standard_normal((2, 3, 9, 8))
    out, idx = F.max_pool2d_with_indices(fl.from_numpy(a), 3, 2, 1)
    ref, ridx = TF.max_pool2d_with_indices(torch.from_numpy(a), 3, 2, 1)
    close(out, ref)
    np.testing.assert_array_equal(idx.numpy(), ridx.numpy())
    out, idx = F.adaptive_max_pool2d_with_indices(fl.from_numpy(a), (4, 3))
    np.testing.assert_array_equal(idx.numpy(), TF.adaptive_max_pool2d_with_indices(torch.from_numpy(a), (4, 3))[1])
    out, idx = F.adaptive_max_pool1d_with_indices(fl.from_numpy(a[0]), 5)
    np.testing.assert_array_equal(idx.numpy(), TF.adaptive_max_pool1d_with_indices(torch.from_numpy(a[0]), 5)[1])
    out, idx = F.max_pool1d_with_indices(fl.from_numpy(a[0]), 3)
    np.testing.assert_array_equal(idx.numpy(), TF.max_pool1d_with_indices(torch.from_numpy(a[0]), 3)[1])


def test_errors_name_the_operator():
    with pytest.raises(RuntimeError, match="max_pool2d: non-empty 3D or 4D"):
        nn.MaxPool2d(2)(fl.zeros(4, 4))
    with pytest.raises(RuntimeError, match="Output size is too small"):
        nn.AvgPool2d(5)(fl.zeros(1, 2, 4, 4))
    with pytest.raises(RuntimeError, match=r"adaptive_avg_pool2d\(\): Expected 3D or 4D tensor"):
        nn.AdaptiveAvgPool2d(1)(fl.zeros(4, 4))
