"""CUDA kernels of the matrix products: ``matmul``, ``mm`` and ``bmm`` (one kernel for the three).

Convention (the CPU kernels'): ``kernel(a, b) -> array`` with torch's matmul rules: 1-d operands
are promoted, batch dimensions broadcast. cuBLAS (:mod:`flambeau._kernels.cuda._cublas`) serves
float32/float64 on a real GPU when libcublas is found; a tiled shared-memory batched GEMM in
numba.cuda (:func:`matmul_kernel`) serves everything else, the simulator included.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import scalar_name
from flambeau._kernels.cuda._launch import CACHE, TILE, be, bind_numba_cuda, c_elem_strides, sim, stream
from flambeau._kernels.cuda.core import copy_into, fill
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

__all__ = ["matmul_kernel", "matmul", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)


def _matmul_py(acc, T=TILE):
    """Tiled batched GEMM: ``c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]`` (``c`` C-contiguous).

    Batch ``z`` unravels over ``bshape`` with batch strides ``abst`` / ``bbst`` (0 where a
    batch dimension broadcasts); ``ars, acs`` / ``brs, bcs`` are row and column strides.
    """
    bind_numba_cuda(globals())
    def matmul(c, a, abst, ars, acs, b, bbst, brs, bcs, bshape, M, N, K):
        sa = cuda.shared.array((T, T), acc)
        sb = cuda.shared.array((T, T), acc)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * T + ty
        col = cuda.blockIdx.x * T + tx
        z = cuda.blockIdx.z
        aoff = 0
        boff = 0
        r = z
        for d in range(len(bshape) - 1, -1, -1):
            ext = bshape[d]
            q = r % ext
            r = r // ext
            aoff += q * abst[d]
            boff += q * bbst[d]
        s = acc(0)
        for t0 in range(0, K, T):
            ka = t0 + tx
            if row < M and ka < K:
                sa[ty, tx] = acc(a[aoff + row * ars + ka * acs])
            else:
                sa[ty, tx] = acc(0)
            kb = t0 + ty
            if col < N and kb < K:
                sb[ty, tx] = acc(b[boff + kb * brs + col * bcs])
            else:
                sb[ty, tx] = acc(0)
            cuda.syncthreads()
            for kk in range(T):
                s += sa[ty, kk] * sb[kk, tx]
            cuda.syncthreads()
        if row < M and col < N:
            c[(z * M + row) * N + col] = s

    return matmul


@functools.cache
def matmul_kernel(acc: str, tile: int = TILE):
    """The tiled matmul kernel computing in numpy dtype ``acc`` with ``tile`` x ``tile`` blocks (cached)."""
    bind_numba_cuda(globals())
    return cuda.jit(cache=CACHE)(_matmul_py(np.dtype(acc).type, tile))


@kernel("matmul", "cuda")
@kernel("mm", "cuda")
@kernel("bmm", "cuda")
def matmul(a, b):
    """CUDA ``matmul`` with torch's rules: 1-d operands are promoted, batch dims broadcast.

    cuBLAS serves float32/float64 on a real GPU when libcublas is found; a tiled numba kernel
    serves everything else.
    """
    backend = be()
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    item_a, item_b = a.dtype.itemsize, b.dtype.itemsize
    ash, ast = list(a.shape), [s // item_a for s in a.strides]
    bsh, bst = list(b.shape), [s // item_b for s in b.strides]
    if squeeze_a:
        ash, ast = [1] + ash, [0] + ast
    if squeeze_b:
        bsh, bst = bsh + [1], bst + [0]
    M, K = ash[-2], ash[-1]
    K2, N = bsh[-2], bsh[-1]
    if K != K2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({M}x{K} and {K2}x{N})")
    batch = broadcast_shapes(tuple(ash[:-2]), tuple(bsh[:-2]))
    nb = len(batch)

    def bstrides(sh, st):
        out = [0] * nb
        off = nb - (len(sh) - 2)
        for i in range(len(sh) - 2):
            out[off + i] = 0 if sh[i] == 1 else st[i]
        return tuple(out) or (0,)

    abst, bbst = bstrides(ash, ast), bstrides(bsh, bst)
    compute = np.result_type(a.dtype, b.dtype)
    if compute == np.bool_ or compute == np.float16:
        raise RuntimeError(f"\"addmm_cuda\" not implemented for '{scalar_name(compute)}'")
    Z = math.prod(batch) if nb else 1
    full_shape = tuple(batch) + (M, N)
    out = backend.empty(full_shape, compute)
    if out.size:
        if K == 0:
            fill(out, 0)
        elif not sim() and compute in (np.float32, np.float64) and _try_cublas(out, a, b, ash, ast, bsh, bst,
                                                                              abst, bbst, batch, M, N, K):
            pass
        else:
            T = 4 if sim() else TILE
            if a.dtype != compute:
                a = _cast(a, compute)
            if b.dtype != compute:
                b = _cast(b, compute)
            k = matmul_kernel(compute.name, T)
            if Z > 65535:
                raise RuntimeError(f"matmul on CUDA supports at most 65535 batches, got {Z}")
            grid = ((N + T - 1) // T, (M + T - 1) // T, Z)
            k[grid, (T, T), stream()](backend.flat_view(out), backend.flat_view(a), abst, ast[-2], ast[-1],
                                      backend.flat_view(b), bbst, bst[-2], bst[-1], tuple(batch) or (1,), M, N, K)
    shape = list(full_shape)
    if squeeze_b:
        shape.pop(-1)
    if squeeze_a:
        shape.pop(-1 if squeeze_b else -2)
    if tuple(shape) != full_shape:
        out = backend.as_strided(out, tuple(shape), c_elem_strides(tuple(shape)), 0)
    return out


def _cast(arr, dtype):
    out = be().empty(arr.shape, dtype)
    copy_into(out, arr)
    return out


def _try_cublas(out, a, b, ash, ast, bsh, bst, abst, bbst, batch, M, N, K) -> bool:
    from flambeau._kernels.cuda import _cublas  # cffi and the library load on first use

    if not _cublas.available():
        return False
    try:
        return _cublas.matmul_into(out, a, b, ash, ast, bsh, bst, abst, bbst, batch, M, N, K, be(), stream())
    except _cublas.CublasUnavailable:
        return False


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the numba matmul kernel per compute dtype (one batch dim)."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    b1 = types.UniTuple(types.int64, 1)
    cases = []
    for acc in ("float32", "float64", "int32", "int64"):
        t = from_dtype(np.dtype(acc))
        arr = types.Array(t, 1, "C")
        sig = (arr, arr, b1, types.int64, types.int64, arr, b1, types.int64, types.int64, b1,
               types.int64, types.int64, types.int64)
        cases.append((f"matmul:{acc}", _matmul_py(np.dtype(acc).type), sig))
    return cases
