"""Where a CUDA operator's host time goes: cProfile of small ops and of a training step, plus the floors.

Run on a lent GPU (part of ``tools/gpu_session.sh``, stage ``profile``). Prints:
  1. per-call microseconds of pieces of the launch path (numba's dispatcher on a trivial kernel, a
     raw ``cuLaunchKernel`` of the same kernel, its arguments passed as ``extra`` against ``kernelParams``,
     building a device array, allocating, the stream), and of a cuBLAS GEMM through ``cublasSgemm_v2``
     against ``cublasSgemmStridedBatched`` with one product;
  2. cProfile of ``x + 1`` on an 8-element tensor, by own time and by cumulative time;
  3. cProfile of training steps (benchmarks/train.py), backward included, by own and cumulative time;
  4. flambeau's profiler with CUDA activity over ResNet-18 steps: which operators take the device's time.
Arguments pick sections (``floors``, ``small``, ``cprofile:MODEL``, ``devtime:MODEL``). Large operators
flambeau against torch: benchmarks/gpu_ops.py.
"""

from __future__ import annotations

import cProfile
import ctypes
import functools
import io
import pstats
import struct
import sys
import time

import numpy as np

sys.path.insert(0, "benchmarks")


def queued_us(fn, calls: int, sync, warmup: int = 20) -> tuple:
    """``(host µs, µs in all)`` per call of ``fn`` called ``calls`` times back to back after ``warmup`` calls and a
    ``sync``: to the last call's return, and to the ``sync`` after it."""
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    sync()
    return (t1 - t0) / calls * 1e6, (time.perf_counter() - t0) / calls * 1e6


def per_call_us(fn, calls=2000, sync=None):
    """µs per call of ``fn``, to the ``sync`` after the last call where one is given."""
    return queued_us(fn, calls, sync or (lambda: None))[1]


def show(profile, sort, limit):
    s = io.StringIO()
    pstats.Stats(profile, stream=s).strip_dirs().sort_stats(sort).print_stats(limit)
    print(s.getvalue())


def floors():
    from numba import cuda

    import flambeau as fl
    from flambeau._backends import backend
    from flambeau.cuda._streams import current_stream, stream_handle

    be = backend("cuda")

    @cuda.jit
    def k(out, n, v):
        i = cuda.grid(1)
        if i < n:
            out[i] = v + i

    s = current_stream().numba
    a = be.empty((64,), np.float32)
    k[1, 64, s](a, 64, np.float32(2.0))
    s.synchronize()
    print("numba launch ok:", a.copy_to_host()[:4])
    sig = next(iter(k.overloads))
    kern = k.overloads[sig]
    cufunc = kern._codelibrary.get_cufunc()
    print("cufunc", type(cufunc).__name__, "handle", type(cufunc.handle), int(cufunc.handle), "stream",
          stream_handle(s))
    libcuda = ctypes.CDLL("libcuda.so.1")
    launch = libcuda.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    fmt = struct.Struct("@" + "q" * 7 + "qf")
    b = be.empty((64,), np.float32)
    ptr = be.data_ptr(b)
    size = ctypes.c_size_t(fmt.size)
    func, sh = int(cufunc.handle), stream_handle(s)

    def raw():
        buf = fmt.pack(0, 0, 64, 4, ptr, 64, 4, 64, 5.0)
        extra = (ctypes.c_void_p * 5)(1, ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value,
                                     2, ctypes.addressof(size), 0)
        rc = launch(func, 1, 1, 1, 64, 1, 1, 0, sh, None, extra)
        if rc:
            raise RuntimeError(f"cuLaunchKernel: {rc}")

    raw()
    s.synchronize()
    got = b.copy_to_host()
    print("raw cuLaunchKernel ok:", np.array_equal(got, 5.0 + np.arange(64, dtype=np.float32)), got[:4])
    numba_us = per_call_us(lambda: k[1, 64, s](a, 64, np.float32(2.0)), sync=s.synchronize)
    print(f"numba dispatcher launch: {numba_us:.1f} us")
    print(f"raw cuLaunchKernel:      {per_call_us(raw, sync=s.synchronize):.1f} us")
    # the driver's own cost of the two ways to hand it the arguments, each built once: flambeau's direct launches
    # pass one packed buffer (``extra``), the CUDA runtime (torch) an array of pointers to each (``kernelParams``)
    buf = fmt.pack(0, 0, 64, 4, ptr, 64, 4, 64, 5.0)
    extra = (ctypes.c_void_p * 5)(1, ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value, 2,
                                  ctypes.addressof(size), 0)
    values = [ctypes.c_int64(v) for v in (0, 0, 64, 4, ptr, 64, 4, 64)] + [ctypes.c_float(5.0)]
    params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    by_extra = lambda: launch(func, 1, 1, 1, 64, 1, 1, 0, sh, None, extra)  # noqa: E731
    by_params = lambda: launch(func, 1, 1, 1, 64, 1, 1, 0, sh, params, None)  # noqa: E731
    assert by_params() == 0 and by_extra() == 0
    for _ in range(3):  # (alternating: the host is shared)
        print(f"cuLaunchKernel, built once: extra {per_call_us(by_extra, sync=s.synchronize):.1f} us, "
              f"kernelParams {per_call_us(by_params, sync=s.synchronize):.1f} us")
    print(f"be.empty((8,)) float32:  {per_call_us(lambda: be.empty((8,), np.float32)):.1f} us")
    print(f"be.flat_view(2-d):       {per_call_us(lambda: be.flat_view(a.reshape(8, 8)[:, :4])):.1f} us")
    print(f"current_stream().numba:  {per_call_us(lambda: current_stream().numba):.1f} us")
    x = fl.ones(8, device="cuda")
    print(f"fl x + 1:                {per_call_us(lambda: x + 1, sync=fl.cuda.synchronize):.1f} us")
    print(f"fl x.add_(1):            {per_call_us(lambda: x.add_(1), sync=fl.cuda.synchronize):.1f} us")
    print(f"fl.empty(8):             {per_call_us(lambda: fl.empty(8, device='cuda')):.1f} us")
    xc = fl.ones(8)
    print(f"fl cpu x + 1:            {per_call_us(lambda: xc + 1):.1f} us")
    gemm_calls()


def gemm_calls(calls: int = 200) -> None:
    """Host µs per call of one float32 GEMM through ``cublasSgemm_v2`` against ``cublasSgemmStridedBatched`` with one
    product (flambeau's cuBLAS calls take the latter for every product), at a GPT block's and ResNet-18's classifier's
    shapes (and an MLP layer's, where the device's time shows: the two calls may pick different kernels): ``calls``
    queued back to back, timed before the synchronize (host time) and after it (all)."""
    import cffi

    import flambeau as fl
    from flambeau._kernels.cuda import _cublas
    from flambeau.cuda import current_stream
    from flambeau.cuda._streams import stream_handle

    ffi = cffi.FFI()
    ffi.cdef("""typedef void *cublasHandle_t;
        int cublasCreate_v2(cublasHandle_t *h);
        int cublasSetStream_v2(cublasHandle_t h, void *s);
        int cublasSgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha,
            uintptr_t A, int lda, uintptr_t B, int ldb, const float *beta, uintptr_t C, int ldc);
        int cublasSgemmStridedBatched(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha,
            uintptr_t A, int lda, long long sA, uintptr_t B, int ldb, long long sB, const float *beta, uintptr_t C,
            int ldc, long long sC, int count);""")
    lib = ffi.dlopen(_cublas.find_library())
    h = ffi.new("cublasHandle_t *")
    assert lib.cublasCreate_v2(h) == 0
    h = h[0]
    assert lib.cublasSetStream_v2(h, ffi.cast("void *", stream_handle(current_stream().numba))) == 0
    one, zero = ffi.new("float *", 1.0), ffi.new("float *", 0.0)
    for what, (M, N, K) in (("GPT qkv 2048x128 @ 128x384", (2048, 384, 128)),
                            ("classifier 32x256 @ 256x10", (32, 10, 256)),
                            ("MLP 1024x4096 @ 4096x4096", (1024, 4096, 4096))):
        a, b, c = (fl.ones(*shape, device="cuda") for shape in ((M, K), (K, N), (M, N)))
        pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
        plain = functools.partial(lib.cublasSgemm_v2, h, 0, 0, N, M, K, one, pb, N, pa, K, zero, pc, N)
        batched = functools.partial(lib.cublasSgemmStridedBatched, h, 0, 0, N, M, K, one, pb, N, 0, pa, K, 0, zero,
                                    pc, N, 0, 1)
        for _ in range(3):  # (alternating: the host is shared)
            row = [*queued_us(plain, calls, fl.cuda.synchronize), *queued_us(batched, calls, fl.cuda.synchronize)]
            print(f"cuBLAS {what}: cublasSgemm_v2 {row[0]:.1f} us of host time, {row[1]:.1f} us in all; "
                  f"StridedBatched(1) {row[2]:.1f}, {row[3]:.1f} us")


def profile_small_op():
    import flambeau as fl

    x = fl.ones(8, device="cuda")
    for _ in range(50):
        x + 1
    fl.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(3000):
        x + 1
    fl.cuda.synchronize()
    pr.disable()
    print("=== x + 1, 3000 calls, by own time")
    show(pr, "tottime", 30)
    print("=== x + 1, by cumulative time")
    show(pr, "cumulative", 40)


def profile_model(name, steps=10):
    """cProfile of ``steps`` training steps, backward included (it runs in the calling thread: Note [Backward
    in the calling thread])."""
    import torch
    import train

    import flambeau as fl

    _, _, fl_step, _ = train.build_pair(torch, name, device="cuda")
    for _ in range(2):
        fl_step()
    fl.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        fl_step()
    fl.cuda.synchronize()
    pr.disable()
    print(f"=== {name}, {steps} steps, by own time")
    show(pr, "tottime", 45)
    print(f"=== {name}, by cumulative time")
    show(pr, "cumulative", 60)


def device_time(name, steps=3):
    """Where the GPU spends a training step of ``name``: flambeau.profiler's table by CUDA time, then
    torch.profiler's for torch's same model on the same card, so kernel families can be compared."""
    import torch
    import train

    import flambeau as fl
    from flambeau.profiler import ProfilerActivity, profile

    _, _, fl_step, torch_step = train.build_pair(torch, name, device="cuda")
    for _ in range(2):
        fl_step()
        torch_step()
    fl.cuda.synchronize()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fl_step()
        fl.cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps * 1e3
    print(f"=== {name}, {steps} steps, flambeau.profiler by CUDA time ({wall:.1f} ms per profiled step)")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30))
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as tprof:
        for _ in range(steps):
            torch_step()
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps * 1e3
    print(f"=== {name}, {steps} steps, torch.profiler by CUDA time ({wall:.1f} ms per profiled step)")
    try:  # torch names the column device_time_total since 2.4
        print(tprof.key_averages().table(sort_by="device_time_total", row_limit=30))
    except Exception:
        print(tprof.key_averages().table(sort_by="cuda_time_total", row_limit=30))


SECTIONS = {"floors": floors, "small": profile_small_op}

if __name__ == "__main__":
    # Arguments pick sections: floors, small, cprofile:MODEL (cProfile of its steps), devtime:MODEL (the
    # profilers' CUDA-time tables); none runs the default set.
    names = sys.argv[1:] or ["floors", "small", "cprofile:mlp", "cprofile:resnet18", "devtime:resnet18"]
    for section in names:
        kind, _, model = section.partition(":")
        fn = {"cprofile": lambda m=model: profile_model(m, 3), "devtime": lambda m=model: device_time(m)}.get(
            kind, SECTIONS.get(section))
        try:
            fn()
        except Exception:
            import traceback

            traceback.print_exc()
