"""flambeau.data: datasets, samplers and a parallel DataLoader, as ``torch.utils.data``.

A :class:`Dataset` maps keys to samples (or, as an :class:`IterableDataset`, streams them); a
:class:`Sampler` decides which keys are loaded in which order; a :class:`DataLoader` fetches the
samples, collates them into batches (:func:`default_collate`) and, with ``num_workers > 0``, does so
in worker processes started through :mod:`flambeau.multiprocessing`, whose batches come back
through shared memory. :mod:`flambeau.data.datasets` reads a few classic datasets from local files.

    import flambeau as fl
    from flambeau.data import DataLoader, TensorDataset

    ds = TensorDataset(fl.randn(100, 3), fl.arange(100))
    for x, y in DataLoader(ds, batch_size=32, shuffle=True, num_workers=2):
        ...
"""

from __future__ import annotations

from flambeau.data._collate import collate, default_collate, default_collate_fn_map, default_convert
from flambeau.data._worker import WorkerInfo, get_worker_info
from flambeau.data.dataloader import DataLoader
from flambeau.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from flambeau.data.distributed import DistributedSampler
from flambeau.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "DataLoader", "get_worker_info",
           "WorkerInfo", "default_collate", "default_convert", "collate", "default_collate_fn_map"]
