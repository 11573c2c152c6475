"""The log-normal distribution: ``exp`` of a Normal."""

from __future__ import annotations

from flambeau.distributions import constraints
from flambeau.distributions.normal import Normal
from flambeau.distributions.transformed_distribution import TransformedDistribution
from flambeau.distributions.transforms import ExpTransform

__all__ = ["LogNormal"]


class LogNormal(TransformedDistribution):
    """``Y = exp(X)`` for ``X ~ Normal(loc, scale)``.

    Args:
        loc (float or Tensor): the mean of ``log(Y)``.
        scale (float or Tensor): the standard deviation of ``log(Y)`` (positive).

    Example::

        >>> m = LogNormal(fl.tensor([0.0]), fl.tensor([1.0]))
        >>> m.sample()  # log-normal distributed with mean=0 and stddev=1
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc
