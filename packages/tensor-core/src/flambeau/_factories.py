"""Tensor factories: ``tensor``, ``as_tensor``, ``from_numpy``, ``zeros``, ``ones``, ``full``, ``arange`` ...

Every factory takes ``dtype``, ``device`` and ``requires_grad`` keywords as torch's do. Data is
built on the host with numpy; a factory for another device hands the host array to that device's
backend (``backend(device.type).from_numpy(array, device)``), and the constant-filled factories
(``zeros``, ``ones``, ``full``, ``empty``) call ``backend(device.type).full(shape, value,
np_dtype, device)`` so that nothing crosses the bus. Random factories live in ``_random.py``.

``set_printoptions`` (``_print.py``) is re-exported from here so that ``flambeau/__init__.py``
picks it up with the factories. Tensor's own factory methods (``Tensor(data)``, ``new_tensor``,
``new_zeros`` ...) are bound onto it at the end of this module (Note [Tensor methods from the layers
above] in ``_tensor.py``).
"""

from __future__ import annotations

import collections.abc
import numbers
import warnings

import numpy as np

from flambeau import _dtype as dt
from flambeau import _sharing  # noqa: F401 - binds Tensor.share_memory_ (Note [Tensor methods from the layers above])
from flambeau._backends import backend
from flambeau._backends.cpu import flat_buffer_of
from flambeau._default_device import DEFAULT as _DEFAULT_DEVICE
from flambeau._device import CPU, to_device
from flambeau._memory_format import like_layout
from flambeau._print import set_printoptions
from flambeau._size import normalize_shape
from flambeau._storage import Storage, allocation_error
from flambeau._tensor import Tensor, _wrap
from flambeau._value_checks import check_fits

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "frombuffer", "zeros", "ones", "full", "empty",
           "empty_strided", "zeros_like", "ones_like", "full_like", "empty_like", "arange", "linspace", "logspace",
           "eye", "scalar_tensor", "tril_indices", "triu_indices", "set_printoptions"]


def _finish(arr: np.ndarray, device, requires_grad: bool) -> Tensor:
    """Wrap host array ``arr`` as a tensor on ``device`` (copied to the device if not the CPU)."""
    dev = _DEFAULT_DEVICE[0] if device is None else to_device(device)
    if dev is CPU:
        t = _wrap(arr, CPU)
    else:
        host = arr if arr.flags.c_contiguous else arr.copy(order="C")  # np.ascontiguousarray would make 0-d 1-d
        t = _wrap(backend(dev.type).from_numpy(host, dev), dev, None, dt._BY_NP[arr.dtype])
    if requires_grad:
        t.requires_grad_(True)
    return t


# --- tensor(data): dtype inference and shape checks -----------------------------------------------
# Note [Inferring the dtype of nested data]
# torch gives Python bools bool, Python ints int64 and Python floats the default dtype, while numpy
# scalars, numpy arrays and 0-dim tensors inside the data keep their own dtype; the result is the
# promotion of all of them (so [1, 2.5] is float32 and [np.float64(1), 2] is float64). We scan the
# nested sequences once in Python, checking that they are rectangular (torch's "expected sequence of
# length n at dim d" error) and collecting the *types* of the leaves of each innermost sequence with
# one C-speed ``set(map(type, seq))``; numpy then builds the array.

_PY_SCALARS = {bool: 0, int: 1, float: 2, complex: 3}


def _leaf_dtype(tp) -> dt.dtype:
    """The dtype of a leaf of type ``tp`` (Note [Inferring the dtype of nested data])."""
    if tp is bool:
        return dt.bool
    if tp is int:
        return dt.int64
    if tp is float:
        return dt.get_default_dtype()
    if tp is complex:
        return dt.get_default_complex_dtype()
    if issubclass(tp, np.generic):
        if issubclass(tp, (np.str_, np.bytes_, np.object_)) or np.dtype(tp) not in dt._BY_NP:
            raise TypeError(f"tensor(): can't convert numpy scalar of type numpy.{tp.__name__}; supported types are "
                            "float64, float32, float16, bfloat16, complex64, complex128, int64, int32, int16, int8, "
                            "uint8 and bool")
        return dt.from_numpy_dtype(np.dtype(tp))
    if issubclass(tp, complex):
        return dt.get_default_complex_dtype()
    if issubclass(tp, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{tp.__name__}'")
    if issubclass(tp, bool):
        return dt.bool
    if issubclass(tp, numbers.Integral):
        return dt.int64
    if issubclass(tp, numbers.Real):
        return dt.get_default_dtype()
    raise RuntimeError(f"Could not infer dtype of {tp.__name__}")


def _is_seq(x) -> bool:
    """Whether ``x`` is nested data to read element by element: any Sequence but strings and bytes
    (a ``collections.deque``, a ``range``, a user's Sequence class), as torch's ``tensor()`` reads it."""
    return isinstance(x, (list, tuple, range)) or (
        isinstance(x, collections.abc.Sequence) and not isinstance(x, (str, bytes, bytearray)))


def _scan(seq, dim: int, shape: list, dtypes: set, leaf_types: set) -> None:
    """Check that nested ``seq`` at depth ``dim`` is rectangular; collect leaf types and dtypes."""
    n = len(seq)
    if dim == len(shape):
        shape.append(n)
    elif shape[dim] != n:
        raise ValueError(f"expected sequence of length {shape[dim]} at dim {dim} (got {n})")
    if n == 0:
        return
    first = seq[0]
    if _is_seq(first):
        for x in seq:
            if not _is_seq(x):
                raise TypeError(f"tensor(): expected a sequence at dim {dim + 1}, got {type(x).__name__} "
                                "(nested data must be rectangular)")
            _scan(x, dim + 1, shape, dtypes, leaf_types)
        return
    types = set(map(type, seq))
    if types.issubset(_PY_SCALARS):
        leaf_types.update(types)
        return
    for x in seq:
        if _is_seq(x):
            raise TypeError(f"tensor(): expected a number at dim {dim + 1}, got a sequence "
                            "(nested data must be rectangular)")
        if isinstance(x, (np.ndarray, Tensor)) and x.ndim > 0:
            sub = tuple(x.shape)
            if dim + 1 == len(shape):
                shape.extend(sub)
            elif tuple(shape[dim + 1:]) != sub:
                raise ValueError(f"expected sequence of shape {tuple(shape[dim + 1:])} at dim {dim + 1} "
                                 f"(got {sub})")
            dtypes.add(x.dtype if isinstance(x, Tensor) else dt.from_numpy_dtype(x.dtype))
        elif isinstance(x, Tensor):
            dtypes.add(x.dtype)
        elif isinstance(x, np.ndarray):
            dtypes.add(dt.from_numpy_dtype(x.dtype))
        else:
            leaf_types.add(type(x))
    if dim + 1 != len(shape) and leaf_types:
        raise ValueError(f"expected sequence of length {shape[dim + 1]} at dim {dim + 1} (got a number)")


def _promote_all(dtypes) -> dt.dtype | None:
    result = None
    for d in dtypes:
        result = d if result is None else dt.promote_types(result, d)
    return result


def _to_host(x):
    """Nested data with tensors replaced by host numpy arrays (for ``np.array``)."""
    if isinstance(x, Tensor):
        return x.numpy(force=True)
    if _is_seq(x):
        return [_to_host(y) for y in x]
    return x


def _from_nested(data, dtype) -> np.ndarray:
    """A host array from (nested) Python data, dtype inferred as torch does unless given."""
    if _is_seq(data) and not isinstance(data, (list, tuple)):
        data = list(data)
    if _is_seq(data):
        shape: list = []
        dtypes: set = set()
        leaf_types: set = set()
        _scan(data, 0, shape, dtypes, leaf_types)
        has_arrays = bool(dtypes)
    else:
        leaf_types, dtypes, has_arrays = {type(data)}, set(), False
    if dtype is None:
        dtypes.update(_leaf_dtype(tp) for tp in leaf_types)
        d = _promote_all(dtypes) or dt.get_default_dtype()
    else:
        for tp in leaf_types:  # still reject strings, None ...
            _leaf_dtype(tp)
        d = dt.to_dtype(dtype)
        if not d.is_complex and any(issubclass(tp, (complex, np.complexfloating)) for tp in leaf_types):
            raise TypeError("tensor(): must be real number, not complex (give a complex dtype)")
    if has_arrays:
        data = _to_host(data)
    try:
        arr = np.array(data)
    except OverflowError:
        raise ValueError("Overflow when unpacking long long") from None
    if arr.dtype == object or (arr.dtype == np.uint64 and not has_arrays):
        raise ValueError("Overflow when unpacking long long")
    if dtype is not None:
        check_fits(arr, d)  # (NaN or 300 into an integer dtype: numpy's cast made a value up)
    return arr.astype(d.np, copy=False)


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data``.

    ``data`` is a number, a (nested) list/tuple of numbers, numpy scalars, numpy arrays or 0-dim
    tensors, a numpy array, or a tensor. The shape is that of the nesting (which must be
    rectangular); the dtype is inferred as torch does unless given: Python bools give ``bool``,
    ints ``int64``, floats the default dtype, and numpy values and tensors keep their own dtype,
    all promoted together. ``tensor(a_tensor)`` copies (prefer ``t.detach().clone()``).
    """
    if isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
            "sourceTensor.detach().clone().requires_grad_(True), rather than flambeau.tensor(sourceTensor).",
            UserWarning, stacklevel=2)
        src = data.detach().to(device=device or data.device, dtype=dtype or data.dtype, copy=True)
        return src.requires_grad_(True) if requires_grad else src
    if isinstance(data, np.ndarray):
        _check_byte_order(data)
        d = dt.from_numpy_dtype(data.dtype) if dtype is None else dt.to_dtype(dtype)
        arr = np.array(data, dtype=d.np, copy=True)
    elif isinstance(data, (str, bytes, dict, set)) or data is None:
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'") if data is not None \
            else RuntimeError("Could not infer dtype of NoneType")
    elif not _is_seq(data) and not isinstance(data, (numbers.Number, np.generic)) and (
            hasattr(data, "__array__") or hasattr(data, "__array_interface__")):
        return tensor(np.asarray(data), dtype=dtype, device=device, requires_grad=requires_grad)
    else:
        arr = _from_nested(data, dtype)
    return _finish(arr, device, requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, without a copy when possible.

    A tensor of the requested dtype and device is returned as is (else converted with ``.to``);
    a numpy array of a supported dtype becomes a CPU tensor sharing its memory (as
    :func:`from_numpy`), copied only if another dtype or device is asked for; anything else goes
    through :func:`tensor`.
    """
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device)
    if isinstance(data, np.ndarray):
        t = from_numpy(data)
        return t.to(dtype=dtype, device=device)
    return tensor(data, dtype=dtype, device=device)


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None, requires_grad: bool = False) -> Tensor:
    """``obj`` as a tensor (``torch.asarray``): shares memory when it can, unless ``copy=True``.

    ``obj`` may be a tensor, a numpy array, any DLPack producer (a torch tensor ...), an object
    with ``__array__``, a number or nested sequences. With ``copy=None`` memory is shared when the
    dtype and device allow it; ``copy=False`` raises ``ValueError`` where a copy would be needed.
    The result requires grad if ``requires_grad`` is True (an alias of a tensor ``obj`` then,
    leaving ``obj`` itself unchanged).
    """
    from flambeau._interop import from_dlpack

    src = None
    if isinstance(obj, Tensor):
        src = obj
    elif isinstance(obj, np.ndarray):
        if any(st < 0 for st in obj.strides) or not obj.dtype.isnative:
            if copy is False:
                raise ValueError("asarray(): can't alias a numpy array with negative strides or non-native byte "
                                 "order without a copy (copy=False)")
        else:
            src = from_numpy(obj)
    elif hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        src = from_dlpack(obj)
    if src is None:
        if copy is False:
            raise ValueError(f"asarray(): can't alias an object of type {type(obj).__name__} without a copy "
                             "(copy=False)")
        return tensor(np.array(obj) if isinstance(obj, np.ndarray) else obj, dtype=dtype, device=device,
                      requires_grad=requires_grad)
    out = src.to(dtype=dtype, device=device, copy=bool(copy))
    if out is not src and copy is False:
        raise ValueError(f"asarray(): converting {src.dtype} on {src.device} to dtype={dtype}, device={device} "
                         "needs a copy, but copy=False")
    if requires_grad:
        if out is obj:
            out = obj.detach()
        out.requires_grad_(True)
    return out


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-d CPU tensor viewing the memory of a Python buffer (``bytes``, ``bytearray``, ``memoryview`` ...).

    ``count`` elements of ``dtype`` (all the rest with -1) are read from byte ``offset``; the
    tensor shares the buffer's memory (read-only buffers give a warning, as in torch).
    """
    d = dt.to_dtype(dtype)
    try:
        arr = np.frombuffer(buffer, dtype=d.np, count=count, offset=offset)
    except (ValueError, TypeError) as e:
        raise ValueError(f"frombuffer(): could not view a {type(buffer).__name__} of dtype {d} with "
                         f"count={count}, offset={offset}: {e}") from None
    if not arr.flags.writeable:
        warnings.warn("The given buffer is not writable, and flambeau does not support non-writable tensors. "
                      "Writing to this tensor will fail.", UserWarning, stacklevel=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = from_numpy(arr)
    else:
        t = from_numpy(arr)
    return t.requires_grad_(True) if requires_grad else t


_NEGATIVE_STRIDES = (
    "At least one stride in the given numpy array is negative, and tensors with negative strides are not "
    "currently supported. (You can probably work around this by making a copy of your array  with "
    "array.copy().) "
)


def _check_byte_order(a: np.ndarray) -> None:
    if not a.dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order. "
                         "Conversion between byte orders is currently not supported.")


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``ndarray`` (no copy, constant time; writes are seen both ways).

    The shape, strides and dtype are the array's. Supported dtypes: float64, float32, float16,
    bfloat16 (``ml_dtypes.bfloat16``), complex64, complex128, int64, int32, int16, int8, uint8 and
    bool. Arrays with negative strides (``a[::-1]``) are
    rejected as in torch; read-only arrays are shared with a warning.
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {_qualname(ndarray)})")
    d = dt._BY_NP.get(ndarray.dtype)
    if d is None:
        _check_byte_order(ndarray)
        d = dt.from_numpy_dtype(ndarray.dtype)
    if ndarray.ndim and min(ndarray.strides) < 0:
        raise ValueError(_NEGATIVE_STRIDES)
    flags = ndarray.flags
    if not flags.writeable:
        warnings.warn("The given NumPy array is not writable, and flambeau does not support non-writable tensors. "
                      "This means writing to this tensor will fail. You may want to copy the array to protect "
                      "its data or make it writable before converting it to a tensor.", UserWarning, stacklevel=2)
    # Contiguous arrays are their own storage buffer; others get a flat view spanning their memory.
    buf = ndarray if flags.c_contiguous or flags.f_contiguous else flat_buffer_of(ndarray)
    arr = ndarray.view()  # our own view object: reshaping ours never changes the user's array
    return _wrap(arr, CPU, Storage(buf, CPU), d)


def _qualname(x) -> str:
    tp = type(x)
    return tp.__name__ if tp.__module__ == "builtins" else f"{tp.__module__}.{tp.__name__}"


# --- constant-filled factories ----------------------------------------------------------------------
def _dtype_or_default(dtype) -> dt.dtype:
    return dt._default[0] if dtype is None else dt.to_dtype(dtype)


def _filled(shape, value, dtype, device, requires_grad, name: str) -> Tensor:
    d = dt._default[0] if dtype is None else dtype if dtype.__class__ is dt.dtype else dt.to_dtype(dtype)
    if value.__class__ is complex and not d.is_complex:
        raise RuntimeError(f"value cannot be converted to type {d.name} without overflow")
    if value is not None and d._category == 1:  # (NaN or 300 into an integer dtype: numpy's cast made a value up)
        check_fits(value, d)
    dev = _DEFAULT_DEVICE[0] if device is None else (CPU if device is CPU else to_device(device))
    try:
        if dev is CPU:
            if value is None:
                arr = np.empty(shape, d.np)
            elif value == 0:
                arr = np.zeros(shape, d.np)
            else:
                arr = np.full(shape, value, d.np)
            t = _wrap(arr, CPU, None, d)
        else:
            # A device backend's ``full`` leaves the memory uninitialised when ``value`` is None.
            t = _wrap(backend(dev.type).full(shape, value, d.np, dev), dev, None, d)
    except (MemoryError, ValueError, OverflowError) as e:
        raise allocation_error(e, name, shape, d, device=dev) from None
    if requires_grad:
        t.requires_grad_(True)
    return t


def _size_arg(size, kw_size, name: str) -> tuple:
    if kw_size is None and all(s.__class__ is int and s >= 0 for s in size):
        return size  # fast path: f(2, 3)
    if kw_size is not None:
        if size:
            raise TypeError(f"{name}() got multiple values for argument 'size'")
        size = (kw_size,)
    if len(size) > 1 and any(isinstance(s, (tuple, list)) for s in size):
        raise TypeError(f"{name}() takes 1 positional argument but {len(size)} were given")
    for s in size:
        if isinstance(s, float):
            raise TypeError(f"{name}(): argument 'size' must be tuple of ints, not float")
    return normalize_shape(size)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, **kw) -> Tensor:
    """A tensor of shape ``size`` (``zeros(2, 3)`` or ``zeros((2, 3))``) filled with 0.

    The dtype is the default dtype (float32) unless given.
    """
    return _filled(_size_arg(size, kw.pop("size", None), "zeros"), 0, dtype, device, requires_grad, "zeros")


def ones(*size, dtype=None, device=None, requires_grad: bool = False, **kw) -> Tensor:
    """A tensor of shape ``size`` filled with 1 (default dtype unless given)."""
    return _filled(_size_arg(size, kw.pop("size", None), "ones"), 1, dtype, device, requires_grad, "ones")


def empty(*size, dtype=None, device=None, requires_grad: bool = False, memory_format=None, **kw) -> Tensor:
    """An uninitialised tensor of shape ``size`` (default dtype unless given)."""
    return _filled(_size_arg(size, kw.pop("size", None), "empty"), None, dtype, device, requires_grad, "empty")


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of shape ``size`` (a tuple) filled with ``fill_value``.

    Without ``dtype``, a bool value gives ``bool``, an int ``int64`` and a float the default dtype.
    """
    if isinstance(fill_value, Tensor):
        if fill_value.numel() != 1:
            raise RuntimeError(f"full(): fill_value must be a number or a one-element tensor, got a tensor of "
                               f"shape {list(fill_value.shape)}")
        if dtype is None:
            dtype = fill_value.dtype
        fill_value = fill_value.item()
    if dtype is None:
        dtype = dt.scalar_dtype(fill_value)
    return _filled(_size_arg((size,), None, "full"), fill_value, dtype, device, requires_grad, "full")


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of shape ``size`` with element strides ``stride`` (non-negative).

    Its storage holds exactly the elements the strides reach (``1 + sum((n - 1) * s)``).
    """
    shape = _size_arg((size,), None, "empty_strided")
    strides = tuple(int(st) for st in stride)
    if len(strides) != len(shape):
        raise RuntimeError(f"mismatch in length of strides and shape: got {len(strides)} strides for "
                           f"{len(shape)} dimensions")
    if any(st < 0 for st in strides):
        raise RuntimeError(f"empty_strided(): strides must be non-negative, got {list(strides)}")
    d = _dtype_or_default(dtype)
    dev = _DEFAULT_DEVICE[0] if device is None else to_device(device)
    extent = 0 if 0 in shape else 1 + sum((n - 1) * st for n, st in zip(shape, strides))
    b = backend(dev.type)
    try:
        buf = np.empty(extent, d.np) if dev is CPU else b.empty((extent,), d.np, dev)
    except (MemoryError, ValueError, OverflowError) as e:
        raise allocation_error(e, "empty_strided", (extent,), d,
                               f"size={list(shape)} with stride={list(strides)} ({extent} elements)") from None
    t = _wrap(b.as_strided(buf, shape, strides, 0), dev, Storage(buf, dev), d)
    return t.requires_grad_(True) if requires_grad else t


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A 0-dim tensor holding number ``s`` (default dtype unless given, whatever the type of ``s``)."""
    if isinstance(s, Tensor):
        s = s.item()
    return _filled((), s, dtype, device, requires_grad, "scalar_tensor")


def _like(name: str, fill):
    def fn(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
        _check_input(input, name)
        out = like_layout(input, memory_format, lambda shape: _filled(shape, fill, dtype or input.dtype,
                                                                      device or input.device, False, name))
        return out.requires_grad_(True) if requires_grad else out

    fn.__name__ = fn.__qualname__ = name
    what = {"zeros_like": "filled with 0", "ones_like": "filled with 1", "empty_like": "uninitialised"}[name]
    fn.__doc__ = (f"A tensor {what} with the shape of ``input``, and its dtype and device unless given.\n\n"
                  "``memory_format``: its layout (the default keeps a channels-last ``input``'s layout; other "
                  "results are C-contiguous).")
    return fn


def _check_input(input, name: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


zeros_like = _like("zeros_like", 0)
ones_like = _like("ones_like", 1)
empty_like = _like("empty_like", None)


def full_like(input: Tensor, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None) -> Tensor:
    """A tensor filled with ``fill_value``, with the shape of ``input`` and its dtype and device unless given."""
    _check_input(input, "full_like")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    out = like_layout(input, memory_format, lambda shape: _filled(shape, fill_value, dtype or input.dtype,
                                                                  device or input.device, False, "full_like"))
    return out.requires_grad_(True) if requires_grad else out


# --- ranges -----------------------------------------------------------------------------------------
_INT64_MAX = 2 ** 63 - 1


def _number(v, fname: str, argname: str):
    if isinstance(v, Tensor):
        v = v.item()
    if not isinstance(v, numbers.Real):
        raise TypeError(f"{fname}(): argument '{argname}' must be Number, not {type(v).__name__}")
    return v


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The 1-d tensor of values from ``start`` (default 0) to ``end`` (exclusive) by ``step``.

    ``arange(end)``, ``arange(start, end)`` or ``arange(start, end, step)``; the length is
    ``ceil((end - start) / step)``. The dtype is int64 when all arguments are integers, else the
    default dtype, unless given.
    """
    if end is None:
        start, end = 0, start
    if start.__class__ is int and end.__class__ is int and step.__class__ is int and step and dtype is None \
            and (end - start) * step >= 0 and end <= _INT64_MAX:  # fast path: arange(n), arange(a, b, s) with ints
        try:
            return _finish(np.arange(start, end, step, dtype=np.int64), device, requires_grad)
        except (MemoryError, ValueError, OverflowError):
            pass  # the general path says what was wrong
    start, end, step = (_number(v, "arange", n) for v, n in ((start, "start"), (end, "end"), (step, "step")))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    integral = all(isinstance(v, numbers.Integral) for v in (start, end, step))
    if integral and not all(-_INT64_MAX - 1 <= v <= _INT64_MAX for v in (start, end, step)):
        raise RuntimeError(f"arange(): start={start}, end={end}, step={step}: value cannot be converted to type "
                           "int64 without overflow")
    if not all(map(np.isfinite, (start, end))):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        d = dt.int64 if integral else dt.get_default_dtype()
    else:
        d = dt.to_dtype(dtype)
        if d.is_complex:
            raise NotImplementedError(f"\"arange_cpu\" not implemented for '{d.scalar_name}'")
    n = -((int(start) - int(end)) // int(step)) if integral else max(0, int(np.ceil((end - start) / step)))
    try:
        if integral:  # exact integer arithmetic
            arr = np.arange(int(start), int(end), int(step), dtype=np.int64)
        else:  # torch computes start + i * step in double, then casts
            arr = start + step * np.arange(n, dtype=np.float64)
        return _finish(arr.astype(d.np, copy=False), device, requires_grad)
    except (MemoryError, ValueError, OverflowError) as e:
        raise allocation_error(e, "arange", (n,), dt.float64 if not integral else dt.int64,
                               f"start={start}, end={end}, step={step}") from None


def _steps(steps, name: str) -> int:
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
        raise TypeError(f"{name}(): argument 'steps' must be int, not {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    if steps > _INT64_MAX:  # numpy fails on these with an IndexError
        raise allocation_error(OverflowError(), name, (steps,), dt.float64, f"steps={steps}")
    return int(steps)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The 1-d tensor of ``steps`` values evenly spaced from ``start`` to ``end`` inclusive.

    The dtype is the default dtype unless given (integer dtypes truncate the values).
    """
    start, end = _number(start, "linspace", "start"), _number(end, "linspace", "end")
    d = _dtype_or_default(dtype)
    n = _steps(steps, "linspace")
    try:
        arr = np.linspace(start, end, n, dtype=np.float64).astype(d.np)
    except (MemoryError, ValueError, OverflowError) as e:
        raise allocation_error(e, "linspace", (n,), dt.float64, f"steps={n}") from None
    return _finish(arr, device, requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The 1-d tensor of ``steps`` values ``base ** x`` for ``x`` evenly spaced from ``start`` to ``end``.

    The dtype is the default dtype unless given.
    """
    start, end = _number(start, "logspace", "start"), _number(end, "logspace", "end")
    base = _number(base, "logspace", "base")
    d = _dtype_or_default(dtype)
    n = _steps(steps, "logspace")
    try:
        with np.errstate(all="ignore"):  # overflow to inf is the expected result, as in torch
            arr = np.power(float(base), np.linspace(start, end, n, dtype=np.float64)).astype(d.np)
    except (MemoryError, ValueError, OverflowError) as e:
        raise allocation_error(e, "logspace", (n,), dt.float64, f"steps={n}") from None
    return _finish(arr, device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The ``n`` x ``m`` (``m`` defaults to ``n``) 2-d tensor with ones on the diagonal, zeros elsewhere.

    The dtype is the default dtype unless given.
    """
    for name, v in (("n", n), ("m", m)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
            raise TypeError(f"eye(): argument '{name}' must be int, not {type(v).__name__}")
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m is not None and m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    d = _dtype_or_default(dtype)
    try:
        arr = np.eye(n, m, dtype=d.np)
    except (MemoryError, ValueError, OverflowError) as e:
        raise allocation_error(e, "eye", (n, n if m is None else m), d, f"n={n}, m={m}") from None
    return _finish(arr, device, requires_grad)


def _tri_indices(row: int, col: int, offset: int, dtype, device, upper: bool) -> Tensor:
    name = "triu_indices" if upper else "tril_indices"
    for argname, v in (("row", row), ("col", col), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name}(): argument '{argname}' must be int, not {type(v).__name__}")
    if row < 0 or col < 0:
        raise RuntimeError(f"{name}(): row and col must be non-negative, got row={row}, col={col}")
    fn = np.triu_indices if upper else np.tril_indices
    r, c = fn(row, offset, col) if row and col else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    d = dt.int64 if dtype is None else dt.to_dtype(dtype)
    return _finish(np.stack([r, c]).astype(d.np), device, False)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The indices of the lower triangle of a ``row`` x ``col`` matrix, as a ``(2, N)`` tensor.

    Row 0 holds the row indices and row 1 the column indices, in row-major order; ``offset``
    shifts the diagonal (positive: above it). The dtype is int64 unless given.
    """
    return _tri_indices(row, col, offset, dtype, device, upper=False)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The indices of the upper triangle of a ``row`` x ``col`` matrix, as a ``(2, N)`` tensor.

    Row 0 holds the row indices and row 1 the column indices, in row-major order; ``offset``
    shifts the diagonal (positive: above it). The dtype is int64 unless given.
    """
    return _tri_indices(row, col, offset, dtype, device, upper=True)



# --- Tensor's factory methods (Note [Tensor methods from the layers above] in _tensor.py) -------------
def _tensor_new(cls, *args, dtype=None, device=None):
    # ``Tensor(data)`` is ``tensor(data, dtype=float32)``; ``Tensor(2, 3)`` is ``empty(2, 3)``; ``Tensor()`` is an
    # empty 1-d tensor, as torch's (not a 0-dim one)
    if len(args) == 1 and not isinstance(args[0], int):
        return tensor(args[0], dtype=dtype or dt.get_default_dtype(), device=device)
    return empty(*(args or (0,)), dtype=dtype, device=device)


def _new_tensor(self, data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return tensor(data, dtype=dtype or self.dtype, device=device or self._device, requires_grad=requires_grad)


def _new_factory(factory):
    def method(self, *size, dtype=None, device=None, requires_grad: bool = False, **kw):
        return factory(*size, dtype=dtype or self.dtype, device=device or self._device, requires_grad=requires_grad,
                       **kw)

    method.__name__ = method.__qualname__ = f"new_{factory.__name__}"
    method.__doc__ = f"``flambeau.{factory.__name__}`` with this tensor's dtype and device as defaults."
    return method


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return full(size, fill_value, dtype=dtype or self.dtype, device=device or self._device, requires_grad=requires_grad)


Tensor.__new__ = staticmethod(_tensor_new)
Tensor.new_tensor = _new_tensor
Tensor.new_zeros = _new_factory(zeros)
Tensor.new_ones = _new_factory(ones)
Tensor.new_empty = _new_factory(empty)
Tensor.new_full = _new_full
