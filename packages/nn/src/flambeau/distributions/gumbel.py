"""The Gumbel (type-I extreme value) distribution."""

from __future__ import annotations

import math
from numbers import Number

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.transformed_distribution import TransformedDistribution
from flambeau.distributions.transforms import AffineTransform, ExpTransform
from flambeau.distributions.uniform import Uniform
from flambeau.distributions.utils import broadcast_all, euler_constant

__all__ = ["Gumbel"]


class Gumbel(TransformedDistribution):
    r"""A Gumbel distribution, :math:`p(x) = e^{-(z + e^{-z})} / \beta` with :math:`z = (x - \mu)/\beta`;
    sampled as ``loc - scale * log(-log(U))`` for ``U ~ Uniform(tiny, 1 - eps)``.

    Args:
        loc (float or Tensor): the location :math:`\mu`.
        scale (float or Tensor): the scale :math:`\beta` (positive).

    Example::

        >>> m = Gumbel(fl.tensor([1.0]), fl.tensor([2.0]))
        >>> m.sample()  # sample from Gumbel distribution with loc=1, scale=2
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        finfo = fl.finfo(self.loc.dtype)
        if isinstance(loc, Number) and isinstance(scale, Number):
            base_dist = Uniform(finfo.tiny, 1 - finfo.eps, validate_args=validate_args)
        else:
            base_dist = Uniform(fl.full_like(self.loc, finfo.tiny), fl.full_like(self.loc, 1 - finfo.eps),
                                validate_args=validate_args)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-fl.ones_like(self.scale)),
                      ExpTransform().inv, AffineTransform(loc=self.loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * euler_constant

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + euler_constant)
