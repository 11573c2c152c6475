"""The Categorical distribution over ``{0, ..., K-1}``, parameterised by ``probs`` or ``logits``."""

from __future__ import annotations

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical"]


class Categorical(Distribution):
    """A categorical distribution over ``K`` categories, given by ``probs`` or ``logits`` whose last
    dim has size ``K`` (the other dims are the batch).

    ``probs`` need only be non-negative with a positive finite sum: they are normalised along the
    last dim. ``logits`` are unnormalised log-probabilities; the ``logits`` attribute holds the
    normalised ones (``logits - logits.logsumexp(-1, keepdim=True)``), as PyTorch's does.

    Samples are int64 tensors of shape ``sample_shape + batch_shape``.

    Example::

        >>> m = Categorical(fl.tensor([0.25, 0.25, 0.25, 0.25]))
        >>> m.sample()  # equal probability of 0, 1, 2, 3
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else fl.Size()
        super().__init__(batch_shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        """The normalised log-probabilities, ``log(probs)`` (clamped)."""
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        """The normalised probabilities, ``softmax(logits, -1)``."""
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> fl.Size:
        return self._param.size()

    @property
    def mean(self):
        return fl.full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return fl.full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        n = 1
        for s in shape[: len(shape) - len(self._batch_shape)]:
            n *= s
        with fl.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = fl.multinomial(probs_2d, n, True).T
        return samples_2d.reshape(tuple(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = fl.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = fl.finfo(self.logits.dtype).min
        logits = fl.clamp(self.logits, min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand=True):
        values = fl.arange(self._num_events, dtype=fl.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class _CategoricalParameters:
    """``probs``, ``logits`` and ``param_shape`` of the distributions built on a ``_categorical``
    (OneHotCategorical, ExpRelaxedCategorical, Multinomial)."""

    @property
    def probs(self):
        """The normalised probabilities (see :class:`Categorical`)."""
        return self._categorical.probs

    @property
    def logits(self):
        """The normalised log-probabilities (see :class:`Categorical`)."""
        return self._categorical.logits

    @property
    def param_shape(self) -> fl.Size:
        return self._categorical.param_shape
