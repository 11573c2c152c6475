"""Where a real GPU training step's host time goes: each native call the step makes, timed by name.

Run on a lent GPU (``tools/gpu_session.sh``, stage ``calls``), from the repository root:

    python tools/gpu_calls.py resnet18 gpt         # per step: wall time (plain, then with the timers), and
                                                   # the time and number of calls of every native function
                                                   # it called: cuLaunchKernel, each cuDNN and cuBLAS
                                                   # function, each CUDA driver call numba made
    ... --gpu-size                                 # the models at their sizes of ``gpu.py --size gpu``
    ... --fake                                     # on the fake device of tools/host_overhead.py (no GPU)

A step's wall time less its native calls' time is its Python (and the allocator's C core): what
``tools/host_overhead.py --model`` measures with a fake device. Where the native calls' sum is large, the
driver or a library is the bottleneck; where a synchronising call (``cuCtxSynchronize``, ``cuStreamSynchronize``,
``cuMemcpyDtoH``) is long inside the step, the host waited for the device.
"""

from __future__ import annotations

import collections
import pathlib
import statistics
import sys
import time

_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT / "tools"))

_TIMES: collections.Counter = collections.Counter()  # seconds in each native function, by name
_CALLS: collections.Counter = collections.Counter()  # its calls


def _timed(name: str, fn):
    """``fn`` with its calls counted and timed under ``name`` (marked ``timed``: never wrapped twice)."""
    clock = time.perf_counter

    def call(*args):
        t0 = clock()
        try:
            return fn(*args)
        finally:
            _TIMES[name] += clock() - t0
            _CALLS[name] += 1
    call.timed = True
    return call


class _TimedLibrary:
    """A cffi library whose functions are timed under ``prefix``'s name (made once per function)."""

    def __init__(self, lib, prefix: str):
        self._lib, self._prefix = lib, prefix

    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        if callable(fn):
            fn = _timed(f"{self._prefix}{name}", fn)
        self.__dict__[name] = fn
        return fn


def install_timers() -> None:
    """Time ``cuLaunchKernel`` of the direct launches, cuDNN's and cuBLAS's functions, and the CUDA driver calls
    numba has looked up so far (a warmed-up step's are all of them)."""
    from flambeau._kernels.cuda import _cublas, _cudnn, _direct

    launch, name = _direct._driver()
    if not hasattr(launch, "timed"):  # (a second call times what the first did not: nothing twice)
        _direct._DRIVER[0] = (_timed("cuLaunchKernel (direct)", launch), name)
    for module, prefix in ((_cudnn, "cudnn: "), (_cublas, "cublas: ")):
        if module._state.get("lib") is not None and not isinstance(module._state["lib"], _TimedLibrary):
            module._state["lib"] = _TimedLibrary(module._state["lib"], prefix)
    try:
        from numba.cuda.cudadrv.driver import driver
    except ImportError:
        return
    for attr, fn in list(vars(driver).items()):
        if attr.startswith("cu") and callable(fn) and not hasattr(fn, "timed"):
            setattr(driver, attr, _timed(f"driver: {attr}", fn))


def _wall(step, synchronize, steps: int, cpu: list | None = None) -> float:
    """Median seconds of ``step`` followed by a synchronize; ``cpu`` (a list) gets the calling thread's median CPU
    seconds of the same steps: where it is well below the wall time, the thread waited (for the device, or for a
    core) rather than ran."""
    walls, cpus = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        synchronize()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.thread_time() - c0)
    if cpu is not None:
        cpu.append(statistics.median(cpus))
    return statistics.median(walls)


def report(name: str, step, synchronize, steps: int = 20) -> None:
    """Print ``step``'s wall time per step without and with the timers, then each native function's µs and calls
    per step (those of the synchronize that ends each step among them)."""
    for _ in range(5):
        step()
    synchronize()
    cpu: list = []
    plain = _wall(step, synchronize, steps, cpu)
    install_timers()
    _wall(step, synchronize, 2)  # (functions first looked up now get timed too)
    install_timers()
    _TIMES.clear()
    _CALLS.clear()
    t0 = time.perf_counter()
    in_steps = 0.0
    for _ in range(steps):
        s0 = time.perf_counter()
        step()
        in_steps += time.perf_counter() - s0
        synchronize()
    timed = (time.perf_counter() - t0) / steps
    native = sum(_TIMES.values()) / steps
    print(f"\n=== {name}: wall {plain * 1e3:.2f} ms per step (the calling thread's CPU time {cpu[0] * 1e3:.2f} ms); "
          f"with the timers {timed * 1e3:.2f} ms, "
          f"{in_steps / steps * 1e3:.2f} ms of it before the synchronize that ends a step (its calls are in the "
          f"table); native calls {native * 1e3:.2f} ms, the rest (Python, the allocator) "
          f"{(timed - native) * 1e3:.2f} ms")
    for fn, seconds in _TIMES.most_common():
        calls = _CALLS[fn] / steps
        print(f"  {seconds / steps * 1e6:9.1f} us  {calls:7.1f} calls  {seconds / _CALLS[fn] * 1e6:7.2f} us/call  {fn}")


def main() -> None:
    import os

    names = [a for a in sys.argv[1:] if not a.startswith("--")] or ["resnet18", "gpt"]
    # (benchmarks/gpu.py pins every library to 2 threads; these runs say whether they were, to compare with it)
    print("threads: " + ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in
                                  ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")) +
          f"; {os.cpu_count()} CPUs")
    gpu_size = "--gpu-size" in sys.argv
    import host_overhead

    fl = host_overhead.fake_device() if "--fake" in sys.argv else __import__("flambeau")
    for name in names:
        step = host_overhead.train_step(fl, name, gpu_size)
        report(name, step, fl.cuda.synchronize)


if __name__ == "__main__":
    main()
