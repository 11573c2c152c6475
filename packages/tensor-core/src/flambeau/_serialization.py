"""``flambeau.save`` / ``flambeau.load``: tensors and containers of them in a file that cannot run code.

The format holds data, never code: loading parses a JSON header and copies raw bytes, so a file
from an untrusted source can at worst fail to load (nothing like pickle's arbitrary objects).

Layout (all integers little-endian)::

    offset  size  field
    0       8     magic b"FLAMBEAU"
    8       4     format version (1)
    12      4     flags (0)
    16      8     header length H in bytes
    24      8     data length D in bytes
    32      4     CRC-32 of the header
    36      4     CRC-32 of the data
    40      H     header: UTF-8 JSON
    40+H    pad   zeros up to a multiple of 64
    ...     D     data: the bytes of every storage, each starting on a 64-byte boundary

The header is ``{"storages": [{"offset", "nbytes", "device"}...], "root": node}``. A node is a
JSON object with a kind ``k``: ``none``, ``bool``, ``int``, ``float`` (exact, as ``float.hex``),
``str``, ``bytes`` (hex), ``list``, ``tuple``, ``dict`` / ``odict`` (``items``: pairs of nodes, so
keys may be ints or tuples), ``dtype``, ``device``, ``size``, or ``tensor`` (``storage`` index,
``dtype``, ``shape``, ``strides`` and ``offset`` in bytes, ``requires_grad``, ``param``). Tensors
viewing the same storage point at the same storage entry, so views and shared tensors come back
sharing memory. Anything else raises ``TypeError`` when saving.
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
import sys
import zlib
from collections import OrderedDict

import numpy as np

from flambeau import _dtype as dt
from flambeau._device import CPU, to_device
from flambeau._size import Size
from flambeau._storage import Storage
from flambeau._tensor import Tensor, _wrap

__all__ = ["save", "load"]

# Note [Objects beyond the format]
#     torch.save pickles anything, and research checkpoints hold more than tensors (``{"model": ..., "args":
#     argparse.Namespace(...)}``, a whole module). flambeau's format holds tensors, containers and numbers only (it
#     never runs code on load), so ``save`` writes any other object as torch's archive instead (a pickle, tensors as
#     persistent storages), and ``load`` reads that as torch.load does: with ``weights_only=True`` (the default)
#     only what the weights-only table and ``flambeau.serialization.add_safe_globals`` allow, with
#     ``weights_only=False`` any object. Tensors inside such objects are found by walking their attributes.

MAGIC = b"FLAMBEAU"
VERSION = 1
_PREFIX = struct.Struct("<8sIIQQII")
_ALIGN = 64
_MAX_DEPTH = 200
_MAX_BYTES = sys.maxsize  # what a tensor (a numpy array) can span
_DTYPES = {d.name: d for d in dt.ALL_DTYPES}


class _Bad(Exception):
    """Internal: a malformed file; turned into RuntimeError naming the file."""


class _Unsupported(TypeError):
    """An object the format cannot hold (Note [Objects beyond the format])."""


# --- saving ----------------------------------------------------------------------------------------
class _Writer:
    def __init__(self):
        self.storages: list[dict] = []
        self.chunks: list = []
        self.by_storage: dict[int, int] = {}
        self.keep: list = []  # keeps storages alive while their ids are keys
        self.size = 0
        self.active: set[int] = set()

    def _add_bytes(self, buf, device: str) -> int:
        pad = (-self.size) % _ALIGN
        if pad:
            self.chunks.append(b"\0" * pad)
            self.size += pad
        mv = memoryview(buf).cast("B")
        self.storages.append({"offset": self.size, "nbytes": mv.nbytes, "device": device})
        self.chunks.append(mv)
        self.size += mv.nbytes
        return len(self.storages) - 1

    def tensor(self, t: Tensor) -> dict:
        device = str(t.device)
        itemsize = t.dtype.itemsize
        storage = t._storage
        if t.device.type == "cpu":
            buffer = storage._buffer
            base_ok = buffer.flags.c_contiguous and all(s >= 0 for s in t._data.strides)
        else:
            buffer = None
            base_ok = False
        if base_ok:
            offset = t._data.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]
            extent = sum((n - 1) * st for n, st in zip(t._data.shape, t._data.strides)) + itemsize
            base_ok = t._data.size == 0 or (offset >= 0 and offset + extent <= buffer.nbytes)
        if base_ok:
            sid = self.by_storage.get(id(storage))
            if sid is None:
                sid = self._add_bytes(buffer.reshape(-1).view(np.uint8) if buffer.size else b"", device)
                self.by_storage[id(storage)] = sid
                self.keep.append(storage)
            offset = max(offset, 0)
            strides = list(t._data.strides)
        else:  # a CUDA tensor or an unusual layout: save a contiguous copy of its own
            # (np.asarray with order, not ascontiguousarray: that makes a 0-dim array 1-dim, and the shape saved would
            # not match the strides: a 0-dim CUDA tensor, a batch norm's count, gave a file that could not be loaded)
            arr = np.asarray(t.numpy(force=True) if t.device.type == "cpu" else t.cpu().numpy(force=True), order="C")
            sid = self._add_bytes(arr.reshape(-1).view(np.uint8) if arr.size else b"", device)
            offset = 0
            strides = list(arr.strides)
        return {"k": "tensor", "storage": sid, "dtype": t.dtype.name, "shape": list(t.shape), "strides": strides,
                "offset": offset, "itemsize": itemsize, "requires_grad": bool(t.requires_grad),
                "param": type(t).__name__ == "Parameter"}

    def node(self, obj, depth: int = 0):
        if depth > _MAX_DEPTH:
            raise ValueError(f"flambeau.save: object nested deeper than {_MAX_DEPTH} levels")
        if obj is None:
            return {"k": "none"}
        if obj is True or obj is False:
            return {"k": "bool", "v": obj}
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if isinstance(obj, (bool, np.bool_)):
            return {"k": "bool", "v": bool(obj)}
        if isinstance(obj, (int, np.integer)):
            return {"k": "int", "v": str(int(obj))}
        if isinstance(obj, (float, np.floating)):
            return {"k": "float", "v": float(obj).hex()}
        if isinstance(obj, str):
            return {"k": "str", "v": obj}
        if isinstance(obj, (bytes, bytearray)):
            return {"k": "bytes", "v": bytes(obj).hex()}
        if isinstance(obj, dt.dtype):
            return {"k": "dtype", "v": obj.name}
        if isinstance(obj, type(CPU)):
            return {"k": "device", "v": str(obj)}
        if id(obj) in self.active:
            raise ValueError("flambeau.save: the object contains a reference cycle")
        if isinstance(obj, Size):
            return {"k": "size", "v": [int(n) for n in obj]}
        if isinstance(obj, (list, tuple, dict)):
            self.active.add(id(obj))
            try:
                if isinstance(obj, dict):
                    kind = "odict" if isinstance(obj, OrderedDict) else "dict"
                    return {"k": kind, "items": [[self.node(k, depth + 1), self.node(v, depth + 1)]
                                                 for k, v in obj.items()]}
                kind = "list" if isinstance(obj, list) else "tuple"
                return {"k": kind, "v": [self.node(x, depth + 1) for x in obj]}
            finally:
                self.active.discard(id(obj))
        raise _Unsupported(f"flambeau.save: cannot save an object of type {type(obj).__module__}."
                           f"{type(obj).__qualname__} (supported: tensors, dtypes, devices, None, bool, int, float, "
                           "str, bytes, and lists, tuples and dicts of them)")


def _write_all(f, chunks) -> None:
    for c in chunks:
        f.write(c)


def save(obj, f, format: str = "flambeau", **kwargs) -> None:
    """Save ``obj`` (tensors, state dicts, nested dicts/lists/tuples of them and Python scalars) to ``f``.

    Args:
        obj: a tensor, a ``state_dict``, an optimizer state dict, or any nesting of dicts (keys of
            any supported kind), lists and tuples holding tensors, ``None``, ``bool``, ``int``,
            ``float``, ``str``, ``bytes``, dtypes and devices.
        f: a path (``str`` or ``os.PathLike``) or a binary file object with ``write``.

        format: ``"flambeau"`` (the default: the format described in :mod:`flambeau._serialization`,
            which holds no code) or ``"torch"`` (the zip archive ``torch.save`` writes, which
            ``torch.load(f, weights_only=True)`` reads; tensors are saved from the CPU).
        kwargs: torch.save's ``pickle_module``, ``pickle_protocol`` and
            ``_use_new_zipfile_serialization`` are accepted and ignored.

    Tensors keep their dtype, shape, values, ``requires_grad`` and device name; tensors that share
    a storage (views, tied weights) are saved once and come back sharing memory. Any other picklable
    object in ``obj`` (``argparse.Namespace``, a whole module) makes the file torch's archive
    (Note [Objects beyond the format]), which :func:`load` reads with ``weights_only=False``, as torch's.
    """
    if format == "torch":
        from flambeau._torch_format import save_torch

        save_torch(obj, f)
        return
    if format != "flambeau":
        raise ValueError(f"flambeau.save: format must be 'flambeau' or 'torch', got {format!r}")
    w = _Writer()
    try:
        root = w.node(obj)
    except _Unsupported as unsupported:  # Note [Objects beyond the format]
        import pickle

        from flambeau._torch_format import save_torch

        try:
            save_torch(obj, f)
        except (pickle.PicklingError, AttributeError, TypeError) as e:  # (a local class, a lambda, a lock ...)
            raise TypeError(f"{unsupported}; nor can it be pickled: {e}") from None
        return
    header = json.dumps({"storages": w.storages, "root": root}, separators=(",", ":"),
                        allow_nan=False).encode("utf-8")
    data_crc = 0
    for c in w.chunks:
        data_crc = zlib.crc32(c, data_crc)
    prefix = _PREFIX.pack(MAGIC, VERSION, 0, len(header), w.size, zlib.crc32(header), data_crc)
    pad = b"\0" * ((-(len(prefix) + len(header))) % _ALIGN)
    chunks = [prefix, header, pad, *w.chunks]
    if isinstance(f, (str, bytes, os.PathLike)):
        with open(f, "wb") as fh:
            _write_all(fh, chunks)
    elif hasattr(f, "write"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("flambeau.save: the file object must be opened in binary mode")
        _write_all(f, chunks)
    else:
        raise TypeError(f"flambeau.save: f must be a path or a file object with write(), got {type(f).__name__}")


# --- loading ---------------------------------------------------------------------------------------
def finish_loaded(t: Tensor, requires_grad: bool, param: bool) -> Tensor:
    """A loaded tensor as it was saved: a ``Parameter`` (when flambeau-nn is installed) or a tensor,
    requiring grad or not."""
    if param:
        try:
            from flambeau.nn.parameter import Parameter
        except ImportError:  # pragma: no cover - flambeau-nn not installed
            Parameter = None
        if Parameter is not None:
            return Parameter(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


class _Reader:
    def __init__(self, header: dict, data: memoryview, map_location, name: str):
        self.data = data
        self.map_location = map_location
        self.name = name
        storages = header.get("storages")
        if not isinstance(storages, list):
            raise _Bad("the header has no storage table")
        self.storage_specs = storages
        self.buffers: dict[int, np.ndarray] = {}
        self.storage_objs: dict[int, Storage] = {}
        self.moved: dict[tuple, Tensor] = {}

    def _buffer(self, sid) -> np.ndarray:
        if type(sid) is not int or not 0 <= sid < len(self.storage_specs):
            raise _Bad(f"a tensor refers to storage {sid!r}, which does not exist")
        buf = self.buffers.get(sid)
        if buf is None:
            spec = self.storage_specs[sid]
            if not isinstance(spec, dict):
                raise _Bad("malformed storage entry")
            off, n = spec.get("offset"), spec.get("nbytes")
            if type(off) is not int or type(n) is not int or off < 0 or n < 0 or off + n > len(self.data):
                raise _Bad(f"storage {sid} lies outside the data section")
            # a fresh, aligned, writable copy (numpy allocations are aligned for every dtype)
            buf = np.empty(n, np.uint8)
            buf[:] = np.frombuffer(self.data, np.uint8, n, off)
            self.buffers[sid] = buf
            self.storage_objs[sid] = Storage(buf, CPU)
        return buf

    def tensor(self, node: dict) -> Tensor:
        d = _DTYPES.get(node.get("dtype"))
        if d is None:
            raise _Bad(f"unknown dtype {node.get('dtype')!r}")
        shape, strides, offset = node.get("shape"), node.get("strides"), node.get("offset")
        if not (_ints(shape) and _ints(strides) and len(shape) == len(strides) and type(offset) is int):
            raise _Bad("malformed tensor shape, strides or offset")
        if any(n < 0 for n in shape) or any(s < 0 for s in strides) or offset < 0:
            raise _Bad("negative tensor shape, strides or offset")
        if len(shape) > 64:
            raise _Bad("tensor has more than 64 dimensions")
        itemsize = d.itemsize
        # numpy refuses what does not fit in 64 bits even without elements: say so before it does
        if math.prod(max(n, 1) for n in shape) * itemsize > _MAX_BYTES or max(strides + [offset]) > _MAX_BYTES:
            raise _Bad(f"tensor of shape {shape}, strides {strides} and offset {offset} is too large "
                       f"(its {d.name} elements would span more than {_MAX_BYTES} bytes)")
        sid = node.get("storage")
        buf = self._buffer(sid)
        if any(s % itemsize for s in strides) or offset % itemsize:
            raise _Bad("tensor strides or offset are not multiples of its element size")
        numel = math.prod(shape)
        if numel:
            last = offset + sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize
            if last > buf.nbytes:
                raise _Bad(f"tensor of shape {shape} does not fit in its storage of {buf.nbytes} bytes")
            arr = np.ndarray(tuple(shape), d.np, buffer=buf, offset=offset, strides=tuple(strides))
        else:
            arr = np.empty(tuple(shape), d.np)
        t = _wrap(arr, CPU, self.storage_objs[sid] if numel else None, d)
        saved_device = self.storage_specs[sid].get("device", "cpu")
        if not isinstance(saved_device, str):
            raise _Bad("malformed storage device")
        t = self._place(t, saved_device, sid)
        return finish_loaded(t, node.get("requires_grad") is True and d.is_differentiable, node.get("param") is True)

    def _place(self, t: Tensor, saved_device: str, sid) -> Tensor:
        ml = self.map_location
        target = saved_device
        if callable(ml) and not isinstance(ml, (str, type(CPU))):
            out = ml(t, saved_device)
            if not isinstance(out, Tensor):
                raise RuntimeError(f"flambeau.load: {self.name}: map_location returned {type(out).__name__}, "
                                   "not a Tensor")
            return out
        if isinstance(ml, dict):
            target = ml.get(saved_device, saved_device)
        elif ml is not None:
            target = ml
        try:
            dev = to_device(target)
        except (RuntimeError, TypeError, ValueError) as e:
            if target is saved_device:
                raise _Bad(f"storage {sid} was saved on device {saved_device!r}, which is not a device ({e})") \
                    from None
            raise RuntimeError(f"flambeau.load: {self.name}: map_location gives {target!r} for the tensors saved "
                               f"on {saved_device!r}, which is not a device ({e})") from None
        if dev.type == "cpu":
            return t
        from flambeau import cuda

        if not cuda.is_available():
            raise RuntimeError(f"flambeau.load: {self.name}: attempting to deserialize object on a CUDA device "
                               f"({dev}) but flambeau.cuda.is_available() is False. If you are running on a CPU-only "
                               "machine, please use flambeau.load with map_location=flambeau.device('cpu') to map "
                               "your storages to the CPU.")
        try:
            return t.to(dev)
        except RuntimeError as e:  # no such device ordinal ...
            raise RuntimeError(f"flambeau.load: {self.name}: cannot put the tensors saved on {saved_device!r} "
                               f"on {dev}: {e}") from None

    def node(self, n, depth: int = 0):
        if depth > _MAX_DEPTH:
            raise _Bad("objects nested too deeply")
        if not isinstance(n, dict):
            raise _Bad("malformed node")
        k = n.get("k")
        if k == "none":
            return None
        if k == "bool":
            v = n.get("v")
            if type(v) is not bool:
                raise _Bad("malformed bool")
            return v
        if k == "int":
            v = n.get("v")
            if type(v) is not str or len(v) > 4300:
                raise _Bad("malformed int")
            try:
                return int(v)
            except ValueError:
                raise _Bad("malformed int") from None
        if k == "float":
            try:
                return float.fromhex(n["v"])
            except (KeyError, TypeError, ValueError, OverflowError):
                raise _Bad("malformed float") from None
        if k == "str":
            v = n.get("v")
            if type(v) is not str:
                raise _Bad("malformed str")
            return v
        if k == "bytes":
            try:
                return bytes.fromhex(n["v"])
            except (KeyError, TypeError, ValueError):
                raise _Bad("malformed bytes") from None
        if k in ("list", "tuple", "size"):
            v = n.get("v")
            if not isinstance(v, list):
                raise _Bad(f"malformed {k}")
            if k == "size":
                if not _ints(v):
                    raise _Bad("malformed size")
                return Size(v)
            items = [self.node(x, depth + 1) for x in v]
            return items if k == "list" else tuple(items)
        if k in ("dict", "odict"):
            items = n.get("items")
            if not isinstance(items, list):
                raise _Bad("malformed dict")
            out = OrderedDict() if k == "odict" else {}
            for pair in items:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise _Bad("malformed dict item")
                key = self.node(pair[0], depth + 1)
                try:
                    out[key] = self.node(pair[1], depth + 1)
                except TypeError:
                    raise _Bad("unhashable dict key") from None
            return out
        if k == "dtype":
            d = _DTYPES.get(n.get("v"))
            if d is None:
                raise _Bad(f"unknown dtype {n.get('v')!r}")
            return d
        if k == "device":
            try:
                return to_device(n["v"])
            except (KeyError, TypeError, ValueError, RuntimeError):
                raise _Bad("malformed device") from None
        if k == "tensor":
            return self.tensor(n)
        raise _Bad(f"unknown node kind {k!r}")


def _ints(x) -> bool:
    return isinstance(x, list) and all(type(v) is int for v in x)


def _read_bytes(f) -> tuple[bytes, str]:
    if isinstance(f, (str, bytes, os.PathLike)):
        with open(f, "rb") as fh:
            return fh.read(), os.fsdecode(f)
    if hasattr(f, "read"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("flambeau.load: the file object must be opened in binary mode")
        data = f.read()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("flambeau.load: the file object must be opened in binary mode")
        return bytes(data), getattr(f, "name", "<file object>")
    raise TypeError(f"flambeau.load: f must be a path or a file object with read(), got {type(f).__name__}")


def load(f, map_location=None, weights_only: bool = True, **kwargs):
    """Load an object saved by :func:`save`, or by ``torch.save`` (read as ``torch.load(weights_only=True)``
    reads it: Note [Reading torch checkpoints safely] in ``flambeau._torch_format``).

    Args:
        f: a path (``str`` or ``os.PathLike``) or a binary file object with ``read``.
        map_location: where to put tensors: None (the device they were saved from), a device or
            device string (all tensors), a dict mapping saved device names to new ones
            (``{"cuda:0": "cpu"}``), or a callable ``fn(tensor_on_cpu, saved_device_str) -> Tensor``.
        weights_only: for torch's archives: True (the default, as torch's) reads only tensors,
            containers, numbers and the globals :func:`flambeau.serialization.add_safe_globals` allows;
            False unpickles any object, importing and running what the pickle names (only for files
            you trust). flambeau's own format holds no code whatever its value.

    Returns:
        The saved object: tensors (``Parameter`` for saved parameters), dicts (``OrderedDict``
        where one was saved), lists, tuples and scalars.

    Raises:
        RuntimeError: if the file is not a flambeau file, is truncated, corrupted (checksums) or
            malformed (shapes too large, unknown devices ...), or its tensors cannot be placed where
            ``map_location`` says (no CUDA ...); the message names the file and the problem. Loading
            never allocates more than the file's data section holds.
    """
    raw, name = _read_bytes(f)
    try:
        if raw[:4] == b"PK\x03\x04":  # a zip archive: torch.save's format
            from flambeau._torch_format import load_torch

            try:
                return load_torch(raw, map_location, name, _Reader, _Bad, weights_only=weights_only)
            except _Bad as e:
                raise RuntimeError(f"flambeau.load: {name} is not a valid PyTorch checkpoint: {e}") from None
        return _decode(raw, map_location, name)
    except _Bad as e:
        raise RuntimeError(f"flambeau.load: {name} is not a valid flambeau file: {e}") from None
    except RecursionError:
        raise RuntimeError(f"flambeau.load: {name} is not a valid flambeau file: objects nested too deeply") from None
    except RuntimeError as e:
        if name in str(e):
            raise
        raise RuntimeError(f"flambeau.load: {name}: {e}") from e
    except Exception as e:  # a case the checks above miss (or map_location's own error): still name the file
        raise RuntimeError(f"flambeau.load: {name} could not be loaded: {type(e).__name__}: {e}") from e


def _decode(raw: bytes, map_location, name: str):
    if len(raw) < _PREFIX.size:
        if raw[:len(MAGIC)] != MAGIC[:len(raw)] or not raw:
            raise _Bad("bad magic number (not saved by flambeau.save)" if raw else "the file is empty")
        raise _Bad(f"truncated: {len(raw)} bytes, shorter than the {_PREFIX.size}-byte prefix")
    magic, version, flags, hlen, dlen, hcrc, dcrc = _PREFIX.unpack_from(raw, 0)
    if magic != MAGIC:
        raise _Bad("bad magic number (not saved by flambeau.save)")
    if version != VERSION:
        raise _Bad(f"unsupported format version {version} (this flambeau reads version {VERSION})")
    start = _PREFIX.size
    data_start = start + hlen + ((-(start + hlen)) % _ALIGN)
    if hlen > len(raw) or data_start + dlen > len(raw):
        raise _Bad(f"truncated: {len(raw)} bytes, expected {data_start + dlen}")
    if data_start + dlen != len(raw):
        raise _Bad(f"{len(raw) - data_start - dlen} unexpected bytes after the data")
    header_bytes = raw[start:start + hlen]
    if zlib.crc32(header_bytes) != hcrc:
        raise _Bad("header checksum mismatch (the file is corrupted)")
    data = memoryview(raw)[data_start:data_start + dlen]
    if zlib.crc32(data) != dcrc:
        raise _Bad("data checksum mismatch (the file is corrupted)")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _Bad("the header is not valid JSON") from None
    if not isinstance(header, dict) or "root" not in header:
        raise _Bad("the header has no root object")
    return _Reader(header, data, map_location, name).node(header["root"])
