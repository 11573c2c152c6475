"""Special functions, as ``torch.special``: ``import flambeau as fl; fl.special.digamma(x)``.

The functions are elementwise operators of the operator table (``flambeau._ops.special`` and the
elementwise, reduction and nn families); several are the same function under torch's other name:
``gammaln`` is :func:`flambeau.lgamma`, ``psi`` is :func:`flambeau.digamma`, ``expit`` is
:func:`flambeau.sigmoid`, ``multigammaln`` is :func:`flambeau.mvlgamma`, ``gammainc`` and
``gammaincc`` are :func:`flambeau.igamma` and :func:`flambeau.igammac`. Integer and bool inputs
compute in the default float dtype; results keep the input's shape. Each has torch's derivative.
"""

from __future__ import annotations

from flambeau._ops import OPS as _OPS
from flambeau._ops.elementwise import erf, erfc, erfinv, exp2, expm1, log1p, logit, round, sigmoid, xlogy  # noqa: A004
from flambeau._ops.nn_ops import log_softmax, softmax
from flambeau._ops.reduction import logsumexp
from flambeau._ops.special import digamma, i0, igamma, igammac, lgamma, mvlgamma, ndtr, polygamma, sinc

__all__ = ["bessel_j0", "bessel_j1", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammainc", "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit",
           "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py",
           "xlogy", "zeta"]

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
del _OPS
