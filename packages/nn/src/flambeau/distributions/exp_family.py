"""ExponentialFamily: the base of the distributions whose density is
:math:`p_F(x; \\theta) = \\exp(\\langle t(x), \\theta\\rangle - F(\\theta) + k(x))`."""

from __future__ import annotations

import flambeau as fl
from flambeau.distributions.distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    r"""The base class of exponential-family distributions, with density
    :math:`p_F(x; \theta) = \exp(\langle t(x), \theta\rangle - F(\theta) + k(x))`: :math:`\theta` are
    the natural parameters (``_natural_params``), :math:`F` the log normaliser (``_log_normalizer``)
    and :math:`E[k(x)]` the mean carrier measure (``_mean_carrier_measure``).

    A subclass that defines those three gets :meth:`entropy` (and, between two distributions of the
    same subclass, ``kl_divergence``) from the Bregman divergence of :math:`F`, whose gradient
    autograd computes (Nielsen & Nock, 2010).
    """

    @property
    def _natural_params(self):
        """The natural parameters, a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        """The log normaliser :math:`F` of the natural parameters."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        """The expected carrier measure :math:`E[k(x)]`, needed by :meth:`entropy`."""
        raise NotImplementedError

    def entropy(self):
        """The entropy from the Bregman divergence: :math:`F(\\theta) - \\langle\\theta,
        \\nabla F(\\theta)\\rangle - E[k(x)]`, of shape ``batch_shape``."""
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with fl.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = fl.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
