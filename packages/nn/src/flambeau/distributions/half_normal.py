"""The half-normal and half-Cauchy distributions: ``|X|`` for a centred Normal or Cauchy ``X``."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.cauchy import Cauchy
from flambeau.distributions.normal import Normal
from flambeau.distributions.transformed_distribution import TransformedDistribution
from flambeau.distributions.transforms import AbsTransform

__all__ = ["HalfCauchy", "HalfNormal"]


class _Folded(TransformedDistribution):
    """``|X|`` for ``X`` symmetric about 0: the density doubles on ``[0, inf)``."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return fl.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return fl.where(value >= 0, log_prob, fl.full_like(log_prob, -math.inf))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Folded):
    r"""``|X|`` for ``X ~ Normal(0, scale)``: :math:`p(x) = \sqrt{2/\pi}\,e^{-x^2/2\sigma^2}/\sigma` for
    :math:`x \ge 0`.

    Args:
        scale (float or Tensor): the scale of the full Normal (positive).

    Example::

        >>> m = HalfNormal(fl.tensor([1.0]))
        >>> m.sample()  # half-normal distributed with scale=1
    """

    def __init__(self, scale, validate_args=None):
        super().__init__(Normal(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


class HalfCauchy(_Folded):
    r"""``|X|`` for ``X ~ Cauchy(0, scale)``: :math:`p(x) = 2 / (\pi\gamma(1 + (x/\gamma)^2))` for
    :math:`x \ge 0`; its mean and variance are infinite.

    Args:
        scale (float or Tensor): the scale of the full Cauchy (positive).

    Example::

        >>> m = HalfCauchy(fl.tensor([1.0]))
        >>> m.sample()  # half-Cauchy distributed with scale=1
    """

    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    @property
    def mean(self):
        return fl.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance
