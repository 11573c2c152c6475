"""Storage: the flat buffer that tensors view.

A tensor is a view (shape, strides, offset, dtype) on a storage; every view of one storage
shares its buffer and its version counter (see Note [Version counter]). On CPU the buffer is a
numpy array (the array an operator returned, or the one given to ``from_numpy``); on CUDA it is a
numba device array. The storage knows nothing of shapes: tensors carry their own view arrays.
A CPU storage can move its buffer into shared memory in place: ``Storage.share_memory_``, bound
onto the class by ``flambeau._sharing`` (the sharing seam of DESIGN.md), which builds on this
module (Note [Tensor methods from the layers above] in ``_tensor.py``).
"""

from __future__ import annotations

import math
import sys

from flambeau._backends import backend_for

__all__ = ["Storage", "allocation_error"]

# Note [Version counter]
# Every in-place operator bumps ``storage._version``. autograd records the version of each
# tensor it saves for backward and compares it when backward runs, so an in-place change to
# saved data is detected (paper, section 4.3). The counter lives on the storage so that all views
# of the same memory share it, as torch's VariableVersion does.


class Storage:
    """A device buffer shared by tensor views, with a version counter.

    Attributes:
        device: the :class:`flambeau.device` holding the memory.
        _buffer: the backend array owning the memory (numpy ndarray on CPU).
        _version: number of in-place modifications so far.
        _shared: the :class:`flambeau._sharing.Segment` holding a CPU buffer moved into shared
            memory (its handle), else None.
    """

    __slots__ = ("_buffer", "device", "_version", "_shared", "__weakref__")

    def __init__(self, buffer, device):
        self._buffer = buffer
        self.device = device
        self._version = 0
        self._shared = None

    def is_shared(self) -> bool:
        """Whether the buffer is in shared memory (CUDA memory is always shareable, as in torch)."""
        return self._shared is not None or self.device.type == "cuda"

    # ``share_memory_`` is bound by flambeau._sharing (see the module docstring)

    @property
    def nbytes(self) -> int:
        """Size of the buffer in bytes."""
        return self._buffer.nbytes

    def data_ptr(self) -> int:
        """Address of the first byte of the buffer."""
        return backend_for(self.device).storage_data_ptr(self._buffer)

    def __repr__(self) -> str:
        return f"<flambeau Storage of {self.nbytes} bytes on {self.device}>"


# Note [Allocation errors]
# A tensor too big to allocate raises RuntimeError naming the function, the argument, the size and
# the bytes, as torch's allocator does ("DefaultCPUAllocator: not enough memory: you tried to allocate
# 40000000000000 bytes"), never numpy's MemoryError / "array is too big" / "Maximum allowed dimension
# exceeded". Factories let numpy (or the device) try and convert its error afterwards, so the sizes are
# not checked twice on the hot path. A device allocator's own out-of-memory error (the CUDA caching
# allocator's "CUDA out of memory. Tried to allocate ... allowed; ...", torch's OutOfMemoryError) passes
# through unchanged: it says more (reserved, cached, the process's cap) than a conversion would.
MAX_BYTES = sys.maxsize  # a storage's size in bytes is a signed 64-bit number, in numpy as in torch


def allocation_error(error: BaseException, fname: str, shape, dtype, what: str | None = None,
                     device=None) -> BaseException:
    """What to raise when allocating a ``shape`` tensor of ``dtype`` for ``fname`` failed with ``error``.

    ``MemoryError`` and sizes whose bytes do not fit in 64 bits become RuntimeError naming ``fname``, the
    argument (``what``, default ``size=[...]``), the size, the bytes and a device other than the CPU (Note
    [Allocation errors]); any other error is returned as it is (a fill value numpy could not convert ...).
    """
    shape = [int(n) for n in shape]
    what = f"size={shape}" if what is None else what
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_BYTES:
        return RuntimeError(f"{fname}(): {what} is too large: a tensor of {dtype} of that size takes "
                            f"{nbytes} bytes, more than the {MAX_BYTES} bytes a tensor can address")
    if math.prod(max(n, 1) for n in shape) * dtype.itemsize > MAX_BYTES:  # numpy refuses these even if empty
        return RuntimeError(f"{fname}(): {what} is too large: its sizes other than 0 multiply to more "
                            f"than the {MAX_BYTES} bytes a tensor of {dtype} can address")
    if isinstance(error, MemoryError):
        if device is not None and device.type != "cpu" and "out of memory" in str(error):
            return error  # the device allocator's own message ("CUDA out of memory. Tried to allocate ...")
        where = "" if device is None or device.type == "cpu" else f" on {device}"
        return RuntimeError(f"{fname}(): not enough memory{where}: you tried to allocate {nbytes} bytes "
                            f"({what}, dtype {dtype})")
    return error
