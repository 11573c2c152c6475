"""cuBLAS through cffi (ABI mode), loaded lazily from wherever cuda-pathfinder or numba-cuda finds it.

Never required: :func:`available` is False without a real GPU, cffi or libcublas, and matrix
products (:mod:`flambeau._kernels.cuda.linalg`) then use the numba kernel. One handle per
(device, thread); each call sets the handle's stream to the current stream, so cuBLAS work is
ordered with flambeau's kernels.

Row-major ``C = A @ B`` is computed as column-major ``C^T = B^T A^T``: with C-contiguous (or
transposed) operands no copy is needed. :func:`gemm` computes ``C = alpha * A @ B + beta * C``
(the caller pre-fills ``C`` for ``beta != 0``): float32 and float64 through
``cublas[SD]gemmStridedBatched``, float16 through ``cublasGemmStridedBatchedEx`` computing in
float32. Batch dimensions a strided-batched call cannot express (more than one after merging)
become one call per index of the outer ones, all queued on the stream. :func:`prepare` makes a
:class:`Gemm` of one shape and layout for many calls at changing addresses (a recurrence's steps).
"""

from __future__ import annotations

import ctypes.util
import functools
import math
import threading

import numpy as np

from flambeau.cuda._streams import current_device, stream_handle

__all__ = ["available", "find_library", "supports", "gemm", "prepare", "Gemm", "CublasUnavailable"]

_CDEF = """
typedef void* cublasHandle_t;
typedef void* cudaStream_t;
int cublasCreate_v2(cublasHandle_t *handle);
int cublasDestroy_v2(cublasHandle_t handle);
int cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
int cublasSgemmStridedBatched(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
    const float *alpha, uintptr_t A, int lda, long long strideA, uintptr_t B, int ldb,
    long long strideB, const float *beta, uintptr_t C, int ldc, long long strideC, int batchCount);
int cublasDgemmStridedBatched(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
    const double *alpha, uintptr_t A, int lda, long long strideA, uintptr_t B, int ldb,
    long long strideB, const double *beta, uintptr_t C, int ldc, long long strideC, int batchCount);
int cublasGemmStridedBatchedEx(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
    const void *alpha, uintptr_t A, int Atype, int lda, long long strideA, uintptr_t B, int Btype,
    int ldb, long long strideB, const void *beta, uintptr_t C, int Ctype, int ldc, long long strideC,
    int batchCount, int computeType, int algo);
"""
# (the device pointers A, B, C are declared uintptr_t: Python ints, passed in the registers of pointers, with no
# cffi cast per operand and call)

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUDA_R_16F = 2  # cudaDataType
CUBLAS_COMPUTE_32F = 68  # cublasComputeType_t
CUBLAS_GEMM_DEFAULT = -1
_INT_MAX = 2**31 - 1
_FLOATS = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})  # what gemm takes
_F16, _F64 = np.dtype(np.float16), np.dtype(np.float64)
_ONE_CALL = ((0, 0, 0),)  # element offsets of a, b and out of the one call of an unlooped GEMM


class CublasUnavailable(RuntimeError):
    """cuBLAS could not be loaded or initialised."""


_state: dict = {}
_tls = threading.local()


def find_library() -> str | None:
    """Path of libcublas as cuda-pathfinder finds it (NVIDIA wheels of any CUDA major, conda, the
    system), else numba-cuda's search of the toolkit; None if absent."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        path = load_nvidia_dynamic_lib("cublas").abs_path
        if path:
            return path
    except Exception:  # cuda-pathfinder missing or the library not found: try numba-cuda's search
        pass
    try:
        import os

        from numba.cuda.cudadrv.libs import get_cudalib

        path = get_cudalib("cublas")
        if os.path.isabs(path) and os.path.exists(path):
            return path
    except Exception:
        pass
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
            raise CublasUnavailable("libcublas not found (pip install nvidia-cublas-cu12, or a CUDA toolkit)")
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
    if _state.get("lib") is not None:  # loaded, which only this check does, never under the simulator
        return True  # (every matrix product asks: one lookup)
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


def _handle_on(ffi, lib, stream):
    """The calling thread's handle of the current device, its stream set to ``stream``."""
    device = current_device()
    h = _handle(device)
    sv = stream_handle(stream)
    streams = _tls.__dict__.setdefault("streams", {})
    if streams.get(device) != sv:  # cuBLAS resets its workspace on every cublasSetStream: only on a change
        rc = lib.cublasSetStream_v2(h, ffi.cast("cudaStream_t", sv))
        if rc != 0:
            raise RuntimeError(f"cublasSetStream failed with status {rc}")
        streams[device] = sv
    return h


def forget_stream(device_index: int) -> None:
    """Forget which stream the calling thread's handle of ``device_index`` has (it was handed out)."""
    _tls.__dict__.get("streams", {}).pop(device_index, None)


def _layout(rs: int, cs: int, rows: int, cols: int):
    """(op, ld) describing a row-major ``rows x cols`` matrix with strides ``rs, cs`` to cuBLAS, or None."""
    if cs == 1 and (rs >= max(cols, 1) or rows == 1):
        return CUBLAS_OP_N, max(rs, cols, 1)
    if rs == 1 and (cs >= max(rows, 1) or cols == 1):
        return CUBLAS_OP_T, max(cs, rows, 1)
    return None


@functools.lru_cache(maxsize=4096)  # (a training step asks for the same few dozen each step)
def _plan(dtype, ars, acs, brs, bcs, M, N, K):
    """The (op, ld) layouts of both operands for :func:`gemm`, or None when cuBLAS cannot take them."""
    if (dtype not in _FLOATS and np.dtype(dtype) not in _FLOATS) or max(M, N, K) > _INT_MAX:
        return None
    la = _layout(ars, acs, M, K)
    lb = _layout(brs, bcs, K, N)
    if la is None or lb is None or max(la[1], lb[1], N) > _INT_MAX:
        return None
    return la, lb


def supports(dtype, ars, acs, brs, bcs, M, N, K) -> bool:
    """Whether :func:`gemm` takes an ``M x K`` by ``K x N`` product of ``dtype`` with these row and
    column strides (elements)."""
    return _plan(dtype, ars, acs, brs, bcs, M, N, K) is not None


_SCALARS: dict = {}  # (C type, value) -> host memory holding it, which cuBLAS reads alpha and beta from


def _scalar(ffi, ctype: str, value: float):
    """A ``ctype *`` pointing at ``value`` (kept: GEMMs use a handful of alphas and betas, mostly 1 and 0)."""
    p = _SCALARS.get((ctype, value))
    if p is None:
        if len(_SCALARS) >= 256:
            _SCALARS.clear()
        p = _SCALARS[ctype, value] = ffi.new(f"{ctype} *", value)
    return p


def gemm(out, a, b, A, B, batch, M, N, K, alpha, beta, be, stream) -> bool:
    """``out[z] = alpha * a[z] @ b[z] + beta * out[z]`` with cuBLAS; False when it cannot (the
    caller then uses the numba kernel), before anything is queued.

    ``out`` is C-contiguous ``batch + (M, N)``; ``A = (batch strides, row stride, column stride,
    element offset)`` describes ``a`` in elements (likewise ``B``); batch strides are 0 where a
    batch dimension broadcasts. ``a``, ``b`` and ``out`` have one dtype: float16, float32 or float64.
    """
    dt = out.dtype
    abst, ars, acs, aoff = A
    bbst, brs, bcs, boff = B
    plan = _plan(dt, ars, acs, brs, bcs, M, N, K) if a.dtype == dt and b.dtype == dt else None
    if plan is None:
        return False
    la, lb = plan
    nb = len(batch)
    if nb < 2:  # one strided-batched call (the common case)
        Z, sa, sb, sc = (batch[0], abst[0], bbst[0], M * N) if nb else (1, 0, 0, 0)
        offsets = _ONE_CALL
    else:
        Z, sa, sb, sc, offsets = _batch_loop(tuple(batch), tuple(abst), tuple(bbst), M * N)
    ffi, lib = _lib()
    h = _handle_on(ffi, lib, stream)
    half = dt == _F16
    ctype = "double" if dt == _F64 else "float"  # float16 computes (and scales) in float32
    pal, pbe = _scalar(ffi, ctype, alpha), _scalar(ffi, ctype, beta)
    item = dt.itemsize
    a0, b0, c0 = be.data_ptr(a) + aoff * item, be.data_ptr(b) + boff * item, be.data_ptr(out)
    for oa, ob, oc in offsets:
        pa, pb, pc = a0 + oa * item, b0 + ob * item, c0 + oc * item
        # column-major: C^T (N x M) = B^T (N x K) @ A^T (K x M)
        if half:
            rc = lib.cublasGemmStridedBatchedEx(
                h, lb[0], la[0], N, M, K, pal, pb, CUDA_R_16F, lb[1], sb,
                pa, CUDA_R_16F, la[1], sa, pbe, pc, CUDA_R_16F, N, sc, Z,
                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
        else:
            fn = lib.cublasSgemmStridedBatched if ctype == "float" else lib.cublasDgemmStridedBatched
            rc = fn(h, lb[0], la[0], N, M, K, pal, pb, lb[1], sb, pa, la[1], sa, pbe, pc, N, sc, Z)
        if rc != 0:
            raise RuntimeError(f"cuBLAS gemm failed with status {rc}")
    return True


@functools.lru_cache(maxsize=1024)
def _batch_loop(batch: tuple, abst: tuple, bbst: tuple, mn: int) -> tuple:
    """``(Z, sa, sb, sc, offsets)`` of a GEMM over more than one batch dim: cuBLAS batches over one dim of uniform
    strides (``Z`` products, strides ``sa``, ``sb``, ``sc``), the longest, so that fewest calls loop over the rest
    (attention's (batch, heads) views of a fused qkv projection do not merge into one dim); ``offsets`` are the
    element offsets of a, b and out of each call. Worked out once per geometry: a long attention's step asks
    for the same few dozen."""
    nb = len(batch)
    cbst = [math.prod(batch[d + 1:]) * mn for d in range(nb)]
    zd = max(range(nb), key=batch.__getitem__)
    rest = [d for d in range(nb) if d != zd]
    offsets = tuple(tuple(sum(i * st[d] for i, d in zip(idx, rest)) for st in (abst, bbst, cbst))
                    for idx in np.ndindex(*(batch[d] for d in rest)))
    return batch[zd], abst[zd], bbst[zd], cbst[zd], offsets


class Gemm:
    """``c = a @ b`` of one shape and layout, run at changing addresses (:func:`prepare`): the layouts, the
    function, the scalars and the handle are worked out once. A recurrent layer runs one product per time
    step, on the same stream and thread; through :func:`gemm` each paid tens of microseconds of host time,
    as much as the step's kernels take on a GPU.

    Call it with the byte addresses of ``a``'s first element (``M x K``, the layout given to :func:`prepare`),
    ``b``'s (``K x N``) and ``c``'s (``M x N``, C-contiguous).
    """

    __slots__ = ("fn", "h", "ldb", "lda", "ldc", "mnk", "pal", "pbe")

    def __init__(self, ffi, lib, h, dtype, la, lb, M: int, N: int, K: int):
        double = dtype == _F64
        self.fn = lib.cublasDgemmStridedBatched if double else lib.cublasSgemmStridedBatched
        self.h = h
        ctype = "double" if double else "float"
        self.pal, self.pbe = _scalar(ffi, ctype, 1.0), _scalar(ffi, ctype, 0.0)
        # column-major: C^T (N x M) = B^T (N x K) @ A^T (K x M), one product (strides 0, count 1)
        self.mnk = (lb[0], la[0], N, M, K)
        self.ldb, self.lda, self.ldc = lb[1], la[1], N

    def __call__(self, pa: int, pb: int, pc: int) -> None:
        rc = self.fn(self.h, *self.mnk, self.pal, pb, self.ldb, 0, pa, self.lda, 0, self.pbe, pc, self.ldc, 0, 1)
        if rc != 0:
            raise RuntimeError(f"cuBLAS gemm failed with status {rc}")


def prepare(dtype, A: tuple, B: tuple, M: int, N: int, K: int, stream) -> Gemm | None:
    """A :class:`Gemm` of ``M x K`` by ``K x N`` products of float32 or float64 operands laid out with element
    strides ``A = (row, column)`` and ``B`` likewise, on ``stream`` from the calling thread (the handle's stream is
    set now: call it on this thread, with no other cuBLAS call on another stream in between); None where
    :func:`gemm` would not take them either, or cuBLAS is unavailable."""
    dtype = np.dtype(dtype)
    if dtype == _F16 or min(M, N, K) < 1 or not available():
        return None
    plan = _plan(dtype, A[0], A[1], B[0], B[1], M, N, K)
    if plan is None:
        return None
    ffi, lib = _lib()
    return Gemm(ffi, lib, _handle_on(ffi, lib, stream), dtype, plan[0], plan[1], M, N, K)
