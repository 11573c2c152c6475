"""Optimizer benchmarks: one ``optimizer.step()`` in flambeau against PyTorch, 2 threads each.

The gradients are fixed (set once), so a row times the update alone, over
- the parameters of an MLP 784-1024-1024-10 (three weights and three biases, 1.86 M float32), and
- 100 small parameters (50 of 64x64 and 50 of 64, float32): the per-parameter overhead,
for SGD with momentum and Adam. torch runs its default implementation (on the CPU, its
single-tensor for-loop) and, in a second row, ``foreach=True``. A last row times a whole MLP
training step (zero_grad, forward, cross-entropy, backward, SGD-momentum step) when flambeau.nn
has the layers.

    nox -s bench                           # all benchmark scripts, results into RESULTS.md
    python benchmarks/optim.py --quick     # fewer repeats, RESULTS.md untouched
"""

from __future__ import annotations

import argparse

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl
import flambeau.optim as optim

MLP_SHAPES = [(1024, 784), (1024,), (1024, 1024), (1024,), (10, 1024), (10,)]
SMALL_SHAPES = [(64, 64), (64,)] * 50


def _params(shapes, seed=0):
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [rng.standard_normal(s).astype(np.float32) * 1e-3 for s in shapes]
    return values, grads


def bench_step(r: _harness.Report, torch, name: str, kw: dict, shapes, label: str) -> None:
    values, grads = _params(shapes)
    fp = [fl.tensor(v, requires_grad=True) for v in values]
    for p, g in zip(fp, grads):
        p.grad = fl.tensor(g)
    fopt = getattr(optim, name)(fp, **kw)
    th_default = th_foreach = None
    if torch:
        tp = [torch.tensor(v, requires_grad=True) for v in values]
        for p, g in zip(tp, grads):
            p.grad = torch.tensor(g)
        topt = getattr(torch.optim, name)(tp, **kw)
        tp2 = [torch.tensor(v, requires_grad=True) for v in values]
        for p, g in zip(tp2, grads):
            p.grad = torch.tensor(g)
        topt2 = getattr(torch.optim, name)(tp2, foreach=True, **kw)
        th_default, th_foreach = topt.step, topt2.step
    op = f"{name}({', '.join(f'{k}={v}' for k, v in kw.items())}).step"
    r.compare(op, label, fopt.step, th_default, note="torch default (for-loop)")
    r.compare(op, label, fopt.step, th_foreach, note="torch foreach=True")


def bench_training_step(r: _harness.Report, torch) -> None:
    try:
        import flambeau.nn as nn
        import flambeau.nn.functional as F

        nn.Linear, F.cross_entropy  # noqa: B018
    except (ImportError, AttributeError) as e:
        r.skip("MLP training step", "batch 128 float32", f"flambeau.nn not ready ({e})")
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)

    def build(lib):
        return lib.nn.Sequential(lib.nn.Linear(784, 1024), lib.nn.ReLU(), lib.nn.Linear(1024, 1024), lib.nn.ReLU(),
                                 lib.nn.Linear(1024, 10))

    fmodel = build(fl)
    fopt = optim.SGD(fmodel.parameters(), lr=0.01, momentum=0.9)
    fx, fy = fl.tensor(x), fl.tensor(y)

    def fl_step():
        fopt.zero_grad()
        F.cross_entropy(fmodel(fx), fy).backward()
        fopt.step()

    th_step = None
    if torch:
        tmodel = build(torch)
        with fl.no_grad():
            for fp, tp in zip(fmodel.parameters(), tmodel.parameters()):
                fp.copy_(fl.tensor(tp.detach().numpy()))
        topt = torch.optim.SGD(tmodel.parameters(), lr=0.01, momentum=0.9)
        tx, ty = torch.tensor(x), torch.tensor(y)

        def th_step():
            topt.zero_grad()
            torch.nn.functional.cross_entropy(tmodel(tx), ty).backward()
            topt.step()

    r.compare("MLP 784-1024-1024-10 training step", "batch 128 float32, SGD momentum", fl_step, th_step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; do not write RESULTS.md")
    args = parser.parse_args()
    r = _harness.Report("optim", "Optimizers (benchmarks/optim.py)", repeat=3 if args.quick else 9,
                        target=0.05 if args.quick else 0.2)
    r.header()
    for name, kw in (("SGD", dict(lr=0.01, momentum=0.9)), ("Adam", dict(lr=1e-3))):
        bench_step(r, r.torch, name, kw, MLP_SHAPES, "MLP 784-1024-1024-10 params")
        bench_step(r, r.torch, name, kw, SMALL_SHAPES, "100 small params")
    bench_training_step(r, r.torch)
    r.add_note("One step with fixed gradients; flambeau runs one fused numba kernel per parameter, split over "
               "2 threads for tensors of 128k elements or more.")
    if not args.quick:
        r.finish()


if __name__ == "__main__":
    main()
