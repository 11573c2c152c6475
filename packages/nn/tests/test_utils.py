"""nn.utils against torch: gradient clipping, parameter vectors, pad_sequence, hook handles."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
from flambeau.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    get_total_norm,
    parameters_to_vector,
    vector_to_parameters,
)
from flambeau.nn.utils.hooks import RemovableHandle
from flambeau.nn.utils.rnn import pad_sequence, unpad_sequence

torch = pytest.importorskip("torch")
tutils = torch.nn.utils

RNG = np.random.default_rng(5)


def _params_with_grads(shapes, dtype=np.float32, scale=1.0):
    arrays = [(RNG.standard_normal(s) * scale).astype(dtype) for s in shapes]
    grads = [(RNG.standard_normal(s) * scale).astype(dtype) for s in shapes]
    ours, theirs = [], []
    for a, g in zip(arrays, grads):
        p = nn.Parameter(fl.from_numpy(a.copy()))
        p.grad = fl.from_numpy(g.copy())
        tp = torch.nn.Parameter(torch.from_numpy(a.copy()))
        tp.grad = torch.from_numpy(g.copy())
        ours.append(p)
        theirs.append(tp)
    return ours, theirs


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, "inf", 0.5])
@pytest.mark.parametrize("max_norm", [0.1, 1e6])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_grad_norm_like_torch(norm_type, max_norm, dtype):
    shapes = [(10, 5), (5,), (3, 4, 2)]
    ours, theirs = _params_with_grads(shapes, dtype)
    nt = float(norm_type)
    total = clip_grad_norm_(ours, max_norm, norm_type=nt)
    ttotal = tutils.clip_grad_norm_(theirs, max_norm, norm_type=nt)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert isinstance(total, fl.Tensor) and total.ndim == 0
    assert total.item() == pytest.approx(ttotal.item(), rel=rtol)
    for p, tp in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=rtol, atol=1e-7)
    assert total.dtype == (fl.float32 if dtype == np.float32 else fl.float64)


def test_clip_grad_norm_edge_cases():
    # parameters without grads are skipped; a single tensor or a generator works
    m = nn.Linear(3, 2)
    assert clip_grad_norm_(m.parameters(), 1.0).item() == 0.0
    m(fl.randn(4, 3)).sum().backward()
    m.bias.grad = None
    t = torch.nn.Linear(3, 2)
    t.weight.grad = torch.from_numpy(m.weight.grad.numpy().copy())
    total = clip_grad_norm_(m.weight, 0.5)
    assert total.item() == pytest.approx(tutils.clip_grad_norm_(t.weight, 0.5).item(), rel=1e-6)
    np.testing.assert_allclose(m.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-6)
    ours, _ = _params_with_grads([(3,)])
    ours[0].grad[0] = float("nan")
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    assert math.isnan(clip_grad_norm_(ours, 1.0).item())
    ours, _ = _params_with_grads([(3,)])
    ours[0].grad[1] = float("inf")
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(ours, 1.0, norm_type="inf", error_if_nonfinite=True)
    ours, theirs = _params_with_grads([(4, 4)])
    assert get_total_norm([p.grad for p in ours]).item() == pytest.approx(
        tutils.get_total_norm([p.grad for p in theirs]).item(), rel=1e-6)


@pytest.mark.parametrize("norm_type", [2.0, math.inf, -math.inf])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_clip_grad_norm_of_a_nan_or_inf_gradient_like_torch(norm_type, bad):
    """A NaN in one gradient makes the total NaN whatever the order of the gradients (the max of the norms
    propagates it, as torch's); an inf makes it inf."""
    for bad_first in (True, False):
        ours, theirs = _params_with_grads([(3,), (4,)])
        i = 0 if bad_first else 1
        ours[i].grad[1] = bad
        theirs[i].grad[1] = bad
        total = clip_grad_norm_(ours, 1.0, norm_type=norm_type).item()
        ttotal = tutils.clip_grad_norm_(theirs, 1.0, norm_type=norm_type).item()
        np.testing.assert_equal(total, ttotal)
        for p, tp in zip(ours, theirs):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6)


def test_clip_grad_norm_under_autograd_does_not_record():
    m = nn.Linear(3, 3)
    m(fl.randn(2, 3)).sum().backward()
    clip_grad_norm_(m.parameters(), 0.01)
    assert m.weight.grad.grad_fn is None and not m.weight.grad.requires_grad


@pytest.mark.parametrize("clip", [0.1, 1.0])
def test_clip_grad_value_like_torch(clip):
    ours, theirs = _params_with_grads([(10, 5), (5,)], scale=2.0)
    assert clip_grad_value_(ours, clip) is None
    tutils.clip_grad_value_(theirs, clip)
    for p, tp in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), tp.grad.numpy())
    one, _ = _params_with_grads([(3,)], scale=5.0)
    clip_grad_value_(one[0], 0.5)
    assert one[0].grad.abs().max().item() <= 0.5


def test_parameters_to_vector_and_back():
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    m.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in t.state_dict().items()})
    v = parameters_to_vector(m.parameters())
    tv = tutils.parameters_to_vector(t.parameters())
    np.testing.assert_array_equal(v.detach().numpy(), tv.detach().numpy())
    assert v.requires_grad  # differentiable, as torch's
    (v * fl.arange(v.numel(), dtype=fl.float32)).sum().backward()
    np.testing.assert_array_equal(m[0].weight.grad.numpy().ravel(), np.arange(12, dtype=np.float32))
    new = fl.arange(v.numel(), dtype=fl.float32)
    w = m[0].weight
    vector_to_parameters(new, m.parameters())
    assert m[0].weight is w
    np.testing.assert_array_equal(parameters_to_vector(m.parameters()).detach().numpy(), new.numpy())
    with pytest.raises(TypeError, match="expected flambeau.Tensor, but got: list"):
        vector_to_parameters([1.0], m.parameters())


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("trailing", [(), (3,), (2, 2)])
def test_pad_sequence_like_torch(batch_first, padding_side, trailing):
    lens = [3, 5, 1, 5]
    arrays = [RNG.standard_normal((n, *trailing)) for n in lens]
    out = pad_sequence([fl.from_numpy(a) for a in arrays], batch_first=batch_first, padding_value=-7.0,
                       padding_side=padding_side)
    ref = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(a) for a in arrays], batch_first=batch_first,
                                          padding_value=-7.0, padding_side=padding_side)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_pad_sequence_gradients_and_unpad():
    xs = [fl.randn(n, 2, requires_grad=True) for n in (2, 4, 3)]
    out = pad_sequence(xs, batch_first=True)
    (out * out).sum().backward()
    for x in xs:
        np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
    back = unpad_sequence(out, fl.tensor([2, 4, 3]), batch_first=True)
    for a, b in zip(back, xs):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    with pytest.raises(ValueError, match="Expected padding_side to be one of left or right, but got middle."):
        pad_sequence(xs, padding_side="middle")


def test_removable_handle():
    hooks: dict = {}
    extra: dict = {}
    h = RemovableHandle(hooks, extra_dict=extra)
    hooks[h.id] = "hook"
    extra[h.id] = True
    h2 = RemovableHandle(hooks)
    assert h2.id != h.id
    h.remove()
    assert h.id not in hooks and h.id not in extra
    h.remove()
    with RemovableHandle(hooks) as h3:
        hooks[h3.id] = 1
    assert h3.id not in hooks


@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_and_pad_packed_like_torch(enforce_sorted, batch_first):
    from flambeau.nn.utils import rnn as R

    T = torch.nn.utils.rnn
    lens = [5, 4, 4, 1] if enforce_sorted else [3, 5, 1, 4]
    arrays = [RNG.standard_normal((n, 3)) for n in lens]
    padded = pad_sequence([fl.from_numpy(a) for a in arrays], batch_first=batch_first)
    tpadded = T.pad_sequence([torch.from_numpy(a) for a in arrays], batch_first=batch_first)
    p = R.pack_padded_sequence(padded, fl.tensor(lens), batch_first=batch_first, enforce_sorted=enforce_sorted)
    tp = T.pack_padded_sequence(tpadded, torch.tensor(lens), batch_first=batch_first, enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(p.data.numpy(), tp.data.numpy())
    assert p.batch_sizes.tolist() == tp.batch_sizes.tolist()
    if enforce_sorted:
        assert p.sorted_indices is None and tp.sorted_indices is None
    else:
        assert p.sorted_indices.tolist() == tp.sorted_indices.tolist()
        assert p.unsorted_indices.tolist() == tp.unsorted_indices.tolist()
    out, out_lens = R.pad_packed_sequence(p, batch_first=batch_first, padding_value=-2.0, total_length=7)
    tout, tlens = T.pad_packed_sequence(tp, batch_first=batch_first, padding_value=-2.0, total_length=7)
    np.testing.assert_array_equal(out.numpy(), tout.numpy())
    assert out_lens.tolist() == tlens.tolist()
    back = R.unpack_sequence(R.pack_sequence([fl.from_numpy(a) for a in arrays], enforce_sorted=enforce_sorted))
    for a, b in zip(back, arrays):
        np.testing.assert_array_equal(a.numpy(), b)


def test_packing_gradients_and_errors():
    from flambeau.nn.utils import rnn as R

    xs = [fl.randn(n, 2, requires_grad=True) for n in (2, 4, 3)]
    p = R.pack_sequence(xs, enforce_sorted=False)
    out, _ = R.pad_packed_sequence(p)
    (out * out).sum().backward()
    for x in xs:
        np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        R.pack_padded_sequence(fl.zeros(4, 2), [1, 3])
    with pytest.raises(RuntimeError, match="has to be greater than 0"):
        R.pack_padded_sequence(fl.zeros(4, 2), [3, 0])
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        R.pad_packed_sequence(p, total_length=2)
