"""flambeau.distributions.kl against torch.distributions.kl: every registered pair, its value and
its gradient w.r.t. both distributions' parameters, and the registry's dispatch and errors."""

from __future__ import annotations

import numpy as np
import pytest
from _dist_helpers import assert_same, build

import flambeau as fl
import flambeau.distributions as D

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(1)


def _spd(n):
    a = _RNG.standard_normal((n, n))
    return (a @ a.T + n * np.eye(n)).tolist()


PARAMS = {
    "Bernoulli": ({"probs": [0.2, 0.6]}, {"probs": [0.5, 0.9]}),
    "Beta": ({"concentration1": [0.7, 2.0], "concentration0": [1.5, 3.0]},
             {"concentration1": [1.2, 0.5], "concentration0": [2.5, 1.0]}),
    "Binomial": ({"total_count": [10.0, 12.0], "probs": [0.3, 0.8]},
                 {"total_count": [10.0, 10.0], "probs": [0.5, 0.6]}),
    "Categorical": ({"probs": [[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]]}, {"logits": [[0.2, -1.3, 0.5], [2.0, 0.6, 0.3]]}),
    "OneHotCategorical": ({"probs": [[0.2, 0.3, 0.5]]}, {"probs": [[0.4, 0.4, 0.2]]}),
    "Dirichlet": ({"concentration": [[0.7, 2.0, 1.0], [3.0, 2.5, 1.2]]}, {"concentration": [[1.5, 1.0, 0.4]]}),
    "Exponential": ({"rate": [0.5, 2.0]}, {"rate": [1.5, 0.3]}),
    "Gamma": ({"concentration": [0.7, 3.0], "rate": [1.5, 0.5]}, {"concentration": [2.0, 1.1], "rate": [0.5, 2.5]}),
    "Geometric": ({"probs": [0.3, 0.8]}, {"probs": [0.5, 0.2]}),
    "Gumbel": ({"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, {"loc": [1.0, 0.0], "scale": [2.0, 0.7]}),
    "Laplace": ({"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, {"loc": [1.0, 0.0], "scale": [2.0, 0.7]}),
    "LogNormal": ({"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, {"loc": [1.0, 0.0], "scale": [2.0, 0.7]}),
    "MultivariateNormal": ({"loc": [[0.1, 0.2, -0.3], [1.0, 0.0, 2.0]], "covariance_matrix": _spd(3)},
                           {"loc": [0.5, 0.0, 0.3], "scale_tril": np.linalg.cholesky(_spd(3)).tolist()}),
    "Normal": ({"loc": [0.3, -1.0], "scale": [0.5, 1.5]}, {"loc": [1.0, 0.0], "scale": [2.0, 0.7]}),
    "Poisson": ({"rate": [0.5, 4.0]}, {"rate": [1.5, 2.0]}),
    "Uniform": ({"low": [0.0, 0.5], "high": [1.0, 2.0]}, {"low": [-1.0, 1.0], "high": [2.0, 3.0]}),
}

CROSS = [
    ("Exponential", "Gamma"), ("Exponential", "Normal"), ("Gamma", "Exponential"), ("Laplace", "Normal"),
    ("Normal", "Laplace"), ("Uniform", "Normal"), ("Uniform", "Exponential"), ("Uniform", "Gamma"),
]
PAIRS = [(n, n) for n in PARAMS] + CROSS


@pytest.mark.parametrize("p_name,q_name", PAIRS, ids=[f"{p}-{q}" for p, q in PAIRS])
def test_kl_value_and_gradients_match_torch(p_name, q_name):
    p, tp, p_params, tp_params = build(p_name, PARAMS[p_name][0], torch)
    q, tq, q_params, tq_params = build(q_name, PARAMS[q_name][1], torch)
    ours, theirs = D.kl_divergence(p, q), torch.distributions.kl_divergence(tp, tq)
    assert_same(ours, theirs)
    finite = torch.isfinite(theirs)
    fl.where(fl.tensor(finite.numpy()), ours, fl.zeros_like(ours)).sum().backward()
    theirs[finite].sum().backward()
    for params, t_params in ((p_params, tp_params), (q_params, tq_params)):
        for key, value in params.items():
            if t_params[key].grad is None:  # Binomial's total_count
                assert value.grad is None or not bool(value.grad.any())
                continue
            assert_same(value.grad, t_params[key].grad, rtol=1e-8, atol=1e-10)


def test_kl_gives_inf_outside_the_support_as_torch():
    p, tp, _, _ = build("Uniform", {"low": [0.0, -1.0], "high": [1.0, 2.0]}, torch)
    q, tq, _, _ = build("Uniform", {"low": [0.5, -2.0], "high": [2.0, 3.0]}, torch)
    assert_same(D.kl_divergence(p, q), torch.distributions.kl_divergence(tp, tq))
    p, tp, _, _ = build("Bernoulli", {"probs": [0.0, 1.0, 0.5]}, torch)
    q, tq, _, _ = build("Bernoulli", {"probs": [0.5, 1.0, 0.0]}, torch)
    assert_same(D.kl_divergence(p, q), torch.distributions.kl_divergence(tp, tq))


def test_kl_of_independent_sums_the_reinterpreted_dims():
    p, tp, _, _ = build("Normal", {"loc": [[0.3, -1.0]], "scale": [[0.5, 1.5]]}, torch)
    q, tq, _, _ = build("Normal", {"loc": [[1.0, 0.0]], "scale": [[2.0, 0.7]]}, torch)
    ours = D.kl_divergence(D.Independent(p, 1), D.Independent(q, 1))
    theirs = torch.distributions.kl_divergence(torch.distributions.Independent(tp, 1),
                                               torch.distributions.Independent(tq, 1))
    assert_same(ours, theirs)
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Independent(p, 1), D.Independent(p, 2))


def test_unknown_pairs_raise_not_implemented_error():
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Categorical and q "
                                                  "type Normal"):
        D.kl_divergence(D.Categorical(fl.ones(2)), D.Normal(fl.zeros(2), fl.ones(2)))
    # Both exponential families, as in torch: the Bregman-divergence pair matches and refuses.
    with pytest.raises(NotImplementedError, match="different exponential families"):
        D.kl_divergence(D.Poisson(fl.ones(2)), D.Normal(fl.zeros(2), fl.ones(2)))
    lognormal = D.LogNormal(0.0, 1.0)
    other = D.TransformedDistribution(D.Normal(0.0, 1.0), [D.ExpTransform(), D.AffineTransform(0.0, 2.0)])
    with pytest.raises(NotImplementedError):
        D.kl_divergence(lognormal, other)


def test_register_kl_dispatches_to_the_most_specific_pair():
    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 2.0)
    assert float(D.kl_divergence(p, q)) == pytest.approx(float(D.kl_divergence(D.Normal(0.0, 1.0), q)))

    @D.register_kl(MyNormal, D.Normal)
    def _kl_mine(p, q):
        return fl.tensor(42.0)

    try:
        assert float(D.kl_divergence(p, q)) == 42.0  # the memo was cleared by register_kl
        assert float(D.kl_divergence(q, p)) != 42.0
    finally:
        from flambeau.distributions import kl

        del kl._KL_REGISTRY[MyNormal, D.Normal]
        kl._KL_MEMOIZE.clear()
    with pytest.raises(TypeError, match="Expected type_p to be a Distribution subclass"):
        D.register_kl(int, D.Normal)
