"""Operators of the special functions (``torch.special``): gamma family, Bessel, normal distribution.

Elementwise operators declared through the factories of ``_elementwise_base``; their kernels
compile one scalar formula per function for both devices (Note [One formula, two devices] in
``flambeau._kernels.cpu.special``). Names follow PyTorch's: those torch has at the top level
(``lgamma``, ``digamma``, ``polygamma``, ``mvlgamma``, ``i0``, ``sinc``, ``igamma``, ``igammac``) are
``flambeau.<name>``
and ``Tensor.<name>``; the others are operators ``special_<name>`` reached as
``flambeau.special.<name>`` only, as in torch. ``flambeau.special`` gathers them with the special
functions declared elsewhere (``erf``, ``logit``, ``xlogy`` ...).

Integer and bool inputs compute in the default float dtype; every result has the input's shape.
``special_ndtr``, ``mvlgamma``, ``special_spherical_bessel_j0`` and the orthogonal polynomials
(``special_chebyshev_polynomial_t`` ... ``special_legendre_polynomial_p``) are composites of other operators.
"""

from __future__ import annotations

import math

import numpy as np

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, _wrap, inplace_needs_engine, record_if_needed
from flambeau._ops._elementwise_base import (
    binary_op,
    binary_samples,
    check_inplace_cast,
    type_name,
    unary_op,
    unary_samples,
)
from flambeau._ops._registry import declare
from flambeau._ops._samples import FLOAT, SampleInput, make_tensor

__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma", "i0", "sinc", "igamma", "igammac"]


def _unary(signature: str, doc: str, low: float = -3.0, high: float = 3.0, top_level: bool = True,
           differentiable: bool = True):
    """A unary special function computing in float; ``top_level=False``: reached through flambeau.special only."""
    name = signature.split("(", 1)[0]
    opts = {} if top_level else {"function": False, "method": False, "inplace": False}
    op = unary_op(signature, rule="float", category="special", samples=unary_samples(low, high),
                  differentiable=differentiable, **opts)
    if not top_level:
        op.sample_options(ref=name.replace("_", ".", 1))
    op.fn.__doc__ = (f"{doc}\n\n``input``: a tensor of any shape and dtype; the result has its shape and "
                     f"dtype, or the default float dtype for integer and bool inputs.")
    return op


LGAMMA = _unary("lgamma(Tensor input) -> Tensor", "``log|Gamma(x)|`` elementwise (``+inf`` at 0 and the negative "
                "integers).", 0.2, 5.0)
DIGAMMA = _unary("digamma(Tensor input) -> Tensor", "The digamma function ``psi(x) = d/dx log Gamma(x)`` (``-inf`` "
                 "at +0, ``+inf`` at -0, NaN at the negative integers).", 0.2, 5.0)
I0 = _unary("i0(Tensor input) -> Tensor", "The modified Bessel function of the first kind of order 0, ``I0(x)``.",
            -12.0, 12.0)
SINC = _unary("sinc(Tensor input) -> Tensor", "The normalised sinc ``sin(pi x) / (pi x)`` (1 at 0).")
I0E = _unary("special_i0e(Tensor input) -> Tensor", "The exponentially scaled ``I0``: ``exp(-|x|) I0(x)``.",
             -12.0, 12.0, False)
I1 = _unary("special_i1(Tensor input) -> Tensor", "The modified Bessel function of the first kind of order 1, "
            "``I1(x)``.", -12.0, 12.0, False)
I1E = _unary("special_i1e(Tensor input) -> Tensor", "The exponentially scaled ``I1``: ``exp(-|x|) I1(x)``.",
             -12.0, 12.0, False)
NDTRI = _unary("special_ndtri(Tensor input) -> Tensor", "The inverse of the standard normal CDF: ``x`` with "
               "``ndtr(x) = p`` (``-inf`` at 0, ``+inf`` at 1, NaN outside [0, 1]).", 0.02, 0.98, False)
ERFCX = _unary("special_erfcx(Tensor input) -> Tensor", "The scaled complementary error function "
               "``exp(x**2) erfc(x)``, finite where ``erfc`` underflows.", -3.0, 15.0, False)
LOG_NDTR = _unary("special_log_ndtr(Tensor input) -> Tensor", "``log`` of the standard normal CDF, accurate in "
                  "both tails.", -10.0, 5.0, False)
ENTR = _unary("special_entr(Tensor input) -> Tensor", "``-x log(x)`` (0 at 0, ``-inf`` for negative ``x``).",
              0.05, 3.0, False)
# torch differentiates neither: their results never require grad
BESSEL_J0 = _unary("special_bessel_j0(Tensor input) -> Tensor", "The Bessel function of the first kind of order 0, "
                   "``J0(x)`` (not differentiable, as in torch).", -12.0, 12.0, False, False)
BESSEL_J1 = _unary("special_bessel_j1(Tensor input) -> Tensor", "The Bessel function of the first kind of order 1, "
                   "``J1(x)`` (not differentiable, as in torch).", -12.0, 12.0, False, False)
lgamma, digamma, i0, sinc = LGAMMA.fn, DIGAMMA.fn, I0.fn, SINC.fn


def _binary(signature: str, doc: str, samples):
    op = binary_op(signature, rule="float", category="special", function=False, method=False, inplace=False,
                   samples=samples)
    op.sample_options(ref=op.name.replace("_", ".", 1), dtypes=FLOAT)
    op.fn.__doc__ = (f"{doc}\n\n``input`` and ``other``: tensors or numbers (at least one a tensor) of "
                     f"broadcastable shapes; the result has the broadcast shape and the promoted float dtype.")
    return op


def _grad_in_other_samples(input_range: tuple, other_range: tuple, scalar_input: bool):
    """Samples of an operator that torch differentiates in ``other`` only (``input`` requires no grad)."""
    def samples(device, dtype, requires_grad):
        x = make_tensor((3, 4), device=device, dtype=dtype, low=input_range[0], high=input_range[1])
        q = make_tensor((3, 4), device=device, dtype=dtype, low=other_range[0], high=other_range[1],
                        requires_grad=requires_grad)
        yield SampleInput(x, q).named("same shape")
        yield SampleInput(x, make_tensor((4,), device=device, dtype=dtype, low=other_range[0], high=other_range[1],
                                         requires_grad=requires_grad)).named("broadcast")
        if scalar_input:
            yield SampleInput(2.5, q).named("scalar input")

    return samples


XLOG1PY = _binary("special_xlog1py(Tensor input, Tensor other) -> Tensor",
                  "``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN).",
                  binary_samples(other_low=-0.9, other_high=5.0))
ZETA = _binary("special_zeta(Tensor input, Tensor other) -> Tensor",
               "The Hurwitz zeta function ``sum_k (k + other) ** -input`` (the Riemann zeta at ``other = 1``).",
               _grad_in_other_samples((1.5, 4.0), (0.5, 3.0), True))


def _tensors_only(input, other):
    # torch's igamma takes no Python numbers (the front turns this TypeError into torch's message)
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        raise TypeError("igamma takes tensors only")


def _incomplete_gamma(signature: str, doc: str):
    op = binary_op(signature, rule="float", category="special", allowed="float", check_operands=_tensors_only,
                   samples=_grad_in_other_samples((0.2, 6.0), (0.1, 8.0), False), sample_dtypes=FLOAT)
    op.fn.__doc__ = (f"{doc}\n\n``input`` (``a > 0``) and ``other`` (``x >= 0``): floating tensors of broadcastable "
                     "shapes; the result has the broadcast shape and promoted dtype. Differentiable in ``other`` "
                     "only, as in torch. Series and continued fraction in float64: relative accuracy about 1e-10 "
                     "for ``a`` beyond 1000.")
    return op


IGAMMA = _incomplete_gamma("igamma(Tensor input, Tensor other) -> Tensor",
                           "The regularized lower incomplete gamma function ``P(a, x) = gamma(a, x) / Gamma(a)``.")
IGAMMAC = _incomplete_gamma("igammac(Tensor input, Tensor other) -> Tensor",
                            "The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.")
igamma, igammac = IGAMMA.fn, IGAMMAC.fn


# --- polygamma: the integer order comes first ------------------------------------------------------
POLYGAMMA = declare("polygamma(int n, Tensor input) -> Tensor", method=False, category="special")


def _polygamma_dtype(n, input, opname="polygamma"):
    if not isinstance(input, Tensor):
        raise TypeError(f"{opname}(): argument 'input' (position 2) must be Tensor, not {type(input).__name__}")
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{opname}(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    d = input.dtype
    return d if d.is_floating_point else dt.get_default_dtype()


def _run_polygamma(n, input, d, inplace: bool):
    k = POLYGAMMA.kernel(input._device.type)
    if inplace:
        check_inplace_cast(d, input.dtype)
        if inplace_needs_engine(input):  # copy_ records the in-place write
            return input.copy_(polygamma(n, input))
        k(input._data, d, n, out=input._data)
        input._storage._version += 1
        return input
    out = _wrap(k(input._data, d, n), input._device)
    record_if_needed(POLYGAMMA, (n, input), {}, out)
    return out


@POLYGAMMA.front
def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of the digamma function, ``psi^(n)(x)`` (``n = 0`` is digamma).

    ``n``: a non-negative int; ``input``: a tensor of any shape. The result has its shape and
    dtype, or the default float dtype for integer and bool inputs.
    """
    return _run_polygamma(n, input, _polygamma_dtype(n, input), False)


def _polygamma_method(self, n: int) -> Tensor:
    """``Tensor.polygamma(n)``: :func:`flambeau.polygamma` with the tensor as ``input``."""
    return polygamma(n, self)


def _polygamma_method_(self, n: int) -> Tensor:
    """In-place ``Tensor.polygamma_(n)``; returns ``self``."""
    return _run_polygamma(n, self, _polygamma_dtype(n, self), True)


# Tensor.polygamma takes the order second (self first): bound through the table like the dunders.
POLYGAMMA.dunders["polygamma"] = _polygamma_method
POLYGAMMA.dunders["polygamma_"] = _polygamma_method_


@POLYGAMMA.samples(dtypes=FLOAT)
def _polygamma_samples(device, dtype, requires_grad):
    for n in (0, 1, 2, 3):
        x = make_tensor((3, 4), device=device, dtype=dtype, low=0.5, high=4.0, requires_grad=requires_grad)
        yield SampleInput(n, x).named(f"n={n}")


# --- composites ------------------------------------------------------------------------------------
NDTR = declare("special_ndtr(Tensor input) -> Tensor", composite=True, function=False, method=False,
               category="special")


@NDTR.front
def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF ``(1 + erf(x / sqrt(2))) / 2``, computed as ``erfc(-x / sqrt(2)) / 2``
    (accurate in the lower tail). Same shapes and dtypes as :func:`flambeau.special.erf`."""
    from flambeau._ops.elementwise import erfc

    if not isinstance(input, Tensor):
        raise TypeError(f"special_ndtr(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return erfc(input * -math.sqrt(0.5)) * 0.5


NDTR.samples(unary_samples(), dtypes=FLOAT, ref="special.ndtr")

MVLGAMMA = declare("mvlgamma(Tensor input, int p) -> Tensor", composite=True, category="special")


def _mvlgamma(input, p):
    import flambeau as fl

    if not isinstance(input, Tensor):
        raise TypeError(f"mvlgamma(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"mvlgamma is not implemented for {type_name(input.dtype)}")
    if isinstance(p, bool) or not isinstance(p, int):
        raise TypeError(f"mvlgamma(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not bool((input > (p - 1) / 2).all()):
        raise RuntimeError("All elements must be greater than (p-1)/2")
    shifts = fl.arange(p, dtype=input.dtype, device=input.device) * -0.5
    return lgamma(input.unsqueeze(-1) + shifts).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


@MVLGAMMA.front
def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum_{j < p} lgamma(x - j / 2)``.

    ``input``: a floating tensor whose elements all exceed ``(p - 1) / 2``; ``p >= 1``. The result
    has the shape and dtype of ``input``.
    """
    return _mvlgamma(input, p)


@MVLGAMMA.inplace
def mvlgamma_(self, p: int) -> Tensor:
    """In-place version of :func:`flambeau.mvlgamma`; returns ``self``."""
    return self.copy_(_mvlgamma(self, p))


@MVLGAMMA.samples(dtypes=FLOAT)
def _mvlgamma_samples(device, dtype, requires_grad):
    for p in (1, 3):
        x = make_tensor((3, 4), device=device, dtype=dtype, low=p, high=p + 3.0, requires_grad=requires_grad)
        yield SampleInput(x, p).named(f"p={p}")


# --- orthogonal polynomials and spherical j0: composites, not differentiable (as in torch) -------
# Note [Polynomials by recurrence]: torch (aten/src/ATen/native/Math.h) evaluates each element with a
# three-term recurrence up to its own n, after special cases (n < 0 gives 0, the end points of the
# interval, a closed form in acos for large n inside it). Here the recurrence runs once up to the
# largest n that needs it (read on the host: one synchronisation) over the whole tensor, and ``where``
# keeps each element's term at its own order; the special cases are applied over it in torch's order.
# torch casts n to int64 (truncation; NaN and inf fall to a negative n here, so 0, as torch gives on
# x86), and evaluates in the promoted dtype of input and n (integral -> the default float dtype).

def _poly_operands(name: str, input, n):
    """``(x, n)``: detached tensors of the result dtype, broadcast together, ``n`` truncated (non-finite -> -1)."""
    import flambeau as fl

    if not isinstance(input, Tensor) and not isinstance(n, Tensor):
        raise TypeError(f"special_{name}(): expected a Tensor as 'input' or 'n', got {type(input).__name__} "
                        f"and {type(n).__name__}")
    for arg, value in (("input", input), ("n", n)):
        if not isinstance(value, (Tensor, int, float)):
            raise TypeError(f"special_{name}(): argument '{arg}' must be Tensor or Number, not {type(value).__name__}")
    d = fl.result_type(input, n)
    if not d.is_floating_point and not d.is_complex:
        d = dt.get_default_dtype()
    device = (input if isinstance(input, Tensor) else n).device
    if d not in (dt.float32, dt.float64):
        raise RuntimeError(f'"{name}_{device.type}" not implemented for \'{type_name(d)}\'')
    x = fl.as_tensor(input, dtype=d, device=device).detach()
    order = fl.as_tensor(n, dtype=d, device=device).detach()
    x, order = fl.broadcast_tensors(x, order)
    order = fl.where(fl.isfinite(order), order.trunc(), -1.0)
    return x, order


_NAN_CHECK_EVERY = 64  # recurrence steps between the checks of stop_on_nan (each a host synchronisation)


def _by_recurrence(order, need, p, q, step, top_limit=None, stop_on_nan: bool = False):
    """Each element's term at its own ``order``: ``p``, ``q`` the terms of orders 0 and 1, ``step(m, p, q)``
    the term of order ``m`` from the two before; only the elements in ``need`` decide how far it runs.
    ``stop_on_nan``: torch's Chebyshev loops stop at a NaN term and return it, so once every element still
    running holds NaN they are NaN and the recurrence ends (an order of 2**40 outside [-1, 1] ran forever)."""
    import flambeau as fl

    out = fl.where(order == 0, p, q)
    top = int(fl.where(need, order, 0.0).max().item()) if order.numel() else 0
    if top_limit is not None:
        top = min(top, top_limit)
    for m in range(2, top + 1):
        p, q = q, step(m, p, q)
        out = fl.where(order == m, q, out)
        if stop_on_nan and m % _NAN_CHECK_EVERY == 0:
            running = need & (order > m)
            if not bool((running & ~fl.isnan(q)).any()):
                return fl.where(running, math.nan, out)
    return out


def _sign_by_parity(order, value):
    """``value`` for even ``order``, ``-value`` for odd (torch's ``n % 2 == 0`` test)."""
    import flambeau as fl

    return fl.where(order.remainder(2) == 0, value, -value)


def _chebyshev(name: str, input, n, kind: str, shifted: bool):
    """Chebyshev polynomials of the four kinds at ``input`` (``shifted``: at ``2 input - 1``), torch's cases."""
    import flambeau as fl

    x, order = _poly_operands(name, input, n)
    y = x + x - 1.0 if shifted else x
    # torch's thresholds of the closed form: the shifted U and V switch at n > 6, shifted W at n > 4
    threshold = {"t": 6, "u": 6 if shifted else 8, "v": 6 if shifted else 8, "w": 4 if shifted else 8}[kind]
    inside = (y.abs() < 1.0) & (order > threshold)
    # the end points: x = 1 and x = 0 (shifted) are exactly y = 1 and y = -1
    top, bottom = (x == 1.0, x == 0.0) if shifted else ((x.abs() == 1.0) & (x > 0), (x.abs() == 1.0) & (x < 0))
    ones, twice = fl.ones_like(y), order + order + 1.0
    theta = fl.acos(y)
    if kind == "t":
        q1, closed, at_top, at_bottom = y, fl.cos(order * theta), ones, _sign_by_parity(order, ones)
    elif kind == "u":
        q1, at_top, at_bottom = y + y, order + 1.0, _sign_by_parity(order, order + 1.0)
        s = fl.sin(theta)
        closed = fl.where(s != 0, fl.sin((order + 1.0) * theta) / s, (order + 1.0) * fl.cos((order + 1.0) * theta) / y)
    elif kind == "v":
        q1, at_top, at_bottom = y + y - 1.0, ones, _sign_by_parity(order, twice)
        closed = fl.where(fl.sin(theta / 2.0) != 1.0, fl.cos((order + 0.5) * theta) / fl.cos(theta / 2.0), at_bottom)
    else:
        q1, at_top, at_bottom = y + y + 1.0, twice, _sign_by_parity(order, ones)
        # torch's fallback where cos(acos(y) / 2) rounds to 1: 2n + 1 for x > 0, except in the shifted W
        fallback = at_bottom if shifted else fl.where(y > 0, twice, at_bottom)
        closed = fl.where(fl.cos(theta / 2.0) != 1.0, fl.sin((order + 0.5) * theta) / fl.sin(theta / 2.0), fallback)
    ends = top | bottom
    out = _by_recurrence(order, ~ends & ~inside & (order >= 2), ones, q1, lambda m, p, q: (y + y) * q - p,
                         stop_on_nan=True)
    out = fl.where(inside, closed, out)
    out = fl.where(top, at_top, fl.where(bottom, at_bottom, out))
    return fl.where(order < 0, 0.0, out)


def _hermite(name: str, input, n, physicists: bool):
    import flambeau as fl

    x, order = _poly_operands(name, input, n)
    limit = 128 if x.dtype == dt.float32 else 512  # torch's getHermitianLimit: NaN beyond
    if physicists:  # torch's loop counter k = 2 (m - 1)
        q1, step = x + x, lambda m, p, q: (x + x) * q - (2 * (m - 1)) * p
    else:
        q1, step = x, lambda m, p, q: x * q - (m - 1) * p
    out = _by_recurrence(order, order >= 2, fl.ones_like(x), q1, step, limit)
    out = fl.where(order > limit, math.nan, out)
    return fl.where(order < 0, 0.0, out)


def _laguerre_legendre(name: str, input, n):
    """Laguerre ``L_n`` (1 at x = 0) or Legendre ``P_n`` (1 or ``(-1)**n`` at x = +-1): torch's recurrences,
    whose loop counter k is the order minus one."""
    import flambeau as fl

    x, order = _poly_operands(name, input, n)
    ones = fl.ones_like(x)
    if name == "laguerre_polynomial_l":
        case, at_case, q1 = x.abs() == 0.0, ones, 1.0 - x

        def step(m, p, q):
            k = m - 1
            return (((1.0 - x) + (k + k)) * q - k * p) / (k + 1)
    else:
        case, at_case, q1 = x.abs() == 1.0, fl.where(x > 0, 1.0, _sign_by_parity(order, ones)), x

        def step(m, p, q):
            k = m - 1
            return ((k + k + 1) * x * q - k * p) / (k + 1)

    out = _by_recurrence(order, ~case & (order >= 2), ones, q1, step)
    return fl.where(order < 0, 0.0, fl.where(case, at_case, out))


# overflow to inf and inf - inf = NaN are the values torch gives too: no RuntimeWarning from the CPU kernels
def _quiet():
    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


_POLY_DOC = """

``input`` and ``n``: tensors or numbers (at least one a tensor) of broadcastable shapes; ``n`` is
truncated to an integer, and a negative ``n`` gives 0. The result has the broadcast shape and the
promoted dtype of both, float32 or float64 (integral operands compute in the default float dtype;
other dtypes raise RuntimeError, as in torch). Evaluated as torch does (Note [Polynomials by
recurrence]): the recurrence runs up to the largest ``n`` that needs it, read on the host (one
synchronisation with the device). Not differentiable, as in torch: the result never requires grad."""


def _declare_polynomial(name: str, doc: str, evaluate):
    op = declare(f"special_{name}(Tensor input, Tensor n) -> Tensor", composite=True, differentiable=False,
                 function=False, method=False, category="special")

    def fn(input, n):
        with _quiet():
            return evaluate(input, n)

    fn.__doc__ = doc + _POLY_DOC
    op.front(fn)
    op.samples(_polynomial_samples, dtypes=FLOAT, ref=f"special.{name}", gradcheck=False)
    return op


def _polynomial_samples(device, dtype, requires_grad):
    x = make_tensor((3, 4), device=device, dtype=dtype, low=-1.5, high=1.5)
    yield SampleInput(x, 3).named("n=3")
    yield SampleInput(x, make_tensor((4,), device=device, dtype=dt.int64, low=-1, high=12)).named("tensor n")
    yield SampleInput(0.5, make_tensor((3,), device=device, dtype=dt.int64, low=0, high=9)).named("number x")


_CHEBYSHEV_DOC = {
    "t": "of the first kind ``T_n``: ``T_{n+1} = 2 x T_n - T_{n-1}``, ``T_0 = 1``, ``T_1 = x``.",
    "u": "of the second kind ``U_n``: the recurrence of ``T_n`` from ``U_0 = 1``, ``U_1 = 2 x``.",
    "v": "of the third kind ``V_n``: the recurrence of ``T_n`` from ``V_0 = 1``, ``V_1 = 2 x - 1``.",
    "w": "of the fourth kind ``W_n``: the recurrence of ``T_n`` from ``W_0 = 1``, ``W_1 = 2 x + 1``.",
}
CHEBYSHEV = {}
for _kind, _text in _CHEBYSHEV_DOC.items():
    for _shifted in (False, True):
        _name = f"{'shifted_' if _shifted else ''}chebyshev_polynomial_{_kind}"
        _doc = (f"The {'shifted ' if _shifted else ''}Chebyshev polynomial {_text}"
                + (" Shifted: evaluated at ``2 x - 1``, orthogonal on [0, 1]." if _shifted else ""))
        CHEBYSHEV[_name] = _declare_polynomial(
            _name, _doc, lambda input, n, _n=_name, _k=_kind, _s=_shifted: _chebyshev(_n, input, n, _k, _s))
del _kind, _text, _shifted, _name, _doc

HERMITE_H = _declare_polynomial(
    "hermite_polynomial_h", "The physicists' Hermite polynomial ``H_n``: ``H_{n+1} = 2 x H_n - 2 n H_{n-1}``, "
    "``H_0 = 1``, ``H_1 = 2 x`` (NaN beyond n = 128 in float32, 512 in float64, as in torch).",
    lambda input, n: _hermite("hermite_polynomial_h", input, n, True))
HERMITE_HE = _declare_polynomial(
    "hermite_polynomial_he", "The probabilists' Hermite polynomial ``He_n``: ``He_{n+1} = x He_n - n He_{n-1}``, "
    "``He_0 = 1``, ``He_1 = x`` (NaN beyond n = 128 in float32, 512 in float64, as in torch).",
    lambda input, n: _hermite("hermite_polynomial_he", input, n, False))
LAGUERRE_L = _declare_polynomial(
    "laguerre_polynomial_l", "The Laguerre polynomial ``L_n``: ``(n + 1) L_{n+1} = (2 n + 1 - x) L_n - n L_{n-1}``, "
    "``L_0 = 1``, ``L_1 = 1 - x``.", lambda input, n: _laguerre_legendre("laguerre_polynomial_l", input, n))
LEGENDRE_P = _declare_polynomial(
    "legendre_polynomial_p", "The Legendre polynomial ``P_n``: ``(n + 1) P_{n+1} = (2 n + 1) x P_n - n P_{n-1}``, "
    "``P_0 = 1``, ``P_1 = x``.", lambda input, n: _laguerre_legendre("legendre_polynomial_p", input, n))

SPHERICAL_BESSEL_J0 = declare("special_spherical_bessel_j0(Tensor input) -> Tensor", composite=True,
                              differentiable=False, function=False, method=False, category="special")


@SPHERICAL_BESSEL_J0.front
def spherical_bessel_j0(input: Tensor) -> Tensor:
    """The spherical Bessel function of the first kind of order 0, ``j0(x) = sin(x) / x`` (1 at 0, 0 at
    ``+-inf``); for ``|x| < 0.5`` torch's Taylor polynomial of degree 12, which this follows.

    ``input``: a tensor of any shape; the result has its shape and dtype (float32 or float64; integral
    inputs give the default float dtype). Not differentiable, as in torch.
    """
    import flambeau as fl

    if not isinstance(input, Tensor):
        raise TypeError(f"special_spherical_bessel_j0(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    x, _ = _poly_operands("spherical_bessel_j0", input, 0)
    with _quiet():
        x2 = x * x
        series = 1.0 / 6227020800.0
        for c in (-1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0):
            series = c + x2 * series
        series = 1.0 + x2 * series
        out = fl.where(x.abs() < 0.5, series, fl.sin(x) / x)
    return fl.where(x.isinf(), 0.0, out)


SPHERICAL_BESSEL_J0.samples(unary_samples(-12.0, 12.0), dtypes=FLOAT, ref="special.spherical_bessel_j0",
                            gradcheck=False)
