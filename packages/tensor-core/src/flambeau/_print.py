"""Tensor repr, formatted as torch formats it, and :func:`set_printoptions`.

The rules are torch's (``torch/_tensor_str.py``), applied to a host numpy copy of the data:

* one formatter per tensor, built from the (summarised) values: integer-valued floats print as
  ``1.``, other floats with ``precision`` decimals, and scientific notation is used when the
  non-zero finite magnitudes span more than 1000x, exceed 1e8 or fall below 1e-4;
* every element is right-aligned to the widest one; complex elements print as ``real+imagj`` with
  one formatter for the real parts and one for the imaginary parts; bfloat16 prints its values
  (exactly) as floats;
* tensors of more than ``threshold`` elements are summarised: ``edgeitems`` entries at each end
  of every dimension around ``...``;
* suffixes: ``device='cuda:0'`` off the CPU, ``dtype=`` unless the dtype is the default float
  dtype, the default complex dtype, int64 or bool, ``size=`` for empty tensors that are not 1-d, ``grad_fn=<...>`` or
  ``requires_grad=True``; they wrap onto a new line past ``linewidth``.

Printing a CUDA tensor copies it to the host (a synchronising read, as in torch).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from flambeau import _dtype as dt

__all__ = ["set_printoptions"]


class _PrintOptions:
    __slots__ = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")

    def __init__(self):
        self.precision, self.threshold, self.edgeitems, self.linewidth = 4, 1000, 3, 80
        self.sci_mode: bool | None = None


PRINT_OPTS = _PrintOptions()

_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print (as ``torch.set_printoptions``; options left as None keep their value).

    Args:
        precision: digits after the decimal point of floating values (default 4).
        threshold: number of elements above which a tensor is summarised with ``...`` (default 1000).
        edgeitems: entries shown at each end of a dimension when summarising (default 3).
        linewidth: characters per line before wrapping (default 80).
        profile: ``'default'``, ``'short'`` (precision 2, edgeitems 2) or ``'full'`` (never
            summarise); applied before the other arguments.
        sci_mode: True or False forces or forbids scientific notation; None (the default, and
            the value whenever the argument is omitted) chooses automatically.
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions(): profile must be one of {', '.join(_PROFILES)}, got {profile!r}")
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = _PROFILES[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    """The current print options, as keyword arguments for :func:`set_printoptions`."""
    return {name: getattr(PRINT_OPTS, name) for name in _PrintOptions.__slots__}


@contextlib.contextmanager
def printoptions(**kwargs):
    """Context manager: print with ``set_printoptions(**kwargs)`` inside the block, restore after."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """Formats the elements of one tensor to a common width (torch's ``_Formatter``)."""

    def __init__(self, values: np.ndarray):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = PRINT_OPTS.precision
        if not self.floating:
            if values.size:
                if values.dtype.kind == "b":
                    self.max_width = 5 if not values.all() else 4
                else:
                    self.max_width = max(len(str(int(values.min()))), len(str(int(values.max()))))
            return
        v = values.astype(np.float64).ravel()
        v = v[np.isfinite(v) & (v != 0)]
        if v.size == 0:
            return
        a = np.abs(v)
        vmin, vmax = float(a.min()), float(a.max())
        self.int_mode = bool(np.all(v == np.ceil(v)))
        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = vmax / vmin > 1000.0 or vmax > 1.0e8 or vmin < 1.0e-4
        else:
            self.sci_mode = PRINT_OPTS.sci_mode
        vals = v.tolist()
        if self.sci_mode:
            self.max_width = max(len(f"{x:.{p}e}") for x in vals)
        elif self.int_mode:
            self.max_width = max(len(f"{x:.0f}") + 1 for x in vals)
        else:
            self.max_width = max(len(f"{x:.{p}f}") for x in vals)

    def format(self, value) -> str:
        if self.floating:
            if self.sci_mode:
                s = f"{value:{self.max_width}.{PRINT_OPTS.precision}e}"
            elif self.int_mode:
                s = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    s += "."
            else:
                s = f"{value:.{PRINT_OPTS.precision}f}"
        else:
            s = f"{value}"
        return (self.max_width - len(s)) * " " + s


class _ComplexFormatter:
    """Formats complex elements as torch does: the real part padded, then the signed imaginary part and ``j``."""

    def __init__(self, values: np.ndarray):
        self.real, self.imag = _Formatter(values.real), _Formatter(values.imag)
        self.max_width = self.real.max_width + self.imag.max_width + 1  # the "j"

    def format(self, value) -> str:
        real = self.real.format(value.real)
        imag = (self.imag.format(value.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements that a summarised print shows (``edgeitems`` at each end of every dimension)."""
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0 or (a.ndim == 1 and not e):  # torch: a[:0] + a[-0:] is the whole vector
        return a
    if not e:
        return a[(slice(0, 0),) * a.ndim]
    for axis in range(a.ndim):
        if a.shape[axis] > 2 * e:
            idx = np.r_[0:e, a.shape[axis] - e:a.shape[axis]]
            a = np.take(a, idx, axis=axis)
    return a


def _vector_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / (fmt.max_width + 2)))
    e = PRINT_OPTS.edgeitems
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = [fmt.format(x) for x in a[:e].tolist()] + [" ..."] + [fmt.format(x) for x in a[-e:].tolist()]
    else:
        data = [fmt.format(x) for x in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    n = a.shape[0]
    if summarize and n > 2 * e:
        slices = ([_array_str(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."]
                  + [_array_str(a[i], indent + 1, summarize, fmt) for i in range(n - e, n)])
    else:
        slices = [_array_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(a: np.ndarray, indent: int) -> str:
    if a.size == 0:
        return "[]"
    summarize = a.size > PRINT_OPTS.threshold
    fmt = (_ComplexFormatter if a.dtype.kind == "c" else _Formatter)(_summarized(a) if summarize else a)
    return _array_str(a, indent, summarize, fmt)


def _add_suffixes(body: str, suffixes: list, indent: int) -> str:
    parts = [body]
    last_line_len = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _grad_fn_name(grad_fn) -> str:
    name = getattr(grad_fn, "name", None)
    if callable(name):
        return str(name()).rsplit("::", 1)[-1]
    return type(grad_fn).__name__


def tensor_repr(t) -> str:
    """``repr(t)`` as torch writes it, with ``flambeau.`` in place of ``torch.`` in dtypes."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    default = dt.get_default_dtype()
    arr = t.numpy(force=True)
    if t.dtype is dt.bfloat16:
        arr = arr.astype(np.float32)  # exact; numpy formats no ml_dtypes scalars
    if arr.size == 0:
        if arr.ndim != 1:
            suffixes.append(f"size={tuple(arr.shape)}")
        if t.dtype is not default:
            suffixes.append(f"dtype={t.dtype}")
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(arr.shape)}")
        if t.dtype not in (default, dt.get_default_complex_dtype(), dt.int64, dt.bool):
            suffixes.append(f"dtype={t.dtype}")
        body = _tensor_str(arr, indent)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{_grad_fn_name(t.grad_fn)}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
