"""Factories that declare elementwise operators: one front function per operator family.

A unary or binary operator is declared by one call that gives its name, its numpy ufunc (the
CPU kernel) and its dtype rule; the factory builds the ``flambeau.<name>`` function, the in-place
``Tensor.<name>_`` and the operator dunders, all sharing one fast path (this is the hottest code
in flambeau: see benchmarks/ops.py).

In-place variants validate their arguments, then hand the operator to the autograd engine when
it must be recorded (Note [In-place operators under autograd] in flambeau-autograd: the engine
runs ``op.fn`` out of place and copies the result into ``self``); otherwise they run the kernel
with ``out=self`` and bump the version counter.

Kernel convention (every device):
    binary: ``kernel(a, b, dtype, out=None) -> array``; ``a``/``b`` are backend arrays or Python
        scalars, computation happens in flambeau dtype ``dtype`` and the result is written into
        ``out`` when given (in-place variants).
    unary:  ``kernel(a, dtype, out=None) -> array``.
Comparison and logical kernels return bool arrays whatever ``dtype`` is.

Note [Dunders and foreign operands]
    ``Tensor.__add__`` & co. return ``NotImplemented`` for operands that are neither tensors nor
    numbers, so Python raises its usual ``TypeError`` (and ``t == None`` is False, as in torch);
    the ``flambeau.add`` function raises torch's ``TypeError`` naming the argument instead.

Note [Scalars out of range]
    torch wraps a Python int that does not fit the integer result dtype (``uint8 + 300`` adds
    ``44``); numpy raises OverflowError. Kernels catch that (it costs nothing on the fast path)
    and retry with the scalar cast, wrapping, to the result dtype.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau import _dtype as dt
from flambeau._grad_mode import _engine
from flambeau._ops._common import Tensor, _wrap, broadcast_error, common_device, grad_state, inplace_by_engine, record
from flambeau._ops._registry import declare
from flambeau._parallel import PARALLEL_MIN_ELEMENTS as _PAR_MIN
from flambeau._parallel import _state as _par_state
from flambeau._parallel import run_chunks

__all__ = ["binary_op", "unary_op", "cpu_binary_kernel", "cpu_unary_kernel", "DTYPE_RULES", "type_name",
           "not_implemented_for", "check_inplace_cast"]

_ndarray = np.ndarray
_result_type = dt.result_type
_bool = dt.bool
_float32 = dt.float32


def _rule_promote(d):
    return d


def _rule_float(d):
    # Integer and bool inputs compute in the default float dtype (torch's int -> float ops).
    return d if d.is_floating_point else dt._default[0]


def _rule_double(d):
    return dt.float64


DTYPE_RULES = {"promote": _rule_promote, "float": _rule_float, "double": _rule_double}


# --- CPU kernels from numpy ufuncs -------------------------------------------------------------
def _wrap_scalar(x, npdt):
    """A Python int cast to ``npdt`` with wrap-around, as torch does (Note [Scalars out of range])."""
    if isinstance(x, int) and not isinstance(x, bool):
        return np.array(x, dtype=np.int64).astype(npdt)  # OverflowError beyond int64, like torch
    return x


_INT_BOUNDS = {d: (int(np.iinfo(d.np).min), int(np.iinfo(d.np).max)) for d in dt.ALL_DTYPES if d._category == 1}


def cpu_binary_kernel(ufunc, *, quiet: bool = False, bool_out: bool = False):
    """A CPU kernel computing ``ufunc`` in the requested dtype.

    ``quiet``: silence numpy's floating-point warnings (division by zero etc.), which torch
    does not emit; it costs about 1 µs, so only operators that hit them routinely ask for it.
    ``bool_out``: a comparison or logical ufunc; operands are compared in ``dtype``, as torch does.
    """
    if bool_out:
        return _bool_kernel(ufunc)

    def kernel(a, b, dtype, out=None):
        npdt = dtype.np
        if ((a.__class__ is _ndarray and a.size >= _PAR_MIN) or (b.__class__ is _ndarray and b.size >= _PAR_MIN)) \
                and _par_state["threads"] > 1:
            r = _numba_arith_call(ufunc, a, b, npdt, out) if ufunc in _NUMBA_ARITH_UFUNCS else None
            if r is None:
                r = _parallel_ufunc(ufunc, (a, b), npdt, out)
            if r is not None:
                return r
        try:
            if out is not None:
                if quiet:
                    quiet_call(ufunc, a, b, out=out, dtype=npdt, casting="unsafe")
                else:
                    ufunc(a, b, out=out, dtype=npdt, casting="unsafe")
                return out
            if getattr(a, "dtype", None) is npdt and getattr(b, "dtype", None) is npdt:
                if quiet:
                    r = quiet_call(ufunc, a, b)
                else:
                    r = ufunc(a, b)  # the fast path: no dtype, no casting, no errstate
            elif quiet:
                r = quiet_call(ufunc, a, b, dtype=npdt, casting="unsafe")
            else:
                # casting="unsafe": torch's promotion chose ``npdt`` (uint8 tensor * int8 0-dim
                # tensor is uint8, which numpy's "same_kind" refuses)
                r = ufunc(a, b, dtype=npdt, casting="unsafe")
        except OverflowError:
            return kernel(_wrap_scalar(a, npdt), _wrap_scalar(b, npdt), dtype, out)
        return r if r.__class__ is _ndarray else np.asarray(r)

    return kernel


# Note [Parallel elementwise]: numpy runs ufuncs on one thread. For large C-contiguous operands,
# add/sub/mul/div of floats run as numba prange kernels (memory-bound: they need workers that start
# within microseconds, which numba's spinning threads do and a Python thread pool does not); other
# ufuncs (exp, sin ... compute-bound) are split into chunks over flambeau's thread pool.
@functools.cache
def _numba_arith():
    import numba

    def build(expr):
        scope = {"numba": numba}
        src = f"""
def aa(a, b, out):
    for i in numba.prange(out.shape[0]):
        x = a[i]; y = b[i]; out[i] = {expr}
def as_(a, y, out):
    for i in numba.prange(out.shape[0]):
        x = a[i]; out[i] = {expr}
def sa(x, b, out):
    for i in numba.prange(out.shape[0]):
        y = b[i]; out[i] = {expr}
"""
        exec(compile(src, f"<flambeau parallel {expr}>", "exec"), scope)  # noqa: S102 - fixed templates
        jit = numba.njit(parallel=True)
        return jit(scope["aa"]), jit(scope["as_"]), jit(scope["sa"])

    return {np.add: build("x + y"), np.subtract: build("x - y"), np.multiply: build("x * y"),
            np.true_divide: build("x / y")}


_NUMBA_ARITH_UFUNCS = frozenset((np.add, np.subtract, np.multiply, np.true_divide))
_FLOAT_KINDS = (np.dtype(np.float32), np.dtype(np.float64))


def _numba_arith_call(ufunc, a, b, npdt, out):
    """Large float add/sub/mul/div with numba's threads, or None where the layout doesn't fit."""
    if npdt not in _FLOAT_KINDS:
        return None
    a_arr, b_arr = a.__class__ is _ndarray, b.__class__ is _ndarray
    ref = a if a_arr else b
    for x, is_arr in ((a, a_arr), (b, b_arr)):
        if is_arr:
            if x.dtype is not npdt or x.shape != ref.shape or not x.flags.c_contiguous:
                return None
        elif not isinstance(x, (float, int)) or isinstance(x, bool):
            return None
    if out is None:
        out = np.empty(ref.shape, npdt)
    elif out.dtype is not npdt or out.shape != ref.shape or not out.flags.c_contiguous:
        return None
    aa, as_, sa = _numba_arith()[ufunc]
    flat = out.reshape(-1)
    if a_arr and b_arr:
        aa(a.reshape(-1), b.reshape(-1), flat)
    elif a_arr:
        as_(a.reshape(-1), npdt.type(b), flat)
    else:
        sa(npdt.type(a), b.reshape(-1), flat)
    return out


# Note [Quiet floating-point errors]: torch never warns about division by zero, log(0) or overflow;
# numpy does unless its error state says "ignore". np.errstate costs about 1 µs per use (it builds
# its state object each time), as much as the operation itself on small tensors. The state is a
# context variable in numpy 2: setting a prebuilt "ignore" value costs about 0.1 µs.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _ERR_STATE
    from numpy._core._ufunc_config import _make_extobj

    _IGNORE_ALL = _make_extobj(all="ignore")
except ImportError:  # pragma: no cover - numpy internals moved: use the public API
    _ERR_STATE = None


def quiet_call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with numpy's floating-point warnings off (Note [Quiet floating-point errors])."""
    if _ERR_STATE is None:  # pragma: no cover
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    token = _ERR_STATE.set(_IGNORE_ALL)
    try:
        return fn(*args, **kwargs)
    finally:
        _ERR_STATE.reset(token)


def _parallel_ufunc(ufunc, operands: tuple, npdt, out):
    """``ufunc(*operands)`` computed in chunks by several threads, or None if the layout doesn't allow it.

    Every array operand must be C-contiguous with the result's shape (other operands are scalars);
    numpy releases the GIL inside the ufunc, so the chunks really run at once.
    """
    shape = next(x.shape for x in operands if x.__class__ is _ndarray)
    flat_ops = []
    for x in operands:
        if x.__class__ is _ndarray:
            if x.shape != shape or not x.flags.c_contiguous:
                return None
            flat_ops.append(x.reshape(-1))
        elif isinstance(x, (int, float, bool, np.generic)) and not (x.__class__ is int and npdt is not None
                                                                     and npdt.kind in "iu"):
            flat_ops.append(x)
        else:
            return None  # Python ints into integer arrays may overflow: the serial path wraps them
    if out is None:
        out = np.empty(shape, npdt if npdt is not None else np.result_type(*operands))
    elif out.shape != shape or not out.flags.c_contiguous:
        return None
    flat_out = out.reshape(-1)
    kw = {"casting": "unsafe"} if npdt is None else {"dtype": npdt, "casting": "unsafe"}

    def work(start, stop):
        args = [x[start:stop] if x.__class__ is _ndarray else x for x in flat_ops]
        # each thread has its own error state: quiet it there too (torch warns about nothing)
        quiet_call(ufunc, *args, out=flat_out[start:stop], **kw)

    run_chunks(work, flat_out.size)
    return out


def _bool_kernel(ufunc):
    def kernel(a, b, dtype, out=None):
        npdt = dtype.np
        # torch compares in the promoted dtype: uint8 < (int16 0-dim -1) compares with 255
        if b.__class__ is int and dtype._category == 1:
            lo, hi = _INT_BOUNDS[dtype]
            if not lo <= b <= hi:
                b = _wrap_scalar(b, npdt)
        if a.__class__ is _ndarray and a.dtype is not npdt:
            a = a.astype(npdt)
        if b.__class__ is _ndarray and b.dtype is not npdt:
            b = b.astype(npdt)
        if out is not None:
            ufunc(a, b, out=out, casting="unsafe")
            return out
        r = ufunc(a, b)
        return r if r.__class__ is _ndarray else np.asarray(r)

    return kernel


def cpu_unary_kernel(ufunc, *, quiet: bool = False, bool_out: bool = False):
    """A CPU kernel computing unary ``ufunc`` in the requested dtype (see :func:`cpu_binary_kernel`)."""

    def kernel(a, dtype, out=None):
        npdt = dtype.np
        if a.size >= _PAR_MIN and _par_state["threads"] > 1:
            r = _parallel_ufunc(ufunc, (a,), None if bool_out else npdt, out)
            if r is not None:
                return r
        kw = {} if (bool_out or a.dtype is npdt) else {"dtype": npdt, "casting": "unsafe"}
        if out is not None:
            kw["casting"] = "unsafe"
            kw["out"] = out
        r = quiet_call(ufunc, a, **kw) if quiet else ufunc(a, **kw)
        return r if r.__class__ is _ndarray else np.asarray(r)

    return kernel


# --- dtype checks ---------------------------------------------------------------------------------


def type_name(d) -> str:
    """torch's scalar-type name of ``d`` (``Float``, ``Long``, ``Bool`` ...) used in error messages."""
    return d.scalar_name


_type_name = type_name


def not_implemented_for(kernel_name: str, reject):
    """A dtype check raising torch's ``"<kernel_name>" not implemented for '<Type>'`` when ``reject(d)``.

    ``reject`` is ``"bool"``, ``"integral"`` (ints and bool), ``"float"`` or a predicate on dtypes.
    """
    pred = {"bool": lambda d: d is dt.bool, "integral": lambda d: not d.is_floating_point,
            "float": lambda d: d.is_floating_point}.get(reject, reject)

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


# --- binary operators ----------------------------------------------------------------------------
def binary_op(signature: str, cpu_kernel, *, rule: str = "promote", bool_out: bool = False,
              inplace: bool = True, dunders: tuple = (), rdunders: tuple = (), differentiable: bool = True,
              category: str = "pointwise", allowed=None, function: bool = True, method: bool = True,
              aliases: tuple = (), check_operands=None):
    """Declare a binary elementwise operator ``name(input, other)`` and build its fronts.

    Args:
        signature: the schema; its name becomes ``flambeau.<name>``.
        cpu_kernel: the CPU kernel (see module docstring).
        rule: ``"promote"`` computes in the promoted dtype, ``"float"`` turns integer results into
            the default float dtype, ``"double"`` always computes in float64.
        bool_out: the result is bool (comparisons, logical ops).
        dunders / rdunders: operator methods bound to ``fn(self, other)`` / ``fn(other, self)``;
            ``__i*__`` names bind the in-place variant.
        allowed: a check called with the promoted dtype that raises for unsupported dtypes
            (see :func:`not_implemented_for`), or ``"integral"`` / ``"float"`` / ``"no_bool"``.
        aliases: other names bound to the same function, method and in-place method.
        check_operands: ``check(input, other)`` raising for unsupported operands (``sub`` of bools).
    """
    op = declare(signature, differentiable=differentiable and not bool_out, category=category,
                 kernels={"cpu": cpu_kernel}, function=function, method=method, aliases=aliases)
    kernels = op.kernels
    name = op.name
    to_compute = DTYPE_RULES[rule]
    bool_ = dt.bool
    check = _allowed_check(name, allowed)

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
                op.dunders[d_name] = fn_
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
def unary_op(signature: str, cpu_kernel, *, rule: str = "promote", bool_out: bool = False,
             inplace: bool = True, dunders: tuple = (), differentiable: bool = True,
             category: str = "pointwise", allowed=None, function: bool = True, method: bool = True,
             aliases: tuple = ()):
    """Declare a unary elementwise operator ``name(input)``; see :func:`binary_op` for the arguments.

    ``allowed`` checks the *input* dtype.
    """
    op = declare(signature, differentiable=differentiable and not bool_out, category=category,
                 kernels={"cpu": cpu_kernel}, function=function, method=method, aliases=aliases)
    kernels = op.kernels
    name = op.name
    to_compute = DTYPE_RULES[rule]
    bool_ = dt.bool
    check = _allowed_check(name, allowed)

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
