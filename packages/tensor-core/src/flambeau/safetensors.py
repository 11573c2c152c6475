"""Save and load dictionaries of tensors in the safetensors format, as ``safetensors.torch`` does.

``from flambeau.safetensors import save_file, load_file`` replaces ``from safetensors.torch import
save_file, load_file``: the same functions (:func:`save_file`, :func:`load_file`, :func:`save`,
:func:`load`, and :func:`save_model`/:func:`load_model` for models with tied weights), the same
arguments and the same errors. Files are interchangeable with PyTorch's: a file
``safetensors.torch.save_file`` wrote loads here with its dtypes, and the other way round.

The format is a JSON header (names, dtypes, shapes, byte ranges, optional ``str -> str`` metadata)
followed by the raw little-endian bytes of each tensor; it holds data only, so loading a file can run
no code. flambeau reads and writes it through the ``safetensors`` package's framework-neutral core
(``safetensors.serialize``/``serialize_file``, ``deserialize`` and ``safe_open(framework="numpy")``),
which is an optional dependency, imported on first use.

As in ``safetensors.torch``, the tensors saved must be contiguous, dense, and must not overlap in
memory, so that each name owns its bytes on disk (a model with tied weights: :func:`save_model`).
CUDA tensors are copied to the host to be written; ``load_file(..., device="cuda")`` puts the
loaded tensors on the GPU.

Dtypes: ``bool``, ``uint8``, ``int8``, ``int16``, ``int32``, ``int64``, ``float16``, ``float32``,
``float64`` and, where flambeau has them, ``bfloat16`` and ``complex64``. A file holding another
dtype (float8, unsigned 16/32/64-bit integers) raises ``TypeError`` naming the tensor.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict

import numpy as np

from flambeau import _dtype as dt
from flambeau._device import device as _device_type
from flambeau._factories import from_numpy
from flambeau._tensor import Tensor

__all__ = ["save", "save_file", "load", "load_file", "save_model", "load_model"]

# safetensors' dtype codes (the header's "dtype" field) -> flambeau dtype names. bfloat16 and complex64
# are looked up on flambeau._dtype when used, as they exist only in flambeau versions that have them.
_CODES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64",
          "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64", "C64": "complex64"}
# The codes numpy reads by itself through safe_open(framework="numpy"); the others are read as bytes.
_NUMPY_CODES = {"BOOL", "U8", "I8", "I16", "I32", "I64", "F16", "F32", "F64", "C64"}


def _package():
    """The ``safetensors`` package (0.8 or later: its ``TensorSpec``), or an ImportError saying how to install it."""
    try:
        import safetensors
    except ImportError:
        raise ImportError("flambeau.safetensors needs the safetensors package, which is not installed (pip install "
                          "'safetensors>=0.8', or pip install 'flambeau-tensor-core[safetensors]')") from None
    if not hasattr(safetensors, "TensorSpec"):  # before 0.8, serialize() took another argument type
        raise ImportError(f"flambeau.safetensors needs safetensors 0.8 or later, found "
                          f"{getattr(safetensors, '__version__', 'an older one')} (pip install -U 'safetensors>=0.8')")
    return safetensors


# --- saving ----------------------------------------------------------------------------------------
def _end_ptr(t: Tensor) -> int:
    return t.data_ptr() + t.numel() * t.element_size() if t.numel() else t.data_ptr()


def _shared_groups(tensors: dict[str, Tensor]) -> list[set[str]]:
    """Groups of names whose tensors overlap in memory (safetensors.torch's ``_find_shared_tensors``).

    Tensors of one storage that do not overlap (two halves of a buffer) are separate groups, as in
    safetensors.torch: each still owns its bytes on disk.
    """
    by_storage = defaultdict(set)
    for name, t in tensors.items():
        ptr, nbytes = t.untyped_storage().data_ptr(), _storage_nbytes(t)
        if ptr != 0 and nbytes != 0:
            by_storage[(str(t.device), ptr, nbytes)].add(name)
    groups = []
    for names in sorted(by_storage.values(), key=sorted):
        areas = sorted((tensors[n].data_ptr(), _end_ptr(tensors[n]), n) for n in names)
        _, last_stop, first = areas[0]
        groups.append({first})
        for start, stop, name in areas[1:]:
            if start >= last_stop:
                groups.append({name})
            else:
                groups[-1].add(name)
            last_stop = stop
    return groups


def _storage_nbytes(t: Tensor) -> int:
    nbytes = t.untyped_storage().nbytes
    return nbytes() if callable(nbytes) else nbytes  # a property in flambeau's Storage today, a method in torch's


def _check(tensors) -> None:
    """safetensors.torch's checks, with its error types and messages."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, flambeau.Tensor] but received {type(tensors)}")
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, Tensor):
            raise ValueError(f"Key `{k}` is invalid, expected flambeau.Tensor but received {type(v)}")
        if getattr(v, "is_sparse", False):
            sparse.append(k)
    if sparse:
        raise ValueError(f"You are trying to save a sparse tensors: `{sparse}` which this library does not support."
                         " You can make it a dense tensor before saving with `.to_dense()` but be aware this might"
                         " make a much larger file than needed.")
    failing = [names for names in _shared_groups(tensors) if len(names) > 1]
    if failing:
        raise RuntimeError(f"Some tensors share memory, this will lead to duplicate memory on disk and potential "
                           f"differences when loading them again: {failing}. Save one tensor of each group (or a "
                           "`.clone()` of the others). More information at "
                           "https://huggingface.co/docs/safetensors/torch_shared_tensors")
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError(f"You are trying to save a non contiguous tensor: `{k}` which is not allowed. It either "
                             "means you are trying to save tensors which are reference of each other in which case "
                             "it's recommended to save only the full tensors, and reslice at load time, or simply "
                             "call `.contiguous()` on your tensor to pack it before saving.")


def _specs(tensors: dict[str, Tensor], keep_alive: list) -> dict:
    """The ``TensorSpec`` of each tensor: a pointer to its little-endian bytes on the host."""
    spec = _package().TensorSpec
    out = {}
    for k, v in tensors.items():
        arr = v.detach().cpu().numpy() if v.device.type != "cpu" else v.detach().numpy()
        if sys.byteorder == "big" and arr.dtype.itemsize > 1:
            arr = arr.byteswap(inplace=False)
        keep_alive.append(arr)  # the serializer reads through the raw pointer: the array must outlive it
        out[k] = spec(dtype=v.dtype.name, shape=list(v.shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    return out


def save(tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The safetensors file holding ``tensors``, as bytes.

    Args:
        tensors: name -> tensor; each contiguous, dense, and not overlapping another in memory.
        metadata: optional ``str -> str`` annotations stored in the header (read them with
            ``safetensors.safe_open(...).metadata()``).

    Raises:
        ValueError: ``tensors`` is not a dict of tensors, or one of them is not contiguous.
        RuntimeError: two tensors share memory.

    Example::

        >>> data = save({"w": flambeau.zeros(2, 3)})
        >>> load(data)["w"].shape
        flambeau.Size([2, 3])
    """
    _check(tensors)
    keep_alive: list = []
    return bytes(_package().serialize(_specs(tensors, keep_alive), metadata=metadata))


def save_file(tensors: dict[str, Tensor], filename: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to ``filename`` in the safetensors format (see :func:`save`).

    Example::

        >>> save_file(model.state_dict(), "model.safetensors")
        >>> model.load_state_dict(load_file("model.safetensors"))
    """
    _check(tensors)
    keep_alive: list = []
    _package().serialize_file(_specs(tensors, keep_alive), filename, metadata=metadata)


# --- loading ---------------------------------------------------------------------------------------
def _dtype_of(code: str, name: str) -> dt.dtype:
    d = getattr(dt, _CODES.get(code, ""), None)
    if not isinstance(d, dt.dtype):
        raise TypeError(f"flambeau.safetensors: tensor {name!r} has dtype {code}, which flambeau does not support")
    return d


def _tensor(raw, code: str, shape, name: str) -> Tensor:
    """A CPU tensor from ``raw``: a numpy array safetensors read, or the tensor's bytes."""
    d = _dtype_of(code, name)
    if not isinstance(raw, np.ndarray):
        raw = np.frombuffer(raw, dtype=d.np.newbyteorder("<")).reshape(shape)
    if raw.dtype.byteorder == ">" or (raw.dtype.byteorder == "<" and sys.byteorder == "big"):
        raw = raw.astype(raw.dtype.newbyteorder("="))
    if not raw.flags.writeable or not raw.flags.c_contiguous:
        raw = np.array(raw, order="C")  # a tensor owns writable memory, not the file's read-only pages
    return from_numpy(raw.view(d.np))


def _to_device(tensors: dict[str, Tensor], device) -> dict[str, Tensor]:
    if isinstance(device, int) and not isinstance(device, bool):
        device = f"cuda:{device}"
    dev = device if isinstance(device, _device_type) else _device_type(device)
    if dev.type == "cpu":
        return tensors
    return {k: v.to(dev) for k, v in tensors.items()}


def load_file(filename: str | os.PathLike, device: str | int = "cpu") -> dict[str, Tensor]:
    """The tensors of the safetensors file ``filename``, as a dict name -> tensor.

    Args:
        filename: a file written by :func:`save_file`, ``safetensors.torch.save_file`` or any other
            safetensors writer.
        device: where to put the tensors: ``"cpu"`` (default), ``"cuda"``, ``"cuda:1"``, a
            :class:`flambeau.device` or a CUDA ordinal (``0``).

    Returns:
        dict[str, Tensor]: in the file's order; each tensor owns its memory (nothing stays mapped).

    Raises:
        TypeError: a tensor has a dtype flambeau does not support (float8, uint16/32/64 ...).
        safetensors.SafetensorError: the file is not a valid safetensors file.
    """
    safe_open = _package().safe_open
    with safe_open(filename, framework="numpy") as f:
        codes = {k: f.get_slice(k).get_dtype() for k in f.keys()}
        if all(c in _NUMPY_CODES for c in codes.values()):
            tensors = {k: _tensor(f.get_tensor(k), c, None, k) for k, c in codes.items()}
        else:  # numpy cannot read bfloat16 here: read the bytes instead
            for k, c in codes.items():
                _dtype_of(c, k)
            with open(filename, "rb") as fh:
                return _to_device(load(fh.read()), device)
    return _to_device(tensors, device)


def load(data: bytes) -> dict[str, Tensor]:
    """The tensors of a safetensors file given as bytes (what :func:`save` returns), on the CPU."""
    return {k: _tensor(v["data"], v["dtype"], v["shape"], k) for k, v in _package().deserialize(data)}


# --- models with tied weights ----------------------------------------------------------------------
def _duplicates(state_dict: dict[str, Tensor], preferred=()) -> dict[str, list[str]]:
    """kept name -> the names that share its memory, to drop (safetensors.torch's ``_remove_duplicate_names``).

    The kept name covers its whole storage (a name that views part of it cannot stand for the
    others); among those, a name in ``preferred`` (the file's), else the first in sorted order.
    """
    drop: dict[str, list[str]] = defaultdict(list)
    for group in _shared_groups(state_dict):
        if len(group) < 2:
            continue
        complete = sorted(n for n in group if state_dict[n].data_ptr() == state_dict[n].untyped_storage().data_ptr()
                          and state_dict[n].nbytes == _storage_nbytes(state_dict[n]))
        if not complete:
            raise RuntimeError(f"Error while trying to find names to remove to save state dict, but found no suitable "
                               f"name to keep for saving amongst: {group}. None is covering the entire storage. "
                               "Refusing to save/load the model since you could be storing much more memory than "
                               "needed.")
        keep = next((n for n in complete if n in preferred), complete[0])
        drop[keep] = [n for n in sorted(group) if n != keep]
    return drop


def save_model(model, filename: str | os.PathLike, metadata: dict[str, str] | None = None,
               force_contiguous: bool = True) -> None:
    """Save ``model.state_dict()`` to ``filename``, keeping one name of each group of tied tensors.

    Each dropped name is recorded in the metadata as ``dropped name -> kept name`` (unless
    ``metadata`` already has that key); :func:`load_model` restores the ties' other names.
    ``force_contiguous`` saves ``.contiguous()`` copies of non-contiguous tensors.
    """
    state_dict = model.state_dict()
    for kept, dropped in _duplicates(state_dict).items():
        for name in dropped:
            metadata = {} if metadata is None else metadata
            metadata.setdefault(name, kept)
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=metadata)
    except ValueError as e:
        raise ValueError(f"{e} Or use save_model(..., force_contiguous=True), read the docs for potential caveats.") \
            from None


def load_model(model, filename: str | os.PathLike, strict: bool = True,
               device: str | int = "cpu") -> tuple[set[str], list[str]]:
    """Load a file of :func:`save_model` (or any safetensors file of ``model``'s weights) into ``model``.

    Tied names that the file holds once are filled through their tie.

    Returns:
        (missing, unexpected): the model's names the file did not set, the file's names the model
        does not have.

    Raises:
        RuntimeError: ``strict`` and some names are missing or unexpected.
    """
    state_dict = load_file(filename, device=device)
    ties = _duplicates(model.state_dict(), preferred=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing)
    for dropped in ties.values():
        for name in dropped:
            if name in missing:
                missing.remove(name)
            else:
                unexpected.append(name)
    if strict and (missing or unexpected):
        error = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(error)
    return missing, unexpected
