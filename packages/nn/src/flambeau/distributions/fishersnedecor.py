"""The Fisher-Snedecor (F) distribution."""

from __future__ import annotations

import math
from numbers import Number

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import lgamma
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.gamma import Gamma
from flambeau.distributions.utils import broadcast_all

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    r"""A Fisher-Snedecor (F) distribution with ``df1`` and ``df2`` degrees of freedom: the ratio
    ``(U1 / df1) / (U2 / df2)`` of two scaled independent chi-squared variables.

    Args:
        df1 (float or Tensor): the numerator's degrees of freedom (positive).
        df2 (float or Tensor): the denominator's degrees of freedom (positive).

    ``mean`` is NaN where ``df2 <= 2``, ``mode`` where ``df1 <= 2`` and ``variance`` where
    ``df2 <= 4``.

    Example::

        >>> m = FisherSnedecor(fl.tensor([1.0]), fl.tensor([2.0]))
        >>> m.sample()  # Fisher-Snedecor-distributed with df1=1 and df2=2
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        batch_shape = fl.Size() if isinstance(df1, Number) and isinstance(df2, Number) else self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        df2 = fl.where(self.df2 <= 2, fl.full_like(self.df2, math.nan), self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return fl.where(self.df1 <= 2, fl.full_like(mode, math.nan), mode)

    @property
    def variance(self):
        df2 = fl.where(self.df2 <= 4, fl.full_like(self.df2, math.nan), self.df2)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        # X1 ~ df1^-1 Chi2(df1), X2 ~ df2^-1 Chi2(df2), Y = X1 / X2 ~ F(df1, df2).
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = fl.finfo(x2.dtype).tiny
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = lgamma(ct1 + ct2) - lgamma(ct1) - lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * fl.log(value)
        t3 = (ct1 + ct2) * fl.log1p(ct3 * value)
        return t1 + t2 - t3
