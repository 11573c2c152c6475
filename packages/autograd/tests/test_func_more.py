"""torch.func's rearrange, functionalize, debug_unwrap and replace_all_batch_norm_modules_ (against torch)."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.func import debug_unwrap, functionalize, grad, rearrange, replace_all_batch_norm_modules_, vmap

torch = pytest.importorskip("torch")


X = np.arange(2 * 6 * 4 * 3, dtype=np.float64).reshape(2, 6, 4, 3)


@pytest.mark.parametrize("pattern, lengths", [
    ("b h w c -> b c h w", {}), ("b (h1 h) w c -> (b h1) h w c", {"h1": 2}), ("b h w c -> b (c h w)", {}),
    ("... c -> c ...", {}), ("b ... c -> (...) b c", {}), ("b h w c -> b h w c 1", {}), ("b h w c -> b h w () c", {}),
    ("b (h h1) (w w1) c -> b h w (c h1 w1)", {"h1": 2, "w1": 2}), ("b h w c -> (b h w c)", {}), ("... -> ...", {}),
])
def test_rearrange_matches_torch(pattern, lengths):
    ours = rearrange(fl.tensor(X), pattern, **lengths)
    theirs = torch.func.rearrange(torch.tensor(X), pattern, **lengths)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert np.array_equal(ours.numpy(), theirs.numpy())


def test_rearrange_stacks_sequences_and_is_differentiable():
    parts = [fl.tensor(X[0], requires_grad=True), fl.tensor(X[1], requires_grad=True)]
    out = rearrange(parts, "b h w c -> h (b w) c")
    assert np.array_equal(out.detach().numpy(), torch.func.rearrange([torch.tensor(X[0]), torch.tensor(X[1])],
                                                                 "b h w c -> h (b w) c").numpy())
    (out * fl.arange(out.numel()).reshape(out.shape)).sum().backward()
    expected = torch.func.rearrange(torch.arange(out.numel(), dtype=torch.float64).reshape(tuple(out.shape)),
                                "h (b w) c -> b h w c", b=2).numpy()
    assert np.array_equal(parts[1].grad.numpy(), expected[1])
    assert rearrange(fl.zeros(1, 3), "1 c -> c").shape == (3,)


@pytest.mark.parametrize("pattern, lengths, error, match", [
    ("a b -> a", {}, ValueError, "only on one side"), ("a b c -> a b c", {}, ValueError, "Number of dimensions"),
    ("(a b) c -> a b c", {}, ValueError, "infer"), ("a b -> a b", {"z": 1}, ValueError, "not found"),
    ("a b", {}, ValueError, "'->'"), ("a 2 -> a 2", {}, ValueError, "size 1"),
    ("(a b) c -> a b c", {"a": 4}, ValueError, "divide"), ("a a -> a", {}, ValueError, "duplicate"),
    ("(a b -> a b", {}, ValueError, "parentheses"), ("a b -> a b", {"a": 2.0}, TypeError, "integers"),
])
def test_rearrange_errors(pattern, lengths, error, match):
    with pytest.raises(error, match=match):
        rearrange(fl.zeros(6, 2), pattern, **lengths)


def test_functionalize_keeps_outputs_and_mutations():
    def f(x, y):
        x.add_(1)
        return x * y

    x, y = fl.ones(3), fl.full((3,), 2.0)
    out = functionalize(f)(x, y)
    assert np.array_equal(out.numpy(), [4.0, 4.0, 4.0]) and np.array_equal(x.numpy(), [2.0, 2.0, 2.0])
    wrapped = functionalize(f, remove="mutations_and_views")
    assert wrapped.__name__ == "f"
    g = grad(lambda t: functionalize(lambda u: (u * u).sum())(t))(fl.tensor([1.0, 2.0]))
    assert np.array_equal(g.numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="invalid argument for remove"):
        functionalize(f, remove="views")
    with pytest.raises(RuntimeError, match="invalid argument for remove"):
        torch.func.functionalize(f, remove="views")


def test_debug_unwrap():
    batch = fl.arange(6.0).reshape(2, 3)
    seen = []

    def f(x):
        seen.append(debug_unwrap(x))
        return x * 2

    vmap(f)(batch)
    assert np.array_equal(seen[0].numpy(), batch.numpy())
    nested = []
    vmap(vmap(lambda x: nested.append((debug_unwrap(x), debug_unwrap(x, recurse=False))) or x))(
        fl.arange(6.0).reshape(2, 3))
    full, one_level = nested[0]
    assert tuple(full.shape) == (2, 3) and tuple(one_level.shape) == (3,)
    plain = fl.ones(2)
    assert debug_unwrap(plain) is plain


def test_replace_all_batch_norm_modules_():
    import flambeau.nn as nn

    model = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3), nn.Sequential(nn.BatchNorm1d(4)), nn.InstanceNorm2d(3))
    assert replace_all_batch_norm_modules_(model) is model
    for bn in (model[1], model[2][0]):
        assert bn.running_mean is None and bn.running_var is None and bn.num_batches_tracked is None
        assert not bn.track_running_stats
    model.eval()
    x = fl.randn(4, 3, 2, 2)
    # in eval mode it now normalises with the batch statistics, as torch's does
    ours = model[1](x)
    theirs_bn = torch.nn.BatchNorm2d(3)
    torch.func.replace_all_batch_norm_modules_(theirs_bn)
    theirs = theirs_bn.eval()(torch.tensor(x.numpy()))
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
