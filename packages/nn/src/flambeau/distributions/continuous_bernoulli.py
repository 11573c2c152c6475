"""The continuous Bernoulli distribution on ``[0, 1]`` (Loaiza-Ganem & Cunningham, 2019)."""

from __future__ import annotations

import math
from numbers import Number

import flambeau as fl
import flambeau.nn.functional as F
from flambeau.distributions import constraints
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    r"""A continuous Bernoulli distribution, :math:`p(x) = C(\lambda) \lambda^x (1 - \lambda)^{1 - x}` on
    ``[0, 1]``: the properly normalised density of the Bernoulli log-likelihood that VAEs use on
    pixel intensities.

    Args:
        probs (Number or Tensor): :math:`\lambda` in ``(0, 1)``.
        logits (Number or Tensor): its log-odds (give exactly one).
        lims (tuple of float): the interval around 0.5 where a Taylor expansion replaces the
            closed forms, whose normaliser is 0/0 at :math:`\lambda = 1/2`.

    ``rsample`` inverts the CDF of uniform noise, so it is differentiable w.r.t. the parameter.

    Example::

        >>> m = ContinuousBernoulli(fl.tensor([0.3]))
        >>> m.sample()
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # probs is clamped away from 0 and 1 below, which validation would then miss.
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = fl.Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return fl.where(self._outside_unstable_region(), self.probs, self._lims[0] * fl.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """The log normaliser ``log C(probs)``, by a Taylor expansion around 1/2 inside ``lims``."""
        cut_probs = self._cut_probs()
        cut_probs_below_half = fl.where(cut_probs <= 0.5, cut_probs, fl.zeros_like(cut_probs))
        cut_probs_above_half = fl.where(cut_probs >= 0.5, cut_probs, fl.ones_like(cut_probs))
        log_norm = fl.log(fl.abs(fl.log1p(-cut_probs) - fl.log(cut_probs))) - fl.where(
            cut_probs <= 0.5, fl.log1p(-2.0 * cut_probs_below_half), fl.log(2.0 * cut_probs_above_half - 1.0))
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return fl.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (fl.log1p(-cut_probs) - fl.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return fl.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        variances = (cut_probs * (cut_probs - 1.0) / (1.0 - 2.0 * cut_probs).pow(2)
                     + 1.0 / (fl.log1p(-cut_probs) - fl.log(cut_probs)).pow(2))
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return fl.where(self._outside_unstable_region(), variances, taylor)

    @lazy_property
    def logits(self):
        """The log-odds, ``log(probs) - log1p(-probs)``."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        """:math:`\\lambda`, ``sigmoid(logits)`` clamped into ``(0, 1)``."""
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self) -> fl.Size:
        return self._param.size()

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        u = fl.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = (cut_probs.pow(value) * (1.0 - cut_probs).pow(1.0 - value) + cut_probs - 1.0) / (2.0 * cut_probs - 1.0)
        unbounded_cdfs = fl.where(self._outside_unstable_region(), cdfs, value)
        return fl.where(value <= 0.0, fl.zeros_like(value),
                        fl.where(value >= 1.0, fl.ones_like(value), unbounded_cdfs))

    def icdf(self, value):
        cut_probs = self._cut_probs()
        closed = ((fl.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0)) - fl.log1p(-cut_probs))
                  / (fl.log(cut_probs) - fl.log1p(-cut_probs)))
        return fl.where(self._outside_unstable_region(), closed, value)

    def entropy(self):
        log_probs0 = fl.log1p(-self.probs)
        log_probs1 = fl.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        # The log normaliser of the natural parameter; a Taylor expansion around 0 inside lims.
        out_unst_reg = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut_nat_params = fl.where(out_unst_reg, x, (self._lims[0] - 0.5) * fl.ones_like(x))
        log_norm = fl.log(fl.abs(fl.expm1(cut_nat_params))) - fl.log(fl.abs(cut_nat_params))
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return fl.where(out_unst_reg, log_norm, taylor)
