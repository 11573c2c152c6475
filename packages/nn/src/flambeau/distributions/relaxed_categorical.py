"""The relaxed (Concrete / Gumbel-softmax) one-hot Categorical distributions."""

from __future__ import annotations

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import lgamma
from flambeau.distributions.categorical import Categorical, _CategoricalParameters
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.relaxed_bernoulli import _as_temperature, _Relaxed
from flambeau.distributions.transforms import ExpTransform
from flambeau.distributions.utils import broadcast_all, clamp_probs

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(_CategoricalParameters, Distribution):
    """The log of a :class:`RelaxedOneHotCategorical` sample: Gumbel-perturbed logits divided by the
    temperature, normalised by ``logsumexp`` (event shape ``(K,)``).

    Args:
        temperature (Tensor or float): the relaxation temperature (positive).
        probs (Tensor): event probabilities (last dim ``K``).
        logits (Tensor): unnormalised log-probabilities. Give exactly one of the two.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = _as_temperature(temperature, self._categorical._param)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, fl.Size(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        uniforms = clamp_probs(fl.rand(shape, dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = lgamma(fl.full_like(self.temperature, float(k))) - self.temperature.log().mul(-(k - 1))
        score = logits - value.mul(self.temperature)
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_Relaxed):
    """A relaxed one-hot categorical on the simplex (Gumbel-softmax): ``exp`` of an
    :class:`ExpRelaxedCategorical`; ``rsample`` is differentiable w.r.t. ``probs``/``logits``.

    Example::

        >>> m = RelaxedOneHotCategorical(fl.tensor([2.2]), fl.tensor([0.1, 0.2, 0.3, 0.4]))
        >>> m.sample()
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)
