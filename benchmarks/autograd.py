"""Autograd benchmarks: flambeau against PyTorch on the CPU, 2 threads each.

- a chain of 1000 tiny operators (alternating ``y * c + d`` and ``sin``) on a 4-element tensor that
  requires grad, forward + backward: the per-operator cost of recording and running the graph;
- a 784-1024-1024-10 MLP on a batch of 128, written with ``fl.*`` operators (matmul, relu,
  log_softmax, gather), forward + backward.

    nox -s bench                            # all benchmark scripts, results into RESULTS.md
    python benchmarks/autograd.py --quick   # fewer repeats, RESULTS.md untouched
"""

from __future__ import annotations

import argparse

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl
import flambeau.autograd  # noqa: F401  - installs the engine


def chain(lib, x, n: int):
    y = x
    for i in range(n):
        y = y * 1.0001 + 0.0001 if i % 2 else y.sin()
    return y.sum()


def bench_chain(r: _harness.Report, torch, n: int = 1000) -> None:
    x = fl.ones(4, requires_grad=True)
    tx = torch.ones(4, requires_grad=True) if torch else None

    def fl_step():
        chain(fl, x, n).backward()

    def th_step():
        chain(torch, tx, n).backward()

    ops = n + n // 2 + 1  # sin or (mul, add) per step, plus the sum
    t_fl, t_th = r.compare(f"chain of {ops} tiny ops", "4 float32, fwd+bwd", fl_step, th_step if torch else None)
    note = f"per op: flambeau {_harness.fmt_time(t_fl / ops)}"
    if t_th:
        note += f", torch {_harness.fmt_time(t_th / ops)}"
    r.add_note(note)


def mlp_step(params, x, y):
    """A function running one forward + backward of the MLP: works on flambeau and torch tensors alike."""
    def step():
        h = x
        for i in range(3):
            h = h @ params[i] + params[3 + i]
            if i < 2:
                h = h.relu()
        loss = -h.log_softmax(1).gather(1, y).mean()
        loss.backward()
        for p in params:
            p.grad = None
    return step


def bench_mlp(r: _harness.Report, torch) -> None:
    rng = np.random.default_rng(0)
    sizes = [784, 1024, 1024, 10]
    ws = [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32) for i, o in zip(sizes, sizes[1:])]
    bs = [np.zeros(o, np.float32) for o in sizes[1:]]
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    fl_step = mlp_step([fl.tensor(p, requires_grad=True) for p in ws + bs], fl.tensor(x), fl.tensor(y).unsqueeze(1))
    th_step = None
    if torch:
        th_step = mlp_step([torch.tensor(p, requires_grad=True) for p in ws + bs], torch.tensor(x),
                           torch.tensor(y).unsqueeze(1))
    r.compare("MLP 784-1024-1024-10", "batch 128 float32, fwd+bwd", fl_step, th_step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; do not write RESULTS.md")
    args = parser.parse_args()
    r = _harness.Report("autograd", "Autograd (benchmarks/autograd.py)", repeat=3 if args.quick else 9,
                        target=0.05 if args.quick else 0.2)
    r.header()
    bench_chain(r, r.torch)
    bench_mlp(r, r.torch)
    if not args.quick:
        r.finish()


if __name__ == "__main__":
    main()
