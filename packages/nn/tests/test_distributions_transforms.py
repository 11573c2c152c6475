"""flambeau.distributions transforms, TransformedDistribution, Independent, constraints, argument
validation and the special functions the distributions use, against torch."""

from __future__ import annotations

import numpy as np
import pytest
from _dist_helpers import assert_same, tensor_pair

import flambeau as fl
import flambeau.distributions as D
from flambeau.distributions import constraints

torch = pytest.importorskip("torch")
T = torch.distributions


def _transforms(lib, loc, scale):
    t = lib.transforms
    return {
        "exp": t.ExpTransform(),
        "affine": t.AffineTransform(loc, scale),
        "affine_number": t.AffineTransform(0.5, -2.0),
        "sigmoid": t.SigmoidTransform(),
        "tanh": t.TanhTransform(),
        "power": t.PowerTransform(2.5),
        "compose": t.ComposeTransform([t.AffineTransform(loc, scale), t.SigmoidTransform()]),
        "inv_exp": t.ExpTransform().inv,
        "abs": t.AbsTransform(),
        "softmax": t.SoftmaxTransform(),
    }


@pytest.mark.parametrize("name", ["exp", "affine", "affine_number", "sigmoid", "tanh", "power", "compose", "inv_exp",
                                  "abs", "softmax"])
def test_transform_forward_inverse_jacobian_match_torch(name):
    x_np = np.array([[0.3, 1.2, 0.7], [0.1, 0.4, 2.0]])
    loc_o, loc_t = tensor_pair([0.5, -1.0, 0.2], torch)
    scale_o, scale_t = tensor_pair([2.0, -0.5, 1.5], torch)
    ours, theirs = _transforms(D, loc_o, scale_o)[name], _transforms(T, loc_t, scale_t)[name]
    x_o = fl.tensor(x_np, dtype=fl.float64, requires_grad=True)
    x_t = torch.tensor(x_np, requires_grad=True)
    y_o, y_t = ours(x_o), theirs(x_t)
    assert_same(y_o, y_t)
    assert_same(ours.inv(y_o), theirs.inv(y_t))
    assert repr(ours.domain) == repr(theirs.domain) and repr(ours.codomain) == repr(theirs.codomain)
    assert ours.bijective == theirs.bijective
    if theirs.bijective:
        assert_same(ours.log_abs_det_jacobian(x_o, y_o), theirs.log_abs_det_jacobian(x_t, y_t))
        (ours.log_abs_det_jacobian(x_o, y_o).sum() + y_o.sum()).backward()
        (theirs.log_abs_det_jacobian(x_t, y_t).sum() + y_t.sum()).backward()
        assert_same(x_o.grad, x_t.grad)
    assert ours.inv.inv is ours


def test_transform_cache_returns_the_original_input():
    t = D.TanhTransform(cache_size=1)
    x = fl.tensor([30.0], dtype=fl.float64)
    assert t.inv(t(x)) is x
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        D.ExpTransform(cache_size=2)


def test_transformed_distribution_matches_torch():
    loc_o, loc_t = tensor_pair([0.5, -1.0], torch)
    scale_o, scale_t = tensor_pair([2.0, 0.5], torch)
    base_o = D.Normal(fl.zeros(2, dtype=fl.float64), fl.ones(2, dtype=fl.float64))
    base_t = T.Normal(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    ours = D.TransformedDistribution(base_o, [D.AffineTransform(loc_o, scale_o), D.SigmoidTransform()])
    theirs = T.TransformedDistribution(base_t, [T.AffineTransform(loc_t, scale_t), T.SigmoidTransform()])
    v_o, v_t = tensor_pair([0.3, 0.9], torch)
    assert_same(ours.log_prob(v_o), theirs.log_prob(v_t))
    assert_same(ours.cdf(v_o), theirs.cdf(v_t))
    assert_same(ours.icdf(v_o), theirs.icdf(v_t))
    assert repr(ours.support) == repr(theirs.support) and ours.has_rsample
    # A decreasing transform flips the CDF.
    flip_o = D.TransformedDistribution(base_o, D.AffineTransform(0.0, -2.0))
    flip_t = T.TransformedDistribution(base_t, T.AffineTransform(0.0, -2.0))
    assert_same(flip_o.cdf(v_o), flip_t.cdf(v_t))
    # An event-dim transform makes the batch dims event dims.
    vec_o = D.TransformedDistribution(base_o, D.AffineTransform(loc_o, scale_o, event_dim=1))
    vec_t = T.TransformedDistribution(base_t, T.AffineTransform(loc_t, scale_t, event_dim=1))
    assert tuple(vec_o.event_shape) == tuple(vec_t.event_shape) == (2,)
    assert_same(vec_o.log_prob(v_o), vec_t.log_prob(v_t))
    fl.manual_seed(0)
    assert tuple(ours.rsample((5,)).shape) == (5, 2)


def test_independent_matches_torch():
    loc_o, loc_t = tensor_pair(np.arange(6.0).reshape(2, 3), torch)
    ours = D.Independent(D.Normal(loc_o, 1.0), 1)
    theirs = T.Independent(T.Normal(loc_t, 1.0), 1)
    assert tuple(ours.batch_shape) == (2,) and tuple(ours.event_shape) == (3,)
    v_o, v_t = tensor_pair(np.ones((2, 3)), torch)
    assert_same(ours.log_prob(v_o), theirs.log_prob(v_t))
    assert_same(ours.entropy(), theirs.entropy())
    assert repr(ours.support) == repr(theirs.support)
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims <= len"):
        D.Independent(D.Normal(loc_o, 1.0), 3)


CONSTRAINT_VALUES = [
    ("real", [0.0, float("nan"), float("inf")]), ("positive", [0.0, 1.0, -1.0]), ("nonnegative", [0.0, -1e-9]),
    ("unit_interval", [0.0, 1.0, 1.1]), ("boolean", [0.0, 1.0, 0.5]), ("nonnegative_integer", [0.0, 2.0, 1.5, -1.0]),
    ("positive_integer", [0.0, 2.0]), ("simplex", [[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]]),
    ("one_hot", [[0.0, 1.0], [1.0, 1.0]]), ("real_vector", [[0.0, float("nan")], [1.0, 2.0]]),
    ("lower_cholesky", [[[1.0, 0.0], [2.0, 1.0]], [[1.0, 0.5], [0.0, 1.0]], [[-1.0, 0.0], [0.0, 1.0]]]),
    ("positive_definite", [[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 2.0], [0.0, 1.0]]]),
]


@pytest.mark.parametrize("name,value", CONSTRAINT_VALUES, ids=[c[0] for c in CONSTRAINT_VALUES])
def test_constraints_check_as_torch(name, value):
    ours, theirs = getattr(constraints, name), getattr(T.constraints, name)
    v_o, v_t = tensor_pair(value, torch)
    np.testing.assert_array_equal(ours.check(v_o).numpy(), theirs.check(v_t).numpy())
    assert ours.event_dim == theirs.event_dim and ours.is_discrete == theirs.is_discrete
    assert repr(ours) == repr(theirs)


def test_parameterised_constraints():
    v_o, v_t = tensor_pair([0.0, 1.0, 2.0, 3.0, 2.5], torch)
    for args in ((1, 3),):
        for name in ("integer_interval", "interval", "half_open_interval"):
            ours, theirs = getattr(constraints, name)(*args), getattr(T.constraints, name)(*args)
            np.testing.assert_array_equal(ours.check(v_o).numpy(), theirs.check(v_t).numpy())
            assert repr(ours) == repr(theirs)
    for name in ("greater_than", "greater_than_eq", "less_than"):
        np.testing.assert_array_equal(getattr(constraints, name)(1.0).check(v_o).numpy(),
                                      getattr(T.constraints, name)(1.0).check(v_t).numpy())
    assert constraints.is_dependent(D.Uniform.support) and not constraints.is_dependent(constraints.real)
    assert repr(D.Uniform(0.0, 2.0).support) == repr(T.Uniform(0.0, 2.0).support)


def _message(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value).replace("torch.", "flambeau.")


@pytest.mark.parametrize("make", [
    lambda lib: lib.Normal(0.0, -1.0),
    lambda lib: lib.Exponential(0.0),
    lambda lib: lib.Bernoulli(probs=1.5),
    lambda lib: lib.Gamma(1.0, -2.0),
    lambda lib: lib.Normal(0.0, 1.0).log_prob(_scalar(lib, float("nan"))),
    lambda lib: lib.Exponential(1.0).log_prob(_scalar(lib, -1.0)),
    lambda lib: lib.Bernoulli(0.3).log_prob(_scalar(lib, 0.5)),
    lambda lib: lib.Uniform(1.0, 0.0),
    lambda lib: lib.Bernoulli(probs=0.3, logits=0.1),
    lambda lib: lib.Categorical(probs=_scalar(lib, 1.0)),
    lambda lib: lib.Dirichlet(_scalar(lib, 1.0)),
    lambda lib: lib.MultivariateNormal(_scalar(lib, 1.0), covariance_matrix=_scalar(lib, 1.0)),
    lambda lib: lib.MultivariateNormal(_vec(lib), covariance_matrix=_vec(lib), scale_tril=_vec(lib)),
    lambda lib: lib.MultivariateNormal(_vec(lib), scale_tril=_vec(lib)),
    lambda lib: lib.Normal(_vec(lib), 1.0).log_prob(_vec(lib, 3)),
    lambda lib: lib.Dirichlet(_vec(lib)).log_prob(_vec(lib, 3)),
], ids=["scale", "rate", "probs", "gamma-rate", "nan-value", "negative-value", "bool-support", "uniform", "both",
        "categorical-dim", "dirichlet-dim", "mvn-loc-dim", "mvn-two-matrices", "mvn-tril-dim", "broadcast", "event"])
def test_validation_errors_match_torch(make):
    assert _message(lambda: make(D)) == _message(lambda: make(T))


def _scalar(lib, v):
    return (fl if lib is D else torch).tensor(v)


def _vec(lib, n=2):
    return (fl if lib is D else torch).ones(n)


def test_validate_args_can_be_switched_off():
    D.Normal(0.0, -1.0, validate_args=False)
    assert D.Normal(0.0, 1.0, validate_args=False).log_prob(fl.tensor(float("nan"))).isnan()
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


@pytest.mark.parametrize("which", ["resolved", "composite"])
def test_special_functions_match_torch(which):
    # The distributions use fl.lgamma / fl.digamma when tensor-core has them, else composites.
    from flambeau.distributions import _special

    lgamma, digamma = ((_special.lgamma, _special.digamma) if which == "resolved"
                       else (_special._composite_lgamma, _special._composite_digamma))
    x_np = np.array([1e-3, 0.1, 0.5, 1.0, 1.5, 2.0, 7.3, 30.0, 1e3, 1e6])
    x_o = fl.tensor(x_np, dtype=fl.float64, requires_grad=True)
    x_t = torch.tensor(x_np, requires_grad=True)
    assert_same(lgamma(x_o), torch.lgamma(x_t), rtol=1e-12, atol=1e-12)
    assert_same(digamma(x_o), torch.digamma(x_t), rtol=1e-12, atol=1e-12)
    lgamma(x_o).sum().backward()
    torch.lgamma(x_t).sum().backward()
    assert_same(x_o.grad, x_t.grad, rtol=1e-12, atol=1e-12)


def test_repr_and_public_names_match_torch():
    assert repr(D.Normal(fl.zeros(2), 1.0)) == "Normal(loc: flambeau.Size([2]), scale: flambeau.Size([2]))"
    assert repr(D.Categorical(logits=fl.zeros(2, 3))) == "Categorical(logits: flambeau.Size([2, 3]))"
    ours = set(D.__all__)
    for name in ("Bernoulli", "Beta", "Categorical", "Dirichlet", "Distribution", "Exponential", "Gamma",
                 "Geometric", "Gumbel", "Independent", "Laplace", "LogNormal", "MultivariateNormal", "Normal",
                 "OneHotCategorical", "Poisson", "RelaxedBernoulli", "RelaxedOneHotCategorical",
                 "TransformedDistribution", "Uniform", "kl_divergence", "register_kl", "constraints", "transforms"):
        assert name in ours and hasattr(T, name)
    import flambeau.distributions

    assert fl.distributions is flambeau.distributions


def test_composite_cholesky_and_triangular_solve_match_torch():
    # MultivariateNormal uses flambeau.linalg when installed, else these composites.
    from flambeau.distributions._linalg import _composite_cholesky, _composite_solve_triangular

    a = np.random.default_rng(2).standard_normal((2, 4, 4))
    spd = a @ a.transpose(0, 2, 1) + np.eye(4)
    a_o = fl.tensor(spd, dtype=fl.float64, requires_grad=True)
    a_t = torch.tensor(spd, requires_grad=True)
    factor, ok = _composite_cholesky(a_o)
    factor_t = torch.linalg.cholesky(a_t)
    assert bool(ok.all())
    assert_same(factor, factor_t)
    b_o, b_t = tensor_pair(np.arange(12.0).reshape(4, 3), torch)
    x_o = _composite_solve_triangular(factor, b_o)
    x_t = torch.linalg.solve_triangular(factor_t, b_t, upper=False)
    assert_same(x_o, x_t)
    (x_o.sum() + factor.sum()).backward()
    (x_t.sum() + factor_t.sum()).backward()
    assert_same(a_o.grad, a_t.grad, rtol=1e-8, atol=1e-10)
    bad = fl.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=fl.float64)
    assert not bool(_composite_cholesky(bad)[1])
