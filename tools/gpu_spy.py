"""Where a real GPU training step's time goes on the host: wall time against CPU time, per thread.

Run on a lent GPU (``tools/gpu_session.sh``, stage ``spy``), from the repository root:

    python tools/gpu_spy.py resnet18 gpt           # per step: wall, process CPU, calling thread's CPU;
                                                   # flambeau's and torch's
    python tools/gpu_spy.py resnet18 --loop 8      # only steps, for 8 s: the target of a sampling profiler,
                                                   # ``py-spy record --format raw -- python tools/gpu_spy.py ...``
    ... --gpu-size                                 # the models at their sizes of ``gpu.py --size gpu``
    ... --paper                                    # Table 1's models at the paper's sizes (mobilenet_v2, ...)
    ... --fake                                     # on the fake device of tools/host_overhead.py (no GPU)
    python tools/gpu_spy.py --floors               # host µs per call of a step's library calls (a classifier's
                                                   # and a GPT's linear, a convolution, batch norm), both libraries

A step whose wall time is its calling thread's CPU time is bound by the host's Python; wall time well above
the CPU time of every thread is time spent waiting (the device, a lock, a thread hand-over).
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time

import numpy as np

_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT / "benchmarks"))
sys.path.insert(0, str(_ROOT / "tools"))


def _step(lib, name: str, gpu_size: bool):
    """A training step of ``name`` on the GPU: a model of benchmarks/train.py (at its size of ``gpu.py --size
    gpu`` where ``gpu_size``) or, with ``--paper``, of Table 1 (benchmarks/paper/models.py) at the paper's size."""
    if lib.__name__ == "torch":
        lib.manual_seed(0)
    if "--paper" in sys.argv:
        sys.path.insert(0, str(_ROOT / "benchmarks" / "paper"))
        import models

        spec = models.MODELS[name]
        module = spec.builder(lib, **spec.sizes["paper"].kwargs).to("cuda")
        arrays, labels = spec.make_batch("paper", np.random.default_rng(0))
        inputs = tuple(lib.from_numpy(a).to("cuda") for a in arrays)
        targets, step = lib.from_numpy(labels).to("cuda"), models.make_step(lib, spec, module)
        return lambda: step(inputs, targets)
    import host_overhead

    return host_overhead.train_step(lib, name, gpu_size)  # (any library with torch's names)


def _times(step, synchronize, steps: int = 20) -> str:
    for _ in range(5):
        step()
    synchronize()
    walls, cpus, threads = [], [], []
    for _ in range(steps):
        w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
        step()
        synchronize()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        threads.append(time.thread_time() - t0)
    ms = [statistics.median(v) * 1e3 for v in (walls, cpus, threads)]
    return f"wall {ms[0]:7.2f} ms   process CPU {ms[1]:7.2f} ms   calling thread CPU {ms[2]:7.2f} ms"


def _floors(lib, synchronize) -> list:
    """Host microseconds per call of the library calls a step is made of, each with the shapes of a model of
    ``benchmarks/gpu.py`` (ResNet-18's classifier, a GPT block's projection, a 3x3 convolution forward and
    backward, batch norm): ``[(what, µs)]``. The calls are queued back to back, then waited for once."""
    F = lib.nn.functional

    def t(*shape, grad=False):
        x = lib.ones(*shape, device="cuda")
        return x.requires_grad_() if grad else x

    x_fc, w_fc, b_fc = t(32, 256), t(10, 256), t(10)
    x_gpt, w_gpt, b_gpt = t(2048, 128), t(384, 128), t(384)
    x_conv, w_conv = t(32, 64, 16, 16, grad=True), t(64, 64, 3, 3, grad=True)
    y_conv = F.conv2d(x_conv, w_conv, padding=1)
    g_conv = t(*y_conv.shape)
    x_bn, bn_w, bn_b = t(32, 64, 16, 16), t(64), t(64)
    calls = [
        ("linear 32x256 -> 10 (ResNet-18's classifier)", lambda: F.linear(x_fc, w_fc, b_fc)),
        ("linear 2048x128 -> 384 (a GPT block's qkv)", lambda: F.linear(x_gpt, w_gpt, b_gpt)),
        ("conv2d 3x3, 32x64x16x16, forward", lambda: F.conv2d(x_conv.detach(), w_conv.detach(), padding=1)),
        ("conv2d 3x3, 32x64x16x16, input and weight gradients",
         lambda: lib.autograd.grad(y_conv, (x_conv, w_conv), g_conv, retain_graph=True)),
        ("batch_norm 32x64x16x16, training", lambda: F.batch_norm(x_bn, None, None, bn_w, bn_b, True)),
    ]
    rows = []
    for what, call in calls:
        for _ in range(20):
            call()
        synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            call()
        rows.append((what, (time.perf_counter() - t0) / 200 * 1e6))
        synchronize()
    return rows


def main() -> None:
    names = [a for a in sys.argv[1:] if not a.startswith("--") and not a.replace(".", "").isdigit()]
    gpu_size = "--gpu-size" in sys.argv
    if "--fake" in sys.argv:
        import host_overhead

        fl = host_overhead.fake_device()
    else:
        import flambeau as fl

    if "--floors" in sys.argv:
        libraries = [("flambeau", fl, fl.cuda.synchronize)]
        if "--fake" not in sys.argv:
            import torch

            libraries.append(("torch", torch, torch.cuda.synchronize))
        results = [(name, dict(_floors(lib, sync))) for name, lib, sync in libraries]
        for what in results[0][1]:
            print(f"{what:55s} " + "   ".join(f"{name} {r[what]:7.1f} us" for name, r in results), flush=True)
        return
    if "--loop" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--loop") + 1])
        step = _step(fl, names[0], gpu_size)
        end, count = time.perf_counter() + seconds, 0
        while time.perf_counter() < end:
            step()
            count += 1
        fl.cuda.synchronize()
        print(f"{names[0]}: {count} steps in {seconds:.0f} s")
        return
    for name in names:
        step = _step(fl, name, gpu_size)
        print(f"{name:10s} flambeau   {_times(step, fl.cuda.synchronize)}", flush=True)
        if "--fake" not in sys.argv:
            import torch

            print(f"{name:10s} torch      {_times(_step(torch, name, gpu_size), torch.cuda.synchronize)}",
                  flush=True)


if __name__ == "__main__":
    main()
