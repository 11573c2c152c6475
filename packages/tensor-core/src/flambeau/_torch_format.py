"""PyTorch's checkpoint format (the zip archive ``torch.save`` writes), read and written without torch.

Note [Reading torch checkpoints safely]
    A torch checkpoint is a zip archive: ``<name>/data.pkl`` (a pickle of the saved object) and
    ``<name>/data/<key>``, the raw bytes of each storage. A pickle can call any importable
    function, so it is read the way ``torch.load(weights_only=True)`` reads it: an unpickler whose
    ``find_class`` answers only an explicit table of names (:data:`_ALLOWED`: ``OrderedDict``,
    torch's tensor and parameter rebuild functions, the storage types, ``torch.Size``, dtypes,
    ``torch.device``, ``_codecs.encode`` for protocol-2 bytes, ``set``/``frozenset``) with
    flambeau's own stand-ins; any other name fails the load. The stand-ins build nothing from the
    pickle's arguments directly: a tensor becomes a description (storage key, dtype, shape,
    strides, offset) that the checks of ``flambeau._serialization`` turn into an array (bounds
    against the storage's bytes, sizes, depth), and storages are read lazily from the archive, each
    once, so tensors viewing one storage share memory as in torch.

    Every torch dtype flambeau has loads as itself: bfloat16 and complex64/complex128 included.

Writing (``flambeau.save(obj, f, format="torch")``) produces the same archive with a pickle that
names only those globals, so ``torch.load(f, weights_only=True)`` reads it.
"""

from __future__ import annotations

import _compat_pickle
import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np

from flambeau import _dtype as dt
from flambeau._device import device as _device_type
from flambeau._size import Size
from flambeau._tensor import Tensor

__all__ = ["is_torch_archive", "load_torch", "save_torch"]

# torch storage type name -> flambeau dtype name
_STORAGE_DTYPES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
                   "BFloat16Storage": "bfloat16", "ComplexFloatStorage": "complex64",
                   "ComplexDoubleStorage": "complex128", "LongStorage": "int64", "IntStorage": "int32",
                   "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool"}
_STORAGE_OF = {v: k for k, v in _STORAGE_DTYPES.items()}
_MAX_DEPTH = 200


def is_torch_archive(raw: bytes) -> bool:
    """Whether ``raw`` starts like a zip archive (the format of ``torch.save`` since torch 1.6)."""
    return raw[:4] == b"PK\x03\x04"


# --- reading ---------------------------------------------------------------------------------------
class _StorageType:
    """Stand-in for ``torch.<X>Storage`` in a pickle: only its dtype matters."""

    def __init__(self, name: str):
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]


class _PendingTensor:
    """A tensor described by a pickle, built after unpickling (Note [Reading torch checkpoints safely])."""

    __slots__ = ("key", "dtype", "device", "numel", "offset", "size", "stride", "requires_grad", "param")

    def __init__(self, storage, offset, size, stride, requires_grad):
        self.key, self.dtype, self.device, self.numel = storage
        self.offset, self.size, self.stride = offset, size, stride
        self.requires_grad = bool(requires_grad)
        self.param = False


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    if not isinstance(storage, tuple) or len(storage) != 4:
        raise pickle.UnpicklingError("_rebuild_tensor_v2 without a storage")
    return _PendingTensor(storage, storage_offset, size, stride, requires_grad)


def _rebuild_parameter(data, requires_grad, backward_hooks, *state):
    if not isinstance(data, _PendingTensor):
        raise pickle.UnpicklingError("_rebuild_parameter of something that is not a tensor")
    data.param = True
    data.requires_grad = bool(requires_grad)
    return data


def _size(*args):
    return Size(*args)


def _encode(text, encoding="latin1"):  # protocol 2 pickles bytes as _codecs.encode(str, "latin1")
    if not isinstance(text, str) or encoding != "latin1":
        raise pickle.UnpicklingError("_codecs.encode of something other than latin-1 text")
    return text.encode("latin1")


def _torch_device(kind, index=None):
    return _device_type(kind, index) if index is not None else _device_type(kind)


_ALLOWED = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch", "Size"): _size,
    ("torch", "device"): _torch_device,
    ("_codecs", "encode"): _encode,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    **{("torch", name): _StorageType(name) for name in _STORAGE_DTYPES},
    **{("torch", d.name): d for d in dt.ALL_DTYPES},
}


SAFE_GLOBALS: dict = {}  # (module, qualified name) -> object: flambeau.serialization.add_safe_globals' additions


class _NotAllowed(pickle.UnpicklingError):
    """A global a weights-only load refuses: reported as such, not as a malformed file."""


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, archive: zipfile.ZipFile, prefix: str, weights_only: bool = True):
        super().__init__(f)
        self.archive = archive
        self.prefix = prefix
        self.weights_only = weights_only

    def find_class(self, module: str, name: str):
        # protocol 2's Python 2 names (``__builtin__.set``), mapped as pickle's own find_class maps them (no Python 3
        # module has those names)
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        else:
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = _ALLOWED.get((module, name))
        if found is None:
            found = SAFE_GLOBALS.get((module, name))
        if found is None:
            if not self.weights_only:  # Note [Objects beyond the format] in flambeau._serialization
                return super().find_class(module, name)
            raise _NotAllowed(
                f"Weights only load failed: the global {module}.{name} is not allowed (weights-only loads read "
                f"tensors, containers and numbers, nothing that runs code). If the file is trusted, load it with "
                f"weights_only=False, or allow the global with flambeau.serialization.add_safe_globals([{module}."
                f"{name}])")
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and isinstance(pid[3], str)
                and type(pid[4]) is int):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        return (pid[2], pid[1].dtype, pid[3], pid[4])


def load_torch(raw: bytes, map_location, name: str, reader_class, bad_error, weights_only: bool = True):
    """The object saved by ``torch.save`` in archive ``raw`` (see the Note).

    ``reader_class`` is ``flambeau._serialization._Reader`` (it checks and places tensors);
    ``bad_error`` the exception type that ``flambeau.load`` reports as "not a valid file";
    ``weights_only=False`` unpickles any object (Note [Objects beyond the format] in ``flambeau._serialization``).
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        names = archive.namelist()
    except (zipfile.BadZipFile, ValueError) as e:
        raise bad_error(f"not a valid zip archive ({e})") from None
    pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pkl) != 1:
        raise bad_error("a zip archive without the data.pkl of a torch checkpoint")
    prefix = pkl[0][: -len("data.pkl")]
    try:
        obj = _Unpickler(io.BytesIO(archive.read(pkl[0])), archive, prefix, weights_only).load()
    except _NotAllowed as e:
        raise RuntimeError(str(e)) from None
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError, KeyError, IndexError,
            ImportError) as e:
        raise bad_error(f"its data.pkl cannot be read safely ({type(e).__name__}: {e})") from None
    # the storages the tensors use, read once each, laid end to end for the checked reader
    keys: dict[str, int] = {}
    specs, chunks, total = [], [], 0
    seen: set = set()  # objects whose attributes were walked (an object graph may share and cycle)

    def collect(x, depth=0):
        if depth > _MAX_DEPTH:
            raise bad_error("objects nested too deeply")
        attributes = _attributes(x)
        if attributes is not None:
            if id(x) not in seen:
                seen.add(id(x))
                for v in attributes.values():
                    collect(v, depth + 1)
        elif isinstance(x, _PendingTensor):
            if x.key not in keys:
                member = prefix + "data/" + x.key
                try:
                    data = archive.read(member)
                except KeyError:
                    raise bad_error(f"storage {x.key!r} is missing from the archive") from None
                itemsize = getattr(dt, x.dtype).itemsize
                if len(data) < x.numel * itemsize:
                    raise bad_error(f"storage {x.key!r} holds {len(data)} bytes, less than its {x.numel} elements")
                nonlocal total
                pad = (-total) % 64
                chunks.append(b"\0" * pad)
                total += pad
                specs.append({"offset": total, "nbytes": len(data), "device": _device_name(x.device)})
                chunks.append(data)
                total += len(data)
                keys[x.key] = len(specs) - 1
        elif isinstance(x, dict):
            for k, v in x.items():
                collect(k, depth + 1)
                collect(v, depth + 1)
        elif isinstance(x, (list, tuple, set, frozenset)):
            for v in x:
                collect(v, depth + 1)

    collect(obj)
    reader = reader_class({"storages": specs}, memoryview(b"".join(chunks)), map_location, name)
    built: set = set()

    def build(x, depth=0):
        attributes = _attributes(x)
        if attributes is not None:  # (in place: others may refer to the object)
            if id(x) not in built:
                built.add(id(x))
                for k, v in list(attributes.items()):
                    attributes[k] = build(v, depth + 1)
            return x
        if isinstance(x, _PendingTensor):
            return _build_tensor(reader, keys[x.key], x, bad_error)
        if isinstance(x, OrderedDict):
            return OrderedDict((build(k, depth + 1), build(v, depth + 1)) for k, v in x.items())
        if isinstance(x, dict):
            return {build(k, depth + 1): build(v, depth + 1) for k, v in x.items()}
        if isinstance(x, list):
            return [build(v, depth + 1) for v in x]
        if isinstance(x, tuple) and not isinstance(x, Size):
            return tuple(build(v, depth + 1) for v in x)
        return x

    return build(obj)


_LEAVES = (str, bytes, int, float, complex, bool, type(None), Size, dt.dtype, _device_type, _PendingTensor, type)


def _attributes(x) -> dict | None:
    """The attribute dict of an object that a pickle made (a module, a Namespace) and that may hold tensors; None
    for containers, numbers and the other leaves, which the walks handle themselves."""
    if isinstance(x, (dict, list, tuple, set, frozenset) + _LEAVES):
        return None
    return getattr(x, "__dict__", None)


def _device_name(location: str) -> str:
    return "cpu" if location in ("cpu", "") else location


def _ints(x) -> bool:
    return isinstance(x, (tuple, list)) and all(type(v) is int for v in x)


def _build_tensor(reader, sid: int, x: _PendingTensor, bad_error) -> Tensor:
    if not (_ints(x.size) and _ints(x.stride) and type(x.offset) is int):
        raise bad_error("a tensor with a malformed size, stride or offset")
    itemsize = getattr(dt, x.dtype).itemsize
    return reader.tensor({"k": "tensor", "storage": sid, "dtype": x.dtype, "shape": list(x.size),
                          "strides": [s * itemsize for s in x.stride], "offset": x.offset * itemsize,
                          "requires_grad": x.requires_grad, "param": x.param})


# --- writing ---------------------------------------------------------------------------------------
class _Global:
    """A name written as a pickle GLOBAL (``torch FloatStorage``) without importing it."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce wants a callable; it is never called here
        raise TypeError(f"{self.module}.{self.name} is a name in a pickle, not a function")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_TORCH_DEVICE = _Global("torch", "device")


class _StorageRef:
    __slots__ = ("key", "dtype", "numel")

    def __init__(self, key: str, dtype: str, numel: int):
        self.key, self.dtype, self.numel = key, dtype, numel


class _Pickler(pickle._Pickler):
    """Protocol 2, as torch writes: tensors as ``_rebuild_tensor_v2`` of a persistent storage id."""

    def __init__(self, f):
        super().__init__(f, protocol=2)
        self.storages: dict = {}  # id(storage) -> (key, bytes, keep-alive)

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", _Global("torch", _STORAGE_OF[obj.dtype]), obj.key, "cpu", obj.numel)
        return None

    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, dt.dtype):  # torch.float32 ... are pickled as the global names they are
            obj = _Global("torch", obj.name)
        if isinstance(obj, _Global):
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            return
        super().save(obj, save_persistent_id)

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            ref, offset, stride = self._storage_of(obj)
            args = (ref, offset, tuple(obj.shape), stride, bool(obj.requires_grad), OrderedDict())
            if type(obj).__name__ == "Parameter":
                data = _TensorData(obj)
                return _REBUILD_PARAMETER, (data, bool(obj.requires_grad), OrderedDict())
            return _REBUILD_TENSOR, args
        if isinstance(obj, _TensorData):
            ref, offset, stride = self._storage_of(obj.t)
            return _REBUILD_TENSOR, (ref, offset, tuple(obj.t.shape), stride, False, OrderedDict())
        if isinstance(obj, _device_type):
            return _TORCH_DEVICE, (obj.type,) if obj.index is None else (obj.type, obj.index)
        return NotImplemented

    def _storage_of(self, t: Tensor):
        """``(storage ref, element offset, element strides)`` of ``t`` (a CPU copy of a CUDA or exotic one)."""
        if t.dtype.name not in _STORAGE_OF:
            raise TypeError(f"flambeau.save(format='torch'): dtype {t.dtype} has no torch storage type")
        itemsize = t.dtype.itemsize
        data = t._data if t.device.type == "cpu" else None
        buffer = t._storage._buffer if data is not None else None
        usable = (data is not None and buffer.flags.c_contiguous and all(s >= 0 for s in data.strides)
                  and all(s % itemsize == 0 for s in data.strides))
        offset = 0  # in bytes from the storage's start
        if usable and data.size:
            offset = data.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]
            usable = offset >= 0 and offset % itemsize == 0
        if usable:
            entry = self.storages.get(id(t._storage))
            if entry is None:
                raw = buffer.reshape(-1).view(np.uint8) if buffer.size else np.empty(0, np.uint8)
                entry = self.storages[id(t._storage)] = (str(len(self.storages)), raw, t._storage)
            numel = entry[1].nbytes // itemsize
            return (_StorageRef(entry[0], t.dtype.name, numel), offset // itemsize,
                    tuple(s // itemsize for s in data.strides))
        arr = np.asarray(t.detach().cpu().numpy(), order="C")  # (ascontiguousarray would make a 0-dim array 1-dim)
        key = str(len(self.storages))
        self.storages[("copy", key)] = (key, arr.reshape(-1).view(np.uint8), arr)
        return _StorageRef(key, t.dtype.name, arr.size), 0, tuple(s // itemsize for s in arr.strides)


class _TensorData:
    """The data of a Parameter, pickled as a plain tensor inside ``_rebuild_parameter``."""

    def __init__(self, t: Tensor):
        self.t = t


def save_torch(obj, f) -> None:
    """Write ``obj`` as ``torch.save`` does (zip archive ``archive/``), readable by ``torch.load``."""
    buf = io.BytesIO()
    pickler = _Pickler(buf)
    pickler.dump(obj)
    entries = [("archive/data.pkl", buf.getvalue()), ("archive/byteorder", b"little")]
    for key, raw, _keep in pickler.storages.values():
        entries.append((f"archive/data/{key}", raw.tobytes()))
    entries += [("archive/version", b"3\n"), ("archive/.data/serialization_id", os.urandom(16).hex().encode())]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        for member, data in entries:
            z.writestr(member, data)
    payload = out.getvalue()
    if isinstance(f, (str, bytes, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(payload)
    else:
        f.write(payload)
