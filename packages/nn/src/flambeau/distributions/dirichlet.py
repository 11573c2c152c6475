"""The Dirichlet distribution over the probability simplex."""

from __future__ import annotations

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import digamma, lgamma, standard_gamma
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.utils import _xlogy

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    r"""A Dirichlet distribution with concentration :math:`\alpha` (positive, last dim ``K``):
    :math:`p(x) \propto \prod_k x_k^{\alpha_k - 1}` on the simplex; event shape ``(K,)``.

    ``rsample`` normalises independent Gamma samples, ``x = g / g.sum(-1)`` with
    ``g_k ~ Gamma(alpha_k, 1)``; its gradient w.r.t. the concentration is that of the Gamma
    implicit reparameterisation (PyTorch differentiates the Dirichlet's marginal CDF instead: both
    are unbiased, but their per-sample values differ).

    Example::

        >>> m = Dirichlet(fl.tensor([0.5, 0.5]))
        >>> m.sample()  # Dirichlet distributed with concentration [0.5, 0.5]
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        gammas = standard_gamma(self.concentration.expand(shape))
        gammas = gammas.clamp(min=fl.finfo(gammas.dtype).tiny)
        return gammas / gammas.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return _xlogy(c - 1.0, value).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, True)
        # Where every concentration is below 1 the density peaks at a vertex: torch picks the
        # vertex of the largest (clamped, hence NaN -> first) entry.
        mask = (self.concentration < 1).all(-1, keepdim=True)
        vertex = fl.nn.functional.one_hot(mode.argmax(-1), cm1.shape[-1]).to(mode.dtype)
        return fl.where(mask, vertex, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return lgamma(x).sum(-1) - lgamma(x.sum(-1))

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return lgamma(c).sum(-1) - lgamma(a0) - (k - a0) * digamma(a0) - ((c - 1.0) * digamma(c)).sum(-1)
