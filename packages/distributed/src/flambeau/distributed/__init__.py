"""Data-parallel training across processes: torch.distributed's API over MPI (mpi4py and MPICH), and NCCL for GPUs.

Start N processes with ``python -m flambeau.distributed.run --nproc-per-node N train.py`` (or
``mpiexec -n N python train.py``); each calls :func:`init_process_group`, wraps its model in
:class:`DistributedDataParallel` and reads its share of the data through
``flambeau.data.distributed.DistributedSampler``::

    import flambeau.distributed as dist
    from flambeau.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    model = DDP(Net())                        # parameters broadcast from rank 0
    loss_fn(model(x), y).backward()           # gradients averaged across ranks, behind backward
    optimizer.step()

With ``init_process_group("nccl")`` (or ``"cpu:mpi,cuda:nccl"``) CUDA tensors go through NCCL on the
current CUDA stream (Note [Backends] in ``_process_group.py``, ``_nccl.py``); MPI still starts the
ranks and carries objects. Collectives work on the tensors' own memory (Note [Zero copy] in
``_collectives.py``); every
operation can be asynchronous (``async_op=True`` returns a :class:`Work`); a collective that
some rank never joins fails after the group's ``timeout`` with an error naming that rank (Note
[Which rank did not arrive] in ``_runtime.py``). Importing this package does not load MPI: that
happens in :func:`init_process_group`, and :class:`DistributedDataParallel` and
:class:`SyncBatchNorm` import flambeau.nn on first use (so the launcher starts quickly).
"""

from flambeau.distributed._collectives import (
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    gather,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    send,
)
from flambeau.distributed._objects import all_gather_object, broadcast_object_list
from flambeau.distributed._process_group import (
    Backend,
    GroupMember,
    ProcessGroup,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    new_group,
)
from flambeau.distributed._runtime import DistBackendError, DistributedError, Work

__all__ = [
    "Backend", "DistBackendError", "DistributedDataParallel", "DistributedError", "GroupMember", "ProcessGroup",
    "ReduceOp", "SyncBatchNorm", "Work",
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all", "all_to_all_single",
    "barrier", "broadcast", "broadcast_object_list", "default_pg_timeout", "destroy_process_group", "gather",
    "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank", "get_world_size",
    "group", "init_process_group", "irecv", "is_available", "is_gloo_available", "is_initialized",
    "is_mpi_available", "is_nccl_available", "isend", "new_group", "recv", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "scatter", "send",
]


def __getattr__(name: str):
    # The modules that need flambeau.nn load on first use (PEP 562).
    if name == "DistributedDataParallel":
        from flambeau.distributed._ddp import DistributedDataParallel

        return DistributedDataParallel
    if name == "SyncBatchNorm":
        from flambeau.distributed._sync_batchnorm import SyncBatchNorm

        return SyncBatchNorm
    raise AttributeError(f"module 'flambeau.distributed' has no attribute {name!r}")
