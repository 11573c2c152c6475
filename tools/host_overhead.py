"""Host time of CUDA operators without a GPU: flambeau's whole CUDA path, up to the driver call.

A fake driver stands in for the device (streams, allocations, ``cuLaunchKernel``: nothing runs, no
kernel is compiled), so what is timed and profiled is the Python an operator runs on the host before
its launch: the front, the launcher, allocation, views, argument packing. On a GPU that time is the
floor of a small operator (tools/gpu_smoke.py measures the real thing). Run from the repository root:

    python tools/host_overhead.py            # per-call microseconds of a few operators
    python tools/host_overhead.py --profile  # and cProfile of x + 1
"""

from __future__ import annotations

import cProfile
import io
import itertools
import pstats
import sys
import time
import types


def fake_device():
    import flambeau as fl
    from flambeau._backends import backend
    from flambeau._kernels.cuda import _direct
    from flambeau.cuda import _streams

    class Stream:
        handle = types.SimpleNamespace(value=0)

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
    fl.cuda.set_allocator(Allocator(), 0)
    be = backend("cuda")
    be._context = lambda index: None

    def make_plan(self, key):
        argtypes = tuple(_direct.numba_type(k) for k in key)
        plan = self._plans[key] = _direct.Plan(1, argtypes, "fake")
        return plan

    _direct.Kernel._make_plan = make_plan
    _direct._DRIVER[:] = [(lambda *args: 0, None)]
    _direct._ARRAY_CLASSES.add(be._DevArray)
    return fl


def per_call_us(fn, calls=3000):
    for _ in range(50):
        fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    fl = fake_device()
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
