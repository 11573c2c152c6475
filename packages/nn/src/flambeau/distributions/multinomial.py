"""The multinomial distribution: counts of ``total_count`` categorical draws."""

from __future__ import annotations

import math

import flambeau as fl
import flambeau.nn.functional as F
from flambeau.distributions import constraints
from flambeau.distributions._special import lgamma
from flambeau.distributions.binomial import Binomial
from flambeau.distributions.categorical import Categorical, _CategoricalParameters
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(_CategoricalParameters, Distribution):
    r"""The counts of each of ``K`` categories in ``total_count`` independent draws of
    ``Categorical(probs)``: :math:`P(x) = n! \prod_k p_k^{x_k} / x_k!`; event shape ``(K,)``.

    Args:
        total_count (int): the number of draws (an int: inhomogeneous counts are not supported,
            as in PyTorch; ``log_prob`` does not need it, ``sample`` and ``entropy`` do).
        probs (Tensor): the (unnormalised) category probabilities, last dim ``K``.
        logits (Tensor): the unnormalised log-probabilities (give exactly one).

    Samples are floating, of the parameters' dtype.

    Example::

        >>> m = Multinomial(100, fl.tensor([1.0, 1.0, 1.0, 1.0]))
        >>> m.sample()  # equal probability of 0, 1, 2, 3; e.g. tensor([21., 24., 30., 25.])
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs, validate_args=False)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    def sample(self, sample_shape=()):
        sample_shape = tuple(fl.Size(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,))
        with fl.no_grad():
            # total_count categorical draws along a new leading dim, counted per category.
            draws = self._categorical.sample((self.total_count,) + sample_shape)
            counts = F.one_hot(draws, self._categorical._num_events).sum(0)
            return counts.reshape(tuple(self._extended_shape(sample_shape))).to(self.probs.dtype)

    def entropy(self):
        n = fl.tensor(float(self.total_count), dtype=self.probs.dtype)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = fl.exp(self._binomial.log_prob(support))
        weights = lgamma(support + 1)
        term2 = (binomial_probs * weights).sum([0, -1])
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        # 0 * log(0) counts as 0: a category of probability 0 that was never drawn.
        logits = fl.where((value == 0) & (logits == -math.inf), fl.zeros_like(logits), logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
