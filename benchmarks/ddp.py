"""Data-parallel training steps: 1 rank against 2 ranks (1 thread each), flambeau's DDP against torch's (gloo).

Each rank keeps the per-rank batch of benchmarks/train.py (weak scaling: 2 ranks train on twice
the data per step), on the MLP 784-1024-1024-10 (batch 128, 3.4 M parameters) and the CIFAR
ResNet-18 layout 32-64-128-256 (batch 32, 2.8 M parameters, with BatchNorm). The ranks start
through ``python -m flambeau.distributed.run`` (torch's too: it sets torchrun's variables, and
torch's ranks join with ``init_process_group("gloo")``), pinned to 1 thread each. For each
model and library:

- ``1 rank``: the plain training step (no DDP) of one process;
- ``2 ranks``: the DDP step, median over the ranks' median step times; the note gives the
  scaling efficiency ``t(1 rank) / t(2 ranks)`` (1.0: perfect weak scaling);
- the share of all-reduce time hidden behind backward: ``1 - (t_sync - t_no_sync) / t_allreduce``,
  where ``t_no_sync`` is the same step under ``no_sync()`` (no communication) and
  ``t_allreduce`` the time to all-reduce all gradients, bucket by bucket, with nothing else
  running. flambeau's reducer also reports how long the end of backward waited for buckets.

    nox -s bench -- ddp                 # writes its section of RESULTS.md
    python benchmarks/ddp.py --quick    # fewer steps, RESULTS.md untouched
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _harness  # noqa: I001 - first: pins every library's threads before they are imported
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("mlp", "resnet18")


# --- one rank (run under the launcher) ---------------------------------------------------------------
def _median_step(step, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker(library: str, name: str, steps: int) -> None:
    """Time ``name``'s training step on this rank; rank 0 prints one JSON line with every rank's medians."""
    from train import MODELS as SPECS

    spec = SPECS[name]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rng = np.random.default_rng(int(os.environ.get("RANK", "0")))
    x, y = spec.make_batch(rng)
    if library == "torch":
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        lib, inputs, targets = torch, torch.from_numpy(x), torch.from_numpy(y)
        if world > 1:
            dist.init_process_group("gloo")
    else:
        import flambeau as lib
        import flambeau.distributed as dist
        import flambeau.nn  # noqa: F401
        import flambeau.optim  # noqa: F401

        inputs, targets = lib.from_numpy(x), lib.from_numpy(y)
        if world > 1:
            dist.init_process_group("mpi")
    lib.manual_seed(0)
    module = spec.build(lib)
    model = module
    if world > 1:
        ddp = lib.nn.parallel.DistributedDataParallel
        model = ddp(module)
    optimizer = getattr(lib.optim, spec.optimizer)(model.parameters(), **spec.optimizer_args)
    loss_fn = getattr(lib.nn.functional, spec.loss)

    def step():
        optimizer.zero_grad()
        loss_fn(model(inputs), targets).backward()
        optimizer.step()

    for _ in range(3):
        step()
    result = {"step": _median_step(step, steps)}
    if world > 1:
        def quiet_step():
            with model.no_sync():
                step()
        quiet_step()
        result["no_sync"] = _median_step(quiet_step, steps)
        result["allreduce"] = _allreduce_alone(library, model, dist, steps)
        if library == "flambeau":
            before = model._get_ddp_logging_data()
            for _ in range(steps):
                step()
            after = model._get_ddp_logging_data()
            syncs = after["backward_syncs"] - before["backward_syncs"]
            result["waited"] = (after["wait_s"] - before["wait_s"]) / syncs
        everyone = [None] * world
        dist.all_gather_object(everyone, result)
        result = {k: statistics.median(r[k] for r in everyone) for k in result}
        dist.destroy_process_group()
    if int(os.environ.get("RANK", "0")) == 0:
        print("RESULT " + json.dumps(result), flush=True)


def _allreduce_alone(library: str, model, dist, steps: int) -> float:
    """Median time to all-reduce every gradient, in DDP's buckets (flambeau) or 25 MiB flat buckets (torch)."""
    if library == "flambeau":
        buffers = [b.buffer for b in model._reducer.buckets]
    else:
        import torch

        grads = [p.grad.reshape(-1) for p in model.parameters() if p.grad is not None]
        flat = torch.cat(grads)
        cap = 25 * 1024 * 1024 // flat.element_size()
        buffers = [flat[i:i + cap].clone() for i in range(0, flat.numel(), cap)]

    def reduce_all():
        for b in buffers:
            dist.all_reduce(b)

    dist.barrier()
    reduce_all()
    return _median_step(reduce_all, steps)


# --- the driver ------------------------------------------------------------------------------------
def measure(library: str, name: str, nproc: int, steps: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    command = [sys.executable, "-m", "flambeau.distributed.run", "--nproc-per-node", str(nproc), __file__,
               "--worker", library, name, "--steps", str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=HERE, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(lines[-1][len("RESULT "):])


def hidden_share(r: dict) -> float:
    exposed = max(0.0, r["step"] - r["no_sync"])
    return max(0.0, 1.0 - exposed / r["allreduce"]) if r["allreduce"] > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps, RESULTS.md untouched")
    parser.add_argument("--only", choices=MODELS, action="append", help="run only these models")
    parser.add_argument("--worker", nargs=2, metavar=("LIBRARY", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, steps=args.steps)
        return
    steps = args.steps or (5 if args.quick else 15)
    r = _harness.Report("ddp", "Data-parallel training, 1 vs 2 ranks of 1 thread (benchmarks/ddp.py)", repeat=1)
    if r.torch is None:
        raise SystemExit("benchmarks/ddp.py needs torch: it compares with torch's DDP (gloo)")
    r.header()
    from train import MODELS as SPECS

    for name in args.only or MODELS:
        spec = SPECS[name]
        runs = {(lib, n): measure(lib, name, n, steps) for n in (1, 2) for lib in ("flambeau", "torch")}
        one_fl, one_th = runs["flambeau", 1], runs["torch", 1]
        two_fl, two_th = runs["flambeau", 2], runs["torch", 2]
        r.add_row(f"{spec.title}, 1 rank", f"batch {spec.batch}, 1 thread", one_fl["step"], one_th["step"])
        r.add_row(f"{spec.title}, 2 ranks DDP", f"batch {spec.batch} per rank", two_fl["step"], two_th["step"],
                  f"scaling efficiency flambeau {one_fl['step'] / two_fl['step']:.2f}, "
                  f"torch {one_th['step'] / two_th['step']:.2f}")
        r.add_row(f"{spec.title}, 2 ranks no_sync", f"batch {spec.batch} per rank", two_fl["no_sync"],
                  two_th["no_sync"], "the same step without communication")
        r.add_row(f"{spec.title}, all-reduce alone", "all gradients, float32", two_fl["allreduce"],
                  two_th["allreduce"], "nothing else running")
        r.add_note(f"{spec.title}: share of all-reduce time hidden behind backward: flambeau "
                   f"{hidden_share(two_fl):.0%}, torch {hidden_share(two_th):.0%}; flambeau's backward waited "
                   f"{_harness.fmt_time(two_fl['waited'])} per step for its buckets")
    r.add_note("Ranks started by python -m flambeau.distributed.run (MPICH's mpiexec) with 1 thread each; torch's "
               "ranks join with init_process_group('gloo'). Hidden share = 1 - (t_sync - t_no_sync) / t_allreduce.")
    if not args.quick:
        r.finish()


if __name__ == "__main__":
    main()
