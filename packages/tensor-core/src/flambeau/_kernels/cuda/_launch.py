"""What every CUDA kernel family shares: launch shapes, strides, the current stream, numba.cuda.

Every numba.cuda kernel of flambeau reads and writes *flat* 1-d device arrays addressed with
element strides passed as ``UniTuple(int64, ndim)`` arguments, so one kernel serves contiguous,
transposed, sliced and broadcast (stride 0) operands; :func:`strides_for` computes them. Every
launch goes on the current stream (:func:`stream`); nothing waits. Device arrays come from the
CUDA backend (:func:`be`). Importing this module imports no numba.

Note [numba.cuda bound on first use]
    A numba.cuda kernel's Python function must find numba's ``cuda`` module as the global ``cuda``
    of its module: numba resolves ``cuda.grid``, ``cuda.shared.array`` ... through the function's
    globals when it compiles, and the simulator (``NUMBA_ENABLE_CUDASIM=1``) replaces every global
    that *is* numba's cuda module by its fake one while it runs a kernel in Python. Yet numba must
    not be imported at ``import flambeau``, which registers the kernels. So each family module
    starts with ``cuda = None``, and every function that makes a kernel's Python function, a
    device function or a compiled kernel first calls :func:`bind_numba_cuda` with the module's
    ``globals()``: it imports numba.cuda once and sets that global. No kernel template binds a
    local or closure variable named ``cuda`` (the simulator swaps globals only). Kernels are built
    once and cached, so this costs nothing per launch.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._backends import backend
from flambeau._kernels.cuda._direct import _ARRAY_CLASSES as _DEVICE_ARRAYS
from flambeau._kernels.cuda._direct import FlatArg, Kernel, register_array_class
from flambeau.cuda._streams import current_stream
from flambeau.cuda._sync import ERR_INDEX, ERR_VALUE

__all__ = ["BLOCK", "REDUCE_BLOCK", "GROUP", "TILE", "NARROW", "CACHE", "bind_numba_cuda", "jit", "direct",
           "launch_keyed", "sim", "be", "stream", "launch_1d", "row_parts", "block_sums", "COLUMN_TILE", "MAX_PARTIALS",
           "column_tile", "column_parts", "is_array", "strides_for", "broadcast_strides", "coalesce", "elem_strides",
           "c_elem_strides", "error_flag", "ERR_INDEX", "ERR_VALUE"]

BLOCK = 256  # threads per block of elementwise kernels
REDUCE_BLOCK = 256  # threads per block of reductions (a power of two)
GROUP = 4  # elements a thread of the grouped-load kernels takes (Note [Grouped loads] in elementwise; they write 4 out)
# elements from which they take GROUP: then a quarter as many threads still fill a GPU (an H100 keeps 132 x
# 2,048 = 270,336 resident), each with four loads in flight; below it, one element a thread fills it as well
GROUPED_FROM = 1 << 20
TILE = 16  # matmul tile edge
NARROW = 1 << 31  # indices below this take 32-bit index math (Note [Narrow index math] in _index_math)
CACHE = True  # numba's on-disk cache for CUDA kernels (ignored by the simulator)


cuda = None  # numba.cuda once block_sums() compiles its device functions (Note [numba.cuda bound on first use])


def bind_numba_cuda(namespace: dict):
    """numba.cuda, imported on first use and set as the global ``cuda`` of the kernel module whose
    ``globals()`` is ``namespace`` (Note [numba.cuda bound on first use])."""
    cuda = namespace.get("cuda")
    if cuda is None:
        from numba import cuda

        namespace["cuda"] = cuda
    return cuda


def jit(pyfunc):
    """Kernel function ``pyfunc`` compiled by numba.cuda (with numba's on-disk cache), launched as
    ``kernel[grid, block, stream](*args)`` straight through the driver (Note [Direct kernel launches]
    in ``_direct``); under the simulator, numba's dispatcher itself. Cache entries are named by their keys
    (Note [Cache entries named by their key] in ``flambeau.cuda._numba_compat``)."""
    from numba import cuda

    from flambeau.cuda._numba_compat import keyed_cache_entries

    return direct(keyed_cache_entries(cuda.jit(cache=CACHE)(pyfunc)))


def direct(dispatcher):
    """numba.cuda kernel ``dispatcher`` launched straight through the driver (Note [Direct kernel launches]
    in ``_direct``); under the simulator, the dispatcher itself."""
    if sim():
        return dispatcher
    return Kernel(dispatcher)


def launch_keyed(kernel, config: tuple, key, *args) -> None:
    """``kernel[config](*args)``, the argument types fixed by the caller's ``key`` where the kernel launches
    directly (``_direct.Kernel.launch_keyed``: equal keys, equal numba types); under the simulator, as usual."""
    if kernel.__class__ is Kernel:
        kernel.launch_keyed(config, key, args)
    else:
        kernel[config](*args)


_SIM: list = []


def sim() -> bool:
    """Whether numba's simulator runs the kernels (then launches are tiny: it runs threads in Python)."""
    if not _SIM:
        from numba.core import config

        _SIM.append(bool(config.ENABLE_CUDASIM))
    return _SIM[0]


_BACKEND: list = []


def be():
    """The CUDA backend module (allocation, flat views, host copies)."""
    if not _BACKEND:
        _BACKEND.append(backend("cuda"))
    return _BACKEND[0]


def stream():
    """The numba stream of the current flambeau stream: where every launch goes."""
    return current_stream().numba


def launch_1d(n: int, per_thread: int = 1) -> tuple:
    """``(grid, block)`` of a grid-stride loop over ``n`` elements, ``per_thread`` of them to a thread (the
    elementwise templates' grouped loads: Note [Grouped loads] in ``elementwise``) once there are enough
    (``GROUPED_FROM``) for the blocks to fill a GPU's multiprocessors anyway."""
    if sim():
        return min(2, (n + 3) // 4), 4  # few Python threads: each device-function call takes a lock there
    per_block = BLOCK * (per_thread if n >= GROUPED_FROM else 1)
    return min((n + per_block - 1) // per_block, 65535 * 4), BLOCK


def row_parts(K: int, B: int, whole: int = 8) -> int:
    """How many blocks of ``B`` threads share a row of ``K`` elements that a block reduces (the row
    reductions' ``P``): one block per row up to ``whole * B`` elements, then a block per ``8 * B`` elements
    (at most 1024), whose partial results a second launch combines. One block per row would leave a
    GPU mostly idle for the few long rows of a batch norm (64 channels of 400,000 elements: 64 blocks,
    each thread walking 1,500 elements); the second launch costs host time, which a caller whose
    threads load several elements at once spends only for longer rows (a larger ``whole``)."""
    return 1 if K <= B * whole else min((K + B * 8 - 1) // (B * 8), 1024)


def _block_sum(buf, t, B):
    cuda.syncthreads()
    width = B // 2
    while width > 0:
        if t < width:
            buf[t] += buf[t + width]
        cuda.syncthreads()
        width //= 2


def _block_sum2(b1, b2, t, B):
    cuda.syncthreads()
    width = B // 2
    while width > 0:
        if t < width:
            b1[t] += b1[t + width]
            b2[t] += b2[t + width]
        cuda.syncthreads()
        width //= 2


@functools.cache
def block_sums() -> tuple:
    """Device functions ``(block_sum, block_sum2)`` of the block reductions' last step: ``block_sum(buf, t, B)``
    adds the ``B`` (a power of two) values of shared array ``buf``, one per thread ``t`` (each thread has
    written its own), into ``buf[0]``, which every thread may read afterwards; ``block_sum2(b1, b2, t, B)`` does
    two arrays in one tree."""
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_block_sum), cuda.jit(device=True)(_block_sum2)


# The column tiles of reductions and of the norms' gradient sums (Note [Column tiles] in reduction, Note
# [Column sums] in normalization): TX adjacent outputs by TY threads, a long column split over tiles whose
# (P, outputs) partial states a second launch combines, at most MAX_PARTIALS of them.
COLUMN_TILE = (32, 8)
MAX_PARTIALS = 1 << 22  # (64 MB of float32 states; 96 MB for float64)


def column_tile() -> tuple:
    """``(TX, TY)`` of a column tile (2 x 2 under the simulator, which runs each GPU thread in Python)."""
    return (2, 2) if sim() else COLUMN_TILE


def column_parts(K: int, M: int) -> int:
    """How many tiles share the columns of ``K`` rows (``M`` outputs side by side): the rows' rule of
    :func:`row_parts`, with the partial states kept to ``MAX_PARTIALS`` (many columns fill a GPU by
    themselves)."""
    return min(row_parts(K, column_tile()[1]), max(1, MAX_PARTIALS // M))


_SCALARS = frozenset({int, float, bool, complex})


def is_array(x) -> bool:
    """Whether ``x`` is a device array (not a Python or numpy scalar, not a host array)."""
    c = x.__class__
    if c in _DEVICE_ARRAYS or c is FlatArg:  # (the backend's array classes: most operands)
        return True
    if c in _SCALARS:
        return False
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.generic, np.ndarray))


def strides_for(x, shape: tuple) -> tuple:
    """Element strides of array ``x`` broadcast to ``shape`` (0 on broadcast dims), at least 1-d."""
    return broadcast_strides(x.shape, x.strides, x.dtype.itemsize, shape)


def broadcast_strides(xshape: tuple, xstrides: tuple, item: int, shape: tuple) -> tuple:
    """:func:`strides_for` of an array of ``xshape``, byte ``xstrides`` and ``item`` bytes per element."""
    nd = len(shape)
    st = [0] * nd
    off = nd - len(xshape)
    for i, (n, s) in enumerate(zip(xshape, xstrides)):
        st[off + i] = 0 if n == 1 else s // item
    return tuple(st) if nd else (0,)


def coalesce(shape: tuple, *strides: tuple) -> tuple:
    """``(shape, *strides)`` of an elementwise launch over ``shape`` with one element-stride tuple per
    operand, with length-1 dims dropped and adjacent dims merged wherever every operand steps through
    them as through one (``st[d] == st[d + 1] * shape[d + 1]``; broadcast dims merge too): a contiguous
    operation of any rank becomes 1-d, which the templates address without a division per dim (as
    torch's TensorIterator coalesces). Always at least 1-d."""
    if len(shape) == 1:
        return (tuple(shape),) + strides
    if len(strides) == 1:
        return _coalesce_one(shape, strides[0])
    if not strides:  # no operand constrains the merging: one dim of every element
        return ((math.prod(shape),),)
    # dims as columns of per-operand strides; a dim merges into the one before it when every operand's
    # stride there is this dim's stride times its length (plain loops: every strided launch pays this)
    out_shape: list = []
    out_cols: list = []
    for n, col in zip(shape, zip(*strides)):
        if n == 1:
            continue
        if out_shape:
            prev = out_cols[-1]
            for p, q in zip(prev, col):
                if p != q * n:
                    break
            else:
                out_shape[-1] *= n
                out_cols[-1] = col
                continue
        out_shape.append(n)
        out_cols.append(col)
    if not out_shape:
        return ((1,),) + tuple((0,) for _ in strides)
    return (tuple(out_shape),) + tuple(zip(*out_cols))


def _coalesce_one(shape: tuple, st: tuple) -> tuple:
    """:func:`coalesce` of one operand (a reduction's kept or reduced dims), without its generators: the
    host time of every reduction pays it."""
    out_shape: list = []
    out_st: list = []
    for n, s in zip(shape, st):
        if n == 1:
            continue
        if out_shape and out_st[-1] == s * n:
            out_shape[-1] *= n
            out_st[-1] = s
        else:
            out_shape.append(n)
            out_st.append(s)
    if not out_shape:
        return (1,), (0,)
    return tuple(out_shape), tuple(out_st)


def elem_strides(a) -> tuple:
    """Element strides of device array ``a`` (numba's are in bytes)."""
    item = a.dtype.itemsize
    return tuple(s // item for s in a.strides)


def c_elem_strides(shape) -> tuple:
    """Element strides of a C-contiguous array of ``shape``."""
    st = []
    acc = 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


def error_flag():
    """The current device's error flag, for kernels that meet bad indices (Note [Device-side errors]
    in ``flambeau.cuda._sync``): pass it to the kernel, which records a fault instead of accessing.

    The flag is a numba mapped array, a class of its own: the direct launch path takes it once registered
    (Note [Direct kernel launches]). Unregistered, every kernel given the flag (cross-entropy, embedding,
    gathers and scatters) went through numba's dispatcher on a GPU, about 100 µs of host time a launch on an
    H200's host (py-spy of ``tools/gpu_spy.py``), where a direct launch takes a few."""
    from flambeau.cuda._sync import error_flag as flag

    f = flag(current_stream().device_index)
    if f.__class__ not in _DEVICE_ARRAYS:
        register_array_class(f.__class__)
    return f
