"""The Cauchy (Lorentz) distribution and the half-Cauchy on the non-negative reals."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import _LocScale

__all__ = ["Cauchy"]


class Cauchy(_LocScale, Distribution):
    r"""A Cauchy distribution, :math:`p(x) = 1 / (\pi\gamma (1 + ((x - x_0)/\gamma)^2))`: the ratio of
    two independent standard normals, scaled and shifted. It has no mean (NaN) and an infinite
    variance.

    Args:
        loc (float or Tensor): the mode or median :math:`x_0`.
        scale (float or Tensor): the half width at half maximum :math:`\gamma` (positive).

    Example::

        >>> m = Cauchy(fl.tensor([0.0]), fl.tensor([1.0]))
        >>> m.sample()  # sample from a Cauchy distribution with loc=0 and scale=1
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self):
        return fl.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return fl.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        u = fl.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        eps = fl.tan(math.pi * (u - 0.5))  # the standard Cauchy's inverse CDF
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return fl.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return fl.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
