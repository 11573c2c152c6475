"""The Normal (Gaussian) distribution."""

from __future__ import annotations

import math
from numbers import Real

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.utils import _LocationMoments, _standard_normal, broadcast_all

__all__ = ["Normal"]


class Normal(_LocationMoments, ExponentialFamily):
    r"""A normal distribution with mean ``loc`` and standard deviation ``scale``:
    :math:`p(x) = \exp(-(x - \mu)^2 / 2\sigma^2) / \sqrt{2\pi}\sigma`.

    Args:
        loc (float or Tensor): the mean.
        scale (float or Tensor): the standard deviation (positive).

    ``batch_shape`` is the broadcast shape of ``loc`` and ``scale``; events are scalars.

    Example::

        >>> m = Normal(fl.tensor([0.0]), fl.tensor([1.0]))
        >>> m.sample()  # normally distributed with loc=0 and scale=1
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        if isinstance(loc, Real) and isinstance(scale, Real):
            batch_shape = fl.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with fl.no_grad():
            return fl.normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale**2
        log_scale = math.log(self.scale) if isinstance(self.scale, Real) else self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + fl.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * fl.erfinv(2 * value - 1) * math.sqrt(2)

    @property
    def _natural_params(self):
        return (self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal())

    def _log_normalizer(self, x, y):
        return -0.25 * x.pow(2) / y + 0.5 * fl.log(-math.pi / y)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + fl.log(self.scale)
