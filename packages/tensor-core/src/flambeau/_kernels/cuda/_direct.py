"""Launching compiled numba.cuda kernels straight through the driver's ``cuLaunchKernel``.

Note [Direct kernel launches]
    numba's dispatcher prepares every launch in Python: it types each argument (a device array's
    numba type, each tuple element's), converts each scalar to a ctypes value, wraps each array in
    a memory view, and hands the lot to cuda.core's ``launch``. For flambeau's strided kernels (three
    arrays, four tuples, a few scalars) that is about 90 µs of host time per launch on an H100
    host, against 7 µs for a ``cuLaunchKernel`` of the same kernel with its arguments packed into
    one buffer; eager models launch thousands of small kernels per step, so the launch path *is* their
    speed. :class:`Kernel` wraps a numba dispatcher and launches the way ``dispatcher[grid, block,
    stream](*args)`` does, only directly:

    * The arguments' types come from a cheap key per argument (:func:`arg_key`): a device array's
      dtype, ndim and layout, a scalar's Python or numpy type, a tuple's element keys. The first launch
      with a key maps it to numba types, compiles (or loads from numba's disk cache) that overload with
      ``dispatcher.compile`` and builds its :class:`Plan`; later launches look the plan up.
    * A plan packs the arguments as numba's ABI lays them out in the kernel's parameter list (checked
      against the PTX of every kernel by ``tests/test_cuda_direct_launch.py``): an array is
      ``meminfo, parent, nitems, itemsize, data, shape..., strides...`` (all 64-bit), a tuple is its
      elements, a boolean one byte, float16 two, complex numbers two floats. Its packing function is
      generated source (one ``struct.pack`` call), and the buffer goes to ``cuLaunchKernel`` as
      ``CU_LAUNCH_PARAM_BUFFER_POINTER`` with its exact size (no trailing padding: on an H100 the pooling,
      grid-sample and normalisation kernels, whose parameters end in a byte, launch so).
    * A device array is typed ``C`` when its strides are exactly the C-contiguous ones (dims of length
      1 aside) and ``A`` otherwise, whatever numba itself would say: the kernel then reads the strides
      it is given, so the layout is right by construction. flambeau's device arrays report the same
      type to numba (``_DevArray._numba_type_`` in the CUDA backend), so the dispatcher and this path
      compile one overload.
    * What the direct path does not cover goes through the dispatcher unchanged: the simulator, kernels
      numba marks launch-config-sensitive, cooperative or debug kernels, any argument of another type
      (a host array numba would copy, another library's device array), and numba-cuda versions whose
      kernels are not context-independent ``CUkernel`` handles (an older cuda.core).
    * ``cuLaunchKernel`` is called through cffi where it is installed (the ``cuda`` extras install it), else
      through ctypes: eleven arguments cost cffi about half of ctypes' marshalling (0.9 against 1.7 µs on an
      AVX-512 Xeon, ``tools/host_overhead.py --ffi``), and every launch pays it.
    * ``cuLaunchKernel`` runs on the calling thread's current context, which flambeau binds on first use
      of a device on every thread (Note [A CUDA context on every thread] in ``flambeau.cuda._streams``);
      a ``CUkernel`` handle serves every context.
    * A :class:`FlatArg` stands for the 1-d view of a C-contiguous array's elements, which the launchers
      pass for every contiguous operand: the plan packs what the view would give (pointer, size, one
      stride) and no view is made, which costs a device-array object per operand and launch (about a
      fifth of an elementwise operator's host time); numba's dispatcher gets the real view.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
import warnings

import numpy as np

from flambeau.cuda._streams import stream_handle

__all__ = ["Kernel", "Plan", "FlatArg", "arg_key", "numba_type", "array_type", "param_format", "pack_source",
           "layout_of", "register_array_class", "device_ptr"]

# CU_LAUNCH_PARAM_* markers of cuLaunchKernel's ``extra`` argument (cuda.h)
_PARAM_END, _PARAM_BUFFER_POINTER, _PARAM_BUFFER_SIZE = 0, 1, 2


# --- argument keys -----------------------------------------------------------------------------------
def layout_of(shape: tuple, strides: tuple, itemsize: int) -> str:
    """``"C"`` when byte ``strides`` are those of a C-contiguous array of ``shape`` (dims of length 1
    aside: any stride reads the same element there), else ``"A"`` (Note [Direct kernel launches])."""
    if len(shape) == 1:  # the common case: flat views
        return "C" if strides[0] == itemsize or shape[0] == 1 else "A"
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return "A"
        expect *= n
    return "C"


_SCALAR_KEYS = {int: "i8", float: "f8", bool: "?"}
_SCALAR_KEYS.update({t: np.dtype(t).str for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                                 np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                                 np.float64, np.complex64, np.complex128)})
_ARRAY_CLASSES: set = set()  # device array classes the direct path reads (registered by the backend)


def register_array_class(cls) -> None:
    """Let the direct path take device arrays of class ``cls`` (numba device arrays and subclasses)."""
    _ARRAY_CLASSES.add(cls)


class FlatArg:
    """The 1-d view of ``n`` elements of device array ``base`` from byte ``start`` past its first element (its
    memory, whatever its strides: the CUDA backend's ``flat_view``) as a kernel argument (Note [Direct kernel
    launches]): a ``C`` array at that address. It keeps ``base`` alive, has what a plan packs (``_fl_ptr``,
    ``size``, ``shape``, ``strides``, ``dtype``) and :meth:`view` for numba's dispatcher; only launches take it."""

    __slots__ = ("base", "_fl_ptr", "size", "shape", "strides", "dtype", "start")

    def __init__(self, base, n: int, start: int = 0):
        self.base = base
        self.dtype = dtype = base.dtype
        self.size = n
        self.shape = (n,)
        self.strides = (dtype.itemsize,)
        self.start = start
        self._fl_ptr = device_ptr(base) + start

    def view(self):
        """The device array this stands for (what numba's dispatcher takes)."""
        from flambeau._backends import backend

        be = backend("cuda")
        flat = be.flat_view(self.base)
        if self.start or flat.size != self.size:
            return be.as_strided(flat, (self.size,), (1,), self.start // self.dtype.itemsize)
        return flat


def _views(args) -> tuple:
    """``args`` with every :class:`FlatArg` replaced by its view (for numba's dispatcher)."""
    return tuple(a.view() if type(a) is FlatArg else a for a in args)


def arg_key(v):
    """A hashable key of kernel argument ``v`` that fixes its numba type, or None when the direct path
    does not take it: ``"<f4"``-style keys for scalars, ``(dtype, ndim, layout)`` for device arrays,
    a tuple of element keys for tuples."""
    t = type(v)
    k = _SCALAR_KEYS.get(t)
    if k is not None:
        return k
    if t is FlatArg:
        return v.dtype, 1, "C"
    if t is tuple:
        k = _TUPLE_KEYS.get(tuple(map(type, v)))  # tuples of scalars (shapes, strides): one lookup
        if k is not None:
            return k
        keys = tuple(map(arg_key, v))
        if None in keys:
            return None
        if all(type(e) in _SCALAR_KEYS for e in v):
            _TUPLE_KEYS[tuple(map(type, v))] = keys
        return keys
    if t in _ARRAY_CLASSES:
        shape = v.shape
        c = v.__dict__.get("_fl_c")  # the backend's C-contiguity, where it knows it already
        return v.dtype, len(shape), layout_of(shape, v.strides, v.dtype.itemsize) if c is None else "C" if c else "A"
    return None


_TUPLE_KEYS: dict = {}  # element types of a tuple of scalars -> its key


@functools.cache
def array_type(dtype: np.dtype, ndim: int, layout: str):
    """numba's ``Array`` type of a device array of numpy ``dtype``, ``ndim`` dims and ``layout``."""
    from numba.core import types
    from numba.np.numpy_support import from_dtype

    return types.Array(from_dtype(dtype), ndim, layout)


def numba_type(key):
    """The numba type of argument key ``key`` (see :func:`arg_key`)."""
    from numba.core import types
    from numba.np.numpy_support import from_dtype

    if isinstance(key, str):
        return types.boolean if key == "?" else from_dtype(np.dtype(key))
    if isinstance(key, tuple) and len(key) == 3 and isinstance(key[0], np.dtype):
        return array_type(*key)
    return types.BaseTuple.from_types([numba_type(k) for k in key])


# --- parameter packing -------------------------------------------------------------------------------
def _flatten(ty, expr: str, fmt: list, values: list, address: str = "_ptr({})") -> None:
    """Append the struct format and the Python expressions of kernel argument ``expr`` of numba type ``ty``
    in numba's parameter order (numba-cuda's ``_Kernel._prepare_args``); ``address`` makes an array's
    device address from its expression."""
    from numba.core import types

    if isinstance(ty, types.Array):
        from numba.np.numpy_support import as_dtype

        fmt.append("q" * (5 + 2 * ty.ndim))
        values += ["0", "0", f"{expr}.size", str(as_dtype(ty.dtype).itemsize), address.format(expr)]
        values += [f"*{expr}.shape", f"*{expr}.strides"]
    elif isinstance(ty, types.BaseTuple):
        for i, t in enumerate(ty):
            _flatten(t, f"{expr}[{i}]", fmt, values, address)
    elif ty == types.boolean:
        fmt.append("?")
        values.append(expr)
    elif isinstance(ty, types.Complex):
        fmt.append("ff" if ty.bitwidth == 64 else "dd")
        values += [f"{expr}.real", f"{expr}.imag"]
    elif isinstance(ty, types.Integer):
        fmt.append({8: "b", 16: "h", 32: "i", 64: "q"}[ty.bitwidth].upper() if not ty.signed
                   else {8: "b", 16: "h", 32: "i", 64: "q"}[ty.bitwidth])
        values.append(expr)
    elif isinstance(ty, types.Float):
        fmt.append({16: "e", 32: "f", 64: "d"}[ty.bitwidth])  # float16 travels as its bits: struct's "e"
        values.append(expr)
    else:
        raise TypeError(f"direct launch: no packing for kernel argument type {ty}")


def param_format(argtypes) -> str:
    """The ``struct`` format (native alignment, as the driver lays parameters out) of a kernel's
    parameters for numba ``argtypes``."""
    fmt: list = []
    for i, ty in enumerate(argtypes):
        _flatten(ty, f"a{i}", fmt, [])
    return "@" + "".join(fmt)


def pack_source(argtypes) -> str:
    """Source of ``pack(buf, a0, a1, ...)``, which writes the parameters of a launch with ``argtypes`` into
    the writable buffer ``buf``. Array addresses are read as flambeau's arrays keep them (``_fl_ptr``), and
    through :func:`device_ptr` when an argument has none (numba's own device arrays)."""
    names = [f"a{i}" for i in range(len(argtypes))]
    kept, any_array = [], []
    for name, ty in zip(names, argtypes):
        _flatten(ty, name, [], kept, "{}._fl_ptr")
        _flatten(ty, name, [], any_array)
    return (f"def pack(buf, {', '.join(names)}):\n"
            f"    try:\n        _pack_into(buf, 0, {', '.join(kept)})\n"
            f"    except AttributeError:\n        _pack_into(buf, 0, {', '.join(any_array)})\n")


def device_ptr(a) -> int:
    """Device address of array ``a``'s first element (flambeau's arrays know it: ``_fl_ptr``)."""
    p = getattr(a, "_fl_ptr", None)
    if p is not None:
        return p
    return a.gpu_data.device_pointer_value or 0 if a.size else 0


class Plan:
    """One compiled overload of a kernel: its ``CUkernel`` handle and its argument packer."""

    __slots__ = ("func", "pack", "nbytes", "name", "_local")

    def __init__(self, func: int, argtypes, name: str):
        fmt = struct.Struct(param_format(argtypes))
        namespace = {"_pack_into": fmt.pack_into, "_ptr": device_ptr}
        exec(compile(pack_source(argtypes), f"<pack {name}>", "exec"), namespace)  # noqa: S102 - our own source
        self.func = func
        self.pack = namespace["pack"]
        self.nbytes = fmt.size
        self.name = name
        self._local = threading.local()

    def slot(self) -> tuple:
        """``(buffer, extra)`` of the calling thread: the parameter buffer the launches of this plan write,
        and the ``extra`` argument of ``cuLaunchKernel`` pointing at it and at its size (the driver copies the
        parameters when the launch is queued, so a thread reuses its buffer). cffi memory where the driver is
        called through cffi, ctypes memory otherwise (:func:`_driver`)."""
        local = self._local
        try:
            return local.slot
        except AttributeError:
            pass
        ffi = _ffi()
        if ffi is not None:
            buf, size = ffi.new("char[]", max(self.nbytes, 1)), ffi.new("size_t *", self.nbytes)
            extra = ffi.new("void *[5]", [ffi.cast("void *", _PARAM_BUFFER_POINTER), buf,
                                          ffi.cast("void *", _PARAM_BUFFER_SIZE), size, ffi.NULL])
            local.keep = buf, size  # (what ``extra`` points at lives as long as the slot)
            slot = local.slot = (ffi.buffer(buf), extra)
            return slot
        buf, size = ctypes.create_string_buffer(max(self.nbytes, 1)), ctypes.c_size_t(self.nbytes)
        local.keep = size
        slot = local.slot = (buf, _Extra(_PARAM_BUFFER_POINTER, ctypes.addressof(buf), _PARAM_BUFFER_SIZE,
                                         ctypes.addressof(size), _PARAM_END))
        return slot


_Extra = ctypes.c_void_p * 5
_MISSING = object()


# --- the driver --------------------------------------------------------------------------------------
_DRIVER: list = []  # (cuLaunchKernel, error name of a CUresult), loaded once
_FFI: list = []  # the cffi FFI of the driver's calls, or None without cffi
_LOADING = threading.Lock()  # (two threads' first launches load them once)
_CDEF = """
int cuLaunchKernel(uintptr_t f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes,
    uintptr_t hStream, uintptr_t kernelParams, void **extra);
int cuGetErrorName(int error, const char **pStr);
"""


def _ffi():
    """The cffi FFI the launches go through, or None without cffi (then ctypes). The handles (``CUfunction``,
    ``CUstream``) and the unused ``kernelParams`` are declared ``uintptr_t``: Python ints, passed in the registers
    of pointers."""
    if not _FFI:
        with _LOADING:
            if not _FFI:
                try:
                    import cffi
                except ImportError:
                    _FFI.append(None)
                else:
                    ffi = cffi.FFI()
                    ffi.cdef(_CDEF)
                    _FFI.append(ffi)
    return _FFI[0]


def _driver():
    """libcuda's ``cuLaunchKernel`` and a CUresult's name, loaded once: through cffi where it is installed (a
    call of eleven arguments costs about half of ctypes': 0.86 against 1.68 µs on an AVX-512 Xeon), else ctypes."""
    if not _DRIVER:
        ffi = _ffi()
        with _LOADING:
            if not _DRIVER:
                _load_driver(ffi)
    return _DRIVER[0]


def _load_driver(ffi) -> None:
    """Append ``(cuLaunchKernel, error name)`` of libcuda to :data:`_DRIVER`, through ``ffi`` or, where it is None,
    ctypes (called once, under the lock)."""
    if ffi is not None:
        lib = ffi.dlopen("libcuda.so.1")

        def name(code: int) -> str:
            out = ffi.new("const char **")
            lib.cuGetErrorName(code, out)
            return ffi.string(out[0]).decode() if out[0] != ffi.NULL else f"CUresult {code}"

        _DRIVER.append((lib.cuLaunchKernel, name))
        return
    lib = ctypes.CDLL("libcuda.so.1")
    launch = lib.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    get_name = lib.cuGetErrorName
    get_name.restype = ctypes.c_int
    get_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def name(code: int) -> str:
        out = ctypes.c_char_p()
        get_name(code, ctypes.byref(out))
        return out.value.decode() if out.value else f"CUresult {code}"

    _DRIVER.append((launch, name))


def _error_name(code: int) -> str:
    return _driver()[1](code)


def _dims(d) -> tuple:
    """A grid or block of one to three dims as three ints (tuples written out: every 2-d launch pays this)."""
    if type(d) is int:
        return d, 1, 1
    if isinstance(d, tuple):
        n = len(d)
        if n == 2:
            return int(d[0]), int(d[1]), 1
        if n == 3:
            return int(d[0]), int(d[1]), int(d[2])
        return tuple(int(x) for x in d) + (1,) * (3 - n)
    return int(d), 1, 1


class Kernel:
    """A numba.cuda kernel launched through ``cuLaunchKernel`` (Note [Direct kernel launches]).

    ``kernel[grid, block, stream](*args)`` and ``kernel[grid, block, stream, shared_bytes](*args)``
    launch as the numba dispatcher does; every other attribute is the dispatcher's.
    """

    __slots__ = ("dispatcher", "_plans", "_keyed", "_lock")

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self._plans: dict = {}  # argument keys -> plan (None: numba's dispatcher launches these)
        self._keyed: dict = {}  # callers' keys -> plan (see _Launch.keyed)
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.dispatcher, name)

    def __getitem__(self, config):
        return _Launch(self, config)

    def plan(self, args) -> Plan | None:
        """The plan of a launch with ``args``, made on first use; None when the direct path does not take them."""
        scalars = _SCALAR_KEYS  # (scalars, most arguments, without a call each)
        key = tuple([scalars.get(a.__class__) or arg_key(a) for a in args])
        plan = self._plans.get(key)
        if plan is None and key not in self._plans:
            plan = self._make_plan(key)
        return plan

    def keyed_plan(self, key, args) -> Plan | None:
        """The plan of a launch with ``args`` under a caller's ``key`` (see :meth:`_Launch.keyed`)."""
        plan = self._keyed.get(key, _MISSING)
        if plan is _MISSING:
            plan = self.plan(args)
            with self._lock:  # (refuse() walks this table under the lock)
                plan = self._keyed.setdefault(key, plan)
        return plan

    def launch(self, config, plan: Plan | None, args) -> None:
        """Launch ``args`` with launch configuration ``config`` by ``plan`` (None: by numba's dispatcher)."""
        if plan is None:
            self.dispatcher[config](*_views(args))
            return
        n = len(config)
        grid, block = config[0], config[1]
        gx, gy, gz = (grid, 1, 1) if grid.__class__ is int else _dims(grid)  # (launchers pass ints mostly)
        bx, by, bz = (block, 1, 1) if block.__class__ is int else _dims(block)
        try:
            buf, extra = plan._local.slot
        except AttributeError:
            buf, extra = plan.slot()
        plan.pack(buf, *args)
        try:
            code = _driver()[0](plan.func, gx, gy, gz, bx, by, bz, config[3] if n > 3 else 0,
                                stream_handle(config[2]) if n > 2 else 0, 0, extra)
        except OverflowError:  # a geometry no unsigned int holds (cffi checks): numba's dispatcher says what is wrong
            self.dispatcher[config](*_views(args))
            return
        if code:
            self.refuse(plan, args, config, _error_name(code))

    def launch_keyed(self, config, key, args: tuple) -> None:
        """``self[config].keyed(key, *args)`` without the intermediate object (the launchers' hot path)."""
        plan = self._keyed.get(key, _MISSING)
        if plan is _MISSING:
            plan = self.keyed_plan(key, args)
        self.launch(config, plan, args)

    def _make_plan(self, key: tuple) -> Plan | None:
        with self._lock:
            if key in self._plans:
                return self._plans[key]
            plan = None
            if None not in key:
                argtypes = tuple(numba_type(k) for k in key)
                compiled = self.dispatcher.compile(argtypes)  # a typing error is the caller's: it propagates
                handle = compiled._codelibrary.get_cufunc().handle
                direct = (type(handle).__name__ == "CUkernel" and not compiled.debug and not compiled.cooperative
                          and not compiled.extensions and not getattr(compiled, "launch_config_sensitive", False))
                if direct:
                    try:
                        plan = Plan(int(handle), argtypes, getattr(self.dispatcher.py_func, "__name__", "kernel"))
                    except (TypeError, ValueError, struct.error):  # a type the packer does not know: numba's way
                        plan = None
            self._plans[key] = plan
            return plan


    def refuse(self, plan: Plan, args, config, error: str) -> None:
        """After the driver refused a direct launch with ``args``: launch them through numba's dispatcher
        instead (which raises its own error if the launch itself is impossible) and, when that works,
        stop launching these argument types directly, with a warning: the direct path got something
        wrong that numba gets right, and should be fixed."""
        self.dispatcher[config](*_views(args))
        with self._lock:
            for table in (self._plans, self._keyed):
                for key in [k for k, v in list(table.items()) if v is plan]:
                    table[key] = None
        warnings.warn(f"cuLaunchKernel of kernel {plan.name!r} (launch configuration {config}) failed: {error}; "
                      "numba's dispatcher launched it, and launches these argument types from now on (please "
                      "report this)", RuntimeWarning, stacklevel=3)


class _Launch:
    __slots__ = ("kernel", "config")

    def __init__(self, kernel: Kernel, config):
        self.kernel = kernel
        self.config = config

    def __call__(self, *args):
        kernel = self.kernel
        kernel.launch(self.config, kernel.plan(args), args)

    def keyed(self, key, *args):
        """Launch ``args`` whose numba types the caller's hashable ``key`` determines: two launches with equal
        keys must have arguments of equal numba types (the same array dtypes, ndims and layouts, tuple
        lengths, scalar types). The hot launchers (elementwise) know this from a few dtypes, which spares
        typing a dozen arguments on every launch."""
        self.kernel.launch_keyed(self.config, key, args)
