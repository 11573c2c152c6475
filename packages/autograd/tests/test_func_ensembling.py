"""flambeau.func.stack_module_state and linearize against torch.func."""

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
from flambeau.func import functional_call, jvp, linearize, stack_module_state, vmap

torch = pytest.importorskip("torch")


class _Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.l2 = nn.Linear(4, 2)

    def forward(self, x):
        return self.l2(fl.relu(self.bn(self.l1(x))))


def test_stack_module_state_names_shapes_leaves():
    models = [_Two() for _ in range(3)]
    params, buffers = stack_module_state(models)
    assert list(params) == [n for n, _ in models[0].named_parameters()]
    assert list(buffers) == [n for n, _ in models[0].named_buffers()]
    for name, p in models[1].named_parameters():
        assert params[name].shape == (3, *p.shape)
        assert params[name].is_leaf and params[name].requires_grad
        np.testing.assert_array_equal(params[name][1].detach().numpy(), p.detach().numpy())
    assert not buffers["bn.running_mean"].requires_grad
    params["l1.weight"].sum().backward()  # a new leaf: the models' own parameters get nothing
    assert models[0].l1.weight.grad is None and params["l1.weight"].grad is not None


def test_stack_module_state_ensemble_matches_each_model():
    models = [nn.Linear(3, 2) for _ in range(4)]
    params, buffers = stack_module_state(models)
    x = fl.randn(5, 3)
    out = vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)), (0, 0, None))(params, buffers, x)
    assert out.shape == (4, 5, 2)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["empty", "mode", "class", "requires_grad"])
def test_stack_module_state_errors_as_torch(case):
    def build(lib):
        if case == "empty":
            return []
        a, b = lib.nn.Linear(2, 2), lib.nn.Linear(2, 2)
        if case == "mode":
            b.eval()
        elif case == "class":
            b = lib.nn.Sequential(lib.nn.Linear(2, 2))
        else:
            b.bias.requires_grad_(False)
        return [a, b]

    with pytest.raises(RuntimeError) as theirs:
        torch.func.stack_module_state(build(torch))
    with pytest.raises(RuntimeError) as ours:
        stack_module_state(build(fl))
    assert str(ours.value) == str(theirs.value)


def test_linearize_matches_torch_and_jvp():
    x_np = np.random.default_rng(0).standard_normal((3, 2))

    def f(lib):
        return lambda x: (lib.sin(x) * x).sum(1)

    out, jvp_fn = linearize(f(fl), fl.tensor(x_np))
    t_out, t_jvp_fn = torch.func.linearize(f(torch), torch.tensor(x_np))
    np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-12)
    for seed in (1, 2):
        v = np.random.default_rng(seed).standard_normal((3, 2))
        np.testing.assert_allclose(jvp_fn(fl.tensor(v)).numpy(), t_jvp_fn(torch.tensor(v)).numpy(), rtol=1e-10)
        direct = jvp(f(fl), (fl.tensor(x_np),), (fl.tensor(v),))[1]
        np.testing.assert_allclose(jvp_fn(fl.tensor(v)).numpy(), direct.numpy())


def test_linearize_checks_tangents():
    _, jvp_fn = linearize(lambda x: x * 2, fl.zeros(3))
    with pytest.raises(RuntimeError, match="tangent:0 with shape"):
        jvp_fn(fl.zeros(4))
    with pytest.raises(RuntimeError, match="tangent:0 with dtype"):
        jvp_fn(fl.zeros(3, dtype=fl.float64))
    with pytest.raises(RuntimeError, match="same argspec"):
        jvp_fn(fl.zeros(3), fl.zeros(3))
