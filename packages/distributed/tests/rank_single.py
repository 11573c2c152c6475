"""One plain process (MPI's world of one): init_process_group's checks, errors and re-initialisation.

Run by test_launcher.py as ``python rank_single.py``; prints "all checks passed" or the failures.
"""

from __future__ import annotations

import datetime
import os
import sys

from rank_checks import RESULTS, check, raises

import flambeau as fl
import flambeau.distributed as dist


@check("before_init")
def _():
    assert not dist.is_initialized() and dist.is_available() and dist.is_mpi_available()
    from flambeau.distributed import _nccl

    assert dist.is_nccl_available() == (_nccl.why_unavailable() is None)
    with raises(ValueError, "get_rank", "Default process group has not been initialized"):
        dist.get_rank()
    with raises(ValueError, "all_reduce", "Default process group has not been initialized"):
        dist.all_reduce(fl.ones(2))


@check("backend_and_argument_errors")
def _():
    if not dist.is_nccl_available():
        with raises(RuntimeError, "backend 'nccl' needs NCCL, which is not available", "backend='mpi'"):
            dist.init_process_group("nccl")
        with raises(RuntimeError, "backend 'cpu:mpi,cuda:nccl' needs NCCL"):
            dist.init_process_group("cpu:mpi,cuda:nccl")
    with raises(ValueError, "backend must be 'mpi', 'nccl' or 'cpu:mpi,cuda:nccl'", "'gloo'"):
        dist.init_process_group("gloo")
    with raises(ValueError, "init_method must be None or 'env://'", "tcp://"):
        dist.init_process_group("mpi", init_method="tcp://127.0.0.1:23456")
    with raises(TypeError, "timeout", "datetime.timedelta", "int"):
        dist.init_process_group("mpi", timeout=30)


@check("rank_and_world_size_must_agree_with_mpi")
def _():
    with raises(ValueError, "world_size=2 but MPI started this process as world_size 1", "--nproc-per-node"):
        dist.init_process_group("mpi", world_size=2)
    os.environ["WORLD_SIZE"] = "2"
    try:
        with raises(ValueError, "the environment says WORLD_SIZE=2", "a world of 1", "flambeau.distributed.run"):
            dist.init_process_group("mpi")
    finally:
        del os.environ["WORLD_SIZE"]


@check("init_use_destroy_reinit")
def _():
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=30), rank=0, world_size=1)
    with raises(RuntimeError, "initialize the default process group twice"):
        dist.init_process_group("mpi")
    assert dist.get_rank() == 0 and dist.get_world_size() == 1
    t = fl.arange(4.0)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group()
    dist.barrier()


@check("nn_parallel_and_sampler_defaults")
def _():
    import flambeau.nn as nn
    from flambeau.data.distributed import DistributedSampler
    from flambeau.nn.parallel import DistributedDataParallel

    assert DistributedDataParallel is dist.DistributedDataParallel
    assert nn.SyncBatchNorm is dist.SyncBatchNorm
    sampler = DistributedSampler(range(5), shuffle=False)
    assert (sampler.num_replicas, sampler.rank, list(sampler)) == (1, 0, [0, 1, 2, 3, 4])


@check("ddp_argument_errors")
def _():
    import flambeau.nn as nn

    with raises(ValueError, "device_ids", "leave both None"):
        dist.DistributedDataParallel(nn.Linear(2, 2), device_ids=[0])
    with raises(RuntimeError, "doesn't have any parameter that requires a gradient"):
        dist.DistributedDataParallel(nn.ReLU())
    with raises(ValueError, "bucket_cap_mb must be positive"):
        dist.DistributedDataParallel(nn.Linear(2, 2), bucket_cap_mb=0)


@check("ddp_reports_parameters_without_gradient")
def _():
    import flambeau.nn as nn

    model = dist.DistributedDataParallel(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)))
    model(fl.ones(1, 2))  # a forward without backward: nothing to reduce, no error
    model(fl.ones(1, 2)).sum().backward()
    model(fl.ones(1, 2))
    model.module[0].weight.sum().backward()  # only one parameter gets a gradient
    with raises(RuntimeError, "Expected to have finished reduction in the prior iteration",
                "find_unused_parameters=True", "rank 0: 0.bias, 1.weight, 1.bias"):
        model(fl.ones(1, 2))


dist.destroy_process_group()
failed = {k: v for k, v in RESULTS.items() if v != "ok"}
for name, trace in failed.items():
    print(f"FAILED {name}\n{trace}")
print("all checks passed" if not failed else f"{len(failed)} checks failed")
sys.exit(1 if failed else 0)
