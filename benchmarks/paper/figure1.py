"""Figure 1 of the PyTorch paper for flambeau: the host issuing a ResNet-50 training step, the device running it.

One training step (forward, cross-entropy loss, backward, SGD with momentum) of a torchvision-layout
ResNet-50 is traced by :mod:`flambeau.profiler` after a warm-up step. The figure has two rows, as the
paper's Figure 1:

- **host**: the control flow on the CPU, grey where the Python interpreter runs between operators,
  coloured where it is inside one of the step's top-level spans (operators called by the forward,
  autograd nodes evaluated by backward, the optimizer), coloured by phase;
- **device**: with ``--device cuda``, each operator's device work (the profiler's ``GPU 0`` row, one
  slice per operator), coloured by operator, with arrows from the host span that queued it; on the
  CPU there is no separate device, the host executes each operator itself before returning, so the
  second row shows the same operators' execution (the same top-level spans), coloured by operator.

The lower panel zooms on the first few operators of the forward pass, as the paper's figure does.

    python benchmarks/paper/figure1.py                 # CPU: batch 8, 64x64 images, full width
    python benchmarks/paper/figure1.py --device cuda   # paper size: batch 32, 224x224
    python benchmarks/paper/figure1.py --quick         # CPU, batch 2, 32x32, half the channels

Writes docs/paper/figure1.png, figure1.trace.json (gzipped if over 5 MB), figure1.md and figure1.rst.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import pathlib
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))

import _harness  # noqa: E402, I001 - first: pins every library to 2 threads before they are imported
import numpy as np  # noqa: E402

import flambeau as fl  # noqa: E402
import flambeau.nn  # noqa: E402, F401
import flambeau.optim  # noqa: E402, F401
from flambeau.profiler import ProfilerActivity, profile, record_function  # noqa: E402
from models import resnet50  # noqa: E402 - benchmarks/paper/models.py: the paper's models, over `lib`

ROOT = BENCH.parent
OUT = ROOT / "docs" / "paper"
PHASES = ("forward", "backward", "optimizer")
PHASE_COLOURS = {"forward": "#1f77b4", "backward": "#d62728", "optimizer": "#2ca02c"}
# Operator families, coloured alike on the device row (first match of a substring of the name wins).
FAMILIES = [("conv", "convolution", "#4c72b0"), ("norm", "batch norm", "#dd8452"), ("relu", "ReLU", "#55a868"),
            ("hardtanh", "ReLU", "#55a868"), ("pool", "pooling", "#8172b3"), ("linear", "linear / matmul", "#937860"),
            ("addmm", "linear / matmul", "#937860"),
            ("matmul", "linear / matmul", "#937860"), ("add", "add", "#c44e52"), ("entropy", "loss", "#da8bc3"),
            ("optimizer", "optimizer", "#bcbd22")]
OTHER = ("other", "#8c8c8c")
FRAGMENT_MARKER = "paper-fragment-start"  # docs/paper_evaluation.rst includes the fragments from this line on
SIZE_LIMIT = 5 << 20  # a trace above this is written gzipped


def family(name: str) -> tuple[str, str]:
    """(label, colour) of an operator or autograd node name."""
    low = name.lower().replace("flambeau::", "")
    for key, label, colour in FAMILIES:
        if key in low:
            return label, colour
    return OTHER


# --- tracing ------------------------------------------------------------------------------------------------
def traced_step(device: str, batch: int, image: int, width: float, num_classes: int, repeats: int = 1):
    """Build the model, run a warm-up step, then profile ``repeats`` steps; returns (profiler, step seconds)
    of the fastest."""
    rng = np.random.default_rng(0)
    model = resnet50(fl, width=width, num_classes=num_classes).to(device)
    optimizer = fl.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = fl.from_numpy(rng.standard_normal((batch, 3, image, image), dtype=np.float32)).to(device)
    y = fl.from_numpy(rng.integers(0, num_classes, batch)).to(device)

    def step(annotate: bool) -> None:
        def phase(name):
            return record_function(name) if annotate else _Nothing()

        with phase("forward"):
            loss = fl.nn.functional.cross_entropy(model(x), y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad()
        loss.item()  # waits for the device, as a training loop that logs the loss does

    step(False)  # warm-up: numba compiles, the caching allocator fills, momentum buffers are made
    if device == "cuda":
        fl.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    best = None
    for _ in range(repeats):  # the fastest of a few profiled steps: a busy machine's stalls are not flambeau's
        gc.collect()
        with profile(activities=activities, record_shapes=True) as prof:
            start = time.perf_counter()
            step(True)
            seconds = time.perf_counter() - start
        if best is None or seconds < best[1]:
            best = (prof, seconds)
    return best


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def host_spans(prof):
    """Phase spans and the top-level spans inside each: [(phase, start_us, end_us, [(name, kind, s, e)])].

    On a GPU the backward's autograd nodes run on the engine's device thread (as torch's do), not under
    the "backward" annotation of the main thread: a phase also takes the top-level spans that other
    threads ran inside its time."""
    events = prof.events()
    phases = [e for e in events if e.cpu_parent is None and e.kind == "user_annotation" and e.name in PHASES]
    others = [e for e in events if e.cpu_parent is None and e.kind != "user_annotation"
              and all(e.thread != p.thread for p in phases)]
    out = []
    for e in phases:
        inner = [(c.name, c.kind, c.start_us, c.end_us) for c in e.cpu_children]
        inner += [(c.name, c.kind, c.start_us, c.end_us) for c in others if e.start_us <= c.start_us < e.end_us]
        out.append((e.name, e.start_us, e.end_us, sorted(inner, key=lambda span: span[2])))
    return out


def execution_spans(phases, trace: dict):
    """The device row: [(name, start_us, end_us, host_start_us or None)].

    With CUDA the profiler's device slices (trace events of category ``kernel``), each with the host
    time that queued it; on the CPU, where the host executes what it calls, the top-level spans again."""
    kernels = [ev for ev in trace["traceEvents"] if ev.get("ph") == "X" and ev.get("cat") == "kernel"]
    if kernels:
        base = trace["baseTimeNanoseconds"] / 1e3
        return [(ev["name"], ev["ts"] - base, ev["ts"] - base + ev["dur"],
                 ev["args"].get("launched at (host us)", base) - base) for ev in kernels]
    return [(name, s, e, None) for _, _, _, spans in phases for name, _, s, e in spans]


# --- the figure ---------------------------------------------------------------------------------------------
def draw(path: pathlib.Path, phases, execution, *, on_gpu: bool, title: str, zoom_ops: int = 12) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    t0 = phases[0][1]
    t1 = max(p[2] for p in phases)
    t1 = max([t1] + [e[2] for e in execution])
    device_label = "GPU 0\n(device)" if on_gpu else "CPU\n(executing)"
    fig, axes = plt.subplots(2, 1, figsize=(14, 6.4), gridspec_kw={"height_ratios": [1, 1.15]})

    def rows(ax, lo, hi, arrows: bool):
        ax.broken_barh([(0, (hi - lo) / 1e3)], (1.55, 0.8), facecolors="#d9d9d9")  # Python: the background
        for name, _, _, spans in phases:
            colour = PHASE_COLOURS[name]
            bars = [((s - lo) / 1e3, (e - s) / 1e3) for _, _, s, e in spans if e >= lo and s <= hi]
            ax.broken_barh(bars, (1.55, 0.8), facecolors=colour, edgecolors="white", linewidth=0.2)
        by_colour: dict = {}
        for name, s, e, _ in execution:
            if e >= lo and s <= hi:
                by_colour.setdefault(family(name)[1], []).append(((s - lo) / 1e3, (e - s) / 1e3))
        for colour, bars in by_colour.items():
            ax.broken_barh(bars, (0.35, 0.8), facecolors=colour, edgecolors="white", linewidth=0.2)
        if arrows:
            for _, s, _, launched in execution:
                if s < lo or s > hi:
                    continue
                src = launched if launched is not None else s
                ax.annotate("", xy=((s - lo) / 1e3, 1.15), xytext=((src - lo) / 1e3, 1.55),
                            arrowprops={"arrowstyle": "->", "color": "#444444", "lw": 0.7})
        ax.set_yticks([0.75, 1.95], [device_label, "host CPU\n(issuing)"])
        ax.set_ylim(0.1, 2.6)
        ax.set_xlim(0, (hi - lo) / 1e3)
        ax.set_xlabel("time since the start of the step (ms)" if lo == t0 else "time since the first operator (ms)")

    rows(axes[0], t0, t1, arrows=False)
    axes[0].set_title(title, fontsize=10)
    forward_ops = phases[0][3][:zoom_ops]
    z0 = forward_ops[0][2]
    z1 = forward_ops[-1][3]
    if on_gpu:  # the device work of those operators ends later than the host's queuing
        queued = [e for e in execution if e[3] is not None and z0 <= e[3] <= z1]
        z1 = max([z1] + [e[2] for e in queued])
    rows(axes[1], z0, z1, arrows=True)
    axes[1].set_title(f"zoom: the first {len(forward_ops)} operators of the forward pass", fontsize=10)
    legend = [Patch(color="#d9d9d9", label="host: Python interpreter")]
    legend += [Patch(color=c, label=f"host: {p}") for p, c in PHASE_COLOURS.items()]
    seen = {}
    for name, *_ in execution:
        label, colour = family(name)
        seen.setdefault(label, colour)
    legend += [Patch(color=c, label=f"{'device' if on_gpu else 'executed'}: {lbl}") for lbl, c in seen.items()]
    fig.legend(handles=legend, loc="lower center", ncol=6, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    host_busy = sum(e - s for _, _, _, spans in phases for _, _, s, e in spans)
    exec_busy = sum(e - s for _, s, e, _ in execution)
    return {"step_us": t1 - t0, "host_busy_us": host_busy, "exec_busy_us": exec_busy,
            "zoom_us": z1 - z0, "zoom_ops": len(forward_ops)}


def write_trace(prof, out: pathlib.Path) -> tuple[pathlib.Path, dict]:
    """The Chrome trace, gzipped when it is over SIZE_LIMIT; returns its path and the parsed JSON."""
    plain = out / "figure1.trace.json"
    prof.export_chrome_trace(str(plain))
    trace = json.loads(plain.read_text())
    if plain.stat().st_size <= SIZE_LIMIT:
        stale = out / "figure1.trace.json.gz"
        if stale.exists():
            stale.unlink()
        return plain, trace
    packed = out / "figure1.trace.json.gz"
    with open(plain, "rb") as f, gzip.open(packed, "wb") as g:
        g.write(f.read())
    plain.unlink()
    return packed, trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--batch", type=int, help="default: 8 on cpu, 32 on cuda (2 with --quick)")
    parser.add_argument("--image", type=int, help="image side; default: 64 on cpu, 224 on cuda (32 with --quick)")
    parser.add_argument("--width", type=float, help="channel multiplier; default 1, ResNet-50 (0.5 with --quick)")
    parser.add_argument("--repeats", type=int, default=3, help="profiled steps; the fastest is drawn (1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a small model and batch, for a smoke run")
    parser.add_argument("--out", default=str(OUT), help="output folder (default docs/paper)")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    if cuda and not fl.cuda.is_available():
        sys.exit("figure1.py --device cuda: flambeau.cuda.is_available() is False on this machine")
    batch = args.batch or (2 if args.quick else 32 if cuda else 8)
    image = args.image or (32 if args.quick else 224 if cuda else 64)
    width = args.width or (0.5 if args.quick else 1.0)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    began = time.perf_counter()
    repeats = 1 if args.quick else max(args.repeats, 1)
    prof, seconds = traced_step(args.device, batch, image, width, num_classes=1000, repeats=repeats)
    trace_path, trace = write_trace(prof, out)
    phases = host_spans(prof)
    execution = execution_spans(phases, trace)
    size = f"batch {batch}, {image}x{image} images" + ("" if width == 1 else f", width x{width:g}")
    where = "GPU" if cuda else "CPU (host executes the operators)"
    stats = draw(out / "figure1.png", phases, execution, on_gpu=cuda,
                 title=f"flambeau: one ResNet-50 training step ({size}) on the {where}, profiled after a warm-up step")
    total = time.perf_counter() - began

    info = _harness.machine_info()
    device_name = _device_name() if cuda else "none (CPU run)"
    command = "python benchmarks/paper/figure1.py " + " ".join(sys.argv[1:])
    counts = {p: len(spans) for p, _, _, spans in phases}
    ops = len([e for e in prof.events() if e.kind == "cpu_op"])
    print(f"ResNet-50 step ({size}) on {args.device}: {seconds * 1e3:.1f} ms profiled, "
          f"{ops} operator spans; top-level spans: {counts}")
    print(f"host busy in top-level spans {stats['host_busy_us'] / 1e3:.1f} ms of {stats['step_us'] / 1e3:.1f} ms; "
          f"{'device' if cuda else 'operator execution'} busy {stats['exec_busy_us'] / 1e3:.1f} ms")
    print(f"wrote {out / 'figure1.png'}, {trace_path} ({trace_path.stat().st_size / 1e6:.2f} MB); script {total:.1f} s")

    if cuda:
        reading = (f"The device row is the profiler's `GPU 0` row: one slice per operator (all its kernels), "
                   f"{stats['exec_busy_us'] / 1e3:.1f} ms of device time in a {stats['step_us'] / 1e3:.1f} ms step; "
                   "arrows go from the host span that queued an operator to its device work.")
    else:
        reading = ("**CPU run.** There is no separate device: the host executes each operator itself before the "
                   "call returns, so the lower row shows the same operators' execution (the same top-level "
                   "spans, coloured by operator instead of by phase) and the host cannot run ahead of it as "
                   "it does on a GPU. Run with `--device cuda` on a GPU for the asynchronous picture of the paper.")
    summary = [
        f"One training step of a torchvision-layout ResNet-50 ({size}; SGD with momentum, cross-entropy) traced "
        f"by `flambeau.profiler` after a warm-up step (the fastest of {repeats} profiled steps, to keep a busy "
        f"machine's stalls out): {seconds * 1e3:.1f} ms, {ops} operator spans; top-level "
        f"spans {counts['forward']} in the forward, {counts['backward']} in the backward (autograd nodes), "
        f"{counts['optimizer']} in the optimizer.",
        f"Top row: the host, grey where the Python interpreter runs, coloured by phase where it is inside a "
        f"top-level span ({stats['host_busy_us'] / 1e3:.1f} ms of {stats['step_us'] / 1e3:.1f} ms). "
        f"Lower panel: the first {stats['zoom_ops']} forward operators ({stats['zoom_us'] / 1e3:.2f} ms). {reading}",
    ]
    machine = (f"{info['cpu']}; GPU: {device_name}; Python {info['python']}, numpy {info['numpy']}, "
               f"numba {info['numba']}, flambeau {info['flambeau']}")
    trace_name = trace_path.name
    md = ["# Figure 1: host and device timeline of a ResNet-50 training step", "",
          "![figure 1](figure1.png)", "", *[s + "\n" for s in summary],
          f"Trace: [`{trace_name}`]({trace_name}) (open it in https://ui.perfetto.dev or chrome://tracing).", "",
          f"Machine: {machine}.  ", f"Command: `{command.strip()}` ({total:.0f} s).", ""]
    (out / "figure1.md").write_text("\n".join(md), encoding="utf-8")
    rst = [*[s + "\n" for s in summary],
           f"Trace: ``{_shown(trace_path)}`` (open it in https://ui.perfetto.dev or chrome://tracing).", "",
           f"Machine: {machine}.", "", f"Command: ``{command.strip()}`` ({total:.0f} s).", ""]
    write_fragment(out / "figure1.rst", "\n".join(rst))


def _shown(path: pathlib.Path) -> str:
    """``path`` as the docs name it: from the repository's root when it is inside the repository."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def write_fragment(path: pathlib.Path, text: str) -> None:
    """A reStructuredText fragment that docs/paper_evaluation.rst includes after its marker line; the
    markdown inline code of ``text`` (single backticks) becomes reStructuredText's (double). ``:orphan:``
    keeps sphinx from asking for the fragment in a toctree when it builds it as a page of its own."""
    import re

    body = re.sub(r"(?<!`)`([^`]+)`(?!`)", r"``\1``", text)
    header = (f":orphan:\n\n.. Written by benchmarks/paper/{path.stem}.py; docs/paper_evaluation.rst includes what "
              f"follows the next line.\n\n.. {FRAGMENT_MARKER}\n\n")
    path.write_text(header + body, encoding="utf-8")


def _device_name() -> str:
    try:
        return str(fl.cuda.get_device_name(0))
    except Exception as e:  # noqa: BLE001 - the name is only for the caption
        return f"CUDA device ({type(e).__name__})"


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
