"""DistributedSampler: the share of a dataset one replica (process) of a data-parallel job reads."""

from __future__ import annotations

import math
from collections.abc import Iterator

import flambeau as fl
from flambeau.data.sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """Restricts loading to the share of the dataset that replica ``rank`` of ``num_replicas`` reads.

    Every replica builds the same (optionally shuffled, from ``seed + epoch``) order of the keys,
    pads it by repeating its head to a multiple of ``num_replicas`` (or, with ``drop_last``, cuts
    the tail), and takes every ``num_replicas``-th key starting at ``rank``. Call
    :meth:`set_epoch` at the start of each epoch so that the shuffle changes between epochs.

    With ``num_replicas`` or ``rank`` left out they come from the default process group of
    ``flambeau.distributed`` (the world size and this process's rank), which must be initialised;
    flambeau-data does not depend on flambeau-distributed, which is imported only then.

    Every replica reads ``ceil(len(dataset) / num_replicas)`` keys (``drop_last=False``), so with a
    DataLoader of the same ``batch_size`` every replica runs the same number of steps, and the
    last batch has the same (possibly smaller) size on every replica: what
    ``DistributedDataParallel`` needs, since every step's gradients are averaged over all of them.

    Args:
        dataset: the dataset (with ``__len__``).
        num_replicas: the number of replicas (processes) in the job (default: the world size).
        rank: this replica's rank, in ``[0, num_replicas - 1]`` (default: this process's rank).
        shuffle: shuffle the keys (the same way on every replica).
        seed: the seed of the shuffle, the same on every replica.
        drop_last: drop the tail so that every replica gets the same number of distinct keys,
            instead of padding with repeated keys.
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            dist = _process_group()
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or isinstance(num_replicas, bool) or num_replicas < 1:
            raise ValueError(f"num_replicas must be a positive int, got {num_replicas!r}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(self.dataset)
        if self.drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        """This replica's keys: every ``num_replicas``-th of the (shuffled, padded or cut) order, from ``rank``."""
        n = len(self.dataset)
        if self.shuffle:
            g = fl.Generator().manual_seed(self.seed + self.epoch)
            indices = fl.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch, which changes the shuffle (``seed + epoch``); call it before each epoch."""
        self.epoch = epoch


def _process_group():
    """``flambeau.distributed`` with an initialised default group, else torch's RuntimeError."""
    try:
        import flambeau.distributed as dist
    except ImportError:
        dist = None
    if dist is None or not dist.is_available():
        raise RuntimeError("Requires distributed package to be available: install flambeau-distributed "
                           "(pip install flambeau-distributed), or pass num_replicas and rank")
    if not dist.is_initialized():
        raise RuntimeError("Default process group has not been initialized, please make sure to call "
                           "flambeau.distributed.init_process_group, or pass num_replicas and rank")
    return dist
