"""What the profiler costs per operator: off (before any profile and after one ran), and while recording,
flambeau beside torch (torch.profiler) on the same chain of tiny operators.

    python benchmarks/profiler_overhead.py

Prints medians of interleaved rounds; RESULTS.md is not touched. flambeau's claim (Note [Profiling at
zero cost] in flambeau/profiler/_state.py): with no profile running, the per-operator cost is what it was
before the profiler existed, because nothing stays instrumented.
"""

from __future__ import annotations

import statistics
import time

import _harness  # noqa: F401 - first: pins every library to 2 threads before they are imported

import flambeau as fl
from flambeau.profiler import profile


def chain(lib, x, n: int) -> float:
    """Seconds per operator of ``n`` rounds of three tiny operators."""
    y = x
    start = time.perf_counter()
    for _ in range(n):
        y = (y * 1.0001 + 0.5).relu()
    return (time.perf_counter() - start) / (3 * n)


def main() -> None:
    import torch

    n, rounds = 3000, 7
    fx, tx = fl.ones(8), torch.ones(8)
    chain(fl, fx, 100), chain(torch, tx, 100)
    before, after, torch_off, fl_on, torch_on = [], [], [], [], []
    for _ in range(rounds):  # every phase interleaves torch the same way (Note [Libraries slow each other])
        before.append(chain(fl, fx, n))
        torch_off.append(chain(torch, tx, n))
    with profile():
        chain(fl, fx, 10)
    for _ in range(rounds):
        after.append(chain(fl, fx, n))
        torch_off.append(chain(torch, tx, n))
    for _ in range(rounds):
        with profile():
            fl_on.append(chain(fl, fx, n // 3))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            torch_on.append(chain(torch, tx, n // 3))
    med = {k: statistics.median(v) * 1e6 for k, v in
           {"before": before, "after": after, "torch_off": torch_off, "fl_on": fl_on, "torch_on": torch_on}.items()}
    print(f"{_harness.machine_info()['cpu']}")
    print(f"flambeau, no profile: {med['before']:.2f} us/op before any profile, {med['after']:.2f} us/op after one ran "
          f"(ratio {med['after'] / med['before']:.3f})")
    print(f"flambeau while profiling: {med['fl_on']:.2f} us/op ({med['fl_on'] / med['after']:.2f}x off)")
    print(f"torch: {med['torch_off']:.2f} us/op off, {med['torch_on']:.2f} us/op while profiling "
          f"({med['torch_on'] / med['torch_off']:.2f}x off)")


if __name__ == "__main__":
    main()
