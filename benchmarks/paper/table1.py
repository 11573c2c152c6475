"""Table 1 of the PyTorch paper, reproduced: training throughput of flambeau against torch on the same machine.

The six models of benchmarks/paper/models.py (AlexNet, VGG-19 with BatchNorm, ResNet-50, MobileNet v2, a
GNMTv2-style LSTM, NCF), float32. Each is built in torch, its parameters and buffers copied into the
flambeau one; one step on each side, dropout off, checks that the two losses agree (a model whose losses
differ is not timed); then training steps (zero_grad, forward, loss, backward, optimizer step on a fixed
batch) are timed interleaved, flambeau then torch, ``repeat`` times, and the medians kept
(``_harness.Report.compare``; on a GPU each timed call ends with the device's ``synchronize``).
Throughput is images/s, tokens/s (source + target tokens) or samples/s, as in the paper's Table 1.

- ``--device cpu`` (default): the "reduced" sizes of models.py, for a 2-core CPU;
- ``--device cuda``: the "paper" sizes (224x224 images) on the GPU, when torch and flambeau both see
  one; otherwise the script says so and runs the CPU reduced sizes.

The table is printed and written to docs/paper/table1.md (with the machine, the command and the sizes).

    python benchmarks/paper/table1.py --quick            # 3 repeats
    python benchmarks/paper/table1.py --device cuda
    python benchmarks/paper/table1.py --only resnet50 --size tiny
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # benchmarks/ (_harness, train) and this folder (models)

import _harness  # noqa: E402, I001 - first: pins every library to 2 threads before they are imported
import models  # noqa: E402
import train  # noqa: E402

import flambeau as fl  # noqa: E402
import flambeau.nn  # noqa: E402, F401
import flambeau.optim  # noqa: E402, F401

DOCS = HERE.parents[1] / "docs" / "paper"


def pick_device(torch, wanted: str) -> tuple[str, str]:
    """(device, why): "cuda" only when asked for and both libraries see a GPU."""
    if wanted != "cuda":
        return "cpu", ""
    if not torch.cuda.is_available():
        return "cpu", "--device cuda: torch sees no CUDA GPU here, so the CPU reduced sizes are run instead"
    if not fl.cuda.is_available():
        return "cpu", (f"--device cuda: flambeau's CUDA backend is unavailable ({fl.cuda._why_not[0]}), "
                       "so the CPU reduced sizes are run instead")
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 arithmetic on both sides, as in the paper
    torch.backends.cudnn.allow_tf32 = False
    fl.backends.cuda.matmul.allow_tf32 = False
    fl.backends.cudnn.allow_tf32 = False
    return "cuda", ""


def synchronized(step, sync):
    """``step`` followed by the device's synchronize (so queued GPU work is counted); ``step`` on a CPU."""
    if sync is None:
        return step

    def call():
        step()
        sync()
    return call


def _rate(items: float, seconds: float | None) -> str:
    if not seconds:
        return "-"
    r = items / seconds
    return f"{r:.3g}" if r >= 1e6 else f"{r:,.0f}"


def gpu_line(torch) -> str:
    return (f"GPU: {fl.cuda.get_device_name()} (torch sees {torch.cuda.get_device_name()}), "
            f"torch CUDA {torch.version.cuda}")


def header(r: _harness.Report, title: str, device: str, size: str, note: str) -> list[str]:
    """The head of a docs/paper page: title, command, date, machine and versions, device and sizes."""
    info = _harness.machine_info()
    command = " ".join(["python", f"benchmarks/paper/{pathlib.Path(sys.argv[0]).name}", *sys.argv[1:]])
    lines = [f"# {title}", "", f"`{command}` on {datetime.date.today().isoformat()}  ",
             f"{info['cpu']}; Python {info['python']}, numpy {info['numpy']}, numba {info['numba']}, "
             f"torch {info['torch']}, flambeau {info['flambeau']}.  ",
             f"Device: {device}; sizes: \"{size}\" of benchmarks/paper/models.py; {r.repeat} interleaved repeats; "
             f"load average {os.getloadavg()[0]:.1f} when the run ended."]
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        lines.append(f"  \n**Busy machine**: load average {load:.1f} on {cores} cores. Libraries whose threads wait "
                     "for each other at every parallel region (torch's OpenMP) lose most when other processes "
                     "hold the cores, so these figures measure the contention as much as the libraries.")
    return lines + ([f"  \n{note}"] if note else []) + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--only", choices=sorted(models.MODELS), action="append", help="run only these models")
    parser.add_argument("--size", choices=("paper", "reduced", "tiny"),
                        help="override the sizes (default: paper on a GPU, reduced on a CPU)")
    parser.add_argument("--out", type=pathlib.Path, default=DOCS / "table1.md", help="the markdown file written")
    args = parser.parse_args()
    r = _harness.Report("paper-table1", "Table 1", repeat=3 if args.quick else 7, target=0.2)
    torch = r.torch
    if torch is None:
        raise SystemExit("benchmarks/paper/table1.py needs torch: it builds each model in torch first")
    device, why = pick_device(torch, args.device)
    if why:
        print(why, flush=True)
    size = args.size or ("paper" if device == "cuda" else "reduced")
    sync = (lambda: (fl.cuda.synchronize(), torch.cuda.synchronize())) if device == "cuda" else None
    print(f"device {device}, {size} sizes" + (f"; {gpu_line(torch)}" if device == "cuda" else ""), flush=True)
    r.header()
    table = []
    for name in args.only or models.MODELS:
        model = models.MODELS[name]
        setup = model.sizes[size].describe(model)
        row = {"model": model.title, "size": setup, "unit": model.unit, "paper": _rate(model.paper, 1.0)}
        try:
            fl_module, th_module, fl_step, th_step = models.build_pair(torch, fl, name, size, device=device)
            train.check_same_loss(fl_module, th_module, fl_step, th_step)
            t_fl, t_th = r.compare(model.title, f"batch {model.sizes[size].batch}",
                                   synchronized(fl_step, sync), synchronized(th_step, sync))
        except SystemExit as e:  # check_same_loss: the losses differ
            r.skip(model.title, setup, str(e))
            row.update(flambeau="-", torch="-", ratio="-", steps=f"not timed: {e}")
        except Exception as e:  # a model flambeau cannot run yet is a row, not the end of the table
            r.skip(model.title, setup, f"{type(e).__name__}: {e}")
            row.update(flambeau="-", torch="-", ratio="-", steps=f"failed: {type(e).__name__}: {e}")
        else:
            items = model.items(size)
            row.update(flambeau=_rate(items, t_fl), torch=_rate(items, t_th), ratio=f"{t_th / t_fl:.2f}",
                       steps=f"{_harness.fmt_time(t_fl)} / {_harness.fmt_time(t_th)}")
        table.append(row)

    cols = ("model", "size", "unit", "flambeau", "torch", "ratio", "steps", "paper")
    titles = ("model", "size", "unit", "flambeau", "torch", "flambeau / torch", "step time flambeau / torch",
              "paper's PyTorch (GPU)")
    print("\nThroughput (higher is better); flambeau / torch above 1: flambeau is faster")
    for row in table:
        print(f"{row['model']:<24} {row['unit']:<10} flambeau {row['flambeau']:>10}  torch {row['torch']:>10}  "
              f"ratio {row['ratio']:>5}  ({row['steps']})")
    note = why + ("  \n" if why else "") + (gpu_line(torch) if device == "cuda" else "")
    lines = header(r, "Table 1 reproduced: training throughput, flambeau against torch", device, size, note)
    lines += ["Throughput, higher is better: images/s (image models), tokens/s (source + target tokens, GNMT), "
              "samples/s (NCF). **flambeau / torch** is the throughput ratio (above 1: flambeau is faster). "
              "Median of interleaved step timings; before timing, one step on each side (dropout off) checked "
              "that the losses agree. The last column is PyTorch's figure in the paper (NVIDIA GPU, full "
              "sizes): a scale, not comparable with CPU reduced sizes.", "",
              "| " + " | ".join(titles) + " |", "|---|---|---|---:|---:|---:|---|---:|"]
    lines += ["| " + " | ".join(row[c] for c in cols) + " |" for row in table]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
