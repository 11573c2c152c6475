"""Rank program of test_collectives.py's CUDA test: CUDA tensors move through host memory (run under
numba's CUDA simulator, NUMBA_ENABLE_CUDASIM=1, on machines without a GPU). Usage: ``rank_cuda.py OUT_DIR``."""

from __future__ import annotations

import sys

import numpy as np
from rank_checks import RESULTS, check, write

import flambeau as fl
import flambeau.distributed as dist

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()


def cuda_all_reduce_broadcast_gather():
    t = fl.full((4,), float(rank + 1), device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert t.device.type == "cuda" and t.cpu().tolist() == [(world + 1) / 2] * 4
    b = fl.full((3,), float(rank), device="cuda")
    work = dist.broadcast(b, src=world - 1, async_op=True)
    work.wait()
    assert b.cpu().tolist() == [float(world - 1)] * 3
    out = fl.zeros(world, 2, device="cuda")
    dist.all_gather_into_tensor(out, fl.full((2,), float(rank), device="cuda"))
    np.testing.assert_array_equal(out.cpu().numpy(), np.repeat(np.arange(world, dtype=np.float32), 2).reshape(world, 2))


if fl.cuda.is_available():
    check("cuda_all_reduce_broadcast_gather")(cuda_all_reduce_broadcast_gather)
else:
    RESULTS["cuda_all_reduce_broadcast_gather"] = "skipped: flambeau.cuda is not available (no numba-cuda)"
write(sys.argv[1], rank)
dist.destroy_process_group()
