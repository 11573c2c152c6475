"""The transforms and constraint registry (``biject_to``/``transform_to``) added for issue 13,
against torch.distributions: forward, inverse, log-Jacobian and their gradients in float64, and
that the registry maps onto each constraint's support."""

from __future__ import annotations

import numpy as np
import pytest
from _dist_helpers import assert_same, tensor_pair

import flambeau as fl
import flambeau.distributions as D

torch = pytest.importorskip("torch")
T = torch.distributions

_RNG = np.random.default_rng(7)


def _make(lib, name):
    t = lib.transforms
    return {
        "softplus": (t.SoftplusTransform(), (2, 3)),
        "stick_breaking": (t.StickBreakingTransform(), (2, 3)),
        "corr_cholesky": (t.CorrCholeskyTransform(), (2, 6)),
        "lower_cholesky": (t.LowerCholeskyTransform(), (2, 3, 3)),
        "positive_definite": (t.PositiveDefiniteTransform(), (2, 3, 3)),
        "reshape": (t.ReshapeTransform((2, 3), (3, 2)), (4, 2, 3)),
        "cat": (t.CatTransform([t.ExpTransform(), t.AffineTransform(1.0, 3.0)], dim=-1, lengths=[2, 1]), (2, 3)),
        "cat_event": (t.CatTransform([t.IndependentTransform(t.ExpTransform(), 1), t.SoftplusTransform()], dim=0),
                      (2, 3)),
        "stack": (t.StackTransform([t.ExpTransform(), t.SigmoidTransform(), t.SoftplusTransform()], dim=1), (2, 3)),
        "cdf": (t.CumulativeDistributionTransform(lib.Normal(0.5, 2.0)), (2, 3)),
    }[name]


NAMES = ["softplus", "stick_breaking", "corr_cholesky", "lower_cholesky", "positive_definite", "reshape", "cat",
         "stack", "cdf"]


@pytest.mark.parametrize("name", NAMES)
def test_transform_forward_inverse_jacobian_match_torch(name):
    (ours, shape), (theirs, _) = _make(D, name), _make(T, name)
    x_np = _RNG.uniform(-1.5, 1.5, shape)
    x_o = fl.tensor(x_np, dtype=fl.float64, requires_grad=True)
    x_t = torch.tensor(x_np, requires_grad=True)
    y_o, y_t = ours(x_o), theirs(x_t)
    assert_same(y_o, y_t)
    assert_same(ours.inv(y_o), theirs.inv(y_t))
    assert ours.bijective == theirs.bijective
    assert tuple(ours.forward_shape(shape)) == tuple(theirs.forward_shape(shape))
    assert tuple(ours.inverse_shape(tuple(y_t.shape))) == tuple(theirs.inverse_shape(tuple(y_t.shape)))
    assert bool(ours.codomain.check(y_o).all())
    loss_o, loss_t = (y_o * y_o).sum(), (y_t * y_t).sum()
    if theirs.bijective:
        assert_same(ours.log_abs_det_jacobian(x_o, y_o), theirs.log_abs_det_jacobian(x_t, y_t))
        loss_o, loss_t = loss_o + ours.log_abs_det_jacobian(x_o, y_o).sum(), loss_t + theirs.log_abs_det_jacobian(
            x_t, y_t).sum()
    loss_o.backward()
    loss_t.backward()
    assert_same(x_o.grad, x_t.grad)


def test_cat_transform_with_an_event_transform_sums_its_jacobian():
    (ours, shape), (theirs, _) = _make(D, "cat_event"), _make(T, "cat_event")
    assert ours.event_dim == theirs.event_dim == 1
    x_np = _RNG.standard_normal(shape)
    x_o, x_t = tensor_pair(x_np, torch)
    y_o, y_t = ours(x_o), theirs(x_t)
    assert_same(y_o, y_t)
    assert_same(ours.log_abs_det_jacobian(x_o, y_o), theirs.log_abs_det_jacobian(x_t, y_t))


def test_stick_breaking_is_a_bijection_onto_the_simplex_in_a_transformed_distribution():
    # A logistic-normal built by hand, against torch's.
    loc, scale = np.array([0.2, -0.4]), np.array([0.5, 1.2])
    ours = D.TransformedDistribution(D.Independent(D.Normal(fl.tensor(loc), fl.tensor(scale)), 1),
                                     D.StickBreakingTransform())
    theirs = T.TransformedDistribution(T.Independent(T.Normal(torch.tensor(loc), torch.tensor(scale)), 1),
                                       T.StickBreakingTransform())
    v, tv = tensor_pair([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]], torch)
    assert_same(ours.log_prob(v), theirs.log_prob(tv))


# Constraints, with a parameter for the parameterised ones; all registered in torch for both.
def _constraints(lib):
    c = lib.constraints
    return {
        "real": (c.real, (3,)), "positive": (c.positive, (3,)), "nonnegative": (c.nonnegative, (3,)),
        "greater_than": (c.greater_than(1.5), (3,)), "greater_than_eq": (c.greater_than_eq(-2.0), (3,)),
        "less_than": (c.less_than(0.5), (3,)), "unit_interval": (c.unit_interval, (3,)),
        "interval": (c.interval(-1.0, 3.0), (3,)), "half_open_interval": (c.half_open_interval(2.0, 5.0), (3,)),
        "simplex": (c.simplex, (2, 3)), "real_vector": (c.real_vector, (2, 3)),
        "independent_positive": (c.independent(c.positive, 1), (2, 3)),
        "corr_cholesky": (c.corr_cholesky, (2, 3)),
        "cat": (c.cat([c.positive, c.interval(0.0, 2.0)], dim=-1, lengths=[2, 1]), (2, 3)),
        "stack": (c.stack([c.positive, c.real, c.unit_interval], dim=-1), (2, 3)),
        "lower_cholesky": (c.lower_cholesky, (2, 3, 3)), "positive_definite": (c.positive_definite, (2, 3, 3)),
        "positive_semidefinite": (c.positive_semidefinite, (2, 3, 3)),
    }


ONLY_TRANSFORM_TO = {"lower_cholesky", "positive_definite", "positive_semidefinite"}
CONSTRAINTS = list(_constraints(D))


@pytest.mark.parametrize("key", CONSTRAINTS)
def test_biject_to_and_transform_to_match_torch(key):
    (ours_c, shape), (theirs_c, _) = _constraints(D)[key], _constraints(T)[key]
    registries = [(D.transform_to, T.transform_to)]
    if key not in ONLY_TRANSFORM_TO:
        registries.append((D.biject_to, T.biject_to))
    else:
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            D.biject_to(ours_c)
    for ours_reg, theirs_reg in registries:
        ours, theirs = ours_reg(ours_c), theirs_reg(theirs_c)
        assert type(ours).__name__ == type(theirs).__name__
        x_np = _RNG.standard_normal(shape)
        x_o, x_t = tensor_pair(x_np, torch)
        y_o, y_t = ours(x_o), theirs(x_t)
        assert_same(y_o, y_t)
        assert bool(ours_c.check(y_o).all()), key
        if ours_reg is D.biject_to:
            assert_same(ours.inv(y_o), theirs.inv(y_t), atol=1e-9)
            assert_same(ours.log_abs_det_jacobian(x_o, y_o), theirs.log_abs_det_jacobian(x_t, y_t))


def test_registry_register_and_errors():
    registry = D.constraint_registry.ConstraintRegistry()

    @registry.register(D.constraints.positive)
    def _factory(constraint):
        return D.SoftplusTransform()

    assert isinstance(registry(D.constraints.positive), D.SoftplusTransform)
    with pytest.raises(NotImplementedError, match="Cannot transform _Real constraints"):
        registry(D.constraints.real)
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        registry.register(int, _factory)


def test_new_constraints_check_like_torch():
    c, tc = D.constraints, T.constraints
    cases = [
        (c.multinomial(4), tc.multinomial(4), [[1.0, 2.0, 1.0], [3.0, 2.0, 0.0], [-1.0, 2.0, 1.0]]),
        (c.corr_cholesky, tc.corr_cholesky, [[[1.0, 0.0], [0.6, 0.8]], [[1.0, 0.0], [0.6, 0.7]]]),
        (c.positive_semidefinite, tc.positive_semidefinite, [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]]),
        (c.cat([c.positive, c.real], -1, [1, 1]), tc.cat([tc.positive, tc.real], -1, [1, 1]), [[1.0, -1.0], [-1.0, 1]]),
        (c.stack([c.positive, c.real], -1), tc.stack([tc.positive, tc.real], -1), [[1.0, -1.0], [-1.0, 1]]),
    ]
    for ours, theirs, value in cases:
        v, tv = tensor_pair(value, torch)
        np.testing.assert_array_equal(ours.check(v).numpy(), theirs.check(tv).numpy())
        assert ours.event_dim == theirs.event_dim
