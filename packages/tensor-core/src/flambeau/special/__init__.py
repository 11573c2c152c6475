"""Special functions, as ``torch.special``: ``import flambeau as fl; fl.special.digamma(x)``.

The functions are elementwise operators of the operator table (``flambeau._ops.special`` and the
elementwise, reduction and nn families); several are the same function under torch's other name:
``gammaln`` is :func:`flambeau.lgamma`, ``psi`` is :func:`flambeau.digamma`, ``expit`` is
:func:`flambeau.sigmoid`, ``multigammaln`` is :func:`flambeau.mvlgamma`, ``gammainc`` and
``gammaincc`` are :func:`flambeau.igamma` and :func:`flambeau.igammac`, ``modified_bessel_i0`` and
``modified_bessel_i1`` are :func:`i0` and :func:`i1`. Integer and bool inputs compute in the default
float dtype; results keep the input's shape. Each has torch's derivative, except those torch does not
differentiate either: ``bessel_j0``, ``bessel_j1``, ``spherical_bessel_j0`` and the orthogonal
polynomials (``chebyshev_polynomial_t`` ... ``legendre_polynomial_p``), composites evaluated as torch
does (Note [Polynomials by recurrence] in ``flambeau._ops.special``).
"""

from __future__ import annotations

from flambeau._ops import OPS as _OPS
from flambeau._ops._keywords import function_binding as _function_binding
from flambeau._ops.elementwise import erf, erfc, erfinv, exp2, expm1, log1p, logit, round, sigmoid, xlogy  # noqa: A004
from flambeau._ops.nn_ops import log_softmax, softmax
from flambeau._ops.reduction import logsumexp
from flambeau._ops.special import digamma, i0, igamma, igammac, lgamma, mvlgamma, ndtr, polygamma, sinc

__all__ = ["bessel_j0", "bessel_j1", "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammainc", "gammaincc", "gammaln", "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1",
           "i1e", "laguerre_polynomial_l", "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax", "logit",
           "logsumexp", "modified_bessel_i0", "modified_bessel_i1", "multigammaln", "ndtr", "ndtri", "polygamma",
           "psi", "round", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "sinc", "softmax",
           "spherical_bessel_j0", "xlog1py", "xlogy", "zeta"]

# torch.special's other names for top-level functions
gammaln = lgamma
psi = digamma
expit = sigmoid
multigammaln = mvlgamma
gammainc = igamma
gammaincc = igammac

# operators that exist only here, as in torch (declared as ``special_<name>``)
i0e = _OPS["special_i0e"].fn
i1 = _OPS["special_i1"].fn
i1e = _OPS["special_i1e"].fn
ndtri = _OPS["special_ndtri"].fn
erfcx = _OPS["special_erfcx"].fn
log_ndtr = _OPS["special_log_ndtr"].fn
entr = _OPS["special_entr"].fn
xlog1py = _OPS["special_xlog1py"].fn
zeta = _OPS["special_zeta"].fn
bessel_j0 = _OPS["special_bessel_j0"].fn
bessel_j1 = _OPS["special_bessel_j1"].fn
spherical_bessel_j0 = _OPS["special_spherical_bessel_j0"].fn
chebyshev_polynomial_t = _OPS["special_chebyshev_polynomial_t"].fn
chebyshev_polynomial_u = _OPS["special_chebyshev_polynomial_u"].fn
chebyshev_polynomial_v = _OPS["special_chebyshev_polynomial_v"].fn
chebyshev_polynomial_w = _OPS["special_chebyshev_polynomial_w"].fn
shifted_chebyshev_polynomial_t = _OPS["special_shifted_chebyshev_polynomial_t"].fn
shifted_chebyshev_polynomial_u = _OPS["special_shifted_chebyshev_polynomial_u"].fn
shifted_chebyshev_polynomial_v = _OPS["special_shifted_chebyshev_polynomial_v"].fn
shifted_chebyshev_polynomial_w = _OPS["special_shifted_chebyshev_polynomial_w"].fn
hermite_polynomial_h = _OPS["special_hermite_polynomial_h"].fn
hermite_polynomial_he = _OPS["special_hermite_polynomial_he"].fn
laguerre_polynomial_l = _OPS["special_laguerre_polynomial_l"].fn
legendre_polynomial_p = _OPS["special_legendre_polynomial_p"].fn

# torch.special's names of the modified Bessel functions of the first kind (torch computes the same values)
modified_bessel_i0 = i0
modified_bessel_i1 = i1
del _OPS

# the operators' bindings, which take torch's keyword forms (``out=``, Note [torch's keyword forms]): the same
# functions as ``flambeau.<name>`` where that exists
def _bind_operators() -> None:
    names = globals()
    for name in __all__:
        op = getattr(names[name], "_opdef", None)
        if op is not None:
            names[name] = _function_binding(op)


_bind_operators()
