"""The Poisson distribution over the non-negative integers."""

from __future__ import annotations

from numbers import Number

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import lgamma
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    r"""A Poisson distribution, :math:`P(k) = \lambda^k e^{-\lambda} / k!`.

    Args:
        rate (Number or Tensor): the rate :math:`\lambda` (non-negative).

    Samples are floating, of ``rate``'s dtype (``fl.poisson``).

    Example::

        >>> m = Poisson(fl.tensor([4.0]))
        >>> m.sample()  # e.g. tensor([3.])
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = fl.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with fl.no_grad():
            return fl.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - lgamma(value + 1)

    @property
    def _natural_params(self):
        return (fl.log(self.rate),)

    def _log_normalizer(self, x):
        return fl.exp(x)
