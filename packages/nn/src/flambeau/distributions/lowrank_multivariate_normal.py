"""The multivariate normal with a low-rank-plus-diagonal covariance."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._linalg import cholesky, solve_triangular
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.multivariate_normal import _batch_mahalanobis
from flambeau.distributions.utils import _LocationMoments, _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _batch_mv(bmat, bvec):
    """Batched matrix-vector product: ``bmat`` (..., n, m) times ``bvec`` (..., m)."""
    return fl.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _add_identity(k):
    return k + fl.eye(k.shape[-1], dtype=k.dtype, device=k.device)


def _batch_capacitance_tril(w, d):
    """The Cholesky factor of the capacitance matrix ``I + W^T D^{-1} W`` (..., m, m)."""
    wt_dinv = w.mT / d.unsqueeze(-2)
    return cholesky(_add_identity(fl.matmul(wt_dinv, w)))


def _batch_lowrank_logdet(w, d, capacitance_tril):
    """``log det(W W^T + D)`` by the matrix determinant lemma:
    ``log det(I + W^T D^{-1} W) + log det(D)``."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + d.log().sum(-1)


def _batch_lowrank_mahalanobis(w, d, x, capacitance_tril):
    """``x^T (W W^T + D)^{-1} x`` by the Woodbury identity:
    ``x^T D^{-1} x - ||L^{-1} W^T D^{-1} x||^2`` with ``L`` the capacitance's Cholesky factor."""
    wt_dinv = w.mT / d.unsqueeze(-2)
    wt_dinv_x = _batch_mv(wt_dinv, x)
    mahalanobis_term1 = (x.pow(2) / d).sum(-1)
    mahalanobis_term2 = _batch_mahalanobis(capacitance_tril, wt_dinv_x)
    return mahalanobis_term1 - mahalanobis_term2


class LowRankMultivariateNormal(_LocationMoments, Distribution):
    r"""A multivariate normal whose covariance is ``cov_factor @ cov_factor.mT + diag(cov_diag)``:
    a rank-``m`` factor (n, m) plus a positive diagonal (n,). ``log_prob`` and ``entropy`` cost
    :math:`O(n m^2 + m^3)` through the Woodbury identity and the matrix determinant lemma (for
    ``m << n``, much less than a full Cholesky factorisation).

    Args:
        loc (Tensor): the mean, (..., n).
        cov_factor (Tensor): the low-rank factor, (..., n, m).
        cov_diag (Tensor): the diagonal part of the covariance, (..., n), positive.

    Example::

        >>> m = LowRankMultivariateNormal(fl.zeros(2), fl.tensor([[1.0], [0.0]]), fl.ones(2))
        >>> m.sample()  # normally distributed with mean=[0,0], cov_factor=[[1],[0]], cov_diag=[1,1]
    """

    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {tuple(event_shape)}")
        try:
            loc_, self.cov_factor, cov_diag_ = fl.broadcast_tensors(loc.unsqueeze(-1), cov_factor,
                                                                    cov_diag.unsqueeze(-1))
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                             f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        batch_shape = self.loc.shape[:-1]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        # D^{1/2} chol(I + D^{-1/2} W W^T D^{-1/2}): a Cholesky of a better-conditioned matrix.
        cov_diag_sqrt_unsqueeze = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        dinvsqrt_w = self._unbroadcasted_cov_factor / cov_diag_sqrt_unsqueeze
        k = _add_identity(fl.matmul(dinvsqrt_w, dinvsqrt_w.mT))
        return (cov_diag_sqrt_unsqueeze * cholesky(k)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        w = self._unbroadcasted_cov_factor
        return (fl.matmul(w, w.mT) + fl.diag_embed(self._unbroadcasted_cov_diag)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        # Woodbury: (W W^T + D)^{-1} = D^{-1} - D^{-1} W (I + W^T D^{-1} W)^{-1} W^T D^{-1}.
        wt_dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        a = solve_triangular(self._capacitance_tril, wt_dinv)
        precision = fl.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - a.mT @ a
        return precision.expand(self._matrix_shape())

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        w_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_w = _standard_normal(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, diff,
                                       self._capacitance_tril)
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                        self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + m)

    def entropy(self):
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                        self._capacitance_tril)
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return h if len(self._batch_shape) == 0 else h.expand(tuple(self._batch_shape))
