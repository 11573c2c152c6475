"""Convolution layers (``flambeau/nn/modules/conv.py``) and ``nn.functional`` conv entries against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")
tnn = torch.nn

pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same.")



@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def copy_params(ours, ref):
    for (name, p), (rname, rp) in zip(ours.named_parameters(), ref.named_parameters()):
        assert name == rname
        assert tuple(p.shape) == tuple(rp.shape)
        with fl.no_grad():
            p.copy_(fl.from_numpy(rp.detach().numpy().copy()))


def close(a, b, dtype):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL[dtype])


def run_both(ours, ref, shape, dtype, rng, **call):
    """Forward and backward through both layers with copied parameters; compare outputs and every gradient."""
    copy_params(ours, ref)
    a = rng.standard_normal(shape)
    x = fl.from_numpy(a.astype(np.float32 if dtype == torch.float32 else np.float64)).requires_grad_(True)
    tx = torch.from_numpy(a).to(dtype).requires_grad_(True)
    out, tout = ours(x, **call), ref(tx, **call)
    close(out, tout, dtype)
    g = rng.standard_normal(tuple(tout.shape))
    out.backward(fl.from_numpy(g.astype(np.float32 if dtype == torch.float32 else np.float64)))
    tout.backward(torch.from_numpy(g).to(dtype))
    close(x.grad, tx.grad, dtype)
    for p, rp in zip(ours.parameters(), ref.parameters()):
        close(p.grad, rp.grad, dtype)


CONV2D = [
    ((3, 8, 3), {}, (2, 3, 9, 8)),
    ((3, 8, 3), dict(stride=2, padding=1), (2, 3, 9, 8)),
    ((4, 6, (3, 2)), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2, bias=False), (2, 4, 9, 8)),
    ((4, 8, 3), dict(padding=1, groups=4), (2, 4, 9, 8)),
    ((4, 4, 3), dict(stride=2, padding=1, groups=4), (2, 4, 9, 8)),
    ((5, 7, 1), {}, (2, 5, 6, 6)),
    ((3, 4, 4), dict(padding="same", dilation=2), (2, 3, 9, 8)),
    ((3, 4, 3), dict(padding="valid"), (3, 9, 8)),
    ((3, 4, 3), dict(padding=2, padding_mode="reflect"), (2, 3, 9, 8)),
    ((3, 4, 3), dict(padding=(1, 2), padding_mode="replicate", stride=2), (2, 3, 9, 8)),
    ((3, 4, 3), dict(padding=1, padding_mode="circular"), (3, 9, 8)),
    ((3, 4, 4), dict(padding="same", padding_mode="reflect"), (2, 3, 9, 8)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("args,kw,shape", CONV2D)
def test_conv2d_module_matches_torch(rng, args, kw, shape, dtype):
    ours = nn.Conv2d(*args, **kw, dtype=fl.float32 if dtype == torch.float32 else fl.float64)
    ref = tnn.Conv2d(*args, **kw, dtype=dtype)
    run_both(ours, ref, shape, dtype, rng)


CONV1D = [
    ((3, 8, 3), {}, (2, 3, 11)),
    ((4, 6, 3), dict(stride=2, padding=2, dilation=2, groups=2), (2, 4, 11)),
    ((4, 4, 5), dict(padding="same", groups=4, bias=False), (4, 11)),
    ((3, 4, 3), dict(padding=2, padding_mode="reflect"), (2, 3, 10)),
    ((3, 4, 3), dict(padding=1, padding_mode="circular", stride=2), (2, 3, 10)),
    ((3, 4, 3), dict(padding=1, padding_mode="replicate"), (3, 10)),
]


@pytest.mark.parametrize("args,kw,shape", CONV1D)
def test_conv1d_module_matches_torch(rng, args, kw, shape):
    run_both(nn.Conv1d(*args, **kw, dtype=fl.float64), tnn.Conv1d(*args, **kw, dtype=torch.float64), shape,
             torch.float64, rng)


CONVT2D = [
    ((3, 5, 3), {}, (2, 3, 4, 5)),
    ((3, 5, 3), dict(stride=2, padding=1, output_padding=1), (2, 3, 4, 5)),
    ((4, 6, (3, 2)), dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, bias=False), (2, 4, 4, 5)),
    ((4, 4, 3), dict(stride=2, groups=4, dilation=2), (2, 4, 4, 5)),
    ((3, 2, 2), dict(stride=2), (3, 4, 5)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("args,kw,shape", CONVT2D)
def test_conv_transpose2d_module_matches_torch(rng, args, kw, shape, dtype):
    ours = nn.ConvTranspose2d(*args, **kw, dtype=fl.float32 if dtype == torch.float32 else fl.float64)
    ref = tnn.ConvTranspose2d(*args, **kw, dtype=dtype)
    run_both(ours, ref, shape, dtype, rng)


def test_conv_transpose_output_size(rng):
    ours, ref = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, dtype=fl.float64), \
        tnn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, dtype=torch.float64)
    for size in ([8, 10], [2, 4, 7, 9], (7, 10)):
        run_both(ours, ref, (2, 3, 4, 5), torch.float64, rng, output_size=size)
    o1, r1 = nn.ConvTranspose1d(3, 4, 3, stride=3, dtype=fl.float64), tnn.ConvTranspose1d(3, 4, 3, stride=3,
                                                                                          dtype=torch.float64)
    run_both(o1, r1, (2, 3, 5), torch.float64, rng, output_size=[17])
    with pytest.raises(ValueError, match=r"requested an output size of \[12, 9\], but valid sizes range from "
                                         r"\[7, 9\] to \[8, 10\]"):
        ours(fl.zeros(2, 3, 4, 5, dtype=fl.float64), output_size=[12, 9])
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        ours(fl.zeros(2, 3, 4, 5, dtype=fl.float64), output_size=[12])


@pytest.mark.parametrize("kw", [{}, dict(stride=2, padding=1, output_padding=1, groups=3, dilation=2)])
def test_conv_transpose1d_module_matches_torch(rng, kw):
    run_both(nn.ConvTranspose1d(3, 6, 3, **kw, dtype=fl.float64), tnn.ConvTranspose1d(3, 6, 3, **kw,
                                                                                      dtype=torch.float64),
             (2, 3, 7), torch.float64, rng)


@pytest.mark.parametrize("make", [
    lambda m: m.Conv2d(3, 16, 3, padding=1), lambda m: m.Conv2d(4, 8, (3, 1), stride=2, groups=2, bias=False),
    lambda m: m.Conv1d(3, 6, 3, groups=3, padding="same", padding_mode="reflect"),
    lambda m: m.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1, dilation=2),
    lambda m: m.ConvTranspose1d(4, 2, 3, padding=1), lambda m: m.Conv2d(3, 3, 1, dilation=(2, 1), padding="valid"),
])
def test_repr_matches_torch(make):
    assert repr(make(nn)) == repr(make(tnn))


def test_init_matches_torch_distribution():
    fl.manual_seed(0)
    m = nn.Conv2d(16, 32, 3)
    fan_in = 16 * 9
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)) gives gain sqrt(1/3): bound sqrt(3)*gain/sqrt(fan_in)
    w = m.weight.detach().numpy()
    assert w.shape == (32, 16, 3, 3) and m.weight.requires_grad
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    b = m.bias.detach().numpy()
    assert np.abs(b).max() <= bound
    t = nn.ConvTranspose2d(16, 8, 3, groups=2)
    assert tuple(t.weight.shape) == (16, 4, 3, 3)
    fan_in_t = 4 * 9  # torch's fan_in is size(1) * receptive field, for transposed weights too
    assert np.abs(t.bias.detach().numpy()).max() <= 1 / math.sqrt(fan_in_t)
    assert np.abs(t.weight.detach().numpy()).max() <= 1 / math.sqrt(fan_in_t)


def test_parameters_state_dict_and_dtype():
    m = nn.Conv2d(3, 4, 3, bias=False, dtype=fl.float64)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert m.bias is None and m.weight.dtype == fl.float64
    assert list(m.state_dict()) == ["weight"]


def test_constructor_errors():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv2d(4, 4, 3, groups=0)
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(4, 4, 3, padding="full")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv1d(4, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect")
    with pytest.raises(RuntimeError, match=r"expected input\[1, 3, 5, 5\] to have 4 channels"):
        nn.Conv2d(4, 4, 3)(fl.zeros(1, 3, 5, 5))


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=(2, 3), stride=2, padding=1, dilation=(2, 1))])
def test_unfold_fold_match_torch(rng, kw):
    a = rng.standard_normal((2, 3, 7, 8))
    x = fl.from_numpy(a).requires_grad_(True)
    tx = torch.from_numpy(a).requires_grad_(True)
    cols, tcols = F.unfold(x, **kw), torch.nn.functional.unfold(tx, **kw)
    close(cols, tcols, torch.float64)
    close(F.unfold(x[0], **kw), torch.nn.functional.unfold(tx[0], **kw), torch.float64)
    c = rng.standard_normal(tuple(tcols.shape))
    close(F.fold(fl.from_numpy(c), (7, 8), **kw), torch.nn.functional.fold(torch.from_numpy(c), (7, 8), **kw),
          torch.float64)
    cols.backward(fl.from_numpy(c))
    tcols.backward(torch.from_numpy(c))
    close(x.grad, tx.grad, torch.float64)


def test_functional_names_are_the_operators():
    assert F.conv2d is fl.conv2d and F.conv1d is fl.conv1d
    assert F.conv_transpose2d is fl.conv_transpose2d and F.conv_transpose1d is fl.conv_transpose1d


def _t(rng, *shape):
    return fl.from_numpy(rng.uniform(-1, 1, shape)).requires_grad_(True)


@pytest.mark.parametrize("case", [
    lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
    lambda x, w, b: F.conv2d(x, w[:, :1], None, groups=3, padding=1),                           # depthwise
    lambda x, w, b: F.conv_transpose2d(x, w.transpose(0, 1), b[:3].reshape(3), stride=2, output_padding=1),
])
def test_double_backward(rng, case):
    assert gradgradcheck(case, (_t(rng, 2, 3, 5, 4), _t(rng, 3, 3, 2, 2), _t(rng, 3)))


def test_training_step_lowers_loss():
    """A tiny conv net fits a fixed batch: the layers, their gradients and autograd work together."""
    fl.manual_seed(0)
    rng = np.random.default_rng(0)
    x = fl.from_numpy(rng.standard_normal((8, 1, 8, 8)).astype(np.float32))
    y = fl.from_numpy(rng.standard_normal((8, 4, 4, 4)).astype(np.float32))
    conv1, conv2 = nn.Conv2d(1, 6, 3, padding=1), nn.Conv2d(6, 4, 3, stride=2, padding=1)
    params = list(conv1.parameters()) + list(conv2.parameters())
    losses = []
    for _ in range(30):
        out = conv2(conv1(x).relu())
        loss = ((out - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with fl.no_grad():
            for p in params:
                p.sub_(p.grad * 0.1)
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
