"""Helpers shared by the distributions (``torch.distributions.utils``): broadcasting parameters,
converting between probabilities and logits, and the lazily computed attributes."""

from __future__ import annotations

import math
from numbers import Number

import flambeau as fl

__all__ = ["broadcast_all", "broadcast_shapes", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits",
           "tril_matrix_to_vec", "vec_to_tril_matrix"]

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant


def broadcast_all(*values):
    """Broadcast tensors and numbers to one shape: numbers become tensors of the first tensor's
    dtype and device (the default dtype when all are numbers). Returns a tuple of tensors."""
    if not all(isinstance(v, (fl.Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or flambeau.Tensor.")
    if not all(isinstance(v, fl.Tensor) for v in values):
        like = next((v for v in values if isinstance(v, fl.Tensor)), None)
        dtype = like.dtype if like is not None else fl.get_default_dtype()
        device = like.device if like is not None else "cpu"
        values = [v if isinstance(v, fl.Tensor) else fl.tensor(v, dtype=dtype, device=device) for v in values]
    return fl.broadcast_tensors(*values)


def broadcast_shapes(*shapes) -> fl.Size:
    """The shape that ``shapes`` broadcast to (``torch.broadcast_shapes``); ValueError if they don't."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape, ndim - len(shape)):
            if size != 1 and out[i] not in (1, size):
                raise ValueError(f"Shapes {[tuple(s) for s in shapes]} are not broadcastable")
            if size != 1:
                out[i] = size
    return fl.Size(out)


def _standard_normal(shape, dtype, device):
    return fl.randn(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value, dim: int):
    """Sum out the ``dim`` rightmost dimensions of ``value`` (a tensor or a number)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[: value.dim() - dim]) + (-1,)).sum(-1)


def clamp_probs(probs):
    """Clamp probabilities into ``[eps, 1 - eps]`` of their dtype, so their logarithms stay finite."""
    eps = fl.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary: bool = False):
    """Probabilities from logits: the sigmoid for a binary variable, else a softmax over the last dim."""
    if is_binary:
        return fl.sigmoid(logits)
    return fl.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary: bool = False):
    """Logits from probabilities (clamped first): ``log p - log1p(-p)`` when binary, else ``log p``."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return fl.log(ps_clamped) - fl.log1p(-ps_clamped)
    return fl.log(ps_clamped)


def _x_log_x(t):
    return fl.xlogy(t, t)  # 0 at t = 0


def _log_2pi() -> float:
    return math.log(2 * math.pi)


class lazy_property:
    """A property computed on first access and then stored on the instance (as torch's)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with fl.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _xlogy(x, y):
    """``x * log(y)``, 0 where both are 0; its gradient w.r.t. ``x`` is ``log(y)`` everywhere, as
    torch's ``xlogy`` has (``fl.xlogy``'s derivative is 0 where ``x == 0``)."""
    safe_y = fl.where((x == 0) & (y == 0), fl.ones_like(y), y)
    return x * safe_y.log()


class _BinaryParameters:
    """The ``probs``/``logits`` pair of a binary outcome (Bernoulli, Geometric, Binomial,
    LogitRelaxedBernoulli): exactly one is given, the other is computed on first use."""

    def _set_probs_or_logits(self, probs, logits, *others):
        """Store the given one of ``probs``/``logits`` (broadcast with ``others``) under its name
        and as ``_param``; return the broadcast ``others``."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        name, given = ("probs", probs) if probs is not None else ("logits", logits)
        *others, param = broadcast_all(*others, given)
        setattr(self, name, param)
        self._param = param
        return others

    @property
    def param_shape(self) -> fl.Size:
        return self._param.size()

    @lazy_property
    def logits(self):
        """The log-odds of the outcome ``1``, ``log p - log1p(-p)`` (from clamped probabilities)."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        """The probability of the outcome ``1``, ``sigmoid(logits)``."""
        return logits_to_probs(self.logits, is_binary=True)


class _LocScale:
    """``__init__(loc, scale)`` of the location-scale families: broadcast both; the batch shape is
    ``()`` when both are numbers."""

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = fl.Size() if isinstance(loc, Number) and isinstance(scale, Number) else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)


class _LocationMoments:
    """``mean`` and ``mode`` of the distributions symmetric and unimodal about ``loc``."""

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc


def _tril_positions(n: int, diag: int):
    """The flat positions ``i * n + j`` of the ``(i, j)`` with ``j - i <= diag``, row-major (the
    order ``torch.tril_indices`` lists them)."""
    return [i * n + j for i in range(n) for j in range(n) if j - i <= diag]


def tril_matrix_to_vec(mat, diag: int = 0):
    """The lower triangle (on and below diagonal ``diag``) of ``mat`` (..., n, n) as vectors,
    row by row (``torch.distributions.utils.tril_matrix_to_vec``)."""
    n = mat.shape[-1]
    if not -n <= diag < n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    index = fl.tensor(_tril_positions(n, diag), dtype=fl.int64, device=mat.device)
    return mat.reshape(tuple(mat.shape[:-2]) + (n * n,)).index_select(-1, index)


def vec_to_tril_matrix(vec, diag: int = 0):
    """The inverse of :func:`tril_matrix_to_vec`: vectors (..., m) fill the lower triangle
    (on and below diagonal ``diag``) of square matrices, zeros elsewhere."""
    m = vec.shape[-1]
    # m = n (n + 1) / 2 + n * diag: solve for the side n.
    n = round((math.sqrt((1 + 2 * diag) ** 2 + 8 * m) - (1 + 2 * diag)) / 2)
    positions = _tril_positions(n, diag)
    if len(positions) != m:
        raise ValueError(f"The size of last dimension is {m} which cannot be expressed as the lower triangular part "
                         f"of a square D x D matrix.")
    slot = [m] * (n * n)  # the extra zero at index m
    for k, p in enumerate(positions):
        slot[p] = k
    padded = fl.cat([vec, fl.zeros(tuple(vec.shape[:-1]) + (1,), dtype=vec.dtype, device=vec.device)], -1)
    index = fl.tensor(slot, dtype=fl.int64, device=vec.device)
    return padded.index_select(-1, index).reshape(tuple(vec.shape[:-1]) + (n, n))
