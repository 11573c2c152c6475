"""Indexing (``__getitem__``/``__setitem__``) and index operators: gather, scatter, index_select ...

``t[key]`` is the operator ``index``: ints, slices (positive steps), ``None`` and ``...`` give a
VIEW of ``t`` (shared storage, numpy basic indexing on CPU, Note [Device-agnostic views] in
``shape.py`` elsewhere); integer/bool tensors, lists and arrays (advanced indexing, in torch's order:
Note [Advanced indexing order]) give a copy. ``t[key] = value`` is the in-place operator ``index_put``
(recorded with ``inplace=True``); ``index_put_(indices, values, accumulate)`` is its tensor-only form.
A key is recorded for autograd as a tuple whose entries are ints, slices, Ellipsis or Tensors
(lists are turned into int64/bool tensors); None only in ``index_put``'s own indices, where it means
the whole dim (``t[key]`` applies None as ``unsqueeze`` first under autograd: :func:`_new_axes_first`).

Kernel convention (arrays in, array out; every device; CPU kernels in ``flambeau._kernels.cpu.indexing``):
    index: ``kernel(array, key) -> array`` for advanced keys (entries: int, slice, None, Ellipsis,
        backend integer/bool arrays).  index_put: ``kernel(array, key, values, accumulate)`` in place;
        ``values`` is a backend array or a Python scalar.
    gather: ``kernel(array, dim, index) -> array``;  scatter: ``kernel(out, dim, index, src, reduce)``
        in place, ``src`` an array or scalar, ``reduce`` None/'add'/'multiply';
    scatter_add: ``kernel(out, dim, index, src)`` in place;
    scatter_reduce: ``kernel(out, dim, index, src, reduce, include_self)`` in place;
    index_select: ``kernel(array, dim, index) -> array``;  index_add: ``kernel(out, dim, index, src, alpha)``;
    index_copy: ``kernel(out, dim, index, src)``;  index_fill: ``kernel(out, dim, index, value)`` in place;
    take: ``kernel(array, index) -> array``;  put: ``kernel(out, index, src, accumulate)`` in place;
    masked_fill: ``kernel(array, mask, value, out_dtype) -> array``; masked_fill_: ``kernel(out, mask, value)``
        (outside the table: :data:`MASKED_FILL_INPLACE_KERNELS`);
    masked_select: ``kernel(array, mask) -> array``;  masked_scatter: ``kernel(out, mask, src)`` in place;
    nonzero: ``kernel(array) -> (n, ndim) int64 array``.
On the CPU the fronts check index bounds on the host wherever a kernel does not, so kernels may assume valid
indices except for gather, scatter and index_select, whose kernels check as they go and raise ``OutOfBounds``
(the fronts turn it into torch's message). On CUDA the fronts never read an index on the host: the kernels
check every index on the device and report a bad one through the device's error flag, raised at the next
host synchronisation (Note [Device-side index checks] in ``flambeau._kernels.cuda.indexing``). Only the
operators whose output shape depends on the data (nonzero, masked_select, indexing with a boolean mask)
read one count on the host.
"""

from __future__ import annotations

import re

import numpy as np

from flambeau import _dtype as dt
from flambeau._backends import backend
from flambeau._device import CPU
from flambeau._factories import tensor
from flambeau._kernels.cpu.indexing import OutOfBounds, masked_fill_inplace
from flambeau._ops import shape as _shape
from flambeau._ops._common import (
    Tensor,
    _wrap,
    broadcast_shapes,
    check_tensor,
    common_device,
    grad_state,
    inplace_by_engine,
    inplace_needs_engine,
    record,
    record_if_needed,
    wrap_dim,
)
from flambeau._ops._registry import declare
from flambeau._value_checks import check_fits

__all__ = [
    "getitem", "setitem", "index_put", "index_put_", "nonzero", "argwhere", "masked_fill", "masked_select",
    "masked_scatter", "gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add",
    "index_copy", "index_fill", "take", "put_",
]

_ndarray = np.ndarray
_int64 = dt.int64
_bool = dt.bool
_mkview = _shape._mkview
_src = _shape._src


def _host(x: Tensor) -> np.ndarray:
    return x._data if x._device is CPU else backend(x._device.type).to_numpy(x._data)


def _bounds(idx, size: int, dim: int, negative_ok: bool, msg=None):
    """Raise torch's IndexError/RuntimeError if an index in ``idx`` (host array) is out of range."""
    if idx.size == 0:
        return
    lo, hi = int(idx.min()), int(idx.max())
    bad = hi if hi >= size else (lo if (lo < -size if negative_ok else lo < 0) else None)
    if bad is not None:
        if msg is not None:
            raise msg(bad)
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


_INDEX_DTYPES = frozenset({"int32", "int64"})  # what index tensors may be (torch's int32/int64)


def _check_index_dtype(index: Tensor, opname: str, argname: str = "index") -> None:
    if index.dtype.name not in _INDEX_DTYPES:  # (uint8 and the small ints too: torch refuses them)
        raise RuntimeError(f"{opname}(): Expected dtype int32/int64 for {argname}, but got {index.dtype}")


# --- __getitem__ ----------------------------------------------------------------------------------
_STEP_ERR = "step must be greater than zero"
_BASIC = (int, slice, type(None), type(Ellipsis))
_ALL = slice(None)


def _np_key(self: Tensor, key):
    """numpy's form of ``key`` (device arrays for tensors) and whether it needs advanced indexing."""
    items = key if key.__class__ is tuple else (key,)
    out = []
    advanced = False
    dev = self._device
    for k in items:
        c = k.__class__
        if c is int or c is type(None) or k is Ellipsis:
            out.append(k)
        elif c is slice:
            if k.step is not None and k.step.__index__() <= 0:
                raise ValueError(_STEP_ERR)
            out.append(k)
        elif isinstance(k, Tensor):
            if k._device is not dev and k._device is not CPU:
                raise RuntimeError(
                    f"indices should be either on cpu or on the same device as the indexed tensor ({dev})"
                )
            if k.dtype.is_floating_point:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            data = k._data if k._device is dev else k.to(device=dev)._data
            if k.dtype is dt.uint8:
                data = data.astype(np.bool_) if dev is CPU else k.to(device=dev, dtype=_bool)._data
            out.append(data)
            advanced = True
        elif c is bool or isinstance(k, (np.bool_,)):
            out.append(bool(k))
            advanced = True
        elif isinstance(k, (np.integer,)):
            out.append(int(k))
        elif isinstance(k, (list, tuple, range, np.ndarray)):  # x[range(n), y] as torch: an index list
            arr = np.asarray(k) if not (isinstance(k, list) and any(isinstance(e, Tensor) for e in k)) \
                else np.asarray([int(e) for e in k])
            if arr.dtype.kind == "f" and arr.size:  # an empty list or range is an empty int64 index
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            if arr.dtype.kind not in "biu" and arr.size:
                raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                                 f"are valid indices (got {type(k).__name__})")
            if arr.dtype.kind != "b":
                arr = arr.astype(np.int64, copy=False)
            out.append(arr if dev is CPU else backend(dev.type).from_numpy(arr, dev))
            advanced = True
        elif hasattr(k, "__index__"):
            out.append(k.__index__())
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                             f"valid indices (got {type(k).__name__})")
    return tuple(out), advanced


# numpy messages rewritten as torch's; re compiles them on the first error, not at import
_RE_BOUNDS = r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)"
_RE_TOO_MANY = r"array is (\d+)-dimensional, but (\d+) were indexed"
_RE_MASK = r"along axis (\d+); size of axis is (\d+) but size of corresponding boolean axis is (\d+)"
_RE_BCAST = r"broadcast together with shapes (.*)$"


def _index_error(e: Exception, shape) -> Exception:
    """numpy's indexing error rewritten as torch's."""
    msg = str(e)
    m = re.search(_RE_BOUNDS, msg)
    if m:
        return IndexError(f"index {m[1]} is out of bounds for dimension {m[2]} with size {m[3]}")
    m = re.search(_RE_TOO_MANY, msg)
    if m or "too many indices" in msg:
        if len(shape) == 0:  # old programs' ``loss.data[0]``: torch's pointer to item()
            return IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                              "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        return IndexError(f"too many indices for tensor of dimension {len(shape)}")
    m = re.search(_RE_MASK, msg)
    if m:
        return IndexError(f"The shape of the mask [{m[3]}] at index {m[1]} does not match the shape of the indexed "
                          f"tensor [{m[2]}] at index {m[1]}")
    m = re.search(_RE_BCAST, msg)
    if m:
        shapes = ", ".join("[" + s.strip("()").rstrip(",").replace(",", ", ").replace("  ", " ") + "]"
                           for s in m[1].split())
        return IndexError(f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}")
    return IndexError(msg)


def _key_for_record(key):
    items = key if key.__class__ is tuple else (key,)
    out = []
    for k in items:
        if isinstance(k, (list, range, np.ndarray)) or (k.__class__ is tuple):
            arr = np.asarray(k)
            out.append(tensor(arr, dtype=_bool if arr.dtype.kind == "b" else _int64))
        elif isinstance(k, np.integer):
            out.append(int(k))
        else:
            out.append(k)
    return tuple(out)


def _with_new_axes(src, key):
    """``src[key]`` for a basic key holding None, with torch's strides for the new axes.

    numpy gives new axes stride 0; torch inserts them one at a time (``unsqueeze``), each with
    ``size * stride`` of the next dim not yet indexed (1 past the last dim).
    """
    rest = tuple(k for k in key if k is not None)
    arr = src[rest if any(k is Ellipsis for k in rest) else rest + (Ellipsis,)]
    nconsume = sum(1 for k in key if k is not None and k is not Ellipsis)
    shape, strides = [], []
    od = 0  # next dim of src not yet indexed
    rd = 0  # next dim of arr
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(src.shape[od] * src.strides[od] if od < src.ndim else src.itemsize)
        elif k is Ellipsis:
            n = src.ndim - nconsume
            shape.extend(arr.shape[rd:rd + n])
            strides.extend(arr.strides[rd:rd + n])
            rd += n
            od += n
        elif k.__class__ is slice:
            shape.append(arr.shape[rd])
            strides.append(arr.strides[rd])
            rd += 1
            od += 1
        else:
            od += 1
    shape.extend(arr.shape[rd:])
    strides.extend(arr.strides[rd:])
    return _shape._strided(arr, tuple(shape), tuple(strides))


def _is_index_array(k) -> bool:
    """Whether a numpy-form key entry is an index array (host or device), not int/slice/None/.../bool."""
    return not (k.__class__ in _BASIC or k is Ellipsis or k.__class__ is bool)


def _dims_of(k) -> int:
    """How many dims of the indexed tensor a numpy-form key entry other than None and ``...`` consumes."""
    if k.__class__ is bool:
        return 0
    return k.ndim if _is_index_array(k) and k.dtype == np.bool_ else 1


def _well_formed(npkey, ndim: int) -> bool:
    # otherwise numpy raises torch's error ("too many indices ...") on the key as it is
    return (sum(1 for k in npkey if k is Ellipsis) <= 1
            and sum(_dims_of(k) for k in npkey if k is not None and k is not Ellipsis) <= ndim)


def _is_int_array_0d(k) -> bool:
    return _is_index_array(k) and k.ndim == 0 and k.dtype != np.bool_


def _torch_split(self: Tensor, npkey):
    """torch's two steps for an advanced key: ``(basic key, advanced key)``, or None if numpy's one step agrees.

    Note [Advanced indexing order]: torch first applies ints (0-dim integer tensors among them), slices,
    None and ``...`` as a view, then the index arrays to what is left, placing their result where the
    first array stood if the arrays are adjacent and first otherwise. numpy indexes with ints and arrays
    together, so an int, None or ``...`` between index arrays (``x[i, :, j]``, ``x[None, i, ..., j]``)
    orders the result differently. Keys of index arrays and slices only are the same in both.
    """
    if len(npkey) < 2:
        return None
    split, taken, ellipses = False, 0, 0
    for k in npkey:  # one pass decides; most keys need no split
        c = k.__class__
        if c is slice:
            taken += 1
        elif c is int or k is None or k is Ellipsis:
            split = True
            taken += c is int
            ellipses += k is Ellipsis
        elif c is bool:
            return None  # numpy's True/False index is torch's
        elif k.dtype == np.bool_:
            taken += k.ndim
        else:
            taken += 1
            split = split or k.ndim == 0
    if not split or ellipses > 1 or taken > self._data.ndim:
        return None  # nothing to reorder, or a bad key numpy reports as torch does
    basic, adv = [], []
    for k in npkey:
        if k.__class__ is int:
            basic.append(k)
        elif _is_int_array_0d(k):
            basic.append(int(k if self._device is CPU else backend(self._device.type).to_numpy(k)))
        elif _is_index_array(k):
            basic.extend([_ALL] * _dims_of(k))
            adv.append(k)
        else:  # a slice, None or ...: dims of the view that the index arrays leave alone
            basic.append(k)
            adv.extend([_ALL] * (self._data.ndim - taken if k is Ellipsis else 1))
    if all(k.__class__ is slice for k in adv):  # a 0-dim index was the only array: numpy's copy is torch's value
        return None
    return tuple(basic), tuple(adv)


def _basic_view_data(self: Tensor, basic: tuple):
    """The backend array of the view ``self[basic]`` (ints, slices, None, ``...``) on any device."""
    arr = _src(self)[basic]
    return arr if self._device is CPU else _mkview(self, arr)._data


def _new_axes_first(self: Tensor, npkey, items):
    """``(u, key)`` with ``self[items] == u[key]``: ``u`` is ``self`` unsqueezed where ``items`` holds None.

    Under autograd a key with None is applied as torch does: the new axes are ``unsqueeze`` views and the
    key recorded for ``index``/``index_put`` holds ``slice(None)`` in their place. A recorded key never
    holds None, which ``index_put`` would read as "the whole dim".
    """
    rest = self._data.ndim - sum(_dims_of(k) for k in npkey if k is not None and k is not Ellipsis)
    u, d, key = self, 0, []
    for k, item in zip(npkey, items):
        if k is None:
            u = _shape.unsqueeze(u, d)
            key.append(_ALL)
            d += 1
        else:
            key.append(item)
            d += rest if k is Ellipsis else _dims_of(k)
    return u, tuple(key)


INDEX = declare("index(Tensor self, Tensor?[] indices) -> Tensor", function=False, method=False, category="indexing")


@INDEX.front
def getitem(self: Tensor, key) -> Tensor:
    """``self[key]``: a view for ints, slices, None and ``...``; a copy for tensor/list/bool indices."""
    kc = key.__class__
    if self._device is CPU and (kc is int or (kc is slice and key.step is None)):
        # fast path: t[i], t[a:b]
        data = self._data
        try:
            arr = data[key]
        except IndexError as e:
            raise _index_error(e, data.shape) from None
        if arr.__class__ is not _ndarray:
            arr = data[key, ...]
        out = _wrap(arr, CPU, self._storage, self.dtype)
        base = self._base
        out._base = self if base is None else base
        if self._requires_grad and grad_state.enabled:
            record(INDEX, (self, (key,)), {}, out)
        return out
    npkey, advanced = _np_key(self, key)
    dev = self._device
    recording = self._requires_grad and grad_state.enabled
    if recording and any(k is None for k in npkey) and _well_formed(npkey, self._data.ndim):
        return getitem(*_new_axes_first(self, npkey, key if kc is tuple else (key,)))
    try:
        if not advanced:
            src = _src(self)
            arr = src[npkey]
            if arr.__class__ is not _ndarray:
                arr = src[npkey + (Ellipsis,)]
            if None in npkey:
                arr = _with_new_axes(src, npkey)
            out = _mkview(self, arr)
        else:
            data, split = self._data, _torch_split(self, npkey)
            if split is not None:
                data, npkey = _basic_view_data(self, split[0]), split[1]
            out = _wrap(INDEX.kernel(dev.type)(data, npkey), dev, dtype=self.dtype)
    except IndexError as e:
        raise _index_error(e, self._data.shape) from None
    if recording:
        record(INDEX, (self, _key_for_record(key)), {}, out)
    return out


INDEX.dunders["__getitem__"] = getitem


# --- __setitem__ / index_put ----------------------------------------------------------------------
INDEX_PUT = declare("index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
                    category="indexing")


def _setitem_error(self, npkey, vshape, advanced, data):
    try:
        target = _src(self)[npkey].shape if not advanced else (data[npkey].shape if self._device is CPU else None)
    except IndexError as e:
        return _index_error(e, self._data.shape)
    if target is not None and not advanced:
        try:
            _shape._expand_shape(tuple(vshape)[-len(target):] if len(vshape) > len(target) else tuple(vshape),
                                 tuple(target), lambda: "")
        except RuntimeError as e:
            return e
    return RuntimeError(f"shape mismatch: value tensor of shape {list(vshape)} cannot be broadcast to indexing "
                        f"result of shape {list(target) if target is not None else '?'}")


def _values_data(self: Tensor, value):
    if isinstance(value, Tensor):
        if value._device is not self._device and not (value._device is CPU and value._data.ndim == 0):
            value = value.to(device=self._device)
        if value._device is not self._device:
            return value.item()
        data = value._data
        shape = data.shape
        if shape and shape[0] == 1:  # leading dims of one dropped, as torch's setitem (``t[0] = v`` of a (1,) ``v``)
            lead = next((i for i, n in enumerate(shape) if n != 1), len(shape))
            data = data.reshape(shape[lead:])
        return data
    if isinstance(value, (int, float, bool, np.number, np.bool_)):
        return value
    return np.asarray(value)


def setitem(self: Tensor, key, value) -> None:
    """``self[key] = value``: write ``value`` (a number or broadcastable tensor of any dtype) in place."""
    kc = key.__class__
    if inplace_needs_engine(self, value):
        items = key if kc is tuple else (key,)
        if any(k is None for k in items):
            npkey, _ = _np_key(self, key)
            if _well_formed(npkey, self._data.ndim):
                # into a view with the new axes (Note [In-place operators under autograd] rebases it)
                setitem(*_new_axes_first(self, npkey, items), value)
                return
        inplace_by_engine(INDEX_PUT, (self, _key_for_record(key), value), {"accumulate": False})
        return
    dev = self._device
    vdata = _values_data(self, value)
    if dev is CPU and (kc is int or (kc is slice and key.step is None)):
        npkey, advanced = key, False
    else:
        npkey, advanced = _np_key(self, key)
    data, split = self._data, advanced and _torch_split(self, npkey)
    if split:
        data, npkey = _basic_view_data(self, split[0]), split[1]
    try:
        if dev is CPU:  # the CPU index_put kernel (accumulate=False), inlined: ``t[i] = v`` is hot
            data[npkey] = vdata
        elif not advanced:
            with_rest = isinstance(npkey, tuple) and not any(k is Ellipsis for k in npkey)  # (one ``...`` at most)
            view = _mkview(self, _src(self)[npkey + (Ellipsis,) if with_rest else npkey])
            backend(dev.type).copy_(view._data, vdata)
        else:
            INDEX_PUT.kernel(dev.type)(data, npkey, vdata, False)
    except IndexError as e:
        raise _index_error(e, self._data.shape) from None
    except ValueError as e:
        if "broadcast" not in str(e):
            raise
        raise _setitem_error(self, npkey if isinstance(npkey, tuple) else (npkey,), np.shape(vdata), advanced,
                             data) from None
    self._storage._version += 1
    if grad_state.enabled and (self._requires_grad or (isinstance(value, Tensor) and value._requires_grad)):
        record(INDEX_PUT, (self, _key_for_record(key), value), {"inplace": True, "accumulate": False}, self)


INDEX_PUT.dunders["__setitem__"] = setitem


def _indices_key(self: Tensor, indices) -> tuple:
    if isinstance(indices, Tensor) or not isinstance(indices, (tuple, list)):
        raise TypeError("index_put(): argument 'indices' must be tuple of Tensors")
    n = sum(1 for k in indices if k is not Ellipsis)
    if n > self._data.ndim:
        raise IndexError(f"too many indices for tensor of dimension {self._data.ndim} (got {n})")
    # None means a whole dim, as in torch; ints, slices and ``...`` are accepted too (what ``t[key] = v``
    # hands to autograd through this operator)
    return tuple(slice(None) if k is None else k for k in indices)


@INDEX_PUT.inplace
def index_put_(self: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """``self[indices] = values`` (``+=`` with repeated indices adding up when ``accumulate``).

    ``indices``: a tuple of integer/bool tensors (or None for a whole dim), one per leading dim.
    """
    if inplace_needs_engine(self, values):
        return inplace_by_engine(INDEX_PUT, (self, tuple(indices), values), {"accumulate": bool(accumulate)})
    key = _indices_key(self, indices)
    if not accumulate:
        setitem(self, key, values)
        return self
    npkey, _ = _np_key(self, key)
    data, split = self._data, _torch_split(self, npkey)
    if split is not None:
        data, npkey = _basic_view_data(self, split[0]), split[1]
    npkey = tuple(np.nonzero(k) if isinstance(k, np.ndarray) and k.dtype == np.bool_ else (k,) for k in npkey)
    npkey = tuple(x for group in npkey for x in group)
    for i, k in enumerate(npkey):
        if isinstance(k, np.ndarray):
            _bounds(k, data.shape[i], i, True)
    vdata = _values_data(self, values)
    try:
        INDEX_PUT.kernel(self._device.type)(data, npkey, vdata, True)
    except ValueError as e:
        if "broadcast" not in str(e):
            raise
        raise _setitem_error(self, npkey, np.shape(vdata), True, data) from None
    self._storage._version += 1
    record_if_needed(INDEX_PUT, (self, tuple(indices), values), {"inplace": True, "accumulate": True}, self)
    return self


@INDEX_PUT.front
def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """Out-of-place :meth:`Tensor.index_put_`: a copy of ``input`` with ``values`` put at ``indices``."""
    with _shape._no_record():
        out = input.clone()
        index_put_(out, indices, values, accumulate)
    out._storage._version = 0
    record_if_needed(INDEX_PUT, (input, tuple(indices), values), {"accumulate": bool(accumulate)}, out)
    return out


# --- nonzero --------------------------------------------------------------------------------------
NONZERO = declare("nonzero(Tensor input, *, bool as_tuple=False) -> Tensor", differentiable=False,
                  category="indexing")


@NONZERO.front
def nonzero(input: Tensor, *, as_tuple: bool = False):
    """Indices of the non-zero entries: an int64 ``(n, ndim)`` tensor, or (``as_tuple``) one 1-d
    tensor per dim (a 0-d input counts as 1-d). ``where(condition)`` is ``nonzero(condition, as_tuple=True)``."""
    check_tensor(input, "input", "nonzero")
    dev = input._device
    arr = NONZERO.kernel(dev.type)(input._data)
    out = _wrap(arr, dev, dtype=_int64)
    if not as_tuple:
        return out
    if input._data.ndim == 0:
        zeros = np.zeros(arr.shape[0], np.int64) if dev is CPU else backend(dev.type).full((arr.shape[0],), 0, np.int64)
        return (_wrap(zeros, dev, dtype=_int64),)
    return tuple(_shape.select(out, 1, i).contiguous() for i in range(input._data.ndim))


ARGWHERE = declare("argwhere(Tensor input) -> Tensor", differentiable=False, category="indexing")


@ARGWHERE.front
def argwhere(input: Tensor) -> Tensor:
    """``nonzero(input)``: an int64 ``(n, ndim)`` tensor of the indices of non-zero entries."""
    return nonzero(input)


# --- masked ops -----------------------------------------------------------------------------------
def _check_mask(mask, opname: str) -> None:
    check_tensor(mask, "mask", opname)
    if mask.dtype is not _bool:
        raise RuntimeError(f"{opname} only supports boolean masks, but got mask with dtype {mask.dtype}")


def _fill_value(value, opname: str):
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(f"{opname} only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value._data.ndim} dimension(s).")
        return value.item()
    return value


MASKED_FILL = declare("masked_fill(Tensor input, Tensor mask, Scalar value) -> Tensor", category="indexing")
# masked_fill_ has a kernel of its own (in place, no output dtype), outside the table of operators
MASKED_FILL_INPLACE_KERNELS = {"cpu": masked_fill_inplace}


def _masked_fill_inplace_kernel(device_type: str):
    k = MASKED_FILL_INPLACE_KERNELS.get(device_type)
    if k is None and device_type == "cuda":  # imported on first use: flambeau._kernels.cuda imports this module
        from flambeau._kernels.cuda.indexing import masked_fill_inplace as k

        MASKED_FILL_INPLACE_KERNELS["cuda"] = k
    if k is None:
        raise NotImplementedError(f"masked_fill_ has no kernel for device type '{device_type}'")
    return k


@MASKED_FILL.front
def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``input`` with entries where ``mask`` (bool, broadcastable) is True set to ``value``."""
    _check_mask(mask, "masked_fill_")
    v = _fill_value(value, "masked_fill_")
    check_fits(v, input.dtype)
    dev = common_device(input, mask)
    broadcast_shapes(input._data.shape, mask._data.shape)
    out = _wrap(MASKED_FILL.kernel(dev.type)(input._data, mask._data, v, input.dtype.np), dev, dtype=input.dtype)
    record_if_needed(MASKED_FILL, (input, mask, value), {}, out)
    return out


@MASKED_FILL.inplace
def masked_fill_(self: Tensor, mask: Tensor, value) -> Tensor:
    """Set the entries of ``self`` where ``mask`` (bool, broadcastable to ``self``) is True to ``value``."""
    if inplace_needs_engine(self, value):
        return inplace_by_engine(MASKED_FILL, (self, mask, value), {})
    _check_mask(mask, "masked_fill_")
    v = _fill_value(value, "masked_fill_")
    check_fits(v, self.dtype)
    common_device(self, mask)
    if broadcast_shapes(self._data.shape, mask._data.shape) != self._data.shape:
        raise RuntimeError(f"The expanded size of the mask {list(mask.shape)} must match the size of the tensor "
                           f"{list(self.shape)}")
    _masked_fill_inplace_kernel(self._device.type)(self._data, mask._data, v)
    self._storage._version += 1
    record_if_needed(MASKED_FILL, (self, mask, value), {"inplace": True}, self)
    return self


MASKED_SELECT = declare("masked_select(Tensor input, Tensor mask) -> Tensor", category="indexing")


@MASKED_SELECT.front
def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """A 1-d tensor of the entries of ``input`` where ``mask`` (bool, broadcast together) is True."""
    _check_mask(mask, "masked_select:")
    dev = common_device(input, mask)
    broadcast_shapes(input._data.shape, mask._data.shape)
    out = _wrap(MASKED_SELECT.kernel(dev.type)(input._data, mask._data), dev, dtype=input.dtype)
    record_if_needed(MASKED_SELECT, (input, mask), {}, out)
    return out


MASKED_SCATTER = declare("masked_scatter(Tensor input, Tensor mask, Tensor source) -> Tensor", category="indexing")


@MASKED_SCATTER.inplace
def masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """Copy consecutive entries of ``source`` into ``self`` where ``mask`` is True, in place."""
    if inplace_needs_engine(self, source):
        return inplace_by_engine(MASKED_SCATTER, (self, mask, source), {})
    _check_mask(mask, "masked_scatter_")
    check_tensor(source, "source", "masked_scatter_")
    common_device(self, mask, source)
    if broadcast_shapes(self._data.shape, mask._data.shape) != self._data.shape:
        raise RuntimeError(f"masked_scatter_: expected mask {list(mask.shape)} to be broadcastable to self "
                           f"{list(self.shape)}")
    # on CUDA the kernel reports too few source entries through the error flag (no host synchronisation)
    if self._device is CPU and np.broadcast_to(mask._data, self._data.shape).sum() > source._data.size:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as ones in mask")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but got {self.dtype} and "
                           f"{source.dtype}")
    MASKED_SCATTER.kernel(self._device.type)(self._data, mask._data, source._data)
    self._storage._version += 1
    record_if_needed(MASKED_SCATTER, (self, mask, source), {"inplace": True}, self)
    return self


@MASKED_SCATTER.front
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """Out-of-place :meth:`Tensor.masked_scatter_` (``input`` and ``mask`` broadcast together)."""
    shape = broadcast_shapes(input._data.shape, mask._data.shape)
    with _shape._no_record():
        out = _shape.expand(input, shape).contiguous().clone()
        masked_scatter_(out, mask, source)
    out._storage._version = 0
    record_if_needed(MASKED_SCATTER, (input, mask, source), {}, out)
    return out


# --- gather / scatter -----------------------------------------------------------------------------
def _check_gather_shapes(opname, input_shape, dim, index_shape, src_shape=None):
    nd = len(input_shape)
    if len(index_shape) != nd and not (nd == 0 and len(index_shape) <= 1) and not (len(index_shape) == 0 and nd <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if src_shape is not None and len(src_shape) != len(index_shape) and len(index_shape) > 0 and len(src_shape) > 0:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    for d in range(len(index_shape)):
        if d != dim and nd and index_shape[d] > input_shape[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index {list(index_shape)} to be no "
                               f"larger than self {list(input_shape)} apart from dimension {dim}")
        if src_shape is not None and src_shape and index_shape[d] > src_shape[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index {list(index_shape)} to be no "
                               f"larger than src {list(src_shape)}")


GATHER = declare("gather(Tensor input, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
                 category="indexing")


def _as_nd(x: Tensor):
    return x._data if x._data.ndim else x._data.reshape(1)


@GATHER.front
def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[i][j][k] = input[index[i][j][k]][j][k]`` (for ``dim=0``); out has ``index``'s shape."""
    check_tensor(index, "index", "gather")
    _check_index_dtype(index, "gather")
    dev = common_device(input, index)
    nd = max(input._data.ndim, 1)
    d = wrap_dim(dim, nd)
    arr, idx = _as_nd(input), _as_nd(index)
    _check_gather_shapes("gather", arr.shape, d, idx.shape)
    try:
        res = GATHER.kernel(dev.type)(arr, d, idx)
    except OutOfBounds as e:
        raise RuntimeError(f"index {e.index} is out of bounds for dimension {d} with size {arr.shape[d]}") from None
    out = _wrap(res.reshape(index._data.shape) if index._data.ndim == 0 else res, dev, dtype=input.dtype)
    record_if_needed(GATHER, (input, d, index), {"sparse_grad": sparse_grad}, out)
    return out


SCATTER = declare("scatter(Tensor input, int dim, Tensor index, Tensor src, *, str? reduce=None) -> Tensor",
                  category="indexing")


def _scatter_args(self: Tensor, dim, index, src, opname):
    check_tensor(index, "index", opname)
    _check_index_dtype(index, opname)
    nd = max(self._data.ndim, 1)
    d = wrap_dim(dim, nd)
    out_arr, idx = _as_nd(self), _as_nd(index)
    if isinstance(src, Tensor):
        common_device(self, index, src)
        s = src._data if src._data.ndim else src._data.reshape(1)
        _check_gather_shapes(opname, out_arr.shape, d, idx.shape, s.shape)
        if src.dtype is not self.dtype:
            raise RuntimeError(f"{opname}(): Expected self.dtype to be equal to src.dtype")
    else:
        common_device(self, index)
        _check_gather_shapes(opname, out_arr.shape, d, idx.shape)
        s = src
    return d, out_arr, idx, s


def _oob_msg(index: int, dim: int, size: int) -> str:
    return f"index {index} is out of bounds for dimension {dim} with size {size}"


def _run_checked(kernel, d, size, *args):
    try:
        kernel(*args)
    except OutOfBounds as e:
        raise RuntimeError(_oob_msg(e.index, d, size)) from None


@SCATTER.inplace
def scatter_(self: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:
    """``self[index[i][j]][j] = src[i][j]`` (for ``dim=0``) in place; ``src`` may be a number (``value``).

    ``reduce``: None, ``'add'`` or ``'multiply'``.
    """
    if src is None:
        src = value
    if inplace_needs_engine(self, src):
        return inplace_by_engine(SCATTER, (self, dim, index, src), {"reduce": reduce})
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    d, out_arr, idx, s = _scatter_args(self, dim, index, src, "scatter")
    _run_checked(SCATTER.kernel(self._device.type), d, out_arr.shape[d], out_arr, d, idx, s, reduce)
    self._storage._version += 1
    record_if_needed(SCATTER, (self, d, index, src), {"inplace": True, "reduce": reduce}, self)
    return self


@SCATTER.front
def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:
    """Out-of-place :meth:`Tensor.scatter_`."""
    with _shape._no_record():
        out = scatter_(input.clone(), dim, index, src, value=value, reduce=reduce)
    out._storage._version = 0
    record_if_needed(SCATTER, (input, wrap_dim(dim, max(input._data.ndim, 1)), index, value if src is None else src),
                     {"reduce": reduce}, out)
    return out


SCATTER_ADD = declare("scatter_add(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", category="indexing")


@SCATTER_ADD.inplace
def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``self[index[i][j]][j] += src[i][j]`` (for ``dim=0``) in place; repeated indices add up."""
    if inplace_needs_engine(self, src):
        return inplace_by_engine(SCATTER_ADD, (self, dim, index, src), {})
    check_tensor(src, "src", "scatter_add")
    d, out_arr, idx, s = _scatter_args(self, dim, index, src, "scatter_add")
    _run_checked(SCATTER_ADD.kernel(self._device.type), d, out_arr.shape[d], out_arr, d, idx, s)
    self._storage._version += 1
    record_if_needed(SCATTER_ADD, (self, d, index, src), {"inplace": True}, self)
    return self


@SCATTER_ADD.front
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """Out-of-place :meth:`Tensor.scatter_add_`."""
    with _shape._no_record():
        out = scatter_add_(input.clone(), dim, index, src)
    out._storage._version = 0
    record_if_needed(SCATTER_ADD, (input, wrap_dim(dim, max(input._data.ndim, 1)), index, src), {}, out)
    return out


SCATTER_REDUCE = declare("scatter_reduce(Tensor input, int dim, Tensor index, Tensor src, str reduce, *, "
                         "bool include_self=True) -> Tensor", category="indexing")


@SCATTER_REDUCE.inplace
def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """Reduce ``src`` into ``self`` at ``index`` along ``dim`` in place.

    ``reduce``: ``'sum'``, ``'prod'``, ``'mean'``, ``'amax'`` or ``'amin'``; ``include_self=False``
    ignores the old values of ``self`` at the scattered positions.
    """
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if inplace_needs_engine(self, src):
        return inplace_by_engine(SCATTER_REDUCE, (self, dim, index, src, reduce), {"include_self": include_self})
    check_tensor(src, "src", "scatter_reduce")
    d, out_arr, idx, s = _scatter_args(self, dim, index, src, "scatter_reduce")
    _run_checked(SCATTER_REDUCE.kernel(self._device.type), d, out_arr.shape[d], out_arr, d, idx, s, reduce,
                 bool(include_self))
    self._storage._version += 1
    record_if_needed(SCATTER_REDUCE, (self, d, index, src, reduce), {"inplace": True, "include_self": include_self},
                     self)
    return self


@SCATTER_REDUCE.front
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """Out-of-place :meth:`Tensor.scatter_reduce_`."""
    with _shape._no_record():
        out = scatter_reduce_(input.clone(), dim, index, src, reduce, include_self=include_self)
    out._storage._version = 0
    record_if_needed(SCATTER_REDUCE, (input, wrap_dim(dim, max(input._data.ndim, 1)), index, src, reduce),
                     {"include_self": include_self}, out)
    return out


# --- index_select / index_add / index_copy / index_fill -------------------------------------------
INDEX_SELECT = declare("index_select(Tensor input, int dim, Tensor index) -> Tensor", category="indexing")


def _index_vector(index: Tensor, opname: str) -> Tensor:
    check_tensor(index, "index", opname)
    if index._data.ndim > 1:
        raise IndexError(f"{opname}(): Index is supposed to be a vector")
    _check_index_dtype(index, opname)
    return index


@INDEX_SELECT.front
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of ``input`` at ``index`` (a 1-d integer tensor) along ``dim``; a copy."""
    _index_vector(index, "index_select")
    dev = common_device(input, index)
    nd = max(input._data.ndim, 1)
    d = wrap_dim(dim, nd)
    arr = _as_nd(input)
    n = arr.shape[d]
    idx = index._data.reshape(-1) if index._data.ndim == 0 else index._data
    try:
        res = INDEX_SELECT.kernel(dev.type)(arr, d, idx)
    except OutOfBounds as e:
        raise IndexError(f"index_select(): index {e.index} is out of bounds for dimension {d} with size {n}") from None
    if input._data.ndim == 0:
        res = res.reshape(())
    out = _wrap(res, dev, dtype=input.dtype)
    record_if_needed(INDEX_SELECT, (input, d, index), {}, out)
    return out


INDEX_ADD = declare("index_add(Tensor input, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
                    category="indexing")


def _index_args(self: Tensor, dim, index, source, opname, negative_ok: bool = False):
    _index_vector(index, opname)
    if opname != "index_fill":  # (the others copy or add a source: None wrote NaN rows)
        check_tensor(source, "source", opname)
    nd = max(self._data.ndim, 1)
    d = wrap_dim(dim, nd)
    out_arr = _as_nd(self)
    idx = index._data.reshape(-1)
    n = out_arr.shape[d]
    if self._device is CPU:  # other devices check on the device (Note [Device-side index checks])
        _bounds(_host(index), n, d, negative_ok, lambda b: IndexError(
            f"{opname}(): index {b} is out of bounds for dimension {d} with size {n}"))
    if source is not None:
        check_tensor(source, "source", opname)
        common_device(self, index, source)
        s = source._data if source._data.ndim else source._data.reshape(1)
        expect = out_arr.shape[:d] + (idx.shape[0],) + out_arr.shape[d + 1:]
        if s.shape != expect and not (source._data.ndim == 0 and idx.shape[0] == 1 and self._data.ndim <= 1):
            raise RuntimeError(f"{opname}_(): Source/destination tensor must have same slice shapes. Destination "
                               f"slice shape: {list(out_arr.shape[:d] + out_arr.shape[d + 1:])} at dimension {d} "
                               f"and source slice shape: {list(s.shape[:d] + s.shape[d + 1:])} at dimension {d}.")
        if source.dtype is not self.dtype:
            raise RuntimeError(f"{opname}_(): self ({self.dtype}) and source ({source.dtype}) must have the same "
                               "scalar type")
        s = s.reshape(expect)
    else:
        common_device(self, index)
        s = None
    return d, out_arr, idx, s


@INDEX_ADD.inplace
def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """``self[..., index[i], ...] += alpha * source[..., i, ...]`` along ``dim``, in place; repeats add up."""
    if inplace_needs_engine(self, source):
        return inplace_by_engine(INDEX_ADD, (self, dim, index, source), {"alpha": alpha})
    d, out_arr, idx, s = _index_args(self, dim, index, source, "index_add")
    INDEX_ADD.kernel(self._device.type)(out_arr, d, idx, s, alpha)
    self._storage._version += 1
    record_if_needed(INDEX_ADD, (self, d, index, source), {"inplace": True, "alpha": alpha}, self)
    return self


@INDEX_ADD.front
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """Out-of-place :meth:`Tensor.index_add_`."""
    with _shape._no_record():
        out = index_add_(input.clone(), dim, index, source, alpha=alpha)
    out._storage._version = 0
    record_if_needed(INDEX_ADD, (input, wrap_dim(dim, max(input._data.ndim, 1)), index, source), {"alpha": alpha},
                     out)
    return out


INDEX_COPY = declare("index_copy(Tensor input, int dim, Tensor index, Tensor source) -> Tensor", category="indexing")


@INDEX_COPY.inplace
def index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """``self[..., index[i], ...] = source[..., i, ...]`` along ``dim``, in place."""
    if inplace_needs_engine(self, source):
        return inplace_by_engine(INDEX_COPY, (self, dim, index, source), {})
    d, out_arr, idx, s = _index_args(self, dim, index, source, "index_copy")
    INDEX_COPY.kernel(self._device.type)(out_arr, d, idx, s)
    self._storage._version += 1
    record_if_needed(INDEX_COPY, (self, d, index, source), {"inplace": True}, self)
    return self


@INDEX_COPY.front
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """Out-of-place :meth:`Tensor.index_copy_`."""
    with _shape._no_record():
        out = index_copy_(input.clone(), dim, index, source)
    out._storage._version = 0
    record_if_needed(INDEX_COPY, (input, wrap_dim(dim, max(input._data.ndim, 1)), index, source), {}, out)
    return out


INDEX_FILL = declare("index_fill(Tensor input, int dim, Tensor index, Scalar value) -> Tensor", category="indexing")


@INDEX_FILL.inplace
def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """Set ``self[..., index[i], ...]`` along ``dim`` to ``value`` (a number or 0-d tensor), in place."""
    if inplace_needs_engine(self, value):
        return inplace_by_engine(INDEX_FILL, (self, dim, index, value), {})
    v = _fill_value(value, "index_fill_")
    d, out_arr, idx, _ = _index_args(self, dim, index, None, "index_fill", negative_ok=True)  # wraps, as torch
    INDEX_FILL.kernel(self._device.type)(out_arr, d, idx, v)
    self._storage._version += 1
    record_if_needed(INDEX_FILL, (self, d, index, value), {"inplace": True}, self)
    return self


@INDEX_FILL.front
def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """Out-of-place :meth:`Tensor.index_fill_`."""
    with _shape._no_record():
        out = index_fill_(input.clone(), dim, index, value)
    out._storage._version = 0
    record_if_needed(INDEX_FILL, (input, wrap_dim(dim, max(input._data.ndim, 1)), index, value), {}, out)
    return out


# --- take / put -----------------------------------------------------------------------------------
TAKE = declare("take(Tensor input, Tensor index) -> Tensor", category="indexing")


def _flat_bounds(index: Tensor, n: int):
    if index._device is not CPU:  # checked on the device (Note [Device-side index checks])
        return
    _bounds(index._data, n, 0, True, lambda b: IndexError(
        f"out of range: tried to access index {b} on a tensor of {n} elements."))


@TAKE.front
def take(input: Tensor, index: Tensor) -> Tensor:
    """The entries of the flattened ``input`` at ``index`` (negative counts from the end); ``index``'s shape."""
    check_tensor(index, "index", "take")
    _check_index_dtype(index, "take")
    dev = common_device(input, index)
    _flat_bounds(index, input._data.size)
    out = _wrap(TAKE.kernel(dev.type)(input._data, index._data), dev, dtype=input.dtype)
    record_if_needed(TAKE, (input, index), {}, out)
    return out


PUT = declare("put(Tensor input, Tensor index, Tensor source, bool accumulate=False) -> Tensor", category="indexing")


@PUT.inplace
def put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """Write ``source`` into the flattened ``self`` at ``index`` (``+=`` when ``accumulate``), in place."""
    if inplace_needs_engine(self, source):
        return inplace_by_engine(PUT, (self, index, source), {"accumulate": bool(accumulate)})
    check_tensor(index, "index", "put_")
    check_tensor(source, "source", "put_")
    _check_index_dtype(index, "put_")
    common_device(self, index, source)
    if index._data.size != source._data.size:
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source._data.size}, index.numel() = {index._data.size}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"put_(): self ({self.dtype}) and source ({source.dtype}) must have the same scalar type")
    _flat_bounds(index, self._data.size)
    PUT.kernel(self._device.type)(self._data, index._data, source._data, bool(accumulate))
    self._storage._version += 1
    record_if_needed(PUT, (self, index, source), {"inplace": True, "accumulate": bool(accumulate)}, self)
    return self


@PUT.front
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """Out-of-place :meth:`Tensor.put_`."""
    with _shape._no_record():
        out = put_(input.clone(), index, source, accumulate)
    out._storage._version = 0
    record_if_needed(PUT, (input, index, source), {"accumulate": bool(accumulate)}, out)
    return out



# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _declare_samples():
    from flambeau._ops._registry import OPS
    from flambeau._ops._samples import FLOAT, FLOAT_INT, cases
    from flambeau._ops._samples import SampleInput as S

    def add(name, *builders, dtypes=FLOAT, **meta):
        OPS[name].samples(cases(*builders), dtypes=dtypes, **meta)

    add("index", lambda mk, mki: S(mk((4, 3)), (mki((2,), 4),)),
        lambda mk, mki: S(mk((4, 3)), (mki((2,), 4), mki((2,), 3))),
        dtypes=FLOAT_INT, ref=lambda x, idx: x[idx])
    add("masked_fill", lambda mk, mki: S(mk((3, 4)), mk((3, 4), dtype=_bool_dt(), requires_grad=False), 2.0),
        dtypes=FLOAT_INT)
    add("masked_select", lambda mk, mki: S(mk((3, 4)), mk((4,), dtype=_bool_dt(), requires_grad=False)),
        dtypes=FLOAT_INT)
    add("masked_scatter", lambda mk, mki: S(mk((3, 4)), mk((3, 4), dtype=_bool_dt(), requires_grad=False), mk((12,))),
        dtypes=FLOAT_INT)
    add("gather", lambda mk, mki: S(mk((3, 4)), 1, mki((3, 2), 4)), lambda mk, mki: S(mk((3, 4)), 0, mki((2, 4), 3)),
        dtypes=FLOAT_INT)
    add("scatter", lambda mk, mki: S(mk((3, 4)), 1, _perm_index(mki), mk((3, 2))), dtypes=FLOAT_INT)
    add("scatter_add", lambda mk, mki: S(mk((3, 4)), 1, mki((3, 5), 4), mk((3, 5))), dtypes=FLOAT_INT)
    add("scatter_reduce", lambda mk, mki: S(mk((3, 4)), 1, mki((3, 5), 4), mk((3, 5)), "sum"),
        lambda mk, mki: S(mk((3, 4)), 1, mki((3, 5), 4), mk((3, 5)), "amax", include_self=False), dtypes=FLOAT_INT)
    add("index_select", lambda mk, mki: S(mk((4, 3)), 0, mki((5,), 4)), lambda mk, mki: S(mk((4, 3)), 1, mki((2,), 3)),
        dtypes=FLOAT_INT)
    add("index_add", lambda mk, mki: S(mk((4, 3)), 0, mki((5,), 4), mk((5, 3))),
        lambda mk, mki: S(mk((4, 3)), 1, mki((2,), 3), mk((4, 2)), alpha=2), dtypes=FLOAT_INT)
    add("index_copy", lambda mk, mki: S(mk((4, 3)), 0, _perm_index(mki, (2,), 4), mk((2, 3))), dtypes=FLOAT_INT)
    add("index_fill", lambda mk, mki: S(mk((4, 3)), 1, mki((2,), 3), -1.0), dtypes=FLOAT_INT)
    add("take", lambda mk, mki: S(mk((3, 4)), mki((5,), 12)), dtypes=FLOAT_INT)
    add("put", lambda mk, mki: S(mk((3, 4)), _perm_index(mki, (3,), 12), mk((3,))),
        lambda mk, mki: S(mk((3, 4)), mki((5,), 12), mk((5,)), True), dtypes=FLOAT_INT)
    add("index_put", lambda mk, mki: S(mk((4, 3)), (_perm_index(mki, (2,), 4),), mk((2, 3))),
        lambda mk, mki: S(mk((4, 3)), (mki((5,), 4),), mk((5, 3)), True), dtypes=FLOAT_INT)
    add("nonzero", lambda mk, mki: S(mk((3, 4), low=-1, high=2)), dtypes=("float32", "int64"))
    add("argwhere", lambda mk, mki: S(mk((3, 4), low=-1, high=2)), dtypes=("float32", "int64"))

_declare_samples()


def _bool_dt():
    from flambeau import _dtype

    return _dtype.bool


def _perm_index(mki, shape=(3, 2), high=4):
    """Indices without repeats (scatter/index_copy/put are not deterministic with duplicates)."""
    import numpy as np

    import flambeau as fl

    rng = np.random.default_rng(sum(shape) + high)
    n = int(np.prod(shape))
    if len(shape) == 1:
        return fl.tensor(rng.permutation(high)[:n])
    return fl.tensor(np.stack([rng.permutation(high)[:shape[1]] for _ in range(shape[0])]))
