"""Which kernels a large operator runs on a GPU and how long each takes, flambeau's beside torch's.

Run on a lent GPU (``tools/gpu_session.sh``, stage ``ktimes``). ``benchmarks/gpu_ops.py`` gives each
operator's time per call; this says where that time goes on the device. CUPTI (through
``torch.profiler``) records every kernel the process launches, numba's and cuDNN's included, so both
libraries' kernels are timed by one clock. For each row of ``gpu_ops.cases``: the wall time per call, the
device time per call (the kernels' durations summed: where it is far below the wall time, the host is the
bottleneck) and the longest kernels. Then, for the 3x3 convolution of ``gpu_ops``, what cuDNN's heuristics
rank first against what ``cudnnFind*`` measures fastest (``flambeau._kernels.cuda._cudnn`` takes the
heuristics' first). Arguments: substrings of the rows to run (default all), ``--no-find``, and
``model:NAME`` (a model of benchmarks/paper/models.py at the paper's size, or ``model:train:NAME`` one of
benchmarks/train.py, ``model:train-gpu:NAME`` the same at its size of ``gpu.py --size gpu``: its training step's
kernels, both libraries', summed per kernel name over a step; the rows are then skipped unless named too; float32
convolutions without TF32 unless ``--tf32`` is given).
"""

from __future__ import annotations

import sys
import time

sys.path.insert(0, "benchmarks")

CALLS = 5  # profiled calls per row (after 3 warm-up calls)
TOP = 5  # kernels shown per row


def _short(name: str, width: int = 88) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def profile_row(fn, sync):
    """``(wall us per call, device us per call, [(kernel, us per call, launches per call)])`` of ``fn``."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        sync()
        wall = (time.perf_counter() - t0) / CALLS * 1e6
    kernels = [(e.key, e.self_device_time_total / CALLS, e.count / CALLS) for e in prof.key_averages()
               if e.device_type == DeviceType.CUDA and e.self_device_time_total > 0]
    kernels.sort(key=lambda k: -k[1])
    return wall, sum(k[1] for k in kernels), kernels


def both(f_fl, f_th, per: str, top: int) -> None:
    """Print the profile of ``f_fl`` (flambeau) and ``f_th`` (torch): times per call of each, its ``top`` kernels."""
    import torch

    import flambeau as fl

    for lib, fn, sync in (("flambeau", f_fl, fl.cuda.synchronize), ("torch", f_th, torch.cuda.synchronize)):
        wall, device, kernels = profile_row(fn, sync)
        print(f"  {lib:8s} wall {wall:9.1f}  device {device:9.1f}  kernels/{per} {sum(k[2] for k in kernels):.0f}")
        for name, us, n in kernels[:top]:
            print(f"      {us:9.1f} x{n:<4.0f} {_short(name)}")


def kernel_rows(picks) -> None:
    import torch
    from gpu_ops import cases

    import flambeau as fl

    fl.backends.cudnn.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    print(f"GPU: {fl.cuda.get_device_name()}; {CALLS} calls per row; us per call; float32, TF32 off on both sides")
    for (op, size, f_fl), (_, _, f_th) in zip(cases(fl, "cuda"), cases(torch, "cuda")):
        if picks and not any(p in op for p in picks):
            continue
        print(f"\n=== {op} [{size}]")
        both(f_fl, f_th, "call", TOP)


_FIND = """
int cudnnFindConvolutionForwardAlgorithm(void *handle, void *xDesc, void *wDesc, void *convDesc, void *yDesc,
    int requestedAlgoCount, int *returnedAlgoCount, fwdPerf_t *perfResults);
int cudnnFindConvolutionBackwardDataAlgorithm(void *handle, void *wDesc, void *dyDesc, void *convDesc,
    void *dxDesc, int requestedAlgoCount, int *returnedAlgoCount, bwdDataPerf_t *perfResults);
int cudnnFindConvolutionBackwardFilterAlgorithm(void *handle, void *xDesc, void *dyDesc, void *convDesc,
    void *dwDesc, int requestedAlgoCount, int *returnedAlgoCount, bwdFilterPerf_t *perfResults);
"""


def find_algorithms(x_shape=(32, 64, 56, 56), cout=64) -> None:
    """cuDNN's heuristic ranking against its measured one, for each of a convolution's three calls."""
    import cffi

    import flambeau as fl
    from flambeau._kernels.cuda import _cudnn

    fl.zeros(1, device="cuda")  # the context
    ffi = cffi.FFI()
    ffi.cdef(_cudnn._CDEF + _FIND)
    lib = ffi.dlopen(_cudnn.find_library())
    h = ffi.new("void **")
    _cudnn._check(lib.cudnnCreate(h), "cudnnCreate")
    w_shape, y_shape = (cout, x_shape[1], 3, 3), (x_shape[0], cout, x_shape[2], x_shape[3])
    print(f"\n=== cuDNN {lib.cudnnGetVersion()}: 3x3 convolution {x_shape} -> {y_shape}")
    maths = (("FMA (TF32 off)", _cudnn.CUDNN_FMA_MATH), ("default (TF32)", _cudnn.CUDNN_DEFAULT_MATH))
    for math_name, math_type in maths:
        d = _cudnn._Descriptors(ffi, lib, "float32", x_shape, w_shape, y_shape, (1, 1), (1, 1), (1, 1), 1, math_type)
        calls = {"forward": ("fwdPerf_t", (d.x, d.w, d.conv, d.y), lib.cudnnGetConvolutionForwardAlgorithm_v7,
                             lib.cudnnFindConvolutionForwardAlgorithm),
                 "data": ("bwdDataPerf_t", (d.w, d.y, d.conv, d.x), lib.cudnnGetConvolutionBackwardDataAlgorithm_v7,
                          lib.cudnnFindConvolutionBackwardDataAlgorithm),
                 "filter": ("bwdFilterPerf_t", (d.x, d.y, d.conv, d.w),
                            lib.cudnnGetConvolutionBackwardFilterAlgorithm_v7,
                            lib.cudnnFindConvolutionBackwardFilterAlgorithm)}
        for kind, (perf_type, descriptors, get, find) in calls.items():
            ranked = []
            for how, f in (("heuristics", get), ("measured", find)):
                perf, n = ffi.new(f"{perf_type}[8]"), ffi.new("int *")
                rc = f(h[0], *descriptors, 8, n, perf)
                ranked.append(f"{how} rc={rc}: " + ", ".join(
                    f"{p.algo}({p.time:.3f} ms, {p.memory >> 20} MiB{', det' if p.determinism == 1 else ''})"
                    for p in (perf[i] for i in range(n[0])) if p.status == 0))
            print(f"  {math_name:15s} {kind:7s} " + "\n                          ".join(ranked))
        d.close()


def model_kernels(name: str, top: int = 14) -> None:
    """The kernels of a training step of paper model ``name`` (paper size) or, as ``train:NAME``, of a model of
    benchmarks/train.py (benchmarks/gpu.py's sizes), flambeau's and torch's."""
    import torch

    import flambeau as fl

    if "--tf32" not in sys.argv:  # (--tf32: both libraries' defaults, TF32 convolutions as a training script has)
        fl.backends.cudnn.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    if name.startswith(("train:", "train-gpu:")):
        import train

        kind, model = name.split(":", 1)
        models = train.GPU_MODELS if kind == "train-gpu" else train.MODELS
        fl_module, th_module, fl_step, th_step = train.build_pair(torch, model, device="cuda", models=models)
    else:
        sys.path.insert(0, "benchmarks/paper")
        import models

        fl_module, th_module, fl_step, th_step = models.build_pair(torch, fl, name, "paper", device="cuda")
    print(f"\n=== {name}: per step, us")
    both(fl_step, th_step, "step", top)
    del fl_module, th_module


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    picks = [a for a in args if not a.startswith("model:")]
    named = [a[len("model:"):] for a in args if a.startswith("model:")]
    if picks or not named:
        kernel_rows(picks)
    for name in named:
        model_kernels(name)
    if "--no-find" not in sys.argv and not named:
        find_algorithms()


if __name__ == "__main__":
    main()
