"""The inverse-Gamma, Kumaraswamy and logistic-normal distributions: transformed Gamma, Uniform
and Normal distributions."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import digamma, lgamma
from flambeau.distributions.gamma import Gamma
from flambeau.distributions.normal import Normal
from flambeau.distributions.transformed_distribution import TransformedDistribution
from flambeau.distributions.transforms import AffineTransform, PowerTransform, StickBreakingTransform
from flambeau.distributions.uniform import Uniform
from flambeau.distributions.utils import broadcast_all, euler_constant

__all__ = ["InverseGamma", "Kumaraswamy", "LogisticNormal"]


class InverseGamma(TransformedDistribution):
    r"""``1 / X`` for ``X ~ Gamma(concentration, rate)``:
    :math:`p(x) = \beta^\alpha x^{-\alpha - 1} e^{-\beta / x} / \Gamma(\alpha)`.

    Args:
        concentration (float or Tensor): the shape :math:`\alpha` (positive).
        rate (float or Tensor): the scale :math:`\beta` (positive; the rate of ``X``).

    ``mean`` is infinite where ``concentration <= 1``, ``variance`` where ``concentration <= 2``.

    Example::

        >>> m = InverseGamma(fl.tensor([2.0]), fl.tensor([3.0]))
        >>> m.sample()
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -fl.ones((), dtype=base_dist.rate.dtype, device=base_dist.rate.device)
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        result = self.rate / (self.concentration - 1)
        return fl.where(self.concentration > 1, result, fl.full_like(result, math.inf))

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        result = self.rate.square() / ((self.concentration - 1).square() * (self.concentration - 2))
        return fl.where(self.concentration > 2, result, fl.full_like(result, math.inf))

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + lgamma(c) - (1 + c) * digamma(c)


def _moments(a, b, n):
    """The ``n``-th raw moment of Kumaraswamy(a, b): ``b * B(1 + n / a, b)``."""
    arg1 = 1 + n / a
    log_value = lgamma(arg1) + lgamma(b) - lgamma(arg1 + b)
    return b * fl.exp(log_value)


class Kumaraswamy(TransformedDistribution):
    r"""A Kumaraswamy distribution, :math:`p(x) = a b x^{a - 1} (1 - x^a)^{b - 1}` on ``[0, 1]``: like a
    Beta, but with a closed-form CDF, hence a cheap ``rsample`` (``(1 - (1 - U)^{1/b})^{1/a}``).

    Args:
        concentration1 (float or Tensor): :math:`a` (positive).
        concentration0 (float or Tensor): :math:`b` (positive).

    Example::

        >>> m = Kumaraswamy(fl.tensor([1.0]), fl.tensor([1.0]))
        >>> m.sample()  # sample from a Kumaraswamy distribution with concentration alpha=1 and beta=1
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(fl.full_like(self.concentration0, 0), fl.full_like(self.concentration0, 1),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        transforms = [PowerTransform(exponent=new.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=new.concentration1.reciprocal())]
        TransformedDistribution.__init__(new, self.base_dist.expand(batch_shape), transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        # The mode is at 0 or 1 (NaN here, as in PyTorch) unless both concentrations are >= 1.
        log_mode = (self.concentration0.reciprocal() * (-self.concentration0).log1p()
                    - (-self.concentration0 * self.concentration1).log1p())
        log_mode = fl.where((self.concentration0 < 1) | (self.concentration1 < 1), fl.full_like(log_mode, math.nan),
                            log_mode)
        return log_mode.exp()

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * h0 - fl.log(self.concentration1) - fl.log(self.concentration0)


class LogisticNormal(TransformedDistribution):
    r"""A logistic-normal distribution on the simplex: ``StickBreakingTransform()(X)`` for
    ``X ~ Normal(loc, scale)`` with independent last dim (of size ``K - 1`` for a ``K``-simplex).

    Args:
        loc (float or Tensor): the mean of ``X``.
        scale (float or Tensor): its standard deviation (positive).

    Example::

        >>> m = LogisticNormal(fl.tensor([0.0] * 3), fl.tensor([1.0] * 3))
        >>> m.sample()  # a point of the 4-simplex
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale
