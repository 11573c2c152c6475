"""Student's t distribution."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import digamma, lgamma
from flambeau.distributions.chi2 import Chi2
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    r"""Student's t distribution with ``df`` degrees of freedom, location ``loc`` and scale ``scale``:
    ``loc + scale * X / sqrt(V / df)`` for ``X ~ Normal(0, 1)``, ``V ~ Chi2(df)``.

    Args:
        df (float or Tensor): the degrees of freedom (positive).
        loc (float or Tensor): the location (default 0).
        scale (float or Tensor): the scale (positive, default 1).

    ``mean`` is NaN where ``df <= 1``; ``variance`` is infinite where ``1 < df <= 2`` and NaN where
    ``df <= 1``. ``rsample`` is differentiable w.r.t. all three parameters (``df`` through the
    Gamma sampler's implicit reparameterisation).

    Example::

        >>> m = StudentT(fl.tensor([2.0]))
        >>> m.sample()  # Student's t-distributed with degrees of freedom=2
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        return fl.where(self.df <= 1, fl.full_like(self.loc, math.nan), self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / fl.where(df > 2, df - 2, fl.ones_like(df))
        return fl.where(df > 2, finite, fl.where(df > 1, fl.full_like(df, math.inf), fl.full_like(df, math.nan)))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        y = x * fl.rsqrt(z / self.df)
        return self.loc + self.scale * y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + lgamma(0.5 * self.df)
             - lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * fl.log1p(y**2.0 / self.df) - z

    def entropy(self):
        lbeta = lgamma(0.5 * self.df) + math.lgamma(0.5) - lgamma(0.5 * (self.df + 1))
        return (self.scale.log() + 0.5 * (self.df + 1) * (digamma(0.5 * (self.df + 1)) - digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)
