"""CPU kernels made from numpy ufuncs: the machinery behind most elementwise operators.

:func:`binary_kernel` and :func:`unary_kernel` turn a ufunc into a kernel of the elementwise
convention (``kernel(a, b, dtype, out=None)`` / ``kernel(a, dtype, out=None)``, documented in
``flambeau._ops._elementwise_base``) that computes in the requested flambeau dtype, splits large
operands over several threads (Note [Parallel elementwise]), silences numpy's floating-point
warnings where asked (Note [Quiet floating-point errors]) and wraps out-of-range Python ints as
torch does (Note [Scalars out of range]). ``flambeau._kernels.cpu.elementwise`` registers them.
bfloat16 computes through the float32 kernel (:func:`via_compute`, Note [Compute dtype] in
``flambeau._dtype``).

Note [Scalars out of range]
    torch wraps a Python int that does not fit the integer result dtype (``uint8 + 300`` adds
    ``44``); numpy raises OverflowError. Kernels catch that (it costs nothing on the fast path)
    and retry with the scalar cast, wrapping, to the result dtype.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau import _dtype as dt
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._parallel import PARALLEL_MIN_ELEMENTS as _PAR_MIN
from flambeau._parallel import _state as _par_state
from flambeau._parallel import run_chunks

__all__ = ["binary_kernel", "unary_kernel", "quiet_kernels", "wrap_scalar", "via_compute"]

_ndarray = np.ndarray
_BF16 = dt.bfloat16.np
_F32 = np.dtype(np.float32)


def via_compute(kernel, args: tuple, dtype, out=None, **kwargs):
    """``kernel(*args, dtype.compute, **kwargs)`` with bfloat16 array arguments widened to float32 and a
    float32 result rounded to ``dtype`` once (into ``out`` when given): Note [Compute dtype].

    numpy runs bfloat16 ufuncs through ml_dtypes' loops, which round after every step of an expression
    and refuse mixed operands; float16 has numpy's own loops (which round per ufunc as torch does) and
    does not come here.
    """
    wide = tuple(x.astype(_F32) if x.__class__ is _ndarray and x.dtype == _BF16 else x for x in args)
    r = kernel(*wide, dtype.compute, **kwargs)
    if r.dtype != _F32:  # bool results of comparisons and tests
        if out is not None:
            np.copyto(out, r, casting="unsafe")
            return out
        return r
    if out is not None:
        out[...] = r
        return out
    return r.astype(dtype.np)


def wrap_scalar(x, npdt):
    """A Python int cast to ``npdt`` with wrap-around, as torch does (Note [Scalars out of range])."""
    if isinstance(x, int) and not isinstance(x, bool):
        return np.array(x, dtype=np.int64).astype(npdt)  # OverflowError beyond int64, like torch
    return x


_INT_BOUNDS = {d: (int(np.iinfo(d.np).min), int(np.iinfo(d.np).max)) for d in dt.ALL_DTYPES if d._category == 1}


def binary_kernel(ufunc, *, bool_out: bool = False):
    """A CPU kernel computing ``ufunc`` in the requested dtype, with numpy's floating-point warnings off
    (Note [Quiet floating-point errors]).

    ``bool_out``: a comparison or logical ufunc; operands are compared in ``dtype``, as torch does.
    """
    if bool_out:
        return _bool_kernel(ufunc)

    def kernel(a, b, dtype, out=None):
        npdt = dtype.np
        if npdt is _BF16:
            return via_compute(kernel, (a, b), dtype, out)
        token = _set_state(_IGNORE_ALL)
        try:
            if ((a.__class__ is _ndarray and a.size >= _PAR_MIN) or (b.__class__ is _ndarray and b.size >= _PAR_MIN)) \
                    and _par_state["threads"] > 1:
                r = _numba_arith_call(ufunc, a, b, npdt, out) if ufunc in _NUMBA_ARITH_UFUNCS else None
                if r is None:
                    r = _parallel_ufunc(ufunc, (a, b), npdt, out)
                if r is not None:
                    return r
            if out is not None:
                ufunc(a, b, out=out, dtype=npdt, casting="unsafe")
                return out
            if getattr(a, "dtype", None) is npdt and getattr(b, "dtype", None) is npdt:
                r = ufunc(a, b)  # the fast path: no dtype, no casting
            else:
                # casting="unsafe": torch's promotion chose ``npdt`` (uint8 tensor * int8 0-dim
                # tensor is uint8, which numpy's "same_kind" refuses)
                r = ufunc(a, b, dtype=npdt, casting="unsafe")
        except OverflowError:
            return kernel(wrap_scalar(a, npdt), wrap_scalar(b, npdt), dtype, out)
        finally:
            _reset_state(token)
        return r if r.__class__ is _ndarray else np.asarray(r)

    kernel.quiet = True
    return takes_bfloat16(kernel)


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


def _numba_arith_call(ufunc, a, b, npdt, out):
    """Large float add/sub/mul/div with numba's threads, or None where the layout doesn't fit."""
    if npdt not in dt.FLOAT_NP:
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


# Note [Quiet floating-point errors]: torch never warns about division by zero, log(0), overflow or
# inf - inf; numpy does unless its error state says "ignore". Every CPU kernel runs with numpy's
# warnings off: the elementwise kernels set the state themselves, every other kernel of the table is
# wrapped once (:func:`quiet_kernels`). np.errstate costs about 1 µs per use (it builds its state
# object each time), as much as the operation itself on small tensors. The state is a context variable
# in numpy 2: setting a prebuilt "ignore" value and back costs about 0.25 µs. Chunks on worker threads run
# in a copy of the caller's context (``flambeau._parallel.run_chunks``), so in its state too. The user's own
# numpy calls keep theirs.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _ERR_STATE
    from numpy._core._ufunc_config import _make_extobj

    _IGNORE_ALL = _make_extobj(all="ignore")
    _set_state, _reset_state = _ERR_STATE.set, _ERR_STATE.reset
except ImportError:  # pragma: no cover - numpy internals moved: the public API (about 1 µs a call)
    _IGNORE_ALL = None

    def _set_state(_):
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def _reset_state(state):
        state.__exit__(None, None, None)


def quiet_kernels(table: dict, device_type: str) -> None:
    """Wrap every ``device_type`` kernel of ``table`` (operator name -> {device type -> kernel}) to run with
    numpy's floating-point warnings off (Note [Quiet floating-point errors]), except those that quiet
    themselves (``kernel.quiet``, the elementwise kernels). Run before the bfloat16 wrapping, which reads the
    kernels' markers: the wrapper keeps them."""
    for row in table.values():
        k = row.get(device_type)
        if k is not None and not getattr(k, "quiet", False):
            row[device_type] = _quiet(k)


def _quiet(fn):
    def run(*args, **kwargs):
        token = _set_state(_IGNORE_ALL)
        try:
            return fn(*args, **kwargs)
        finally:
            _reset_state(token)

    functools.update_wrapper(run, fn)  # (its markers too: takes_bfloat16 ...)
    run.quiet = True
    return run


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

    def work(start, stop):  # (in the caller's numpy error state: run_chunks runs it in a copy of its context)
        args = [x[start:stop] if x.__class__ is _ndarray else x for x in flat_ops]
        ufunc(*args, out=flat_out[start:stop], **kw)

    run_chunks(work, flat_out.size)
    return out


def _bool_kernel(ufunc):
    def kernel(a, b, dtype, out=None):
        npdt = dtype.np
        # torch compares in the promoted dtype: uint8 < (int16 0-dim -1) compares with 255
        if b.__class__ is int and dtype._category == 1:
            lo, hi = _INT_BOUNDS[dtype]
            if not lo <= b <= hi:
                b = wrap_scalar(b, npdt)
        if a.__class__ is _ndarray and a.dtype is not npdt:
            a = a.astype(npdt)
        if b.__class__ is _ndarray and b.dtype is not npdt:
            b = b.astype(npdt)
        if out is not None:
            ufunc(a, b, out=out, casting="unsafe")
            return out
        r = ufunc(a, b)
        return r if r.__class__ is _ndarray else np.asarray(r)

    return takes_bfloat16(kernel)


def unary_kernel(ufunc, *, bool_out: bool = False):
    """A CPU kernel computing unary ``ufunc`` in the requested dtype (see :func:`binary_kernel`)."""

    def kernel(a, dtype, out=None):
        npdt = dtype.np
        if npdt is _BF16:
            return via_compute(kernel, (a,), dtype, out)
        token = _set_state(_IGNORE_ALL)
        try:
            if a.size >= _PAR_MIN and _par_state["threads"] > 1:
                r = _parallel_ufunc(ufunc, (a,), None if bool_out else npdt, out)
                if r is not None:
                    return r
            kw = {} if (bool_out or a.dtype is npdt) else {"dtype": npdt, "casting": "unsafe"}
            if out is not None:
                kw["casting"] = "unsafe"
                kw["out"] = out
            r = ufunc(a, **kw)
        finally:
            _reset_state(token)
        return r if r.__class__ is _ndarray else np.asarray(r)

    kernel.quiet = True
    return takes_bfloat16(kernel)
