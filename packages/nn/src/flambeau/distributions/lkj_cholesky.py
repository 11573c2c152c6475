"""The LKJ distribution over Cholesky factors of correlation matrices."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._special import lgamma
from flambeau.distributions.beta import Beta
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import broadcast_all

__all__ = ["LKJCholesky"]


def _mvlgamma(a, p: int):
    """The multivariate log-gamma ``log Gamma_p(a)``: ``p (p - 1) / 4 log(pi) + sum_i lgamma(a - i / 2)``."""
    return p * (p - 1) / 4 * math.log(math.pi) + sum(lgamma(a - i / 2) for i in range(p))


class LKJCholesky(Distribution):
    r"""The LKJ distribution over lower Cholesky factors ``L`` of ``dim x dim`` correlation
    matrices ``M = L L^T``: :math:`p(M) \propto \det(M)^{\eta - 1}` (Lewandowski, Kurowicka & Joe,
    2009). ``concentration`` :math:`\eta = 1` is uniform over correlation matrices; larger values
    favour the identity.

    Args:
        dim (int): the side of the matrices (at least 2).
        concentration (float or Tensor): :math:`\eta` (positive); its shape is the batch shape.

    ``sample`` is the onion method (Ghosh & Henderson, 2003), drawing its Beta variates on the host
    (see Note [Gamma sampling on the host] in ``flambeau/distributions/_special.py``).

    Example::

        >>> l = LKJCholesky(3, 0.5)
        >>> l.sample()  # l @ l.mT is a sample of a correlation 3x3 matrix
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = fl.Size((dim, dim))
        # The Beta(i / 2, eta + (dim - 2 - i) / 2) of the squared norm of each row's off-diagonal part.
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = fl.arange(self.dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = fl.cat([fl.zeros((1,), dtype=offset.dtype, device=offset.device), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        return new

    def sample(self, sample_shape=()):
        with fl.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = fl.randn(tuple(self._extended_shape(sample_shape)), dtype=y.dtype, device=y.device).tril(-1)
            norm = u_normal.pow(2).sum(-1, keepdim=True).sqrt()
            # Row 0 is all zeros (0/0 above): it has no off-diagonal part.
            row = fl.arange(self.dim, device=y.device).reshape(self.dim, 1)
            u_hypersphere = fl.where(row == 0, fl.zeros_like(u_normal), u_normal / norm)
            w = fl.sqrt(y) * u_hypersphere
            # The diagonal completes each row to unit norm.
            eps = fl.finfo(w.dtype).tiny
            diag_elems = fl.clamp(1 - (w**2).sum(-1), min=eps).sqrt()
            return w + fl.diag_embed(diag_elems)

    def log_prob(self, value):
        # Only the diagonal matters: log p(L) = sum_i (dim - i + 2 (eta - 1)) log L_ii - log Z (the
        # density of L, not of M = L L^T).
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = fl.arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = lgamma(alpha) * dm1
        numerator = _mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        normalize_term = pi_constant + numerator - denominator
        return unnormalized_log_pdf - normalize_term
