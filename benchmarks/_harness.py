"""Side-by-side timing of flambeau against PyTorch (CPU), shared by the scripts of benchmarks/.

Import this module first: it pins numpy's BLAS, numba and torch to 2 threads (the size of the
machines CI and most contributors run on) before any of them is imported, so both libraries get
the same resources. Each comparison warms both callables up (numba compiles on first call), then
alternates flambeau and torch measurements ``repeat`` times and keeps the median time per call,
so drifts of the machine's speed hit both sides alike.

A script builds a :class:`Report`, calls :meth:`Report.compare` (or :meth:`Report.skip` for an
operator flambeau does not have yet, :meth:`Report.add_row` for times it measured its own way),
then :meth:`Report.finish`, which prints the table ``op | size | flambeau | torch | ratio`` and
rewrites the script's section of ``benchmarks/RESULTS.md`` with the machine, the versions and the
command that produced it.
"""

from __future__ import annotations

import os

THREADS = 2
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))

import datetime  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")
__all__ = ["Report", "THREADS", "fmt_time", "machine_info", "cuda_torch"]


def fmt_time(seconds: float) -> str:
    """A duration with a unit that keeps 3 significant digits: ``1.73 µs``, ``12.4 ms``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def _cpu_model() -> str:
    """The CPU's name and its widest vector extension: BLAS kernels and ratios differ between
    AVX-512 and AVX2-only parts, so every figure names which one produced it."""
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.machine())
    flags = set(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), []))
    widest = "AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "no AVX2"
    return f"{name}, {widest}"


def _numba_layer() -> str:
    """numba's threading layer, once a parallel kernel started it (Note [numba's threading layer])."""
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # no parallel kernel has run in this process
        return "not started"


def machine_info() -> dict[str, str]:
    """CPU, cores, threads used and library versions, for the header of a results section."""
    import numba
    import numpy

    import flambeau

    info = {
        "cpu": f"{_cpu_model()} ({os.cpu_count()} logical cores, {THREADS} threads used)",
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "numba": f"{numba.__version__} ({_numba_layer()} threads)",
        "flambeau": flambeau.__version__,
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = "not installed"
    return info


def _time_calls(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def _calibrate(fn: Callable[[], object], target: float) -> int:
    """Calls per measurement so that one measurement lasts about ``target`` seconds."""
    number = 1
    while True:
        elapsed = _time_calls(fn, number) * number
        if elapsed >= target / 4 or number >= 1 << 20:
            return max(1, int(number * target / max(elapsed, 1e-9)))
        number *= 4


class Report:
    """Rows of one benchmark script; ``name`` is its section in RESULTS.md."""

    def __init__(self, name: str, title: str, *, repeat: int = 7, target: float = 0.05):
        self.name = name
        self.title = title
        self.repeat = repeat
        self.target = target
        self.rows: list[dict[str, str]] = []
        self.notes: list[str] = []
        self._torch = None
        try:
            import torch

            torch.set_num_threads(THREADS)
            self._torch = torch
        except ImportError:
            self.notes.append("torch is not installed: flambeau timings only")
        import numba

        import flambeau  # noqa: F401 - before numba starts its threads: it picks the layer (Note [numba's threading layer])

        numba.set_num_threads(min(THREADS, numba.config.NUMBA_NUM_THREADS))

    @property
    def torch(self):
        """The torch module, or None when it is not installed."""
        return self._torch

    def median(self, fn: Callable[[], object]) -> float:
        """Median time per call of ``fn`` alone (after a warm-up call)."""
        fn()
        number = _calibrate(fn, self.target)
        return statistics.median(_time_calls(fn, number) for _ in range(self.repeat))

    def compare(self, op: str, size: str, flambeau_fn: Callable[[], object],
                torch_fn: Callable[[], object] | None, note: str = "",
                baseline_required: bool = True) -> tuple[float, float | None]:
        """Time both callables, interleaved; add a row; return (flambeau, torch) seconds per call.

        The second callable is torch's unless ``baseline_required=False`` says it runs without torch
        (a numpy baseline, named in ``note``).
        """
        flambeau_fn()
        if torch_fn is not None and (self._torch is not None or not baseline_required):
            torch_fn()
        else:
            torch_fn = None
        n_fl = _calibrate(flambeau_fn, self.target)
        n_th = _calibrate(torch_fn, self.target) if torch_fn is not None else 0
        fl_times, th_times = [], []
        for _ in range(self.repeat):
            fl_times.append(_time_calls(flambeau_fn, n_fl))
            if torch_fn is not None:
                th_times.append(_time_calls(torch_fn, n_th))
        t_fl = statistics.median(fl_times)
        t_th = statistics.median(th_times) if th_times else None
        self.add_row(op, size, t_fl, t_th, note)
        return t_fl, t_th

    def add_row(self, op: str, size: str, t_fl: float, t_th: float | None, note: str = "") -> None:
        """A row of times measured by the script itself (seconds per call; ``t_th`` None: no torch)."""
        self.rows.append({
            "op": op, "size": size, "flambeau": fmt_time(t_fl),
            "torch": fmt_time(t_th) if t_th else "-",
            "ratio": f"{t_fl / t_th:.2f}" if t_th else "-", "note": note,
        })
        print(self._format_row(self.rows[-1]), flush=True)

    def skip(self, op: str, size: str, reason: str) -> None:
        """A row for an operator that cannot be measured yet, with the reason."""
        self.rows.append({"op": op, "size": size, "flambeau": "-", "torch": "-", "ratio": "-",
                          "note": f"skipped: {reason}"})
        print(self._format_row(self.rows[-1]), flush=True)

    def add_note(self, note: str) -> None:
        self.notes.append(note)
        print(note, flush=True)

    _WIDTHS = {"op": 26, "size": 22, "flambeau": 10, "torch": 10, "ratio": 6}

    def _format_row(self, row: dict[str, str]) -> str:
        cells = [row[k].ljust(w) if k in ("op", "size") else row[k].rjust(w) for k, w in self._WIDTHS.items()]
        return " | ".join(cells) + (f" | {row['note']}" if row["note"] else "")

    def header(self) -> None:
        """Print the column titles (call before the first comparison)."""
        print(self._format_row({k: k for k in (*self._WIDTHS, "note")}))
        print("-" * 100, flush=True)

    def markdown(self, command: str) -> str:
        info = machine_info()
        lines = [
            f"## {self.title}",
            "",
            f"`{command}` on {datetime.date.today().isoformat()}  ",
            f"{info['cpu']}; Python {info['python']}, numpy {info['numpy']}, numba {info['numba']}, "
            f"torch {info['torch']}, flambeau {info['flambeau']}.",
            "",
            "Median time per call; **ratio = flambeau / torch** (below 1: flambeau is faster).",
            "",
            "| op | size | flambeau | torch | ratio | note |",
            "|---|---|---:|---:|---:|---|",
        ]
        lines += [f"| {r['op']} | {r['size']} | {r['flambeau']} | {r['torch']} | {r['ratio']} | {r['note']} |"
                  for r in self.rows]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def finish(self) -> None:
        """Rewrite this report's section of RESULTS.md (other sections are kept)."""
        script = pathlib.Path(sys.argv[0]).name
        command = " ".join([f"python benchmarks/{script}", *sys.argv[1:]]) + " (nox -s bench)"
        begin, end = f"<!-- begin {self.name} -->", f"<!-- end {self.name} -->"
        section = f"{begin}\n{self.markdown(command)}{end}"
        text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
        if begin in text and end in text:
            before, rest = text.split(begin, 1)
            text = before + section + rest.split(end, 1)[1]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        RESULTS.write_text(text)
        print(f"\nwrote section '{self.name}' of {RESULTS}")


def cuda_torch(report: Report):
    """torch for a script that compares flambeau and torch on a CUDA GPU, or None after printing why there is
    nothing to measure here (no CUDA torch, or flambeau's CUDA backend unavailable): ``nox -s bench`` runs
    every script, so one without a GPU says so and succeeds."""
    import flambeau as fl

    script = f"benchmarks/{pathlib.Path(sys.argv[0]).name}"
    torch = report.torch
    if torch is None or not torch.cuda.is_available():
        print(f"{script}: skipped, torch has no CUDA GPU here")
        return None
    if not fl.cuda.is_available():
        print(f"{script}: skipped, flambeau's CUDA backend is unavailable: {fl.cuda._why_not[0]}")
        return None
    return torch
