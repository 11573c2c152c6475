"""Special functions and the Gamma sampler the distributions need.

``lgamma`` / ``digamma`` / ``gammainc`` are tensor-core's (``fl.lgamma``, ``fl.digamma``,
``flambeau.special.gammainc``). ``_composite_lgamma`` / ``_composite_digamma`` are reference
composites of flambeau operators (shift the argument up by 8 with the recurrence, then Stirling's
series; about 1e-13 in float64) that the tests check against torch; ``_np_digamma`` is their numpy
twin, used by :func:`standard_gamma_grad` on the host.

Note [Gamma sampling on the host]
---------------------------------
flambeau has no Gamma sampling operator, so :func:`standard_gamma` draws on the host with a numpy
``Generator`` seeded by one draw from flambeau's generator: ``fl.manual_seed`` makes the samples
reproducible, and the draw advances flambeau's stream as a native sampler would. Its gradient with
respect to the concentration is the implicit reparameterisation gradient
``dx/dalpha = -(dF(x; alpha)/dalpha) / f(x; alpha)`` computed with the same approximation as
PyTorch's ``_standard_gamma_grad`` (a Taylor series for ``x < 0.8``, Rice's saddle-point expansion
for ``alpha > 8``, else a bivariate rational fit; Jankowiak & Obermeyer, 2018).
"""

from __future__ import annotations

import math

import numpy as np

import flambeau as fl

_SHIFT = 8
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


lgamma = fl.lgamma
digamma = fl.digamma
gammainc = fl.special.gammainc  # tensor-core (`import flambeau` loads flambeau.special)


def _composite_lgamma(x):
    shift = sum((x + k).log() for k in range(_SHIFT))
    z = x + _SHIFT
    zi = z.reciprocal()
    zi2 = zi * zi
    series = zi * (1 / 12 + zi2 * (-1 / 360 + zi2 * (1 / 1260 + zi2 * (-1 / 1680 + zi2 / 1188))))
    return (z - 0.5) * z.log() - z + _HALF_LOG_2PI + series - shift


def _composite_digamma(x):
    shift = sum((x + k).reciprocal() for k in range(_SHIFT))
    z = x + _SHIFT
    zi = z.reciprocal()
    zi2 = zi * zi
    series = zi2 * (1 / 12 - zi2 * (1 / 120 - zi2 * (1 / 252 - zi2 * (1 / 240 - zi2 / 132))))
    return z.log() - 0.5 * zi - series - shift


def _np_digamma(x: np.ndarray) -> np.ndarray:
    shift = sum(1.0 / (x + k) for k in range(_SHIFT))
    z = x + _SHIFT
    zi2 = 1.0 / (z * z)
    series = zi2 * (1 / 12 - zi2 * (1 / 120 - zi2 * (1 / 252 - zi2 * (1 / 240 - zi2 / 132))))
    return np.log(z) - 0.5 / z - series - shift


_COEF_UV = np.array([
    [0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084],
    [0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
    [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
     -1.5247877e-07],
])


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``dx/dalpha`` of a standard Gamma sample ``x`` (numpy float64 arrays of one shape): PyTorch's
    ``_standard_gamma_grad`` approximation, see Note [Gamma sampling on the host]."""
    alpha, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        # Taylor series of the incomplete gamma function for small x.
        small = x < 0.8
        a, s = alpha[small], x[small]
        numer, denom = np.ones_like(s), a.copy()
        series1, series2 = numer / denom, numer / (denom * denom)
        for i in range(1, 6):
            numer = numer * (-s / i)
            denom = denom + 1
            series1 = series1 + numer / denom
            series2 = series2 + numer / (denom * denom)
        pow_x_alpha = s ** a
        pdf = s ** (a - 1) * np.exp(-s)
        cdf_alpha = (np.log(s) - _np_digamma(a)) * pow_x_alpha * series1 - pow_x_alpha * series2
        result = -cdf_alpha / pdf
        out[small] = np.where(np.isnan(result), 0.0, result)
        # Rice's saddle-point expansion for large alpha.
        large = ~small & (alpha > 8.0)
        a, s = alpha[large], x[large]
        near = (0.9 * a <= s) & (s <= 1.1 * a)
        numer_1 = 1 + 24 * a * (1 + 12 * a)
        numer_2 = 1440 * a * a + 6 * s * (53 - 120 * s) - 65 * s * s / a + a * (107 + 3600 * s)
        near_value = numer_1 * numer_2 / (1244160 * a * a * a * a)
        denom = np.sqrt(8 * a)
        term2 = denom / (a - s)
        term3 = (s - a - a * np.log(s / a)) ** -1.5
        term23 = np.where(s < a, term2 - term3, term2 + term3)
        term1 = np.log(s / a) * term23 - np.sqrt(2 / a) * (a + s) / ((a - s) * (a - s))
        stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
        out[large] = np.where(near, near_value, -stirling * s * term1 / denom)
        # A bivariate rational approximation elsewhere.
        rest = ~small & ~large
        u, v = np.log(x[rest] / alpha[rest]), np.log(alpha[rest])
        coef = [_COEF_UV[0, i] + u * (_COEF_UV[1, i] + u * _COEF_UV[2, i]) for i in range(8)]
        p = coef[0] + v * (coef[1] + v * (coef[2] + v * coef[3]))
        q = coef[4] + v * (coef[5] + v * (coef[6] + v * coef[7]))
        out[rest] = np.exp(p / q)
    return out


def _host_generator() -> np.random.Generator:
    # One draw from flambeau's default generator seeds numpy's: fl.manual_seed reproduces both.
    return np.random.default_rng(int(fl.randint(0, 2**62, ())))


def _sample_standard_gamma(concentration):
    alpha = concentration.detach().cpu().numpy().astype(np.float64)
    x = _host_generator().standard_gamma(alpha)
    return fl.tensor(x, dtype=concentration.dtype, device=concentration.device)


def _gamma_function():
    from flambeau.autograd import Function

    class _StandardGamma(Function):
        @staticmethod
        def forward(ctx, concentration):
            x = _sample_standard_gamma(concentration)
            ctx.save_for_backward(concentration, x)
            return x

        @staticmethod
        def backward(ctx, grad):
            concentration, x = ctx.saved_tensors
            dx = standard_gamma_grad(concentration.detach().cpu().numpy(), x.detach().cpu().numpy())
            return grad * fl.tensor(dx, dtype=grad.dtype, device=grad.device)

    return _StandardGamma


_STANDARD_GAMMA = None


def standard_gamma(concentration):
    """Samples of ``Gamma(concentration, 1)``, one per element (same shape, dtype, device), with
    the implicit reparameterisation gradient w.r.t. ``concentration``
    (see Note [Gamma sampling on the host])."""
    global _STANDARD_GAMMA
    if _STANDARD_GAMMA is None:
        _STANDARD_GAMMA = _gamma_function()
    return _STANDARD_GAMMA.apply(concentration)


def host_sample(concentration_like, draw):
    """``draw(numpy_generator)`` on the host, as a tensor like ``concentration_like`` (dtype, device);
    see Note [Gamma sampling on the host]."""
    out = draw(_host_generator())
    return fl.tensor(np.asarray(out), dtype=concentration_like.dtype, device=concentration_like.device)
