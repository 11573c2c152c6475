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
``special_ndtr`` and ``mvlgamma`` are composites of other operators.
"""

from __future__ import annotations

import math

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, _wrap, grad_state, inplace_needs_engine, record
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
    if input._requires_grad and grad_state.enabled:
        record(POLYGAMMA, (n, input), {}, out)
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
