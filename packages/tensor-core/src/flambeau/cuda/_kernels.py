"""numba.cuda kernels of flambeau, built lazily by cached factories (numba is imported on first use).

Every kernel reads and writes *flat* 1-d device arrays addressed with element strides passed as
``UniTuple(int64, ndim)`` arguments, so one kernel serves contiguous, transposed, sliced and
broadcast (stride 0) operands; numba specialises it per dtypes and ndim on first launch.

- :func:`binary_kernel` / :func:`unary_kernel`: ONE strided elementwise template per arity,
  closing over a device function (``numba.cuda.jit(device=True)``) and the compute dtype.
- :func:`sum_kernel`: a shared-memory tree reduction, one block (or several, then a second pass)
  per output element.
- :func:`matmul_kernel`: a tiled shared-memory batched GEMM with strided, broadcast batches.

Scalar functions per operator name live in :mod:`flambeau.cuda._tables`; :func:`ptx_cases` lists
concrete signatures for the PTX compilation test. numba is imported at module level (the simulator
swaps the module-level ``cuda`` global), so this module is imported only on first CUDA use.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from flambeau.cuda._tables import BINARY, INT_VARIANTS, UNARY, _sigmoid, _silu, dtypes_for

__all__ = ["binary_kernel", "unary_kernel", "sum_kernel", "matmul_kernel",
           "fill_kernel", "BLOCK", "REDUCE_BLOCK", "TILE", "CACHE"]

BLOCK = 256  # threads per block of elementwise kernels
REDUCE_BLOCK = 256  # threads per block of reductions (a power of two)
TILE = 16  # matmul tile edge
CACHE = True  # numba's on-disk cache for CUDA kernels (ignored by the simulator)


@functools.cache
def _device_fn(table: str, name: str, kind: str = "f"):
    """The device function of operator ``name``; ``kind`` is the compute dtype's numpy kind."""
    fn = (BINARY if table == "binary" else UNARY)[name][0]
    if kind in "iu" and name in INT_VARIANTS:
        fn = INT_VARIANTS[name]
    if fn in (_silu,):
        sig = cuda.jit(device=True)(_sigmoid)

        def silu(x):
            return x * sig(x)

        return cuda.jit(device=True)(silu)
    return cuda.jit(device=True)(fn)


# --- elementwise templates ----------------------------------------------------------------------
def _binary_py(f, ct):
    """The Python function of the strided binary kernel over device function ``f``, computing in ``ct``."""
    def binary(out, ost, a, ast, sa, use_sa, b, bst, sb, use_sb, shape, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        nd = len(shape)
        while i < n:
            r = i
            oo = 0
            oa = 0
            ob = 0
            for d in range(nd - 1, -1, -1):
                ext = shape[d]
                c = r % ext
                r = r // ext
                oo += c * ost[d]
                oa += c * ast[d]
                ob += c * bst[d]
            x = sa if use_sa else ct(a[oa])
            y = sb if use_sb else ct(b[ob])
            out[oo] = f(x, y)
            i += step

    return binary


def _unary_py(f, ct):
    def unary(out, ost, a, ast, shape, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        nd = len(shape)
        while i < n:
            r = i
            oo = 0
            oa = 0
            for d in range(nd - 1, -1, -1):
                ext = shape[d]
                c = r % ext
                r = r // ext
                oo += c * ost[d]
                oa += c * ast[d]
            out[oo] = f(ct(a[oa]))
            i += step

    return unary


@functools.cache
def binary_kernel(name: str, compute: str):
    """The strided binary kernel of operator ``name`` computing in numpy dtype ``compute`` (cached)."""
    dt = np.dtype(compute)
    return cuda.jit(cache=CACHE)(_binary_py(_device_fn("binary", name, dt.kind), dt.type))


@functools.cache
def unary_kernel(name: str, compute: str):
    """The strided unary kernel of operator ``name`` computing in numpy dtype ``compute`` (cached)."""
    dt = np.dtype(compute)
    return cuda.jit(cache=CACHE)(_unary_py(_device_fn("unary", name, dt.kind), dt.type))


def _fill_py():
    def fill(out, ost, value, shape, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        nd = len(shape)
        while i < n:
            r = i
            oo = 0
            for d in range(nd - 1, -1, -1):
                ext = shape[d]
                c = r % ext
                r = r // ext
                oo += c * ost[d]
            out[oo] = value
            i += step

    return fill


@functools.cache
def fill_kernel():
    """Strided fill: ``out[...] = value``."""
    return cuda.jit(cache=CACHE)(_fill_py())


# --- reduction ----------------------------------------------------------------------------------
def _sum_py(acc, B=REDUCE_BLOCK):
    """Sum kernel accumulating in numpy type ``acc``.

    Output element ``m`` (unravelled over ``kshape`` with input strides ``kst``) reduces the
    ``K`` elements unravelled over ``rshape`` with strides ``rst``. Block ``(m, p)`` of ``P``
    blocks per output handles elements ``p, p + P*B, ...`` of its row (B threads), reduces them
    in shared memory and writes ``part[m * P + p]``.
    """
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
def sum_kernel(acc: str, block: int = REDUCE_BLOCK):
    """The tree-reduction sum kernel accumulating in numpy dtype ``acc``, ``block`` threads (cached)."""
    return cuda.jit(cache=CACHE)(_sum_py(np.dtype(acc).type, block))


# --- matmul -------------------------------------------------------------------------------------
def _matmul_py(acc, T=TILE):
    """Tiled batched GEMM: ``c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]`` (``c`` C-contiguous).

    Batch ``z`` unravels over ``bshape`` with batch strides ``abst`` / ``bbst`` (0 where a
    batch dimension broadcasts); ``ars, acs`` / ``brs, bcs`` are row and column strides.
    """
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
    return cuda.jit(cache=CACHE)(_matmul_py(np.dtype(acc).type, tile))


# --- concrete signatures (PTX test) ---------------------------------------------------------------
def ptx_cases(ndim: int = 2):
    """``(label, python_function, signature)`` for every kernel and supported dtype (PTX compilation).

    Signatures use the compute dtype for inputs and output (bool output for predicates).
    """
    from numba import types
    from numba.np.numpy_support import from_dtype

    from flambeau.cuda import _kernels as K

    idx = types.UniTuple(types.int64, ndim)
    cases = []
    bool_out_b = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"}
    bool_out_u = {"logical_not", "isnan", "isinf", "isfinite", "signbit", "isposinf", "isneginf"}
    for name, (_, kinds) in BINARY.items():
        for dn in dtypes_for(kinds):
            t = from_dtype(np.dtype(dn))
            arr = types.Array(t, 1, "C")
            outt = types.Array(types.boolean if name in bool_out_b else t, 1, "C")
            py = K._binary_py(_device_fn("binary", name, np.dtype(dn).kind), np.dtype(dn).type)
            sig = (outt, idx, arr, idx, t, types.boolean, arr, idx, t, types.boolean, idx, types.int64)
            cases.append((f"binary:{name}:{dn}", py, sig))
    for name, (_, kinds) in UNARY.items():
        for dn in dtypes_for(kinds):
            t = from_dtype(np.dtype(dn))
            arr = types.Array(t, 1, "C")
            outt = types.Array(types.boolean if name in bool_out_u else t, 1, "C")
            py = K._unary_py(_device_fn("unary", name, np.dtype(dn).kind), np.dtype(dn).type)
            cases.append((f"unary:{name}:{dn}", py, (outt, idx, arr, idx, idx, types.int64)))
    for dn in dtypes_for("fib"):
        t = from_dtype(np.dtype(dn))
        cases.append((f"fill:{dn}", _fill_py(), (types.Array(t, 1, "C"), idx, t, idx, types.int64)))
    for acc in ("float32", "float64", "int64"):
        t = from_dtype(np.dtype(acc))
        for dn in (("float32", "float64") if acc != "int64" else ("int32", "int64", "bool")):
            arr = types.Array(from_dtype(np.dtype(dn)), 1, "C")
            sig = (types.Array(t, 1, "C"), arr, idx, idx, idx, idx, types.int64, types.int64)
            cases.append((f"sum:{acc}:{dn}", _sum_py(np.dtype(acc).type), sig))
    b1 = types.UniTuple(types.int64, 1)
    for acc in ("float32", "float64", "int32", "int64"):
        t = from_dtype(np.dtype(acc))
        arr = types.Array(t, 1, "C")
        sig = (arr, arr, b1, types.int64, types.int64, arr, b1, types.int64, types.int64, b1,
               types.int64, types.int64, types.int64)
        cases.append((f"matmul:{acc}", _matmul_py(np.dtype(acc).type), sig))
    return cases
