"""CUDA kernels of the core operators: moves between devices and dtypes, copies and fills.

Conventions (the CPU kernels' of the same operators; arrays are numba device arrays):
    to_copy: ``kernel(array, np_dtype, src_device, dst_device, non_blocking) -> array``.
    clone / contiguous: ``kernel(array) -> array``; copy_: ``kernel(dst, src)``; fill_:
    ``kernel(dst, value)``; zero_: ``kernel(dst)``.

A copy is the elementwise unary template over the identity (``elementwise.unary_into``), casting
on load and store; a fill is its own strided template (:func:`fill_kernel`). The CUDA backend
(``flambeau._backends.cuda``) uses :func:`fill`, :func:`copy_into` and :func:`contiguous` too.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._dtype import real_np
from flambeau._kernels._low_precision import BF16, takes_bfloat16
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import (
    be,
    bind_numba_cuda,
    elem_strides,
    is_array,
    jit,
    launch_1d,
    launch_keyed,
    stream,
    strides_for,
)
from flambeau._kernels.cuda.bfloat16 import narrow, widen
from flambeau._kernels.cuda.elementwise import dtypes_for, unary_into
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

__all__ = ["fill_kernel", "fill", "copy_into", "contiguous", "cast_to", "permuted", "leading", "real_pairs",
           "ptx_cases"]

_U16, _F32 = np.dtype(np.uint16), np.dtype(np.float32)

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)


def _fill_py():
    bind_numba_cuda(globals())
    offset = index_device("row_offset")

    def fill(out, ost, value, shape, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[offset(i, shape, ost)] = value
            i += step

    return fill


@functools.cache
def fill_kernel():
    """Strided fill: ``out[...] = value``."""
    bind_numba_cuda(globals())
    return jit(_fill_py())


def fill(dst, value) -> None:
    """``dst[...] = value`` (cast to dst's dtype) on the current stream."""
    n = dst.size
    if n == 0:
        return
    shape = tuple(dst.shape)
    backend = be()
    if dst.dtype == BF16:  # the value's bfloat16 bits, filled as uint16 (Note [bfloat16 on CUDA])
        value = np.array(value, BF16).view(_U16)[()]
        dst = backend.reinterpret(dst, _U16)
    v = dst.dtype.type(value)
    flat = backend.contiguous_flat(dst)  # (the common case, zeros and ones: a 1-d fill, no index math)
    if flat is not None:
        shape, strides = (n,), (1,)
    else:
        flat, strides = backend.flat_arg(dst), strides_for(dst, shape)
    grid, block = launch_1d(n)
    # flat launch arguments of v's dtype, len(shape) ints twice, v, n: the key fixes every type
    launch_keyed(fill_kernel(), (grid, block, stream()), (v.dtype, len(shape)), flat, strides, v, shape, n)


# Note [Rows copied in one launch]
#     A copy of one row into every row of a matrix (a linear layer's bias into its output before cuBLAS adds the
#     product: ``beta`` 1; an ``expand``'s copy) went through the elementwise template's general broadcast, which
#     works out the operands' broadcast geometry on every call: on the fake device of ``tools/host_overhead.py``
#     (an Intel Xeon) ``F.linear`` took 42 µs with a bias and 15 µs without, and a GPT step makes seventeen. A
#     contiguous 1-d ``src`` of ``dst``'s last length, into a contiguous ``dst`` of two dims or more, of one float
#     dtype, is one keyed launch of its own with nothing to work out, ``dst[i] = src[i % N]``: ``F.linear`` with a
#     bias takes 32 µs. (cuBLASLt's bias epilogue would spare the launch too; it is not bound yet.)
def _rows_py():
    bind_numba_cuda(globals())

    def rows(out, row, N, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[i] = row[i % N]
            i += step

    return rows


@functools.cache
def rows_kernel():
    """``out[i] = row[i % N]`` over the ``n`` elements of a flat ``out`` (Note [Rows copied in one launch])."""
    bind_numba_cuda(globals())
    return jit(_rows_py())


_ROWS_DTYPES = frozenset(np.dtype(d) for d in ("float16", "float32", "float64"))  # (rows_kernel's compiled ones)


def copy_rows(dst, src) -> bool:
    """Copy 1-d ``src`` into every row of ``dst`` in one launch (Note [Rows copied in one launch]) where both are
    C-contiguous, ``dst`` of two dims or more and ``src`` of its last length, in one float dtype; False (nothing
    written) otherwise."""
    if src.ndim != 1 or dst.ndim < 2 or src.dtype != dst.dtype or dst.dtype not in _ROWS_DTYPES \
            or src.shape[0] != dst.shape[-1]:
        return False
    backend = be()
    flat, row = backend.contiguous_flat(dst), backend.contiguous_flat(src)
    if flat is None or row is None:
        return False
    n = dst.size
    if n:
        grid, block = launch_1d(n)
        # a flat launch argument and a 1-d array of dst's dtype, two ints: the key fixes every type
        launch_keyed(rows_kernel(), (grid, block, stream()), dst.dtype, flat, row, src.shape[0], n)
    return True


def copy_into(dst, src) -> None:
    """Copy ``src`` (a device array broadcastable to ``dst``, or a scalar) into ``dst``, casting."""
    if not is_array(src):
        fill(dst, src)
        return
    if copy_rows(dst, src):  # (a row of dst's last length: broadcastable, nothing to check)
        return
    broadcast_shapes(dst.shape, src.shape)
    if dst.dtype == BF16 or src.dtype == BF16:
        _copy_bfloat16(dst, src)
        return
    unary_into("identity", np.dtype(dst.dtype), dst, src)  # no arithmetic: any dtype


def _copy_bfloat16(dst, src) -> None:
    """:func:`copy_into` where either side is bfloat16: its bits between two bfloat16 arrays, else
    through float32 (exact from bfloat16; rounded once to it)."""
    backend = be()
    if dst.dtype == src.dtype:
        unary_into("identity", _U16, backend.reinterpret(dst, _U16), backend.reinterpret(src, _U16))
    elif src.dtype == BF16:
        copy_into(dst, widen(src))
    else:
        if src.dtype != _F32:
            wide = backend.empty(tuple(src.shape), _F32)
            unary_into("identity", _F32, wide, src)
            src = wide
        narrow(src, out=dst)


@kernel("clone", "cuda")
@kernel("contiguous", "cuda")
@takes_bfloat16  # its bits move (Note [bfloat16 on CUDA])
def contiguous(arr):
    """A C-contiguous device copy of ``arr``."""
    out = be().empty(arr.shape, arr.dtype)
    copy_into(out, arr)
    return out


def cast_to(arr, dtype):
    """``arr`` as a device array of ``dtype``: itself when it has that dtype, else a converted copy."""
    if np.dtype(arr.dtype) == np.dtype(dtype):
        return arr
    out = be().empty(arr.shape, dtype)
    copy_into(out, arr)
    return out


def _strided_copy(a, shape, strides):
    """A contiguous copy of the view of ``a``'s memory with ``shape`` and element ``strides``."""
    backend = be()
    return contiguous(backend.as_strided(backend.flat_view(a), tuple(shape), tuple(strides), 0))


def permuted(a, order):
    """A contiguous copy of device array ``a`` with its dims in ``order`` (a permutation)."""
    st = elem_strides(a)
    return _strided_copy(a, [a.shape[d] for d in order], [st[d] for d in order])


def leading(a, dim: int, length: int):
    """A contiguous copy of the first ``length`` entries of device array ``a`` along ``dim``."""
    shape = list(a.shape)
    shape[dim] = length
    return _strided_copy(a, shape, elem_strides(a))


def real_pairs(a):
    """A view of complex device array ``a`` as its real dtype with a last dim of 2: (real, imaginary)."""
    backend = be()
    return backend.as_strided(backend.flat_view(a), tuple(a.shape) + (2,),
                              tuple(2 * s for s in elem_strides(a)) + (1,), 0, real_np(a.dtype))


@kernel("to_copy", "cuda")
@takes_bfloat16  # its bits move (Note [bfloat16 on CUDA])
def to_copy(arr, np_dtype, src, dst, non_blocking):
    backend = be()
    np_dtype = np.dtype(np_dtype)
    if src.type == "cpu":  # host -> device
        host = arr if arr.dtype == np_dtype else arr.astype(np_dtype)
        return backend.from_numpy(host, dst)
    if dst.type == "cpu":  # device -> host
        host = backend.to_numpy(arr)
        return host if host.dtype == np_dtype else host.astype(np_dtype)
    if src.index != dst.index:  # device -> other device, through the host
        return backend.from_numpy(backend.to_numpy(arr).astype(np_dtype, copy=False), dst)
    out = backend.empty(arr.shape, np_dtype, dst)
    copy_into(out, arr)
    return out


@kernel("copy_", "cuda")
@takes_bfloat16  # its bits move (Note [bfloat16 on CUDA])
def copy_(dst, src) -> None:
    be().copy_(dst, src)  # a host array goes to the device first


@kernel("fill_", "cuda")
@takes_bfloat16  # its bits move (Note [bfloat16 on CUDA])
def fill_(dst, value) -> None:
    fill(dst, value)


@kernel("zero_", "cuda")
@takes_bfloat16  # its bits move (Note [bfloat16 on CUDA])
def zero_(dst) -> None:
    fill(dst, 0)


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the fill kernel for every elementwise compute dtype, and of the
    rows kernel for its dtypes."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    idx = types.UniTuple(types.int64, ndim)
    cases = []
    for dn in dtypes_for("fib"):
        t = from_dtype(np.dtype(dn))
        cases.append((f"fill:{dn}", _fill_py(), (types.Array(t, 1, "C"), idx, t, idx, types.int64)))
    for dn in sorted(str(d) for d in _ROWS_DTYPES):
        a = types.Array(from_dtype(np.dtype(dn)), 1, "C")
        cases.append((f"rows:{dn}", _rows_py(), (a, a, types.int64, types.int64)))
    return cases
