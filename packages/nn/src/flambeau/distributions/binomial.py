"""The Binomial distribution: the number of successes in ``total_count`` Bernoulli trials."""

from __future__ import annotations

import numpy as np

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import host_sample, lgamma
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import _BinaryParameters

__all__ = ["Binomial"]


def _clamp_by_zero(x):
    # max(x, 0) with gradient 1/2 at 0, as torch's.
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_BinaryParameters, Distribution):
    r"""A Binomial distribution, :math:`P(k) = \binom{n}{k} p^k (1 - p)^{n - k}`.

    Args:
        total_count (int or Tensor): the number of trials :math:`n` (broadcast with the
            probabilities; kept in their floating dtype).
        probs (Tensor): the probability of success of each trial.
        logits (Tensor): its log-odds. Give exactly one of the two.

    Sampling draws on the host (numpy's binomial, seeded from flambeau's generator; see
    Note [Gamma sampling on the host] in ``flambeau/distributions/_special.py``).

    Example::

        >>> m = Binomial(100, fl.tensor([0, 0.2, 0.8, 1]))
        >>> m.sample()  # e.g. tensor([  0.,  22.,  71., 100.])
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        (total_count,) = self._set_probs_or_logits(probs, logits, total_count)
        self.total_count = total_count.type_as(self._param)
        super().__init__(self._param.size(), validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with fl.no_grad():
            n = self.total_count.expand(shape).cpu().numpy().astype(np.int64)
            p = self.probs.expand(shape).cpu().numpy().astype(np.float64)
            return host_sample(self.probs, lambda rng: rng.binomial(n, p))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = lgamma(self.total_count + 1)
        log_factorial_k = lgamma(value + 1)
        log_factorial_nmk = lgamma(self.total_count - value + 1)
        # log1p(exp(-|logits|)) + max(logits, 0) is a stable log(1 + exp(logits)).
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * fl.log1p(fl.exp(-fl.abs(self.logits))) - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def _homogeneous_count(self, what: str) -> int:
        total_count = int(self.total_count.max())
        if not float(self.total_count.min()) == total_count:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total_count

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(fl.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total_count = self._homogeneous_count("enumerate_support")
        values = fl.arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
