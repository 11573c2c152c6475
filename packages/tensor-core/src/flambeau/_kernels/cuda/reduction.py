"""CUDA kernels of the reductions: ``sum`` and ``mean`` through one shared-memory tree reduction.

Convention (the CPU kernels'): ``kernel(a, dims, keepdim, dtype) -> array``, ``dims`` a sorted
tuple of dimensions or None for every dimension, ``dtype`` the output dtype. Floats accumulate in
float32 (float64 for float64), integers and bool in int64. One block reduces one output element;
a long row is split over several blocks whose partial sums a second pass adds.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import from_numpy_dtype, scalar_name
from flambeau._kernels.cuda._launch import CACHE, REDUCE_BLOCK, be, bind_numba_cuda, c_elem_strides, sim, stream
from flambeau._kernels.cuda.core import copy_into
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._ops._registry import kernel

__all__ = ["reduce_sum_kernel", "sum_kernel", "mean_kernel", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)


def _sum_py(acc, B=REDUCE_BLOCK):
    """Sum kernel accumulating in numpy type ``acc``.

    Output element ``m`` (unravelled over ``kshape`` with input strides ``kst``) reduces the
    ``K`` elements unravelled over ``rshape`` with strides ``rst``. Block ``(m, p)`` of ``P``
    blocks per output handles elements ``p, p + P*B, ...`` of its row (B threads), reduces them
    in shared memory and writes ``part[m * P + p]``.
    """
    bind_numba_cuda(globals())
    def reduce_sum(part, a, kshape, kst, rshape, rst, K, P):
        m = cuda.blockIdx.x
        p = cuda.blockIdx.y
        t = cuda.threadIdx.x
        buf = cuda.shared.array(B, acc)
        base = 0
        r = m
        for d in range(len(kshape) - 1, -1, -1):
            ext = kshape[d]
            base += (r % ext) * kst[d]
            r = r // ext
        s = acc(0)
        k = p * B + t
        step = P * B
        while k < K:
            off = base
            r = k
            for d in range(len(rshape) - 1, -1, -1):
                ext = rshape[d]
                off += (r % ext) * rst[d]
                r = r // ext
            s += acc(a[off])
            k += step
        buf[t] = s
        cuda.syncthreads()
        width = B // 2
        while width > 0:
            if t < width:
                buf[t] += buf[t + width]
            cuda.syncthreads()
            width //= 2
        if t == 0:
            part[m * P + p] = buf[0]

    return reduce_sum


@functools.cache
def reduce_sum_kernel(acc: str, block: int = REDUCE_BLOCK):
    """The tree-reduction sum kernel accumulating in numpy dtype ``acc``, ``block`` threads (cached)."""
    bind_numba_cuda(globals())
    return cuda.jit(cache=CACHE)(_sum_py(np.dtype(acc).type, block))


def _acc_dtype(d: np.dtype) -> np.dtype:
    if d.kind == "f":
        return np.dtype(np.float64) if d == np.float64 else np.dtype(np.float32)
    if d.kind == "b" or d.kind in "iu":
        return np.dtype(np.int64)
    raise RuntimeError(f'"sum_cuda" not implemented for \'{scalar_name(d)}\'')


def _reduce_sum(a, dims: tuple, keepdim: bool, out_dtype: np.dtype):
    backend = be()
    dims = tuple(sorted(d % a.ndim for d in dims)) if a.ndim else ()
    item = a.dtype.itemsize
    kept = [d for d in range(a.ndim) if d not in dims]
    out_shape = tuple((1 if d in dims else a.shape[d]) for d in range(a.ndim)) if keepdim \
        else tuple(a.shape[d] for d in kept)
    kshape = tuple(a.shape[d] for d in kept) or (1,)
    kst = tuple(a.strides[d] // item for d in kept) or (0,)
    rshape = tuple(a.shape[d] for d in dims) or (1,)
    rst = tuple(a.strides[d] // item for d in dims) or (0,)
    M = math.prod(kshape) if kept else 1
    K = math.prod(rshape) if dims else 1
    acc = _acc_dtype(out_dtype)
    if M == 0 or K == 0:
        return backend.full(out_shape, 0, out_dtype)
    B = 8 if sim() else REDUCE_BLOCK
    P = 1 if K <= B * 8 else min((K + B * 8 - 1) // (B * 8), 65535, 1024)
    k = reduce_sum_kernel(acc.name, B)
    s = stream()
    part = backend.empty((M * P,), acc)
    k[(M, P), B, s](part, backend.flat_view(a), kshape, kst, rshape, rst, K, P)
    if P > 1:
        res = backend.empty((M,), acc)
        k[(M, 1), B, s](res, part, (M,), (P,), (P,), (1,), P, 1)
        part = res
    if acc != out_dtype:
        cast = backend.empty((M,), out_dtype)
        copy_into(cast, part)
        part = cast
    return backend.as_strided(part, out_shape, c_elem_strides(out_shape), 0)


def _dims(a, dims) -> tuple:
    # None (or an empty tuple, as older fronts passed for 0-dim inputs) means every dimension.
    return tuple(range(a.ndim)) if dims is None else tuple(dims)


@kernel("sum", "cuda")
def sum_kernel(a, dims, keepdim, dtype):
    """CUDA ``sum``: ``kernel(a, dims, keepdim, dtype) -> array``."""
    out_dtype = np.dtype(dtype.np)
    if out_dtype == np.float16:
        raise RuntimeError("\"sum_cuda\" not implemented for 'Half'")
    return _reduce_sum(a, _dims(a, dims), keepdim, out_dtype)


_div = binary_launcher("div")


@kernel("mean", "cuda")
def mean_kernel(a, dims, keepdim, dtype):
    """CUDA ``mean``: the sum divided by the number of reduced elements, in ``dtype``."""
    out_dtype = np.dtype(dtype.np)
    dims = _dims(a, dims)
    s = _reduce_sum(a, dims, keepdim, out_dtype)
    count = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    out = be().empty(s.shape, out_dtype)
    _div(s, float(count) if count else float("nan"), from_numpy_dtype(out_dtype), out=out)
    return out


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the sum kernel per accumulator and input dtype."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    idx = types.UniTuple(types.int64, ndim)
    cases = []
    for acc in ("float32", "float64", "int64"):
        t = from_dtype(np.dtype(acc))
        for dn in (("float32", "float64") if acc != "int64" else ("int32", "int64", "bool")):
            arr = types.Array(from_dtype(np.dtype(dn)), 1, "C")
            sig = (types.Array(t, 1, "C"), arr, idx, idx, idx, idx, types.int64, types.int64)
            cases.append((f"sum:{acc}:{dn}", _sum_py(np.dtype(acc).type), sig))
    return cases
