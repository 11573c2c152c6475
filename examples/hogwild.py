"""Hogwild!: several processes train one model in shared memory, without locks.

The model's parameters are moved into shared memory (``model.share_memory()``); each worker
process gets the same model (through ``fork``, or pickled as handles under ``spawn``) and its own
SGD optimizer, trains on its shard of the data and updates the shared parameters in place, with
no lock: updates of different processes may interleave, which SGD tolerates (Niu et al., 2011;
section 5.4 of the PyTorch paper). The data are the 8x8 handwritten digits shipped in flambeau-data
(``flambeau.data.datasets.Digits``; nothing is downloaded). For comparison the same model is trained
in a single process on all the data for the same number of epochs; the two test accuracies should
match.

Run it with ``python examples/hogwild.py [--procs 4] [--epochs 20]``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import flambeau as fl
import flambeau.multiprocessing as mp
import flambeau.nn as nn
import flambeau.nn.functional as F
import flambeau.optim as optim
from flambeau.data.datasets import Digits


def load_data(test_fraction: float = 0.25, seed: int = 0):
    """Digits as float32 tensors in [0, 1] (n, 64) and int64 labels, split by a seeded shuffle."""
    digits = Digits(split="all")
    x = fl.stack([digits[i][0].flatten() for i in range(len(digits))])
    y = fl.tensor([digits[i][1] for i in range(len(digits))])
    order = fl.randperm(len(x), generator=fl.Generator().manual_seed(seed))
    n_test = int(round(test_fraction * len(x)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def make_model(seed: int) -> nn.Module:
    fl.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def train(rank: int, model: nn.Module, x: fl.Tensor, y: fl.Tensor, epochs: int, batch_size: int, lr: float,
          seed: int) -> None:
    """SGD on ``(x, y)``; ``model``'s parameters may be shared with other processes doing the same."""
    optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.5)
    rng = np.random.default_rng(seed + rank)
    n = x.shape[0]
    model.train()
    for _ in range(epochs):
        order = fl.from_numpy(rng.permutation(n))
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()


def accuracy(model: nn.Module, x: fl.Tensor, y: fl.Tensor) -> float:
    model.eval()
    with fl.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def hogwild(procs: int, epochs: int, batch_size: int, lr: float, seed: int, start_method: str, data) -> nn.Module:
    """Train one shared model with ``procs`` processes, each on its own shard of the training set."""
    x_train, y_train = data[0], data[1]
    model = make_model(seed)
    model.share_memory()  # parameters in shared memory: every process updates the same numbers
    ctx = mp.get_context(start_method)
    shards = np.array_split(np.arange(x_train.shape[0]), procs)
    workers = []
    for rank, shard in enumerate(shards):
        idx = fl.from_numpy(shard)
        p = ctx.Process(target=train, args=(rank, model, x_train[idx], y_train[idx], epochs, batch_size, lr, seed))
        p.start()
        workers.append(p)
    for p in workers:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"a Hogwild worker (pid {p.pid}) exited with code {p.exitcode}")
        p.close()
    return model


def main(argv: list[str] | None = None) -> tuple[float, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start-method", default="fork", choices=mp.get_all_start_methods())
    args = parser.parse_args(argv)
    data = load_data(seed=args.seed)
    x_test, y_test = data[2], data[3]

    t0 = time.perf_counter()
    shared = hogwild(args.procs, args.epochs, args.batch_size, args.lr, args.seed, args.start_method, data)
    t_hog = time.perf_counter() - t0
    acc_hog = accuracy(shared, x_test, y_test)

    t0 = time.perf_counter()
    single = make_model(args.seed)
    train(0, single, data[0], data[1], args.epochs, args.batch_size, args.lr, args.seed)
    t_single = time.perf_counter() - t0
    acc_single = accuracy(single, x_test, y_test)

    print(f"Hogwild, {args.procs} processes ({args.start_method}): test accuracy {acc_hog:.3f} in {t_hog:.1f} s")
    print(f"single process:                 test accuracy {acc_single:.3f} in {t_single:.1f} s")
    return acc_hog, acc_single


if __name__ == "__main__":
    main(sys.argv[1:])
