"""The Geometric distribution: the number of failures before the first success."""

from __future__ import annotations

import flambeau as fl
import flambeau.nn.functional as F
from flambeau.distributions import constraints
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import _BinaryParameters, broadcast_all

__all__ = ["Geometric"]


class Geometric(_BinaryParameters, Distribution):
    r"""A Geometric distribution, :math:`P(k) = (1 - p)^k p` for :math:`k = 0, 1, \ldots`.

    Args:
        probs (Number or Tensor): the probability of success, in ``(0, 1]``.
        logits (Number or Tensor): its log-odds. Give exactly one of the two.

    Example::

        >>> m = Geometric(fl.tensor([0.3]))
        >>> m.sample()  # underlying Bernoulli has 30% chance 1; 70% chance 0
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)
        if self._validate_args and probs is not None:
            value = self.probs
            valid = value > 0
            if not bool(valid.all()):
                raise ValueError(f"Expected parameter probs ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"of distribution {self!r} to be positive but found invalid values:\n"
                                 f"{value[~valid]}")

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return fl.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        tiny = fl.finfo(self.probs.dtype).tiny
        with fl.no_grad():
            u = fl.rand(shape, dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # 0 * log(0) is 0 here: P(0) = 1 when p = 1.
        probs = fl.where((probs == 1) & (value == 0), fl.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
