"""DataLoader benchmarks: flambeau.data against torch.utils.data, batches per second.

Two datasets, each read in batches of 32 with ``num_workers`` 0 and 2 (persistent workers, so the
steady state is measured, not the start of the processes; the first epochs are the warm-up):

- CPU-heavy: each sample costs about 1 ms of Python work (holding the GIL, as decoding and
  augmentation in Python do; calibrated in CPU time, so a busy machine does not shorten it) and
  is a 64-float tensor: what workers are for;
- memory-heavy: each sample is a fresh 3x224x224 float32 tensor (588 KiB; a batch is 18 MiB),
  so the cost is moving batches from the workers to the main process (shared memory in both
  libraries).

One timed call is one epoch (64 batches). The four loaders of a dataset (flambeau and torch, 0
and 2 workers) are timed in rounds, one epoch each, in alternating order, so that a change in
the machine's speed hits all four alike; the table holds medians over the rounds. Besides the
usual ratio (flambeau / torch time, below 1 means flambeau is faster) the notes give batches/s
and the speedup of 2 workers over 0 (the median of the rounds' speedups).

Note [Busy machine]
    Two workers can only be faster than none if a second core is free. On a machine shared with
    other work (and Linux's autogroup scheduling shares the cores between sessions, not between
    processes) the speedup measures the other work, not the loader. So each timed epoch also
    records how much CPU the rest of the machine used meanwhile (``/proc/stat`` minus this
    process, its children and the shared-memory daemon), and the notes say how busy the machine
    was and give the speedup over the rounds where it was quiet, when there are any.

    python benchmarks/dataloader.py            # writes its section of RESULTS.md
    python benchmarks/dataloader.py --quick    # fewer rounds, RESULTS.md untouched
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl
from flambeau.data import DataLoader, Dataset

BATCH = 32
BATCHES = 64  # an epoch long enough that filling the workers' pipeline at its start is a small part


def _spin(seconds: float) -> int:
    """About ``seconds`` of pure-Python work (calibrated once; not a sleep: it holds a core)."""
    n = _SPIN_ITERS[0]
    s = 0
    for i in range(int(n * seconds / 1e-3)):
        s += i * i
    return s


_SPIN_ITERS = [1]


def _calibrate_spin() -> None:
    """Iterations of :func:`_spin`'s loop per millisecond of CPU time. Timed on ``_spin`` itself (a
    longer loop would work on larger ints, which are slower) in CPU time of this thread, not wall
    time: on a busy machine wall time would count the time other processes ran too."""
    _SPIN_ITERS[0] = n = 10_000
    rate = 0.0
    for _ in range(5):
        t = time.thread_time()
        for _ in range(20):
            _spin(1e-3)
        dt = time.thread_time() - t
        rate = max(rate, 20 * n / (dt * 1e3))  # the fastest: the least disturbed by other processes
    _SPIN_ITERS[0] = max(1, int(rate))


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


def _epoch(loader) -> None:
    n = 0
    for x, _ in loader:
        n += x.shape[0]
    assert n == BATCH * BATCHES


# --- how busy the rest of the machine is (Note [Busy machine]) ---------------------------------------
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (None without /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(v) - v[3] - v[4]) / _HZ  # all but idle and iowait


def _our_seconds() -> dict[int, float]:
    """CPU seconds used so far by this process, its descendants (the loaders' workers) and the
    shared-memory manager daemon of flambeau.multiprocessing, by pid (the live ones only)."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _HZ)  # ppid, utime+stime
    ours = {os.getpid()}
    daemon = _daemon_pid()
    if daemon is not None:
        ours.add(daemon)
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in stats.items():
            if ppid in ours and pid not in ours:
                ours.add(pid)
                grew = True
    return {pid: stats[pid][1] for pid in ours if pid in stats}


def _daemon_pid() -> int | None:
    pid = os.environ.get("FLAMBEAU_SHM_MANAGER", "").split(" ", 1)[0]
    return int(pid) if pid.isdigit() else None


def _timed_epoch(loader) -> tuple[float, float | None, dict[str, float]]:
    """One epoch: (seconds, cores the rest of the machine used meanwhile, CPU seconds of the main
    process, of each of the loader's workers and of flambeau's shared-memory daemon)."""
    busy0 = _busy_seconds()
    ours0 = _our_seconds() if busy0 is not None else {}
    t = time.perf_counter()
    _epoch(loader)
    dt = time.perf_counter() - t
    if busy0 is None:
        return dt, None, {}
    busy1, ours1 = _busy_seconds(), _our_seconds()
    delta = {pid: ours1[pid] - ours0.get(pid, 0.0) for pid in ours1}
    others = (busy1 - busy0) - sum(delta.values())
    it = getattr(loader, "_iterator", None)
    cpu = {"main": delta.get(os.getpid(), 0.0)}
    for i, w in enumerate(getattr(it, "_workers", None) or ()):
        cpu[f"worker {i}"] = delta.get(w.pid, 0.0)
    daemon = _daemon_pid()
    if daemon in delta and isinstance(loader, DataLoader) and len(cpu) > 1:
        cpu["daemon"] = delta[daemon]
    return dt, max(0.0, others / dt), cpu


QUIET = 0.2  # a round is quiet when the rest of the machine used less than this many cores in each epoch


def bench(r: _harness.Report, torch, name: str, cls, rounds: int, estimate: bool = False) -> None:
    """Rows and notes for dataset ``cls``; ``estimate``: also say how much faster 2 workers would be
    with two free cores (meaningful where all the work is single-threaded Python, as in CpuHeavy)."""
    loaders = {}
    for workers in (0, 2):
        kw = {"num_workers": workers, "persistent_workers": workers > 0}
        loaders["fl", workers] = DataLoader(cls(fl.from_numpy), batch_size=BATCH, **kw)
        if torch is not None:
            from torch.utils.data import DataLoader as TorchLoader

            loaders["th", workers] = TorchLoader(cls(torch.from_numpy), batch_size=BATCH, **kw)
    keys = list(loaders)
    for key in keys:  # warm-up: starts the workers, fills the caches and the allocators
        _epoch(loaders[key])
        _epoch(loaders[key])
    times = {key: [] for key in keys}
    load = {key: [] for key in keys}
    cpu = {key: [] for key in keys}
    for i in range(rounds):
        for key in keys if i % 2 == 0 else keys[::-1]:
            dt, others, used = _timed_epoch(loaders[key])
            times[key].append(dt)
            load[key].append(others)
            cpu[key].append(used)
    med = {key: statistics.median(ts) for key, ts in times.items()}
    for workers in (0, 2):
        t_fl, t_th = med["fl", workers], med.get(("th", workers))
        r.add_row(f"{name}, {workers} workers", f"{BATCHES} batches of {BATCH}", t_fl, t_th)
    for workers in (0, 2):
        note = f"{name}, {workers} workers: flambeau {BATCHES / med['fl', workers]:.1f} batches/s"
        if ("th", workers) in med:
            note += f", torch {BATCHES / med['th', workers]:.1f} batches/s"
        r.add_note(note)

    def speedup(lib, among):
        return statistics.median(times[lib, 0][i] / times[lib, 2][i] for i in among)

    libs = [lib for lib in ("fl", "th") if (lib, 0) in loaders]
    names = {"fl": "flambeau", "th": "torch"}
    everything = range(rounds)
    r.add_note(f"{name}: 2 workers over 0, " + ", ".join(f"{names[lib]} {speedup(lib, everything):.2f}x"
                                                           for lib in libs))
    if load[keys[0]][0] is not None:
        others = [x for key in keys for x in load[key]]
        note = (f"{name}: the rest of the machine used {statistics.mean(others):.2f} cores on average during the "
                f"timed epochs (at most {max(others):.2f})")
        for lib in libs:
            quiet = [i for i in everything if load[lib, 0][i] < QUIET and load[lib, 2][i] < QUIET]
            note += f"; {names[lib]}: {len(quiet)} of {rounds} rounds quiet (under {QUIET} cores)"
            if quiet and len(quiet) < rounds:
                note += f", 2 workers over 0 in those {speedup(lib, quiet):.2f}x"
        r.add_note(note)
        # Where the work goes. On a quiet machine an epoch lasts about as long as the CPU time of its
        # busiest process (the main process with 0 workers), whatever else runs, which estimates the
        # speedup of two free cores. (Not for the memory-heavy dataset: there torch's main process
        # time includes its intra-op threads, which spin while waiting.)
        note = f"{name}: median CPU seconds per epoch"
        for lib in libs:
            c0, c2 = ({role: statistics.median(c[role] for c in cpu[lib, w]) for role in cpu[lib, w][0]}
                      for w in (0, 2))
            busiest = max(c2.values())
            note += (f"; {names[lib]}: 0 workers {c0['main']:.2f} (main), 2 workers "
                     + ", ".join(f"{c:.2f} ({role})" for role, c in c2.items()))
            if busiest and estimate:
                note += f", so about {c0['main'] / busiest:.2f}x faster with two free cores"
        r.add_note(note)
    for key in keys:  # shut the workers down before the next dataset
        it = getattr(loaders[key], "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
    loaders.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds; do not write RESULTS.md")
    args = parser.parse_args()
    r = _harness.Report("dataloader", "DataLoader (benchmarks/dataloader.py)", repeat=5 if args.quick else 9,
                        target=0.05)
    _calibrate_spin()
    r.header()
    bench(r, r.torch, "CPU-heavy (1 ms/sample)", CpuHeavy, r.repeat, estimate=True)
    bench(r, r.torch, "memory-heavy (3x224x224)", MemoryHeavy, r.repeat)
    if not args.quick:
        r.finish()


if __name__ == "__main__":
    main()
