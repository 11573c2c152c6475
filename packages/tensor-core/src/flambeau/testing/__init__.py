"""``flambeau.testing``: :func:`assert_close` and :func:`make_tensor`, as ``torch.testing``.

:func:`assert_close` compares tensors, numbers and (nested) sequences and mappings of them with
torch's rules: default tolerances from the dtype, shape/dtype/device checks first, and on failure an
``AssertionError`` whose message reads like torch's (``Tensor-likes are not close!``, the number of
mismatched elements, the greatest absolute and relative differences and where they are), so test
suites written against ``torch.testing`` keep their meaning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from flambeau import _dtype as dt
from flambeau._device import to_device
from flambeau._factories import tensor
from flambeau._random import default_generator
from flambeau._tensor import Tensor

__all__ = ["assert_close", "make_tensor", "default_tolerances"]

# (rtol, atol) per floating dtype name, torch's; every other dtype compares exactly.
_PRECISIONS = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex32": (1e-3, 1e-5), "complex64": (1.3e-6, 1e-5),
               "complex128": (1e-7, 1e-7)}


class _Mismatch(Exception):
    """A failed comparison: the exception type to raise and torch's message."""

    def __init__(self, kind: type, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def default_tolerances(*dtypes) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing values of ``dtypes``: the largest of each dtype's defaults."""
    pairs = [_PRECISIONS.get(getattr(d, "name", str(d)), (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: str | Callable[[str], str] | None = None) -> None:
    """Assert that ``actual`` and ``expected`` are close: ``|actual - expected| <= atol + rtol * |expected|``.

    Args:
        actual, expected: tensors, numpy arrays, Python numbers, None, or sequences and mappings of
            them (compared item by item; the message then names the failing item).
        rtol, atol: the tolerances; both or neither. Default, per dtype (the larger of both sides'):
            float16 ``(1e-3, 1e-5)``, float32 ``(1.3e-6, 1e-5)``, float64 ``(1e-7, 1e-7)``, bfloat16
            ``(1.6e-2, 1e-5)``, complex as their float parts, integers and bool ``(0, 0)`` (equal).
        equal_nan: whether two NaNs are equal.
        check_device, check_dtype: require the same device / dtype (else both are compared in their
            promoted dtype).
        check_stride: require the same strides.
        msg: replaces the message, or (a callable) maps torch's message to the one raised.

    Raises:
        AssertionError: the values (or shape, dtype, device, lengths, keys) differ.
        ValueError: only one of ``rtol`` and ``atol`` is given.
        TypeError: the two inputs cannot be compared (a tensor and a list, ...).
    """
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, "
                         f"but got no {'rtol' if rtol is None else 'atol'}.")
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
                   check_stride=check_stride)
    try:
        _compare(actual, expected, (), options)
    except _Mismatch as e:
        text = e.message
        if msg is not None:
            text = msg(text) if callable(msg) else msg
        raise e.kind(text) from None


def _compare(actual, expected, where: tuple, options: dict) -> None:
    try:
        _compare_leaf_or_container(actual, expected, where, options)
    except _Mismatch as e:
        if where and e.kind is AssertionError and "The failure occurred for item" not in e.message:
            item = "".join(f"[{k!r}]" for k in where)
            raise _Mismatch(e.kind, f"{e.message}\n\nThe failure occurred for item {item}") from None
        raise


def _is_tensor_like(x) -> bool:
    return isinstance(x, (Tensor, np.ndarray))


def _compare_leaf_or_container(actual, expected, where, options) -> None:
    if actual is None and expected is None:
        return
    if _is_tensor_like(actual) or _is_tensor_like(expected):
        if type(actual) is not type(expected):
            raise _Mismatch(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} "
                                       f"and {type(expected)}.")
        _compare_tensors(actual, expected, options)
        return
    if isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
        if bool(actual) is not bool(expected):
            raise _Mismatch(AssertionError, f"Booleans mismatch: {actual} is not {expected}")
        return
    if _is_number(actual) and _is_number(expected):
        _compare_numbers(actual, expected, options)
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            missing = sorted(set(expected) - set(actual), key=repr)
            extra = sorted(set(actual) - set(expected), key=repr)
            raise _Mismatch(AssertionError, "The keys of the mappings do not match:\n"
                                            f"Missing keys in the actual mapping: {missing}\n"
                                            f"Additional keys in the actual mapping: {extra}")
        for key in expected:
            _compare(actual[key], expected[key], (*where, key), options)
        return
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Mismatch(AssertionError,
                            f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for i, (a, b) in enumerate(zip(actual, expected)):
            _compare(a, b, (*where, i), options)
        return
    raise _Mismatch(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} "
                               f"and {type(expected)}.")


def _is_number(x) -> bool:
    return isinstance(x, (int, float, complex, np.number)) and not isinstance(x, bool)


def _is_sequence(x) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, str)


def _compare_numbers(actual, expected, options) -> None:
    if type(actual) is not type(expected) and options["check_dtype"]:
        raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.")
    rtol, atol = options["rtol"], options["atol"]
    if rtol is None:
        floating = isinstance(actual, (float, complex)) or isinstance(expected, (float, complex))
        rtol, atol = _PRECISIONS["float64"] if floating else (0.0, 0.0)
    if _close(actual, expected, rtol, atol, options["equal_nan"]):
        return
    abs_diff = abs(actual - expected)
    rel_diff = math.inf if expected == 0 else abs_diff / abs(expected)
    raise _Mismatch(AssertionError, _mismatch_message("Scalars", f"Expected {expected} but got {actual}.",
                                                      abs_diff, None, rel_diff, None, rtol, atol))


def _close(a, b, rtol, atol, equal_nan) -> bool:
    if a == b:
        return True
    if math.isnan(abs(a)) or math.isnan(abs(b)):
        return equal_nan and math.isnan(abs(a)) and math.isnan(abs(b))
    return abs(a - b) <= atol + rtol * abs(b)


def _meta(x) -> tuple:
    """``(array, dtype, device)`` of a tensor or numpy array (the array on the host)."""
    if isinstance(x, Tensor):
        return x.numpy(force=True), x.dtype, x.device
    return x, dt._BY_NP.get(x.dtype, x.dtype), "cpu"


def _compare_tensors(actual, expected, options) -> None:
    a, a_dtype, a_dev = _meta(actual)
    b, b_dtype, b_dev = _meta(expected)
    shape = getattr(actual, "shape", None)
    if a.shape != b.shape:
        shape_b = getattr(expected, "shape", None)
        raise _Mismatch(AssertionError, f"The values for attribute 'shape' do not match: {shape} != {shape_b}.")
    if options["check_device"] and a_dev != b_dev:
        raise _Mismatch(AssertionError, f"The values for attribute 'device' do not match: {a_dev} != {b_dev}.")
    if options["check_dtype"] and a_dtype is not b_dtype:
        raise _Mismatch(AssertionError, f"The values for attribute 'dtype' do not match: {a_dtype} != {b_dtype}.")
    if options["check_stride"] and a.strides != b.strides:
        item_a, item_b = a.dtype.itemsize, b.dtype.itemsize
        raise _Mismatch(AssertionError, "The values for attribute 'stride()' do not match: "
                                        f"{tuple(s // item_a for s in a.strides)} != "
                                        f"{tuple(s // item_b for s in b.strides)}.")
    rtol, atol = options["rtol"], options["atol"]
    if rtol is None:
        rtol, atol = default_tolerances(a_dtype, b_dtype)
    common = np.promote_types(a.dtype, b.dtype)
    if isinstance(a_dtype, dt.dtype) and isinstance(b_dtype, dt.dtype):
        common = dt.promote_types(a_dtype, b_dtype).np  # torch's promotion, not numpy's
    a, b = a.astype(common, copy=False), b.astype(common, copy=False)
    matches = _matches(a, b, rtol, atol, options["equal_nan"])
    if matches.all():
        return
    if a.ndim == 0:
        raise _Mismatch(AssertionError, _scalar_tensor_message(a.item(), b.item(), rtol, atol))
    raise _Mismatch(AssertionError, _tensor_message(a, b, matches, rtol, atol))


def _matches(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """``isclose`` as torch's: exact for bool and integers, ``|a - b| <= atol + rtol * |b|`` for floats."""
    if a.dtype.kind in "biu" or (rtol == 0 and atol == 0):
        eq = a == b
        if equal_nan and a.dtype.kind in "fc":
            eq |= np.isnan(a) & np.isnan(b)
        return eq
    with np.errstate(all="ignore"):
        return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _scalar_tensor_message(actual, expected, rtol, atol) -> str:
    with np.errstate(all="ignore"):
        abs_diff = abs(actual - expected)
        rel_diff = math.inf if expected == 0 else abs_diff / abs(expected)
    return _mismatch_message("Scalars", f"Expected {expected} but got {actual}.", abs_diff, None, rel_diff, None,
                             rtol, atol)


def _tensor_message(a: np.ndarray, b: np.ndarray, matches: np.ndarray, rtol: float, atol: float) -> str:
    total = matches.size
    mismatched = total - int(matches.sum())
    extra = f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})"
    af, bf, mf = a.reshape(-1), b.reshape(-1), matches.reshape(-1)
    if af.dtype.kind in "biu":  # as torch: integers in int64, so differences do not wrap
        af, bf = af.astype(np.int64), bf.astype(np.int64)
    with np.errstate(all="ignore"):
        abs_diff = np.abs(af - bf)
        abs_diff[mf] = 0
        rel_diff = abs_diff / np.abs(bf)
    rel_diff[mf] = 0
    i_abs, i_rel = _argmax_nan_first(abs_diff), _argmax_nan_first(rel_diff)
    return _mismatch_message("Tensor-likes", extra, abs_diff[i_abs].item(), np.unravel_index(i_abs, a.shape),
                             rel_diff[i_rel].item(), np.unravel_index(i_rel, a.shape), rtol, atol)


def _argmax_nan_first(x: np.ndarray) -> int:
    """torch.max's index: the first NaN if any, else the first maximum."""
    if x.dtype.kind in "fc":
        nan = np.flatnonzero(np.isnan(x))
        if nan.size:
            return int(nan[0])
    return int(np.argmax(x))


def _mismatch_message(identifier, extra, abs_diff, abs_idx, rel_diff, rel_idx, rtol, atol) -> str:
    """torch's message: header, ``extra``, and the greatest absolute and relative differences."""
    equality = rtol == 0 and atol == 0

    def line(kind, diff, idx, tol):
        text = f"{kind.title()} difference: {diff}" if idx is None else \
            f"Greatest {kind} difference: {diff} at index {tuple(int(i) for i in idx)}"
        return text + ("" if equality else f" (up to {tol} allowed)") + "\n"

    text = f"{identifier} are not {'equal' if equality else 'close'}!\n\n{extra.strip()}\n"
    text += line("absolute", abs_diff, abs_idx, atol) + line("relative", rel_diff, rel_idx, rtol)
    return text.strip()


def make_tensor(*shape, dtype, device, low: float | None = None, high: float | None = None,
                requires_grad: bool = False, noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A tensor of ``shape`` filled with random values from ``[low, high)``, as ``torch.testing.make_tensor``.

    ``shape``: ints or one sequence. Defaults: floating dtypes ``[-9, 9)``, signed integers
    ``[-9, 10)``, unsigned ``[0, 10)``, bool ``[0, 2)``; ``low`` and ``high`` are clamped to the
    dtype's range (integer bounds rounded up). ``exclude_zero`` replaces zeros by the dtype's
    smallest normal number (1 for integers); ``noncontiguous`` returns every other element of a
    twice as wide tensor (a strided view). Draws from the default generator (``flambeau.manual_seed``
    makes it reproducible).

    Raises:
        ValueError: ``low >= high``, a NaN bound, an interval outside the dtype's range, or
            ``requires_grad`` for an integer or bool dtype.
    """
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    d = dt.to_dtype(dtype)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
                         f"noncontiguous={noncontiguous} and memory_format={memory_format}")
    if requires_grad and not d.is_floating_point and not d.is_complex:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral dtypes, but got dtype={d}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:  # twice as wide, so the view's neighbours differ
        shape = (*shape[:-1], 2 * shape[-1])
    rng = default_generator._np
    if d.is_floating_point or d.is_complex:
        info = np.finfo(d.np)
        lo, hi = _bounds(low, high, -9, 9, float(info.min), float(info.max), d, integral=False)
        if d.is_complex:
            arr = rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)
        else:
            arr = rng.uniform(lo, hi, shape)
    else:
        if d is dt.bool:
            lo, hi = _bounds(low, high, 0, 2, 0, 2, d, integral=True)
        else:
            info = np.iinfo(d.np)
            lo, hi = _bounds(low, high, -9, 10, int(info.min), int(info.max) + (d is not dt.int64), d,
                             integral=True)
        arr = rng.integers(lo, hi, shape)
    t = tensor(np.asarray(arr).astype(d.np), dtype=d, device=to_device(device))
    if noncontiguous:
        t = t[..., 1::2]  # offset by one, to catch offset bugs too (as torch)
    if exclude_zero:
        zero = t == 0
        if bool(zero.any()):
            t[zero] = 1 if not (d.is_floating_point or d.is_complex) else float(np.finfo(d.np).tiny)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _bounds(low, high, default_low, default_high, lowest, highest, d, *, integral: bool) -> tuple:
    """torch's ``modify_low_high``: defaults, checks, clamping to ``[lowest, highest)``, integers rounded up."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low >= high and not (low == high and not integral):
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    if high < lowest or low >= highest:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), but {d} only "
                         f"supports [{lowest}, {highest})")
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    return (math.ceil(low), math.ceil(high)) if integral else (low, high)
