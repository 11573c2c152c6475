"""The Exponential distribution with rate ``rate``."""

from __future__ import annotations

from numbers import Number

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.utils import broadcast_all

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    r"""An exponential distribution, :math:`p(x) = \lambda e^{-\lambda x}` for :math:`x \ge 0`.

    Args:
        rate (float or Tensor): the rate :math:`\lambda` (positive), ``1 / mean``.

    Example::

        >>> m = Exponential(fl.tensor([1.0]))
        >>> m.sample()  # Exponential distributed with rate=1
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = fl.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return fl.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return fl.empty(tuple(shape), dtype=self.rate.dtype, device=self.rate.device).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - fl.exp(-self.rate * value)

    def icdf(self, value):
        return -fl.log1p(-value) / self.rate

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -fl.log(-x)

    def entropy(self):
        return 1.0 - fl.log(self.rate)
