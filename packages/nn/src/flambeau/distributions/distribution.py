"""The base class of all distributions (``torch.distributions.Distribution``).

A distribution has a ``batch_shape`` (independent, differently parameterised distributions side by
side) and an ``event_shape`` (the shape of one draw). ``sample(sample_shape)`` returns a tensor of
shape ``sample_shape + batch_shape + event_shape``; ``log_prob(value)`` reduces the event dims and
returns ``value``'s batch shape.
"""

from __future__ import annotations

import warnings

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.utils import lazy_property

__all__ = ["Distribution"]


def _size(shape) -> fl.Size:
    if isinstance(shape, int):
        return fl.Size([shape])
    return fl.Size(shape)


class Distribution:
    """Distribution is the abstract base class for probability distributions.

    Args:
        batch_shape: the shape over which parameters are batched.
        event_shape: the shape of a single sample (without batching).
        validate_args: whether to validate the parameters here and the values given to
            ``log_prob``/``cdf`` later; ``None`` takes the class default
            (:meth:`set_default_validate_args`, initially ``__debug__`` as in PyTorch).
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Set whether validation is enabled or disabled by default (``True`` or ``False``)."""
        if value not in [True, False]:
            raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args: bool | None = None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}`"
                              " or initialize the distribution with `validate_args=False` to turn off validation.",
                              stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # skip constraints that cannot be checked
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # skip checking lazily-constructed args
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution with its batch dims expanded to ``batch_shape`` (parameters are
        expanded views, no copy)."""
        batch_shape = _size(batch_shape)
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        names = set(self.arg_constraints) | {"_param"}
        ndim = len(self._batch_shape)
        for name, value in self.__dict__.items():
            if name not in names and isinstance(getattr(type(self), name, None), lazy_property):
                continue  # a cached value of the old batch shape: recomputed on demand
            if name in names and isinstance(value, fl.Tensor):
                value = value.expand(tuple(batch_shape) + tuple(value.shape[ndim:]))
            new.__dict__[name] = value
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def batch_shape(self) -> fl.Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> fl.Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        """A dict from parameter names to the :class:`~flambeau.distributions.constraints.Constraint`
        each must satisfy."""
        raise NotImplementedError

    @property
    def support(self):
        """The :class:`~flambeau.distributions.constraints.Constraint` of this distribution's values."""
        raise NotImplementedError

    @property
    def mean(self):
        """The mean, of shape ``batch_shape + event_shape``."""
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self):
        """The mode, of shape ``batch_shape + event_shape``."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        """The variance, of shape ``batch_shape + event_shape``."""
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self):
        """The standard deviation (the square root of :attr:`variance`)."""
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A sample (or a batch of them) of shape ``sample_shape + batch_shape + event_shape``,
        without gradient."""
        with fl.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterised sample, differentiable w.r.t. the parameters (when ``has_rsample``)."""
        raise NotImplementedError

    def sample_n(self, n: int):
        """``n`` samples: ``sample((n,))``, torch's deprecated spelling (with its warning)."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample((n,))

    def log_prob(self, value):
        """The log of the probability density/mass at ``value``; the result has ``value``'s batch
        shape (its event dims reduced)."""
        raise NotImplementedError

    def cdf(self, value):
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value):
        """The inverse cumulative distribution function at ``value`` (probabilities)."""
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True):
        """All values of a discrete distribution's support, along a new leading dim (expanded over
        the batch dims when ``expand``)."""
        raise NotImplementedError

    def entropy(self):
        """The entropy, of shape ``batch_shape``."""
        raise NotImplementedError

    def perplexity(self):
        """``exp(entropy)``, of shape ``batch_shape``."""
        return fl.exp(self.entropy())

    def _extended_shape(self, sample_shape=()) -> fl.Size:
        return fl.Size(tuple(_size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value) -> None:
        if not isinstance(value, fl.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs "
                             f"{self._event_shape}.")
        actual_shape = value.shape
        expected_shape = fl.Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs "
                                 f"{expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.",
                          stacklevel=2)
            return
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
                         for p in names)
        return self.__class__.__name__ + "(" + args + ")"
