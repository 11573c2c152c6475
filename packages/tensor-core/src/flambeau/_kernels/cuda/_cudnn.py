"""cuDNN convolutions through cffi (ABI mode), loaded lazily from wherever cuda-pathfinder finds libcudnn (its
batch norm, on the same library and handles, is ``_cudnn_bn``'s).

Never required: :func:`available` is False under the simulator, without cffi or libcudnn (``pip install
nvidia-cudnn-cu12``), or with ``FLAMBEAU_CUDNN=0``; the convolution kernels of
:mod:`flambeau._kernels.cuda.conv` then use their numba path. Each entry point returns None when cuDNN
cannot take the call (dtype, empty or too large shapes, no algorithm), before anything is queued, and
raises :class:`CudnnUnavailable` on a failing status (the caller falls back to numba). One handle per
(device, thread); each call sets its stream to the current stream, so cuDNN work is ordered with
flambeau's kernels.

Convolutions run through cuDNN's graph API where it takes them (``_cudnn_graph``, Note [cuDNN's graph API]),
else through the legacy (v7) calls, present in cuDNN 8 and 9: NCHW float32 and float64 tensors, symmetric
padding, groups. float32 runs on TF32 tensor cores where the device has them and
``flambeau.backends.cudnn.allow_tf32`` is True (the default, as torch's: ``CUDNN_DEFAULT_MATH``), else
with ``CUDNN_FMA_MATH`` (results agree with the CPU to float32 rounding). The algorithm is the first the
heuristics (``cudnnGet*Algorithm_v7``) rate usable whose workspace fits the device's free memory (a
deterministic one under ``backends.cudnn.deterministic`` or ``use_deterministic_algorithms``, as torch),
asked once per configuration (Note [cuDNN plans], Note [cuDNN workspaces]).
"""

from __future__ import annotations

import ctypes.util
import math
import os
import threading
import time

import numpy as np

from flambeau._determinism import cudnn_allow_tf32, cudnn_benchmark, cudnn_enabled, deterministic
from flambeau._kernels.cuda import _cudnn_graph, _launch
from flambeau.cuda import _streams
from flambeau.cuda._streams import stream_handle

__all__ = ["available", "find_library", "forward", "backward_data", "backward_filter", "CudnnUnavailable"]

_PERF = "typedef struct { int algo; int status; float time; size_t memory; int determinism; int mathType; " \
        "int reserved[3]; } %s;\n"
_CDEF = "".join(_PERF % n for n in ("fwdPerf_t", "bwdDataPerf_t", "bwdFilterPerf_t")) + """
typedef void* cudnnHandle_t;
typedef void* cudaStream_t;
typedef void* cudnnTensorDescriptor_t;
typedef void* cudnnFilterDescriptor_t;
typedef void* cudnnConvolutionDescriptor_t;
size_t cudnnGetVersion(void);
int cudnnCreate(cudnnHandle_t *handle);
int cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId);
int cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *desc);
int cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc);
int cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, int dataType, int nbDims, const int dimA[],
    const int strideA[]);
int cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *desc);
int cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc);
int cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, int dataType, int format, int nbDims,
    const int filterDimA[]);
int cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *desc);
int cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc);
int cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int arrayLength, const int padA[],
    const int filterStrideA[], const int dilationA[], int mode, int computeType);
int cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groupCount);
int cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, int mathType);
int cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, cudnnTensorDescriptor_t xDesc,
    cudnnFilterDescriptor_t wDesc, cudnnConvolutionDescriptor_t convDesc, cudnnTensorDescriptor_t yDesc,
    int requestedAlgoCount, int *returnedAlgoCount, fwdPerf_t *perfResults);
int cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, cudnnTensorDescriptor_t xDesc,
    cudnnFilterDescriptor_t wDesc, cudnnConvolutionDescriptor_t convDesc, cudnnTensorDescriptor_t yDesc, int algo,
    size_t *sizeInBytes);
int cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha, cudnnTensorDescriptor_t xDesc, uintptr_t x,
    cudnnFilterDescriptor_t wDesc, uintptr_t w, cudnnConvolutionDescriptor_t convDesc, int algo, uintptr_t workSpace,
    size_t workSpaceSizeInBytes, const void *beta, cudnnTensorDescriptor_t yDesc, uintptr_t y);
int cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle, cudnnFilterDescriptor_t wDesc,
    cudnnTensorDescriptor_t dyDesc, cudnnConvolutionDescriptor_t convDesc, cudnnTensorDescriptor_t dxDesc,
    int requestedAlgoCount, int *returnedAlgoCount, bwdDataPerf_t *perfResults);
int cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, cudnnFilterDescriptor_t wDesc,
    cudnnTensorDescriptor_t dyDesc, cudnnConvolutionDescriptor_t convDesc, cudnnTensorDescriptor_t dxDesc, int algo,
    size_t *sizeInBytes);
int cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha, cudnnFilterDescriptor_t wDesc,
    uintptr_t w, cudnnTensorDescriptor_t dyDesc, uintptr_t dy, cudnnConvolutionDescriptor_t convDesc, int algo,
    uintptr_t workSpace, size_t workSpaceSizeInBytes, const void *beta, cudnnTensorDescriptor_t dxDesc, uintptr_t dx);
int cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle, cudnnTensorDescriptor_t xDesc,
    cudnnTensorDescriptor_t dyDesc, cudnnConvolutionDescriptor_t convDesc, cudnnFilterDescriptor_t dwDesc,
    int requestedAlgoCount, int *returnedAlgoCount, bwdFilterPerf_t *perfResults);
int cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle, cudnnTensorDescriptor_t xDesc,
    cudnnTensorDescriptor_t dyDesc, cudnnConvolutionDescriptor_t convDesc, cudnnFilterDescriptor_t gradDesc,
    int algo, size_t *sizeInBytes);
int cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha, cudnnTensorDescriptor_t xDesc,
    uintptr_t x, cudnnTensorDescriptor_t dyDesc, uintptr_t dy, cudnnConvolutionDescriptor_t convDesc, int algo,
    uintptr_t workSpace, size_t workSpaceSizeInBytes, const void *beta, cudnnFilterDescriptor_t dwDesc, uintptr_t dw);
int cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t derivedBnDesc, cudnnTensorDescriptor_t xDesc, int mode);
int cudnnBatchNormalizationForwardTraining(cudnnHandle_t handle, int mode, const void *alpha, const void *beta,
    cudnnTensorDescriptor_t xDesc, uintptr_t x, cudnnTensorDescriptor_t yDesc, uintptr_t y,
    cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, uintptr_t bnScale, uintptr_t bnBias,
    double exponentialAverageFactor, uintptr_t resultRunningMean, uintptr_t resultRunningVariance, double epsilon,
    uintptr_t resultSaveMean, uintptr_t resultSaveInvVariance);
int cudnnBatchNormalizationBackward(cudnnHandle_t handle, int mode, const void *alphaDataDiff,
    const void *betaDataDiff, const void *alphaParamDiff, const void *betaParamDiff, cudnnTensorDescriptor_t xDesc,
    uintptr_t x, cudnnTensorDescriptor_t dyDesc, uintptr_t dy, cudnnTensorDescriptor_t dxDesc, uintptr_t dx,
    cudnnTensorDescriptor_t dBnScaleBiasDesc, uintptr_t bnScale, uintptr_t dBnScaleResult, uintptr_t dBnBiasResult,
    double epsilon, uintptr_t savedMean, uintptr_t savedInvVariance);
""" + _cudnn_graph.CDEF

_DATA = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}  # cudnnDataType_t: CUDNN_DATA_FLOAT, CUDNN_DATA_DOUBLE
CUDNN_TENSOR_NCHW = 0
CUDNN_CROSS_CORRELATION = 1
CUDNN_DEFAULT_MATH = 0  # cudnnMathType_t: tensor cores allowed, TF32 for float32 on compute capability 8.0+
CUDNN_FMA_MATH = 3  # FMA only: no tensor cores, no TF32
FALLBACK_WORKSPACE = 1 << 30  # bytes a workspace may take where the device's free memory cannot be read
_ALGOS = 8  # heuristics asked for
_GRAPH_API = os.environ.get("FLAMBEAU_CUDNN_GRAPH", "1") != "0"  # Note [cuDNN's graph API]
_INT_MAX = 2**31 - 1


class CudnnUnavailable(RuntimeError):
    """cuDNN could not be loaded, or a call failed."""


_state: dict = {}
_tls = threading.local()


def find_library() -> str | None:
    """Path of libcudnn as cuda-pathfinder finds it (NVIDIA wheels, conda, the system), else the system's; None
    if absent."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        path = load_nvidia_dynamic_lib("cudnn").abs_path
        if path:
            return path
    except Exception:  # cuda-pathfinder missing, or the library not found by it
        pass
    return ctypes.util.find_library("cudnn")


def _lib():
    if "lib" in _state:
        if _state["lib"] is None:
            raise CudnnUnavailable(_state.get("why", "cuDNN unavailable"))
        return _state["ffi"], _state["lib"]
    try:
        import cffi

        path = find_library()
        if path is None:
            raise CudnnUnavailable("libcudnn not found (pip install nvidia-cudnn-cu12)")
        ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        lib = ffi.dlopen(path)
        if lib.cudnnGetVersion() < 8000:
            raise CudnnUnavailable(f"cuDNN {lib.cudnnGetVersion()} is too old (8 or later is needed)")
    except Exception as e:
        _state["lib"] = None
        _state["why"] = str(e)
        raise CudnnUnavailable(str(e)) from None
    _state["ffi"], _state["lib"] = ffi, lib
    return ffi, lib


def available() -> bool:
    """Whether cuDNN can be used (a real GPU, cffi and libcudnn present, ``flambeau.backends.cudnn.enabled``,
    which ``FLAMBEAU_CUDNN=0`` in the environment starts False)."""
    if _launch.sim() or not cudnn_enabled():
        return False
    if _state.get("lib") is not None:  # (every convolution asks: loaded once, then one lookup)
        return True
    try:
        _lib()
    except CudnnUnavailable:
        return False
    return True


def _check(rc, what):
    if rc != 0:
        raise CudnnUnavailable(f"{what} failed with cuDNN status {rc}")


def _handle(ffi, lib, stream):
    """This thread's cuDNN handle on the current device, set to ``stream``."""
    dev = _streams.current_device()
    local = _tls.__dict__
    handles = local.get("handles")
    if handles is None:
        handles = local["handles"] = {}
        local["streams"] = {}
    h = handles.get(dev)
    if h is None:
        p = ffi.new("cudnnHandle_t *")
        _check(lib.cudnnCreate(p), "cudnnCreate")
        h = handles[dev] = p[0]
    sv = stream_handle(stream)
    streams = local["streams"]
    if streams.get(dev) != sv:  # set on a change only (the handle is this thread's)
        _check(lib.cudnnSetStream(h, ffi.cast("cudaStream_t", sv)), "cudnnSetStream")
        streams[dev] = sv
    return h


def tensor_descriptor(ffi, lib, made: list, dt: int | None = None, shape=None):
    """A new tensor descriptor, with its destroyer appended to ``made`` (``(destroy, descriptor)`` pairs that
    the owner destroys in reverse), described as a C-contiguous tensor of cudnnDataType_t ``dt`` and ``shape``
    where a shape is given."""
    p = ffi.new("cudnnTensorDescriptor_t *")
    _check(lib.cudnnCreateTensorDescriptor(p), "cudnnCreateTensorDescriptor")
    made.append((lib.cudnnDestroyTensorDescriptor, p[0]))
    if shape is not None:
        n = len(shape)
        strides = [math.prod(shape[i + 1:]) for i in range(n)]
        _check(lib.cudnnSetTensorNdDescriptor(p[0], dt, n, ffi.new("int[]", list(shape)), ffi.new("int[]", strides)),
               "cudnnSetTensorNdDescriptor")
    return p[0]


class _Descriptors:
    """The tensor, filter and convolution descriptors of one call (destroyed on exit)."""

    def __init__(self, ffi, lib, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, groups, math_type):
        self.ffi, self.lib, self.made = ffi, lib, []
        dt = _DATA[np.dtype(dtype)]
        self.x = self._tensor(dt, x_shape)
        self.y = self._tensor(dt, y_shape)
        p = ffi.new("cudnnFilterDescriptor_t *")
        _check(lib.cudnnCreateFilterDescriptor(p), "cudnnCreateFilterDescriptor")
        self.w = p[0]
        self.made.append((lib.cudnnDestroyFilterDescriptor, self.w))
        _check(lib.cudnnSetFilterNdDescriptor(self.w, dt, CUDNN_TENSOR_NCHW, 4, ffi.new("int[]", list(w_shape))),
               "cudnnSetFilterNdDescriptor")
        p = ffi.new("cudnnConvolutionDescriptor_t *")
        _check(lib.cudnnCreateConvolutionDescriptor(p), "cudnnCreateConvolutionDescriptor")
        self.conv = p[0]
        self.made.append((lib.cudnnDestroyConvolutionDescriptor, self.conv))
        _check(lib.cudnnSetConvolutionNdDescriptor(self.conv, 2, ffi.new("int[]", list(padding)),
                                                   ffi.new("int[]", list(stride)), ffi.new("int[]", list(dilation)),
                                                   CUDNN_CROSS_CORRELATION, dt), "cudnnSetConvolutionNdDescriptor")
        _check(lib.cudnnSetConvolutionGroupCount(self.conv, groups), "cudnnSetConvolutionGroupCount")
        _check(lib.cudnnSetConvolutionMathType(self.conv, math_type), "cudnnSetConvolutionMathType")

    def _tensor(self, dt, shape):
        return tensor_descriptor(self.ffi, self.lib, self.made, dt, shape)

    def close(self) -> None:
        for destroy, d in reversed(self.made):
            destroy(d)
        self.made = []


# Note [cuDNN workspaces]
#     The heuristics rank algorithms by their guess of speed, and the fast ones for large images (FFT and
#     Winograd tilings) take workspaces of gigabytes. With workspaces capped at 1 GiB, VGG-19's first layers
#     (64 channels of 224x224 at batch 64) ran cuDNN's ALGO_0 kernels, wgrad_alg0_engine and dgrad_engine, 64
#     ms of a 225 ms step on an H100 where torch ran Winograd and FFT kernels (tools/gpu_kernel_times.py
#     model:vgg19). As torch's v7 path does, a workspace may take what the device has free: the driver's free
#     memory and the caching allocator's unused cache, within the process's memory fraction, read when a plan
#     is made. Should the workspace not be allocatable when the call runs (the memory taken since: activations
#     grow through a forward pass), the call and every later one of that configuration run the usable
#     algorithm with the smallest workspace instead (torch falls back to the next algorithm on out-of-memory):
#     a failed allocation costs the caching allocator a flush of its cache, which is paid once.
def _workspace_limit() -> int:
    """Bytes a convolution's workspace may take (Note [cuDNN workspaces])."""
    try:
        from flambeau.cuda import get_per_process_memory_fraction, mem_get_info, memory_allocated, memory_reserved

        free, total = mem_get_info()
        allocated, reserved = memory_allocated(), memory_reserved()
        limit = int(free) + max(0, reserved - allocated)
        fraction = get_per_process_memory_fraction()
        if fraction < 1.0:
            limit = min(limit, int(fraction * total) - allocated)
        return max(0, limit)
    except Exception:  # no driver to ask (a fake device), or an allocator that keeps no statistics
        return FALLBACK_WORKSPACE


def _usable(ffi, get_algos, perf_type, limit: int) -> list:
    """``[(algo, workspace bytes)]`` of the algorithms the heuristics rate usable within ``limit`` bytes, in
    their order (their guess of speed; torch takes the first), deterministic ones where deterministic
    algorithms are asked for."""
    perf = ffi.new(f"{perf_type}[{_ALGOS}]")
    n = ffi.new("int *")
    _check(get_algos(_ALGOS, n, perf), "cudnnGet*Algorithm_v7")
    ok = [perf[i] for i in range(n[0]) if perf[i].status == 0 and perf[i].memory <= limit]
    if deterministic():  # cudnn.deterministic / use_deterministic_algorithms: our own kernels are
        ok = [p for p in ok if p.determinism == 1]
    if not ok:
        raise CudnnUnavailable("no cuDNN algorithm fits")
    return [(p.algo, int(p.memory)) for p in ok]


def _supported(dtype, *shapes) -> bool:
    """Whether cuDNN takes ``dtype`` and these shapes: none empty (its descriptors refuse zero dims; the sizes
    are non-negative, so a positive product has no zero) and none past its int32 element counts."""
    if dtype not in _DATA:
        return False
    for s in shapes:
        if not 0 < math.prod(s) <= _INT_MAX:
            return False
    return True


class _Plan:
    """The descriptors, algorithm and workspace size of one convolution configuration for the legacy calls
    (Note [cuDNN plans])."""

    graph = False

    def __init__(self, ffi, lib, h, kind, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, groups,
                 math_type):
        d = self.d = _Descriptors(ffi, lib, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, groups,
                                  math_type)
        if kind == "forward":
            perf_type, args = "fwdPerf_t", (d.x, d.w, d.conv, d.y)
            get, size_of = lib.cudnnGetConvolutionForwardAlgorithm_v7, lib.cudnnGetConvolutionForwardWorkspaceSize
        elif kind == "data":
            perf_type, args = "bwdDataPerf_t", (d.w, d.y, d.conv, d.x)
            get, size_of = (lib.cudnnGetConvolutionBackwardDataAlgorithm_v7,
                            lib.cudnnGetConvolutionBackwardDataWorkspaceSize)
        else:
            perf_type, args = "bwdFilterPerf_t", (d.x, d.y, d.conv, d.w)
            get, size_of = (lib.cudnnGetConvolutionBackwardFilterAlgorithm_v7,
                            lib.cudnnGetConvolutionBackwardFilterWorkspaceSize)
        try:
            usable = _usable(ffi, lambda k, n, p: get(h, *args, k, n, p), perf_type, _workspace_limit())
            size = ffi.new("size_t *")

            def workspace(algo):
                _check(size_of(h, *args, algo, size), "workspace")
                return algo, int(size[0])

            self.algo, self.nbytes = workspace(usable[0][0])
            # the usable algorithm of least workspace, should the first one's not be allocatable when it runs
            self.lean = workspace(min(usable, key=lambda a: a[1])[0])
        except BaseException:
            d.close()
            raise

    def close(self) -> None:
        self.d.close()


# Note [cuDNN plans]
#     Asking cuDNN's heuristics for an algorithm takes about a millisecond of host time (measured on an H100
#     host: 60 ms of a 160 ms ResNet-18 step), and descriptors cost a dozen driver calls to make and destroy.
#     Like torch's algorithm cache, a plan (descriptors, algorithm, workspace size) is kept per configuration:
#     the call, dtype, shapes, stride, padding, dilation, groups, whether deterministic algorithms are
#     required, the math type (TF32 allowed or not) and the device. Batch norm's descriptors (``_cudnn_bn``)
#     are plans of the same table, under keys of their own. At most _MAX_PLANS are kept (then all are
#     destroyed and rebuilt on demand); one lock covers looking a plan up and the cuDNN call that uses it, so
#     no thread destroys a descriptor another is using.
_PLANS: dict = {}  # key -> a plan (anything with close())
_PLANS_LOCK = threading.Lock()
_MAX_PLANS = 256


def cached_plan(key, make):
    """The plan of ``key``, made by ``make()`` the first time (Note [cuDNN plans]); the caller holds _PLANS_LOCK
    until it is done with the plan."""
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            for old in _PLANS.values():
                old.close()
            _PLANS.clear()
        plan = _PLANS[key] = make()
    return plan


_SCALARS: dict = {}  # dtype -> cuDNN's alpha = 1 and beta = 0 in its scaling type (host memory it reads)


def _scalars(ffi, dtype) -> tuple:
    """``(alpha, beta)`` pointers of value 1 and 0 for a convolution of ``dtype`` (made once: they never change)."""
    pair = _SCALARS.get(dtype)
    if pair is None:
        ctype = "double" if dtype == np.float64 else "float"
        pair = _SCALARS[dtype] = ffi.new(f"{ctype} *", 1.0), ffi.new(f"{ctype} *", 0.0)
    return pair


def _make_plan(ffi, lib, h, kind, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, groups, math_type,
               align, timer=None):
    """A graph-API plan of this configuration where the graph API takes it, else a legacy one (Note [cuDNN's
    graph API]); ``timer``: the engines are timed and the fastest taken (Note [cuDNN benchmark mode]; the legacy
    calls keep the heuristics' algorithm)."""
    if _GRAPH_API:
        try:
            return _cudnn_graph.GraphPlan(ffi, lib, h, kind, dtype, x_shape, w_shape, y_shape, stride, padding,
                                          dilation, align, _workspace_limit(), deterministic(),
                                          math_type == CUDNN_DEFAULT_MATH, timer)
        except _cudnn_graph.GraphRefused:
            pass
    return _Plan(ffi, lib, h, kind, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, groups, math_type)


def _run(kind, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, groups, a, b, out):
    """One cuDNN call: ``kind`` is ``forward`` (a = x, b = w, out = y), ``data`` (a = w, b = dy, out = dx) or
    ``filter`` (a = x, b = dy, out = dw). The shapes and geometry are tuples of ints (the plan's key)."""
    ffi, lib = _lib()
    backend = _launch.be()  # (through the modules, as tests replace them)
    h = _handle(ffi, lib, _launch.stream())
    data_ptr = backend.data_ptr
    math_type = CUDNN_DEFAULT_MATH if dtype == np.float32 and cudnn_allow_tf32() else CUDNN_FMA_MATH
    pa, pb, pout = data_ptr(a), data_ptr(b), data_ptr(out)  # (device pointers are declared uintptr_t: ints)
    align = _cudnn_graph.alignment(pa, pb, pout)
    benchmark = cudnn_benchmark()
    # (a graph plan is its handle's, so the handle is in the key: cffi pointers hash by address)
    key = (kind, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, groups, deterministic(), math_type,
           _streams.current_device(), h, align, benchmark)
    args = (ffi, lib, h, kind, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, groups, math_type)
    with _PLANS_LOCK:
        plan = cached_plan(key, lambda: _make_plan(*args, align,
                                                   _timer(ffi, lib, h, pa, pb, pout) if benchmark else None))
        plan, ws = _with_workspace(key, plan, args)
        pws = 0 if ws is None else data_ptr(ws)
        if plan.graph:
            if _cudnn_graph.execute(ffi, lib, h, plan, pa, pb, pout, pws) == 0:
                return out
            # the graph API failed where the legacy calls may not: this configuration is theirs from now on
            plan, ws = _with_workspace(key, _replace(key, plan, lambda: _Plan(*args)), args)
            pws = 0 if ws is None else data_ptr(ws)
        d, algo, nbytes = plan.d, plan.algo, plan.nbytes
        one, zero = _scalars(ffi, dtype)
        if kind == "forward":
            rc = lib.cudnnConvolutionForward(h, one, d.x, pa, d.w, pb, d.conv, algo, pws, nbytes, zero, d.y, pout)
        elif kind == "data":
            rc = lib.cudnnConvolutionBackwardData(h, one, d.w, pa, d.y, pb, d.conv, algo, pws, nbytes, zero, d.x,
                                                  pout)
        else:
            rc = lib.cudnnConvolutionBackwardFilter(h, one, d.x, pa, d.y, pb, d.conv, algo, pws, nbytes, zero, d.w,
                                                    pout)
    _check(rc, f"cudnnConvolution {kind}")
    return out


_BENCHMARK_CALLS = 5  # calls of a candidate timed, after one that warms it up (Note [cuDNN benchmark mode])


def _timer(ffi, lib, h, pa: int, pb: int, pout: int):
    """Note [cuDNN benchmark mode]: ``time(plan)``, the seconds per call of a candidate graph plan on this call's
    pointers, queued back to back on the current stream and waited for; None where its workspace cannot be
    allocated or it fails."""
    backend, stream = _launch.be(), _launch.stream()

    def time_plan(plan) -> float | None:
        try:
            ws = backend.empty((plan.nbytes,), np.uint8) if plan.nbytes else None
        except MemoryError:
            return None
        pws = 0 if ws is None else backend.data_ptr(ws)
        if _cudnn_graph.execute(ffi, lib, h, plan, pa, pb, pout, pws):  # (one call to warm it up, and the check)
            return None
        stream.synchronize()
        t0 = time.perf_counter()
        for _ in range(_BENCHMARK_CALLS):
            _cudnn_graph.execute(ffi, lib, h, plan, pa, pb, pout, pws)
        stream.synchronize()
        return (time.perf_counter() - t0) / _BENCHMARK_CALLS

    return time_plan


def _replace(key, old, make):
    """The plan ``make()`` gives, cached for ``key`` in place of ``old``, which is closed whatever happens: a
    closed plan never stays in the cache (where ``make`` raises, ``key`` has no plan). Under _PLANS_LOCK."""
    _PLANS.pop(key, None)
    try:
        new = make()
    finally:
        old.close()
    _PLANS[key] = new
    return new


def _with_workspace(key, plan, args):
    """``(plan, workspace array or None)`` for a call of ``plan`` (Note [cuDNN workspaces]): where its workspace
    cannot be allocated, the legacy calls' usable algorithm of least workspace takes this configuration from now
    on; MemoryError where that one needs no less. Under _PLANS_LOCK."""
    empty = _launch.be().empty
    try:
        return plan, (empty((plan.nbytes,), np.uint8) if plan.nbytes else None)
    except MemoryError:
        nbytes = plan.nbytes
        if plan.graph:
            plan = _replace(key, plan, lambda: _Plan(*args))
        if plan.lean[1] >= nbytes:
            raise
        plan.algo, plan.nbytes = plan.lean  # for this call and the later ones
        return plan, (empty((plan.nbytes,), np.uint8) if plan.nbytes else None)


def forward(x, w, y_shape, stride, padding, dilation, groups):
    """``y = conv(x, w)`` (x and w C-contiguous, one float dtype), or None when cuDNN does not take it."""
    if not _supported(x.dtype, x.shape, w.shape, y_shape):
        return None
    y = _launch.be().empty(y_shape, x.dtype)
    return _run("forward", x.dtype, x.shape, w.shape, y_shape, stride, padding, dilation, groups, x, w, y)


def backward_data(dy, w, x_shape, stride, padding, dilation, groups):
    """The input gradient ``dx`` of ``x_shape`` (the transposed convolution of ``dy``), or None."""
    if not _supported(dy.dtype, dy.shape, w.shape, x_shape):
        return None
    dx = _launch.be().empty(x_shape, dy.dtype)
    return _run("data", dy.dtype, x_shape, w.shape, dy.shape, stride, padding, dilation, groups, w, dy, dx)


def backward_filter(dy, x, w_shape, stride, padding, dilation, groups):
    """The weight gradient ``dw`` of ``w_shape``, or None."""
    if not _supported(dy.dtype, dy.shape, x.shape, w_shape):
        return None
    dw = _launch.be().empty(w_shape, dy.dtype)
    return _run("filter", dy.dtype, x.shape, w_shape, dy.shape, stride, padding, dilation, groups, x, dy, dw)
