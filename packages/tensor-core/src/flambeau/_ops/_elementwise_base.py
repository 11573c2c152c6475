"""Factories that declare elementwise operators: one front function per operator family.

A unary or binary operator is declared by one call that gives its name, its numpy ufunc (the
CPU kernel) and its dtype rule; the factory builds the ``flambeau.<name>`` function, the in-place
``Tensor.<name>_`` and the operator dunders, all sharing one fast path (this is the hottest code
in flambeau: see benchmarks/ops.py).

Kernel convention (every device):
    binary: ``kernel(a, b, dtype, out=None) -> array``; ``a``/``b`` are backend arrays or Python
        scalars, computation happens in flambeau dtype ``dtype`` and the result is written into
        ``out`` when given (in-place variants).
    unary:  ``kernel(a, dtype, out=None) -> array``.
Comparison and logical kernels return bool arrays whatever ``dtype`` is.
"""

from __future__ import annotations

import numpy as np

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, _wrap, broadcast_error, common_device, grad_state, record
from flambeau._ops._registry import declare

__all__ = ["binary_op", "unary_op", "cpu_binary_kernel", "cpu_unary_kernel", "DTYPE_RULES"]

_ndarray = np.ndarray
_result_type = dt.result_type
_float32 = dt.float32


def _rule_promote(d):
    return d


def _rule_float(d):
    # Integer and bool inputs compute in the default float dtype (torch's int -> float ops).
    return d if d.is_floating_point else dt._default[0]


def _rule_no_bool(d):
    return d


DTYPE_RULES = {"promote": _rule_promote, "float": _rule_float}


# --- CPU kernels from numpy ufuncs -------------------------------------------------------------
def cpu_binary_kernel(ufunc, *, quiet: bool = False, bool_out: bool = False):
    """A CPU kernel computing ``ufunc`` in the requested dtype.

    ``quiet``: silence numpy's floating-point warnings (division by zero etc.), which torch
    does not emit; it costs about 1 µs, so only operators that hit them routinely ask for it.
    """

    def kernel(a, b, dtype, out=None):
        npdt = dtype.np
        if out is not None:
            if quiet:
                with np.errstate(all="ignore"):
                    ufunc(a, b, out=out, dtype=None if bool_out else npdt, casting="unsafe")
            else:
                ufunc(a, b, out=out, dtype=None if bool_out else npdt, casting="unsafe")
            return out
        if bool_out or (getattr(a, "dtype", None) is npdt and getattr(b, "dtype", None) is npdt):
            r = _call2(ufunc, a, b, None, quiet)
        else:
            r = _call2(ufunc, a, b, npdt, quiet)
        return r if r.__class__ is _ndarray else np.asarray(r)

    return kernel


def _call2(ufunc, a, b, npdt, quiet):
    if quiet:
        with np.errstate(all="ignore"):
            return ufunc(a, b) if npdt is None else ufunc(a, b, dtype=npdt)
    return ufunc(a, b) if npdt is None else ufunc(a, b, dtype=npdt)


def cpu_unary_kernel(ufunc, *, quiet: bool = False, bool_out: bool = False):
    """A CPU kernel computing unary ``ufunc`` in the requested dtype (see :func:`cpu_binary_kernel`)."""

    def kernel(a, dtype, out=None):
        npdt = dtype.np
        kw = {} if (bool_out or a.dtype is npdt) else {"dtype": npdt}
        if out is not None:
            kw["casting"] = "unsafe"
            kw["out"] = out
        if quiet:
            with np.errstate(all="ignore"):
                r = ufunc(a, **kw)
        else:
            r = ufunc(a, **kw)
        return r if r.__class__ is _ndarray else np.asarray(r)

    return kernel


# --- binary operators ----------------------------------------------------------------------------
def binary_op(signature: str, cpu_kernel, *, rule: str = "promote", bool_out: bool = False,
              inplace: bool = True, dunders: tuple = (), rdunders: tuple = (), differentiable: bool = True,
              category: str = "pointwise", allowed: str | None = None, function: bool = True):
    """Declare a binary elementwise operator ``name(input, other)`` and build its fronts.

    Args:
        signature: the schema; its name becomes ``flambeau.<name>``.
        cpu_kernel: the CPU kernel (see module docstring).
        rule: ``"promote"`` computes in the promoted dtype, ``"float"`` turns integer results into
            the default float dtype.
        bool_out: the result is bool (comparisons, logical ops).
        dunders / rdunders: operator methods bound to ``fn(self, other)`` / ``fn(other, self)``.
        allowed: ``"integral"`` to reject floating inputs (bitwise ops), ``"float"`` to reject
            integers (ops torch defines only for floats).
    """
    op = declare(signature, differentiable=differentiable and not bool_out, category=category,
                 kernels={"cpu": cpu_kernel}, function=function)
    kernels = op.kernels
    name = op.name
    to_compute = DTYPE_RULES[rule]
    bool_ = dt.bool

    def _prepare(input, other):
        """Arrays or scalars, compute dtype and device of ``input op other``."""
        if input.__class__ is Tensor or isinstance(input, Tensor):
            a = input._data
            if other.__class__ is Tensor or isinstance(other, Tensor):
                dev = input._device
                if other._device is not dev:
                    dev = common_device(input, other)
                    if dev.type == "cuda":  # a 0-dim CPU tensor joins a CUDA op as a scalar
                        if input._device is not dev:
                            a = input.item()
                        if other._device is not dev:
                            other = other.item()
                d = input.dtype if input.dtype is other.dtype else _result_type(input, other)
                b = other._data if other.__class__ is Tensor or isinstance(other, Tensor) else other
            else:
                dev = input._device
                d = _result_type(input, other)
                b = other
        elif isinstance(other, Tensor):
            dev = other._device
            d = _result_type(input, other)
            a, b = input, other._data
        else:
            raise TypeError(f"{name}(): expected at least one Tensor argument, got "
                            f"{type(input).__name__} and {type(other).__name__}")
        if allowed is not None:
            _check_allowed(d)
        return a, b, to_compute(d), dev

    def _check_allowed(d):
        if allowed == "integral" and d.is_floating_point:
            raise RuntimeError(f'"{name}" is only defined for integer and bool tensors, got {d}')
        if allowed == "float" and not d.is_floating_point:
            raise RuntimeError(f'"{name}" is only defined for floating-point tensors, got {d}')

    def fn(input, other):
        a, b, d, dev = _prepare(input, other)
        try:
            arr = kernels[dev.type](a, b, d)
        except ValueError as e:
            raise _as_broadcast_error(e, input, other) from None
        except KeyError:
            arr = op.kernel(dev.type)(a, b, d)
        out = _wrap(arr, dev, None, bool_ if bool_out else None)
        if grad_state.enabled and ((input.__class__ is Tensor and input._requires_grad)
                                   or (other.__class__ is Tensor and other._requires_grad)):
            record(op, (input, other), {}, out)
        return out

    fn.__doc__ = f"Elementwise ``{signature}`` with broadcasting and type promotion."
    op.front(fn)

    if inplace:
        def fn_(self, other):
            a, b, d, dev = _prepare(self, other)
            res = bool_ if bool_out else d
            if not dt.can_cast(res, self.dtype):
                raise RuntimeError(f"result type {_type_name(res)} can't be cast to the desired output "
                                   f"type {_type_name(self.dtype)}")
            if dev is not self._device:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                                   f"two devices, {self._device} and {dev}!")
            _check_inplace_shape(self, other)
            op.kernel(dev.type)(a, b, d, out=self._data)
            self._storage._version += 1
            if grad_state.enabled and (self._requires_grad or (other.__class__ is Tensor and other._requires_grad)):
                record(op, (self, other), {"inplace": True}, self)
            return self

        fn_.__doc__ = f"In-place version of :func:`flambeau.{name}`."
        op.inplace(fn_)
        for d_name in dunders:
            if d_name.startswith("__i"):
                op.dunders[d_name] = fn_
    for d_name in dunders:
        if not d_name.startswith("__i"):
            op.dunders[d_name] = fn
    for d_name in rdunders:
        op.dunders[d_name] = _reflected(fn)
    return op


def _reflected(fn):
    def rfn(self, other):
        return fn(other, self)

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


_TYPE_NAME = {dt.float32: "Float", dt.float64: "Double", dt.float16: "Half", dt.int64: "Long",
              dt.int32: "Int", dt.int16: "Short", dt.int8: "Char", dt.uint8: "Byte", dt.bool: "Bool"}


def _type_name(d) -> str:
    return _TYPE_NAME[d]


# --- unary operators -----------------------------------------------------------------------------
def unary_op(signature: str, cpu_kernel, *, rule: str = "promote", bool_out: bool = False,
             inplace: bool = True, dunders: tuple = (), differentiable: bool = True,
             category: str = "pointwise", allowed: str | None = None):
    """Declare a unary elementwise operator ``name(input)``; see :func:`binary_op` for the arguments."""
    op = declare(signature, differentiable=differentiable and not bool_out, category=category,
                 kernels={"cpu": cpu_kernel})
    kernels = op.kernels
    name = op.name
    to_compute = DTYPE_RULES[rule]
    bool_ = dt.bool

    def _check(input):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        d = input.dtype
        if allowed == "no_bool" and d is bool_:
            raise RuntimeError(f"{name}(): not supported for bool tensors; use logical_not() or ~ instead")
        if allowed == "integral" and d.is_floating_point:
            raise RuntimeError(f'"{name}" is only defined for integer and bool tensors, got {d}')
        return to_compute(d)

    def fn(input):
        d = _check(input)
        dev = input._device
        k = kernels.get(dev.type) or op.kernel(dev.type)
        out = _wrap(k(input._data, d), dev, None, bool_ if bool_out else None)
        if input._requires_grad and grad_state.enabled:
            record(op, (input,), {}, out)
        return out

    fn.__doc__ = f"Elementwise ``{signature}``."
    op.front(fn)
    if inplace:
        def fn_(self):
            d = _check(self)
            res = bool_ if bool_out else d
            if not dt.can_cast(res, self.dtype):
                raise RuntimeError(f"result type {_type_name(res)} can't be cast to the desired output "
                                   f"type {_type_name(self.dtype)}")
            op.kernel(self._device.type)(self._data, d, out=self._data)
            self._storage._version += 1
            if self._requires_grad and grad_state.enabled:
                record(op, (self,), {"inplace": True}, self)
            return self

        fn_.__doc__ = f"In-place version of :func:`flambeau.{name}`."
        op.inplace(fn_)
    for d_name in dunders:
        op.dunders[d_name] = fn
    return op
