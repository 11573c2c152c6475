"""Operators of the numeric family: integer and floating-point number functions, statistics, scatters,
windows, and torch's top-level aliases and in-place twins (issue 13).

Almost every operator here is a composite (``declare(..., composite=True)``): it is written with other
operators, which autograd records, so it needs no kernel and no derivative of its own and runs on every
device. The exception is :func:`nextafter` (bit-level, no composition): kernels in
``flambeau._kernels.cpu.numeric`` and ``flambeau._kernels.cuda.numeric``, ``kernel(a, b) -> array`` on
two arrays of the result dtype (float32/float64 on CUDA).

In-place twins (``Tensor.gcd_``, ``Tensor.cumsum_`` ...) compute the out-of-place result and copy it into
``self``; when autograd may save ``self`` they compute from a copy of it (see :func:`_source`).

Composites call other operators through the ``flambeau`` namespace (``fl.where``): this module is
imported while ``flambeau`` initialises, so ``fl`` is a stand-in that looks each name up in ``flambeau``
when a function runs (a module-level ``import flambeau`` here would be an import cycle).
"""

from __future__ import annotations

import builtins
import itertools
import math

import numpy as np

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, wrap_dim
from flambeau._ops._common import broadcast_shapes as _broadcast
from flambeau._ops._registry import declare
from flambeau._ops._samples import SampleInput, make_tensor
from flambeau._ops.reduction import _return_type


class _Flambeau:
    """``flambeau``'s namespace, read when an operator runs (see the module docstring)."""

    def __getattr__(self, name: str):
        import flambeau

        return getattr(flambeau, name)


fl = _Flambeau()

__all__ = [
    "addr", "bincount", "gcd", "lcm", "heaviside", "frexp", "ldexp", "nextafter", "isin", "isreal",
    "logcumsumexp", "nanmedian", "quantile", "nanquantile", "take_along_dim", "unravel_index", "diagflat",
    "dist", "trapezoid", "trapz", "cumulative_trapezoid", "gradient", "combinations", "histogramdd",
    "as_strided_scatter",
    "diagonal_scatter", "select_scatter", "slice_scatter", "index_reduce", "bartlett_window",
    "blackman_window", "hamming_window", "hann_window", "kaiser_window", "ravel", "is_same_size",
    "is_signed", "is_neg", "broadcast_shapes", "fill", "detach", "unsafe_chunk", "unsafe_split",
    "unsafe_split_with_sizes", "constant_pad_nd", "pdist", "pairwise_distance", "cosine_similarity",
    "bilinear", "nuclear_norm", "frobenius_norm", "matrix_rank", "sum_to_size", "segment_reduce",
]

_FLOATS = (dt.float16, dt.bfloat16, dt.float32, dt.float64)


_frexp_t = _return_type("frexp", "mantissa exponent")
_nanmedian_t = _return_type("nanmedian", "values indices")


def _op(signature: str, **options):
    """Declare a composite operator of this family."""
    return declare(signature, composite=True, category="numeric", **options)


def _copy_into(self: Tensor, result: Tensor) -> Tensor:
    """``self`` overwritten with ``result`` (the in-place twins: autograd records the copy)."""
    return self.copy_(result)


def _inplace_of(op, fn):
    """Declare ``Tensor.<op>_``: ``self`` overwritten with ``fn(self, ...)``, the out-of-place front."""
    def inplace(self: Tensor, *args, **kwargs) -> Tensor:
        return _copy_into(self, fn(_source(self), *args, **kwargs))

    inplace.__doc__ = f"In-place version of :func:`flambeau.{op.name}`; returns ``self``."
    return op.inplace(inplace)


def _source(self: Tensor) -> Tensor:
    """What an in-place twin computes from: a copy of ``self`` when autograd may save it (the backward
    of the out-of-place op must not see ``self`` overwritten by the copy), else ``self``."""
    return self.clone() if self.requires_grad and fl.is_grad_enabled() else self


def _integral(d) -> bool:
    return not (d.is_floating_point or d.is_complex)


# --- addr ----------------------------------------------------------------------------------------------
ADDR = _op("addr(Tensor input, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1) -> Tensor")


@ADDR.front
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``: ``vec1`` of shape ``(n,)``, ``vec2`` of shape ``(m,)``,
    ``input`` broadcastable to ``(n, m)``; the dtype is the promotion of the three. ``beta=0`` ignores
    ``input`` (its NaNs do not propagate); integer tensors take integer ``alpha``/``beta`` only."""
    for x, name in ((input, "input"), (vec1, "vec1"), (vec2, "vec2")):
        check_tensor(x, name, "addr")
    for v, name in ((vec1, "vec1"), (vec2, "vec2")):
        if v.dim() != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.dim()}-D")
    d = dt.result_type(input, vec1, vec2)
    if _integral(d) and any(isinstance(s, float) for s in (alpha, beta)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    shape = (vec1.shape[0], vec2.shape[0])
    if _broadcast(tuple(input.shape), shape) != shape:
        raise RuntimeError(f"The expanded size of the tensor ({shape[1]}) must match the existing size "
                           f"{list(input.shape)} of input: input must broadcast to {list(shape)}")
    outer = fl.outer(vec1.to(d), vec2.to(d))
    if alpha != 1:
        outer = outer * alpha
    if beta == 0:
        return outer.clone() if d is outer.dtype else outer.to(d)
    scaled = input.to(d) if beta == 1 else input.to(d) * beta
    return (scaled + outer).to(d)


addr_ = _inplace_of(ADDR, addr)


# --- bincount ------------------------------------------------------------------------------------------
BINCOUNT = _op("bincount(Tensor input, Tensor? weights=None, int minlength=0) -> Tensor", differentiable=False)


@BINCOUNT.front
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """The count of each value ``0 .. max(input)`` in the 1-D non-negative integer tensor ``input``
    (``weights[i]`` added instead of 1 where given), at least ``minlength`` long.

    int64 without weights; with weights, float32 for float32 weights, else float64 (torch's rule)."""
    check_tensor(input, "input", "bincount")
    if input.dim() != 1 or not _integral(input.dtype) or input.dtype is dt.bool:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.numel() and builtins.bool((input < 0).any()):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    n = builtins.max(minlength, int(input.max()) + 1 if input.numel() else 0)
    if weights is None:
        d, w = dt.int64, fl.ones(input.shape[0], dtype=dt.int64, device=input.device)
    else:
        d = dt.float32 if weights.dtype is dt.float32 else dt.float64
        w = weights.detach().to(d)
    return fl.zeros(n, dtype=d, device=input.device).index_add(0, input.long(), w)


# --- gcd, lcm ------------------------------------------------------------------------------------------
def _integer_pair(opname: str, input, other) -> tuple:
    check_tensor(input, "input", opname)
    check_tensor(other, "other", opname)
    d = dt.result_type(input, other)
    if not _integral(d) or d is dt.bool:
        raise RuntimeError(f'"{opname}_cpu" not implemented for \'{d.scalar_name}\'')
    return input.detach().to(d), other.detach().to(d)


GCD = _op("gcd(Tensor input, Tensor other) -> Tensor", differentiable=False)


@GCD.front
def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The greatest common divisor of ``input`` and ``other`` (integer tensors, broadcast), never
    negative; ``gcd(0, 0) = 0``."""
    a, b = _integer_pair("gcd", input, other)
    a, b = fl.broadcast_tensors(a.abs(), b.abs())
    # Euclid's algorithm on every element at once: at most ~92 rounds for int64.
    while True:
        live = b != 0
        if not builtins.bool(live.any()):
            return a
        divisor = fl.where(live, b, 1)
        a, b = fl.where(live, b, a), fl.where(live, a % divisor, 0)


gcd_ = _inplace_of(GCD, gcd)


LCM = _op("lcm(Tensor input, Tensor other) -> Tensor", differentiable=False)


@LCM.front
def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The least common multiple of ``input`` and ``other`` (integer tensors, broadcast), never
    negative; 0 where either is 0."""
    a, b = _integer_pair("lcm", input, other)
    g = gcd(a, b)
    zero = g == 0
    return fl.where(zero, 0, (a // fl.where(zero, 1, g) * b).abs())


lcm_ = _inplace_of(LCM, lcm)


# --- heaviside -----------------------------------------------------------------------------------------
HEAVISIDE = _op("heaviside(Tensor input, Tensor values) -> Tensor", differentiable=False)


@HEAVISIDE.front
def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """The Heaviside step: 0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``.
    ``input`` and ``values`` broadcast and must share one real dtype, as in torch."""
    check_tensor(input, "input", "heaviside")
    check_tensor(values, "values", "heaviside")
    if input.dtype.is_complex or values.dtype.is_complex:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    x, v = input.detach(), values.detach()
    return fl.where(x == 0, v, (x > 0).to(x.dtype))


heaviside_ = _inplace_of(HEAVISIDE, heaviside)


# --- frexp, ldexp, nextafter ---------------------------------------------------------------------------
FREXP = _op("frexp(Tensor input) -> (Tensor mantissa, Tensor exponent)")


@FREXP.front
def frexp(input: Tensor):
    """``(mantissa, exponent)`` with ``input = mantissa * 2 ** exponent`` and ``0.5 <= |mantissa| < 1``
    (0, inf and NaN give themselves and exponent 0). Floating inputs only; mantissa in ``input``'s
    dtype, exponent int32. Differentiable in the mantissa (``grad * 2 ** -exponent``)."""
    check_tensor(input, "input", "frexp")
    if not input.dtype.is_floating_point:
        raise RuntimeError("flambeau.frexp() only supports floating-point dtypes")
    x = input.double()  # every float32/16 value (subnormals included) is normal in float64
    finite = fl.isfinite(x) & (x != 0)
    e = fl.where(finite, fl.floor(fl.log2(fl.where(finite, x.abs(), 1.0).detach())) + 1, 0.0)
    half = fl.floor(-e / 2)  # two factors: 2 ** 1074 (a float64 subnormal) does not fit in one
    m = x * fl.exp2(half) * fl.exp2(-e - half)
    big = finite & (m.abs() >= 1)  # log2 rounding: move the mantissa back into [0.5, 1)
    m, e = fl.where(big, m / 2, m), e + big.double()
    small = finite & (m.abs() < 0.5)
    m, e = fl.where(small, m * 2, m), e - small.double()
    return _frexp_t(m.to(input.dtype), e.to(dt.int32))


LDEXP = _op("ldexp(Tensor input, Tensor other) -> Tensor")


@LDEXP.front
def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2 ** other``, broadcast; the promoted dtype of the two, the default float dtype when
    both are integers (as in torch)."""
    check_tensor(input, "input", "ldexp")
    check_tensor(other, "other", "ldexp")
    d = dt.result_type(input, other)
    if _integral(d):
        d = dt.get_default_dtype()
    return input.to(d) * fl.exp2(other.to(d))


ldexp_ = _inplace_of(LDEXP, ldexp)


NEXTAFTER = declare("nextafter(Tensor input, Tensor other) -> Tensor", differentiable=False, category="numeric")


@NEXTAFTER.front
def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The next floating-point value after ``input`` towards ``other``, elementwise (broadcast) in
    their promoted floating dtype."""
    check_tensor(input, "input", "nextafter")
    check_tensor(other, "other", "nextafter")
    d = dt.result_type(input, other)
    if d not in _FLOATS:
        raise RuntimeError(f'"nextafter_cpu" not implemented for \'{d.scalar_name}\'')
    dev = common_device(input, other)
    a, b = fl.broadcast_tensors(input.detach().to(d), other.detach().to(d))
    return _wrap(NEXTAFTER.kernel(dev.type)(a.contiguous()._data, b.contiguous()._data), dev, None, d)


nextafter_ = _inplace_of(NEXTAFTER, nextafter)


def _nextafter_samples(device, dtype, requires_grad):
    def mk(shape):
        return make_tensor(shape, device=device, dtype=dtype)

    yield SampleInput(mk((3, 4)), mk((3, 4))).named("same shape")
    yield SampleInput(mk((2, 3)), mk((3,))).named("broadcast")


NEXTAFTER.samples(_nextafter_samples, dtypes=("float32", "float64"), gradcheck=False)


# --- membership, predicates ----------------------------------------------------------------------------
ISIN = _op("isin(Tensor elements, Tensor test_elements, *, bool assume_unique=False, bool invert=False) -> Tensor",
           differentiable=False, method=False)


@ISIN.front
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """A bool tensor of ``elements``' shape: whether each element is in ``test_elements`` (either may
    be a number). ``invert`` gives the negation; ``assume_unique`` is accepted (the result is the same)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): at least one of 'elements' and 'test_elements' must be a Tensor")
    dev = (elements if isinstance(elements, Tensor) else test_elements).device
    e = elements if isinstance(elements, Tensor) else fl.tensor(elements, device=dev)
    t = test_elements if isinstance(test_elements, Tensor) else fl.tensor(test_elements, device=dev)
    d = dt.promote_types(e.dtype, t.dtype)
    e, t = e.detach().to(d), t.detach().to(d).reshape(-1)
    if t.numel() == 0:
        found = fl.zeros(e.shape, dtype=dt.bool, device=e.device)
    else:
        table = fl.sort(t).values
        pos = fl.searchsorted(table, e.reshape(-1)).clamp_max(t.numel() - 1)
        found = (table[pos] == e.reshape(-1)).reshape(e.shape)
    return ~found if invert else found


ISREAL = _op("isreal(Tensor input) -> Tensor", differentiable=False)


@ISREAL.front
def isreal(input: Tensor) -> Tensor:
    """A bool tensor: True where ``input``'s imaginary part is 0 (everywhere for a real ``input``)."""
    check_tensor(input, "input", "isreal")
    if input.dtype.is_complex:
        return fl.imag(input.detach()) == 0
    return fl.ones(input.shape, dtype=dt.bool, device=input.device)


def _predicate(signature: str, doc: str, value, **options):
    op = _op(signature, differentiable=False, **options)
    name = op.name

    @op.front
    def fn(input: Tensor, *rest) -> bool:
        check_tensor(input, "input", name)
        return value(input, *rest)

    fn.__doc__ = doc
    return fn


is_same_size = _predicate("is_same_size(Tensor input, Tensor other) -> bool",
                          "Whether ``input`` and ``other`` have the same shape.",
                          lambda a, b: tuple(a.shape) == tuple(check_tensor(b, "other", "is_same_size").shape))
is_signed = _predicate("is_signed(Tensor input) -> bool",
                       "Whether ``input``'s dtype is signed (every dtype but uint8 and bool).",
                       lambda a: a.dtype not in (dt.uint8, dt.bool))
is_neg = _predicate("is_neg(Tensor input) -> bool", "Always False: flambeau has no lazily negated tensors.",
                    lambda a: False)


# flambeau.is_nonzero is flambeau._info's; the operator adds the method torch also has.
IS_NONZERO = _op("is_nonzero(Tensor self) -> bool", differentiable=False, function=False)


@IS_NONZERO.front
def _is_nonzero(self: Tensor) -> bool:
    """The truth value of a one-element tensor (RuntimeError for other sizes), as :func:`flambeau.is_nonzero`."""
    return fl.is_nonzero(check_tensor(self, "self", "is_nonzero"))


# --- scans and order statistics ------------------------------------------------------------------------
LOGCUMSUMEXP = _op("logcumsumexp(Tensor input, int dim) -> Tensor")


@LOGCUMSUMEXP.front
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))`` computed stably: a log-step scan of ``logaddexp`` (no overflow,
    no loss for small terms). Floating inputs; same shape and dtype as ``input``."""
    check_tensor(input, "input", "logcumsumexp")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f'"logcumsumexp_out_cpu" not implemented for \'{input.dtype.scalar_name}\'')
    if input.dim() == 0:
        wrap_dim(dim, 1)
        return input.clone()
    d = wrap_dim(dim, input.dim())
    n, x, step = input.shape[d], input, 1
    while step < n:  # Hillis-Steele: after each round x[i] covers the last 2 * step terms up to i
        x = fl.cat([x.narrow(d, 0, step), fl.logaddexp(x.narrow(d, step, n - step), x.narrow(d, 0, n - step))], d)
        step *= 2
    return x if x is not input else input.clone()


NANMEDIAN = _op("nanmedian(Tensor input, int? dim=None, bool keepdim=False) -> Tensor")


@NANMEDIAN.front
def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """The median ignoring NaNs (the lower of the two middle values; NaN where all are NaN).

    Without ``dim``: a 0-dim tensor over all elements. With ``dim``: a ``(values, indices)`` namedtuple,
    ``indices`` (int64) locating each median along ``dim``."""
    check_tensor(input, "input", "nanmedian")
    if dim is None:
        if input.numel() == 0:
            return fl.full((), math.nan, dtype=input.dtype, device=input.device)
        return nanmedian(input.reshape(-1), 0).values
    x = input.reshape(1) if input.dim() == 0 else input
    d = wrap_dim(dim, x.dim())
    if x.shape[d] == 0:
        raise IndexError(f"nanmedian(): Expected reduction dim {d} to have non-zero size.")
    values, indices = fl.sort(x, d, stable=True)  # NaNs sort last
    valid = (~fl.isnan(x)).sum(d, keepdim=True) if x.dtype.is_floating_point else fl.full_like(
        indices.narrow(d, 0, 1), x.shape[d])
    pos = (valid - 1).clamp_min(0) // 2
    values, indices = values.gather(d, pos), indices.gather(d, pos)
    if not keepdim or input.dim() == 0:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return _nanmedian_t(values, indices)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(opname: str, input: Tensor, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool):
    check_tensor(input, "input", opname)
    if input.dtype not in (dt.float32, dt.float64):
        raise RuntimeError(f"{opname}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{opname}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                         f"Got {interpolation}")
    if input.numel() == 0:
        raise RuntimeError(f"{opname}() input tensor must be non-empty")
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError(f"{opname}() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError(f"{opname}() q tensor must be same dtype as the input tensor")
        if q.numel() and not builtins.bool(((q >= 0) & (q <= 1)).all()):
            raise RuntimeError(f"{opname}() q values must be in the range [0, 1]")
        qs, q_dim = q.reshape(-1), q.dim() == 1
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"{opname}() q must be in the range [0, 1] but got {q}")
        qs, q_dim = fl.tensor([float(q)], dtype=input.dtype, device=input.device), False
    if dim is None:
        x, d = input.reshape(-1), None
    else:
        d = wrap_dim(dim, builtins.max(input.dim(), 1))
        x = (input.reshape(1) if input.dim() == 0 else input).movedim(d, -1)
    ordered = fl.sort(x, -1).values  # NaNs last
    last = ordered.shape[-1] - 1
    nan = fl.isnan(ordered)
    if ignore_nan:
        ranks = qs * ((~nan).sum(-1, keepdim=True) - 1).to(input.dtype)
        ranks = fl.where(ranks < 0, float(last), ranks)  # all NaN: the last (NaN) value
    else:
        ranks = fl.where(nan.any(-1, keepdim=True), float(last), qs * last)
    ranks = ranks.detach()
    if interpolation == "lower":
        ranks = fl.floor(ranks)
    elif interpolation == "higher":
        ranks = fl.ceil(ranks)
    elif interpolation == "nearest":
        ranks = fl.round(ranks)  # half to even, as torch
    below = ranks.long()
    out = ordered.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weights = fl.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below.to(ranks.dtype)
        out = fl.lerp(out, ordered.gather(-1, fl.ceil(ranks).long()), weights)
    out = out.movedim(-1, 0) if q_dim else out.squeeze(-1)  # (Q, *rest) or rest
    if keepdim:
        if d is None:
            out = out.reshape(out.shape[:1] + (1,) * input.dim() if q_dim else (1,) * input.dim())
        elif input.dim():
            out = out.unsqueeze(d + 1 if q_dim else d)
    return out


QUANTILE = _op("quantile(Tensor input, Tensor q, int? dim=None, bool keepdim=False, *, str interpolation='linear') "
               "-> Tensor")


@QUANTILE.front
def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles of ``input`` (float32/float64) along ``dim`` (all elements when None).

    ``q`` is a number in ``[0, 1]`` or a 1-D tensor of them (``input``'s dtype): a tensor ``q`` adds a
    leading dimension of its length. ``interpolation`` between the two nearest order statistics is
    ``'linear'``, ``'lower'``, ``'higher'``, ``'midpoint'`` or ``'nearest'``. A NaN in a reduced row
    gives NaN (see :func:`nanquantile`)."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


NANQUANTILE = _op("nanquantile(Tensor input, Tensor q, int? dim=None, bool keepdim=False, *, "
                  "str interpolation='linear') -> Tensor")


@NANQUANTILE.front
def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """:func:`quantile` ignoring NaNs (NaN only where a reduced row is all NaN)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)


# --- indexing helpers ----------------------------------------------------------------------------------
TAKE_ALONG_DIM = _op("take_along_dim(Tensor input, Tensor indices, int? dim=None) -> Tensor")


@TAKE_ALONG_DIM.front
def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``input`` gathered at ``indices`` (int64) along ``dim``, the other dimensions broadcast between
    the two (numpy's ``take_along_axis``); with ``dim=None`` both are flattened first."""
    check_tensor(input, "input", "take_along_dim")
    check_tensor(indices, "indices", "take_along_dim")
    if indices.dtype is not dt.int64:
        raise RuntimeError(f"flambeau.take_along_dim(): dtype of indices should be Long but got "
                           f"{indices.dtype.scalar_name}")
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.dim() != indices.dim():
        raise RuntimeError(f"flambeau.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.dim()} dimensions for input, and {indices.dim()} dimensions for indices")
    d = wrap_dim(dim, builtins.max(input.dim(), 1))
    if input.dim() == 0:
        return input.reshape(1).gather(0, indices.reshape(1)).reshape(())
    in_shape, ix_shape = list(input.shape), list(indices.shape)
    in_shape[d] = indices.shape[d]
    shape = list(_broadcast(tuple(in_shape), tuple(ix_shape)))
    ix_shape, in_shape = list(shape), list(shape)
    ix_shape[d], in_shape[d] = indices.shape[d], input.shape[d]
    return input.broadcast_to(in_shape).gather(d, indices.broadcast_to(ix_shape))


UNRAVEL_INDEX = _op("unravel_index(Tensor indices, int[] shape) -> Tensor[]", differentiable=False, method=False)


@UNRAVEL_INDEX.front
def unravel_index(indices, shape) -> tuple:
    """The coordinates in an array of ``shape`` of the flat ``indices`` (integers): a tuple of int64
    tensors of ``indices``' shape, one per dimension of ``shape``."""
    if not isinstance(indices, Tensor):
        indices = fl.tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype is dt.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(not isinstance(s, int) for s in shape):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {shape!r}")
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    flat, coords = indices.long(), []
    for size in reversed(shape):  # the innermost coordinate first, as a number's digits
        coords.append(flat % size if size else flat * 0)
        flat = flat // size if size else flat * 0
    return tuple(reversed(coords))


DIAGFLAT = _op("diagflat(Tensor input, int offset=0) -> Tensor")


@DIAGFLAT.front
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A square 2-D tensor with the flattened ``input`` on its ``offset``-th diagonal, zeros elsewhere."""
    check_tensor(input, "input", "diagflat")
    return fl.diag(input.reshape(-1), offset)


DIST = _op("dist(Tensor input, Tensor other, Scalar p=2) -> Tensor")


@DIST.front
def dist(input: Tensor, other: Tensor, p=2) -> Tensor:
    """The ``p``-norm of ``input - other`` (broadcast) over all elements: a 0-dim tensor."""
    check_tensor(input, "input", "dist")
    check_tensor(other, "other", "dist")
    return (input - other).norm(p)


# --- integration and differentiation of samples --------------------------------------------------------
def _spacing_along(x: Tensor, y: Tensor, d: int, opname: str) -> Tensor:
    """The differences of the sample points ``x`` along ``d``, shaped to broadcast against ``y``."""
    if x.dim() == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"{opname}: There must be one `x` value for each sample point")
        shape = [1] * y.dim()
        shape[d] = -1
        return fl.diff(x).reshape(shape)
    return fl.diff(x, dim=d if x.dim() == y.dim() else -1)


def _trapezoid_areas(opname: str, y: Tensor, x, dx, dim: int) -> tuple:
    """``(d, areas)``: the wrapped ``dim`` and the areas of the trapezoids between consecutive samples of
    ``y`` along it (one fewer than the samples), with spacing ``x`` (a tensor of sample points, or a
    number) or ``dx`` (default 1)."""
    check_tensor(y, "y", opname)
    if x is not None and dx is not None:
        raise RuntimeError(f"{opname}: cannot pass both `x` and `dx`")
    d = wrap_dim(dim, y.dim())
    n = y.shape[d]
    if n == 0:
        return d, (y * 0.5).narrow(d, 0, 0)
    mids = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) / 2
    if isinstance(x, Tensor):
        return d, mids * _spacing_along(x, y, d, opname)
    return d, mids * (x if x is not None else dx if dx is not None else 1)  # trapz(y, 0.5): the spacing


TRAPEZOID = _op("trapezoid(Tensor y, Tensor? x=None, *, Scalar? dx=None, int dim=-1) -> Tensor", method=False,
                aliases=("trapz",))


@TRAPEZOID.front
def trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """The trapezoidal rule integral of ``y`` along ``dim``: samples at ``x`` (1-D of ``y.shape[dim]``,
    or broadcastable to ``y``) or spaced ``dx`` apart (default 1). ``y``'s shape without ``dim``; integer
    ``y`` gives the default float dtype. ``trapz`` is the same function."""
    d, areas = _trapezoid_areas("trapezoid", y, x, dx, dim)
    return areas.sum(d)


trapz = trapezoid


CUMULATIVE_TRAPEZOID = _op("cumulative_trapezoid(Tensor y, Tensor? x=None, *, Scalar? dx=None, int dim=-1) -> Tensor",
                           method=False)


@CUMULATIVE_TRAPEZOID.front
def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral of ``y`` along ``dim`` (see :func:`trapezoid`): one shorter
    than ``y`` along ``dim``."""
    d, areas = _trapezoid_areas("cumulative_trapezoid", y, x, dx, dim)
    return areas.cumsum(d)


GRADIENT = _op("gradient(Tensor input, *, Scalar[]? spacing=1, int[]? dim=None, int edge_order=1) -> Tensor[]",
               method=False)


def _gradient_1d(f: Tensor, d: int, h, edge_order: int) -> Tensor:
    """The derivative estimate of ``f`` along ``d``: central differences inside, one-sided of order
    ``edge_order`` at the ends; ``h`` a number (uniform spacing) or a 1-D tensor of coordinates."""
    n = f.shape[d]

    def part(start, length=1):
        return f.narrow(d, start % n, length)

    if not isinstance(h, Tensor):
        inner = (part(2, n - 2) - part(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first, last = (part(1) - part(0)) / h, (part(-1) - part(-2)) / h
        else:
            first = (-1.5 * part(0) + 2 * part(1) - 0.5 * part(2)) / h
            last = (0.5 * part(-3) - 2 * part(-2) + 1.5 * part(-1)) / h
        return fl.cat([first, inner, last], d)
    shape = [1] * f.dim()
    shape[d] = -1
    steps = fl.diff(h).to(f.dtype)

    def coef(values):
        return values.reshape(shape)

    a, b = steps[:-1], steps[1:]  # the spacings left and right of each inner point
    inner = (coef(-b / (a * (a + b))) * part(0, n - 2) + coef((b - a) / (a * b)) * part(1, n - 2)
             + coef(a / (b * (a + b))) * part(2, n - 2))
    if edge_order == 1:
        first, last = (part(1) - part(0)) / steps[0], (part(-1) - part(-2)) / steps[-1]
    else:
        a0, b0, a1, b1 = steps[0], steps[1], steps[-2], steps[-1]
        first = (-(2 * a0 + b0) / (a0 * (a0 + b0)) * part(0) + (a0 + b0) / (a0 * b0) * part(1)
                 - a0 / (b0 * (a0 + b0)) * part(2))
        last = (b1 / (a1 * (a1 + b1)) * part(-3) - (a1 + b1) / (a1 * b1) * part(-2)
                + (2 * b1 + a1) / (b1 * (a1 + b1)) * part(-1))
    return fl.cat([first, inner, last], d)


@GRADIENT.front
def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """Estimates of ``input``'s partial derivatives along each of ``dim`` (default: every dimension),
    one tensor of ``input``'s shape per dimension: second-order central differences inside, one-sided
    differences of order ``edge_order`` (1 or 2) at the boundaries.

    ``spacing``: a number (the same step for every dimension), a list of numbers (one step per
    dimension), or a list of 1-D tensors (the coordinates along each dimension). Integer inputs give
    the default float dtype."""
    check_tensor(input, "input", "gradient")
    if edge_order not in (1, 2):
        raise RuntimeError(f"flambeau.gradient only supports edge_order=1 and edge_order=2, but got {edge_order}")
    dims = list(range(input.dim())) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [wrap_dim(d, input.dim()) for d in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError("flambeau.gradient: dim must be unique")
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) != len(dims):
        raise RuntimeError(f"flambeau.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                           f"arguments to have the same length, but got a spacing argument of length "
                           f"{len(spacings)} and a dim argument of length {len(dims)}.")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("flambeau.gradient expected each dimension size to be at least edge_order+1")
    f = input if input.dtype.is_floating_point or input.dtype.is_complex else input.to(dt.get_default_dtype())
    return tuple(_gradient_1d(f, d, h, edge_order) for d, h in zip(dims, spacings, strict=True))


COMBINATIONS = _op("combinations(Tensor input, int r=2, bool with_replacement=False) -> Tensor", method=False)


@COMBINATIONS.front
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of the 1-D ``input``'s elements, one per row: ``(count, r)``
    (``(0,)`` for ``r=0``), in itertools' order; ``with_replacement`` allows repeated elements."""
    check_tensor(input, "input", "combinations")
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.narrow(0, 0, 0).clone()
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(choose(range(input.shape[0]), r))
    index = fl.tensor(rows, dtype=dt.int64, device=input.device).reshape(-1)
    return input.index_select(0, index).reshape(len(rows), r)


# --- scatters: a view's positions, written with index_copy -----------------------------------------------
def _scatter_into(opname: str, input: Tensor, src: Tensor, view) -> Tensor:
    """``input`` with the elements that ``view(input)`` would show replaced by ``src``: ``view`` is
    applied to the flat positions of ``input`` to find them."""
    check_tensor(input, "input", opname)
    check_tensor(src, "src", opname)
    positions = view(fl.arange(input.numel(), device=input.device).reshape(input.shape))
    if tuple(positions.shape) != tuple(src.shape):
        raise RuntimeError(f"{opname}(): expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(positions.shape)}")
    flat = input.reshape(-1).index_copy(0, positions.reshape(-1), src.to(input.dtype).reshape(-1))
    return flat.reshape(input.shape)


SELECT_SCATTER = _op("select_scatter(Tensor input, Tensor src, int dim, SymInt index) -> Tensor")


@SELECT_SCATTER.front
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of ``input`` with ``input.select(dim, index)`` replaced by ``src`` (of that slice's shape)."""
    return _scatter_into("select_scatter", input, src, lambda p: p.select(dim, index))


SLICE_SCATTER = _op("slice_scatter(Tensor input, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, "
                    "SymInt step=1) -> Tensor")


@SLICE_SCATTER.front
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Tensor:
    """A copy of ``input`` with the slice ``start:end:step`` along ``dim`` replaced by ``src``."""
    def view(p):
        d = wrap_dim(dim, p.dim())
        return p[(slice(None),) * d + (slice(start, end, step),)]

    return _scatter_into("slice_scatter", input, src, view)


DIAGONAL_SCATTER = _op("diagonal_scatter(Tensor input, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor")


@DIAGONAL_SCATTER.front
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of ``input`` with ``input.diagonal(offset, dim1, dim2)`` replaced by ``src``."""
    return _scatter_into("diagonal_scatter", input, src, lambda p: p.diagonal(offset, dim1, dim2))


AS_STRIDED_SCATTER = _op("as_strided_scatter(Tensor input, Tensor src, SymInt[] size, SymInt[] stride, "
                         "SymInt? storage_offset=None) -> Tensor")


@AS_STRIDED_SCATTER.front
def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A copy of ``input`` with the elements of ``as_strided(size, stride, storage_offset)`` replaced by
    ``src``; sizes and strides address ``input``'s elements in row-major (contiguous) order."""
    return _scatter_into("as_strided_scatter", input, src,
                         lambda p: p.as_strided(size, stride, 0 if storage_offset is None else storage_offset))


INDEX_REDUCE = _op("index_reduce(Tensor input, int dim, Tensor index, Tensor source, str reduce, *, "
                   "bool include_self=True) -> Tensor")


@INDEX_REDUCE.front
def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """``input`` with each slice ``source.select(dim, i)`` reduced into ``input.select(dim, index[i])``
    by ``reduce`` (``'prod'``, ``'mean'``, ``'amax'`` or ``'amin'``); ``include_self=False`` leaves the
    indexed slices' own values out of the reduction."""
    check_tensor(input, "input", "index_reduce")
    check_tensor(index, "index", "index_reduce")
    check_tensor(source, "source", "index_reduce")
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.dim() > 1 or not _integral(index.dtype) or index.dtype is dt.bool:
        raise IndexError("index_reduce_(): Index is supposed to be a vector of integer type")
    d = wrap_dim(dim, builtins.max(input.dim(), 1))
    src = source.reshape(1) if source.dim() == 0 else source
    if src.dim() != builtins.max(input.dim(), 1) or src.shape[d] != index.numel():
        raise IndexError(f"index_reduce_(): Number of indices ({index.numel()}) should be equal to "
                         f"source.size(dim) ({src.shape[d] if src.dim() > d else 1})")
    shape = [1] * src.dim()
    shape[d] = -1
    spread = index.long().reshape(shape).expand(src.shape)
    x = input.reshape(1) if input.dim() == 0 else input
    out = x.scatter_reduce(d, spread, src.to(input.dtype), reduce, include_self=include_self)
    return out.reshape(input.shape)


index_reduce_ = _inplace_of(INDEX_REDUCE, index_reduce)


HISTOGRAMDD = _op("histogramdd(Tensor input, int[] bins, *, float[]? range=None, Tensor? weight=None, "
                  "bool density=False) -> (Tensor hist, Tensor[] bin_edges)", differentiable=False, method=False)
_histogramdd_t = _return_type("histogramdd", "hist bin_edges")


def _bin_edges(column: Tensor, bins, lo_hi) -> Tensor:
    """The edges of one dimension: ``bins`` itself (a tensor), or ``bins + 1`` equal steps over ``lo_hi``
    (default: the data's range, widened by 0.5 each way when it is a single value)."""
    if isinstance(bins, Tensor):
        return bins.detach().to(column.dtype)
    if lo_hi is None:
        lo_hi = (float(column.min()), float(column.max())) if column.numel() else (0.0, 0.0)
    lo, hi = lo_hi
    if lo > hi:
        raise RuntimeError(f"histogramdd(): max must be larger than min, but got min {lo} and max {hi}")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return fl.linspace(lo, hi, int(bins) + 1, dtype=column.dtype, device=column.device)


@HISTOGRAMDD.front
def histogramdd(input: Tensor, bins, *, range=None, weight: Tensor | None = None,  # noqa: A002 - torch's name
                density: bool = False):
    """The ``D``-dimensional histogram of the points ``input`` (``(*, D)``, floating): ``(hist, bin_edges)``,
    ``hist`` of shape ``(bins_0, ..., bins_{D-1})`` in ``input``'s dtype, ``bin_edges`` a tuple of ``D``
    1-D tensors.

    ``bins``: an int (for every dimension), ``D`` ints, or ``D`` 1-D tensors of increasing edges;
    ``range``: ``[min_0, max_0, ..., min_{D-1}, max_{D-1}]`` for equal-width bins (default: the data's
    range). Bins include their left edge, the last one its right edge too; points outside are
    dropped. ``weight`` (``input``'s shape without the last dimension) weighs each point; ``density``
    divides by the total and by each bin's volume."""
    check_tensor(input, "input", "histogramdd")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"histogramdd" not implemented for \'{input.dtype.scalar_name}\'')
    if input.dim() < 1:
        raise RuntimeError("flambeau.histogramdd: input tensor should have at least 1 dimension")
    ndim = input.shape[-1]
    points = input.detach().reshape(-1, ndim)
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * ndim
    if len(per_dim) != ndim:
        raise RuntimeError(f"histogramdd: expected {ndim} sequences of bin edges for each of the {ndim} "
                           f"dimensions of the input's innermost dimension, but got {len(per_dim)} sequences")
    if range is not None and len(range) != 2 * ndim:
        raise RuntimeError(f"histogramdd: for a {ndim}-dimensional histogram range should have {2 * ndim} "
                           f"elements, but got {len(range)}")
    edges = [_bin_edges(points[:, k], per_dim[k], None if range is None else range[2 * k: 2 * k + 2])
             for k in builtins.range(ndim)]
    counts = [e.shape[0] - 1 for e in edges]
    flat = fl.zeros(points.shape[0], dtype=dt.int64, device=input.device)
    inside = fl.ones(points.shape[0], dtype=dt.bool, device=input.device)
    for k, e in enumerate(edges):
        v = points[:, k]
        # bins are [left, right) except the last, [left, right]: a point on the last edge counts there
        pos = (fl.searchsorted(e, v, right=True) - 1).clamp_max(counts[k] - 1)
        inside = inside & (v >= e[0]) & (v <= e[-1])
        flat = flat * counts[k] + pos.clamp_min(0)
    w = fl.ones(points.shape[0], dtype=input.dtype, device=input.device) if weight is None else \
        weight.detach().reshape(-1).to(input.dtype)
    size = int(np.prod(counts))
    hist = fl.zeros(size, dtype=input.dtype, device=input.device).index_add(0, flat[inside], w[inside])
    hist = hist.reshape(counts)
    if density:
        hist = hist / hist.sum()
        for k, e in enumerate(edges):
            shape = [1] * ndim
            shape[k] = -1
            hist = hist / fl.diff(e).reshape(shape)
    return _histogramdd_t(hist, tuple(edges))


SEGMENT_REDUCE = _op("segment_reduce(Tensor data, str reduce, *, Tensor? lengths=None, Tensor? indices=None, "
                     "Tensor? offsets=None, int axis=0, bool unsafe=False, Scalar? initial=None) -> Tensor",
                     method=False)
_SEGMENT_REDUCTIONS = {"sum": ("sum", 0.0), "mean": ("mean", math.nan), "max": ("amax", -math.inf),
                       "min": ("amin", math.inf), "prod": ("prod", 1.0)}


@SEGMENT_REDUCE.front
def segment_reduce(data: Tensor, reduce: str, *, lengths: Tensor | None = None, indices: Tensor | None = None,
                   offsets: Tensor | None = None, axis: int = 0, unsafe: bool = False, initial=None) -> Tensor:
    """``data`` reduced by ``reduce`` (``'sum'``, ``'mean'``, ``'max'``, ``'min'`` or ``'prod'``) over
    consecutive segments along ``axis`` 0, given by 1-D ``lengths`` or ``offsets`` (``S + 1`` bounds):
    ``(S, *data.shape[1:])``. ``initial`` joins every segment as one more element (for ``'mean'``, as torch:
    ``(initial + sum) / length``); without it an empty segment gives 0 (sum), NaN (mean), -inf (max), inf
    (min) or 1 (prod)."""
    check_tensor(data, "data", "segment_reduce")
    if reduce not in _SEGMENT_REDUCTIONS:
        raise RuntimeError(f"segment_reduce(): Expected reduce to be one of sum, mean, max, min or prod, got {reduce}")
    if indices is not None:
        raise NotImplementedError("segment_reduce(): indices based reduction is not supported yet.")
    if (lengths is None) == (offsets is None):
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined")
    if lengths is None:
        check_tensor(offsets, "offsets", "segment_reduce")
        if offsets.dim() != 1 or offsets.numel() == 0:
            raise NotImplementedError("segment_reduce(): flambeau supports 1-D offsets along axis 0 only")
        lengths = fl.diff(offsets)
    check_tensor(lengths, "lengths", "segment_reduce")
    if lengths.dim() != 1 or wrap_dim(axis, builtins.max(data.dim(), 1)) != 0:
        raise NotImplementedError("segment_reduce(): flambeau supports 1-D lengths or offsets along axis 0 only")
    lengths = lengths.long()
    if not unsafe and (builtins.bool((lengths < 0).any()) or int(lengths.sum()) != data.shape[0]):
        raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                           "data.size(lengths.dim()-1) when !unsafe.")
    how, empty = _SEGMENT_REDUCTIONS[reduce]
    segments = lengths.shape[0]
    ids = fl.repeat_interleave(fl.arange(segments, device=data.device), lengths)
    shape = [1] * data.dim()
    shape[0] = -1
    base = fl.full((segments, *data.shape[1:]), empty if initial is None else initial, dtype=data.dtype,
                   device=data.device)
    spread = ids.reshape(shape).expand(data.shape)
    if reduce == "mean" and initial is not None:  # torch: (initial + sum) / length, initial where empty
        total = base.scatter_reduce(0, spread, data, "sum", include_self=True)
        return total / lengths.clamp_min(1).reshape(shape).to(total.dtype)
    return base.scatter_reduce(0, spread, data, how, include_self=initial is not None)


# --- windows ---------------------------------------------------------------------------------------------
_WINDOW_DOC = (" Shape ``(window_length,)``, the default float dtype unless ``dtype`` is given (floating dtypes "
               "only); ``periodic=True`` gives the window for spectral analysis (the ``window_length + 1`` "
               "symmetric window without its last sample).")


def _window_op(name: str, extra: str = ""):
    return _op(f"{name}(int window_length, bool periodic=True{extra}, *, ScalarType? dtype=None, "
               "Layout? layout=None, Device? device=None, bool requires_grad=False) -> Tensor",
               differentiable=False, method=False)


def _window(name: str, formula, window_length: int, periodic: bool, dtype, device, requires_grad: bool) -> Tensor:
    """The window ``formula(n, N)`` on float64 samples ``n = 0 .. N-1``, ``N = window_length`` (+ 1 when
    ``periodic``, the last sample then dropped), as a tensor of ``dtype``."""
    d = dt.get_default_dtype() if dtype is None else dtype
    if not d.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if window_length <= 1:
        values = np.ones(window_length)
    else:
        size = window_length + 1 if periodic else window_length
        values = formula(np.arange(size, dtype=np.float64), size)[:window_length]
    return fl.tensor(values, dtype=d, device=device, requires_grad=requires_grad)


def _cosine_sum(*coefs):
    """The window ``sum_k coefs[k] cos(2 pi k n / (N - 1))``."""
    def formula(n, size):
        phase = 2 * np.pi * n / (size - 1)
        return sum(c * np.cos(k * phase) for k, c in enumerate(coefs))

    return formula


HANN_WINDOW = _window_op("hann_window")


@HANN_WINDOW.front
def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                requires_grad: bool = False) -> Tensor:
    return _window("hann_window", _cosine_sum(0.5, -0.5), window_length, periodic, dtype, device, requires_grad)


HAMMING_WINDOW = _window_op("hamming_window", ", float alpha=0.54, float beta=0.46")


@HAMMING_WINDOW.front
def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    return _window("hamming_window", _cosine_sum(alpha, -beta), window_length, periodic, dtype, device,
                   requires_grad)


BLACKMAN_WINDOW = _window_op("blackman_window")


@BLACKMAN_WINDOW.front
def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    return _window("blackman_window", _cosine_sum(0.42, -0.5, 0.08), window_length, periodic, dtype, device,
                   requires_grad)


BARTLETT_WINDOW = _window_op("bartlett_window")


@BARTLETT_WINDOW.front
def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    return _window("bartlett_window", lambda n, size: 1 - np.abs(2 * n / (size - 1) - 1), window_length, periodic,
                   dtype, device, requires_grad)


KAISER_WINDOW = _window_op("kaiser_window", ", float beta=12.0")


@KAISER_WINDOW.front
def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False) -> Tensor:
    def formula(n, size):
        half = (size - 1) / 2
        return np.i0(beta * np.sqrt(np.clip(1 - ((n - half) / half) ** 2, 0, None))) / np.i0(beta)

    return _window("kaiser_window", formula, window_length, periodic, dtype, device, requires_grad)


hann_window.__doc__ = "The Hann window ``0.5 - 0.5 cos(2 pi n / (N - 1))``." + _WINDOW_DOC
hamming_window.__doc__ = "The Hamming window ``alpha - beta cos(2 pi n / (N - 1))``." + _WINDOW_DOC
blackman_window.__doc__ = ("The Blackman window ``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."
                           + _WINDOW_DOC)
bartlett_window.__doc__ = "The Bartlett (triangular) window ``1 - |2 n / (N - 1) - 1|``." + _WINDOW_DOC
kaiser_window.__doc__ = ("The Kaiser window ``I0(beta sqrt(1 - (2 n / (N - 1) - 1) ** 2)) / I0(beta)``."
                         + _WINDOW_DOC)


# --- shapes and aliases ----------------------------------------------------------------------------------
RAVEL = _op("ravel(Tensor input) -> Tensor")


@RAVEL.front
def ravel(input: Tensor) -> Tensor:
    """``input`` flattened to 1-D: a view when the layout allows, else a copy."""
    check_tensor(input, "input", "ravel")
    return input.reshape(-1)


BROADCAST_SHAPES = _op("broadcast_shapes(SymInt[] shapes) -> SymInt[]", differentiable=False, method=False)


@BROADCAST_SHAPES.front
def broadcast_shapes(*shapes):
    """The shape that tensors of ``shapes`` (sequences of ints, or ints) broadcast to, a
    :class:`flambeau.Size`; RuntimeError if they don't broadcast."""
    as_tuples = []
    for s in shapes:
        if isinstance(s, int):
            s = (s,)
        if not all(isinstance(n, int) for n in s):
            raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {s}")
        if any(n < 0 for n in s):
            raise RuntimeError(f"Trying to create tensor with negative dimension {builtins.min(s)}: {list(s)}")
        as_tuples.append(tuple(s))
    return fl.Size(_broadcast(*as_tuples))


FILL = _op("fill(Tensor input, Scalar value) -> Tensor", method=False)


@FILL.front
def fill(input: Tensor, value) -> Tensor:
    """A new tensor of ``input``'s shape, dtype and device, every element ``value`` (a number or a
    0-dim tensor, through which gradients flow)."""
    check_tensor(input, "input", "fill")
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} "
                               "dimensions.")
        return value.to(input.dtype).expand(input.shape).clone()
    return fl.full_like(input, value)


DETACH = _op("detach(Tensor(a) input) -> Tensor(a)", differentiable=False, method=False)


@DETACH.front
def detach(input: Tensor) -> Tensor:
    """``input.detach()``: a tensor sharing ``input``'s storage, out of the autograd graph. Like torch's,
    the result is not a view for autograd (its ``_base`` is None), so it is not declared ``view=True``."""
    check_tensor(input, "input", "detach")
    return input.detach()


UNSAFE_CHUNK = _op("unsafe_chunk(Tensor input, int chunks, int dim=0) -> Tensor[]")


@UNSAFE_CHUNK.front
def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """:func:`flambeau.chunk` (flambeau's views carry no aliasing checks to skip)."""
    return fl.chunk(input, chunks, dim)


UNSAFE_SPLIT = _op("unsafe_split(Tensor input, SymInt split_size, int dim=0) -> Tensor[]")


@UNSAFE_SPLIT.front
def unsafe_split(input: Tensor, split_size, dim: int = 0) -> tuple:
    """:func:`flambeau.split` (flambeau's views carry no aliasing checks to skip)."""
    return fl.split(input, split_size, dim)


UNSAFE_SPLIT_WITH_SIZES = _op("unsafe_split_with_sizes(Tensor input, SymInt[] split_sizes, int dim=0) -> Tensor[]")


@UNSAFE_SPLIT_WITH_SIZES.front
def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """:func:`flambeau.split_with_sizes` (flambeau's views carry no aliasing checks to skip)."""
    return fl.split_with_sizes(input, split_sizes, dim)


CONSTANT_PAD_ND = _op("constant_pad_nd(Tensor input, SymInt[] pad, Scalar value=0) -> Tensor", method=False)


@CONSTANT_PAD_ND.front
def constant_pad_nd(input: Tensor, pad, value=0) -> Tensor:
    """``input`` padded with ``value``: ``pad = (last_left, last_right, second_last_left, ...)``; a
    negative amount crops."""
    check_tensor(input, "input", "constant_pad_nd")
    pad = list(pad)
    if len(pad) % 2 or len(pad) // 2 > input.dim():
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}" if len(pad) % 2 else
                           f"Length of pad should be no more than twice the number of dimensions of the input. "
                           f"Pad length is {len(pad)} while the input has {input.dim()} dimensions.")
    out = input
    for i in range(len(pad) // 2):
        d, before, after = input.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]
        n = out.shape[d]
        if n + builtins.min(before, 0) + builtins.min(after, 0) < 0:
            raise RuntimeError(f"The input size {n}, plus negative padding {before} and {after} resulted in a "
                               "negative output size, which is invalid. Check dimension "
                               f"{d} of your input.")
        out = out.narrow(d, -builtins.min(before, 0), n + builtins.min(before, 0) + builtins.min(after, 0))
        parts = []
        for amount in (builtins.max(before, 0), builtins.max(after, 0)):
            shape = list(out.shape)
            shape[d] = amount
            parts.append(fl.full(shape, value, dtype=input.dtype, device=input.device))
        out = fl.cat([parts[0], out, parts[1]], d)
    return out if out is not input else input.clone()


# --- distances and products -------------------------------------------------------------------------------
PDIST = _op("pdist(Tensor input, float p=2) -> Tensor", method=False)


@PDIST.front
def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm distances between each pair of rows ``i < j`` of the 2-D ``input`` ``(N, M)``:
    shape ``(N * (N - 1) / 2,)``, in row-major order of the pairs."""
    check_tensor(input, "input", "pdist")
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    rows, cols = fl.triu_indices(input.shape[0], input.shape[0], 1, device=input.device)
    return (input.index_select(0, rows) - input.index_select(0, cols)).norm(p, 1)


PAIRWISE_DISTANCE = _op("pairwise_distance(Tensor x1, Tensor x2, float p=2, float eps=1e-06, bool keepdim=False) "
                        "-> Tensor", method=False)


@PAIRWISE_DISTANCE.front
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dimension of the broadcast inputs."""
    check_tensor(x1, "x1", "pairwise_distance")
    check_tensor(x2, "x2", "pairwise_distance")
    last = builtins.max(x1.dim(), x2.dim()) - 1
    return (x1 - x2 + eps).norm(p, builtins.max(last, 0), keepdim=keepdim)


COSINE_SIMILARITY = _op("cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor",
                        method=False)


@COSINE_SIMILARITY.front
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between ``x1`` and ``x2`` (broadcast) along ``dim``, each norm clamped
    to at least ``eps``."""
    check_tensor(x1, "x1", "cosine_similarity")
    check_tensor(x2, "x2", "cosine_similarity")
    x1n = x1.norm(2, dim, keepdim=True).clamp_min(eps)
    x2n = x2.norm(2, dim, keepdim=True).clamp_min(eps)
    return ((x1 / x1n) * (x2 / x2n)).sum(dim)


BILINEAR = _op("bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor", method=False)


@BILINEAR.front
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``out[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``: ``input1``
    ``(*, in1)``, ``input2`` ``(*, in2)``, ``weight`` ``(out, in1, in2)``, ``bias`` ``(out,)``."""
    for x, name in ((input1, "input1"), (input2, "input2"), (weight, "weight")):
        check_tensor(x, name, "bilinear")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if weight.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got {weight.dim()} dimension(s)")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input sizes {input1.shape[-1]}, {input2.shape[-1]} do not match weight "
                           f"sizes {weight.shape[1]}, {weight.shape[2]}")
    batch = tuple(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, input1.shape[-1]), input2.reshape(-1, input2.shape[-1])
    out = fl.einsum("bi,oij,bj->bo", x1, weight, x2).reshape(*batch, weight.shape[0])
    return out if bias is None else out + bias


# --- norms and ranks --------------------------------------------------------------------------------------
NUCLEAR_NORM = _op("nuclear_norm(Tensor input, int[2]? dim=None, bool keepdim=False) -> Tensor", method=False)


@NUCLEAR_NORM.front
def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """The sum of the singular values of the matrices over ``dim`` (two dims; the last two when None).
    ``nuclear_norm(input, keepdim)`` also works, as in torch."""
    check_tensor(input, "input", "nuclear_norm")
    if isinstance(dim, bool):  # torch's overload nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    if dim is None:
        dim = (-2, -1)
    return fl.linalg.matrix_norm(input, "nuc", dim=tuple(dim), keepdim=keepdim)


FROBENIUS_NORM = _op("frobenius_norm(Tensor input, int[1] dim, bool keepdim=False) -> Tensor", method=False)


@FROBENIUS_NORM.front
def frobenius_norm(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """``sqrt(sum(|input| ** 2))`` over ``dim`` (one or two dims)."""
    check_tensor(input, "input", "frobenius_norm")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    return input.norm(2, dims, keepdim=keepdim)


MATRIX_RANK = _op("matrix_rank(Tensor input, float? tol=None, bool symmetric=False) -> Tensor",
                  differentiable=False, method=False)


@MATRIX_RANK.front
def matrix_rank(input, tol=None, symmetric: bool = False):
    """Removed in torch 1.9: raises torch's RuntimeError pointing to :func:`flambeau.linalg.matrix_rank`."""
    raise RuntimeError("This function was deprecated since version 1.9 and is now removed.\nPlease use the "
                       "`flambeau.linalg.matrix_rank` function instead. The parameter 'symmetric' was renamed in "
                       "`flambeau.linalg.matrix_rank()` to 'hermitian'.")


SUM_TO_SIZE = _op("sum_to_size(Tensor self, SymInt[] size) -> Tensor", function=False)


@SUM_TO_SIZE.front
def sum_to_size(self: Tensor, *size) -> Tensor:
    """``self`` summed to ``size`` (a shape ``self`` broadcasts from): leading dimensions and those
    where ``size`` is 1 are summed away."""
    shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
    try:
        expandable = _broadcast(shape, tuple(self.shape)) == tuple(self.shape) and len(shape) <= self.dim()
    except RuntimeError:
        expandable = False
    if not expandable:
        raise RuntimeError(f"size {{{', '.join(map(str, shape))}}} is not expandable to size "
                           f"{{{', '.join(map(str, self.shape))}}}.")
    lead = self.dim() - len(shape)
    dims = [*range(lead), *(lead + i for i, n in enumerate(shape) if n == 1 and self.shape[lead + i] != 1)]
    out = self.sum(dims, keepdim=True) if dims else self
    return out.reshape(shape)


# --- in-place twins of operators declared elsewhere --------------------------------------------------------
def _inplace_twin(signature: str, function: bool = False):
    """Declare the in-place operator ``Tensor.<name>_`` (also ``flambeau.<name>_`` where torch has it:
    ``function``) of the operator ``flambeau.<name>`` declared elsewhere: ``self`` overwritten with
    ``flambeau.<name>(self, ...)``."""
    op = _op(signature, function=function)
    base = op.name[:-1]

    @op.front
    def fn(self: Tensor, *args, **kwargs) -> Tensor:
        check_tensor(self, "self", op.name)
        return _copy_into(self, getattr(fl, base)(_source(self), *args, **kwargs))

    fn.__doc__ = f"In-place version of :func:`flambeau.{base}`; returns ``self``."
    return fn


cumsum_ = _inplace_twin("cumsum_(Tensor(a!) self, int dim, *, ScalarType? dtype=None) -> Tensor(a!)")
cumprod_ = _inplace_twin("cumprod_(Tensor(a!) self, int dim, *, ScalarType? dtype=None) -> Tensor(a!)")
addmm_ = _inplace_twin("addmm_(Tensor(a!) self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) "
                       "-> Tensor(a!)")
addbmm_ = _inplace_twin("addbmm_(Tensor(a!) self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) "
                        "-> Tensor(a!)")
baddbmm_ = _inplace_twin("baddbmm_(Tensor(a!) self, Tensor batch1, Tensor batch2, *, Scalar beta=1, "
                         "Scalar alpha=1) -> Tensor(a!)")
addmv_ = _inplace_twin("addmv_(Tensor(a!) self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) "
                       "-> Tensor(a!)", function=True)
renorm_ = _inplace_twin("renorm_(Tensor(a!) self, Scalar p, int dim, Scalar maxnorm) -> Tensor(a!)")
conj_physical_ = _inplace_twin("conj_physical_(Tensor(a!) self) -> Tensor(a!)", function=True)


FILL_DIAGONAL = _op("fill_diagonal_(Tensor(a!) self, Scalar fill_value, bool wrap=False) -> Tensor(a!)",
                    function=False)


@FILL_DIAGONAL.front
def fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Fill the main diagonal of ``self`` (2-D, or every dimension of equal length) with ``fill_value``
    in place; ``wrap=True`` continues the diagonal of a tall matrix every ``ncols + 1`` rows."""
    check_tensor(self, "self", "fill_diagonal_")
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.dim() > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    if self.dim() == 2:
        rows, cols = self.shape
        step = cols + 1
        end = self.numel() if wrap or rows <= cols else cols * cols
    else:
        step = 1 + sum(int(np.prod(self.shape[:k])) for k in range(1, self.dim()))
        end = self.numel()
    mask = np.zeros(self.numel(), dtype=bool)
    mask[0:end:step] = True
    where = fl.tensor(mask.reshape(tuple(self.shape)), device=self.device)
    return self.masked_fill_(where, fill_value)
