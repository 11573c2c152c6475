"""Reductions: sum, mean, prod, max/min, argmax/argmin, var/std, logsumexp, norm, all/any, cumsum ...

Each operator follows torch: ``dim`` is an int or a tuple/list of ints (None, or an empty tuple,
reduces every dimension), ``keepdim`` keeps reduced dimensions with size 1, integer and bool sums
and products give int64, ``mean``/``var``/``std`` refuse integer inputs, and multi-output
reductions (``max``/``min`` with a dim, ``aminmax``, ``cummax``, ``median`` with a dim, ``mode``)
return namedtuples like ``torch.return_types``. CPU kernels: ``flambeau._kernels.cpu.reduction``.

Kernel convention (every device; arrays in, array out, never a numpy scalar):
    sum, nansum, mean, nanmean, prod: ``kernel(a, dims, keepdim, dtype) -> array`` computing in
        flambeau dtype ``dtype``; ``dims`` is a sorted tuple of non-negative dims, or None for
        every dim (so for every kernel below).
    amax, amin, all, any, logsumexp, count_nonzero: ``kernel(a, dims, keepdim) -> array``.
    var, std: ``kernel(a, dims, correction, keepdim) -> array``.
    norm: ``kernel(a, p, dims, keepdim) -> array`` (``p`` a float, ``inf``, ``-inf`` or 0).
    max, min, median: ``kernel(a, dim, keepdim)`` returns a 0-dim array when ``dim`` is None and
        ``(values, indices)`` along ``dim`` otherwise; mode: ``kernel(a, dim, keepdim) -> (values,
        indices)``.
    argmax, argmin: ``kernel(a, dim_or_None, keepdim) -> int64 array``.
    aminmax: ``kernel(a, dims, keepdim) -> (min, max)``.
    cumsum, cumprod: ``kernel(a, dim, dtype) -> array``; cummax, cummin: ``kernel(a, dim) ->
        (values, indices)``.

Autograd recording (seam 2): ``inputs`` are the positional arguments of the signature with ``dim``
normalised: None for every dim (``dim=None`` or an empty list), else a sorted tuple of
non-negative dims (an int for ops that take one dim); ``attrs`` are the keyword-only arguments.
Multi-output ops record their namedtuple.
"""

from __future__ import annotations

import builtins

import numpy as np

from flambeau import _dtype as dt
from flambeau._factories import full
from flambeau._ops._common import (
    Tensor,
    _wrap,
    check_tensor,
    dims_arg,
    grad_state,
    record,
    return_type,
    wrap_dim,
)
from flambeau._ops._registry import OPS, declare
from flambeau._ops._samples import ALL as ALL_DTYPES
from flambeau._ops._samples import FLOAT, FLOAT_INT, SampleInput, make_tensor
from flambeau._ops.shape import cat

__all__ = ["diff", "sum", "nansum", "mean", "nanmean", "prod", "max", "min", "amax", "amin", "argmax",
           "argmin", "aminmax", "var", "std", "var_mean", "std_mean", "logsumexp", "norm", "all",
           "any", "count_nonzero", "cumsum", "cumprod", "cummax", "cummin", "median", "mode",
           "return_types"]

_int64 = dt.int64
_bool = dt.bool


def reduction_samples(dims: str = "optional", keepdim: bool = True, low: float = -3, high: float = 3):
    """Default samples of a reduction ``op(input, dim, keepdim)`` (Note [Sample inputs] in _registry).

    ``dims``: ``"optional"`` (no dim, an int, a negative int), ``"list"`` (also a tuple of dims),
    ``"required"`` (an int dim is always given), ``"kwonly"`` (``dim=`` keyword, as ``aminmax``).
    Integer samples use a wide range so that arg-reductions see no ties.
    """
    def samples(device, dtype, requires_grad):
        lo, hi = (low, high) if dtype.is_floating_point else (-1000, 1000)

        def mk(shape):
            return make_tensor(shape, device=device, dtype=dtype, requires_grad=requires_grad, low=lo, high=hi)

        kw = keepdim and {"keepdim": True}
        if dims == "kwonly":
            yield SampleInput(mk((3, 4))).named("all")
            yield SampleInput(mk((3, 4)), dim=1).named("dim")
            yield SampleInput(mk((2, 3, 4)), dim=-1, keepdim=True).named("dim keepdim")
            return
        if dims != "required":
            yield SampleInput(mk((3, 4))).named("all")
            yield SampleInput(mk(())).named("0-dim")
        yield SampleInput(mk((3, 4)), 1).named("dim")
        yield SampleInput(mk((2, 3, 4)), -2, **(kw or {})).named("dim keepdim")
        yield SampleInput(make_tensor((4, 3), device=device, dtype=dtype, requires_grad=requires_grad, low=lo,
                                      high=hi, noncontiguous=True), 0).named("strided")
        if dims == "list":
            yield SampleInput(mk((2, 3, 4)), (0, 2), **(kw or {})).named("dims")

    return samples


def _return_type(name: str, fields: str):
    return return_type(name, fields,
                       f"The ``({fields.replace(' ', ', ')})`` namedtuple returned by :func:`flambeau.{name}`.")


class return_types:  # noqa: N801 - mirrors torch.return_types
    """Namedtuple types of multi-output reductions, as ``torch.return_types``."""

    max = _return_type("max", "values indices")
    min = _return_type("min", "values indices")
    aminmax = _return_type("aminmax", "min max")
    cummax = _return_type("cummax", "values indices")
    cummin = _return_type("cummin", "values indices")
    median = _return_type("median", "values indices")
    mode = _return_type("mode", "values indices")


# --- helpers -------------------------------------------------------------------------------------
def _axes(dim, ndim: int):
    """Reduced dims: None (every dim) for None or an empty list (torch), a sorted tuple otherwise."""
    if dim is None:
        return None
    if dim.__class__ is int and ndim:
        return (wrap_dim(dim, ndim),)
    if isinstance(dim, (list, tuple)):
        seen = set()
        for d in dim:  # torch names the repeated dim (dims_arg names the whole list)
            w = wrap_dim(d, ndim)
            if w in seen:
                raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
            seen.add(w)
    axes = dims_arg(dim, ndim)
    if ndim == 0 or not axes:
        return None
    return axes


def _check_dtype_arg(dtype):
    return None if dtype is None else dt.to_dtype(dtype)


def _exact_dtype(d):
    # torch: integer and bool sums/products accumulate in and return int64.
    return d if d._category >= 2 else _int64


def _not_complex(kernel_name: str, input: Tensor) -> None:
    """torch's error for the orderings (max, median, ...) of complex numbers, which have no order."""
    if input.dtype.is_complex:
        raise NotImplementedError(f'"{kernel_name}" not implemented for \'{input.dtype.scalar_name}\'')


def _nonempty(name: str, a, dims) -> None:
    """torch's errors for reductions without identity over empty inputs."""
    if a.size == 0:
        if dims is None:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        for d in dims:
            if a.shape[d] == 0:
                raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _float_only(name: str, d, what: str = "could not infer output dtype. Input dtype must be either a "
                                           "floating point or complex dtype. Got") -> None:
    if d._category < 2:
        raise RuntimeError(f"{name}(): {what}: {d.scalar_name}")


def _copy(a, dev, np_dtype=None):
    """A fresh copy of device or host array ``a`` on ``dev``, cast to ``np_dtype`` (any device)."""
    return OPS["to_copy"].kernel(dev.type)(a, np.dtype(np_dtype or a.dtype), dev, dev, False)


def _zero_index(dev):
    """A 0-dim int64 zero on ``dev`` (the index of a 0-dim input's only element)."""
    return full((), 0, dtype=_int64, device=dev)._data


def _rec(op, input, inputs, attrs, out):
    if grad_state.enabled and input._requires_grad:
        record(op, inputs, attrs, out)


# --- sum, nansum, mean, nanmean, prod --------------------------------------------------------------
SUM = declare("sum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
              category="reduction")


@SUM.front
def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum of ``input`` over ``dim`` (an int, a tuple of ints, or None for every dimension).

    Integer and bool inputs give int64 unless ``dtype`` says otherwise. ``keepdim`` keeps the
    reduced dimensions with size 1. The sum over an empty dimension is 0.
    """
    if input.__class__ is not Tensor:
        check_tensor(input, "input", "sum")
    a = input._data
    dims = None if dim is None else _axes(dim, a.ndim)
    if dtype is None:
        d = input.dtype
        if d._category < 2:
            d = _int64
    else:
        d = dt.to_dtype(dtype)
    dev = input._device
    out = _wrap((_SUM_KERNELS.get(dev.type) or SUM.kernel(dev.type))(a, dims, keepdim, d), dev)
    if input._requires_grad and grad_state.enabled:
        record(SUM, (input, dims, keepdim), {"dtype": d}, out)
    return out


_SUM_KERNELS = SUM.kernels


NANSUM = declare("nansum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                 category="reduction")


@NANSUM.front
def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Like :func:`flambeau.sum`, treating NaN as zero."""
    check_tensor(input, "input", "nansum")
    if input.dtype.is_complex:
        raise RuntimeError("nansum on CPU does not support complex inputs")
    a = input._data
    dims = _axes(dim, a.ndim)
    d = _exact_dtype(input.dtype) if dtype is None else dt.to_dtype(dtype)
    out = _wrap(NANSUM.kernel(input._device.type)(a, dims, keepdim, d), input._device)
    _rec(NANSUM, input, (input, dims, keepdim), {"dtype": d}, out)
    return out


MEAN = declare("mean(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
               category="reduction")


@MEAN.front
def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean of ``input`` over ``dim``; floating inputs only (or pass a floating ``dtype``).

    The mean over an empty dimension is NaN.
    """
    check_tensor(input, "input", "mean")
    a = input._data
    dims = None if dim is None else _axes(dim, a.ndim)
    d = input.dtype if dtype is None else dt.to_dtype(dtype)
    if d._category < 2:
        _float_only("mean", d)
    out = _wrap(MEAN.kernel(input._device.type)(a, dims, keepdim, d), input._device)
    _rec(MEAN, input, (input, dims, keepdim), {"dtype": d}, out)
    return out


NANMEAN = declare("nanmean(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                  category="reduction")


@NANMEAN.front
def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean of the non-NaN elements of ``input`` over ``dim`` (floating inputs only)."""
    check_tensor(input, "input", "nanmean")
    if not input.dtype.is_floating_point:
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{input.dtype.scalar_name}")
    a = input._data
    dims = _axes(dim, a.ndim)
    d = input.dtype if dtype is None else dt.to_dtype(dtype)
    out = _wrap(NANMEAN.kernel(input._device.type)(a, dims, keepdim, d), input._device)
    _rec(NANMEAN, input, (input, dims, keepdim), {"dtype": d}, out)
    return out


PROD = declare("prod(Tensor input, int? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
               category="reduction")


@PROD.front
def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Product of ``input`` over one dimension ``dim`` (or every element when None).

    Integer and bool inputs give int64 unless ``dtype`` says otherwise; the product over an
    empty dimension is 1.
    """
    check_tensor(input, "input", "prod")
    if dim is not None and not isinstance(dim, int):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
    a = input._data
    dims = _axes(dim, a.ndim)
    d = _exact_dtype(input.dtype) if dtype is None else dt.to_dtype(dtype)
    out = _wrap(PROD.kernel(input._device.type)(a, dims, keepdim, d), input._device)
    _rec(PROD, input, (input, dims, keepdim), {"dtype": d}, out)
    return out


# --- max, min, amax, amin, argmax, argmin, aminmax -------------------------------------------------
def _extreme_op(name: str, elementwise: str, rtype):
    op = declare(f"{name}(Tensor input, int? dim=None, bool keepdim=False) -> Tensor | (Tensor values, Tensor indices)",
                 category="reduction", samples=reduction_samples())
    op.sample_options(dtypes=ALL_DTYPES)

    def fn(input, dim=None, keepdim=False):
        check_tensor(input, "input", name)
        if isinstance(dim, Tensor):
            return _elementwise_extreme(elementwise, input, dim)
        _not_complex(f"{name}_all", input)
        a = input._data
        dev = input._device
        if dim is None:
            _nonempty(name, a, None)
            out = _wrap(op.kernel(dev.type)(a, None, False), dev)
            _rec(op, input, (input, None, False), {}, out)
            return out
        d = wrap_dim(dim, a.ndim)
        if a.ndim == 0:
            vals, idx = _copy(a, dev), _zero_index(dev)
        else:
            _nonempty(name, a, (d,))
            vals, idx = op.kernel(dev.type)(a, d, keepdim)
        out = rtype(_wrap(vals, dev), _wrap(idx, dev))
        _rec(op, input, (input, d, keepdim), {}, out)
        return out

    fn.__doc__ = f"""The {'largest' if name == 'max' else 'smallest'} element of ``input``.

    ``{name}(input)`` returns a 0-dim tensor (NaN if any element is NaN);
    ``{name}(input, dim, keepdim=False)`` returns the namedtuple ``(values, indices)`` along
    ``dim`` (indices are int64 and not differentiable); ``{name}(input, other)`` is
    :func:`flambeau.{elementwise}`.
    """
    op.front(fn)
    return op


def _elementwise_extreme(elementwise, input, other):
    # max(input, other) is the elementwise operator (declared by the elementwise family)
    return OPS[elementwise].fn(input, other)


MAX = _extreme_op("max", "maximum", return_types.max)
MIN = _extreme_op("min", "minimum", return_types.min)
max = MAX.fn
min = MIN.fn


def _amax_op(name):
    op = declare(f"{name}(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor", category="reduction",
                 samples=reduction_samples("list"))
    op.sample_options(dtypes=ALL_DTYPES)

    def fn(input, dim=(), keepdim=False):
        check_tensor(input, "input", name)
        _not_complex(f"{name[1:]}_values_cpu", input)
        a = input._data
        dims = _axes(dim, a.ndim)
        if a.size == 0:
            explicit = dim is not None and (not isinstance(dim, (list, tuple)) or len(dim) > 0)
            _nonempty(name, a, dims if explicit else None)
        out = _wrap(op.kernel(input._device.type)(a, dims, keepdim), input._device)
        _rec(op, input, (input, dims, keepdim), {}, out)
        return out

    fn.__doc__ = f"""The {'maximum' if name == 'amax' else 'minimum'} of ``input`` over ``dim``.

    ``dim`` is an int or a tuple (empty means every dimension). Unlike :func:`flambeau.{name[1:]}`
    it returns no indices.
    """
    op.front(fn)
    return op


AMAX = _amax_op("amax")
AMIN = _amax_op("amin")
amax = AMAX.fn
amin = AMIN.fn


def _argop(name):
    op = declare(f"{name}(Tensor input, int? dim=None, bool keepdim=False) -> Tensor", category="reduction",
                 differentiable=False, samples=reduction_samples())
    op.sample_options(dtypes=FLOAT_INT)

    def fn(input, dim=None, keepdim=False):
        check_tensor(input, "input", name)
        if input.dtype is _bool or input.dtype.is_complex:
            raise RuntimeError(f"{name}(): does not support {'bool' if input.dtype is _bool else 'complex'} input")
        a = input._data
        if dim is None:
            if a.size == 0:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
            d = None
        else:
            d = wrap_dim(dim, a.ndim)
            if a.ndim == 0:
                d = None
            else:
                _nonempty(name, a, (d,))
        return _wrap(op.kernel(input._device.type)(a, d, keepdim), input._device)

    fn.__doc__ = f"""Index (int64) of the {'largest' if name == 'argmax' else 'smallest'} element of ``input``.

    With ``dim=None`` the index is into the flattened tensor; otherwise along ``dim``.
    ``keepdim`` keeps reduced dimensions with size 1. Not differentiable.
    """
    op.front(fn)
    return op


ARGMAX = _argop("argmax")
ARGMIN = _argop("argmin")
argmax = ARGMAX.fn
argmin = ARGMIN.fn

AMINMAX = declare("aminmax(Tensor input, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)",
                  category="reduction")


@AMINMAX.front
def aminmax(input: Tensor, *, dim=None, keepdim: bool = False):
    """The namedtuple ``(min, max)`` of ``input`` over ``dim`` (every element when None)."""
    check_tensor(input, "input", "aminmax")
    _not_complex("aminmax_cpu", input)
    a = input._data
    dims = _axes(dim, a.ndim)
    if a.size == 0 and (dims is None or builtins.any(a.shape[x] == 0 for x in dims)):
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    lo, hi = AMINMAX.kernel(input._device.type)(a, dims, keepdim)
    out = return_types.aminmax(_wrap(lo, input._device), _wrap(hi, input._device))
    _rec(AMINMAX, input, (input,), {"dim": dims, "keepdim": keepdim}, out)
    return out


# --- var, std, var_mean, std_mean ------------------------------------------------------------------
def _correction(name, dim, unbiased, correction):
    if isinstance(dim, bool):  # legacy var(input, unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{name}(): cannot specify both 'unbiased' and 'correction'")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


def _var_setup(name, input, dim, unbiased, correction):
    check_tensor(input, "input", name)
    if input.dtype._category < 2:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    dim, correction = _correction(name, dim, unbiased, correction)
    return _axes(dim, input._data.ndim), correction


VAR = declare("var(Tensor input, int[1]? dim=None, *, Scalar? correction=1, bool keepdim=False) -> Tensor",
              category="reduction")
STD = declare("std(Tensor input, int[1]? dim=None, *, Scalar? correction=1, bool keepdim=False) -> Tensor",
              category="reduction")


@VAR.front
def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance of ``input`` over ``dim``: ``sum((x - mean)**2) / max(0, N - correction)``.

    ``correction`` defaults to 1 (Bessel's correction); the legacy ``unbiased=False`` means
    ``correction=0``. Floating inputs only.
    """
    dims, c = _var_setup("var", input, dim, unbiased, correction)
    out = _wrap(VAR.kernel(input._device.type)(input._data, dims, c, keepdim), input._device)
    _rec(VAR, input, (input, dims), {"correction": c, "keepdim": keepdim}, out)
    return out


@STD.front
def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Standard deviation of ``input`` over ``dim``: the square root of :func:`flambeau.var`."""
    dims, c = _var_setup("std", input, dim, unbiased, correction)
    out = _wrap(STD.kernel(input._device.type)(input._data, dims, c, keepdim), input._device)
    _rec(STD, input, (input, dims), {"correction": c, "keepdim": keepdim}, out)
    return out


VAR_MEAN = declare("var_mean(Tensor input, int[1]? dim=None, *, Scalar? correction=1, bool keepdim=False) "
                   "-> (Tensor, Tensor)", category="reduction", method=False)
STD_MEAN = declare("std_mean(Tensor input, int[1]? dim=None, *, Scalar? correction=1, bool keepdim=False) "
                   "-> (Tensor, Tensor)", category="reduction", method=False)


def _stat_mean(op, kernel_op, input, dim, unbiased, keepdim, correction):
    dims, c = _var_setup(op.name, input, dim, unbiased, correction)
    dev = input._device
    a = input._data
    out = (_wrap(kernel_op.kernel(dev.type)(a, dims, c, keepdim), dev),
           _wrap(MEAN.kernel(dev.type)(a, dims, keepdim, input.dtype), dev))
    _rec(op, input, (input, dims), {"correction": c, "keepdim": keepdim}, out)
    return out


@VAR_MEAN.front
def var_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """The tuple ``(var, mean)`` of ``input`` over ``dim`` (see :func:`flambeau.var`)."""
    return _stat_mean(VAR_MEAN, VAR, input, dim, unbiased, keepdim, correction)


@STD_MEAN.front
def std_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """The tuple ``(std, mean)`` of ``input`` over ``dim`` (see :func:`flambeau.std`)."""
    return _stat_mean(STD_MEAN, STD, input, dim, unbiased, keepdim, correction)


# --- logsumexp, norm ---------------------------------------------------------------------------------
LOGSUMEXP = declare("logsumexp(Tensor input, int[1] dim, bool keepdim=False) -> Tensor", category="reduction")


@LOGSUMEXP.front
def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(input), dim))`` computed stably (subtracting the maximum first).

    Integer inputs give the default float dtype; the result over an empty dimension is ``-inf``.
    """
    check_tensor(input, "input", "logsumexp")
    a = input._data
    dims = _axes(dim, a.ndim)
    if input.dtype.is_complex:  # a composite, shifted by the largest real part (it dropped the imaginary parts)
        shift = input.real.detach().amax(dims, keepdim=True)
        shift = shift.masked_fill(~shift.isfinite(), 0.0)
        out = (input - shift).exp().sum(dims, keepdim=True).log() + shift
        return out if keepdim else out.squeeze(dims)
    if not input.dtype.is_floating_point:
        a = _copy(a, input._device, dt.get_default_dtype().np)
    out = _wrap(LOGSUMEXP.kernel(input._device.type)(a, dims, keepdim), input._device)
    _rec(LOGSUMEXP, input, (input, dims, keepdim), {}, out)
    return out


NORM = declare("norm(Tensor input, Scalar|str p='fro', int[1]? dim=None, bool keepdim=False, *, "
               "ScalarType? dtype=None) -> Tensor", category="reduction")


@NORM.front
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector norm of ``input`` over ``dim`` (every element when None).

    ``p`` is ``'fro'`` or 2 (Euclidean), 1, ``inf``, ``-inf``, 0 (number of non-zeros) or any
    other number (``sum(|x|**p)**(1/p)``). Floating inputs only; ``dtype`` casts first.
    """
    check_tensor(input, "input", "norm")
    if input.dtype._category < 2:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{input.dtype.scalar_name}")
    if p is None or p == "fro":
        p = 2.0
    elif isinstance(p, str):
        raise NotImplementedError(f"norm(): p={p!r} (matrix norms other than 'fro') is not supported by flambeau")
    if dtype is not None:
        dtype = dt.to_dtype(dtype)
        if dt.promote_types(input.dtype, dtype) is not dtype:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({input.dtype.scalar_name}) should be "
                               f"convertible without narrowing to the specified dtype ({dtype.scalar_name})")
        input = input.to(dtype)
    p = float(p)
    a = input._data
    dims = _axes(dim, a.ndim)
    out = _wrap(NORM.kernel(input._device.type)(a, p, dims, keepdim), input._device)
    _rec(NORM, input, (input, p, dims, keepdim), {"dtype": None}, out)
    return out


# --- all, any, count_nonzero -------------------------------------------------------------------------
def _logical_op(name, what):
    op = declare(f"{name}(Tensor input, int[1]? dim=None, bool keepdim=False) -> Tensor", category="reduction",
                 differentiable=False, samples=reduction_samples("list"))
    op.sample_options(dtypes=ALL_DTYPES)

    def fn(input, dim=None, keepdim=False):
        check_tensor(input, "input", name)
        a = input._data
        dims = _axes(dim, a.ndim)
        return _wrap(op.kernel(input._device.type)(a, dims, keepdim), input._device)

    fn.__doc__ = f"""Whether {what} element of ``input`` over ``dim`` is non-zero.

    The result is bool (uint8 for uint8 inputs, as torch). Not differentiable.
    """
    op.front(fn)
    return op


ALL = _logical_op("all", "every")
ANY = _logical_op("any", "any")
all = ALL.fn
any = ANY.fn

COUNT_NONZERO = declare("count_nonzero(Tensor input, int[1]? dim=None) -> Tensor", category="reduction",
                        differentiable=False)


@COUNT_NONZERO.front
def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """Number (int64) of non-zero elements of ``input`` over ``dim`` (every element when None)."""
    check_tensor(input, "input", "count_nonzero")
    a = input._data
    return _wrap(COUNT_NONZERO.kernel(input._device.type)(a, _axes(dim, a.ndim), False), input._device)


# --- cumulative ----------------------------------------------------------------------------------------
def _cum_op(name, what):
    op = declare(f"{name}(Tensor input, int dim, *, ScalarType? dtype=None) -> Tensor", category="reduction",
                 samples=reduction_samples("required", keepdim=False, low=0.5, high=1.5))
    op.sample_options(dtypes=ALL_DTYPES)

    def fn(input, dim, *, dtype=None):
        check_tensor(input, "input", name)
        a = input._data
        d = wrap_dim(dim, a.ndim)
        out_dtype = _exact_dtype(input.dtype) if dtype is None else dt.to_dtype(dtype)
        if a.ndim == 0:
            arr = _copy(a, input._device, out_dtype.np)
        else:
            arr = op.kernel(input._device.type)(a, d, out_dtype)
        out = _wrap(arr, input._device)
        _rec(op, input, (input, d), {"dtype": out_dtype}, out)
        return out

    fn.__doc__ = f"""Cumulative {what} of ``input`` along ``dim`` (same shape as ``input``).

    Integer and bool inputs give int64 unless ``dtype`` says otherwise.
    """
    op.front(fn)
    return op


CUMSUM = _cum_op("cumsum", "sum")
CUMPROD = _cum_op("cumprod", "product")
cumsum = CUMSUM.fn
cumprod = CUMPROD.fn


def _cum_extreme_op(name, rtype):
    op = declare(f"{name}(Tensor input, int dim) -> (Tensor values, Tensor indices)", category="reduction",
                 samples=reduction_samples("required", keepdim=False))
    op.sample_options(dtypes=FLOAT_INT)

    def fn(input, dim):
        check_tensor(input, "input", name)
        _not_complex(f"{name}_cpu", input)
        a = input._data
        d = wrap_dim(dim, a.ndim)
        dev = input._device
        if a.ndim == 0:
            vals, idx = _copy(a, dev), _zero_index(dev)
        else:
            vals, idx = op.kernel(dev.type)(a, d)
        out = rtype(_wrap(vals, dev), _wrap(idx, dev))
        _rec(op, input, (input, d), {}, out)
        return out

    fn.__doc__ = f"""The namedtuple ``(values, indices)`` of the running {name[3:]}imum of ``input`` along ``dim``.

    ``indices`` (int64, not differentiable) points at the latest element equal to the running
    extreme; NaN propagates.
    """
    op.front(fn)
    return op


CUMMAX = _cum_extreme_op("cummax", return_types.cummax)
CUMMIN = _cum_extreme_op("cummin", return_types.cummin)
cummax = CUMMAX.fn
cummin = CUMMIN.fn

# --- median, mode --------------------------------------------------------------------------------------
MEDIAN = declare("median(Tensor input, int? dim=None, bool keepdim=False) -> Tensor | (Tensor values, Tensor indices)",
                 category="reduction")


@MEDIAN.front
def median(input: Tensor, dim=None, keepdim: bool = False):
    """The lower median of ``input``.

    ``median(input)`` is a 0-dim tensor (NaN for empty inputs or if any element is NaN);
    ``median(input, dim, keepdim=False)`` is the namedtuple ``(values, indices)`` along ``dim``.
    Of two middle values the lower one is returned, as torch does.
    """
    check_tensor(input, "input", "median")
    _not_complex("median_cpu", input)
    a = input._data
    dev = input._device
    if dim is None:
        out = _wrap(MEDIAN.kernel(dev.type)(a, None, False), dev)
        _rec(MEDIAN, input, (input, None, False), {}, out)
        return out
    d = wrap_dim(dim, a.ndim)
    if a.ndim == 0:
        vals, idx = _copy(a, dev), _zero_index(dev)
    else:
        _nonempty("median", a, (d,))
        vals, idx = MEDIAN.kernel(dev.type)(a, d, keepdim)
    out = return_types.median(_wrap(vals, dev), _wrap(idx, dev))
    _rec(MEDIAN, input, (input, d, keepdim), {}, out)
    return out


MODE = declare("mode(Tensor input, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
               category="reduction")


@MODE.front
def mode(input: Tensor, dim: int = -1, keepdim: bool = False):
    """The namedtuple ``(values, indices)`` of the most frequent value of ``input`` along ``dim``.

    Of equally frequent values the smallest is returned; ``indices`` points at its last
    occurrence.
    """
    check_tensor(input, "input", "mode")
    _not_complex("mode_cpu", input)
    a = input._data
    d = wrap_dim(dim, a.ndim)
    dev = input._device
    if a.ndim == 0:
        vals, idx = _copy(a, dev), _zero_index(dev)
    else:
        _nonempty("mode", a, (d,))
        vals, idx = MODE.kernel(dev.type)(a, d, keepdim)
    out = return_types.mode(_wrap(vals, dev), _wrap(idx, dev))
    _rec(MODE, input, (input, d, keepdim), {}, out)
    return out


# --- composites ------------------------------------------------------------------------------------
DIFF = declare("diff(Tensor input, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor",
               composite=True, category="reduction")


@DIFF.front
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:
    """The ``n``-th forward difference along ``dim``: ``out[i] = input[i + 1] - input[i]``.

    ``prepend``/``append`` (tensors, or numbers broadcast to one slice) are concatenated along ``dim``
    first. The result is ``n`` shorter along ``dim``; bool inputs give ``input[i + 1] != input[i]``.
    """
    check_tensor(input, "input", "diff")
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if not isinstance(n, int) or n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, input.dim())
    def as_slices(extra):
        if extra is None or isinstance(extra, Tensor):
            return extra
        shape = list(input.shape)
        shape[d] = 1  # a number stands for one slice along dim
        return full(shape, extra, dtype=input.dtype, device=input.device)

    parts = [p for p in (as_slices(prepend), input, as_slices(append)) if p is not None]
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        later, earlier = x.narrow(d, 1, length - 1), x.narrow(d, 0, length - 1)
        x = later != earlier if x.dtype is dt.bool else later - earlier
    return x


# --- sample inputs (Note [Sample inputs] in _registry); the factories above gave theirs -----------------
SUM.samples(reduction_samples("list"), dtypes=ALL_DTYPES)
NANSUM.samples(reduction_samples("list"), dtypes=FLOAT_INT)
MEAN.samples(reduction_samples("list"), dtypes=FLOAT)
NANMEAN.samples(reduction_samples("list"), dtypes=FLOAT)
PROD.samples(reduction_samples(low=0.5, high=1.5), dtypes=FLOAT_INT)
AMINMAX.samples(reduction_samples("kwonly"), dtypes=FLOAT_INT)
COUNT_NONZERO.samples(reduction_samples("list", keepdim=False), dtypes=ALL_DTYPES)
MEDIAN.samples(reduction_samples(), dtypes=FLOAT_INT)
MODE.samples(reduction_samples("required"), dtypes=FLOAT_INT)
LOGSUMEXP.samples(reduction_samples("required"), dtypes=FLOAT)


def _var_samples(device, dtype, requires_grad):
    # a single element has no variance with correction=1 (nan, also in torch): no 0-dim sample
    yield from (s for s in reduction_samples("list")(device, dtype, requires_grad) if s.name != "0-dim")
    x = make_tensor((3, 4), device=device, dtype=dtype, requires_grad=requires_grad)
    yield SampleInput(x, 1, correction=0).named("correction=0")
    yield SampleInput(x, 0, False, True).named("unbiased=False keepdim")


for _op in (VAR, STD, VAR_MEAN, STD_MEAN):
    _op.samples(_var_samples, dtypes=FLOAT)


@NORM.samples(dtypes=FLOAT)
def _norm_samples(device, dtype, requires_grad):
    def mk(shape):
        return make_tensor(shape, device=device, dtype=dtype, requires_grad=requires_grad, exclude_zero=True)

    yield SampleInput(mk((3, 4))).named("fro")
    for p in (1, 2, 3, float("inf")):
        yield SampleInput(mk((3, 4)), p, 1).named(f"p={p} dim")
    yield SampleInput(mk((2, 3, 4)), "fro", (1, 2), True).named("fro dims keepdim")


@DIFF.samples(dtypes=FLOAT_INT)
def _diff_samples(device, dtype, requires_grad):
    def mk(shape):
        return make_tensor(shape, device=device, dtype=dtype, requires_grad=requires_grad)

    yield SampleInput(mk((5,)))
    yield SampleInput(mk((3, 4)), 2, 0).named("n=2 dim=0")
    yield SampleInput(mk((3, 4)), 1, -1, mk((3, 1)), mk((3, 2))).named("prepend append")
