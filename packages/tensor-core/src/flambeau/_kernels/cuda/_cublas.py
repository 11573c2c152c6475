"""cuBLAS through cffi (ABI mode), loaded lazily from the nvidia-cublas-cu12 wheel or the system.

Never required: :func:`available` is False without a real GPU, cffi or libcublas, and matrix
products (:mod:`flambeau._kernels.cuda.linalg`) then use the numba kernel. One handle per
(device, thread); each call sets the handle's stream to the current stream, so cuBLAS work is
ordered with flambeau's kernels.

Row-major ``C = A @ B`` is computed as column-major ``C^T = B^T A^T``: with C-contiguous (or
transposed) operands no copy is needed.
"""

from __future__ import annotations

import ctypes.util
import glob
import os
import site
import sys
import threading

__all__ = ["available", "find_library", "matmul_into", "CublasUnavailable"]

_CDEF = """
typedef void* cublasHandle_t;
typedef void* cudaStream_t;
int cublasCreate_v2(cublasHandle_t *handle);
int cublasDestroy_v2(cublasHandle_t handle);
int cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
int cublasSgemmStridedBatched(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
    const float *alpha, const float *A, int lda, long long strideA, const float *B, int ldb,
    long long strideB, const float *beta, float *C, int ldc, long long strideC, int batchCount);
int cublasDgemmStridedBatched(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
    const double *alpha, const double *A, int lda, long long strideA, const double *B, int ldb,
    long long strideB, const double *beta, double *C, int ldc, long long strideC, int batchCount);
"""

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1


class CublasUnavailable(RuntimeError):
    """cuBLAS could not be loaded or initialised."""


_state: dict = {}
_tls = threading.local()


def find_library() -> str | None:
    """Path of libcublas: the nvidia-cublas-cu12 wheel first, then the system's; None if absent."""
    roots = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
    for root in roots:
        if not isinstance(root, str):
            continue
        hits = sorted(glob.glob(os.path.join(root, "nvidia", "cublas", "lib", "libcublas.so*")))
        if hits:
            return hits[0]
    return ctypes.util.find_library("cublas")


def _lib():
    if "lib" in _state:
        lib = _state["lib"]
        if lib is None:
            raise CublasUnavailable(_state.get("why", "cuBLAS unavailable"))
        return _state["ffi"], lib
    try:
        import cffi

        path = find_library()
        if path is None:
            raise CublasUnavailable("libcublas not found (install flambeau-tensor-core[cuda])")
        ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        lib = ffi.dlopen(path)
    except Exception as e:
        _state["lib"] = None
        _state["why"] = str(e)
        raise CublasUnavailable(str(e)) from None
    _state["ffi"], _state["lib"] = ffi, lib
    return ffi, lib


def available() -> bool:
    """Whether cuBLAS can be used (real GPU, cffi and libcublas present)."""
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return False
    try:
        _lib()
    except CublasUnavailable:
        return False
    return True


def _handle(device_index: int):
    ffi, lib = _lib()
    handles = getattr(_tls, "handles", None)
    if handles is None:
        handles = _tls.handles = {}
    h = handles.get(device_index)
    if h is None:
        p = ffi.new("cublasHandle_t *")
        rc = lib.cublasCreate_v2(p)
        if rc != 0:
            raise CublasUnavailable(f"cublasCreate failed with status {rc}")
        h = handles[device_index] = p[0]
    return h


def _layout(rs: int, cs: int, rows: int, cols: int):
    """(op, ld) describing a row-major ``rows x cols`` matrix with strides ``rs, cs`` to cuBLAS, or None."""
    if cs == 1 and (rs >= max(cols, 1) or rows == 1):
        return CUBLAS_OP_N, max(rs, cols, 1)
    if rs == 1 and (cs >= max(rows, 1) or cols == 1):
        return CUBLAS_OP_T, max(cs, rows, 1)
    return None


def matmul_into(out, a, b, ash, ast, bsh, bst, abst, bbst, batch, M, N, K, be, stream) -> bool:
    """``out[z] = a[z] @ b[z]`` with cuBLAS; False when the layout needs the numba kernel.

    ``out`` is C-contiguous ``batch + (M, N)``; batch strides must be uniform (one batch dim, or
    none) for the strided-batched call.
    """
    import numpy as np

    if a.dtype != b.dtype or a.dtype != out.dtype or len(batch) > 1:
        return False
    la = _layout(ast[-2], ast[-1], M, K)
    lb = _layout(bst[-2], bst[-1], K, N)
    if la is None or lb is None:
        return False
    ffi, lib = _lib()
    from flambeau.cuda._streams import current_device

    h = _handle(current_device())
    sv = int(stream) if hasattr(type(stream), "__int__") else 0  # numba stream -> CUstream handle
    lib.cublasSetStream_v2(h, ffi.cast("cudaStream_t", sv))
    Z = batch[0] if batch else 1
    sa = abst[0] if batch else 0
    sb = bbst[0] if batch else 0
    f32 = out.dtype == np.float32
    ctype = "float" if f32 else "double"
    one = ffi.new(f"{ctype} *", 1.0)
    zero = ffi.new(f"{ctype} *", 0.0)
    pa = ffi.cast(f"{ctype} *", be.data_ptr(a))
    pb = ffi.cast(f"{ctype} *", be.data_ptr(b))
    pc = ffi.cast(f"{ctype} *", be.data_ptr(out))
    gemm = lib.cublasSgemmStridedBatched if f32 else lib.cublasDgemmStridedBatched
    # column-major: C^T (N x M) = B^T (N x K) @ A^T (K x M)
    rc = gemm(h, lb[0], la[0], N, M, K, one, pb, lb[1], sb, pa, la[1], sa, zero, pc, N, M * N, Z)
    if rc != 0:
        raise RuntimeError(f"cuBLAS gemm failed with status {rc}")
    return True
