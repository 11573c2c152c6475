"""bfloat16 through the float32 kernels, for every device: widen the operands, compute, round once.

Note [bfloat16 through float32]
    Neither numpy nor numba computes in bfloat16: numpy runs ``ml_dtypes.bfloat16`` arrays through
    ml_dtypes' own loops, which know nothing of NaN where numpy's float algorithms ask (sorting,
    ``isnan``, the ``nan*`` reductions treat its kind ``'V'`` as not floating) and round after every
    step; numba types no bfloat16 array at all, on the CPU or on a GPU. So a kernel that does not
    take bfloat16 itself is wrapped by :func:`via_float32`: its bfloat16 array arguments are widened
    to float32 (exact), a bfloat16 dtype argument becomes float32, the float32 kernel runs, and its
    float32 results are rounded to bfloat16 once: float32 arithmetic and accumulation, one rounding
    per operator, as torch's CPU does for bfloat16 (Note [Compute dtype] in ``flambeau._dtype``).
    Each device says how to widen and narrow its arrays (:class:`Conversions`); each device's kernel
    package wraps its table (:func:`wrap_kernels`) except the operators whose kernels take bfloat16
    themselves (elementwise kernels computing through ``dtype.compute``, copies moving its bits).

    Which results are narrowed: those of float32 dtype when the kernel was given a bfloat16 dtype
    argument (``cat(arrays, dim, np_dtype)``, ``sum(..., dtype)``), or was given no dtype argument and
    a bfloat16 array (``mm``, ``softmax``, ``convolution``), except a result of the shape of a float32
    array the caller passed: mixed-precision norms take bfloat16 activations with float32
    parameters, and torch gives their gradients (and the saved statistics) in float32. An argument a
    kernel writes (parameters named ``out`` or ``dst``: ``copy_``, ``scatter``, ``normal_``,
    ``out=``; or named by ``writes``) is widened, written by the kernel, and rounded back into the
    caller's array. A kernel that answers with a view of a widened operand moves data without
    arithmetic: it is called again on the bfloat16 operands themselves, so the view is of the
    caller's array.

    Costs: a pass over each bfloat16 operand and one over each result; calls without bfloat16 pay a
    scan of their arguments (about 0.2 us), so the cheap hot kernels take bfloat16 natively instead.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from flambeau import _dtype as _fdt

__all__ = ["BF16", "WRITTEN", "Conversions", "HOST", "takes_bfloat16", "via_float32", "wrap_kernels"]

BF16 = np.dtype(_fdt.bfloat16.np)
_BF16_T = BF16.type
_F32 = np.dtype(np.float32)
_FL_BF16, _FL_F32, _FL_DTYPE = _fdt.bfloat16, _fdt.float32, _fdt.dtype
WRITTEN = ("out", "dst")  # parameter names of the arguments a kernel writes (Note [bfloat16 through float32])


class Conversions(NamedTuple):
    """How one device's kernels see their arrays, for :func:`via_float32`.

    ``is_array(x)``: whether ``x`` is an array of the device; ``widen(x)``: a new float32 array
    holding bfloat16 array ``x``'s values; ``narrow(x, out=None)``: float32 array ``x`` rounded to bfloat16,
    new or into ``out`` (``x`` broadcasts to it); ``views(r, arrays)``: whether result ``r`` is a view
    of one of ``arrays``.
    """

    is_array: Callable
    widen: Callable
    narrow: Callable
    views: Callable


def _is_bf16_dtype(v) -> bool:
    return v is _FL_BF16 or v is BF16 or v is _BF16_T  # numpy dtypes are singletons


_PLAIN = frozenset({int, float, bool, str, type(None)})  # what most kernel arguments are: nothing to look into
_DTYPED: set = set()  # classes seen carrying a numpy ``.dtype`` (device and host arrays, numpy scalars, flat views)


def _mentions_bfloat16(values) -> bool:
    for v in values:
        c = v.__class__
        if c in _PLAIN:
            continue
        if c in _DTYPED:  # the common case (arrays): one attribute to look at
            if getattr(v, "dtype", None) is BF16:
                return True
            continue
        if c is list or c is tuple:
            for x in v:  # most are ints (strides, paddings, shapes): no recursive call for those
                if x.__class__ not in _PLAIN:
                    if _mentions_bfloat16(v):
                        return True
                    break
            continue
        if v is _FL_BF16 or v is BF16 or v is _BF16_T:  # the dtype, as a kernel may be handed it
            return True
        d = getattr(v, "dtype", None)  # an array or scalar of any device
        if d is BF16:
            return True
        if isinstance(d, np.dtype) and not isinstance(v, type):
            _DTYPED.add(c)
    return False


class _Widening:
    """One call's widened arguments and what to do with its results (Note [bfloat16 through float32])."""

    __slots__ = ("conv", "saw_array", "bf16_dtype", "other_dtype", "written", "temps", "float32_shapes")

    def __init__(self, conv: Conversions):
        self.conv = conv
        self.saw_array = self.bf16_dtype = self.other_dtype = False
        self.written: list = []  # (float32 temporary, the caller's bfloat16 array)
        self.temps: list = []  # every widened operand
        self.float32_shapes: set = set()  # shapes of the float32 arrays the caller passed

    def arg(self, v, written: bool = False):
        c = v.__class__
        if self.conv.is_array(v):
            if v.dtype != BF16:
                if v.dtype == _F32:
                    self.float32_shapes.add(tuple(v.shape))
                return v
            self.saw_array = True
            w = self.conv.widen(v)
            self.temps.append(w)
            if written:
                self.written.append((w, v))
            return w
        if _is_bf16_dtype(v):
            self.bf16_dtype = True
            return _FL_F32 if v is _FL_BF16 else _F32
        if c is _FL_DTYPE or isinstance(v, np.dtype) or c is type and issubclass(v, np.generic):
            self.other_dtype = True
            return v
        if c is list or c is tuple:
            return c(self.arg(x) for x in v)
        if isinstance(v, (np.ndarray, np.generic)) and v.dtype is BF16:  # a host operand of a device kernel
            self.saw_array = True
            return v.astype(_F32)
        return v

    def result(self, r):
        for w, orig in self.written:
            if r is w:
                return orig
        if r.__class__ is np.float32 or self.conv.is_array(r):
            if r.dtype != _F32 or tuple(r.shape) in self.float32_shapes:
                return r
            if not (self.bf16_dtype or (self.saw_array and not self.other_dtype)):
                return r
            return self.conv.narrow(r) if r.__class__ is not np.float32 else _BF16_T(r)
        if r.__class__ in (list, tuple):
            return r.__class__(self.result(x) for x in r)
        return r

    def viewed(self, r) -> bool:
        if r.__class__ in (list, tuple):
            return any(self.viewed(x) for x in r)
        return self.conv.is_array(r) and self.conv.views(r, self.temps)


def via_float32(fn, conv: Conversions, writes: tuple = WRITTEN):
    """Kernel ``fn`` made to take bfloat16 by computing in float32 (Note [bfloat16 through float32])
    on the device whose arrays ``conv`` converts; calls without bfloat16 arrays or dtypes go straight
    to ``fn``. ``writes``: the names of the parameters whose arrays ``fn`` writes in place."""
    written_at: list = []  # positions of the written parameters, read on the first bfloat16 call (not at import)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not (_mentions_bfloat16(args) or kwargs and _mentions_bfloat16(kwargs.values())):
            return fn(*args, **kwargs)
        if not written_at:
            params = inspect.signature(fn).parameters.values()
            written_at.append({i for i, p in enumerate(params) if p.name in writes and p.kind is not p.KEYWORD_ONLY})
        w = _Widening(conv)
        wargs = [w.arg(a, i in written_at[0]) for i, a in enumerate(args)]
        wkw = {k: w.arg(v, k in writes) for k, v in kwargs.items()}
        r = fn(*wargs, **wkw)
        if w.temps and not w.written and w.viewed(r):  # data movement: on the caller's arrays
            return fn(*args, **kwargs)
        for tmp, orig in w.written:
            conv.narrow(tmp, out=orig)
        return w.result(r)

    run.via_float32 = fn
    return run


def takes_bfloat16(fn):
    """Mark kernel ``fn`` as taking bfloat16 itself (computing through ``dtype.compute``, or moving
    its bits): :func:`wrap_kernels` leaves it as it is, and calls pay no scan."""
    fn.takes_bfloat16 = True
    return fn


def wrap_kernels(table: dict, device_type: str, conv: Conversions) -> None:
    """Wrap every ``device_type`` kernel of ``table`` (operator name -> {device type -> kernel}) with
    :func:`via_float32`, except those marked with :func:`takes_bfloat16`."""
    for row in table.values():
        k = row.get(device_type)
        if k is not None and not hasattr(k, "takes_bfloat16") and not hasattr(k, "via_float32"):
            row[device_type] = via_float32(k, conv)


# --- host (numpy) arrays ----------------------------------------------------------------------------------
def _host_narrow(x, out=None):
    if out is None:
        return x.astype(BF16)  # ml_dtypes rounds to nearest even, NaN kept
    np.copyto(out, x, casting="unsafe")
    return out


def _host_views(r, arrays) -> bool:
    base = r.base
    while base is not None:
        if any(base is a for a in arrays):
            return True
        base = base.base if isinstance(base, np.ndarray) else None
    return False


HOST = Conversions(lambda x: x.__class__ is np.ndarray, lambda x: x.astype(_F32), _host_narrow, _host_views)
