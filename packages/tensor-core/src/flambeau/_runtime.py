"""torch's top-level runtime names that are not operators: constants, switches, build facts, legacy factories.

``flambeau.e``/``pi``/``inf``/``nan``/``newaxis``, :func:`typename`, the inter-op thread count, the
denormal and warn-always switches, the deterministic debug mode (over :mod:`flambeau._determinism`),
what the build has (``has_lapack`` ...), :func:`get_device`/:func:`get_device_module`, the deprecated
:func:`set_default_tensor_type` and :func:`range`, and the factories :func:`empty_permuted` and
:func:`from_file`. Each behaves as torch's on a CPU build; where flambeau has nothing to switch, the
docstring says what is recorded and what is not.
"""

from __future__ import annotations

import importlib
import math
import os
import warnings

import numpy as np

from flambeau import _dtype as dt
from flambeau._determinism import FLAGS, use_deterministic_algorithms
from flambeau._device import CPU, to_device
from flambeau._factories import empty_strided
from flambeau._legacy_types import resolve_type
from flambeau._memory_format import dense_strides
from flambeau._storage import Storage
from flambeau._tensor import Tensor, _wrap

__all__ = ["e", "pi", "inf", "nan", "newaxis", "typename", "get_num_interop_threads", "set_num_interop_threads",
           "init_num_threads", "set_flush_denormal", "set_warn_always", "is_warn_always_enabled",
           "set_deterministic_debug_mode", "get_deterministic_debug_mode", "has_lapack", "has_mkl", "has_openmp",
           "has_spectral", "compiled_with_cxx11_abi", "get_device", "get_device_module", "set_default_tensor_type",
           "range", "empty_permuted", "from_file", "is_inference", "is_distributed"]

e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None

# What this build has, as torch's flags say of its own: numpy's LAPACK serves flambeau.linalg, numpy's FFT
# flambeau.fft; there is no MKL and no OpenMP (numba threads through TBB: Note [numba's threading layer]).
has_lapack = True
has_spectral = True
has_mkl = False
has_openmp = False


def compiled_with_cxx11_abi() -> bool:
    """True, as torch's wheels say: flambeau has no C++ extension ABI for this to constrain."""
    return True


def typename(obj) -> str:
    """The type of ``obj`` as a string: ``'torch.FloatTensor'`` for a tensor (as :meth:`Tensor.type`), else
    ``'module.QualName'`` of a class or function, or of the class of another object (builtins unprefixed)."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if qualname is None or not isinstance(module, str):
        module, qualname = type(obj).__module__, type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


# --- threads ------------------------------------------------------------------------------------------
# torch's inter-op pool runs independent operators of a TorchScript graph at once; flambeau runs operators
# one after the other, so the number is only recorded (and fixed once set, as torch's).
_interop = {"threads": max(1, os.cpu_count() or 1), "set": False}


def get_num_interop_threads() -> int:
    """The number of inter-op threads (the CPU count unless :func:`set_num_interop_threads` set it)."""
    return _interop["threads"]


def set_num_interop_threads(n: int) -> None:
    """Record the number of inter-op threads; as torch, only once per process.

    Raises:
        RuntimeError: ``n`` is not a positive integer, or it was set before.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    if _interop["set"]:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _interop["threads"], _interop["set"] = n, True


def init_num_threads() -> None:
    """Initialise the intra-op thread count of this thread: nothing to do (flambeau's pool is per process)."""


def set_flush_denormal(mode: bool) -> bool:
    """Ask the CPU to flush denormal floats to zero: returns False, as torch on a CPU without the switch.

    numpy and numba give no way to set the floating-point control register, so flambeau cannot honour it;
    torch returns False where it cannot either, and the program goes on with denormals kept.
    """
    if not isinstance(mode, (bool, np.bool_)):
        raise TypeError(f"set_flush_denormal(): argument 'mode' must be bool, not {type(mode).__name__}")
    return False


_warn_always = [False]


def set_warn_always(b: bool) -> None:
    """Make warnings that flambeau gives once per process be given every time (``torch.set_warn_always``).

    The warn-once sites read :func:`is_warn_always_enabled` (the TypedStorage deprecation does).
    """
    if not isinstance(b, (bool, np.bool_)):
        raise RuntimeError(f"setWarnOnlyOnce expects a bool, but got {type(b).__name__}")
    _warn_always[0] = bool(b)


def is_warn_always_enabled() -> bool:
    """Whether :func:`set_warn_always` turned warn-always on."""
    return _warn_always[0]


# --- determinism ----------------------------------------------------------------------------------------
_DEBUG_MODES = ("default", "warn", "error")


def set_deterministic_debug_mode(debug_mode: str | int) -> None:
    """``"default"``/0: deterministic algorithms off; ``"warn"``/1: on with ``warn_only=True``;
    ``"error"``/2: on (a nondeterministic operation raises). As ``torch.set_deterministic_debug_mode``,
    over :func:`flambeau.use_deterministic_algorithms`.

    Raises:
        TypeError: ``debug_mode`` is neither str nor int.
        RuntimeError: an unknown mode.
    """
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                               f"but got {debug_mode}")
        debug_mode = _DEBUG_MODES.index(debug_mode)
    elif not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """0, 1 or 2: the mode :func:`set_deterministic_debug_mode` (or ``use_deterministic_algorithms``) set."""
    if not FLAGS["deterministic_algorithms"]:
        return 0
    return 1 if FLAGS["deterministic_warn_only"] else 2


# --- devices --------------------------------------------------------------------------------------------
def get_device(input: Tensor) -> int:
    """The CUDA ordinal of ``input``, or -1 on the CPU (``Tensor.get_device``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"get_device(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input.get_device()


def is_inference(input: Tensor) -> bool:
    """False: flambeau has no inference tensors (``Tensor.is_inference``)."""
    return input.is_inference()


def is_distributed(input: Tensor) -> bool:
    """False, as torch's dense tensors (``Tensor.is_distributed``)."""
    return input.is_distributed()


def get_device_module(device=None):
    """The module of a device type: ``flambeau.cuda`` for ``"cuda"``, ``flambeau.cpu`` for ``"cpu"``.

    ``device`` is a device, a string (``"cuda:0"``) or None (the accelerator's module when CUDA is
    available, else ``flambeau.cpu``, as torch's current accelerator).

    Raises:
        RuntimeError: a device string flambeau does not know.
    """
    if device is None:
        cuda = importlib.import_module("flambeau.cuda")
        kind = "cuda" if cuda.is_available() else "cpu"
    else:
        kind = device.split(":")[0] if isinstance(device, str) else to_device(device).type
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {device}")
    return importlib.import_module(f"flambeau.{kind}")


def set_default_tensor_type(t) -> None:
    """Deprecated (as in torch 2.1): set the default floating dtype from a legacy type or its name.

    ``set_default_tensor_type(flambeau.DoubleTensor)`` or ``("torch.DoubleTensor")`` makes float64 the
    default dtype; a CUDA type sets the dtype too (use :func:`flambeau.set_default_device` for the device).

    Raises:
        TypeError: not a floating-point type.
    """
    warnings.warn("flambeau.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "flambeau.set_default_dtype() and flambeau.set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    if isinstance(t, dt.dtype):
        raise TypeError("invalid type object: only floating-point types are supported as the default type")
    dtype, _ = resolve_type(t)
    if not dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    dt.set_default_dtype(dtype)


# --- legacy and layout factories -----------------------------------------------------------------------
def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,  # noqa: A001
          requires_grad: bool = False) -> Tensor:
    """Deprecated (as torch's): the 1-D tensor ``start, start + step, ...`` up to ``end`` *inclusive*.

    It has ``floor((end - start) / step) + 1`` elements of the default dtype unless ``dtype`` is given.
    Use :func:`flambeau.arange` (``end`` excluded) instead; this warns.

    Raises:
        RuntimeError: ``step`` is 0, or its sign does not lead from ``start`` to ``end``.
    """
    warnings.warn("flambeau.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use flambeau.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if end is None:
        start, end = 0, start
    start, end, step = (x.item() if isinstance(x, Tensor) else x for x in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    n = int(math.floor((end - start) / step)) + 1
    d = dt._default[0] if dtype is None else dt.to_dtype(dtype)
    values = (start + np.arange(n, dtype=np.float64) * step).astype(d.np)  # in double, as torch's accumulation
    result = _wrap(values, CPU)
    if device is not None and to_device(device) is not CPU:
        result = result.to(device)
    if out is not None:
        out.resize_(result.shape).copy_(result)
        return out
    return result.requires_grad_(requires_grad) if requires_grad else result


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                   pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of shape ``size`` whose dimensions lie in memory in the order ``physical_layout``.

    ``empty_permuted((N, C, H, W), (0, 2, 3, 1))`` is a channels-last tensor: dimension
    ``physical_layout[-1]`` has stride 1, ``physical_layout[-2]`` the next, and so on (dense, no overlap).

    Raises:
        RuntimeError: ``physical_layout`` is not a permutation of ``range(len(size))``.
    """
    size = [int(n) for n in size]
    order = [int(d) for d in physical_layout]
    if len(order) != len(size):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the physical_layout; i.e. "
                           f"len(size) = {len(size)} is not equal to len(physical_layout) = {len(order)}")
    if len(set(order)) != len(order):
        raise RuntimeError("Duplicate dim not allowed")
    if any(not 0 <= d < len(size) for d in order):
        raise RuntimeError(f"physical_layout must be a permutation of 0..{len(size) - 1}, got {order}")
    return empty_strided(size, dense_strides(size, order), dtype=dtype, device=device, requires_grad=requires_grad)


def from_file(filename, shared: bool | None = None, size: int = 0, *, dtype=None, layout=None, device=None,
              pin_memory: bool = False) -> Tensor:
    """A 1-D CPU tensor of ``size`` elements read from the binary file ``filename`` (native byte order).

    ``shared=True`` maps the file into memory: the tensor's storage *is* the file, and writes to the
    tensor change it (as torch's). ``shared=False`` or None reads a private copy. ``dtype`` defaults to
    the default dtype; ``device`` other than the CPU copies the result there.

    Raises:
        RuntimeError: the file holds fewer than ``size`` elements.
    """
    d = dt._default[0] if dtype is None else dt.to_dtype(dtype)
    size = int(size)
    nbytes = size * d.itemsize
    available = os.path.getsize(filename)
    if available < nbytes:
        raise RuntimeError(f"from_file(): the file {os.fspath(filename)!r} has {available} bytes, fewer than the "
                           f"{nbytes} bytes of size={size} elements of {d}")
    if shared and size > 0:
        data = np.memmap(filename, dtype=d.np, mode="r+", shape=(size,))
        result = _wrap(data, CPU, Storage(data, CPU), d)
    else:
        result = _wrap(np.fromfile(filename, dtype=d.np, count=size), CPU, dtype=d)
    return result if device is None or to_device(device) is CPU else result.to(device)

