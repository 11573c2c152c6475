"""Caching allocator benchmark: a ResNet-50 training step's allocation trace, replayed.

Runs on the simulated device of flambeau-cuda-alloc (no GPU needed)::

    python benchmarks/alloc.py [--batch 32] [--iters 10]   # rewrites its section of RESULTS.md
    python benchmarks/alloc.py --quick                       # fewer repeats, RESULTS.md untouched

It reports, for 10 training iterations:

1. raw device mallocs in the first iteration and in each later one (zero after warm-up,
   as in Figure 2 of the PyTorch paper), and peak reserved over peak allocated memory;
2. the allocator's host overhead per allocate/free pair (CPU time of this process, so
   that other processes on a busy machine do not count) with its C core and with its
   pure-Python fallback, measured in turns and reported as medians, beside the cost of a
   pair of empty Python function calls on the same machine for scale;
3. the modelled step time of the same replay through the simulated raw malloc/free
   (each free synchronises the device) against the cache, with kernels queued
   asynchronously on the device.

The trace follows torchvision's ResNet-50 on 224x224 float32 images: every convolution,
batch norm, ReLU (out of place), residual add and pooling allocates its output in the forward
pass and keeps what autograd saves for backward; convolutions take a temporary workspace;
the backward pass allocates each input gradient and weight gradient, frees the output
gradient and the saved tensors as soon as it has used them; SGD with momentum updates the
weights in place (momentum buffers are made in the first step), and gradients are freed
by ``zero_grad(set_to_none=True)``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import os
import platform
import statistics
import time
from collections.abc import Iterator

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported

from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice
from flambeau.cuda_alloc._allocator import PURE_PYTHON_VAR
from flambeau.cuda_alloc._config import AllocatorConfig

F32 = 4
MiB = 1 << 20


# -- the trace ----------------------------------------------------------------------------


@dataclasses.dataclass
class Event:
    """``op`` is "alloc" (with ``size`` bytes), "free", or "kernel" (``size`` bytes touched)."""

    op: str
    id: int
    size: int = 0


@dataclasses.dataclass
class TapeEntry:
    """One forward operator as autograd records it."""

    inputs: list[int]  # tensors that need a gradient
    output: int
    saved: list[int]  # tensors kept alive for backward
    weight_grads: list[int]  # sizes in bytes
    workspace: int  # bytes of scratch in backward
    touched: int  # bytes the backward kernels move


class Tracer:
    """Records allocations and frees of numbered buffers, with reference counts standing
    for Python references (forward variables, tensors saved by autograd)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.sizes: dict[int, int] = {}
        self.refs: dict[int, int] = {}
        self.tape: list[TapeEntry] = []
        self.no_grad: set[int] = set()  # tensors that need no gradient (the input batch)
        self._next = 0

    def new(self, size: int) -> int:
        self._next += 1
        self.events.append(Event("alloc", self._next, size))
        self.sizes[self._next] = size
        self.refs[self._next] = 1
        return self._next

    def ref(self, buffer: int) -> None:
        self.refs[buffer] += 1

    def unref(self, buffer: int) -> None:
        self.refs[buffer] -= 1
        if self.refs[buffer] == 0:
            del self.refs[buffer]
            self.events.append(Event("free", buffer))

    def kernel(self, touched: int) -> None:
        self.events.append(Event("kernel", 0, touched))

    def op(self, inputs: list[int], out_size: int, *, saved: list[int] = (), weights: list[int] = (),
           workspace: int = 0, extra_outputs: list[int] = ()) -> int:
        """Run a forward operator: scratch, output, extra saved outputs (sizes), tape entry."""
        if workspace:
            scratch = self.new(workspace)
        out = self.new(out_size)
        touched = out_size + sum(self.sizes[i] for i in inputs)
        self.kernel(touched)
        if workspace:
            self.unref(scratch)
        extras = [self.new(size) for size in extra_outputs]  # saved statistics, indices
        for buffer in saved:
            self.ref(buffer)
        self.tape.append(TapeEntry(
            [i for i in inputs if i not in self.no_grad], out, list(saved) + extras,
            list(weights), workspace, 2 * touched,
        ))
        return out

    def backward(self, loss: int) -> list[int]:
        """Run the tape in reverse from ``loss``; return the weight-gradient buffers."""
        grads = {loss: self.new(self.sizes[loss])}
        weight_grads = []
        for entry in reversed(self.tape):
            grad_out = grads.pop(entry.output, None)
            if grad_out is None:
                continue
            scratch = self.new(entry.workspace) if entry.workspace else None
            weight_grads += [self.new(size) for size in entry.weight_grads]
            for tensor in entry.inputs:
                grad_in = self.new(self.sizes[tensor])
                if tensor in grads:  # fan-out (a residual): accumulate into the first
                    self.kernel(2 * self.sizes[tensor])
                    self.unref(grad_in)
                else:
                    grads[tensor] = grad_in
            self.kernel(entry.touched)
            if scratch:
                self.unref(scratch)
            self.unref(grad_out)
            for buffer in entry.saved:
                self.unref(buffer)
        for grad in grads.values():
            self.unref(grad)
        self.tape.clear()
        return weight_grads


def conv(tr: Tracer, x: int, batch: int, cin: int, cout: int, k: int, stride: int, h: int) -> tuple[int, int]:
    """Convolution without bias; returns (output, output height)."""
    hout = (h + 2 * (k // 2) - k) // stride + 1
    # cuDNN-style scratch: part of an im2col buffer for 3x3 and 7x7, none for 1x1.
    workspace = 0 if k == 1 else min(batch * cin * k * k * hout * hout * F32 // 4, 256 * MiB)
    out = tr.op([x], batch * cout * hout * hout * F32, saved=[x], weights=[cout * cin * k * k * F32],
                workspace=workspace)
    return out, hout


def batch_norm(tr: Tracer, x: int, channels: int) -> int:
    # Saves its input, the batch mean and the inverse standard deviation.
    return tr.op([x], tr.sizes[x], saved=[x], weights=[channels * F32] * 2,
                 extra_outputs=[channels * F32] * 2)


def relu(tr: Tracer, x: int) -> int:
    out = tr.op([x], tr.sizes[x])
    tr.ref(out)  # relu's backward needs its output
    tr.tape[-1].saved.append(out)
    return out


def then(tr: Tracer, old: int, new: int) -> int:
    """Drop the forward variable ``old`` in favour of ``new``."""
    tr.unref(old)
    return new


def bottleneck(tr: Tracer, x: int, batch: int, cin: int, width: int, stride: int, h: int) -> tuple[int, int]:
    cout = width * 4
    y, _ = conv(tr, x, batch, cin, width, 1, 1, h)
    y = then(tr, y, batch_norm(tr, y, width))
    y = then(tr, y, relu(tr, y))
    y2, hout = conv(tr, y, batch, width, width, 3, stride, h)
    y = then(tr, y, y2)
    y = then(tr, y, batch_norm(tr, y, width))
    y = then(tr, y, relu(tr, y))
    y2, _ = conv(tr, y, batch, width, cout, 1, 1, hout)
    y = then(tr, y, y2)
    y = then(tr, y, batch_norm(tr, y, cout))
    if stride != 1 or cin != cout:
        identity, _ = conv(tr, x, batch, cin, cout, 1, stride, h)
        identity = then(tr, identity, batch_norm(tr, identity, cout))
    else:
        identity = x
        tr.ref(x)
    s = tr.op([y, identity], tr.sizes[y])
    tr.unref(identity)
    y = then(tr, y, s)
    y = then(tr, y, relu(tr, y))
    return y, hout


def resnet50_step(tr: Tracer, batch: int, momentum: dict[int, int]) -> None:
    """Append one training step (forward, backward, SGD with momentum) to ``tr``."""
    x = tr.new(batch * 3 * 224 * 224 * F32)  # the batch copied to the device
    tr.no_grad = {x}
    target = tr.new(batch * 8)
    y, h = conv(tr, x, batch, 3, 64, 7, 2, 224)
    tr.unref(x)
    y = then(tr, y, batch_norm(tr, y, 64))
    y = then(tr, y, relu(tr, y))
    pooled = tr.op([y], tr.sizes[y] // 4, saved=[y], extra_outputs=[tr.sizes[y] // 4 * 2])  # + indices
    y, h, cin = then(tr, y, pooled), h // 2, 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            y2, h = bottleneck(tr, y, batch, cin, width, stride if b == 0 else 1, h)
            y, cin = then(tr, y, y2), width * 4
    y = then(tr, y, tr.op([y], batch * 2048 * F32, saved=[]))  # global average pool
    y = then(tr, y, tr.op([y], batch * 1000 * F32, saved=[y], weights=[2048 * 1000 * F32, 1000 * F32]))
    loss = tr.op([y], F32, saved=[y, target], extra_outputs=[batch * 1000 * F32])  # softmax saved
    tr.unref(y)
    tr.unref(target)
    weight_grads = tr.backward(loss)
    tr.unref(loss)
    # SGD with momentum updates the weights in place; buffers are made in the first step.
    for i, grad in enumerate(weight_grads):
        if i not in momentum:
            momentum[i] = tr.new(tr.sizes[grad])
        tr.kernel(3 * tr.sizes[grad])
    for grad in weight_grads:  # zero_grad(set_to_none=True)
        tr.unref(grad)


def build_trace(batch: int, iters: int) -> tuple[list[list[Event]], int]:
    """Events of ``iters`` training steps (one list per step) and the bytes of weights."""
    tr = Tracer()
    momentum: dict[int, int] = {}
    steps = []
    for _ in range(iters):
        tr.events = []
        resnet50_step(tr, batch, momentum)
        steps.append(tr.events)
    # The weights live for the whole run; they have the sizes of the momentum buffers.
    weight_bytes = sum(tr.sizes[b] for b in momentum.values())
    weights = [Event("alloc", -(i + 1), tr.sizes[b]) for i, b in enumerate(momentum.values())]
    steps[0] = weights + steps[0]
    assert not [b for b in tr.refs if b not in momentum.values()], "the trace leaks buffers"
    return steps, weight_bytes


# -- replays ------------------------------------------------------------------------------

KERNEL_BANDWIDTH = 500e9  # bytes/s a modelled kernel moves
KERNEL_LAUNCH = 5e-6  # host seconds to queue a kernel
KERNEL_MIN = 4e-6  # device seconds of the smallest kernel


def replay_cached(steps, device, alloc, with_kernels: bool):
    """Replay through the caching allocator; return per-step raw mallocs and host seconds."""
    stream = device.default_stream()
    malloc, free = alloc.malloc, alloc.free
    mallocs, seconds = [], []
    live: dict[int, int] = {}
    for events in steps:
        before = device.num_mallocs
        start = time.process_time()
        for ev in events:
            op = ev.op
            if op == "alloc":
                live[ev.id] = malloc(ev.size, stream)
            elif op == "free":
                free(live.pop(ev.id))
            elif with_kernels:
                device.advance(KERNEL_LAUNCH)
                device.launch(stream, KERNEL_MIN + ev.size / KERNEL_BANDWIDTH)
        if with_kernels:
            device.synchronize()  # loss.item() at the end of the step
        seconds.append(time.process_time() - start)
        mallocs.append(device.num_mallocs - before)
    return mallocs, seconds


def replay_raw(steps, device):
    """Replay through the simulated cudaMalloc/cudaFree directly, with kernels."""
    stream = device.default_stream()
    live: dict[int, int] = {}
    for events in steps:
        for ev in events:
            if ev.op == "alloc":
                live[ev.id] = device.malloc(max(ev.size, 1))
            elif ev.op == "free":
                device.free(live.pop(ev.id))
            else:
                device.advance(KERNEL_LAUNCH)
                device.launch(stream, KERNEL_MIN + ev.size / KERNEL_BANDWIDTH)
        device.synchronize()


def empty_loop(steps) -> float:
    """Seconds the replay loop itself takes with a dict standing in for the allocator."""
    live: dict[int, int] = {}
    start = time.process_time()
    for events in steps:
        for ev in events:
            op = ev.op
            if op == "alloc":
                live[ev.id] = ev.size
            elif op == "free":
                live.pop(ev.id)
    return time.process_time() - start


def _empty_calls(n: int) -> float:
    def nothing(*args: object) -> None:
        return None

    start = time.process_time()
    for _ in range(n):
        nothing(n)
        nothing(n)
    return time.process_time() - start


@contextlib.contextmanager
def _core(name: str) -> Iterator[None]:
    """Allocators made inside use the ``"c"`` or the ``"python"`` core."""
    saved = os.environ.get(PURE_PYTHON_VAR)
    os.environ[PURE_PYTHON_VAR] = "1" if name == "python" else "0"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[PURE_PYTHON_VAR]
        else:
            os.environ[PURE_PYTHON_VAR] = saved


def _warm_replay_seconds(steps, capacity: int, core: str) -> float:
    """CPU seconds of iterations 2+ on a fresh allocator whose cache iteration 1 warmed."""
    dev = SimulatedDevice(capacity=capacity)
    with _core(core):
        al = CachingAllocator(dev, AllocatorConfig())
    replay_cached(steps[:1], dev, al, with_kernels=False)
    _, secs = replay_cached(steps[1:], dev, al, with_kernels=False)
    return sum(secs)


class _Section(_harness.Report):
    """This script's section of RESULTS.md: a table of metrics instead of op ratios."""

    def __init__(self, body: str) -> None:  # no torch: nothing here is compared with it
        self.name = "alloc"
        self.title = "CUDA caching allocator (benchmarks/alloc.py)"
        self.rows, self.notes = [], []
        self.body = body

    def markdown(self, command: str) -> str:
        try:
            info = _harness.machine_info()
            machine = f"{info['cpu']}; Python {info['python']}"
        except Exception:  # noqa: BLE001 - the rest of flambeau may be absent or mid-change
            machine = f"{_harness._cpu_model()}; Python {platform.python_version()}"
        return (f"## {self.title}\n\n`{command}` on {datetime.date.today().isoformat()}, simulated device "
                f"(no GPU);  \n{machine}.\n\n{self.body}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=9, help="timing runs of each core (medians are kept)")
    parser.add_argument("--quick", action="store_true", help="3 timing runs; RESULTS.md untouched")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats

    steps, weight_bytes = build_trace(args.batch, args.iters)
    allocs = sum(1 for events in steps for ev in events if ev.op == "alloc")
    capacity = 80 << 30

    # 1. Cache behaviour and memory efficiency.
    device = SimulatedDevice(capacity=capacity)
    alloc = CachingAllocator(device, AllocatorConfig())
    core = alloc._core.name
    mallocs, _ = replay_cached(steps, device, alloc, with_kernels=False)
    peak_alloc, peak_res = alloc.max_memory_allocated(), alloc.max_memory_reserved()
    stats = alloc.memory_stats()

    # 2. Host overhead per allocate/free pair: each core, the bare replay loop and two empty
    # calls in turns, so that the machine's drifts hit all alike; medians; GC off as in a
    # tight loop.
    cores = ["c", "python"] if core == "c" else ["python"]
    times: dict[str, list[float]] = {name: [] for name in [*cores, "loop", "calls"]}
    gc.disable()
    try:
        for _ in range(repeats):
            for name in cores:
                times[name].append(_warm_replay_seconds(steps, capacity, name))
            times["loop"].append(empty_loop(steps[1:]))
            times["calls"].append(_empty_calls(100_000) / 100_000)
    finally:
        gc.enable()
    warm_pairs = sum(1 for events in steps[1:] for ev in events if ev.op == "free")
    median = {name: statistics.median(values) for name, values in times.items()}
    per_pair = {name: median[name] / warm_pairs * 1e6 for name in cores}
    loop_pair = median["loop"] / warm_pairs * 1e6
    call_pair = median["calls"] * 1e6

    # 3. Modelled step time: raw cudaMalloc/cudaFree against the cache.
    raw = SimulatedDevice(capacity=capacity)
    replay_raw(steps, raw)
    cached_dev = SimulatedDevice(capacity=capacity)
    cached = CachingAllocator(cached_dev, AllocatorConfig())
    replay_cached(steps, cached_dev, cached, with_kernels=True)

    print(f"ResNet-50 training trace, batch {args.batch}, {args.iters} iterations, "
          f"{allocs} allocations ({allocs // args.iters} per step), weights {weight_bytes / MiB:.1f} MiB")
    print()
    print(f"{'iteration':<12}{'raw mallocs':>12}")
    for i, m in enumerate(mallocs):
        print(f"{i + 1:<12}{m:>12}")
    print()
    names = {"c": "C core", "python": "Python core"}
    rows = [
        ("raw mallocs, iteration 1", f"{mallocs[0]}"),
        (f"raw mallocs, iterations 2-{args.iters}", " ".join(str(m) for m in mallocs[1:])),
        ("raw frees (cache)", f"{stats['num_device_free']}"),
        ("peak allocated", f"{peak_alloc / MiB:.1f} MiB"),
        ("peak reserved", f"{peak_res / MiB:.1f} MiB"),
        ("peak reserved / peak allocated", f"{peak_res / peak_alloc:.3f}"),
    ]
    for name in cores:
        rows.append((f"overhead per alloc/free pair, {names[name]}",
                     f"{per_pair[name]:.2f} us (median of {repeats}; {per_pair[name] - loop_pair:.2f} us "
                     f"without the replay loop; runs {', '.join(f'{t / warm_pairs * 1e6:.2f}' for t in times[name])})"))
    rows.append(("for scale: two empty Python calls", f"{call_pair:.3f} us"))
    width = max(len(r[0]) for r in rows) + 2
    print(f"{'metric':<{width}}value")
    print("-" * (width + 40))
    for name, value in rows:
        print(f"{name:<{width}}{value}")
    print()
    print(f"Modelled replay with kernels queued asynchronously (kernel: {KERNEL_MIN * 1e6:.0f} us + bytes at "
          f"{KERNEL_BANDWIDTH / 1e9:.0f} GB/s; launch {KERNEL_LAUNCH * 1e6:.0f} us; cudaMalloc "
          f"{raw.malloc_cost * 1e6:.0f} us; cudaFree {raw.free_cost * 1e6:.0f} us after a device-wide sync), "
          "per step:")
    print(f"{'':<24}{'raw malloc/free':>18}{'caching allocator':>20}")
    n = args.iters
    gpu_time = sum(KERNEL_MIN + ev.size / KERNEL_BANDWIDTH for events in steps for ev in events if ev.op == "kernel")
    table = [
        ("device mallocs", f"{raw.num_mallocs / n:.1f}", f"{cached_dev.num_mallocs / n:.1f}"),
        ("device frees", f"{raw.num_frees / n:.1f}", f"{cached_dev.num_frees / n:.1f}"),
        ("device-wide syncs", f"{raw.num_syncs / n:.1f}", f"{cached_dev.num_syncs / n:.1f}"),
        ("step time", f"{raw.clock / n * 1e3:.2f} ms", f"{cached_dev.clock / n * 1e3:.2f} ms"),
        ("GPU busy", f"{gpu_time / raw.clock * 100:.1f} %", f"{gpu_time / cached_dev.clock * 100:.1f} %"),
    ]
    for name, left, right in table:
        print(f"{name:<24}{left:>18}{right:>20}")
    speedup = raw.clock / cached_dev.clock
    print(f"{'speed-up of the step':<24}{'':>18}{speedup:>19.2f}x")

    if args.quick:
        return
    later = set(mallocs[1:])
    md = [
        f"ResNet-50 training-step trace, batch {args.batch}: {allocs // args.iters} allocations per step, "
        f"{args.iters} steps. Overheads are CPU time of the replay per allocate/free pair, medians of {repeats} runs "
        "taken in turns with each core.",
        "",
        "| metric | value |",
        "|---|---:|",
        f"| raw mallocs, step 1 | {mallocs[0]} |",
        f"| raw mallocs, steps 2–{args.iters} | "
        + (f"{later.pop()} each" if len(later) == 1 else ", ".join(map(str, mallocs[1:]))) + " |",
        f"| raw frees by the cache | {stats['num_device_free']} |",
        f"| peak allocated / peak reserved | {peak_alloc / MiB:.1f} MiB / {peak_res / MiB:.1f} MiB |",
        f"| peak reserved ÷ peak allocated | {peak_res / peak_alloc:.3f} |",
    ]
    for name in cores:
        md.append(f"| allocator overhead per allocate/free pair, {names[name]} | {per_pair[name]:.2f} µs "
                  f"({per_pair[name] - loop_pair:.2f} µs without the replay loop) |")
    md += [
        f"| for scale: two empty Python calls | {call_pair:.3f} µs |",
        "",
        f"Modelled step (kernels queued asynchronously; cudaMalloc {raw.malloc_cost * 1e6:.0f} µs; cudaFree "
        f"{raw.free_cost * 1e6:.0f} µs after a device-wide sync): raw malloc/free {raw.clock / n * 1e3:.1f} ms per "
        f"step with {raw.num_syncs / n:.0f} device-wide syncs and the GPU {gpu_time / raw.clock * 100:.1f} % busy; "
        f"the caching allocator {cached_dev.clock / n * 1e3:.1f} ms per step, {cached_dev.num_syncs / n:.0f} sync, "
        f"{gpu_time / cached_dev.clock * 100:.1f} % busy: **{speedup:.2f}x** faster.",
    ]
    md += ["", "Not measured here: the replay through real `cudaMalloc`/`cudaFree` and the numba EMM plugin under "
           "a numba workload (they need a GPU)."]
    if core != "c":
        from flambeau.cuda_alloc import _ccore

        md += ["", f"- The C core could not be built here ({_ccore.load_error}); the Python core was measured."]
    _Section("\n".join(md) + "\n").finish()


if __name__ == "__main__":
    main()
