"""The Wishart distribution over positive-definite matrices."""

from __future__ import annotations

import math
import warnings
from numbers import Number

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions._linalg import cholesky_inverse
from flambeau.distributions._special import digamma
from flambeau.distributions.chi2 import Chi2
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.lkj_cholesky import _mvlgamma
from flambeau.distributions.multivariate_normal import _scale_tril_of, _ScaleTrilMatrices
from flambeau.distributions.utils import broadcast_shapes, vec_to_tril_matrix

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p: int):
    """The multivariate digamma, ``sum_i digamma(x - i / 2)``, for ``x > (p - 1) / 2``."""
    if not bool(x.gt((p - 1) / 2).all()):
        raise ValueError("Wrong domain for multivariate digamma function.")
    return sum(digamma(x - i / 2) for i in range(p))


class Wishart(_ScaleTrilMatrices, ExponentialFamily):
    r"""A Wishart distribution with ``df`` degrees of freedom and scale matrix :math:`\Sigma`: the
    distribution of :math:`\sum_{i=1}^{\nu} x_i x_i^T` for :math:`x_i \sim N(0, \Sigma)`
    (for integer :math:`\nu`), over ``p x p`` positive-definite matrices.

    Args:
        df (float or Tensor): :math:`\nu`, greater than ``p - 1``.
        covariance_matrix (Tensor): :math:`\Sigma`, (..., p, p) positive-definite; or
        precision_matrix (Tensor): :math:`\Sigma^{-1}`; or
        scale_tril (Tensor): the lower Cholesky factor of :math:`\Sigma` (exactly one of the three).

    ``rsample`` is the Bartlett decomposition, with its chi-squared variates drawn on the host (see
    Note [Gamma sampling on the host] in ``flambeau/distributions/_special.py``); samples that are
    numerically singular are redrawn (with a warning) up to ``max_try_correction`` times.

    Example::

        >>> m = Wishart(fl.tensor([2.0]), covariance_matrix=fl.eye(2))
        >>> m.sample()  # Wishart distributed with mean=`df * I` and variance(x_ij)=`df` for i != j
    """

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite, "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = fl.Size(param.shape[:-2])
            self.df = fl.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = broadcast_shapes(param.shape[:-2], df.shape)
            self.df = df.expand(tuple(batch_shape))
        event_shape = param.shape[-2:]
        if bool(self.df.le(event_shape[-1] - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {event_shape[-1] - 1}.")
        matrix_shape = tuple(batch_shape) + (-1, -1)
        if scale_tril is not None:
            self.scale_tril = param.expand(matrix_shape)
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(matrix_shape)
        else:
            self.precision_matrix = param.expand(matrix_shape)
        if bool(self.df.lt(event_shape[-1]).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < "
                          "ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        self._unbroadcasted_scale_tril = _scale_tril_of(scale_tril, covariance_matrix, precision_matrix)
        self._dist_chi2 = self._chi2(batch_shape)

    def _chi2(self, batch_shape):
        # Bartlett: the squared diagonal of the factor is Chi2(df - i) in row i.
        p = self._event_shape[-1]
        offsets = fl.arange(p, dtype=self._unbroadcasted_scale_tril.dtype, device=self._unbroadcasted_scale_tril.device)
        return Chi2(df=self.df.unsqueeze(-1) - offsets.expand(tuple(batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        batch_shape = fl.Size(batch_shape)
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(tuple(batch_shape))
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        new._event_shape = self._event_shape
        new._dist_chi2 = new._chi2(batch_shape)
        ExponentialFamily.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @property
    def mean(self):
        return self.df.view(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = fl.where(factor <= 0, fl.full_like(factor, math.nan), factor)
        return factor.view(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        diag_v = v.diagonal(dim1=-2, dim2=-1)
        return self.df.view(tuple(self._batch_shape) + (1, 1)) * (v.pow(2)
                                                                  + diag_v.unsqueeze(-1) * diag_v.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=()):
        p = self._event_shape[-1]
        diag = self._dist_chi2.rsample(sample_shape).sqrt()
        diag = diag.clamp(min=fl.finfo(diag.dtype).eps)
        below = fl.randn(tuple(sample_shape) + tuple(self._batch_shape) + (p * (p - 1) // 2,), dtype=diag.dtype,
                         device=diag.device)
        noise = fl.diag_embed(diag) + vec_to_tril_matrix(below, diag=-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def rsample(self, sample_shape=(), max_try_correction=None):
        max_try_correction = 10 if max_try_correction is None else max_try_correction
        sample_shape = tuple(fl.Size(sample_shape))
        sample = self._bartlett_sampling(sample_shape)
        is_singular = ~self.support.check(sample)
        if bool(is_singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                sample_new = self._bartlett_sampling(sample_shape)
                sample = fl.where(is_singular.unsqueeze(-1).unsqueeze(-1), sample_new, sample)
                is_singular = ~self.support.check(sample)
                if not bool(is_singular.any()):
                    break
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        log_det_scale = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = (cholesky_inverse(self._unbroadcasted_scale_tril) @ value).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + log_det_scale) - _mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * fl.linalg.slogdet(value)[1] - trace / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        log_det_scale = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + log_det_scale) + _mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        nu = self.df
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (nu - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-fl.linalg.slogdet(-2 * x)[1] + _LOG_2 * p)
                + _mvlgamma(y + (p + 1) / 2, p))
