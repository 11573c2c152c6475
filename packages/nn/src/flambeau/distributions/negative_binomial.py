"""The negative binomial distribution: failures before ``total_count`` successes."""

from __future__ import annotations

import flambeau as fl
import flambeau.nn.functional as F
from flambeau.distributions import constraints
from flambeau.distributions._special import lgamma
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.gamma import Gamma
from flambeau.distributions.utils import _BinaryParameters, lazy_property

__all__ = ["NegativeBinomial"]


class NegativeBinomial(_BinaryParameters, Distribution):
    r"""The number of successful Bernoulli trials before ``total_count`` failures, each trial
    succeeding with probability ``probs``:
    :math:`P(k) = \binom{k + r - 1}{k} p^k (1 - p)^r` (a Gamma-Poisson mixture, so ``total_count``
    need not be an integer).

    Args:
        total_count (float or Tensor): :math:`r`, the number of failures (non-negative).
        probs (Tensor): the success probability of a trial, in ``[0, 1)``.
        logits (Tensor): its log-odds (give exactly one of ``probs`` and ``logits``).

    Samples are floating, of the parameters' dtype; they draw ``Poisson(Gamma(r, p / (1 - p)))``
    (see Note [Gamma sampling on the host] in ``flambeau/distributions/_special.py``).

    Example::

        >>> m = NegativeBinomial(5, fl.tensor([0.3]))
        >>> m.sample()
    """

    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        (total_count,) = self._set_probs_or_logits(probs, logits, total_count)
        self.total_count = total_count.type_as(self._param)
        super().__init__(self._param.size(), validate_args=validate_args)

    @property
    def mean(self):
        return self.total_count * fl.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / fl.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self):
        # The Gamma(total_count, rate = exp(-logits)) whose draws are the Poisson rates.
        return Gamma(concentration=self.total_count, rate=fl.exp(-self.logits), validate_args=False)

    def sample(self, sample_shape=()):
        with fl.no_grad():
            rate = self._gamma.sample(sample_shape=sample_shape)
            return fl.poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = self.total_count * F.logsigmoid(-self.logits) + value * F.logsigmoid(self.logits)
        log_normalization = -lgamma(self.total_count + value) + lgamma(1.0 + value) + lgamma(self.total_count)
        # The r + k = 0 case: P(0) = 1 for r = 0, and lgamma(0) is infinite.
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0, 0.0)
        return log_unnormalized_prob - log_normalization
