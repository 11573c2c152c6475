"""DataLoader benchmarks: flambeau.data against torch.utils.data, batches per second.

Two datasets, each read in batches of 32 with ``num_workers`` 0 and 2 (persistent workers, so the
steady state is measured, not the start of the processes; the first epoch is the warm-up):

- CPU-heavy: each sample costs about 1 ms of Python work (holding the GIL, as decoding and
  augmentation in Python do) and is a 64-float tensor: what workers are for;
- memory-heavy: each sample is a fresh 3x224x224 float32 tensor (588 KiB; a batch is 18 MiB),
  so the cost is moving batches from the workers to the main process (shared memory in both
  libraries).

One timed call is one epoch (64 batches). Besides the usual ratio (flambeau / torch time, below 1
means flambeau is faster) the notes give batches/s and the speedup of 2 workers over 0.

    python benchmarks/dataloader.py            # writes its section of RESULTS.md
    python benchmarks/dataloader.py --quick    # fewer repeats, RESULTS.md untouched
"""

from __future__ import annotations

import argparse
import time

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl
from flambeau.data import DataLoader, Dataset

BATCH = 32
BATCHES = 64  # an epoch long enough that filling the workers' pipeline at its start is a small part


def _spin(seconds: float) -> None:
    """About ``seconds`` of pure-Python work (calibrated once; not a sleep: it holds a core)."""
    n = _SPIN_ITERS[0]
    s = 0
    for i in range(int(n * seconds / 1e-3)):
        s += i * i
    return s


_SPIN_ITERS = [1]


def _calibrate_spin() -> None:
    n = 10_000
    while True:
        t = time.perf_counter()
        s = 0
        for i in range(n):
            s += i * i
        dt = time.perf_counter() - t
        if dt > 0.02:
            break
        n *= 2
    _SPIN_ITERS[0] = max(1, int(n * 1e-3 / dt))


class CpuHeavy(Dataset):
    """~1 ms of Python work per sample, then a 64-float tensor."""

    def __init__(self, from_numpy):
        self.from_numpy = from_numpy
        self.rng = np.random.default_rng(0)
        self.base = self.rng.standard_normal((BATCH * BATCHES, 64)).astype(np.float32)

    def __getitem__(self, i):
        _spin(1e-3)
        return self.from_numpy(self.base[i].copy()), i

    def __len__(self):
        return BATCH * BATCHES


class MemoryHeavy(Dataset):
    """A fresh 3x224x224 float32 tensor per sample."""

    def __init__(self, from_numpy):
        self.from_numpy = from_numpy
        self.base = np.random.default_rng(0).standard_normal((8, 3, 224, 224)).astype(np.float32)

    def __getitem__(self, i):
        return self.from_numpy(self.base[i % 8].copy()), i

    def __len__(self):
        return BATCH * BATCHES


def _epoch(loader):
    def run():
        n = 0
        for x, _ in loader:
            n += x.shape[0]
        assert n == BATCH * BATCHES
    return run


def bench(r: _harness.Report, torch, name: str, cls) -> None:
    times = {}
    for workers in (0, 2):
        kw = {"num_workers": workers, "persistent_workers": workers > 0}
        fl_loader = DataLoader(cls(fl.from_numpy), batch_size=BATCH, **kw)
        th_fn = None
        if torch is not None:
            from torch.utils.data import DataLoader as TorchLoader

            th_loader = TorchLoader(cls(torch.from_numpy), batch_size=BATCH, **kw)
            th_fn = _epoch(th_loader)
        t_fl, t_th = r.compare(f"{name}, {workers} workers", f"{BATCHES} batches of {BATCH}", _epoch(fl_loader),
                               th_fn)
        times[workers] = (t_fl, t_th)
        note = f"{name}, {workers} workers: flambeau {BATCHES / t_fl:.1f} batches/s"
        if t_th:
            note += f", torch {BATCHES / t_th:.1f} batches/s"
        r.add_note(note)
        del fl_loader
    (f0, t0), (f2, t2) = times[0], times[2]
    note = f"{name}: 2 workers over 0, flambeau {f0 / f2:.2f}x"
    if t0 and t2:
        note += f", torch {t0 / t2:.2f}x"
    r.add_note(note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; do not write RESULTS.md")
    args = parser.parse_args()
    r = _harness.Report("dataloader", "DataLoader (benchmarks/dataloader.py)", repeat=3 if args.quick else 7,
                        target=0.05)
    _calibrate_spin()
    r.header()
    bench(r, r.torch, "CPU-heavy (1 ms/sample)", CpuHeavy)
    bench(r, r.torch, "memory-heavy (3x224x224)", MemoryHeavy)
    if not args.quick:
        r.finish()


if __name__ == "__main__":
    main()
