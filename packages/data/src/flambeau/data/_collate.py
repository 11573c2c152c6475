"""Collation: turning a list of samples into a batch (:func:`default_collate`), and
:func:`default_convert` for loaders without automatic batching.

The rules are torch's (``torch.utils.data._utils.collate``): tensors are stacked along a new
first dimension; numpy arrays and numpy scalars become tensors; Python floats a float64 tensor,
ints an int64 tensor (bools a bool tensor); strings and bytes stay a list; mappings, namedtuples,
tuples and sequences are collated element-wise, keeping their type where it can be rebuilt
(tuples become lists, as in torch). :func:`collate` walks a ``collate_fn_map`` of
``{type: fn(batch, *, collate_fn_map)}``, so a custom collate function can extend
:data:`default_collate_fn_map` for its own types.

In a DataLoader worker the stacked tensor is created in shared memory (see
:func:`_shared_stack`), so that it crosses back to the main process as a handle rather than as
a pickled copy, as torch does with ``_new_shared``. In the main process a large batch is copied
by :func:`flambeau.get_num_threads` threads (Note [Parallel stack]), as torch's ``stack`` is.
"""

from __future__ import annotations

import collections.abc
import copy
import re
import threading
from collections.abc import Callable

import numpy as np

import flambeau as fl
from flambeau import _parallel, _sharing
from flambeau.data._worker import get_worker_info

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map"]

_np_str_obj_array_pattern = re.compile(r"[SaUO]")

_ERR_FORMAT = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def default_convert(data):
    """Convert numpy arrays and numpy scalars inside ``data`` to tensors, keeping the structure.

    Used by :class:`~flambeau.data.DataLoader` when automatic batching is off
    (``batch_size=None``). Tensors are returned as they are; mappings, namedtuples and sequences
    are converted element-wise (a plain tuple becomes a list, as in torch); numpy arrays of
    strings or objects, and anything else, are returned unchanged.

    Args:
        data: a single sample.

    Returns:
        The sample with every numpy array/scalar replaced by a :class:`flambeau.Tensor` (arrays
        are shared, not copied, as ``flambeau.as_tensor`` does).
    """
    elem_type = type(data)
    if isinstance(data, fl.Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_", "bytes_"):
        if elem_type.__name__ == "ndarray" and _np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return fl.as_tensor(data)
    return map_containers(data, default_convert, tuple_to_list=True)


def map_containers(data, fn, *, tuple_to_list: bool):
    """``data``'s elements passed through ``fn``, its container rebuilt as torch's data utilities do.

    Mappings and sequences keep their type (a copy updated in place for mutable ones, else rebuilt;
    a plain dict or list where neither works), namedtuples keep theirs, a plain tuple becomes a list
    when ``tuple_to_list``. Strings, bytes and anything else that is not a container come back as
    they are. Shared by :func:`default_convert` and the pin-memory walk.
    """
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({key: fn(value) for key, value in data.items()})
                return clone
            return type(data)({key: fn(value) for key, value in data.items()})
        except TypeError:
            return {key: fn(value) for key, value in data.items()}
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):  # namedtuple
            return type(data)(*(fn(d) for d in data))
        return [fn(d) for d in data] if tuple_to_list else type(data)(fn(d) for d in data)
    if isinstance(data, collections.abc.Sequence):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = fn(d)
                return clone
            return type(data)([fn(d) for d in data])
        except TypeError:
            return [fn(d) for d in data]
    return data


def collate(batch, *, collate_fn_map: dict[type | tuple[type, ...], Callable] | None = None):
    """Collate ``batch`` (a list of samples of the same structure) with the functions of ``collate_fn_map``.

    The function for the type of ``batch[0]`` (exact type first, then ``isinstance`` in the map's
    order) gets the whole batch; containers (mappings, namedtuples, sequences) recurse into their
    fields.

    Args:
        batch: a non-empty list of samples.
        collate_fn_map: ``{type or tuple of types: fn(batch, *, collate_fn_map)}``.

    Returns:
        The batch, with the structure of one sample.

    Raises:
        TypeError: for an element type that nothing in the map handles.
        RuntimeError: for sequences of unequal lengths.
    """
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update({key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem})
                return clone
            return elem_type({key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem})
        except TypeError:
            return {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, samples in enumerate(transposed):
                    clone[i] = collate(samples, collate_fn_map=collate_fn_map)
                return clone
            return elem_type([collate(samples, collate_fn_map=collate_fn_map) for samples in transposed])
        except TypeError:
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
    raise TypeError(_ERR_FORMAT.format(elem_type))


def _shared_stack(batch: list) -> fl.Tensor:
    """``flambeau.stack(batch)`` written straight into shared memory (CPU tensors, in a worker)."""
    elem = batch[0]
    same = all(x.dtype is elem.dtype and x.shape == elem.shape for x in batch)
    out = _sharing.empty_shared((len(batch), *elem.shape), elem.dtype) if same else None
    if out is None:  # fl.stack raises the errors (shapes) or promotes the dtypes
        return fl.stack(batch, 0)
    np.stack([x.numpy(force=True) for x in batch], 0, out=out.numpy())
    return out


# Note [Parallel stack]
#     Stacking a batch of large samples in the main process (num_workers=0) is a memory copy of
#     the whole batch (18 MiB for 32 images of 3x224x224 float32), which torch's stack splits
#     between its intra-op threads. numpy copies release the GIL, so the samples are shared out
#     among flambeau.get_num_threads() threads (flambeau's CPU pool). The split is dynamic: each
#     thread claims the next sample until none is left, and the calling thread waits only for
#     copies that another thread has already started. A pool thread that the OS has not run yet
#     (the machine is busy) thus never delays the batch: the calling thread copies everything
#     itself, and the late thread finds nothing left to do.
_PARALLEL_STACK_MIN_BYTES = 1 << 22  # below ~4 MiB a hand-off costs about what it saves


class _StackCopy:
    """Copies ``arrays[i]`` into ``out[i]`` for every i, claimed one at a time by any thread."""

    __slots__ = ("arrays", "out", "next", "running", "error", "cond")

    def __init__(self, arrays: list, out: np.ndarray) -> None:
        self.arrays, self.out = arrays, out
        self.next = 0  # the next unclaimed sample
        self.running = 0  # copies claimed and not finished
        self.error = None
        self.cond = threading.Condition(threading.Lock())

    def work(self) -> None:
        arrays, out, cond, n = self.arrays, self.out, self.cond, len(self.arrays)
        while True:
            with cond:
                i = self.next
                if i >= n or self.error is not None:
                    return
                self.next = i + 1
                self.running += 1
            try:
                out[i] = arrays[i]  # numpy releases the GIL for the copy
            except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                with cond:
                    self.error = e
            finally:
                with cond:
                    self.running -= 1
                    if self.running == 0:
                        cond.notify_all()

    def run(self, helpers: int) -> None:
        try:
            pool = _parallel._pool()
            for _ in range(helpers):
                pool.submit(self.work)
        except RuntimeError:  # the pool was shut down meanwhile (set_num_threads): copy alone
            pass
        self.work()
        with self.cond:
            while self.running:
                self.cond.wait()
            if self.error is not None:
                raise self.error


def _parallel_stack(batch: list) -> fl.Tensor | None:
    """``flambeau.stack(batch)`` copied by several threads, or None when it does not pay (small
    batches, one thread) or does not apply (mixed dtypes or shapes: fl.stack handles those)."""
    elem = batch[0]
    threads = min(_parallel.get_num_threads(), len(batch))
    if threads < 2 or elem._data.nbytes * len(batch) < _PARALLEL_STACK_MIN_BYTES:
        return None
    dev, dtype, shape = elem._device, elem.dtype, elem.shape
    if not all(x.__class__ is fl.Tensor and x._device is dev and x.dtype is dtype and x.shape == shape
               and not x._requires_grad for x in batch):
        return None
    out = fl.empty((len(batch), *elem.shape), dtype=elem.dtype)
    _StackCopy([x._data for x in batch], out._data).run(threads - 1)
    return out


def collate_tensor_fn(batch, *, collate_fn_map=None):
    """Stack tensors along a new first dimension (into shared memory inside a worker; a large batch
    in the main process is copied by several threads, Note [Parallel stack])."""
    elem = batch[0]
    if elem.device.type == "cpu" and not elem.requires_grad:
        if get_worker_info() is not None:
            return _shared_stack(batch)
        out = _parallel_stack(batch)
        if out is not None:
            return out
    return fl.stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    """Numpy arrays: as tensors, then stacked; arrays of strings or objects are refused."""
    elem = batch[0]
    if _np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(_ERR_FORMAT.format(elem.dtype))
    return collate([fl.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    """Numpy scalars: one 1-d tensor of their dtype."""
    return fl.as_tensor(np.asarray(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    """Python floats: a float64 tensor."""
    return fl.tensor(batch, dtype=fl.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    """Python ints: an int64 tensor (bools: a bool tensor)."""
    return fl.tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    """Strings and bytes: the list as it is."""
    return batch


default_collate_fn_map: dict[type | tuple[type, ...], Callable] = {
    fl.Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}
"""The ``collate_fn_map`` of :func:`default_collate`; copy and extend it for custom types."""


def default_collate(batch):
    """Collate a list of samples into a batch, as ``torch.utils.data.default_collate`` does.

    ========================  ==============================================================
    element of the batch      result
    ========================  ==============================================================
    Tensor of shape ``S``     ``flambeau.stack``: a tensor of shape ``(B, *S)``
    numpy array               converted with ``flambeau.as_tensor``, then stacked
    numpy scalar              a tensor of shape ``(B,)`` of its dtype
    float                     a float64 tensor of shape ``(B,)``
    int (bool)                an int64 (bool) tensor of shape ``(B,)``
    str, bytes                the list of them, unchanged
    Mapping                   the same mapping type, each key collated over the batch
    namedtuple                the same namedtuple, each field collated
    tuple / Sequence          a list (tuples) or the same sequence type, position-wise collated
    ========================  ==============================================================

    Args:
        batch: a non-empty list of samples of one structure.

    Returns:
        The collated batch.

    Raises:
        TypeError: for element types it cannot collate (``None``, objects, numpy string arrays):
            ``"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists;
            found <type>"``.
        RuntimeError: when sequences in the batch have different lengths, or tensors different
            shapes (``flambeau.stack``'s message).
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
