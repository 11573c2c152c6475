"""Tensor factories: ``tensor``, ``from_numpy``, ``zeros``, ``ones``, ``full``, ``empty``, ``arange`` ...

Random factories live in ``_random.py``. Every factory takes ``dtype``, ``device`` and
``requires_grad`` keywords as torch's do.
"""

from __future__ import annotations

import numbers

import numpy as np

from flambeau import _dtype as dt
from flambeau._backends import backend
from flambeau._device import CPU, to_device
from flambeau._ops._common import normalize_shape
from flambeau._tensor import Tensor, _wrap

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like",
           "ones_like", "full_like", "empty_like", "arange", "linspace", "eye", "scalar_tensor"]


def _finish(arr: np.ndarray, device, requires_grad: bool) -> Tensor:
    """Wrap a host array as a tensor on ``device`` (copying to the device if it is not the CPU)."""
    if device is None or device is CPU:
        t = _wrap(arr, CPU)
    else:
        device = to_device(device)
        t = _wrap(backend(device.type).from_numpy(np.ascontiguousarray(arr), device), device) \
            if device.type != "cpu" else _wrap(arr, CPU)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_dtype(data) -> dt.dtype:
    """The dtype torch infers for nested Python data: bool, int64 or the default float dtype."""
    kinds = set()

    def visit(x):
        if isinstance(x, Tensor):
            kinds.add(x.dtype)
        elif isinstance(x, (list, tuple)):
            for y in x:
                visit(y)
        elif isinstance(x, np.ndarray):
            kinds.add(dt.from_numpy_dtype(x.dtype))
        else:
            kinds.add(dt.scalar_dtype(x))

    visit(data)
    result = None
    for k in kinds:
        result = k if result is None else dt.promote_types(result, k)
    return result or dt.get_default_dtype()


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists/tuples of numbers, a numpy array or a tensor).

    The dtype is inferred as torch does (Python floats give the default dtype, ints int64) unless given.
    """
    if isinstance(data, Tensor):
        src = data.detach().to(device=device or data.device, dtype=dtype or data.dtype, copy=True)
        return src.requires_grad_(requires_grad) if requires_grad else src
    if isinstance(data, np.ndarray):
        d = dt.from_numpy_dtype(data.dtype) if dtype is None else dt.to_dtype(dtype)
        arr = np.array(data, dtype=d.np, copy=True)
    else:
        if isinstance(data, (str, bytes, dict, set)):
            raise TypeError(f"tensor(): data must be a number, a sequence or an array, got {type(data).__name__}")
        d = _infer_dtype(data) if dtype is None else dt.to_dtype(dtype)
        data = _lists_of_tensors_to_arrays(data)
        try:
            arr = np.array(data, dtype=d.np)
        except ValueError as e:
            raise ValueError(f"tensor(): could not build a tensor from data: {e}") from None
        if arr.dtype == object:
            raise ValueError("tensor(): data has inconsistent lengths along a dimension (ragged nested sequence)")
    return _finish(arr, device, requires_grad)


def _lists_of_tensors_to_arrays(data):
    if isinstance(data, Tensor):
        return data.numpy(force=True)
    if isinstance(data, (list, tuple)):
        return [_lists_of_tensors_to_arrays(x) for x in data]
    return data


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, sharing memory when it already is one (or a CPU numpy array) of that dtype/device."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device)
    if isinstance(data, np.ndarray) and (device is None or to_device(device) is CPU):
        t = from_numpy(data)
        return t if dtype is None else t.to(dtype)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``ndarray`` (no copy; writes are visible both ways)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    d = dt.from_numpy_dtype(ndarray.dtype)
    if any(s < 0 for s in ndarray.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative strides "
            "are not currently supported. (You can probably work around this by making a copy of your array "
            " with array.copy().)"
        )
    if not ndarray.dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order")
    from flambeau._backends.cpu import flat_buffer_of
    from flambeau._storage import Storage

    arr = ndarray.view()  # our own view object: reshaping ours never changes the user's array
    return _wrap(arr, CPU, Storage(flat_buffer_of(ndarray), CPU), d)


def _dtype_or_default(dtype) -> dt.dtype:
    return dt._default[0] if dtype is None else dt.to_dtype(dtype)


def _filled(shape, value, dtype, device, requires_grad) -> Tensor:
    d = _dtype_or_default(dtype)
    dev = CPU if device is None else to_device(device)
    if dev is CPU:
        arr = np.full(shape, value, d.np) if value is not None else np.empty(shape, d.np)
        t = _wrap(arr, CPU, None, d)
    else:
        b = backend(dev.type)
        t = _wrap(b.full(shape, value, d.np, dev), dev, None, d)
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with 0."""
    return _filled(normalize_shape(size), 0, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with 1."""
    return _filled(normalize_shape(size), 1, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    """An uninitialised tensor of ``size``."""
    return _filled(normalize_shape(size), None, dtype, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``; the dtype is inferred from the value if not given."""
    if dtype is None:
        dtype = dt.scalar_dtype(fill_value.item() if isinstance(fill_value, Tensor) else fill_value)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _filled(normalize_shape((size,)), fill_value, dtype, device, requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A 0-dim tensor holding ``s`` (default dtype unless given)."""
    return _filled((), s, dtype, device, requires_grad)


def _like(name, fill):
    def fn(input, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        return _filled(tuple(input.shape), fill, dtype or input.dtype, device or input.device, requires_grad)

    fn.__name__ = name
    fn.__doc__ = f"``{name[:-5]}`` with the shape, dtype and device of ``input``."
    return fn


zeros_like = _like("zeros_like", 0)
ones_like = _like("ones_like", 1)
empty_like = _like("empty_like", None)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None):
    """``full`` with the shape, dtype and device of ``input``."""
    return _filled(tuple(input.shape), fill_value, dtype or input.dtype, device or input.device, requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 for integer arguments."""
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    for name, v in zip(("start", "end", "step"), vals):
        if not isinstance(v, numbers.Real):
            raise TypeError(f"arange(): argument '{name}' must be a number, not {type(v).__name__}")
    start, end, step = vals
    if step == 0:
        raise RuntimeError("arange(): step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange(): upper bound and larger bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step})")
    if dtype is None:
        dtype = dt.int64 if all(isinstance(v, numbers.Integral) for v in vals) else dt.get_default_dtype()
    d = dt.to_dtype(dtype)
    n = max(0, int(np.ceil((end - start) / step)))
    arr = (start + step * np.arange(n, dtype=np.float64 if d.is_floating_point else np.int64)).astype(d.np)
    return _finish(arr, device, requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` values evenly spaced from ``start`` to ``end`` inclusive."""
    if not isinstance(steps, numbers.Integral) or steps < 0:
        raise RuntimeError(f"linspace(): number of steps must be non-negative, got {steps!r}")
    d = _dtype_or_default(dtype)
    arr = np.linspace(start, end, int(steps), dtype=np.float64).astype(d.np)
    return _finish(arr, device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An ``n`` x ``m`` tensor with ones on the diagonal."""
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"eye(): n and m must be non-negative, got n={n}, m={m}")
    return _finish(np.eye(n, m, dtype=_dtype_or_default(dtype).np), device, requires_grad)
