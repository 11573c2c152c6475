"""The relaxed (Concrete / Gumbel-sigmoid) Bernoulli distributions."""

from __future__ import annotations

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.transformed_distribution import TransformedDistribution
from flambeau.distributions.transforms import SigmoidTransform
from flambeau.distributions.utils import _BinaryParameters, broadcast_all, clamp_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


def _as_temperature(temperature, like):
    if isinstance(temperature, fl.Tensor):
        return temperature
    return fl.tensor(float(temperature), dtype=like.dtype, device=like.device)


class LogitRelaxedBernoulli(_BinaryParameters, Distribution):
    """The logit of a :class:`RelaxedBernoulli` sample (Maddison et al., 2017; Jang et al., 2017).

    Args:
        temperature (Tensor or float): the relaxation temperature (positive).
        probs (Number or Tensor): the probability of ``1``.
        logits (Number or Tensor): its log-odds. Give exactly one of the two.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._set_probs_or_logits(probs, logits)
        self.temperature = _as_temperature(temperature, self._param)
        super().__init__(self._param.size(), validate_args=validate_args)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(fl.rand(shape, dtype=probs.dtype, device=probs.device))
        return (uniforms.log() - (-uniforms).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class _Relaxed(TransformedDistribution):
    """The parameters of a relaxed distribution, read from its base distribution."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_Relaxed):
    """A relaxed Bernoulli on ``(0, 1)``: ``sigmoid`` of a :class:`LogitRelaxedBernoulli`; its
    ``rsample`` is differentiable w.r.t. ``probs``/``logits`` and tends to Bernoulli samples as the
    temperature goes to 0.

    Example::

        >>> m = RelaxedBernoulli(fl.tensor([2.2]), fl.tensor([0.1, 0.2, 0.3, 0.99]))
        >>> m.sample()
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)
