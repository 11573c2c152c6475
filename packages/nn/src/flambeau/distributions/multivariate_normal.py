"""The multivariate Normal distribution, parameterised by a covariance, precision or Cholesky factor."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._linalg import cholesky, cholesky_inverse, solve_triangular
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import _LocationMoments, _standard_normal, broadcast_shapes, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mahalanobis(factor, x):
    """``x^T (L L^T)^{-1} x`` per batch element, for a lower factor ``L`` (..., n, n) and ``x`` (..., n)."""
    y = solve_triangular(factor, x.unsqueeze(-1)).squeeze(-1)
    return y.pow(2).sum(-1)


def _precision_to_scale_tril(p):
    # The Cholesky factor of P's inverse without inverting P: factor the flipped P, flip back.
    lf = cholesky(fl.flip(p, (-2, -1)))
    l_inv = fl.transpose(fl.flip(lf, (-2, -1)), -2, -1)
    eye = fl.eye(p.shape[-1], dtype=p.dtype, device=p.device)
    return solve_triangular(l_inv, eye)


def _scale_tril_of(scale_tril, covariance_matrix, precision_matrix):
    """The lower Cholesky factor of the one matrix given (the others are None), unbroadcast."""
    if scale_tril is not None:
        return scale_tril
    if covariance_matrix is not None:
        return cholesky(covariance_matrix)
    return _precision_to_scale_tril(precision_matrix)


class _ScaleTrilMatrices:
    """The three views of a (covariance) matrix kept as its lower Cholesky factor
    ``_unbroadcasted_scale_tril``, each expanded to ``_matrix_shape()`` (MultivariateNormal, Wishart)."""

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor :math:`L` of the covariance (..., n, n)."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        """The covariance :math:`L L^T` (..., n, n)."""
        factor = self._unbroadcasted_scale_tril
        return (factor @ factor.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """The precision :math:`(L L^T)^{-1}` (..., n, n)."""
        return cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())


class MultivariateNormal(_LocationMoments, _ScaleTrilMatrices, Distribution):
    r"""A multivariate normal distribution with mean ``loc`` (..., n) and covariance :math:`\Sigma`
    given by exactly one of ``covariance_matrix``, ``precision_matrix`` (:math:`\Sigma^{-1}`) or
    ``scale_tril`` (lower-triangular :math:`L` with positive diagonal, :math:`\Sigma = L L^T`),
    each (..., n, n). The event shape is ``(n,)``; the batch shape broadcasts ``loc``'s and the
    matrix's leading dims.

    A covariance or precision matrix is factorised with a Cholesky decomposition
    (``flambeau.linalg.cholesky`` when present, else a composite of flambeau operators);
    ``log_prob`` then solves a triangular system, so its gradients flow to every parameter.

    Example::

        >>> m = MultivariateNormal(fl.zeros(2), fl.eye(2))
        >>> m.sample()  # normally distributed with mean=`[0,0]` and covariance_matrix=`I`
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix, name = next((m, n) for m, n in ((scale_tril, "scale_tril"), (covariance_matrix, "covariance_matrix"),
                                                  (precision_matrix, "precision_matrix")) if m is not None)
        if matrix.dim() < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        setattr(self, name, matrix.expand(tuple(batch_shape) + (-1, -1)))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        self._unbroadcasted_scale_tril = _scale_tril_of(scale_tril, covariance_matrix, precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        batch_shape = fl.Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return h
        return h.expand(tuple(self._batch_shape))
