"""The CUDA backend: storages are flat numba device arrays; tensors view them.

A CUDA tensor's ``_data`` is a numba device array (a strided view) and its ``Storage._buffer``
the owning flat device array. Memory comes from the allocator of :mod:`flambeau.cuda._allocator`
(seam 3); under numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) device arrays wrap numpy arrays
and plain allocation is used. Every copy is queued on the current stream; :func:`to_numpy`
waits for it, since the host reads the values.

This module is imported on first CUDA use (``flambeau._backends.backend('cuda')``), so importing
numba here is fine. Fills and strided copies are kernels (``flambeau._kernels.cuda.core``).
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import weakref

import numpy as np
from numba import cuda as _cuda
from numba.core import config as _config

from flambeau._kernels.cuda._direct import FlatArg, layout_of
from flambeau._kernels.cuda.core import contiguous, copy_into, fill
from flambeau.cuda._allocator import device_malloc, get_allocator
from flambeau.cuda._streams import _on_device, current_device, current_stream
from flambeau.cuda._sync import host_sync

__all__ = ["empty", "full", "data_ptr", "storage_data_ptr", "as_strided", "to_numpy", "from_numpy",
           "copy_", "synchronize", "cuda_array_interface", "is_simulator", "flat_view", "is_device_array",
           "reinterpret", "contiguous_flat", "flat_arg", "flat_parts", "view_from", "owns_memory_alone"]

SIM = bool(_config.ENABLE_CUDASIM)


def is_simulator() -> bool:
    """Whether device arrays are the simulator's (numpy-backed) arrays."""
    return SIM


if SIM:
    from numba.cuda.simulator import kernelapi as _sim_kernelapi
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as _FakeArray

    # Note [Simulator shared arrays]: numba's simulator hands a block's threads the shared array of a
    # source line from a dict it fills on first use with a get-then-set, so two threads that reach the
    # line together can each make their own array: a tiled kernel then reads tiles no one wrote (a 2x2
    # matmul came out wrong in 2 runs of 12, more often with the short switch interval the CUDA tests
    # set). dict.setdefault does the same in one step under the GIL, so every thread gets one array.
    _sim_array = _sim_kernelapi.FakeCUDAShared.array

    def _shared_array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:
            return _sim_array(self, shape, dtype, alignment)
        if isinstance(dtype, _sim_kernelapi.types.Type):
            dtype = _sim_kernelapi.numpy_support.as_dtype(dtype)
        caller = tuple(_sim_kernelapi.traceback.extract_stack(sys._getframe())[-2][0:2])
        return self._allocations.setdefault(caller, np.empty(shape, dtype))

    _sim_kernelapi.FakeCUDAShared.array = _shared_array

    class _DevArray(_FakeArray):
        """The simulator's device array, with a plain-tuple ``shape`` as real device arrays have
        (the simulator's own refuses negative indices, which host code such as fronts uses)."""

        @property
        def shape(self):
            return self._ary.shape

    def _raw(arr) -> np.ndarray:
        return arr._ary

    def _make(host: np.ndarray, stream=0):
        return _DevArray(host, stream=stream)
else:
    from numba.cuda.cudadrv import driver as _driver
    from numba.cuda.cudadrv import dummyarray as _dummyarray
    from numba.cuda.cudadrv.devicearray import DeviceNDArray as _NumbaDevArray

    from flambeau._kernels.cuda._direct import array_type, device_ptr, register_array_class

    class _DevArray(_NumbaDevArray):
        """numba's device array with numpy's ``reshape``, a cheap constructor for views, and the layout
        rule of flambeau's direct launches.

        * ``reshape`` gives a view whenever the strides allow one, else a C-contiguous copy. numba refuses
          to reshape non-contiguous memory at all ("operation requires copying"), even a 1-D strided view
          to its own length, which fronts do to get at a tensor's data (a strided running_mean, an index
          vector sliced from a matrix). Views (slices, ``as_strided``) made from such an array are of
          this class too.
        * :meth:`view_of` makes a view without numba's constructor, which checks the shape, builds a
          dummy array and a memory pointer object for every view (tens of µs; every operator makes a few
          views): flambeau's views know their device address (``_fl_ptr``) and make ``_dummy`` and
          ``gpu_data`` only when numba's own methods ask for them.
        * Its numba type is ``C`` or ``A`` as in Note [Direct kernel launches], so that numba's
          dispatcher and the direct launches compile the same overload.

        Note [Who frees an allocation]
            An array of :meth:`allocation` (``empty``) frees its memory when it dies, until numba's memory
            pointer object is made for it (``gpu_data``, on first use by numba's own methods). numba's views
            and dtype views (``arr.view(np.uint32)``) share that pointer without keeping the array alive, so
            from then on the pointer frees the memory, as numba's own pointers do. (Freeing with the array
            alone let such a view outlive its memory: wrong indexing results on an H100.)
        """

        @classmethod
        def _bare(cls, shape: tuple, strides: tuple, dtype, stream):
            a = object.__new__(cls)
            a.ndim = len(shape)
            a.shape = shape
            a.strides = strides
            a.dtype = dtype
            a.size = math.prod(shape)
            a.stream = stream
            return a

        @functools.cached_property
        def alloc_size(self) -> int:
            """Bytes the array spans (numba's name; worked out when first asked for: views need it only
            when numba's own methods do). numba's constructor sets it on the arrays it makes."""
            return _extent(self.shape, self.strides, self.dtype.itemsize)

        @classmethod
        def view_of(cls, base, shape: tuple, strides: tuple, dtype, start: int = 0):
            """A view of device array ``base``'s memory from byte ``start``: ``shape`` (ints), byte
            ``strides`` (non-negative ints), numpy ``dtype``; it keeps ``base``'s memory alive."""
            a = cls._bare(shape, strides, dtype, base.stream)
            a._fl_ptr = base._fl_ptr + start if a.size else 0
            a._fl_owner, a._fl_start = _anchor(base, start)
            return a

        @classmethod
        def allocation(cls, shape: tuple, strides: tuple, dtype, stream, address: int, nbytes: int, device: int,
                       free):
            """The array of a fresh allocation of ``nbytes`` at device ``address`` on device index ``device``;
            ``free(address)`` runs when the memory is no longer used (Note [Who frees an allocation])."""
            a = cls._bare(shape, strides, dtype, stream)
            a.alloc_size = nbytes
            a._fl_ptr = address
            a._fl_c = True  # (empty's arrays are C-contiguous: see is_c_contiguous)
            a._fl_device = device
            a._fl_free = free
            return a

        def __copy__(self):  # (numba's ``bind``) a view that keeps this array alive, never a second owner
            return _DevArray.view_of(self, self.shape, self.strides, self.dtype)

        def __del__(self):
            free = self.__dict__.get("_fl_free")  # an allocation whose memory no numba pointer frees yet
            if free is not None:
                try:
                    free(self._fl_ptr)
                except Exception:  # noqa: BLE001 - nothing to report to at interpreter shutdown
                    pass

        @functools.cached_property
        def _fl_ptr(self) -> int:
            """Device address of the first element (0 when empty)."""
            return int(self.gpu_data.device_pointer_value or 0) if self.size else 0

        @functools.cached_property
        def gpu_data(self):
            """numba's memory pointer of an array made by :meth:`view_of` or :meth:`allocation`, made on
            first use (numba's constructor sets it on the others)."""
            if not self.alloc_size:
                return _driver.MemoryPointer(_context(current_device()), _driver.binding.CUdeviceptr(0), 0)
            if "_fl_start" in self.__dict__:
                return self._fl_owner.gpu_data.view(self._fl_start, self._fl_start + self.alloc_size)
            with _POINTER_LOCK:  # two threads must not both make one: only one pointer can take the free
                made = self.__dict__.get("gpu_data")
                if made is None:
                    free = self.__dict__["_fl_free"]
                    made = _driver.MemoryPointer(_context(self._fl_device), _driver.binding.CUdeviceptr(self._fl_ptr),
                                                 self.alloc_size, finalizer=functools.partial(free, self._fl_ptr))
                    del self.__dict__["_fl_free"]  # the pointer frees the memory from now on
                    self.__dict__["gpu_data"] = made
                return made

        @functools.cached_property
        def _dummy(self):  # likewise numba's dummy array
            return _dummyarray.Array.from_desc(0, self.shape, self.strides, self.dtype.itemsize)

        @property
        def _numba_type_(self):
            return array_type(self.dtype, len(self.shape), layout_of(self.shape, self.strides, self.dtype.itemsize))

        def reshape(self, *newshape, **kws):
            if len(newshape) == 1 and isinstance(newshape[0], (tuple, list)):
                newshape = newshape[0]
            if kws.get("order", "C") != "C":
                return super().reshape(*newshape, **kws)
            shape = _resolve_shape(tuple(int(n) for n in newshape), self.size)
            if shape == self.shape:
                return self
            strides = nocopy_strides(self.shape, self.strides, shape, self.dtype.itemsize)
            if strides is None:
                return contiguous(self).reshape(shape)
            return _DevArray.view_of(self, shape, strides, self.dtype)

    def _anchor(base, start: int) -> tuple:
        """``(owner, start)`` of a view ``start`` bytes into ``base``: a view of a view hangs on the memory's
        owner, never on a chain of views (a view op in a loop would otherwise chain without end, and
        ``gpu_data`` would recurse down the chain)."""
        owner_start = base.__dict__.get("_fl_start")
        if owner_start is None:
            return base, start
        return base._fl_owner, owner_start + start

    _POINTER_LOCK = threading.Lock()
    register_array_class(_DevArray)
    register_array_class(_NumbaDevArray)
    _CONTEXTS: dict = {}

    def _context(index: int):
        """numba's context object of device ``index`` (asking numba for the current one costs ~15 µs)."""
        ctx = _CONTEXTS.get(index)
        if ctx is None:
            with _on_device(index):
                ctx = _CONTEXTS[index] = _cuda.current_context()
        return ctx


def _as_ours(arr):
    """Device array ``arr`` as a ``_DevArray`` (numba's own arrays, which some numba calls return, are
    wrapped whole) so that views can be made of it."""
    if type(arr) is _DevArray:
        return arr
    wrap = _DevArray(tuple(arr.shape), tuple(arr.strides), arr.dtype, stream=arr.stream, gpu_data=arr.gpu_data)
    wrap._fl_owner = arr
    return wrap


def _resolve_shape(shape: tuple, size: int) -> tuple:
    """``shape`` with its ``-1`` worked out for ``size`` elements, or numpy's error: numpy reshapes a
    broadcast scalar (no memory, every stride 0) to any shape of that size without a copy."""
    if -1 not in shape and math.prod(shape) == size and (not shape or min(shape) >= 0):
        return shape  # the common case, without numpy's microseconds
    if shape == (-1,):
        return (size,)
    return np.broadcast_to(np.empty((), np.uint8), (size,)).reshape(shape).shape


def nocopy_strides(old_shape: tuple, old_strides: tuple, new_shape: tuple, item: int) -> tuple | None:
    """Byte strides viewing memory of (``old_shape``, ``old_strides``) as C-ordered ``new_shape`` without a
    copy, or None when no view can (numpy's ``_attempt_nocopy_reshape``); ``item``: the element size.
    Strides are non-negative."""
    old = [(n, s) for n, s in zip(old_shape, old_strides) if n != 1]
    if not old or 0 in new_shape:  # one element or none: any strides do
        return _c_strides(new_shape, item)
    new_strides = [0] * len(new_shape)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new_shape) and oi < len(old):
        n_prod, o_prod = new_shape[ni], old[oi][0]
        while n_prod != o_prod:
            if n_prod < o_prod:
                n_prod *= new_shape[nj]
                nj += 1
            else:
                o_prod *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):  # the old axes merged here must be contiguous among themselves
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    last = new_strides[ni - 1] if ni else old[-1][1]
    for k in range(ni, len(new_shape)):
        new_strides[k] = last
    return tuple(new_strides)


def is_device_array(x) -> bool:
    """Whether ``x`` is a device array of this backend."""
    return isinstance(x, _DevArray) or hasattr(x, "__cuda_array_interface__") and not isinstance(x, np.ndarray)


def _index(device) -> int:
    if device is None:
        return current_device()
    i = getattr(device, "index", device)
    return current_device() if i is None else i


@functools.lru_cache(maxsize=4096)  # (a model allocates the same shapes every step)
def _c_strides(shape: tuple, item: int) -> tuple:
    """C strides in bytes of ``shape`` with ``item`` bytes per element."""
    strides = []
    acc = item
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


@functools.lru_cache(maxsize=4096)
def _geometry_of(shape, np_dtype) -> tuple:
    shape = tuple(map(int, shape))
    dtype = np_dtype if isinstance(np_dtype, np.dtype) else np.dtype(np_dtype)
    return shape, dtype, _c_strides(shape, dtype.itemsize), math.prod(shape) * dtype.itemsize


def _geometry(shape, np_dtype) -> tuple:
    """:func:`empty`'s view of its arguments ``(shape of ints, numpy dtype, C strides in bytes, bytes)``, worked out
    once per (shape, dtype) as callers give them: a training step allocates the same few hundred shapes every step,
    and the conversions cost a third of an allocation's host time."""
    try:
        return _geometry_of(shape, np_dtype)
    except TypeError:  # a shape given as a list
        return _geometry_of(tuple(shape), np_dtype)


def _finalizer(alloc, address):
    def free():
        alloc.free(address)

    return free


def empty(shape: tuple, np_dtype, device=None):
    """An uninitialised C-contiguous device array on ``device`` (default: current device)."""
    shape, dtype, strides, nbytes = _geometry(shape, np_dtype)
    s = current_stream(None if device is None else _index(device))
    if SIM:  # host memory; the allocator still keeps the books (a simulated device behind it)
        arr = _make(np.empty(shape, dtype), s.numba)
        if nbytes:
            alloc = get_allocator(s.device_index)
            address = device_malloc(alloc, nbytes, None)
            weakref.finalize(arr._ary, _finalizer(alloc, address))
        return arr
    if nbytes > sys.maxsize:  # the factory names the size (Note [Allocation errors])
        raise ValueError(f"array is too big: {nbytes} bytes")
    if nbytes == 0:
        return _DevArray(shape, strides, dtype, stream=s.numba)
    alloc = get_allocator(s.device_index)
    if device is None or s.device_index == current_device():
        address = device_malloc(alloc, nbytes, s.numba)
    else:
        with _on_device(s.device_index):
            address = device_malloc(alloc, nbytes, s.numba)
    return _DevArray.allocation(shape, strides, dtype, s.numba, address, nbytes, s.device_index, alloc.free)


def full(shape: tuple, value, np_dtype, device=None):
    """A device array filled with ``value`` (uninitialised when ``value`` is None)."""
    arr = empty(shape, np_dtype, device)
    if value is not None and arr.size:
        fill(arr, value)
    return arr


def data_ptr(arr) -> int:
    """Device address of the first element of ``arr`` (0 for empty arrays)."""
    if SIM:
        return _raw(arr).__array_interface__["data"][0]
    return device_ptr(arr)


storage_data_ptr = data_ptr


def _extent(shape, strides, item) -> int:
    """Bytes from the first to past the last element of a view (0 when empty; strides non-negative)."""
    extent = item
    for n, s in zip(shape, strides):
        if n == 0:
            return 0
        extent += (n - 1) * s
    return extent


def as_strided(buffer, shape: tuple, strides: tuple, offset: int, np_dtype=None):
    """A view of the flat device array ``buffer``: ``shape``, element ``strides``, element ``offset``,
    its elements of ``np_dtype`` (default: the buffer's; another one views the same bytes).

    Bounds are checked by the caller; strides are non-negative.
    """
    dtype = buffer.dtype if np_dtype is None else np.dtype(np_dtype)
    item = dtype.itemsize
    shape = tuple(int(n) for n in shape)
    bstrides = tuple(int(s) * item for s in strides)
    if SIM:
        raw = _raw(buffer)
        flat = raw
        if raw.ndim != 1:  # its memory from the first element, as a GPU's pointers see it (a reshape would copy a
            # strided kernel result, and the view would not share its memory)
            n = _extent(raw.shape, raw.strides, raw.itemsize) // raw.itemsize
            flat = np.lib.stride_tricks.as_strided(raw, (n,), (raw.itemsize,))
        view = np.ndarray(shape, dtype, buffer=flat, offset=offset * item, strides=bstrides) \
            if flat.size else np.empty(shape, dtype)
        return _make(view, buffer.stream)
    return _DevArray.view_of(_as_ours(buffer), shape, bstrides, dtype, offset * item)


def view_from(arr, buffer, shape: tuple, strides: tuple, start: int, np_dtype):
    """A view of device array ``arr``'s memory (part of flat storage array ``buffer``) from byte ``start``
    past ``arr``'s first element: ``shape``, byte ``strides`` (non-negative), elements of ``np_dtype``.
    The view operators' way to the device (Note [Device-agnostic views]); bounds are the caller's."""
    dtype = np.dtype(np_dtype)
    if SIM:
        item = dtype.itemsize
        offset = (data_ptr(arr) - data_ptr(buffer) + start) // item
        return as_strided(buffer, shape, tuple(s // item for s in strides), offset, dtype)
    return _DevArray.view_of(_as_ours(arr), shape, tuple(strides), dtype, start)


def flat_view(arr):
    """A 1-d contiguous device array spanning the memory of view ``arr`` from its first element.

    Kernels index it with element strides (``arr`` must have non-negative strides).
    """
    item = arr.dtype.itemsize
    if not SIM and len(arr.shape) == 1 and (arr.strides[0] == item or arr.shape[0] <= 1):
        return arr
    n = _extent(arr.shape, arr.strides, item) // item
    if SIM:
        raw = _raw(arr)
        if n == 0:
            return _make(np.empty(0, raw.dtype), arr.stream)
        return _make(np.lib.stride_tricks.as_strided(raw, (n,), (item,)), arr.stream)
    return _DevArray.view_of(_as_ours(arr), (n,), (item,), arr.dtype)


def contiguous_flat(arr):
    """A 1-d view of device array ``arr``'s elements when ``arr`` is C-contiguous (``arr`` itself when 1-d),
    else None: the launchers' fast path, where every operand is C-contiguous of one shape and a kernel
    needs neither broadcasting nor strides (whether an array is C-contiguous is worked out once per array).
    On a GPU the view is a launch argument only (``_direct.FlatArg``: no device-array object is made)."""
    shape = arr.shape
    if len(shape) == 1:
        return arr if arr.strides[0] == arr.dtype.itemsize or shape[0] <= 1 else None
    if SIM:
        return flat_view(arr) if is_c_contiguous(arr) else None
    return FlatArg(arr, arr.size) if is_c_contiguous(arr) else None


def flat_arg(arr):
    """:func:`flat_view` of ``arr`` for a kernel launch only: on a GPU a ``_direct.FlatArg`` (no device-array
    object is made), under the simulator the view itself."""
    item = arr.dtype.itemsize
    if SIM or (len(arr.shape) == 1 and (arr.strides[0] == item or arr.shape[0] <= 1)):
        return flat_view(arr)
    return FlatArg(arr, arr.size if is_c_contiguous(arr) else _extent(arr.shape, arr.strides, item) // item)


def flat_parts(arr, parts: int) -> list:
    """``parts`` launch arguments over consecutive thirds (halves, ...) of 1-d C-contiguous device array ``arr``:
    each ``arr.size // parts`` elements (on a GPU a ``_direct.FlatArg`` with an offset, under the simulator a
    view). One allocation then serves several scratch arrays of a launch (the split reductions' partials)."""
    n = arr.size // parts
    if SIM:
        return [as_strided(arr, (n,), (1,), i * n) for i in range(parts)]
    step = n * arr.dtype.itemsize
    return [FlatArg(arr, n, i * step) for i in range(parts)]


def owns_memory_alone(data) -> bool:
    """Whether no array but ``data`` can reach its memory (so a gradient may become ``.grad`` without a copy):
    an allocation that still frees its own memory (numba has no memory pointer for it, which numba's views
    would share unseen: Note [Who frees an allocation]) and that no view of ours holds, or a view of such an
    allocation that only ``data`` refers to (references to the owner: ``data._fl_owner``, the local and
    getrefcount's argument). Either way ``data`` itself must be one tensor's alone (references: the
    tensor's, its storage's, the argument and getrefcount's): a kernel that returns one array for two
    results gives two tensors over it, and both must not become ``.grad`` of different leaves."""
    if SIM:
        return False
    d = getattr(data, "__dict__", None)
    if d is None or sys.getrefcount(data) > 4:
        return False
    if "_fl_free" in d:
        return True
    owner = d.get("_fl_owner")
    return (owner is not None and "_fl_start" in d and "_fl_free" in getattr(owner, "__dict__", ())
            and sys.getrefcount(owner) == 3)


def reinterpret(arr, np_dtype):
    """A view of device array ``arr``'s memory as ``np_dtype``, whose itemsize must equal ``arr``'s:
    same shape and strides, no copy (how kernels read bfloat16 storage as uint16 bits)."""
    dtype = np.dtype(np_dtype)
    if dtype.itemsize != arr.dtype.itemsize:
        raise ValueError(f"reinterpret: np_dtype must have itemsize {arr.dtype.itemsize} ({arr.dtype}), "
                         f"got {dtype} of itemsize {dtype.itemsize}")
    if SIM:
        return _make(_raw(arr).view(dtype), arr.stream)
    return _DevArray.view_of(_as_ours(arr), tuple(arr.shape), tuple(arr.strides), dtype)


def is_c_contiguous(arr) -> bool:
    """Whether device array ``arr`` is C-contiguous (dims of length 1 aside), worked out once per array and
    kept as ``_fl_c``, which the direct launches read as the array's layout (``_direct.arg_key``)."""
    d = arr.__dict__
    c = d.get("_fl_c")
    if c is None:
        c = d["_fl_c"] = layout_of(tuple(arr.shape), tuple(arr.strides), arr.dtype.itemsize) == "C"
    return c


def to_numpy(arr) -> np.ndarray:
    """Copy device array ``arr`` to a new host array, waiting for the copy (and queued work)."""
    s = current_stream()
    if arr.size == 0:
        return np.empty(arr.shape, arr.dtype)
    if not is_c_contiguous(arr):
        arr = contiguous(arr)
    host = np.empty(arr.shape, arr.dtype)
    if SIM:
        s.numba.synchronize()
        np.copyto(host, _raw(arr))
    else:
        _as_bits(arr).copy_to_host(_host_bits(host), stream=s.numba)
        s.numba.synchronize()
    host_sync(s.device_index)
    return host


def from_numpy(arr: np.ndarray, device=None):
    """A new device array on ``device`` holding a copy of host array ``arr`` (queued on the current stream)."""
    arr = np.asarray(arr)
    if not arr.flags.c_contiguous:
        arr = np.array(arr, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    out = empty(arr.shape, arr.dtype, device)
    if arr.size == 0:
        return out
    if SIM:
        np.copyto(_raw(out), arr)
        return out
    _as_bits(out).copy_to_device(_host_bits(arr), stream=current_stream(_index(device)).numba)
    return out


def _host_bits(arr: np.ndarray) -> np.ndarray:
    """``arr`` itself, or for bfloat16 a uint16 view of it: numba-cuda copies through the buffer protocol,
    which cannot export ml_dtypes' dtypes ("cannot include dtype 'E' in a buffer"); the bits are the value."""
    return arr.view(f"u{arr.dtype.itemsize}") if arr.dtype.kind == "V" else arr


def _as_bits(arr):
    """Device array ``arr``, or for bfloat16 a same-shape uint view of it (see :func:`_host_bits`)."""
    return reinterpret(arr, f"u{arr.dtype.itemsize}") if arr.dtype.kind == "V" else arr


def copy_(dst, src) -> None:
    """Copy ``src`` (a device array, host array or scalar; broadcastable) into ``dst``, casting."""
    if isinstance(src, np.ndarray):
        src = from_numpy(src)
    copy_into(dst, src)


def synchronize(device=None) -> None:
    """Wait for every stream of ``device``."""
    from flambeau.cuda import synchronize as sync

    sync(device)


def cuda_array_interface(arr) -> dict:
    """``__cuda_array_interface__`` (v3) of device array ``arr``.

    ``stream`` is the current stream, on which flambeau queued the work producing ``arr``:
    1 for the legacy default stream, else the stream handle (consumers wait on it).
    """
    return {
        "shape": tuple(arr.shape),
        "strides": None if is_c_contiguous(arr) else tuple(arr.strides),
        "data": (data_ptr(arr) if arr.size else 0, False),
        "typestr": arr.dtype.str,
        "version": 3,
        "stream": current_stream()._cai_stream(),
    }

