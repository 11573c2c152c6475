"""flambeau.distributions against torch.distributions: values, gradients, samples.

Every distribution is built with the same float64 parameters in both libraries; log_prob, cdf,
icdf, entropy and the moments must agree to ~1e-9, and so must the gradients of log_prob and entropy
w.r.t. every parameter. Samples are checked for shape, dtype, support, reproducibility under
``fl.manual_seed`` and their first moment; reparameterised samples for their pathwise gradient,
computed from the very noise the sample used.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _dist_helpers import assert_same, build, check_samples, tensor_pair

import flambeau as fl
import flambeau.distributions as D

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)
_A = _RNG.standard_normal((2, 3, 3))
_COV = (_A @ _A.transpose(0, 2, 1) + np.eye(3)).tolist()
_TRIL = np.linalg.cholesky(np.array(_COV)).tolist()
_PREC = np.linalg.inv(np.array(_COV)).tolist()
_T = 0.7

# name, parameters, a value in the support (batch (2,) unless said), the methods to compare.
CASES = [
    ("Normal", {"loc": [0.3, -1.2], "scale": [0.5, 2.0]}, [0.1, 1.5], "cdf icdf entropy mean mode variance stddev"),
    ("Bernoulli", {"probs": [0.2, 0.5]}, [0.0, 1.0], "entropy mean mode variance"),
    ("Bernoulli", {"logits": [-0.3, 2.0]}, [1.0, 0.0], "entropy mean mode variance"),
    ("Categorical", {"probs": [[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]]}, [2, 0], "entropy mean mode variance"),
    ("Categorical", {"logits": [[0.2, -1.3, 0.5], [2.0, 0.6, 0.3]]}, [1, 2], "entropy mode"),
    ("OneHotCategorical", {"probs": [[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]]}, [[0, 0, 1.0], [0, 1.0, 0]],
     "entropy mean mode variance"),
    ("Uniform", {"low": [0.0, -1.0], "high": [1.0, 3.0]}, [0.5, 2.0], "cdf icdf entropy mean variance stddev"),
    ("Exponential", {"rate": [0.5, 2.0]}, [0.3, 1.7], "cdf icdf entropy mean mode variance stddev"),
    ("Laplace", {"loc": [0.3, -1.0], "scale": [0.5, 2.0]}, [1.1, -3.0], "cdf icdf entropy mean mode variance stddev"),
    ("Gamma", {"concentration": [0.7, 3.0], "rate": [1.5, 0.5]}, [0.4, 2.5], "entropy mean mode variance"),
    ("Beta", {"concentration1": [0.7, 2.0], "concentration0": [1.5, 3.0]}, [0.3, 0.6], "entropy mean mode variance"),
    ("Dirichlet", {"concentration": [[0.7, 2.0, 1.0], [3.0, 2.5, 1.2]]}, [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]],
     "entropy mean mode variance"),
    ("Poisson", {"rate": [0.5, 4.0]}, [0.0, 3.0], "mean mode variance"),
    ("Geometric", {"probs": [0.3, 0.8]}, [0.0, 4.0], "entropy mean mode variance"),
    ("Binomial", {"total_count": 10, "probs": [0.3, 0.8]}, [0.0, 7.0], "entropy mean mode variance"),
    ("Binomial", {"total_count": [5.0, 12.0], "logits": [-0.3, 2.0]}, [5.0, 7.0], "mean mode variance"),
    ("MultivariateNormal", {"loc": [[0.1, 0.2, -0.3], [1.0, 0.0, 2.0]], "covariance_matrix": _COV},
     [[0.5, -0.2, 0.1], [1.0, 1.0, 1.0]], "entropy mean mode variance"),
    ("MultivariateNormal", {"loc": [0.1, 0.2, -0.3], "scale_tril": _TRIL}, [[0.5, -0.2, 0.1], [1.0, 1.0, 1.0]],
     "entropy mean variance"),
    ("MultivariateNormal", {"loc": [0.1, 0.2, -0.3], "precision_matrix": _PREC}, [0.5, -0.2, 0.1],
     "entropy variance"),
    ("LogNormal", {"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, [0.4, 2.0], "cdf icdf entropy mean mode variance"),
    ("Gumbel", {"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, [0.4, 2.0], "cdf icdf entropy mean mode variance stddev"),
    ("RelaxedBernoulli", {"temperature": _T, "probs": [0.3, 0.8]}, [0.2, 0.9], ""),
    ("RelaxedOneHotCategorical", {"temperature": _T, "logits": [[0.2, -1.3, 0.5], [2.0, 0.6, 0.3]]},
     [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]], ""),
]
IDS = [f"{c[0]}-{'-'.join(c[1])}" for c in CASES]


@pytest.mark.parametrize("name,params,value,methods", CASES, ids=IDS)
def test_values_and_gradients_match_torch(name, params, value, methods):
    ours, theirs, fl_params, t_params = build(name, params, torch)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    dtype = "int64" if name == "Categorical" else "float64"
    v_ours, v_theirs = tensor_pair(value, torch, dtype)
    lp_ours, lp_theirs = ours.log_prob(v_ours), theirs.log_prob(v_theirs)
    assert_same(lp_ours, lp_theirs)
    for method in methods.split():
        if method in ("cdf", "icdf"):
            arg = v_ours if method == "cdf" else fl.tensor([0.3, 0.8], dtype=fl.float64)
            targ = v_theirs if method == "cdf" else torch.tensor([0.3, 0.8], dtype=torch.float64)
            assert_same(getattr(ours, method)(arg), getattr(theirs, method)(targ))
        elif method == "entropy":
            assert_same(ours.entropy(), theirs.entropy())
        else:
            assert_same(getattr(ours, method), getattr(theirs, method))
    # Gradients of log_prob (and entropy) w.r.t. every parameter.
    loss_ours = lp_ours.sum() + (ours.entropy().sum() if "entropy" in methods else 0)
    loss_theirs = lp_theirs.sum() + (theirs.entropy().sum() if "entropy" in methods else 0)
    loss_ours.backward()
    loss_theirs.backward()
    for key, p in fl_params.items():
        if isinstance(p, fl.Tensor) and t_params[key].grad is not None:
            assert_same(p.grad, t_params[key].grad)


# Samples: shape, dtype, support, reproducibility, and the first moment over 20k draws.
SAMPLED = [c for c in CASES if c[0] not in ("Bernoulli",) or "probs" in c[1]]


@pytest.mark.parametrize("name,params,value,methods", SAMPLED, ids=[f"{c[0]}-{'-'.join(c[1])}" for c in SAMPLED])
def test_samples_shape_dtype_support_and_mean(name, params, value, methods):
    ours, theirs, _, _ = build(name, params, torch, grad=False)
    n = 20000
    samples, expected = check_samples(ours, theirs, n)
    if name == "Categorical":
        freq = np.stack([(samples.numpy() == k).mean(0) for k in range(3)], -1)
        np.testing.assert_allclose(freq, theirs.probs.detach().numpy(), atol=0.015)
    elif name not in ("RelaxedBernoulli", "RelaxedOneHotCategorical"):
        mean, std = theirs.mean.detach().numpy(), theirs.stddev.detach().numpy()
        np.testing.assert_array_less(np.abs(samples.numpy().mean(0) - mean), 5 * std / math.sqrt(n) + 1e-12)


@pytest.mark.parametrize("sample_shape", [(), (4,), (2, 3)])
def test_sample_shapes_follow_sample_batch_event(sample_shape):
    d = D.Dirichlet(fl.ones(5, 3))
    assert tuple(d.sample(sample_shape).shape) == tuple(sample_shape) + (5, 3)
    assert tuple(D.Normal(0.0, 1.0).sample(sample_shape).shape) == tuple(sample_shape)
    assert tuple(D.Categorical(fl.ones(2, 4)).sample(sample_shape).shape) == tuple(sample_shape) + (2,)
    assert tuple(D.OneHotCategorical(fl.ones(4)).sample(sample_shape).shape) == tuple(sample_shape) + (4,)


def test_float32_parameters_give_float32_results():
    d = D.Normal(fl.zeros(3), fl.ones(3))
    assert d.sample().dtype == fl.float32 and d.log_prob(fl.zeros(3)).dtype == fl.float32
    assert D.Categorical(logits=fl.zeros(3)).sample().dtype == fl.int64
    assert D.Bernoulli(fl.full((3,), 0.5)).sample().dtype == fl.float32
    assert D.Gamma(fl.ones(2), fl.ones(2)).rsample().dtype == fl.float32


def _grads(params):
    return {k: v.grad.numpy() for k, v in params.items() if isinstance(v, fl.Tensor)}


def test_location_scale_rsample_gradients_are_the_pathwise_ones():
    # x = loc + eps * scale: d sum(x) / d loc = n, d sum(x) / d scale = sum(eps) with eps = (x - loc) / scale.
    for name in ("Normal", "Laplace"):
        ours, _, p, _ = build(name, {"loc": [0.3, -1.0], "scale": [0.5, 2.0]}, torch)
        x = ours.rsample((50,))
        x.sum().backward()
        eps = (x.detach().numpy() - p["loc"].detach().numpy()) / p["scale"].detach().numpy()
        g = _grads(p)
        np.testing.assert_allclose(g["loc"], [50, 50])
        np.testing.assert_allclose(g["scale"], eps.sum(0), rtol=1e-10)


def test_exponential_uniform_lognormal_rsample_gradients():
    ours, _, p, _ = build("Exponential", {"rate": [0.5, 2.0]}, torch)
    x = ours.rsample((40,))
    x.sum().backward()
    np.testing.assert_allclose(_grads(p)["rate"], (-x.detach().numpy() / p["rate"].detach().numpy()).sum(0))

    ours, _, p, _ = build("Uniform", {"low": [0.0, -1.0], "high": [1.0, 3.0]}, torch)
    x = ours.rsample((40,)).detach().numpy()
    fl.manual_seed(0)
    x = ours.rsample((40,))
    x.sum().backward()
    low, high = p["low"].detach().numpy(), p["high"].detach().numpy()
    u = (x.detach().numpy() - low) / (high - low)
    np.testing.assert_allclose(_grads(p)["high"], u.sum(0), rtol=1e-10)
    np.testing.assert_allclose(_grads(p)["low"], (1 - u).sum(0), rtol=1e-10)

    ours, _, p, _ = build("LogNormal", {"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, torch)
    x = ours.rsample((40,))
    x.sum().backward()
    y = x.detach().numpy()
    np.testing.assert_allclose(_grads(p)["loc"], y.sum(0), rtol=1e-10)
    np.testing.assert_allclose(_grads(p)["scale"], (y * (np.log(y) - p["loc"].detach().numpy())
                                                    / p["scale"].detach().numpy()).sum(0), rtol=1e-9)


def test_multivariate_normal_rsample_gradient():
    ours, _, p, _ = build("MultivariateNormal", {"loc": [0.1, 0.2, -0.3], "scale_tril": _TRIL[0]}, torch)
    x = ours.rsample((7,))
    w = np.arange(21.0).reshape(7, 3)
    (x * fl.tensor(w, dtype=fl.float64)).sum().backward()
    eps = np.linalg.solve(np.array(_TRIL[0]), (x.detach().numpy() - p["loc"].detach().numpy()).T).T
    np.testing.assert_allclose(_grads(p)["loc"], w.sum(0), rtol=1e-10)
    np.testing.assert_allclose(_grads(p)["scale_tril"], w.T @ eps, rtol=1e-9, atol=1e-10)


def _replay_host_gamma(seed, alpha):
    # Note [Gamma sampling on the host]: one int64 draw from flambeau seeds a numpy Generator.
    fl.manual_seed(seed)
    host_seed = int(fl.randint(0, 2**62, ()))
    return np.random.default_rng(host_seed).standard_gamma(alpha)


def test_gamma_rsample_is_reproducible_and_has_torch_implicit_gradient():
    alpha = np.array([[0.3, 0.9, 2.0, 5.0, 12.0, 40.0]] * 50)
    rate = np.array([1.5, 0.5, 1.0, 2.0, 0.7, 3.0])
    ours, _, p, _ = build("Gamma", {"concentration": alpha[0], "rate": rate}, torch)
    fl.manual_seed(11)
    x = ours.rsample((50,))
    g = _replay_host_gamma(11, alpha)
    np.testing.assert_allclose(x.detach().numpy(), np.maximum(g / rate, np.finfo(np.float64).tiny), rtol=1e-12)
    x.sum().backward()
    dg = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(g)).numpy()
    np.testing.assert_allclose(_grads(p)["concentration"], (dg / rate).sum(0), rtol=1e-9)
    np.testing.assert_allclose(_grads(p)["rate"], (-g / rate**2).sum(0), rtol=1e-9)


def test_standard_gamma_grad_matches_torch_on_all_branches():
    from flambeau.distributions._special import standard_gamma_grad

    alpha, x = np.meshgrid(np.array([0.05, 0.5, 1.0, 3.0, 7.9, 8.5, 20.0, 100.0]),
                           np.array([1e-3, 0.3, 0.79, 0.81, 2.0, 7.5, 9.0, 19.0, 21.0, 95.0, 150.0]))
    expected = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()
    np.testing.assert_allclose(standard_gamma_grad(alpha, x), expected, rtol=1e-9)


def test_dirichlet_and_beta_rsample_gradient_through_gammas():
    alpha = np.array([0.7, 2.0, 4.0])
    ours, _, p, _ = build("Dirichlet", {"concentration": alpha}, torch)
    fl.manual_seed(5)
    x = ours.rsample((30,))
    w = np.linspace(-1, 2, 90).reshape(30, 3)
    (x * fl.tensor(w, dtype=fl.float64)).sum().backward()
    g = _replay_host_gamma(5, np.broadcast_to(alpha, (30, 3)))
    s = g.sum(-1, keepdims=True)
    np.testing.assert_allclose(x.detach().numpy(), g / s, rtol=1e-12)
    dl_dg = (w - (w * g / s).sum(-1, keepdims=True)) / s
    dg = torch._standard_gamma_grad(torch.tensor(np.broadcast_to(alpha, (30, 3)).copy()), torch.tensor(g)).numpy()
    np.testing.assert_allclose(_grads(p)["concentration"], (dl_dg * dg).sum(0), rtol=1e-9)

    beta, _, p, _ = build("Beta", {"concentration1": [2.0], "concentration0": [3.0]}, torch)
    fl.manual_seed(5)
    beta.rsample((1000,)).mean().backward()
    # d mean / d a = b / (a + b)^2 = 0.12, d mean / d b = -a / (a + b)^2 = -0.08, up to Monte Carlo noise.
    assert abs(float(p["concentration1"].grad[0]) - 0.12) < 0.02
    assert abs(float(p["concentration0"].grad[0]) + 0.08) < 0.02


def test_relaxed_rsample_gradients_match_torch_given_the_same_noise():
    ours, theirs, p, tp = build("RelaxedOneHotCategorical", {"temperature": _T, "logits": [[0.2, -1.3, 0.5]]}, torch)
    y = ours.rsample((6,))
    w = np.arange(18.0).reshape(6, 1, 3)
    (y * fl.tensor(w, dtype=fl.float64)).sum().backward()
    # The Gumbel noise, recovered up to a per-row constant (softmax does not see it).
    logits = theirs.logits.detach()
    noise = _T * torch.tensor(np.log(y.detach().numpy())) - logits
    y_t = torch.softmax((theirs.logits + noise) / _T, -1)
    np.testing.assert_allclose(y.detach().numpy(), y_t.detach().numpy(), rtol=1e-10)
    (y_t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(_grads(p)["logits"], tp["logits"].grad.numpy(), rtol=1e-8, atol=1e-10)

    ours, _, p, _ = build("RelaxedBernoulli", {"temperature": _T, "probs": [0.3, 0.8]}, torch)
    y = ours.rsample((20,))
    y.sum().backward()
    yn, pn = y.detach().numpy(), p["probs"].detach().numpy()
    np.testing.assert_allclose(_grads(p)["probs"], (yn * (1 - yn) / (_T * pn * (1 - pn))).sum(0), rtol=1e-8)


def test_enumerate_support_matches_torch():
    for name, params in (("Bernoulli", {"probs": [[0.2, 0.5]]}), ("Categorical", {"probs": [[0.2, 0.8], [0.5, 0.5]]}),
                         ("OneHotCategorical", {"probs": [[0.2, 0.3, 0.5]]})):
        ours, theirs, _, _ = build(name, params, torch, grad=False)
        for expand in (True, False):
            assert_same(ours.enumerate_support(expand), theirs.enumerate_support(expand))


def test_expand_gives_the_same_distribution_on_a_larger_batch():
    for name, params, _, _ in CASES[:21]:
        ours, theirs, _, _ = build(name, params, torch, grad=False)
        new_shape = (4,) + tuple(ours.batch_shape)
        big, tbig = ours.expand(new_shape), theirs.expand(new_shape)
        assert tuple(big.batch_shape) == new_shape and tuple(big.event_shape) == tuple(tbig.event_shape)
        x = tbig.sample()
        assert_same(big.log_prob(fl.tensor(x.numpy())), tbig.log_prob(x))


def test_reinforce_with_categorical_trains_a_policy():
    # The pytorch/examples reinforce.py pattern: sample an action, -log_prob(action) * return.
    fl.manual_seed(0)
    policy = fl.nn.Linear(2, 3)
    opt = fl.optim.Adam(policy.parameters(), lr=0.05)
    state = fl.tensor([[1.0, 0.5]])
    for _ in range(150):
        m = D.Categorical(fl.softmax(policy(state), -1))
        action = m.sample()
        reward = (action == 2).float() - 0.3  # action 2 pays
        loss = (-m.log_prob(action) * reward).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(fl.softmax(policy(state), -1)[0, 2]) > 0.9
