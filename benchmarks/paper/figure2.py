"""Figure 2 of the PyTorch paper for flambeau: the first training iterations of ResNet-50 with and without caching.

Per-iteration time over the first N iterations (default 10) with flambeau-cuda-alloc's caching allocator
and with caching off, and the raw ``cudaMalloc`` / ``cudaFree`` calls of each iteration. The paper's
point: the first iteration pays for the device allocations, later ones reuse the cached blocks.

- ``--device cuda`` (a GPU): real training of ResNet-50 (batch 32, 224x224 by default) in two
  subprocesses, one with the caching allocator and one with ``FLAMBEAU_CUDA_ALLOCATOR=native``
  (flambeau's plain ``NativeAllocator``: one ``cudaMalloc`` per tensor, nothing cached); each
  iteration ends with ``flambeau.cuda.synchronize()``; counts from ``flambeau.cuda.memory_stats()``
  (``num_device_alloc``, and ``num_device_free`` where the allocator records it). Iteration 1 also
  includes the compilation of the CUDA kernels on first use.
- on the CPU (default): no GPU, so the ResNet-50 allocation trace of ``benchmarks/alloc.py`` (batch
  32, 224x224) is replayed on flambeau-cuda-alloc's simulated device, through the caching allocator
  and through the raw simulated ``cudaMalloc``/``cudaFree``, with kernels queued asynchronously; the
  times are the simulated device's modelled clock (cudaMalloc 50 us; cudaFree 20 us after a
  device-wide synchronisation; kernels 4 us + bytes at 500 GB/s), not measurements.

    python benchmarks/paper/figure2.py                 # simulated device (modelled costs)
    python benchmarks/paper/figure2.py --device cuda   # a GPU

Writes docs/paper/figure2.png, figure2.md and figure2.rst.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))

import _harness  # noqa: E402, I001 - first: pins every library to 2 threads before they are imported
from figure1 import write_fragment  # noqa: E402 - benchmarks/paper/figure1.py

ROOT = BENCH.parent
OUT = ROOT / "docs" / "paper"
CONFIGS = ("caching", "native")
LABELS = {"caching": "caching allocator", "native": "caching off (cudaMalloc/cudaFree per tensor)"}
COLOURS = {"caching": "#4c72b0", "native": "#c44e52"}


# --- the CPU: the allocation trace on the simulated device ---------------------------------------------------
def simulated(batch: int, iters: int) -> tuple[dict, dict]:
    """Per-iteration modelled seconds, raw mallocs, raw frees and device-wide syncs of both configurations."""
    import alloc  # benchmarks/alloc.py: the trace and its replays

    from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice
    from flambeau.cuda_alloc._config import AllocatorConfig

    steps, weight_bytes = alloc.build_trace(batch, iters)
    capacity = 80 << 30
    results = {}
    for config in CONFIGS:
        device = SimulatedDevice(capacity=capacity)
        allocator = CachingAllocator(device, AllocatorConfig()) if config == "caching" else None
        rows = {"seconds": [], "mallocs": [], "frees": [], "syncs": []}
        for events in steps:  # one step at a time: its buffers are its own (weights and momentum are never freed)
            before = (device.clock, device.num_mallocs, device.num_frees, device.num_syncs)
            if allocator is not None:
                alloc.replay_cached([events], device, allocator, with_kernels=True)
            else:
                alloc.replay_raw([events], device)
            after = (device.clock, device.num_mallocs, device.num_frees, device.num_syncs)
            for key, b, a in zip(rows, before, after):
                rows[key].append(a - b)
        results[config] = rows
    kernels = [sum(alloc.KERNEL_MIN + ev.size / alloc.KERNEL_BANDWIDTH for ev in events if ev.op == "kernel")
               for events in steps]
    probe = SimulatedDevice(capacity=capacity)
    meta = {"allocs_per_step": sum(1 for ev in steps[1] if ev.op == "alloc") if len(steps) > 1 else 0,
            "weight_mib": weight_bytes / (1 << 20), "gpu_busy": kernels, "malloc_us": probe.malloc_cost * 1e6,
            "free_us": probe.free_cost * 1e6, "launch_us": alloc.KERNEL_LAUNCH * 1e6,
            "kernel_min_us": alloc.KERNEL_MIN * 1e6, "bandwidth_gbs": alloc.KERNEL_BANDWIDTH / 1e9}
    return results, meta


# --- a GPU: real training, one subprocess per allocator ------------------------------------------------------
def worker(batch: int, image: int, width: float, iters: int) -> None:
    """Train ResNet-50 on cuda for ``iters`` iterations; print one JSON line of per-iteration results."""
    import numpy as np
    from models import resnet50

    import flambeau as fl
    import flambeau.nn  # noqa: F401
    import flambeau.optim  # noqa: F401

    cuda = fl.cuda
    rng = np.random.default_rng(0)
    model = resnet50(fl, width=width).to("cuda")
    optimizer = fl.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = fl.from_numpy(rng.standard_normal((batch, 3, image, image), dtype=np.float32))
    y = fl.from_numpy(rng.integers(0, 1000, batch))
    cuda.synchronize()
    rows = {"seconds": [], "mallocs": [], "frees": []}
    for _ in range(iters):
        before = cuda.memory_stats()
        start = time.perf_counter()
        xb, yb = x.to("cuda"), y.to("cuda")  # the batch copied to the device, as a data loader's would be
        loss = fl.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss.item()
        cuda.synchronize()
        rows["seconds"].append(time.perf_counter() - start)
        after = cuda.memory_stats()
        rows["mallocs"].append(after.get("num_device_alloc", 0) - before.get("num_device_alloc", 0))
        rows["frees"].append(after["num_device_free"] - before["num_device_free"] if "num_device_free" in after
                             else None)
        del xb, yb, loss
    allocator = type(cuda.get_allocator()).__name__ if hasattr(cuda, "get_allocator") else "?"
    print("FIGURE2 " + json.dumps({"rows": rows, "allocator": allocator, "device": _device_name()}))


def _device_name() -> str:
    import flambeau as fl

    try:
        return str(fl.cuda.get_device_name(0))
    except Exception as e:  # noqa: BLE001 - the name is only for the caption
        return f"CUDA device ({type(e).__name__})"


def on_gpu(batch: int, image: int, width: float, iters: int) -> tuple[dict, dict]:
    from flambeau.cuda._allocator import ENV_VAR

    results, meta = {}, {}
    for config in CONFIGS:
        env = dict(os.environ, **{ENV_VAR: config})
        cmd = [sys.executable, __file__, "--worker", "--batch", str(batch), "--image", str(image),
               "--width", str(width), "--iters", str(iters)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        line = next((s for s in done.stdout.splitlines() if s.startswith("FIGURE2 ")), None)
        if done.returncode != 0 or line is None:
            sys.exit(f"figure2.py: the {config} run ({ENV_VAR}={config}) failed:\n{done.stdout}\n{done.stderr}")
        data = json.loads(line[len("FIGURE2 "):])
        results[config] = data["rows"]
        meta[config] = data["allocator"]
        meta["device"] = data["device"]
    return results, meta


# --- the figure ---------------------------------------------------------------------------------------------
def draw(path: pathlib.Path, results: dict, *, title: str, time_label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results["caching"]["seconds"])
    iters = list(range(1, n + 1))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13.5, 7.2), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    bar = 0.38
    for k, config in enumerate(CONFIGS):
        rows = results[config]
        xs = [i + (k - 0.5) * bar for i in iters]
        ms = [s * 1e3 for s in rows["seconds"]]
        top.bar(xs, ms, bar, color=COLOURS[config], label=LABELS[config])
        for x, t, m, f in zip(xs, ms, rows["mallocs"], rows["frees"]):
            top.annotate(f"{m}\n{'-' if f is None else f}", (x, t), ha="center", va="bottom", fontsize=6.5,
                         xytext=(0, 2), textcoords="offset points")
        short = LABELS[config].split(" (")[0]
        bottom.bar(xs, rows["mallocs"], bar, color=COLOURS[config], label=f"cudaMalloc, {short}")
        frees = [0 if f is None else f for f in rows["frees"]]
        bottom.bar(xs, [-f for f in frees], bar, color=COLOURS[config], alpha=0.45,
                   label=f"cudaFree, {short}")
        for x, m, f in zip(xs, rows["mallocs"], rows["frees"]):
            if m == 0:
                bottom.annotate("0", (x, 0), ha="center", va="bottom", fontsize=6.5, xytext=(0, 1),
                                textcoords="offset points")
            if not f:
                bottom.annotate("0" if f == 0 else "n/a", (x, 0), ha="center", va="top", fontsize=6.5,
                                xytext=(0, -1), textcoords="offset points")
    top.set_ylabel(time_label)
    top.set_title(title, fontsize=10)
    top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1),
               title="numbers: cudaMalloc / cudaFree\ncalls in the iteration", title_fontsize=7.5)
    top.margins(y=0.15)
    bottom.set_yscale("symlog", linthresh=1)
    bottom.axhline(0, color="black", lw=0.6)
    bottom.set_ylabel("raw calls per iteration\n(cudaMalloc up, cudaFree down)")
    bottom.set_xlabel("training iteration")
    bottom.set_xticks(iters)
    bottom.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _table(results: dict) -> list[str]:
    n = len(results["caching"]["seconds"])
    out = ["| iteration | time, caching | cudaMalloc / cudaFree, caching | time, caching off | "
           "cudaMalloc / cudaFree, caching off |", "|---:|---:|---:|---:|---:|"]
    for i in range(n):
        cells = [str(i + 1)]
        for config in CONFIGS:
            rows = results[config]
            f = rows["frees"][i]
            cells += [f"{rows['seconds'][i] * 1e3:.1f} ms", f"{rows['mallocs'][i]} / {'n/a' if f is None else f}"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cpu: the allocation trace on the simulated device; cuda: real training on a GPU")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image", type=int, default=224, help="image side (cuda only; the trace is 224x224)")
    parser.add_argument("--width", type=float, default=1.0, help="channel multiplier (cuda only; 1 is ResNet-50)")
    parser.add_argument("--quick", action="store_true", help="5 iterations (cuda: batch 8, 64x64 images)")
    parser.add_argument("--out", default=str(OUT), help="output folder (default docs/paper)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.iters = min(args.iters, 5)
        if args.device == "cuda":
            args.batch, args.image = min(args.batch, 8), min(args.image, 64)
    if args.worker:
        worker(args.batch, args.image, args.width, args.iters)
        return
    out = pathlib.Path(args.out)
    began = time.perf_counter()
    cuda = args.device == "cuda"
    if cuda:
        import flambeau as fl

        if not fl.cuda.is_available():
            sys.exit("figure2.py --device cuda: flambeau.cuda.is_available() is False on this machine")
        results, meta = on_gpu(args.batch, args.image, args.width, args.iters)
        size = f"batch {args.batch}, {args.image}x{args.image}"
        size += "" if args.width == 1 else f", width x{args.width:g}"
        title = f"flambeau: first {args.iters} iterations of ResNet-50 training on {meta['device']} ({size})"
        time_label = "iteration time (ms, measured)"
    else:
        results, meta = simulated(args.batch, args.iters)
        size = f"batch {args.batch}, 224x224"
        title = (f"flambeau-cuda-alloc: first {args.iters} iterations of a ResNet-50 allocation trace ({size}) "
                 "on the simulated device (modelled costs)")
        time_label = "iteration time (ms, modelled)"
    draw(out / "figure2.png", results, title=title, time_label=time_label)
    total = time.perf_counter() - began

    cached, raw = results["caching"], results["native"]
    later = cached["mallocs"][1:]
    speedup = sum(raw["seconds"][1:]) / max(sum(cached["seconds"][1:]), 1e-12)
    summary = (f"Iteration 1: {cached['seconds'][0] * 1e3:.1f} ms with the caching allocator "
               f"({cached['mallocs'][0]} cudaMalloc), {raw['seconds'][0] * 1e3:.1f} ms with caching off "
               f"({raw['mallocs'][0]} cudaMalloc). Iterations 2-{args.iters}: cudaMalloc per iteration {_span(later)} "
               f"with the cache against {_span(raw['mallocs'][1:])} without; "
               f"{sum(cached['seconds'][1:]) / max(len(later), 1) * 1e3:.1f} ms against "
               f"{sum(raw['seconds'][1:]) / max(len(later), 1) * 1e3:.1f} ms per iteration ({speedup:.2f}x).")
    print(summary)
    for line in _table(results):
        print(line)
    info = _harness.machine_info()
    command = ("python benchmarks/paper/figure2.py " + " ".join(sys.argv[1:])).strip()
    if cuda:
        how = (f"**GPU run**: real training on {meta['device']} ({size}, SGD with momentum), each iteration timed "
               f"to a `flambeau.cuda.synchronize()`; the caching run used `{meta['caching']}`, the run with caching "
               f"off `{meta['native']}` (`FLAMBEAU_CUDA_ALLOCATOR=native`, a subprocess of its own). Counts from "
               "`flambeau.cuda.memory_stats()`; `n/a`: the allocator does not count its frees. Iteration 1 also "
               "includes the compilation of each CUDA kernel on first use.")
    else:
        how = (f"**Simulated device (modelled costs), no GPU.** The ResNet-50 training-step allocation trace of "
               f"`benchmarks/alloc.py` ({size}, {meta['allocs_per_step']} allocations per step, "
               f"{meta['weight_mib']:.0f} MiB of weights) replayed on flambeau-cuda-alloc's `SimulatedDevice`, "
               f"through `CachingAllocator` and through the raw simulated cudaMalloc/cudaFree, kernels queued "
               f"asynchronously. Times are the device's modelled clock, not measurements: cudaMalloc "
               f"{meta['malloc_us']:.0f} us, cudaFree {meta['free_us']:.0f} us after a device-wide "
               f"synchronisation, kernel launch {meta['launch_us']:.0f} us, kernels {meta['kernel_min_us']:.0f} us "
               f"+ bytes at {meta['bandwidth_gbs']:.0f} GB/s ({meta['gpu_busy'][1] * 1e3:.1f} ms of kernels per "
               "step). Run with `--device cuda` on a GPU for measured times.")
    machine = f"{info['cpu']}; Python {info['python']}, flambeau {info['flambeau']}"
    md = ["# Figure 2: the first iterations of ResNet-50 with and without the caching allocator", "",
          "![figure 2](figure2.png)", "", how, "", summary, "", *_table(results), "",
          f"Machine: {machine}.  ", f"Command: `{command}` ({total:.0f} s).", ""]
    (out / "figure2.md").write_text("\n".join(md), encoding="utf-8")
    rst = [how, "", summary, "", ".. code-block:: none", "",
           *["   " + line for line in _table(results)], "", f"Machine: {machine}.", "",
           f"Command: ``{command}`` ({total:.0f} s).", ""]
    write_fragment(out / "figure2.rst", "\n".join(rst))
    print(f"wrote {out / 'figure2.png'}, figure2.md, figure2.rst; script {total:.1f} s")


def _span(values: list) -> str:
    return f"{values[0]} each" if min(values) == max(values) else f"{min(values)} to {max(values)}"




if __name__ == "__main__":
    main()
