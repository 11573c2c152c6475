"""Rank program of test_nccl.py's real-GPU test: the ``"nccl"`` backend for real, checked against numpy.

Needs a CUDA device per rank and libnccl; written for any world size and run with one rank on a
machine with one GPU (``python -m flambeau.distributed.run --nproc-per-node 1 rank_nccl.py OUT_DIR``).
Every collective on CUDA tensors of float32, float64, int64, float16 and bfloat16 (and int32, uint8,
bool for all_reduce), async work handles and stream order, new_group, the composite backend, and
DistributedDataParallel against plain training in float64. Prints each check's outcome.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from rank_checks import RESULTS, check, write

import flambeau as fl
import flambeau.distributed as dist

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
fl.cuda.set_device(local_rank)
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
R = dist.ReduceOp
DTYPES = [fl.float32, fl.float64, fl.int64, fl.float16, fl.bfloat16]
TOL = {fl.float16: 1e-3, fl.bfloat16: 1e-2}


def values(r: int, shape=(2, 3)) -> np.ndarray:
    """Rank ``r``'s small integers (exact in every dtype, products stay small)."""
    return (np.arange(int(np.prod(shape))).reshape(shape) % 3 + 1 + r).astype(np.float64)


def cuda(a: np.ndarray, dtype) -> fl.Tensor:
    return fl.tensor(np.ascontiguousarray(a, dtype=np.float64), device="cuda").to(dtype)


def host(t: fl.Tensor) -> np.ndarray:
    return t.to(fl.float64).cpu().numpy()


def close(got: fl.Tensor, want: np.ndarray, dtype, what: str) -> None:
    np.testing.assert_allclose(host(got), want, rtol=TOL.get(dtype, 1e-12), atol=0, err_msg=f"{what} {dtype}")


ALL = np.stack([values(r) for r in range(world)])
REDUCED = {R.SUM: ALL.sum(0), R.PRODUCT: ALL.prod(0), R.MAX: ALL.max(0), R.MIN: ALL.min(0), R.AVG: ALL.mean(0)}


@check("all_reduce_every_dtype_and_op")
def _():
    for dtype in DTYPES + [fl.int32, fl.uint8]:
        for op, want in REDUCED.items():
            if op is R.AVG and not dtype.is_floating_point:
                continue
            t = cuda(values(rank), dtype)
            dist.all_reduce(t, op=op)
            close(t, want, dtype, f"all_reduce {op}")
    b = fl.tensor([rank == 0, False, True], device="cuda")
    dist.all_reduce(b)  # SUM of bool: or
    assert b.cpu().tolist() == [True, False, True]


@check("reduce_broadcast")
def _():
    for dtype in DTYPES:
        t = cuda(values(rank), dtype)
        dist.reduce(t, dst=0, op=R.SUM)
        close(t, REDUCED[R.SUM] if rank == 0 else values(rank), dtype, "reduce")
        t = cuda(values(rank), dtype)
        dist.broadcast(t, src=world - 1)
        close(t, values(world - 1), dtype, "broadcast")


@check("all_gather_forms")
def _():
    for dtype in DTYPES:
        outs = [cuda(np.zeros((2, 3)), dtype) for _ in range(world)]
        dist.all_gather(outs, cuda(values(rank), dtype))
        for r in range(world):
            close(outs[r], values(r), dtype, "all_gather")
        out = cuda(np.zeros((world, 2, 3)), dtype)
        dist.all_gather_into_tensor(out, cuda(values(rank), dtype))
        close(out, ALL, dtype, "all_gather_into_tensor")
        out = cuda(np.zeros((world, 2, 3)), dtype)
        out[rank].copy_(cuda(values(rank), dtype))
        dist.all_gather_into_tensor(out, out[rank])  # in place
        close(out, ALL, dtype, "all_gather_into_tensor in place")


@check("reduce_scatter_forms")
def _():
    for dtype in DTYPES:
        inputs = [cuda(values(rank) * (i + 1), dtype) for i in range(world)]
        out = cuda(np.zeros((2, 3)), dtype)
        dist.reduce_scatter(out, inputs, op=R.SUM)
        close(out, REDUCED[R.SUM] * (rank + 1), dtype, "reduce_scatter")
        big = cuda(np.concatenate([values(rank) * (i + 1) for i in range(world)]), dtype)
        out = cuda(np.zeros((2, 3)), dtype)
        dist.reduce_scatter_tensor(out, big, op=R.MAX)
        close(out, REDUCED[R.MAX] * (rank + 1), dtype, "reduce_scatter_tensor")


@check("gather_scatter_all_to_all")
def _():
    for dtype in DTYPES:
        root = world - 1
        outs = [cuda(np.zeros((2, 3)), dtype) for _ in range(world)] if rank == root else None
        dist.gather(cuda(values(rank), dtype), outs, dst=root)
        if rank == root:
            for r in range(world):
                close(outs[r], values(r), dtype, "gather")
        t = cuda(np.zeros((2, 3)), dtype)
        dist.scatter(t, [cuda(values(r) * 2, dtype) for r in range(world)] if rank == 0 else None, src=0)
        close(t, values(rank) * 2, dtype, "scatter")
        ins = [cuda(values(rank) + 10 * j, dtype) for j in range(world)]
        outs = [cuda(np.zeros((2, 3)), dtype) for _ in range(world)]
        dist.all_to_all(outs, ins)
        for r in range(world):
            close(outs[r], values(r) + 10 * rank, dtype, "all_to_all")
        inp = cuda(np.concatenate([values(rank) + 10 * j for j in range(world)]), dtype)
        out = cuda(np.zeros((2 * world, 3)), dtype)
        dist.all_to_all_single(out, inp)
        close(out, np.concatenate([values(r) + 10 * rank for r in range(world)]), dtype, "all_to_all_single")


def send_recv():
    t = cuda(values(rank), fl.float32)
    if rank == 0:
        dist.send(t, dst=1)
    elif rank == 1:
        assert dist.recv(t, src=0) == 0
        close(t, values(0), fl.float32, "recv")


if world >= 2:
    check("send_recv")(send_recv)
else:
    RESULTS["send_recv"] = "skipped: a world of one rank has no peer"


@check("async_work_on_a_side_stream_and_no_host_sync")
def _():
    n = 64 if fl.cuda.is_simulator() else 1 << 22  # (the simulator runs this program's checks of the Python)
    side = fl.cuda.Stream()
    side.wait_stream(fl.cuda.current_stream())
    with fl.cuda.stream(side):
        t = fl.ones(n, device="cuda")
        for _ in range(20):  # keep the side stream busy, so that an unordered read would see old values
            t = t * 1.0001
        t.fill_(float(rank + 1))
        syncs = fl.cuda.host_sync_count()
        work = dist.all_reduce(t, async_op=True)
        assert fl.cuda.host_sync_count() == syncs, "all_reduce synchronised the host"
    work.wait()  # the default stream waits for the side stream's all-reduce; the host does not
    assert fl.cuda.host_sync_count() == syncs
    doubled = t * 2  # on the default stream, after the wait
    want = 2.0 * sum(range(1, world + 1))
    assert float(doubled.min()) == want == float(doubled.max())
    fl.cuda.synchronize()
    assert work.is_completed() and work.is_success() and work.result() == [t]
    assert dist.all_reduce(t) is None


@check("barrier_and_blocking_wait")
def _():
    dist.barrier()
    t = fl.ones(3, device="cuda")
    work = dist.all_reduce(t, async_op=True)
    work.wait(timeout=30.0)  # on the host, polling the communicator
    assert work.is_completed() and t.cpu().tolist() == [float(world)] * 3


@check("new_group")
def _():
    g = dist.new_group(list(range(world)))
    assert dist.get_backend(g) == "nccl"
    t = cuda(values(rank), fl.float64)
    dist.all_reduce(t, group=g, op=R.MAX)
    close(t, REDUCED[R.MAX], fl.float64, "all_reduce on a new group")
    dist.destroy_process_group(g)


@check("nccl_refuses_cpu_tensors")
def _():
    try:
        dist.all_reduce(fl.ones(2))
    except RuntimeError as error:
        assert "takes CUDA tensors only" in str(error)
    else:
        raise AssertionError("a CPU tensor with backend 'nccl' did not raise")


@check("composite_backend")
def _():
    dist.destroy_process_group()
    dist.init_process_group("cpu:mpi,cuda:nccl")
    assert dist.get_backend() == "cpu:mpi,cuda:nccl"
    c = fl.full((3,), float(rank + 1))
    dist.all_reduce(c)  # MPI
    assert c.tolist() == [float(sum(range(1, world + 1)))] * 3
    t = cuda(values(rank), fl.float32)
    dist.all_reduce(t)  # NCCL
    close(t, REDUCED[R.SUM], fl.float32, "composite all_reduce")
    objs = [None] * world
    dist.all_gather_object(objs, rank)
    assert objs == list(range(world))
    dist.barrier()
    dist.destroy_process_group()
    dist.init_process_group("nccl")


@check("ddp_matches_plain_training")
def _():
    import flambeau.nn as nn
    import flambeau.optim as optim

    def model():
        fl.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2)).to(device="cuda", dtype=fl.float64)

    rng = np.random.default_rng(0)
    batch = 4
    x = fl.tensor(rng.standard_normal((world * batch, 5)), device="cuda")
    y = fl.tensor(rng.standard_normal((world * batch, 2)), device="cuda")
    ddp = dist.DistributedDataParallel(model(), device_ids=[local_rank])
    plain = model()
    opt_d = optim.SGD(ddp.parameters(), lr=0.1)
    opt_p = optim.SGD(plain.parameters(), lr=0.1)
    mine = slice(rank * batch, (rank + 1) * batch)
    for _step in range(4):
        opt_d.zero_grad()
        ((ddp(x[mine]) - y[mine]) ** 2).mean().backward()
        opt_d.step()
        opt_p.zero_grad()
        ((plain(x) - y) ** 2).mean().backward()
        opt_p.step()
    for (name, p), q in zip(ddp.module.named_parameters(), plain.parameters()):
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)


write(sys.argv[1], rank)
dist.destroy_process_group()
for name, outcome in RESULTS.items():
    print(f"rank {rank} {name}: {'ok' if outcome == 'ok' else 'FAILED'}")
    if outcome != "ok":
        print(outcome)
sys.exit(0 if all(v == "ok" for v in RESULTS.values()) else 1)
