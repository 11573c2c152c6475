"""The chi-squared distribution, a Gamma with half-integer-like shape ``df / 2`` and rate ``1/2``."""

from __future__ import annotations

from flambeau.distributions import constraints
from flambeau.distributions.gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    r"""A chi-squared distribution with ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``, the
    distribution of a sum of ``df`` squared standard normals.

    Args:
        df (float or Tensor): the degrees of freedom (positive).

    Example::

        >>> m = Chi2(fl.tensor([1.0]))
        >>> m.sample()  # Chi2 distributed with shape df=1
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self.__class__.__new__(self.__class__) if _instance is None else _instance
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new.rate = self.rate.expand(tuple(batch_shape))
        Gamma.__init__(new, new.concentration, new.rate, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def df(self):
        """The degrees of freedom, ``2 * concentration``."""
        return self.concentration * 2
