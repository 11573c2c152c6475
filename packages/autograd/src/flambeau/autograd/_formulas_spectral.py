"""Derivatives of the special-function and fft operators (see _formulas.py for the convention).

Special functions (torch's derivatives.yaml):
    lgamma' = digamma, digamma' = polygamma(1), polygamma(n)' = polygamma(n + 1), i0' = i1,
    i0e' = i1e - sgn(x) i0e, i1' = i0 - i1 / x, i1e' = i0e - i1e (sgn(x) + 1 / x) (both 1/2 at 0),
    ndtri' = sqrt(2 pi) exp(ndtri(p)^2 / 2), log_ndtr' = exp(-x^2 / 2 - log_ndtr(x)) / sqrt(2 pi),
    erfcx' = 2 x erfcx(x) - 2 / sqrt(pi), entr' = -(1 + log x), sinc' = (cos(pi x) - sinc(x)) / x
    (0 at 0), xlog1py: log1p(y) and x / (1 + y), zeta: only in ``other``: -x zeta(x + 1, q),
    igamma / igammac: only in ``other``: +-x^(a - 1) e^(-x) / Gamma(a).

FFT primitives (torch's, with its convention for complex gradients: ``dL/dRe + i dL/dIm``): a
transform ``F`` is linear, so the gradient of its input is ``F^H g``, the transform in the other
direction with the adjoint scaling (``"backward"`` <-> ``"forward"``, ``"ortho"`` kept):

* ``_fft_c2c``: ``c2c(g)`` in the other direction;
* ``_fft_r2c``: a onesided ``g`` zero-padded to the full length, ``c2c`` in the other direction,
  its real part (the input was real): torch's ``fft_r2c_backward``;
* ``_fft_c2r``: ``r2c(g)`` onesided with the adjoint scaling, the entries whose mirror images
  the onesided input stood for (``1 .. n - n // 2 - 1`` along the last dim) doubled: torch's
  ``fft_c2r_backward``.

Each is written with flambeau operators, so double backward comes free.
"""

from __future__ import annotations

import math

import flambeau as fl
from flambeau._ops import get_op
from flambeau.autograd._opnode import Derivative as D

__all__ = ["TABLE"]

_SQRT_2PI = math.sqrt(2 * math.pi)
_2_SQRT_PI = 2 / math.sqrt(math.pi)


def _tiny_safe(x):
    """``(|x| > eps, x with its tiny elements replaced by eps)``: formulas dividing by ``x``."""
    eps = fl.finfo(x.dtype).eps
    big = x.abs() > eps
    return big, fl.where(big, x, fl.full_like(x, eps))


def _i1_grad(g, s):
    big, x = _tiny_safe(s.input)
    return g * fl.where(big, fl.i0(x) - s.result / x, fl.full_like(x, 0.5))


def _i1e_grad(g, s):
    big, x = _tiny_safe(s.input)
    return g * fl.where(big, fl.special.i0e(x) - s.result * (x.sign() + 1 / x), fl.full_like(x, 0.5))


def _sinc_grad(g, s):
    x = s.input
    zero = x == 0
    safe = fl.where(zero, fl.ones_like(x), x)
    return g * fl.where(zero, fl.zeros_like(x), ((math.pi * safe).cos() - fl.sinc(safe)) / safe)


def _xlog1py_input(g, s):
    r = fl.special.xlog1py(g, s.other)
    return fl.where((s.input == 0) & (s.other <= -1), fl.zeros_like(r), r)


_fft_c2c = get_op("_fft_c2c").fn
_fft_r2c = get_op("_fft_r2c").fn
_fft_c2r = get_op("_fft_c2r").fn
_ADJOINT = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _c2c_grad(g, s):
    return _fft_c2c(g, s.dim, _ADJOINT[s.norm], not s.forward)


def _r2c_grad(g, s):
    last = s.dim[-1]
    missing = s.input_shape[last] - g.shape[last]
    if s.onesided and missing > 0:
        shape = list(g.shape)
        shape[last] = missing
        g = fl.cat([g, fl.zeros(shape, dtype=g.dtype, device=g.device)], last)
    return fl.real(_fft_c2c(g, s.dim, _ADJOINT[s.norm], not s.forward))


def _c2r_grad(g, s):
    gi = _fft_r2c(g, s.dim, _ADJOINT[s.norm], True, True)
    last = s.dim[-1]
    m = gi.shape[last]
    doubled = s.last_dim_size - m
    if doubled <= 0:
        return gi
    weight = fl.ones(m, dtype=g.dtype, device=g.device)
    weight[1:1 + doubled] = 2
    return gi * weight.reshape((m,) + (1,) * (gi.ndim - 1 - last))


def _igamma_other(g, s):
    """d/dx P(a, x) = x^(a - 1) e^(-x) / Gamma(a)."""
    return g * ((s.input - 1) * s.other.log() - s.other - fl.lgamma(s.input)).exp()


def _igamma_input(g, s):
    raise NotImplementedError("the derivative for 'igamma: input' is not implemented.")


def _zeta_exponent(g, s):
    raise RuntimeError("the derivative for 'input' of special_zeta is not implemented (as in torch)")


TABLE: dict = {
    "lgamma": D({"input": lambda g, s: g * fl.digamma(s.input)}, save=("input",)),
    "digamma": D({"input": lambda g, s: g * fl.polygamma(1, s.input)}, save=("input",)),
    "polygamma": D({"input": lambda g, s: g * fl.polygamma(s.n + 1, s.input)}, save=("input",)),
    "i0": D({"input": lambda g, s: g * fl.special.i1(s.input)}, save=("input",)),
    "special_i0e": D({"input": lambda g, s: g * (fl.special.i1e(s.input) - s.input.sign() * s.result)},
                     save=("input", "result")),
    "special_i1": D({"input": _i1_grad}, save=("input", "result")),
    "special_i1e": D({"input": _i1e_grad}, save=("input", "result")),
    "special_ndtri": D({"input": lambda g, s: g * _SQRT_2PI * (s.result * s.result / 2).exp()}, save=("result",)),
    "special_log_ndtr": D({"input": lambda g, s: g / _SQRT_2PI * (-(s.result + s.input * s.input / 2)).exp()},
                          save=("input", "result")),
    "special_erfcx": D({"input": lambda g, s: g * (2 * s.input * s.result - _2_SQRT_PI)}, save=("input", "result")),
    "special_entr": D({"input": lambda g, s: -g * (1 + s.input.log())}, save=("input",)),
    "sinc": D({"input": _sinc_grad}, save=("input",)),
    "special_xlog1py": D({"input": _xlog1py_input, "other": lambda g, s: g * s.input / (s.other + 1)},
                         save=("input", "other")),
    "special_zeta": D({"input": _zeta_exponent,
                       "other": lambda g, s: -g * s.input * fl.special.zeta(s.input + 1, s.other)},
                      save=("input", "other")),
    "igamma": D({"input": _igamma_input, "other": _igamma_other}, save=("input", "other")),
    "igammac": D({"input": _igamma_input, "other": lambda g, s: -_igamma_other(g, s)}, save=("input", "other")),
    "_fft_c2c": D({"input": _c2c_grad}),
    "_fft_r2c": D({"input": _r2c_grad}),
    "_fft_c2r": D({"input": _c2r_grad}),
}
