"""The KL pairs of the distributions added for issue 13 against torch.distributions.kl: values
and gradients w.r.t. both distributions' parameters (float64), including the infinite pairs and
the Bregman-divergence pair of exponential families."""

from __future__ import annotations

import numpy as np
import pytest
from _dist_helpers import assert_same, build

import flambeau as fl
import flambeau.distributions as D

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(11)
_A = _RNG.standard_normal((3, 3))
_COV = (_A @ _A.T + 3 * np.eye(3)).tolist()

# (p's parameters, q's parameters) per family; the q side is used for cross pairs.
PARAMS = {
    "Cauchy": ({"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, {"loc": [1.0, 0.0], "scale": [2.0, 0.7]}),
    "HalfNormal": ({"scale": [0.5, 1.5]}, {"scale": [2.0, 0.7]}),
    "Pareto": ({"scale": [0.5, 1.5], "alpha": [2.5, 3.5]}, {"scale": [0.4, 2.0], "alpha": [2.0, 0.7]}),
    "ContinuousBernoulli": ({"probs": [0.2, 0.7]}, {"logits": [1.0, -0.5]}),
    "LowRankMultivariateNormal": (
        {"loc": [[0.1, 0.2, -0.3], [1.0, 0.0, 2.0]], "cov_factor": _RNG.standard_normal((3, 2)).tolist(),
         "cov_diag": [0.5, 1.0, 2.0]},
        {"loc": [0.5, 0.0, 0.3], "cov_factor": _RNG.standard_normal((2, 3, 1)).tolist(),
         "cov_diag": [[1.5, 0.7, 0.3], [1.0, 1.0, 2.0]]}),
    "MultivariateNormal": ({"loc": [0.1, 0.2, -0.3], "covariance_matrix": _COV},
                           {"loc": [0.5, 0.0, 0.3], "scale_tril": np.linalg.cholesky(_COV).tolist()}),
    "Wishart": ({"df": [3.5, 5.0], "covariance_matrix": _COV}, {"df": 4.0, "scale_tril": np.linalg.cholesky(
        np.asarray(_COV) * 0.5).tolist()}),
    "Beta": ({"concentration1": [0.7, 2.0], "concentration0": [1.5, 3.0]},
             {"concentration1": [1.2, 0.5], "concentration0": [2.5, 1.0]}),
    "Exponential": ({"rate": [0.5, 2.0]}, {"rate": [1.5, 0.3]}),
    "Gamma": ({"concentration": [0.7, 3.0], "rate": [1.5, 0.5]}, {"concentration": [2.0, 1.1], "rate": [0.5, 2.5]}),
    "Gumbel": ({"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, {"loc": [1.0, 0.0], "scale": [2.0, 0.7]}),
    "Laplace": ({"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, None),
    "Normal": ({"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, {"loc": [1.0, 0.0], "scale": [2.0, 0.7]}),
    "Uniform": ({"low": [0.2, 0.5], "high": [0.9, 2.0]}, {"low": [-1.0, 0.1], "high": [2.0, 3.0]}),
    "Bernoulli": ({"probs": [0.2, 0.6]}, None),
    "Poisson": ({"rate": [0.5, 4.0]}, {"rate": [1.5, 2.0]}),
    "Binomial": (None, {"total_count": [10.0, 12.0], "probs": [0.3, 0.8]}),
}

SAME = ["Cauchy", "HalfNormal", "Pareto", "ContinuousBernoulli", "LowRankMultivariateNormal", "Wishart"]
CROSS = [
    ("MultivariateNormal", "LowRankMultivariateNormal"), ("LowRankMultivariateNormal", "MultivariateNormal"),
    ("Pareto", "Exponential"), ("Pareto", "Gamma"), ("Pareto", "Normal"), ("Pareto", "Uniform"),
    ("Pareto", "ContinuousBernoulli"),
    ("Beta", "Pareto"), ("Exponential", "Pareto"), ("Gamma", "Pareto"), ("Gumbel", "Pareto"), ("Laplace", "Pareto"),
    ("Normal", "Pareto"), ("Uniform", "Pareto"),
    ("ContinuousBernoulli", "Exponential"), ("ContinuousBernoulli", "Normal"), ("ContinuousBernoulli", "Uniform"),
    ("ContinuousBernoulli", "Pareto"), ("Beta", "ContinuousBernoulli"), ("Uniform", "ContinuousBernoulli"),
    ("Exponential", "ContinuousBernoulli"), ("Gamma", "ContinuousBernoulli"), ("Gumbel", "ContinuousBernoulli"),
    ("Laplace", "ContinuousBernoulli"), ("Normal", "ContinuousBernoulli"),
    ("Poisson", "Bernoulli"), ("Poisson", "Binomial"), ("Bernoulli", "Poisson"), ("Beta", "Exponential"),
    ("Beta", "Gamma"), ("Beta", "Normal"), ("Beta", "Uniform"), ("Exponential", "Beta"), ("Exponential", "Gumbel"),
    ("Exponential", "Uniform"), ("Gamma", "Beta"), ("Gamma", "Gumbel"), ("Gamma", "Normal"), ("Gamma", "Uniform"),
    ("Gumbel", "Beta"), ("Gumbel", "Exponential"), ("Gumbel", "Gamma"), ("Gumbel", "Normal"), ("Gumbel", "Uniform"),
    ("Laplace", "Beta"), ("Laplace", "Exponential"), ("Laplace", "Gamma"), ("Laplace", "Uniform"),
    ("Normal", "Beta"), ("Normal", "Exponential"), ("Normal", "Gamma"), ("Normal", "Gumbel"), ("Normal", "Uniform"),
    ("Uniform", "Beta"), ("Uniform", "Gumbel"),
]
PAIRS = [(n, n) for n in SAME] + CROSS


@pytest.mark.parametrize("p_name,q_name", PAIRS, ids=[f"{p}-{q}" for p, q in PAIRS])
def test_kl_value_and_gradients_match_torch(p_name, q_name):
    q_params = PARAMS[q_name][1] or PARAMS[q_name][0]
    p, tp, p_params, tp_params = build(p_name, PARAMS[p_name][0], torch)
    q, tq, q_params, tq_params = build(q_name, q_params, torch)
    ours, theirs = D.kl_divergence(p, q), torch.distributions.kl_divergence(tp, tq)
    assert_same(ours, theirs, rtol=1e-8)
    finite = torch.isfinite(theirs)
    if not bool(finite.any()):
        return
    fl.where(fl.tensor(finite.numpy()), ours, fl.zeros_like(ours)).sum().backward()
    theirs[finite].sum().backward()
    for ours_params, their_params in ((p_params, tp_params), (q_params, tq_params)):
        for key, value in ours_params.items():
            if isinstance(value, fl.Tensor) and their_params[key].grad is not None:
                g_ours, g_theirs = value.grad, their_params[key].grad
                if key == "scale_tril":  # the upper triangle is not a parameter (torch's grads there are noise)
                    g_ours, g_theirs = g_ours.tril(), g_theirs.tril()
                assert_same(g_ours, g_theirs, rtol=1e-8)


def test_exponential_family_entropy_from_the_bregman_divergence():
    # A subclass that defines only the natural parameters gets entropy from ExponentialFamily.
    class BareNormal(D.ExponentialFamily):
        arg_constraints = {}

        def __init__(self, loc, scale):
            self.loc, self.scale = loc, scale
            super().__init__(loc.shape)

        _natural_params = D.Normal._natural_params
        _log_normalizer = D.Normal._log_normalizer
        _mean_carrier_measure = 0

    loc = fl.tensor([0.3, -1.0], dtype=fl.float64)
    scale = fl.tensor([0.5, 1.5], dtype=fl.float64, requires_grad=True)
    tscale = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    ours = BareNormal(loc, scale).entropy()
    theirs = torch.distributions.Normal(torch.tensor(loc.numpy()), tscale).entropy()
    assert_same(ours, theirs)
    with pytest.raises(NotImplementedError, match="different exponential families"):
        D.kl_divergence(D.Poisson(fl.ones(2)), D.Wishart(4.0, covariance_matrix=fl.eye(3)))


def test_the_registry_has_torchs_pairs():
    import flambeau.distributions.kl as fk

    ours = {(p.__name__, q.__name__) for p, q in fk._KL_REGISTRY}
    theirs = {(p.__name__, q.__name__) for p, q in torch.distributions.kl._KL_REGISTRY}
    assert ours == theirs
