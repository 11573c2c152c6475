"""Rank program of test_ddp.py: the cases of ddp_cases.py trained with DistributedDataParallel.

Every rank builds its model from its *own* seed (DDP must broadcast rank 0's parameters), trains,
and saves parameters, gradients and buffers as ``<case>_rank<r>.npz``. Usage:
``rank_ddp.py OUT_DIR CASE...``.
"""

from __future__ import annotations

import sys

import ddp_cases as cases
import numpy as np

import flambeau as fl
import flambeau.distributed as dist
from flambeau.data import DataLoader, TensorDataset
from flambeau.data.distributed import DistributedSampler
from flambeau.nn.parallel import DistributedDataParallel as DDP

out = sys.argv[1]
dist.init_process_group("mpi")
rank = dist.get_rank()
assert dist.get_world_size() == cases.WORLD


def train(case: str) -> dict:
    model = cases.build(case, seed=rank)  # rank 1 differs until DDP broadcasts rank 0's
    options = {
        "basic": {},
        "buckets_view": {"bucket_cap_mb": 0.0005, "gradient_as_bucket_view": True},
        "no_sync": {"bucket_cap_mb": 0.002},
        "unused": {"find_unused_parameters": True, "bucket_cap_mb": 0.002},
        "sampler": {},
        "syncbn": {},
    }[case]
    if case == "syncbn":
        model = dist.SyncBatchNorm.convert_sync_batchnorm(model)
    ddp = DDP(model, **options)
    optimizer = fl.optim.SGD(ddp.parameters(), lr=cases.LR, momentum=cases.MOMENTUM)
    if case == "sampler":
        xs, ys = cases.sampler_dataset()
        sampler = DistributedSampler(TensorDataset(xs, ys), shuffle=True, seed=3)  # replicas from the group
        loader = DataLoader(TensorDataset(xs, ys), batch_size=4, sampler=sampler)
        sizes = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                sizes.append(len(x))
                optimizer.zero_grad()
                cases.loss_of(ddp, x, y).backward()
                optimizer.step()
        assert sizes == [4, 2, 4, 2], sizes
        return cases.state(model)
    for step in range(cases.STEPS):
        optimizer.zero_grad(set_to_none=case != "buckets_view")
        if case == "no_sync":
            with ddp.no_sync():
                cases.loss_of(ddp, *cases.rank_batch(case, step, rank, 0)).backward()
            cases.loss_of(ddp, *cases.rank_batch(case, step, rank, 1)).backward()
        else:
            x, y = cases.rank_batch(case, step, rank)
            cases.loss_of(ddp, x, y, use_extra=case == "unused" and rank == 0).backward()
        if case == "buckets_view":
            views = ddp._reducer.views
            assert all(p.grad is v for p, v in zip(ddp._reducer.params, views)), "grads are not bucket views"
            assert len(ddp._reducer.buckets) > 2, len(ddp._reducer.buckets)
        optimizer.step()
    result = cases.state(model)
    stats = ddp._get_ddp_logging_data()
    result["stats:backward_syncs"] = np.array(stats["backward_syncs"])
    return result


for case in sys.argv[2:]:
    np.savez(f"{out}/{case}_rank{rank}.npz", **train(case))
dist.destroy_process_group()
