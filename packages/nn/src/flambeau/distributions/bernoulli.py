"""The Bernoulli distribution, parameterised by ``probs`` or ``logits``."""

from __future__ import annotations

import flambeau as fl
import flambeau.nn.functional as F
from flambeau.distributions import constraints
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.utils import _BinaryParameters, broadcast_all

__all__ = ["Bernoulli"]


class Bernoulli(_BinaryParameters, ExponentialFamily):
    """A Bernoulli distribution: ``1`` with probability ``probs``, else ``0``.

    Args:
        probs (Number or Tensor): the probability of sampling ``1``.
        logits (Number or Tensor): the log-odds of sampling ``1``. Give exactly one of the two.

    Samples are floating (``probs``' dtype) 0/1 tensors of shape ``batch_shape`` (``probs.shape``).

    Example::

        >>> m = Bernoulli(fl.tensor([0.3]))
        >>> m.sample()  # 30% chance 1; 70% chance 0
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return fl.where(self.probs == 0.5, fl.full((), float("nan"), dtype=mode.dtype), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with fl.no_grad():
            return fl.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    @property
    def _natural_params(self):
        return (self.probs.log() - (-self.probs).log1p(),)  # logit(probs)

    def _log_normalizer(self, x):
        return fl.log1p(fl.exp(x))

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = fl.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
