"""Lazy modules (``flambeau/nn/modules/lazy.py``, ``parameter.py``: UninitializedParameter) against torch:
placeholders, materialization on the first forward, the class change, state_dict and optimizers."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn

torch = pytest.importorskip("torch")

CASES = [
    ("LazyLinear", (3,), {}, (2, 5), "Linear", (5, 3)),
    ("LazyLinear", (4,), dict(bias=False), (2, 3, 6), "Linear", (6, 4)),
    ("LazyConv1d", (4, 3), dict(stride=2, padding=1), (2, 3, 9), "Conv1d", (3, 4, 3)),
    ("LazyConv2d", (6, 3), dict(groups=2, padding="same"), (1, 4, 5, 5), "Conv2d", (4, 6, 3)),
    ("LazyConv2d", (2, (1, 3)), dict(bias=False), (3, 5, 6), "Conv2d", (3, 2, (1, 3))),  # unbatched
    ("LazyConv3d", (2, 2), {}, (1, 3, 3, 4, 4), "Conv3d", (3, 2, 2)),
    ("LazyConvTranspose1d", (4, 3), dict(stride=2), (2, 3, 5), "ConvTranspose1d", (3, 4, 3)),
    ("LazyConvTranspose2d", (6, 2), dict(groups=3), (1, 3, 4, 4), "ConvTranspose2d", (3, 6, 2)),
    ("LazyBatchNorm1d", (), {}, (4, 6), "BatchNorm1d", (6,)),
    ("LazyBatchNorm1d", (), dict(affine=False, momentum=None), (4, 6, 3), "BatchNorm1d", (6,)),
    ("LazyBatchNorm2d", (), dict(track_running_stats=False), (2, 3, 4, 4), "BatchNorm2d", (3,)),
    ("LazyBatchNorm3d", (), dict(eps=1e-3), (2, 3, 2, 3, 3), "BatchNorm3d", (3,)),
]


def numpy_state(sd):
    return {k: v.detach().numpy() if not isinstance(v, (nn.UninitializedParameter, nn.UninitializedBuffer)) else None
            for k, v in sd.items()}


@pytest.mark.parametrize("lazy,args,kw,shape,regular,regular_args", CASES, ids=lambda v: str(v))
def test_lazy_module_like_torch(lazy, args, kw, shape, regular, regular_args):
    ours, theirs = getattr(nn, lazy)(*args, **kw), getattr(torch.nn, lazy)(*args, **kw)
    assert repr(ours) == repr(theirs)
    assert ours.has_uninitialized_params()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for k, v in ours.state_dict().items():  # the placeholders are in the state dict as they are
        assert type(v).__name__ == type(theirs.state_dict()[k]).__name__
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    # parameters are drawn at the first forward, from the generator's state then: as the regular layer's
    fl.manual_seed(3)
    y = ours(fl.from_numpy(x))
    fl.manual_seed(3)
    reference = getattr(nn, regular)(*regular_args, **kw)
    theirs(torch.from_numpy(x))
    assert type(ours) is getattr(nn, regular) and type(theirs) is getattr(torch.nn, regular)
    assert repr(ours) == repr(theirs) == repr(reference)
    assert not hasattr(ours, "_initialize_hook") and not ours._forward_pre_hooks
    for (name, p), (rname, rp) in zip(ours.named_parameters(), reference.named_parameters()):
        assert name == rname and type(p) is nn.Parameter and p.requires_grad
        np.testing.assert_array_equal(p.detach().numpy(), rp.detach().numpy())
    reference(fl.from_numpy(x))  # the same running-statistics update
    for (name, b), (rname, rb) in zip(ours.named_buffers(), reference.named_buffers()):
        assert name == rname and type(b) is fl.Tensor
        np.testing.assert_array_equal(b.numpy(), rb.numpy())
    assert tuple(y.shape) == tuple(theirs(torch.from_numpy(x)).shape)


def test_optimizer_built_before_the_first_forward_trains_the_materialized_parameters():
    m = nn.LazyLinear(2)
    opt = fl.optim.Adam(m.parameters(), lr=0.1)
    weight = m.weight
    m(fl.randn(4, 3)).pow(2).sum().backward()
    assert m.weight is weight and weight.shape == (2, 3)
    before = weight.detach().numpy().copy()
    opt.step()
    assert not np.allclose(weight.detach().numpy(), before)


def test_moves_and_casts_before_the_first_forward():
    m = nn.LazyLinear(3).double()
    assert m.weight.dtype == fl.float64 and isinstance(m.weight, nn.UninitializedParameter)
    m(fl.zeros(2, 5, dtype=fl.float64))
    assert m.weight.dtype == fl.float64 and m.weight.shape == (3, 5)
    b = nn.LazyBatchNorm1d(dtype=fl.float64)
    b(fl.randn(4, 2, dtype=fl.float64))
    assert b.running_mean.dtype == fl.float64 and b.num_batches_tracked.item() == 1


def test_load_state_dict_materializes_and_keeps_the_lazy_class():
    src = nn.Linear(4, 3)
    m = nn.LazyLinear(3)
    m.load_state_dict(src.state_dict())
    t = torch.nn.LazyLinear(3)
    t.load_state_dict(torch.nn.Linear(4, 3).state_dict())
    assert type(m) is nn.LazyLinear and type(t) is torch.nn.LazyLinear  # until the first forward, as torch
    np.testing.assert_array_equal(m.weight.detach().numpy(), src.weight.detach().numpy())
    m(fl.randn(2, 4))
    assert type(m) is nn.Linear
    np.testing.assert_array_equal(m.weight.detach().numpy(), src.weight.detach().numpy())  # not redrawn
    # an uninitialized state dict loads into a lazy module; into an initialized one it fails
    fresh = nn.LazyLinear(3)
    fresh.load_state_dict(nn.LazyLinear(3).state_dict())
    assert fresh.has_uninitialized_params()
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter or buffer"):
        nn.Linear(4, 3).load_state_dict(nn.LazyLinear(3).state_dict())


def test_placeholder_behaviour_and_errors():
    p = nn.UninitializedParameter()
    assert repr(p) == "<UninitializedParameter>" and repr(nn.UninitializedBuffer()) == "<UninitializedBuffer>"
    assert nn.is_lazy(p) and not nn.is_lazy(nn.Parameter(fl.zeros(1))) and isinstance(p, nn.Parameter)
    assert p.requires_grad and not nn.UninitializedBuffer().requires_grad
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        p.shape  # noqa: B018
    with pytest.raises(RuntimeError, match="Can't share memory on an uninitialized parameter or buffer"):
        p.share_memory_()
    twin = copy.deepcopy(nn.LazyLinear(2))
    assert isinstance(twin.weight, nn.UninitializedParameter)
    p.materialize((2, 3), dtype=fl.float64)
    assert type(p) is nn.Parameter and p.shape == (2, 3) and p.dtype == fl.float64
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d, but got "
                                           r"input of size: \[2, 3\]"):
        nn.LazyConv2d(2, 3)(fl.zeros(2, 3))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(fl.zeros(1, 3, 5, 5))
    with pytest.raises(NotImplementedError, match="initialize_parameters is not implemented for"):
        nn.modules.lazy.LazyModuleMixin.initialize_parameters(nn.Linear(2, 2))
