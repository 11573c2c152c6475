"""The Weibull and Pareto distributions, as transformed Exponentials."""

from __future__ import annotations

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import lgamma
from flambeau.distributions.exponential import Exponential
from flambeau.distributions.transformed_distribution import TransformedDistribution
from flambeau.distributions.transforms import AffineTransform, ExpTransform, PowerTransform
from flambeau.distributions.utils import broadcast_all, euler_constant

__all__ = ["Pareto", "Weibull"]


class Weibull(TransformedDistribution):
    r"""A two-parameter Weibull distribution, :math:`F(x) = 1 - e^{-(x/\lambda)^k}`: ``scale * E ** (1/k)``
    for ``E ~ Exponential(1)``.

    Args:
        scale (float or Tensor): :math:`\lambda` (positive).
        concentration (float or Tensor): the shape :math:`k` (positive).

    Example::

        >>> m = Weibull(fl.tensor([1.0]), fl.tensor([1.0]))
        >>> m.sample()  # sample from a Weibull distribution with scale=1, concentration=1
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(fl.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        new.scale = self.scale.expand(tuple(batch_shape))
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new.concentration_reciprocal = new.concentration.reciprocal()
        transforms = [PowerTransform(exponent=new.concentration_reciprocal), AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, self.base_dist.expand(batch_shape), transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * fl.exp(lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        return self.scale * ((self.concentration - 1) / self.concentration) ** self.concentration.reciprocal()

    @property
    def variance(self):
        return self.scale.pow(2) * (fl.exp(lgamma(1 + 2 * self.concentration_reciprocal))
                                    - fl.exp(2 * lgamma(1 + self.concentration_reciprocal)))

    def entropy(self):
        return (euler_constant * (1 - self.concentration_reciprocal)
                + fl.log(self.scale * self.concentration_reciprocal) + 1)


class Pareto(TransformedDistribution):
    r"""A Pareto Type 1 distribution, :math:`p(x) = \alpha s^\alpha / x^{\alpha + 1}` on
    :math:`[s, \infty)`: ``scale * exp(E)`` for ``E ~ Exponential(alpha)``.

    Args:
        scale (float or Tensor): the scale :math:`s` (positive), also the least value.
        alpha (float or Tensor): the shape :math:`\alpha` (positive).

    ``mean`` is infinite where ``alpha <= 1`` and ``variance`` where ``alpha <= 2``.

    Example::

        >>> m = Pareto(fl.tensor([1.0]), fl.tensor([1.0]))
        >>> m.sample()  # sample from a Pareto distribution with scale=1 and alpha=1
    """

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        new.scale = self.scale.expand(tuple(batch_shape))
        new.alpha = self.alpha.expand(tuple(batch_shape))
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, self.base_dist.expand(batch_shape), transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
