"""The generalised Pareto distribution (peaks over a threshold)."""

from __future__ import annotations

import math
from numbers import Number, Real

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    r"""A generalised Pareto distribution, :math:`F(x) = 1 - (1 + \xi z)^{-1/\xi}` with
    :math:`z = (x - \mu) / \sigma` (:math:`1 - e^{-z}` at :math:`\xi = 0`): supported on
    :math:`[\mu, \infty)` for :math:`\xi \ge 0` and on :math:`[\mu, \mu - \sigma/\xi]` for :math:`\xi < 0`.

    Args:
        loc (float or Tensor): :math:`\mu`.
        scale (float or Tensor): :math:`\sigma` (positive).
        concentration (float or Tensor): the shape :math:`\xi`.

    ``mean`` is NaN where ``concentration >= 1`` and ``variance`` where ``concentration >= 1/2``.

    Example::

        >>> m = GeneralizedPareto(fl.tensor([0.1]), fl.tensor([2.0]), fl.tensor([0.4]))
        >>> m.sample()
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        scalar = all(isinstance(v, Number) for v in (loc, scale, concentration))
        super().__init__(fl.Size() if scalar else self.loc.size(), validate_args=validate_args)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        u = fl.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def _safe_concentration(self):
        # The xi = 0 limit takes its own branch; 1 keeps the other branch finite (and its gradient).
        eq_zero = fl.isclose(self.concentration, fl.zeros_like(self.concentration))
        return eq_zero, fl.where(eq_zero, fl.ones_like(self.concentration), self.concentration)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + fl.ones_like(z)
        where_nonzero = fl.where(y == 0, y, y * fl.log1p(safe_conc * z))
        log_scale = math.log(self.scale) if isinstance(self.scale, Real) else self.scale.log()
        return -log_scale - fl.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        """``log(1 - cdf(value))``."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        where_nonzero = -fl.log1p(safe_conc * z) / safe_conc
        return fl.where(eq_zero, -z, where_nonzero)

    def log_cdf(self, value):
        """``log(cdf(value))``."""
        return fl.log1p(-fl.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return fl.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe_conc = self._safe_concentration()
        logu = fl.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * fl.expm1(-safe_conc * logu)
        where_zero = self.loc - self.scale * logu
        return fl.where(eq_zero, where_zero, where_nonzero)

    def _z(self, x):
        return (x - self.loc) / self.scale

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = fl.where(valid, self.concentration, fl.full_like(self.concentration, 0.5))
        result = self.loc + self.scale / (1 - safe_conc)
        return fl.where(valid, result, fl.full_like(result, math.nan))

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = fl.where(valid, self.concentration, fl.full_like(self.concentration, 0.25))
        result = self.scale**2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return fl.where(valid, result, fl.full_like(result, math.nan))

    def entropy(self):
        ans = fl.log(self.scale) + self.concentration + 1
        return ans.expand(tuple(self._batch_shape))

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = fl.where(self.concentration < 0, lower - self.scale / self.concentration,
                         fl.full_like(lower, math.inf))
        return constraints.interval(lower, upper)
