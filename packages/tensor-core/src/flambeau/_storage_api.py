"""torch's storage API over flambeau's :class:`~flambeau._storage.Storage`: ``UntypedStorage``, ``TypedStorage``,
the legacy ``FloatStorage`` ... classes, and the Tensor methods that take or give storages.

Note [Storages are Storage]
    ``t.untyped_storage()`` is the tensor's own :class:`Storage` (the object every view of it
    shares), so this module gives :class:`Storage` torch's ``UntypedStorage`` methods: a flat array
    of bytes (``size()`` is the byte count, ``s[i]`` a byte). ``flambeau.UntypedStorage(n)`` builds
    a :class:`Storage` and ``isinstance(s, flambeau.UntypedStorage)`` is true of every Storage.
    ``t.storage()`` is a :class:`TypedStorage`: the same Storage seen as elements of the tensor's
    dtype (deprecated in torch, so it warns once). ``Tensor.set_`` points a tensor at any part of
    a storage. Byte-level access (indexing, ``fill_``, ``copy_``, ``set_``) is for CPU storages; a
    CUDA storage reads (``tolist``) through a host copy. A storage does not grow: ``set_`` beyond
    its end raises, and ``Tensor.resize_`` past it gives the tensor a new, larger storage (torch
    enlarges the shared one, so other views see the growth; here they keep the old memory).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from flambeau import _dtype as dt
from flambeau._backends import backend
from flambeau._device import CPU, to_device
from flambeau._grad_mode import is_grad_enabled
from flambeau._memory_format import ORDERS, dense_strides
from flambeau._runtime import is_warn_always_enabled
from flambeau._storage import Storage
from flambeau._tensor import Tensor

__all__ = ["UntypedStorage", "TypedStorage", "is_storage", *(f"{d.scalar_name}Storage" for d in
                                                            (dt.bool, dt.uint8, dt.int8, dt.int16, dt.int32,
                                                             dt.int64, dt.float16, dt.bfloat16, dt.float32,
                                                             dt.float64, dt.complex64, dt.complex128))]


# --- bytes of a storage ------------------------------------------------------------------------------------
def _bytes(storage: Storage) -> np.ndarray:
    """The storage's memory as a writable 1-D uint8 array (CPU only)."""
    if storage.device.type != "cpu":
        raise RuntimeError(f"byte access to a storage on {storage.device} is not supported: copy it with "
                           "tensor.cpu() first")
    buf = storage._buffer
    if buf.flags.c_contiguous or buf.flags.f_contiguous:
        return buf.reshape(-1, order="A").view(np.uint8)
    if any(s < 0 for s in buf.strides):
        raise RuntimeError("byte access to a storage with negative strides is not supported")
    span = (0 if buf.size == 0 else sum((n - 1) * s for n, s in zip(buf.shape, buf.strides))) + buf.itemsize
    flat = np.lib.stride_tricks.as_strided(buf, shape=(span // buf.itemsize,), strides=(buf.itemsize,))
    return flat.view(np.uint8)


def _host_bytes(storage: Storage) -> np.ndarray:
    if storage.device.type == "cpu":
        return _bytes(storage)
    return np.ascontiguousarray(backend(storage.device.type).to_numpy(storage._buffer)).reshape(-1).view(np.uint8)


class _NBytes(int):
    """The byte count of a storage: an int that may also be called (``s.nbytes()``, torch's method; flambeau's
    own code reads ``s.nbytes``)."""

    def __call__(self) -> int:
        return int(self)


def _new_storage(data, device, dtype) -> Storage:
    """A new CPU or ``device`` Storage: zeroed ``data`` elements of ``dtype``, or the values of a sequence."""
    dev = CPU if device is None else to_device(device)
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        arr = np.zeros(int(data), dtype.np)
    else:
        arr = np.asarray(list(data), dtype=dtype.np).reshape(-1)
    if dev is not CPU:
        arr = backend(dev.type).from_numpy(arr, dev)
    return Storage(arr, dev)


# --- UntypedStorage: Storage itself -----------------------------------------------------------------------
class _UntypedMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Storage)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, Storage)


class UntypedStorage(metaclass=_UntypedMeta):
    """A flat buffer of bytes (torch's ``UntypedStorage``): ``UntypedStorage(nbytes)`` (zeroed) or
    ``UntypedStorage([b0, b1, ...])``, on ``device`` (CPU by default). What it returns is a :class:`Storage`
    (Note [Storages are Storage]), the type of ``tensor.untyped_storage()``."""

    def __new__(cls, *args, device=None):
        if len(args) > 1:
            raise TypeError(f"UntypedStorage(): expected a size or a sequence of bytes, got {len(args)} arguments")
        return _new_storage(args[0] if args else 0, device, dt.uint8)


def _size(self: Storage) -> int:
    """Number of bytes."""
    return int(self._buffer.nbytes)


def _getitem(self: Storage, index):
    data = _host_bytes(self)[index]
    if isinstance(data, np.ndarray):  # a slice: a storage sharing these bytes (CPU)
        return Storage(data, self.device)
    return int(data)


def _setitem(self: Storage, index, value) -> None:
    _bytes(self)[index] = value
    self._version += 1


def _fill(self: Storage, value) -> Storage:
    _bytes(self)[:] = value
    self._version += 1
    return self


def _copy(self: Storage, src, non_blocking: bool = False) -> Storage:
    source = src._untyped if isinstance(src, TypedStorage) else src
    if not isinstance(source, Storage):
        raise TypeError(f"copy_(): expected a storage, got {type(src).__name__}")
    if source._buffer.nbytes != self._buffer.nbytes:
        raise RuntimeError(f"size mismatch: copy_() from a storage of {source._buffer.nbytes} bytes into one of "
                           f"{self._buffer.nbytes} bytes")
    _bytes(self)[:] = _host_bytes(source)
    self._version += 1
    return self


for _name, _method in {
    "size": _size, "__len__": _size, "__getitem__": _getitem, "__setitem__": _setitem, "fill_": _fill,
    "copy_": _copy, "tolist": lambda self: _host_bytes(self).tolist(), "element_size": lambda self: 1,
    "untyped": lambda self: self, "is_cuda": property(lambda self: self.device.type == "cuda"),
    "nbytes": property(lambda self: _NBytes(self._buffer.nbytes)),
}.items():
    setattr(Storage, _name, _method)


# --- TypedStorage ------------------------------------------------------------------------------------------
_warned = [False]


def _warn_typed() -> None:
    """torch's deprecation warning of TypedStorage: once per process, or every time under ``set_warn_always(True)``."""
    if not _warned[0] or is_warn_always_enabled():
        _warned[0] = True
        warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
                      "only storage class. This should only matter to you if you are using storages directly.  "
                      "To access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()",
                      UserWarning, stacklevel=3)


class TypedStorage:
    """A :class:`Storage` seen as elements of one dtype (torch's deprecated ``TypedStorage``).

    ``TypedStorage(n, dtype=...)`` (zeroed), ``TypedStorage([values], dtype=...)``, or
    ``TypedStorage(wrap_storage=untyped, dtype=...)`` over existing bytes. ``size()`` counts elements,
    ``s[i]`` is a Python number.
    """

    dtype: dt.dtype  # the legacy subclasses (FloatStorage ...) fix it

    def __init__(self, *args, device=None, dtype=None, wrap_storage=None, _internal: bool = False):
        if not _internal:
            _warn_typed()
        dtype = getattr(type(self), "dtype", None) if dtype is None else dt.to_dtype(dtype)
        self.dtype = dt.get_default_dtype() if dtype is None else dtype
        if wrap_storage is not None:
            if args:
                raise RuntimeError("TypedStorage(): no positional arguments are allowed with wrap_storage")
            if not isinstance(wrap_storage, Storage):
                raise TypeError(f"TypedStorage(): wrap_storage must be an UntypedStorage, got "
                                f"{type(wrap_storage).__name__}")
            self._untyped = wrap_storage
        else:
            if len(args) > 1:
                raise TypeError(f"TypedStorage(): expected a size or a sequence, got {len(args)} arguments")
            self._untyped = _new_storage(args[0] if args else 0, device, self.dtype)

    def _elements(self) -> np.ndarray:
        return _host_bytes(self._untyped)[: self.size() * self.dtype.itemsize].view(self.dtype.np)

    @property
    def device(self):
        return self._untyped.device

    @property
    def is_cuda(self) -> bool:
        return self._untyped.device.type == "cuda"

    def untyped(self) -> Storage:
        """The :class:`Storage` underneath."""
        return self._untyped

    _untyped_storage = property(untyped)

    def size(self) -> int:
        """Number of elements."""
        return self._untyped._buffer.nbytes // self.dtype.itemsize

    __len__ = size

    def element_size(self) -> int:
        return self.dtype.itemsize

    def nbytes(self) -> int:
        return self.size() * self.dtype.itemsize

    def data_ptr(self) -> int:
        return self._untyped.data_ptr()

    def is_shared(self) -> bool:
        return self._untyped.is_shared()

    def tolist(self) -> list:
        return self._elements().tolist()

    def __getitem__(self, index):
        value = self._elements()[index]
        if isinstance(value, np.ndarray):
            raise RuntimeError("TypedStorage indexing with a slice is not supported; index single elements")
        return value.item()

    def __setitem__(self, index, value) -> None:
        if self._untyped.device.type != "cpu":
            raise RuntimeError("TypedStorage.__setitem__ is supported on CPU storages only")
        self._elements()[index] = value
        self._untyped._version += 1

    def __iter__(self):
        return iter(self.tolist())

    def fill_(self, value) -> TypedStorage:
        if self._untyped.device.type != "cpu":
            raise RuntimeError("TypedStorage.fill_ is supported on CPU storages only")
        self._elements()[:] = value
        self._untyped._version += 1
        return self

    def copy_(self, source, non_blocking: bool = False) -> TypedStorage:
        _copy(self._untyped, source)
        return self

    def __repr__(self) -> str:
        body = "\n".join(f" {v}" for v in self.tolist())
        kind = f"flambeau.storage.TypedStorage(dtype={self.dtype}, device={self.device})"
        return f"{body}\n[{kind} of size {self.size()}]"


class _LegacyMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, TypedStorage) and obj.dtype is cls.dtype and obj.device.type == cls.device_type


class _Legacy(TypedStorage):
    """Base of the legacy storage classes: a fixed dtype, and their device type by default."""

    device_type = "cpu"

    def __init__(self, *args, device=None, dtype=None, wrap_storage=None, _internal: bool = False):
        if wrap_storage is None and device is None:
            device = self.device_type
        super().__init__(*args, device=device, dtype=dtype, wrap_storage=wrap_storage, _internal=_internal)


def _legacy(dtype: dt.dtype, device_type: str) -> type:
    name = f"{dtype.scalar_name}Storage"
    where = "flambeau" if device_type == "cpu" else "flambeau.cuda"
    doc = (f"Legacy storage of {device_type.upper()} {dtype.name} elements: ``{name}(n)`` (zeroed) or "
           f"``{name}([values])``; ``isinstance(t.storage(), {where}.{name})`` checks dtype and device "
           "(torch's legacy storage class).")
    return _LegacyMeta(name, (_Legacy,), {"__doc__": doc, "dtype": dtype, "device_type": device_type,
                                          "__module__": where})


# one legacy storage class per dtype, as the legacy tensor types of flambeau._legacy_types
LEGACY = {f"{d.scalar_name}Storage": _legacy(d, "cpu") for d in dt.ALL_DTYPES}
# flambeau.cuda.FloatStorage ...: set on flambeau.cuda by flambeau/__init__.py, as the CUDA legacy tensor types
CUDA_LEGACY = {f"{d.scalar_name}Storage": _legacy(d, "cuda") for d in dt.ALL_DTYPES}
_LEGACY_BY_DTYPE = {cls.dtype: cls for cls in LEGACY.values()}
globals().update(LEGACY)


def is_storage(obj) -> bool:
    """Whether ``obj`` is a storage (an :class:`UntypedStorage` or a :class:`TypedStorage`)."""
    return isinstance(obj, (Storage, TypedStorage))


# --- Tensor methods -----------------------------------------------------------------------------------------
def storage(self: Tensor) -> TypedStorage:
    """This tensor's storage seen as elements of its dtype (deprecated: use :meth:`untyped_storage`)."""
    _warn_typed()
    return TypedStorage(wrap_storage=self._storage, dtype=self.dtype, _internal=True)


def storage_type(self: Tensor) -> type:
    """The legacy storage class of this tensor's dtype (``flambeau.FloatStorage`` ...)."""
    return _LEGACY_BY_DTYPE[self.dtype]


def _check_resizable(self: Tensor, what: str) -> None:
    if self._requires_grad and is_grad_enabled():
        raise RuntimeError("cannot resize variables that require grad" if what == "resize" else
                           f"{what}(): a leaf Variable that requires grad is being used in an in-place operation.")


def set_(self: Tensor, source=None, storage_offset: int = 0, size=None, stride=None) -> Tensor:
    """Make this tensor view ``source``: nothing (empty), another tensor's storage and view, or a storage
    (untyped, or typed of this tensor's dtype) at ``storage_offset`` elements with ``size`` and ``stride``
    (contiguous strides by default). In place; returns self.

    Raises:
        RuntimeError: a typed storage of another dtype, a view past the end of the storage, or a CUDA storage.
    """
    _check_resizable(self, "set_")
    if source is None:
        data = np.empty(0, self.dtype.np)
        store = Storage(data, self._device)
    elif isinstance(source, Tensor):
        if source.dtype is not self.dtype:
            raise RuntimeError(f"Expected a Tensor of type {self.dtype} but got {source.dtype} for argument 'source'")
        data, store = source._data, source._storage
        self._device = source._device
    else:
        if isinstance(source, TypedStorage):
            if source.dtype is not self.dtype:
                raise RuntimeError(f"Expected a Storage of type {self.dtype.name} or an UntypedStorage, but got type "
                                   f"{source.dtype.name} for argument 1 'storage'")
            source = source._untyped
        if not isinstance(source, Storage):
            raise TypeError(f"set_(): argument 'source' must be a Tensor or a storage, not {type(source).__name__}")
        shape = [source._buffer.nbytes // self.dtype.itemsize] if size is None else [int(n) for n in size]
        strides = dense_strides(shape) if stride is None else [int(s) for s in stride]
        data = _view(source, int(storage_offset), shape, strides, self.dtype)
        store = source
        self._device = source.device
    # (no version bump: the data did not change, and the storage's counter is shared by its other tensors,
    # whose values autograd may have saved)
    self._data, self._storage = data, store
    return self


def _view(store: Storage, offset: int, shape, strides, dtype: dt.dtype) -> np.ndarray:
    """The ``shape``/``strides`` view (in elements) of ``store``'s bytes from element ``offset``."""
    raw = _bytes(store)
    extent = 0 if 0 in shape else offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    if extent * dtype.itemsize > raw.size:
        raise RuntimeError(f"setStorage: sizes {list(shape)}, strides {list(strides)}, storage offset {offset}, and "
                           f"itemsize {dtype.itemsize} requiring a storage size of {extent * dtype.itemsize} are out "
                           f"of bounds for storage of size {raw.size}")
    base = raw[offset * dtype.itemsize: max(extent, offset) * dtype.itemsize].view(dtype.np)
    return np.lib.stride_tricks.as_strided(base, shape=tuple(shape), strides=tuple(s * dtype.itemsize for s in strides))


def is_set_to(self: Tensor, tensor: Tensor) -> bool:
    """Whether both tensors view the same storage with the same offset, sizes and strides."""
    return (self._storage is tensor._storage and self.data_ptr() == tensor.data_ptr() and self.shape == tensor.shape
            and self.stride() == tensor.stride())


def resize_(self: Tensor, *sizes, memory_format=None) -> Tensor:
    """Give this tensor shape ``sizes`` with contiguous strides, in place, keeping its storage offset.

    The elements already in the storage stay where they are; a larger size than the storage holds
    copies the storage into a new, larger one (zero-filled past the old end: torch leaves it
    uninitialised). See Note [Storages are Storage].
    """
    _check_resizable(self, "resize")
    shape = [int(n) for n in (sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes)]
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {shape}")
    if self._device.type != "cpu":
        raise RuntimeError(f"resize_() is supported on CPU tensors only, got a tensor on {self._device}")
    offset = self.storage_offset()
    store = self._storage
    needed = (offset + math.prod(shape)) * self.dtype.itemsize
    if needed > _bytes(store).size:
        grown = np.zeros(needed // self.dtype.itemsize, self.dtype.np).view(np.uint8)
        old = _bytes(store)
        grown[: old.size] = old
        store = Storage(grown.view(self.dtype.np), self._device)
    order = None
    if memory_format in ORDERS:
        rank, order = ORDERS[memory_format]
        if len(shape) != rank:
            raise RuntimeError(f"required rank {rank} tensor to use {memory_format._name} format")
    self._data = _view(store, offset, shape, dense_strides(shape, order), self.dtype)
    self._storage = store
    store._version += 1
    return self


def resize_as_(self: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """``resize_(the_template.shape)``."""
    return resize_(self, the_template.shape, memory_format=memory_format)


for _name, _method in {"storage": storage, "storage_type": storage_type, "set_": set_, "is_set_to": is_set_to,
                       "resize_": resize_, "resize_as_": resize_as_}.items():
    setattr(Tensor, _name, _method)
del _name, _method
