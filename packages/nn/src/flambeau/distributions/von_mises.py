"""The von Mises distribution, a circular analogue of the Normal."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau.distributions import constraints
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.utils import _LocationMoments, broadcast_all, lazy_property

__all__ = ["VonMises"]


def _eval_poly(y, coef):
    coef = list(coef)
    result = coef.pop()
    while coef:
        result = coef.pop() + y * result
    return result


# Abramowitz & Stegun 9.8.1-9.8.4: polynomial approximations of I0 and I1 (exp-scaled above 3.75),
# the same as PyTorch's, so log-densities agree to the last bit rather than to 1e-7.
_I0_COEF_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2]
_I0_COEF_LARGE = [0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1, 0.2635537e-1,
                  -0.1647633e-1, 0.392377e-2]
_I1_COEF_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3]
_I1_COEF_LARGE = [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1, -0.2895312e-1,
                  0.1787654e-1, -0.420059e-2]
_COEF_SMALL = [_I0_COEF_SMALL, _I1_COEF_SMALL]
_COEF_LARGE = [_I0_COEF_LARGE, _I1_COEF_LARGE]


def _log_modified_bessel_fn(x, order: int = 0):
    """``log(I_order(x))`` for ``x > 0`` and ``order`` 0 or 1."""
    if order not in (0, 1):
        raise ValueError(f"_log_modified_bessel_fn: expected order 0 or 1, got {order}")
    y = (x / 3.75) ** 2
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    large = x - 0.5 * x.log() + _eval_poly(3.75 / x, _COEF_LARGE[order]).log()
    return fl.where(x < 3.75, small, large)


def _rejection_sample(loc, concentration, proposal_r, x):
    # Best & Fisher (1979): a wrapped-Cauchy envelope, redrawn where not yet accepted.
    done = fl.zeros(tuple(x.shape), dtype=fl.bool, device=loc.device)
    while not bool(done.all()):
        u = fl.rand((3,) + tuple(x.shape), dtype=loc.dtype, device=loc.device)
        u1, u2, u3 = u.unbind()
        z = fl.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
        x = fl.where(accept & ~done, (u3 - 0.5).sign() * f.acos(), x)
        done = done | accept
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(_LocationMoments, Distribution):
    r"""A circular von Mises distribution, :math:`p(x) = e^{\kappa \cos(x - \mu)} / (2\pi I_0(\kappa))`
    on :math:`[-\pi, \pi)` (``log_prob`` accepts any real angle).

    Args:
        loc (Tensor): the angle :math:`\mu` in radians.
        concentration (Tensor): :math:`\kappa` (positive).

    ``sample`` is rejection sampling (Best & Fisher, 1979) in float64; there is no ``rsample``.
    ``mean`` and ``mode`` are ``loc``; ``variance`` is the circular variance ``1 - I_1(\kappa) / I_0(\kappa)``.

    Example::

        >>> m = VonMises(fl.tensor([1.0]), fl.tensor([1.0]))
        >>> m.sample()  # von Mises distributed with loc=1 and concentration=1
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, fl.Size(), validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * fl.cos(value - self.loc)
        return log_prob - math.log(2 * math.pi) - _log_modified_bessel_fn(self.concentration, order=0)

    @lazy_property
    def _loc(self):
        return self.loc.to(fl.float64)

    @lazy_property
    def _concentration(self):
        return self.concentration.to(fl.float64)

    @lazy_property
    def _proposal_r(self):
        kappa = self._concentration
        tau = 1 + (1 + 4 * kappa**2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal_r = (1 + rho**2) / (2 * rho)
        # Second-order Taylor expansion around kappa = 0, where the exact form loses precision.
        proposal_r_taylor = 1 / kappa + kappa
        return fl.where(kappa < 1e-5, proposal_r_taylor, proposal_r)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with fl.no_grad():
            x = fl.zeros(shape, dtype=fl.float64, device=self.loc.device)
            loc, concentration, proposal_r = (t.detach() for t in (self._loc, self._concentration, self._proposal_r))
            return _rejection_sample(loc, concentration, proposal_r, x).to(self.loc.dtype)

    @lazy_property
    def variance(self):
        """The circular variance, ``1 - I_1(concentration) / I_0(concentration)``."""
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()
