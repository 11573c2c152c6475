"""The Gamma distribution, parameterised by shape (``concentration``) and ``rate``."""

from __future__ import annotations

from numbers import Number

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import digamma, gammainc, lgamma, standard_gamma
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.utils import _xlogy, broadcast_all

__all__ = ["Gamma"]


class Gamma(ExponentialFamily):
    r"""A Gamma distribution, :math:`p(x) = \beta^\alpha x^{\alpha - 1} e^{-\beta x} / \Gamma(\alpha)`.

    Args:
        concentration (float or Tensor): the shape :math:`\alpha` (positive).
        rate (float or Tensor): the rate :math:`\beta` (positive), ``1 / scale``.

    Sampling draws on the host with a numpy generator seeded from flambeau's, and ``rsample`` is
    differentiable w.r.t. ``concentration`` by implicit reparameterisation (see
    Note [Gamma sampling on the host] in ``flambeau/distributions/_special.py``).

    Example::

        >>> m = Gamma(fl.tensor([1.0]), fl.tensor([1.0]))
        >>> m.sample()  # Gamma distributed with concentration=1 and rate=1
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, Number) and isinstance(rate, Number):
            batch_shape = fl.Size()
        else:
            batch_shape = self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        # Samples of 0 would give log_prob of -inf (or NaN); torch clamps them to the smallest normal.
        return value.clamp(min=fl.finfo(value.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return fl.xlogy(c, r) + _xlogy(c - 1, value) - r * value - lgamma(c)

    def cdf(self, value):
        """``P(concentration, rate * value)``, the regularised incomplete gamma function;
        differentiable w.r.t. ``value`` and ``rate`` (not ``concentration``, as in PyTorch)."""
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return lgamma(x + 1) + (x + 1) * fl.log(-y.reciprocal())

    def entropy(self):
        c = self.concentration
        return c - fl.log(self.rate) + lgamma(c) + (1.0 - c) * digamma(c)
