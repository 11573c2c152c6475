"""The Laplace (double exponential) distribution."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import _LocationMoments, _LocScale

__all__ = ["Laplace"]


class Laplace(_LocationMoments, _LocScale, Distribution):
    r"""A Laplace distribution, :math:`p(x) = e^{-|x - \mu| / b} / 2b`.

    Args:
        loc (float or Tensor): the mean :math:`\mu`.
        scale (float or Tensor): the scale :math:`b` (positive).

    Example::

        >>> m = Laplace(fl.tensor([0.0]), fl.tensor([1.0]))
        >>> m.sample()  # Laplace distributed with loc=0, scale=1
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = fl.finfo(self.loc.dtype).eps
        u = fl.empty(tuple(shape), dtype=self.loc.dtype, device=self.loc.device).uniform_(eps - 1, 1)
        return self.loc - self.scale * u.sign() * fl.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -fl.log(2 * self.scale) - fl.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * fl.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * fl.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + fl.log(2 * self.scale)
