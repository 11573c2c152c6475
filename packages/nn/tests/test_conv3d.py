"""Conv3d (``flambeau/nn/modules/conv.py``) and F.conv3d (``_functional/conv.py``) against torch."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.autograd import gradgradcheck

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same.")

RNG = np.random.default_rng(4)
TOL = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float64: dict(rtol=1e-11, atol=1e-11)}


def close(a, b, dtype):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL[dtype])


CASES = [
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), {}),
    ((2, 4, 6, 5, 7), (6, 2, 2, 3, 1), dict(stride=(2, 1, 3), padding=(1, 0, 2), dilation=(2, 1, 1), groups=2)),
    ((1, 2, 4, 5, 6), (3, 2, 3, 2, 3), dict(padding="same", dilation=(1, 2, 1))),
    ((1, 2, 4, 5, 6), (3, 2, 2, 2, 2), dict(padding="valid", stride=2)),
    ((3, 4, 5, 6), (2, 3, 2, 2, 2), dict(padding=1)),  # unbatched
    ((2, 4, 3, 4, 5), (4, 1, 1, 3, 3), dict(groups=4, padding=(0, 1, 1))),  # depthwise
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,kw", CASES, ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_conv3d_functional_values_and_gradients(dtype, xs, ws, kw, bias):
    a, w = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)
    b = RNG.standard_normal(ws[0]).astype(dtype) if bias else None
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    fw, tw = fl.from_numpy(w).requires_grad_(True), torch.from_numpy(w).requires_grad_(True)
    fb = None if b is None else fl.from_numpy(b).requires_grad_(True)
    tb = None if b is None else torch.from_numpy(b).requires_grad_(True)
    y, ty = F.conv3d(x, fw, fb, **kw), torch.nn.functional.conv3d(tx, tw, tb, **kw)
    close(y, ty, dtype)
    assert y.is_contiguous()
    g = RNG.standard_normal(tuple(ty.shape)).astype(dtype)
    y.backward(fl.from_numpy(g))
    ty.backward(torch.from_numpy(g))
    close(x.grad, tx.grad, dtype)
    close(fw.grad, tw.grad, dtype)
    if bias:
        close(fb.grad, tb.grad, dtype)


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv3d_module(padding_mode):
    kw = dict(kernel_size=(3, 2, 3), stride=(1, 2, 1), padding=(1, 1, 2), padding_mode=padding_mode,
              dtype=torch.float64)
    theirs = torch.nn.Conv3d(4, 6, groups=2, **kw)
    ours = nn.Conv3d(4, 6, groups=2, **{**kw, "dtype": fl.float64})
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    # torch's initialisation: kaiming_uniform(a=sqrt(5)) bound is 1 / sqrt(fan_in)
    bound = 1 / np.sqrt(2 * 3 * 2 * 3)
    assert np.abs(ours.weight.detach().numpy()).max() <= bound
    ours.load_state_dict({k: fl.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    a = RNG.standard_normal((2, 4, 5, 6, 7))
    x, tx = fl.from_numpy(a).requires_grad_(True), torch.from_numpy(a).requires_grad_(True)
    y, ty = ours(x), theirs(tx)
    close(y, ty, np.float64)
    y.sum().backward()
    ty.sum().backward()
    close(x.grad, tx.grad, np.float64)
    close(ours.weight.grad, theirs.weight.grad, np.float64)


def test_conv3d_double_backward():
    x = fl.from_numpy(RNG.standard_normal((1, 2, 3, 3, 4))).requires_grad_(True)
    w = fl.from_numpy(RNG.standard_normal((2, 1, 2, 2, 2))).requires_grad_(True)
    assert gradgradcheck(lambda a, b: F.conv3d(a, b, None, (1, 1, 2), 1, 1, 2), (x, w))


def errors(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares whatever torch raises
        # torch prints the weight's size as "[[3, 2, 2, 2, 2]]" in one message (its typo, not copied)
        return type(e), str(e).replace("[[", "[").replace("]]", "]")
    return None


@pytest.mark.parametrize("call", [
    lambda F, t: F.conv3d(t.zeros(1, 3, 4, 4, 4), t.zeros(2, 4, 2, 2, 2)),
    lambda F, t: F.conv3d(t.zeros(1, 3, 4, 4), t.zeros(2, 3, 2, 2, 2)),
    lambda F, t: F.conv3d(t.zeros(3, 4, 4), t.zeros(2, 3, 2, 2, 2)),
    lambda F, t: F.conv3d(t.zeros(1, 3, 2, 4, 4), t.zeros(2, 3, 3, 2, 2)),
    lambda F, t: F.conv3d(t.zeros(1, 4, 4, 4, 4), t.zeros(3, 2, 2, 2, 2), groups=2),
    lambda F, t: F.conv3d(t.zeros(1, 3, 4, 4, 4), t.zeros(2, 3, 2, 2, 2), t.zeros(3)),
    lambda F, t: F.conv3d(t.zeros(1, 3, 4, 4, 4), t.zeros(2, 3, 2, 2, 2), stride=0),
    lambda F, t: F.conv3d(t.zeros(1, 3, 4, 4, 4), t.zeros(2, 3, 2, 2, 2), padding=-1),
    lambda F, t: F.conv3d(t.zeros(1, 3, 4, 4, 4), t.zeros(2, 3, 2, 2, 2), padding="same", stride=2),
    lambda F, t: F.conv3d(t.zeros(1, 3, 4, 4, 4), t.zeros(2, 3, 2, 2, 2), padding="foo"),
    lambda F, t: F.conv3d(t.zeros(1, 3, 4, 4, 4), t.zeros(2, 3, 2, 2, 2), stride=(1, 2)),
], ids=range(11))
def test_errors_match_torch(call):
    ours, theirs = errors(lambda: call(F, fl)), errors(lambda: call(torch.nn.functional, torch))
    assert theirs is not None and ours == theirs


def test_dtype_mismatch_names_both():
    with pytest.raises(RuntimeError, match=r"Input type \(flambeau.float64\) and weight type \(flambeau.float32\)"):
        F.conv3d(fl.zeros(1, 1, 2, 2, 2, dtype=fl.float64), fl.zeros(1, 1, 1, 1, 1))
