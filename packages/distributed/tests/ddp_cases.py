"""The training runs of test_ddp.py, written once for the ranks (rank_ddp.py) and for the references.

A case builds a float64 model, feeds it deterministic batches and takes a few SGD steps with
momentum. ``rank_batch(case, step, r)`` is rank r's share of step ``step``; the reference trains
the same model (built from seed 0, which is what DDP broadcasts from rank 0) on what the ranks
saw together, so that after the steps its parameters must equal every rank's.
"""

from __future__ import annotations

import numpy as np

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F

WORLD = 2
STEPS = 4
BATCH = 3  # per rank
LR, MOMENTUM = 0.05, 0.9


class MLP(nn.Module):
    """(N, 6) -> (N, 3); ``with_unused`` adds an ``extra`` layer used only where ``use_extra`` and a ``never``
    layer that is never used."""

    def __init__(self, with_unused: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 16)
        if with_unused:
            self.extra = nn.Linear(16, 16)
            self.never = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x, use_extra: bool = False):
        h = fl.tanh(self.fc2(fl.tanh(self.fc1(x))))
        if use_extra:
            h = h + fl.tanh(self.extra(h))
        return self.head(h)


class ConvBN(nn.Module):
    """(N, 2, 6, 6) -> (N, 3): a convolution, batch norm over the group's batch, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.head(F.relu(self.bn(self.conv(x))).flatten(1))


def build(case: str, seed: int) -> nn.Module:
    fl.set_default_dtype(fl.float64)
    fl.manual_seed(seed)
    return ConvBN() if case == "syncbn" else MLP(with_unused=case == "unused")


def _global_batch(case: str, step: int, size: int):
    rng = np.random.default_rng(100 + step)
    shape = (size, 2, 6, 6) if case == "syncbn" else (size, 6)
    return rng.standard_normal(shape), rng.standard_normal((size, 3))


def rank_batch(case: str, step: int, r: int, micro: int = 0):
    """Rank r's inputs and targets at ``step`` (micro-batch ``micro`` for no_sync)."""
    x, y = _global_batch(case, 10 * step + micro, WORLD * BATCH)
    part = slice(r * BATCH, (r + 1) * BATCH)
    return fl.from_numpy(x[part].copy()), fl.from_numpy(y[part].copy())


def loss_of(model, x, y, use_extra: bool = False):
    out = model(x, use_extra) if use_extra else model(x)
    return F.mse_loss(out, y)


def sampler_dataset():
    """11 samples: with 2 replicas the sampler pads to 12 and batches of 4 leave a last batch of 2."""
    rng = np.random.default_rng(7)
    return fl.from_numpy(rng.standard_normal((11, 6))), fl.from_numpy(rng.standard_normal((11, 3)))


def reference(case: str) -> nn.Module:
    """The model one process gets by training on what the ranks saw together (see each case)."""
    model = build(case, 0)
    optimizer = fl.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    if case == "sampler":
        from flambeau.data.distributed import DistributedSampler

        xs, ys = sampler_dataset()
        samplers = [DistributedSampler(range(len(xs)), WORLD, r, shuffle=True, seed=3) for r in range(WORLD)]
        for epoch in range(2):
            for s in samplers:
                s.set_epoch(epoch)
            shares = [list(s) for s in samplers]
            for start in range(0, len(shares[0]), 4):
                index = fl.tensor(sum((share[start:start + 4] for share in shares), []))
                optimizer.zero_grad()
                loss_of(model, xs[index], ys[index]).backward()
                optimizer.step()
        return model
    for step in range(STEPS):
        optimizer.zero_grad()
        if case == "no_sync":  # the mean over the concatenated batch of each micro-batch, summed
            for micro in range(2):
                x, y = _concat(case, step, micro)
                loss_of(model, x, y).backward()
        elif case == "unused":  # rank 0 uses the extra layer, rank 1 does not: the mean of their losses
            loss = sum(loss_of(model, *rank_batch(case, step, r), use_extra=r == 0) for r in range(WORLD)) / WORLD
            loss.backward()
        else:
            loss_of(model, *_concat(case, step)).backward()
        optimizer.step()
    return model


def _concat(case: str, step: int, micro: int = 0):
    parts = [rank_batch(case, step, r, micro) for r in range(WORLD)]
    return fl.cat([p[0] for p in parts]), fl.cat([p[1] for p in parts])


def state(model: nn.Module) -> dict[str, np.ndarray]:
    """Parameters, gradients (``grad:`` prefix, where not None) and buffers, as numpy arrays."""
    out = {name: t.detach().numpy().copy() for name, t in model.state_dict().items()}
    for name, p in model.named_parameters():
        if p.grad is not None:
            out[f"grad:{name}"] = p.grad.numpy().copy()
    return out
