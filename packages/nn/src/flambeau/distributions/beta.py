"""The Beta distribution on ``[0, 1]``, a two-category Dirichlet."""

from __future__ import annotations

from numbers import Real

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import lgamma
from flambeau.distributions.dirichlet import Dirichlet
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.utils import broadcast_all

__all__ = ["Beta"]


class Beta(ExponentialFamily):
    r"""A Beta distribution, :math:`p(x) \propto x^{\alpha - 1} (1 - x)^{\beta - 1}` on ``[0, 1]``.

    Args:
        concentration1 (float or Tensor): :math:`\alpha` (positive).
        concentration0 (float or Tensor): :math:`\beta` (positive).

    Example::

        >>> m = Beta(fl.tensor([0.5]), fl.tensor([0.5]))
        >>> m.sample()  # Beta distributed with concentration concentration1 and concentration0
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, Real) and isinstance(concentration0, Real):
            both = fl.tensor([float(concentration1), float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            both = fl.stack([concentration1, concentration0], -1)
        self._dirichlet = Dirichlet(both, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, new._dirichlet.batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = fl.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    @property
    def _natural_params(self):
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return lgamma(x) + lgamma(y) - lgamma(x + y)

    def entropy(self):
        return self._dirichlet.entropy()

    @property
    def concentration1(self):
        """:math:`\\alpha`, the first concentration."""
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        """:math:`\\beta`, the second concentration."""
        return self._dirichlet.concentration[..., 1]
