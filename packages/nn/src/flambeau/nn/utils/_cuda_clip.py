"""clip_grad_norm_ of CUDA gradients in three launches: the total norm and the scaling as multi-tensor kernels.

Note [Fused gradient clipping]
    ``clip_grad_norm_`` over a model's gradients computed one norm per gradient (a reduction each), stacked
    them, took their norm, formed the clamped coefficient and scaled every gradient (a launch each): about
    forty launches for an LSTM language model's twelve gradients, a fifth of its training step's host time on
    the GPU. torch runs ``_foreach_norm`` and ``_foreach_mul_`` instead. Here, for float32 or float64
    gradients that are C-contiguous on one device, with ``norm_type`` 2 or inf:

    * one multi-tensor launch (Note [Multi-tensor CUDA updates] in ``flambeau.optim._cuda_kernels``: a table
      of addresses, one block per chunk of :data:`CHUNK` elements) writes each chunk's sum of squares (or
      largest magnitude) to a partial array;
    * one block combines the partials into the total norm, a 0-d tensor on the device;
    * one multi-tensor launch multiplies every gradient by ``min(max_norm / (total + 1e-6), 1)``, read from
      the device, in the gradients' dtype: torch's arithmetic, and no value comes to the host.

    The total is the norm of all the gradients' elements together, which the norm of their norms equals up to
    rounding. The simulator has no device addresses: there each gradient gets its own launches of the same
    device functions (small chunks, so that a few elements make several). Other dtypes, layouts and norms take
    the tensor-operator path of ``clip_grad``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

import flambeau as fl
from flambeau import _backends
from flambeau.optim import _cuda_kernels as mt

__all__ = ["fused_total_norm", "fused_scale_", "ptx_cases", "CHUNK"]

CHUNK = mt.CHUNK  # elements per block of the multi-tensor kernels
_SIM_CHUNK = 8  # (the simulator runs each thread in Python: tiny chunks, several per small tensor)
_BLOCK = 256  # threads per block (a power of two: the block reductions halve it)
_SIM_BLOCK = 4
_EPS = 1e-6  # torch's: max_norm / (total_norm + 1e-6)

cuda = None  # numba.cuda, bound on first use (Note [numba.cuda bound on first use] in tensor-core's _launch)


def _bind():
    global cuda
    if cuda is None:
        cuda = mt._bind()
    return cuda


# --- device functions and kernels --------------------------------------------------------------------------
def _chunk_fn(acc, block: int):
    """Device function ``reduce(g, start, end, is_max, square) -> value`` of a block over ``g[start:end]``: the
    largest magnitude (NaN if any element is NaN) or the sum (of squares where ``square``), in ``acc``; every
    thread gets the value."""
    _bind()

    def reduce(g, start, end, is_max, square):
        t = cuda.threadIdx.x
        buf = cuda.shared.array(block, acc)
        v = acc(0)
        i = start + t
        while i < end:
            x = g[i]
            if is_max:
                a = abs(x)
                if a > v or a != a:
                    v = a
            else:
                v += x * x if square else x
            i += block
        buf[t] = v
        cuda.syncthreads()
        width = block // 2
        while width > 0:
            if t < width:
                other = buf[t + width]
                if is_max:
                    if other > buf[t] or other != other:
                        buf[t] = other
                else:
                    buf[t] += other
            cuda.syncthreads()
            width //= 2
        r = buf[0]
        cuda.syncthreads()
        return r

    return cuda.jit(device=True)(reduce)


def _partials_multi_py(acc, block: int):
    """Block ``c`` writes ``partial[c]``, the reduction of chunk ``c`` (row ``chunk_row[c]`` of the address table
    from ``chunk_start[c]``)."""
    from numba.cuda.np.numpy_support import carray

    reduce = _chunk_fn(acc, block)
    ptr = mt._pointer_intrinsic()
    chunk = CHUNK

    def partials(table, sizes, chunk_row, chunk_start, partial, is_max):
        c = cuda.blockIdx.x
        r = chunk_row[c]
        n = sizes[r]
        g = carray(ptr(table[r, 0], partial), n)
        start = chunk_start[c]
        v = reduce(g, start, min(start + chunk, n), is_max, True)
        if cuda.threadIdx.x == 0:
            partial[c] = v

    return partials


def _partials_each_py(acc, block: int):
    """The simulator's path: block ``c`` writes ``partial[first + c]``, the reduction of chunk ``c`` of ``g``."""
    reduce = _chunk_fn(acc, block)
    chunk = _SIM_CHUNK

    def partials(g, partial, first, is_max):
        c = cuda.blockIdx.x
        start = c * chunk
        v = reduce(g, start, min(start + chunk, g.shape[0]), is_max, True)
        if cuda.threadIdx.x == 0:
            partial[first + c] = v

    return partials


def _finish_py(acc, block: int):
    """One block: ``out[0]`` = the total norm from ``partial[:count]`` (the square root of their sum for norm 2, their
    largest for inf)."""
    reduce = _chunk_fn(acc, block)

    def finish(partial, count, out, is_max):
        v = reduce(partial, 0, count, is_max, False)
        if cuda.threadIdx.x == 0:
            out[0] = v if is_max else math.sqrt(v)

    return finish


def _coef(total, max_norm, eps, one):
    """``min(max_norm / (total + eps), 1)`` as torch's clamp(max=1) computes it (NaN stays NaN)."""
    c = max_norm / (total + eps)
    return one if c > one else c


def _scale_multi_py(acc, block: int):
    from numba.cuda.np.numpy_support import carray

    coef = cuda.jit(device=True)(_coef)
    ptr = mt._pointer_intrinsic()
    chunk = CHUNK

    def scale(table, sizes, chunk_row, chunk_start, total, max_norm, eps):
        c = cuda.blockIdx.x
        r = chunk_row[c]
        n = sizes[r]
        g = carray(ptr(table[r, 0], total), n)
        k = coef(total[0], max_norm, eps, acc(1))
        i = chunk_start[c] + cuda.threadIdx.x
        end = min(chunk_start[c] + chunk, n)
        while i < end:
            g[i] = g[i] * k
            i += block

    return scale


def _scale_each_py(acc, block: int):
    coef = cuda.jit(device=True)(_coef)

    def scale(g, total, max_norm, eps):
        k = coef(total[0], max_norm, eps, acc(1))
        i = cuda.grid(1)
        while i < g.shape[0]:
            g[i] = g[i] * k
            i += cuda.gridsize(1)

    return scale


_TEMPLATES = {"partials_multi": _partials_multi_py, "partials_each": _partials_each_py, "finish": _finish_py,
              "scale_multi": _scale_multi_py, "scale_each": _scale_each_py}


@functools.cache
def _kernel(name: str, dtype: str, block: int):
    from flambeau._kernels.cuda._launch import direct  # launched as tensor-core's own kernels are

    _bind()
    return direct(cuda.jit(_TEMPLATES[name](np.dtype(dtype).type, block)))


# --- launching ---------------------------------------------------------------------------------------------
def _fusable(grads) -> np.dtype | None:
    """The dtype of ``grads`` when the fused path takes them: C-contiguous float32 or float64 CUDA arrays of one
    dtype on one device; else None."""
    first = grads[0]
    device, dtype = first.device, first._data.dtype
    for g in grads:
        if g.device != device or not mt.is_cuda_param(g._data) or g._data.dtype != dtype:
            return None
    return dtype


def _addresses(grads) -> list:
    be = _backends.backend("cuda")
    return [be.data_ptr(g._data) for g in grads]


def _table(grads, addresses: list) -> tuple:
    """``((table, sizes, chunk_row, chunk_start), chunks)`` of the multi-tensor kernels: one address per row."""
    return mt.chunk_table(addresses, [g._data.size for g in grads], 1, _backends.backend("cuda"))


def fused_total_norm(grads: list, norm_type: float):
    """The total ``norm_type``-norm of ``grads`` on their device in two launches (Note [Fused gradient
    clipping]), a 0-d tensor of their dtype; None where the fused path does not take them."""
    if norm_type not in (2.0, math.inf) or not grads:
        return None
    dtype = _fusable(grads)
    if dtype is None:
        return None
    be = _backends.backend("cuda")
    stream = mt._stream()
    is_max = norm_type == math.inf
    total = fl.empty((), dtype=grads[0].dtype, device=grads[0].device)
    out = be.flat_view(total._data)
    name = np.dtype(dtype).name
    if be.is_simulator():
        counts = [(g._data.size + _SIM_CHUNK - 1) // _SIM_CHUNK for g in grads]
        partial = be.empty((max(sum(counts), 1),), dtype)
        first = 0
        for g, n in zip(grads, counts):
            if n:
                _kernel("partials_each", name, _SIM_BLOCK)[n, _SIM_BLOCK, stream](be.flat_view(g._data), partial, first,
                                                                                  is_max)
            first += n
        _kernel("finish", name, _SIM_BLOCK)[1, _SIM_BLOCK, stream](partial, first, out, is_max)
        return total
    arrays, chunks = _table(grads, _addresses(grads))
    partial = be.empty((max(chunks, 1),), dtype)
    if chunks:
        _kernel("partials_multi", name, _BLOCK)[chunks, _BLOCK, stream](*arrays, partial, is_max)
    _kernel("finish", name, _BLOCK)[1, _BLOCK, stream](partial, chunks, out, is_max)
    return total


def fused_scale_(grads: list, max_norm: float, total) -> bool:
    """Multiply ``grads`` in place by ``min(max_norm / (total + 1e-6), 1)``, ``total`` a 0-d tensor on their
    device (Note [Fused gradient clipping]); False, doing nothing, where the fused path does not take them."""
    if not grads:
        return True
    dtype = _fusable(grads)
    if dtype is None or total.device != grads[0].device or total._data.dtype != dtype or total.numel() != 1:
        return False
    be = _backends.backend("cuda")
    addresses = _addresses(grads)
    live = [a for a, g in zip(addresses, grads) if g._data.size]
    if len(set(live)) != len(live):  # one gradient listed twice: scaled twice, as mul_ would, not by racing blocks
        return False
    stream = mt._stream()
    scalar = np.dtype(dtype).type
    args = (be.flat_view(total._data), scalar(max_norm), scalar(_EPS))
    name = np.dtype(dtype).name
    if be.is_simulator():
        for g in grads:
            if g._data.size:
                n = g._data.size
                _kernel("scale_each", name, _SIM_BLOCK)[min(2, n), _SIM_BLOCK, stream](be.flat_view(g._data), *args)
    else:
        arrays, chunks = _table(grads, addresses)
        if chunks:
            _kernel("scale_multi", name, _BLOCK)[chunks, _BLOCK, stream](*arrays, *args)
    for g in grads:
        g._storage._version += 1  # written in place, as g.mul_ would (Note [Version counter] in tensor-core)
    return True


def ptx_cases() -> list:
    """``(label, python_function, signature)`` of every kernel for float32 and float64 (the GPU block size)."""
    from numba import types

    _bind()
    i64, b = types.int64, types.boolean
    vec = types.Array(i64, 1, "C")
    cases = []
    for t in (types.float32, types.float64):
        acc = np.dtype(str(t)).type
        arr = types.Array(t, 1, "C")
        table = (types.Array(i64, 2, "C"), vec, vec, vec)
        sigs = {"partials_multi": (*table, arr, b), "partials_each": (arr, arr, i64, b), "finish": (arr, i64, arr, b),
                "scale_multi": (*table, arr, t, t), "scale_each": (arr, arr, t, t)}
        for name, sig in sigs.items():
            cases.append((f"clip:{name}:{t}", _TEMPLATES[name](acc, _BLOCK), sig))
    return cases
