"""What each piece of flambeau's training loop contributes: step times with each switched off in turn.

The paper credits PyTorch's speed to a few pieces (sections 5.2-5.3 and 6.1-6.2): data loading in worker
processes, pinned host memory for copies to the GPU, the caching GPU allocator and asynchronous kernel
execution. Here flambeau trains ResNet-50 and the GNMTv2-style LSTM of models.py from a DataLoader whose
dataset does per-sample CPU work, and each piece is switched off in turn:

(a) worker processes: ``num_workers=2`` (persistent) against ``0``. The image dataset decompresses (zlib)
    a uint8 image 1.25 times the training side, takes a random-resized crop with bilinear interpolation,
    flips it at random and normalises it (numpy); the text dataset builds a sentence of words,
    tokenises it (split and dictionary look-up) and pads it. The per-sample cost is measured and printed;
(b) pinned memory (GPU only): ``pin_memory=True`` and ``non_blocking`` copies against neither;
(c) the caching allocator (GPU only): ``FLAMBEAU_CUDA_ALLOCATOR=native`` (plain numba allocation, every
    block a cudaMalloc/cudaFree) in a subprocess;
(d) asynchronous execution (GPU only): ``CUDA_LAUNCH_BLOCKING=1`` (every kernel launch waits for the
    kernel) in a subprocess.

One timed call is one epoch of ``batches`` steps, synchronized at its end; the table holds the median time
per step over the rounds, and the slowdown against everything on. On a CPU the two loaders of (a) are timed
in alternating rounds in one process, with the "reduced" sizes, and (b)-(d) are rows "GPU only: not
measured here"; on a GPU (``--device cuda``, "paper" sizes) every configuration runs in a process of its
own, in alternating order over the rounds. Writes docs/paper/ablations.md.

    python benchmarks/paper/ablations.py --quick
    python benchmarks/paper/ablations.py --device cuda

Note: two worker processes can only help when a core is free for them; on a 2-core CPU the training step
itself uses both (2 threads), so (a) measures how well loading overlaps with a busy machine.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time
import zlib

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # benchmarks/ (_harness) and this folder (models, table1)

import _harness  # noqa: E402, I001 - first: pins every library to 2 threads before they are imported
import models  # noqa: E402
import numpy as np  # noqa: E402
import table1  # noqa: E402

import flambeau as fl  # noqa: E402
import flambeau.nn  # noqa: E402, F401
import flambeau.optim  # noqa: E402, F401
from flambeau.data import DataLoader, Dataset  # noqa: E402

ABLATED = ("resnet50", "gnmt")
MEAN, STD = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)


class AugmentedImages(Dataset):
    """Images decoded and augmented per sample: what an ImageNet pipeline does in its workers."""

    def __init__(self, side: int, length: int, classes: int, sources: int = 8):
        self.side, self.length, self.classes = side, length, classes
        rng = np.random.default_rng(0)
        self.source = int(side * 1.25)
        raw = (rng.integers(0, 256, (sources, self.source, self.source, 3)) * 0.3
               + np.linspace(0, 170, self.source)[:, None, None]).astype(np.uint8)  # compressible, like photos
        self.compressed = [zlib.compress(r.tobytes(), 6) for r in raw]

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        rng = np.random.default_rng(i)
        s, out = self.source, self.side
        image = np.frombuffer(zlib.decompress(self.compressed[i % len(self.compressed)]), np.uint8).reshape(s, s, 3)
        crop = int(s * np.sqrt(rng.uniform(0.35, 1.0)))  # random-resized crop: area 35-100%, then bilinear
        top, left = rng.integers(0, s - crop + 1, 2)
        pos = np.linspace(0, crop - 1, out)
        lo = np.floor(pos).astype(np.intp)
        hi, w = np.minimum(lo + 1, crop - 1), (pos - lo).astype(np.float32)
        rows = image[top + lo].astype(np.float32) * (1 - w)[:, None, None] + image[top + hi] * w[:, None, None]
        cols = left + lo
        x = rows[:, cols] * (1 - w)[None, :, None] + rows[:, left + hi] * w[None, :, None]
        if rng.random() < 0.5:
            x = x[:, ::-1]
        x = (x / 255.0 - MEAN) / STD
        return np.ascontiguousarray(x.transpose(2, 0, 1)), np.int64(rng.integers(0, self.classes))


class Sentences(Dataset):
    """Sentence pairs tokenised per sample: words to ids with a dictionary, padded to fixed lengths."""

    def __init__(self, vocab: int, lengths: tuple[int, int], length: int):
        self.lengths, self.length = lengths, length
        self.words = [f"w{k:x}" for k in range(vocab - 1)]
        self.ids = {w: k + 1 for k, w in enumerate(self.words)}  # 0: padding

    def __len__(self) -> int:
        return self.length

    def _encode(self, rng, n: int) -> np.ndarray:
        sentence = " ".join(self.words[k] for k in rng.integers(0, len(self.words), int(n * rng.uniform(0.7, 1.1))))
        ids = [self.ids[w] for w in sentence.split()][:n]
        return np.array(ids + [0] * (n - len(ids)), np.int64)

    def __getitem__(self, i: int):
        rng = np.random.default_rng(i)
        src, tgt = self._encode(rng, self.lengths[0]), self._encode(rng, self.lengths[1] + 1)
        return src, tgt[:-1], tgt[1:]


def make_dataset(name: str, size: str, length: int) -> Dataset:
    """The dataset that feeds model ``name`` at ``size``: ``length`` samples."""
    spec = models.MODELS[name].sizes[size]
    if models.MODELS[name].kind == "image":
        return AugmentedImages(spec.image, length, spec.kwargs.get("num_classes", 1000))
    return Sentences(spec.kwargs["vocab"], spec.lengths, length)


def per_sample(dataset: Dataset, n: int = 20) -> float:
    """Seconds of ``__getitem__`` per sample, in this process."""
    start = time.perf_counter()
    for i in range(n):
        dataset[i]
    return (time.perf_counter() - start) / n


class Runner:
    """flambeau training ``name`` at ``size`` from a DataLoader; :meth:`epoch` returns seconds per step."""

    def __init__(self, name: str, size: str, workers: int, pin: bool, device: str, batches: int):
        model, spec = models.MODELS[name], models.MODELS[name].sizes[size]
        self.dataset = make_dataset(name, size, batches * spec.batch)
        self.loader = DataLoader(self.dataset, batch_size=spec.batch, num_workers=workers, pin_memory=pin,
                                 persistent_workers=workers > 0, drop_last=True)
        if workers:
            iter(self.loader)  # start the (persistent) workers before this process touches the GPU
        self.module = model.builder(fl, **spec.kwargs).to(device)
        self.step = models.make_step(fl, model, self.module)
        self.device, self.pin, self.kind = device, pin, model.kind
        self.sync = fl.cuda.synchronize if device == "cuda" else (lambda: None)

    def epoch(self) -> float:
        start, n = time.perf_counter(), 0
        for batch in self.loader:
            batch = [t.to(self.device, non_blocking=self.pin) for t in batch]
            if self.kind == "image":
                self.step(batch[:1], batch[1])
            else:
                self.step(batch[:2], batch[2].flatten())
            n += 1
        self.sync()
        return (time.perf_counter() - start) / n



# (label, DataLoader workers, pinned memory, extra environment), everything on first
CONFIGS = (
    ("everything on (2 workers; on a GPU also pinned memory, caching allocator, async)", 2, True, {}),
    ("(a) no worker processes: num_workers=0", 0, True, {}),
    ("(b) no pinned memory: pin_memory=False, blocking copies", 2, False, {}),
    ("(c) no caching allocator: FLAMBEAU_CUDA_ALLOCATOR=native", 2, True, {"FLAMBEAU_CUDA_ALLOCATOR": "native"}),
    ("(d) no asynchronous execution: CUDA_LAUNCH_BLOCKING=1", 2, True, {"CUDA_LAUNCH_BLOCKING": "1"}),
)


def _child_command(name: str, size: str, workers: int, pin: bool, batches: int, rounds: int,
                   device: str) -> list[str]:
    """The command that prints the median seconds per step of one configuration in a process of its own."""
    return [sys.executable, __file__, "--child", name, "--size", size, "--workers", str(workers),
               "--pin", str(int(pin)), "--batches", str(batches), "--rounds", str(rounds), "--device", device]


def measure_gpu(name: str, size: str, batches: int, rounds: int, device: str = "cuda") -> list[float | str]:
    """Per configuration: median seconds per step, or the error; each in its own process, alternating order."""
    times: list[list[float]] = [[] for _ in CONFIGS]
    errors: dict[int, str] = {}
    for k in range(rounds):
        order = range(len(CONFIGS)) if k % 2 == 0 else reversed(range(len(CONFIGS)))
        for i in order:
            if i in errors:
                continue
            _, workers, pin, env = CONFIGS[i]
            command = _child_command(name, size, workers, pin, batches, 2, device)
            done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env})
            if done.returncode:
                errors[i] = (done.stderr.strip().splitlines() or ["no output"])[-1]
            else:
                times[i].append(float(done.stdout.split()[-1]))
    return [errors[i] if i in errors else statistics.median(t) for i, t in enumerate(times)]


def measure_cpu(name: str, size: str, batches: int, rounds: int) -> tuple[list[float | str], float]:
    """(a) on a CPU: the two loaders in alternating rounds in this process; and the per-sample work."""
    runners = [Runner(name, size, CONFIGS[i][1], False, "cpu", batches) for i in (0, 1)]
    for r in runners:
        r.epoch()  # warm-up: numba compiles, workers start
    times: list[list[float]] = [[], []]
    for k in range(rounds):
        for i in ((0, 1) if k % 2 == 0 else (1, 0)):
            times[i].append(runners[i].epoch())
    cost = per_sample(runners[1].dataset)
    runners.clear()
    gpu_only = "GPU only: not measured here"
    return [statistics.median(times[0]), statistics.median(times[1]), gpu_only, gpu_only, gpu_only], cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and batches")
    parser.add_argument("--size", choices=("paper", "reduced", "tiny"),
                        help="override the sizes (default: paper on a GPU, reduced on a CPU)")
    parser.add_argument("--out", type=pathlib.Path, default=table1.DOCS / "ablations.md")
    parser.add_argument("--only", choices=ABLATED, action="append", help="ablate only these models")
    parser.add_argument("--child", choices=ABLATED, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--pin", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--batches", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 7)
    batches = args.batches or (4 if args.quick else 8)
    r = _harness.Report("paper-ablations", "Ablations", repeat=rounds)
    if args.child:  # one GPU configuration: warm-up epoch, then the median of ``rounds`` epochs on stdout
        runner = Runner(args.child, args.size or "paper", args.workers, bool(args.pin), args.device, batches)
        runner.epoch()
        print(statistics.median(runner.epoch() for _ in range(rounds)))
        return
    device, why = table1.pick_device(r.torch, args.device) if r.torch is not None else ("cpu", "")
    if why:
        print(why, flush=True)
    size = args.size or ("paper" if device == "cuda" else "reduced")
    print(f"device {device}, {size} sizes, {batches} batches per epoch, {rounds} rounds", flush=True)
    columns, notes = [], []
    ablated = args.only or ABLATED
    for name in ablated:
        model = models.MODELS[name]
        print(f"{model.title} ({model.sizes[size].describe(model)})", flush=True)
        if device == "cuda":
            times = measure_gpu(name, size, batches, rounds)
            cost = per_sample(make_dataset(name, size, 20))
        else:
            times, cost = measure_cpu(name, size, batches, rounds)
        notes.append(f"{model.title}, {model.sizes[size].describe(model)}: the dataset's per-sample work "
                     f"(`__getitem__`) takes {_harness.fmt_time(cost)} here, "
                     f"{_harness.fmt_time(cost * model.sizes[size].batch)} per batch.")
        print(notes[-1], flush=True)
        columns.append(times)
        for (label, *_), t in zip(CONFIGS, times):
            print(f"  {label:<72} {_cell(t, times[0])}", flush=True)

    titles = [f"{models.MODELS[n].title}, step time (slowdown)" for n in ablated]
    lines = table1.header(r, "Ablations: what each piece contributes to a flambeau training step", device, size,
                          table1.gpu_line(r.torch) if device == "cuda" else why)
    lines += ["Median time per training step (loading the batch included) over rounds of "
              f"{batches}-step epochs, with each piece switched off in turn; in brackets the slowdown against "
              "everything on (above 1: the piece helps). flambeau only.", "",
              "| configuration | " + " | ".join(titles) + " |", "|---|" + "---:|" * len(titles)]
    for i, (label, *_) in enumerate(CONFIGS):
        lines.append(f"| {label} | " + " | ".join(_cell(c[i], c[0]) for c in columns) + " |")
    lines += [""] + [f"- {n}" for n in notes]
    if device == "cpu":
        lines.append("- On this CPU the training step uses both cores (2 threads), so the 2 worker processes "
                     "compete with it for them (and with whatever else the machine runs: see the load average).")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"\nwrote {args.out}")


def _cell(t: float | str, base: float | str) -> str:
    if isinstance(t, str):
        return t
    return _harness.fmt_time(t) + (f" ({t / base:.2f}x)" if isinstance(base, float) else "")


if __name__ == "__main__":
    main()
