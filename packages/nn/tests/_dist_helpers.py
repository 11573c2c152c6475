"""Shared helpers of the distribution tests: build the same distribution in flambeau and torch."""

from __future__ import annotations

import numpy as np

import flambeau as fl


def dtype_name(dtype) -> str:
    return str(dtype).split(".")[-1]


def to_numpy(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def assert_same(ours, theirs, rtol=1e-9, atol=1e-11):
    """Values (NaN where torch has NaN), shape and dtype of a flambeau result against torch's."""
    assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    assert dtype_name(ours.dtype) == dtype_name(theirs.dtype), (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(to_numpy(ours).astype(np.float64), to_numpy(theirs).astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


def build(name, params, torch, grad=True):
    """``(ours, theirs, fl_params, torch_params)``: the distribution ``name`` with ``params`` (a dict
    of numbers / nested lists, float64) in both libraries; float tensors require grad."""
    import flambeau.distributions as D

    fl_params, t_params = {}, {}
    for key, value in params.items():
        if isinstance(value, (int, float)) and key not in ("temperature",):
            fl_params[key] = t_params[key] = value
            continue
        arr = np.asarray(value, dtype=np.float64)
        fl_params[key] = fl.tensor(arr, dtype=fl.float64, requires_grad=grad)
        t_params[key] = torch.tensor(arr, dtype=torch.float64, requires_grad=grad)
    return getattr(D, name)(**fl_params), getattr(torch.distributions, name)(**t_params), fl_params, t_params


def tensor_pair(value, torch, dtype="float64"):
    arr = np.asarray(value)
    return (fl.tensor(arr, dtype=getattr(fl, dtype)), torch.tensor(arr, dtype=getattr(torch, dtype)))


def check_samples(ours, theirs, n, seed=3):
    """``(samples, expected)``: ``n`` draws of ``ours`` (checked to be reproducible under
    ``fl.manual_seed``, of torch's shape and dtype, within the support, without grad) and ``n`` of
    ``theirs``."""
    fl.manual_seed(seed)
    samples = ours.sample((n,))
    fl.manual_seed(seed)
    again = ours.sample((n,))
    np.testing.assert_array_equal(samples.numpy(), again.numpy())
    expected = theirs.sample((n,))
    assert tuple(samples.shape) == tuple(expected.shape)
    assert dtype_name(samples.dtype) == dtype_name(expected.dtype)
    assert bool(ours.support.check(samples).all())
    assert not samples.requires_grad
    return samples, expected
