"""Host time of CUDA operators without a GPU: flambeau's whole CUDA path, up to the driver call.

A fake driver stands in for the device (streams, allocations, ``cuLaunchKernel``: nothing runs, no
kernel is compiled), so what is timed and profiled is the Python an operator runs on the host before
its launch: the front, the launcher, allocation, views, argument packing. On a GPU that time is the
floor of a small operator (tools/gpu_smoke.py measures the real thing). Run from the repository root:

    python tools/host_overhead.py                  # per-call microseconds of a few operators
    python tools/host_overhead.py --profile        # and cProfile of x + 1
    python tools/host_overhead.py --model resnet18 # host time of training steps of benchmarks/train.py
                                                   # models (add --profile for cProfile of them,
                                                   # --sort cumtime to order it so, --top N for its
                                                   # N first rows (35), --count for the
                                                   # kernel launches and library calls of one step;
                                                   # --gpu-size: their sizes of gpu.py --size gpu)
    python tools/host_overhead.py --paper resnet50 # likewise Table 1's models at the paper's sizes
                                                   # (benchmarks/paper/models.py)
    python tools/host_overhead.py --ffi            # a launch's driver call alone, through cffi and ctypes
                                                   # (a C stub of cuLaunchKernel's prototype: needs a compiler)
    ... --caching-allocator                        # allocations through flambeau-cuda-alloc's caching allocator
                                                   # (over a simulated device), not a counter

Copies to and from the fake device move nothing (a read gives zeros). cuBLAS and cuDNN are fake
libraries whose every call returns success at once, so matrix products and convolutions take the host
path they take on a GPU (``--no-libraries``: without them, the numba kernels' paths).
"""

from __future__ import annotations

import collections
import cProfile
import functools
import io
import itertools
import pathlib
import pstats
import sys
import threading
import time
import traceback

import numpy as np


def fake_device(libraries: bool = True, caching_allocator: bool = False):
    """The fake device installed in this process; returns flambeau. ``caching_allocator``: allocations go through
    flambeau-cuda-alloc's caching allocator over a simulated device (its real host path), not a counter."""
    import flambeau as fl
    from flambeau._backends import backend
    from flambeau._kernels.cuda import _direct
    from flambeau.cuda import _streams

    class Stream:
        handle = 0  # (cuda.bindings' CUstream converts with int() as this does)

        def synchronize(self):
            pass

    class Driver:
        _is_simulator = False

        def stream(self):
            return Stream()

        default_stream = stream

        def select_device(self, i):
            pass

        def synchronize(self):
            pass

    class Allocator:
        def __init__(self):
            self.next = itertools.count(1 << 20, 1 << 12)

        def malloc(self, size, stream):
            return next(self.next)

        def free(self, address):
            pass

        def record_stream(self, address, stream):
            pass

        def empty_cache(self):
            pass

        def memory_allocated(self):
            return 0

        memory_reserved = memory_allocated

    _streams._set_driver(Driver())
    fl.cuda._available[:] = [True]
    fl.cuda.device_count = lambda: 1
    if caching_allocator:
        from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice

        class Device(SimulatedDevice):  # every fake stream is the simulated device's default one
            def stream_key(self, stream):
                return 0

        fl.cuda.set_allocator(CachingAllocator(Device(capacity=1 << 40)), 0)
    else:
        fl.cuda.set_allocator(Allocator(), 0)
    be = backend("cuda")
    be._context = lambda index: None

    def make_plan(self, key):  # (as the real one: arguments the direct path does not take get no plan)
        argtypes = None if None in key else tuple(_direct.numba_type(k) for k in key)
        plan = self._plans[key] = None if argtypes is None else _direct.Plan(1, argtypes, "fake")
        return plan

    _direct.Kernel._make_plan = make_plan
    _direct._DRIVER[:] = [(lambda *args: 0, None)]
    _direct._ARRAY_CLASSES.add(be._DevArray)
    be.from_numpy = lambda arr, device=None: be.empty(np.asarray(arr).shape, np.asarray(arr).dtype, device)
    be.to_numpy = lambda arr: np.zeros(arr.shape, arr.dtype)
    be.copy_ = lambda dst, src: None

    class Flag(be._DevArray):  # the device error flag (a mapped array on a GPU): never set here
        def __getitem__(self, i):
            return 0

    from flambeau.cuda import _sync

    flag = be.empty((4,), np.int64)
    flag.__class__ = Flag  # (a class of its own, as a GPU's mapped array: the kernels' launchers register it)
    _sync._flags[0] = flag
    if libraries:
        _fake_libraries()
    return fl


_ROOT = pathlib.Path(__file__).resolve().parent.parent  # the repository
_CALLS: collections.Counter = collections.Counter()  # what --count counts: kernel and library calls by name


class _FakeLibrary:
    """A cffi library whose every function returns 0 (success) at once; cuDNN's algorithm queries report
    one usable algorithm needing no workspace, its graph API's heuristics one engine configuration with the
    numerical notes of ``ENGINE_NOTES`` and no workspace, and ``cudnnBackendSetAttribute`` keeps a variant
    pack's ids and pointers in ``PACKS`` (``[(name, values)]``) where it is a list (None: not kept, as in timed
    steps)."""

    ENGINE_NOTES: list = []
    PACKS: list | None = None

    def __getattr__(self, name):  # made once per name, as a cffi library's functions are looked up once
        fn = self.__dict__[name] = self._function(name)
        return fn

    def _function(self, name):
        if name == "cudnnBackendGetAttribute":
            return self._get_attribute
        if name == "cudnnBackendSetAttribute":
            return self._set_attribute
        if name.startswith(("cublasGemm", "cublasSgemm", "cublasDgemm", "cudnnConvolution", "cudnnBatchNorm",
                            "cudnnRNN", "cudnnBackendExecute")):
            def call(*args):
                _CALLS[name] += 1
                return 0
            return call
        if name == "cudnnGetVersion":
            return lambda: 90000
        if name.startswith("cudnnGetConvolution") and name.endswith("Algorithm_v7"):
            def pick(*args):
                count, perf = args[-2], args[-1]
                count[0] = 1
                perf[0].algo, perf[0].status, perf[0].memory, perf[0].determinism = 0, 0, 0, 1
                return 0
            return pick
        return lambda *args: 0

    def _get_attribute(self, descriptor, name, attr_type, requested, count, array):
        from flambeau._kernels.cuda import _cudnn_graph as graph

        values = {graph.HEUR_RESULTS: [None], graph.ENGINECFG_ENGINE: [None], graph.PLAN_WORKSPACE_SIZE: [0],
                  graph.ENGINE_NUMERICAL_NOTE: self.ENGINE_NOTES}.get(name, [])
        count[0] = len(values)
        for i, v in enumerate(values[:requested]):
            if v is not None:  # (descriptors asked for stay as they were made)
                array[i] = v
        return 0

    def _set_attribute(self, descriptor, name, attr_type, n, values):
        if self.PACKS is not None and name in _PACK_ATTRIBUTES:
            self.PACKS.append((name, [int(values[i]) for i in range(n)]))
        return 0


_PACK_ATTRIBUTES: set = set()  # a variant pack's ids and pointers (cuDNN's attribute names, set on installing)


def _fake_libraries() -> None:
    """cuBLAS and cuDNN as :class:`_FakeLibrary` behind their real cffi declarations."""
    import cffi

    from flambeau._kernels.cuda import _cublas, _cudnn, _cudnn_graph

    _PACK_ATTRIBUTES.update((_cudnn_graph.PACK_UIDS, _cudnn_graph.PACK_POINTERS))

    for module in (_cublas, _cudnn):
        ffi = cffi.FFI()
        ffi.cdef(module._CDEF)
        module._state["ffi"], module._state["lib"] = ffi, _FakeLibrary()


def per_call_us(fn, calls=3000):
    for _ in range(50):
        fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def train_step(fl, name: str, gpu_size: bool | None = None):
    """A training step of model ``name`` of benchmarks/train.py on the fake device, at its size of ``gpu.py --size
    gpu`` where ``gpu_size`` (default: whether the command line says ``--gpu-size``)."""
    sys.path.insert(0, str(_ROOT / "benchmarks"))
    import train

    if gpu_size is None:
        gpu_size = "--gpu-size" in sys.argv
    spec = (train.GPU_MODELS if gpu_size else train.MODELS)[name]
    model = spec.build(fl).to("cuda")
    x, y = spec.make_batch(np.random.default_rng(0))
    optimizer = getattr(fl.optim, spec.optimizer)(model.parameters(), **spec.optimizer_args)
    return train.train_step(fl, spec, model, optimizer, fl.from_numpy(x).to("cuda"), fl.from_numpy(y).to("cuda"))


def paper_step(fl, name: str, size: str = "paper"):
    """A training step of Table 1's model ``name`` (benchmarks/paper/models.py) at ``size`` on the fake device:
    the host path of the paper's sizes (the fake device allocates nothing, so any size fits)."""
    sys.path.insert(0, str(_ROOT / "benchmarks" / "paper"))
    import models

    spec = models.MODELS[name]
    module = spec.builder(fl, **spec.sizes[size].kwargs).to("cuda")
    if spec.kind == "image":  # the paper's batch and image size, without making the host arrays
        s = spec.sizes[size]
        inputs = (fl.empty(s.batch, 3, s.image, s.image, device="cuda"),)
        targets = fl.zeros(s.batch, dtype=fl.int64, device="cuda")
    else:
        arrays, labels = spec.make_batch(size, np.random.default_rng(0))
        inputs, targets = tuple(fl.from_numpy(a).to("cuda") for a in arrays), fl.from_numpy(labels).to("cuda")
    step = models.make_step(fl, spec, module)
    return lambda: step(inputs, targets)


def model_steps(name: str, step, profile: bool) -> None:
    """Host time per training ``step`` on the fake device: the least CPU time of this thread over 15 steps
    (the machine's other load only adds to a step's time)."""
    for _ in range(3):
        step()
    times = []
    for _ in range(15):
        t0 = time.thread_time()
        step()
        times.append(time.thread_time() - t0)
    print(f"{name}: {min(times) * 1e3:.2f} ms of host time per step (least of 15)")
    if "--count" in sys.argv:
        count_launches(step)
    if profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(3):
            step()
        pr.disable()
        s = io.StringIO()
        order = sys.argv[sys.argv.index("--sort") + 1] if "--sort" in sys.argv else "tottime"
        top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 35
        pstats.Stats(pr, stream=s).strip_dirs().sort_stats(order).print_stats(top)
        print(s.getvalue())


def count_launches(step) -> None:
    """Print the kernel launches and cuBLAS/cuDNN calls of one step, by name (the device's per-launch cost
    is paid once for each: ~7 µs of driver time per launch on an H100 host), and the launches by kernel and
    the operator (front or derivative) that made them: where launches could be fused."""
    from flambeau._kernels.cuda import _direct

    launch = _direct.Kernel.launch
    by_operator: collections.Counter = collections.Counter()

    def counted(self, config, plan, args):
        name = getattr(self.dispatcher, "__name__", "?")
        _CALLS[name] += 1
        by_operator[name, _operator_of(traceback.extract_stack(limit=40))] += 1
        return launch(self, config, plan, args)

    _direct.Kernel.launch = counted
    _CALLS.clear()
    try:
        step()
    finally:
        _direct.Kernel.launch = launch
    library = sum(n for k, n in _CALLS.items() if k.startswith(("cublas", "cudnn")))
    print(f"{sum(_CALLS.values()) - library} kernel launches and {library} cuBLAS/cuDNN calls per step:")
    for name, n in _CALLS.most_common():
        print(f"  {n:5d}  {name}")
    print("kernel launches by kernel and operator:")
    for (name, operator), n in by_operator.most_common():
        print(f"  {n:5d}  {name:24s} {operator}")


def _operator_of(stack) -> str:
    """The innermost operator front (``_ops``) or derivative (``_formulas*``) among the frames of ``stack``."""
    for frame in reversed(stack):
        if "/_ops/" in frame.filename or "/_formulas" in frame.filename:
            return f"{pathlib.Path(frame.filename).stem}.{frame.name}"
    return "?"


def ffi_call_us() -> None:
    """Time the driver call of a direct launch (``_direct._driver()``'s ``cuLaunchKernel``) through cffi and through
    ctypes, against a C stub of its prototype that returns at once: what the fake device leaves out of a launch."""
    import ctypes
    import subprocess
    import sysconfig
    import tempfile

    from flambeau._kernels.cuda import _direct

    with tempfile.TemporaryDirectory() as tmp:
        src, lib_path = pathlib.Path(tmp, "stub.c"), str(pathlib.Path(tmp, "libstub.so"))
        src.write_text("int cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, "
                       "unsigned g, unsigned h, void *s, void **p, void **x) { return 0; }\n")
        cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
        try:
            subprocess.run([cc, "-O2", "-shared", "-fPIC", str(src), "-o", lib_path], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"--ffi needs a C compiler ({cc}): {e}")
            return
        ffi = _direct._ffi()
        if ffi is None:
            raise SystemExit("--ffi needs cffi")
        via_cffi = ffi.dlopen(lib_path).cuLaunchKernel
        via_ctypes = ctypes.CDLL(lib_path).cuLaunchKernel
        via_ctypes.restype = ctypes.c_int
        via_ctypes.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3

        def extra_of_a_plan():  # the ``extra`` argument of a 64-byte parameter buffer, as launches pass it
            plan = _direct.Plan.__new__(_direct.Plan)
            plan.nbytes, plan._local = 64, threading.local()
            return plan.slot()[1]

        extra = extra_of_a_plan()
        _direct._FFI[:] = [None]  # a ctypes slot for the ctypes call
        extra_c = extra_of_a_plan()
        _direct._FFI[:] = [ffi]
        for name, fn, x in (("cffi", via_cffi, extra), ("ctypes", via_ctypes, extra_c)):
            call = functools.partial(fn, 0x7F00DEADBEEF, 100, 1, 1, 256, 1, 1, 0, 0x7F0012345678, 0, x)
            best = min(per_call_us(call, 100000) for _ in range(5))
            print(f"cuLaunchKernel through {name:6s} {best:5.2f} us")


def main():
    if "--ffi" in sys.argv:
        ffi_call_us()
        return
    fl = fake_device(libraries="--no-libraries" not in sys.argv, caching_allocator="--caching-allocator" in sys.argv)
    for flag, make in (("--model", train_step), ("--paper", paper_step)):
        if flag in sys.argv:
            name = sys.argv[sys.argv.index(flag) + 1]
            model_steps(name, make(fl, name), "--profile" in sys.argv)
            return
    x = fl.empty(8, device="cuda")
    w = fl.empty(64, 64, device="cuda")
    cases = {"x + 1": lambda: x + 1, "x * x": lambda: x * x, "x.add_(1)": lambda: x.add_(1),
             "x.relu()": lambda: x.relu(), "x.sum()": lambda: x.sum(),
             "fl.empty(8)": lambda: fl.empty(8, device="cuda"), "w.t() + 1": lambda: w.t() + 1}
    xc = fl.ones(8)
    for name, fn in cases.items():
        print(f"{name:12s} {per_call_us(fn):7.1f} us")
    print(f"{'cpu x + 1':12s} {per_call_us(lambda: xc + 1):7.1f} us")
    if "--profile" in sys.argv:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(3000):
            x + 1
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).strip_dirs().sort_stats("tottime").print_stats(30)
        print(s.getvalue())


if __name__ == "__main__":
    main()
