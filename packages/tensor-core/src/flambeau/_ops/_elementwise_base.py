"""Factories that declare elementwise operators: one front function per operator family.

A unary or binary operator is declared by one call that gives its signature and its dtype rule;
the factory builds the ``flambeau.<name>`` function, the in-place ``Tensor.<name>_`` and the
operator dunders, all sharing one fast path (this is the hottest code in flambeau: see
benchmarks/ops.py). The kernels register for the operator's name on their own
(``flambeau._kernels.cpu.elementwise``, most of them numpy ufuncs made into kernels by
``flambeau._kernels.cpu._elementwise``); the fronts find them in the operator's row of the
kernel table (Note [One kernel table]).

In-place variants validate their arguments, then hand the operator to the autograd engine when
it must be recorded (Note [In-place operators under autograd] in flambeau-autograd: the engine
runs ``op.fn`` out of place and copies the result into ``self``); otherwise they run the kernel
with ``out=self`` and bump the version counter.

Kernel convention (every device):
    binary: ``kernel(a, b, dtype, out=None) -> array``; ``a``/``b`` are backend arrays or Python
        scalars, computation happens in flambeau dtype ``dtype`` and the result is written into
        ``out`` when given (in-place variants).
    unary:  ``kernel(a, dtype, out=None) -> array``.
Comparison and logical kernels return bool arrays whatever ``dtype`` is. A Python int that does
not fit the integer result dtype wraps, as in torch (Note [Scalars out of range] in
``flambeau._kernels.cpu._elementwise``).

Note [Dunders and foreign operands]
    ``Tensor.__add__`` & co. return ``NotImplemented`` for operands that are neither tensors nor
    numbers, so Python raises its usual ``TypeError`` (and ``t == None`` is False, as in torch);
    the ``flambeau.add`` function raises torch's ``TypeError`` naming the argument instead.
"""

from __future__ import annotations

import numpy as np

from flambeau import _dtype as dt
from flambeau._grad_mode import _engine
from flambeau._ops._common import Tensor, _wrap, broadcast_error, common_device, grad_state, inplace_by_engine, record
from flambeau._ops._registry import declare
from flambeau._ops._samples import SampleInput, make_tensor

__all__ = ["binary_op", "unary_op", "DTYPE_RULES", "type_name", "not_implemented_for", "check_inplace_cast",
           "unary_samples", "binary_samples"]

_ndarray = np.ndarray
_result_type = dt.result_type
_bool = dt.bool
_float32 = dt.float32


def _rule_promote(d):
    return d


def _rule_float(d):
    # Integer and bool inputs compute in the default float dtype (torch's int -> float ops).
    return d if d._category >= 2 else dt._default[0]


def _rule_double(d):
    return dt.float64


DTYPE_RULES = {"promote": _rule_promote, "float": _rule_float, "double": _rule_double}


def _real_rule(rule: str, kernel_name: str):
    """``DTYPE_RULES[rule]`` raising torch's ``"<kernel_name>" not implemented for 'ComplexFloat'`` for
    complex dtypes: the rule of every operator not declared ``complex_ok`` (the rule runs on every
    call anyway, so the check costs one comparison)."""
    base = DTYPE_RULES[rule]

    def real_only(d):
        if d._category == 3:
            raise NotImplementedError(f'"{kernel_name}" not implemented for \'{d.scalar_name}\'')
        return base(d)

    return real_only


# --- dtype checks ---------------------------------------------------------------------------------


def type_name(d) -> str:
    """torch's scalar-type name of ``d`` (``Float``, ``Long``, ``Bool`` ...) used in error messages."""
    return d.scalar_name


_type_name = type_name


def not_implemented_for(kernel_name: str, reject):
    """A dtype check raising torch's ``"<kernel_name>" not implemented for '<Type>'`` when ``reject(d)``.

    ``reject`` is ``"bool"``, ``"integral"`` (ints and bool), ``"float"`` or a predicate on dtypes.
    """
    pred = {"bool": lambda d: d is dt.bool, "integral": lambda d: d._category < 2,
            "float": lambda d: d._category >= 2}.get(reject, reject)

    def check(d):
        if pred(d):
            raise NotImplementedError(f'"{kernel_name}" not implemented for \'{type_name(d)}\'')

    return check


def check_inplace_cast(res, self_dtype) -> None:
    """torch's error when an in-place result of dtype ``res`` can't be written into ``self_dtype``."""
    if not dt.can_cast(res, self_dtype):
        raise RuntimeError(f"result type {type_name(res)} can't be cast to the desired output "
                           f"type {type_name(self_dtype)}")


def _allowed_check(name: str, allowed):
    if allowed is None or callable(allowed):
        return allowed
    if allowed == "integral":
        return not_implemented_for(f"{name}_cpu", "float")
    if allowed == "float":
        return not_implemented_for(f"{name}_cpu", "integral")
    if allowed == "no_bool":
        return not_implemented_for(f"{name}_cpu", "bool")
    raise ValueError(f"unknown dtype restriction {allowed!r}")


# --- default sample inputs (Note [Sample inputs] in _registry) ----------------------------------
def unary_samples(low: float = -3.0, high: float = 3.0):
    """Default samples of a unary operator: a 0-dim, a 1-d and a strided 2-d input in ``[low, high)``."""
    def samples(device, dtype, requires_grad):
        def mk(shape, **kw):
            return make_tensor(shape, device=device, dtype=dtype, requires_grad=requires_grad, low=low, high=high,
                               **kw)

        yield SampleInput(mk(())).named("0-dim")
        yield SampleInput(mk((5,))).named("1-d")
        yield SampleInput(mk((3, 4), noncontiguous=True)).named("strided")

    return samples


def binary_samples(low: float = -3.0, high: float = 3.0, other_low: float | None = None,
                   other_high: float | None = None, scalar=None):
    """Default samples of a binary operator: same shapes, broadcasting, strided, a Python scalar.

    ``other`` avoids zero (division-like operators); ``scalar`` is the Python number used as
    ``other`` (default 2 for integer and bool dtypes, 1.5 for floating ones; False: no such sample).
    """
    olo = low if other_low is None else other_low
    ohi = high if other_high is None else other_high

    def samples(device, dtype, requires_grad):
        def mk(shape, lo=low, hi=high, **kw):
            return make_tensor(shape, device=device, dtype=dtype, requires_grad=requires_grad, low=lo, high=hi, **kw)

        def mko(shape, **kw):
            return mk(shape, olo, ohi, exclude_zero=True, **kw)

        yield SampleInput(mk((3, 4)), mko((3, 4))).named("same shape")
        yield SampleInput(mk((2, 3, 4)), mko((4,))).named("broadcast")
        yield SampleInput(mk(()), mko((2, 3))).named("0-dim input")
        yield SampleInput(mk((4, 3), noncontiguous=True), mko((4, 3), noncontiguous=True)).named("strided")
        if scalar is not False:
            s = scalar if scalar is not None else (1.5 if dtype.is_floating_point else (True if dtype is _bool else 2))
            yield SampleInput(mk((2, 3)), s).named("scalar other")

    return samples


def _sample_dtypes(check, bool_ok: bool = True) -> tuple:
    """The dtype names a factory-declared operator is sampled at: those its dtype check accepts."""
    names = []
    for d in (dt.float32, dt.float64, dt.int64, dt.bool):
        if d is dt.bool and not bool_ok:
            continue
        try:
            if check is not None:
                check(d)
        except (NotImplementedError, RuntimeError, TypeError):
            continue
        names.append(d.name)
    return tuple(names)


# --- binary operators ----------------------------------------------------------------------------
def binary_op(signature: str, *, rule: str = "promote", bool_out: bool = False,
              inplace: bool = True, dunders: tuple = (), rdunders: tuple = (), differentiable: bool = True,
              category: str = "pointwise", allowed=None, function: bool = True, method: bool = True,
              aliases: tuple = (), check_operands=None, samples=None, sample_dtypes=None,
              complex_ok: bool = False):
    """Declare a binary elementwise operator ``name(input, other)`` and build its fronts.

    Args:
        signature: the schema; its name becomes ``flambeau.<name>``.
        rule: ``"promote"`` computes in the promoted dtype, ``"float"`` turns integer results into
            the default float dtype, ``"double"`` always computes in float64.
        bool_out: the result is bool (comparisons, logical ops).
        dunders / rdunders: operator methods bound to ``fn(self, other)`` / ``fn(other, self)``;
            ``__i*__`` names bind the in-place variant.
        allowed: a check called with the promoted dtype that raises for unsupported dtypes
            (see :func:`not_implemented_for`), or ``"integral"`` / ``"float"`` / ``"no_bool"``.
        aliases: other names bound to the same function, method and in-place method.
        check_operands: ``check(input, other)`` raising for unsupported operands (``sub`` of bools).
        samples: the operator's sample inputs (default :func:`binary_samples`); sample_dtypes:
            the dtype names they are made at (default: those ``allowed`` accepts).
        complex_ok: the kernels compute complex dtypes; otherwise complex operands raise torch's
            ``"<name>_cpu" not implemented for 'ComplexFloat'``.
    """
    op = declare(signature, differentiable=differentiable and not bool_out, category=category,
                 function=function, method=method, aliases=aliases)
    kernels = op.kernels  # the operator's row of the kernel table, filled as kernels register
    name = op.name
    to_compute = DTYPE_RULES[rule] if complex_ok else _real_rule(rule, f"{name}_cpu")
    bool_ = dt.bool
    check = _allowed_check(name, allowed)
    op.samples(samples or binary_samples(),
               dtypes=sample_dtypes or _sample_dtypes(check, bool_ok=check_operands is None))

    def _prepare(input, other, checked=True):  # checked=False: in-place checks the cast first
        """Arrays or scalars, compute dtype and device of ``input op other``."""
        if input.__class__ is Tensor or isinstance(input, Tensor):
            a = input._data
            if other.__class__ is Tensor or isinstance(other, Tensor):
                dev = input._device
                d = input.dtype if input.dtype is other.dtype else _result_type(input, other)
                b = other._data
                if other._device is not dev:
                    dev = common_device(input, other)
                    if dev.type == "cuda":  # a 0-dim CPU tensor joins a CUDA op as a scalar (dtype kept above)
                        if input._device is not dev:
                            a = input.item()
                        if other._device is not dev:
                            b = other.item()
            else:
                dev = input._device
                d = input.dtype
                oc = other.__class__
                # A weak Python scalar never changes a tensor's dtype within its category (Note [Type
                # promotion]): floats into float tensors and ints into non-bool tensors skip the general rule.
                if not ((oc is float and d.is_floating_point) or (oc is int and d is not _bool)):
                    d = _result_type(input, other)
                b = other
        elif isinstance(other, Tensor):
            dev = other._device
            d = _result_type(input, other)
            a, b = input, other._data
        else:
            raise TypeError(f"{name}(): expected at least one Tensor argument, got "
                            f"{type(input).__name__} and {type(other).__name__}")
        if checked:
            if check is not None:
                check(d)
            if check_operands is not None:
                check_operands(input, other)
        return a, b, to_compute(d), dev

    def _bad_operand(input, other):
        # Only reached when promotion rejected an operand: name the argument as torch does.
        bad, pos, arg = (other, 2, "other") if isinstance(input, Tensor) else (input, 1, "input")
        return TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not {type(bad).__name__}")

    def make_front(dunder: bool):
        def fn(input, other):
            try:
                a, b, d, dev = _prepare(input, other)
            except TypeError:
                if isinstance(input, np.ndarray) or isinstance(other, np.ndarray):
                    # ndarray op Tensor: the array joins as a tensor (numpy defers to us: __array_ufunc__).
                    return fn(_from_array(input), _from_array(other))
                if dunder:
                    return NotImplemented  # Note [Dunders and foreign operands]
                raise _bad_operand(input, other) from None
            try:
                arr = kernels[dev.type](a, b, d)
            except ValueError as e:
                raise _as_broadcast_error(e, input, other) from None
            except KeyError:
                arr = op.kernel(dev.type)(a, b, d)
            out = _wrap(arr, dev, None, bool_ if bool_out else None)
            # isinstance, not a class check: subclasses (nn.Parameter) must be recorded too.
            if grad_state.enabled and ((isinstance(input, Tensor) and input._requires_grad)
                                       or (isinstance(other, Tensor) and other._requires_grad)):
                record(op, (input, other), {}, out)
            return out

        return fn

    fn = make_front(False)
    dfn = make_front(True)
    fn.__doc__ = (f"Elementwise ``{signature}`` with broadcasting and type promotion.\n\n"
                  f"``input`` and ``other`` are tensors or numbers (at least one a tensor) of broadcastable "
                  f"shapes; the result has the broadcast shape and "
                  + ("dtype bool." if bool_out else "torch's promoted dtype."))
    op.front(fn)
    dfn.__doc__ = f"Operator form of :func:`flambeau.{name}` (``NotImplemented`` for foreign operands)."
    dfn.__name__ = dfn.__qualname__ = name

    if inplace:
        def fn_(self, other):
            try:
                a, b, d, dev = _prepare(self, other, False)
            except TypeError:
                raise _bad_operand(self, other) from None
            # torch checks the cast before the dtype support of the kernel
            check_inplace_cast(bool_ if bool_out else d, self.dtype)
            if check is not None:
                check(_result_type(self, other))
            if check_operands is not None:
                check_operands(self, other)
            if dev is not self._device:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                                   f"two devices, {self._device} and {dev}!")
            _check_inplace_shape(self, other)
            if grad_state.enabled and (self._requires_grad or (isinstance(other, Tensor) and other._requires_grad)) \
                    and _engine[0] is not None:
                return inplace_by_engine(op, (self, other), {"inplace": True})
            op.kernel(dev.type)(a, b, d, out=self._data)
            self._storage._version += 1
            return self

        fn_.__doc__ = f"In-place version of :func:`flambeau.{name}`; returns ``self``."
        op.inplace(fn_)
        for d_name in dunders:
            if d_name.startswith("__i"):
                op.dunders[d_name] = op.inplace_fn  # (``x += y`` checks what ``x.add_(y)`` does)
    for d_name in dunders:
        if not d_name.startswith("__i"):
            op.dunders[d_name] = dfn
    for d_name in rdunders:
        op.dunders[d_name] = _reflected(dfn)
    return op


def _from_array(x):
    if isinstance(x, np.ndarray):
        from flambeau._factories import tensor

        return tensor(x)
    return x


def _reflected(fn):
    def rfn(self, other):
        return fn(other, self)

    rfn.__doc__ = f"Reflected operator form of :func:`flambeau.{fn.__name__}` (``other op self``)."
    return rfn


def _check_inplace_shape(self, other):
    if other.__class__ is Tensor or isinstance(other, Tensor):
        s, o = self._data.shape, other._data.shape
        if s != o and (len(o) > len(s) or any(b != 1 and b != a for a, b in zip(s[len(s) - len(o):], o))):
            raise RuntimeError(
                f"output with shape {list(s)} doesn't match the broadcast shape "
                f"{list(np.broadcast_shapes(s, o)) if _broadcastable(s, o) else list(o)}"
            )


def _broadcastable(s, o):
    try:
        np.broadcast_shapes(s, o)
        return True
    except ValueError:
        return False


def _as_broadcast_error(e: ValueError, input, other):
    sa = tuple(input.shape) if isinstance(input, Tensor) else ()
    sb = tuple(other.shape) if isinstance(other, Tensor) else ()
    if _broadcastable(sa, sb):
        return e  # not a broadcasting problem: let the original error through
    return broadcast_error(sa, sb)


# --- unary operators -----------------------------------------------------------------------------
def unary_op(signature: str, *, rule: str = "promote", bool_out: bool = False,
             inplace: bool = True, dunders: tuple = (), differentiable: bool = True,
             category: str = "pointwise", allowed=None, function: bool = True, method: bool = True,
             aliases: tuple = (), samples=None, sample_dtypes=None, complex_ok: bool = False):
    """Declare a unary elementwise operator ``name(input)``; see :func:`binary_op` for the arguments.

    ``allowed`` checks the *input* dtype.
    """
    op = declare(signature, differentiable=differentiable and not bool_out, category=category,
                 function=function, method=method, aliases=aliases)
    kernels = op.kernels
    name = op.name
    to_compute = DTYPE_RULES[rule] if complex_ok else _real_rule(rule, f"{name}_cpu")
    bool_ = dt.bool
    check = _allowed_check(name, allowed)
    op.samples(samples or unary_samples(), dtypes=sample_dtypes or _sample_dtypes(check))

    def _check(input):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
        d = input.dtype
        if check is not None:
            check(d)
        return to_compute(d)

    def fn(input):
        d = _check(input)
        dev = input._device
        k = kernels.get(dev.type) or op.kernel(dev.type)
        out = _wrap(k(input._data, d), dev, None, bool_ if bool_out else None)
        if input._requires_grad and grad_state.enabled:
            record(op, (input,), {}, out)
        return out

    fn.__doc__ = (f"Elementwise ``{signature}``.\n\n``input`` is a tensor of any shape; the result has "
                  f"its shape and " + ("dtype bool." if bool_out else
                                       "its dtype." if rule == "promote" else
                                       "its dtype, or the default float dtype for integer and bool inputs."))
    op.front(fn)
    if inplace:
        def fn_(self):
            d = _check(self)
            check_inplace_cast(bool_ if bool_out else d, self.dtype)
            if self._requires_grad and grad_state.enabled and _engine[0] is not None:
                return inplace_by_engine(op, (self,), {"inplace": True})
            op.kernel(self._device.type)(self._data, d, out=self._data)
            self._storage._version += 1
            return self

        fn_.__doc__ = f"In-place version of :func:`flambeau.{name}`; returns ``self``."
        op.inplace(fn_)
    for d_name in dunders:
        op.dunders[d_name] = fn
    return op
