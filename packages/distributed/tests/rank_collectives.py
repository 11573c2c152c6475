"""Rank program of test_collectives.py: every collective on 2+ ranks against a numpy reference.

Rank r's input is a deterministic function of r (``data(r, ...)``), so every rank can compute what
the others sent and the expected result with numpy. Usage: ``rank_collectives.py OUT_DIR``.
"""

from __future__ import annotations

import datetime
import os
import sys

import numpy as np
from rank_checks import check, raises, write

import flambeau as fl
import flambeau.distributed as dist

out = sys.argv[1]
dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def data(r: int, dtype: str, n: int = 7, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(1000 * seed + r)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.startswith(("int", "uint")):
        return rng.integers(1, 4, n).astype(dtype)
    return rng.uniform(-2, 2, n).astype(dtype)


def tensor(a: np.ndarray) -> fl.Tensor:
    return fl.from_numpy(a.copy())


def close(got: fl.Tensor, want: np.ndarray, rtol: float = 1e-6) -> None:
    got = got.numpy()
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
    elif want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


@check("environment")
def _():
    assert os.environ["RANK"] == str(rank) and os.environ["WORLD_SIZE"] == str(world)
    assert os.environ["LOCAL_RANK"] == str(rank) and os.environ["LOCAL_WORLD_SIZE"] == str(world)
    assert os.environ["MASTER_ADDR"] == "127.0.0.1" and int(os.environ["MASTER_PORT"]) > 0
    assert dist.is_initialized() and dist.get_backend() == "mpi" and dist.is_available()
    assert dist.get_process_group_ranks(dist.group.WORLD) == list(range(world))


REFERENCES = {
    "SUM": lambda xs: np.sum(xs, 0), "PRODUCT": lambda xs: np.prod(xs, 0), "MIN": lambda xs: np.min(xs, 0),
    "MAX": lambda xs: np.max(xs, 0), "AVG": lambda xs: np.mean(xs, 0),
    "BAND": lambda xs: np.bitwise_and.reduce(xs, 0), "BOR": lambda xs: np.bitwise_or.reduce(xs, 0),
    "BXOR": lambda xs: np.bitwise_xor.reduce(xs, 0),
}
for dtype in DTYPES:
    for op_name, reference in REFERENCES.items():
        kind = "bool" if dtype == "bool" else "float" if dtype.startswith("float") else "int"
        if (op_name == "AVG" and kind != "float") or (op_name in ("BAND", "BOR", "BXOR") and kind == "float"):
            continue

        @check(f"all_reduce[{dtype}-{op_name}]")
        def _(dtype=dtype, op_name=op_name, reference=reference):
            inputs = [data(r, dtype) for r in range(world)]
            t = tensor(inputs[rank])
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op_name))
            if dtype == "bool":  # SUM is a logical or and PRODUCT a logical and, as in torch
                want = {"SUM": np.any, "PRODUCT": np.all, "MIN": np.all, "MAX": np.any}.get(op_name)
                want = want(inputs, 0) if want else reference(np.array(inputs)).astype(bool)
            else:
                want = reference(np.array(inputs)).astype(dtype)
            close(t, want)


@check("all_reduce_2d_async")
def _():
    inputs = [data(r, "float64", 12).reshape(3, 4) for r in range(world)]
    t = tensor(inputs[rank])
    work = dist.all_reduce(t, async_op=True)
    assert work.wait() is True and work.is_completed() and work.is_success() and work.exception() is None
    assert work.result()[0] is t
    close(t, np.sum(inputs, 0))


@check("all_reduce_many_in_flight")
def _():
    ts = [tensor(data(rank, "float32", 1000, seed=s)) for s in range(8)]
    works = [dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True) for t in ts]
    for s, (t, w) in enumerate(zip(ts, works)):
        w.wait()
        close(t, np.max([data(r, "float32", 1000, seed=s) for r in range(world)], 0))


@check("reduce")
def _():
    for dst in range(world):
        inputs = [data(r, "float32", seed=dst) for r in range(world)]
        t = tensor(inputs[rank])
        dist.reduce(t, dst=dst)
        close(t, np.sum(inputs, 0) if rank == dst else inputs[rank])


@check("broadcast")
def _():
    for src in range(world):
        for dtype in ("float64", "int64", "bool", "float16"):
            t = tensor(data(rank, dtype))
            dist.broadcast(t, src=src)
            close(t, data(src, dtype))


@check("all_gather")
def _():
    out = [fl.zeros(2, 3, dtype=fl.int32) for _ in range(world)]
    dist.all_gather(out, tensor(data(rank, "int32", 6).reshape(2, 3)))
    for r in range(world):
        close(out[r], data(r, "int32", 6).reshape(2, 3))


@check("all_gather_into_tensor")
def _():
    out = fl.zeros(world * 5)
    dist.all_gather_into_tensor(out, tensor(data(rank, "float32", 5)))
    close(out, np.concatenate([data(r, "float32", 5) for r in range(world)]))
    stacked = fl.zeros(world, 5)
    dist.all_gather_into_tensor(stacked, tensor(data(rank, "float32", 5)))
    close(stacked, np.stack([data(r, "float32", 5) for r in range(world)]))


@check("all_gather_into_tensor_in_place")
def _():
    out = fl.zeros(world, 4)
    out[rank] = tensor(data(rank, "float32", 4))
    dist.all_gather_into_tensor(out, out[rank])
    close(out, np.stack([data(r, "float32", 4) for r in range(world)]))


@check("reduce_scatter")
def _():
    inputs = {r: [data(r, "float64", 3, seed=j) for j in range(world)] for r in range(world)}
    out = fl.zeros(3, dtype=fl.float64)
    dist.reduce_scatter(out, [tensor(a) for a in inputs[rank]], op=dist.ReduceOp.AVG)
    close(out, np.mean([inputs[r][rank] for r in range(world)], 0))


@check("reduce_scatter_tensor")
def _():
    inputs = [data(r, "int64", 4 * world) for r in range(world)]
    out = fl.zeros(4, dtype=fl.int64)
    dist.reduce_scatter_tensor(out, tensor(inputs[rank]), op=dist.ReduceOp.SUM)
    close(out, np.sum(inputs, 0)[4 * rank:4 * rank + 4])


@check("gather")
def _():
    for dst in range(world):
        got = [fl.zeros(3) for _ in range(world)] if rank == dst else None
        dist.gather(tensor(data(rank, "float32", 3)), got, dst=dst)
        if rank == dst:
            for r in range(world):
                close(got[r], data(r, "float32", 3))


@check("scatter")
def _():
    for src in range(world):
        pieces = [tensor(data(src, "int16", 3, seed=j)) for j in range(world)] if rank == src else None
        t = fl.zeros(3, dtype=fl.int16)
        dist.scatter(t, pieces, src=src)
        close(t, data(src, "int16", 3, seed=rank))


@check("all_to_all_uneven")
def _():
    # rank i sends i + j + 1 elements to rank j
    inputs = [tensor(data(rank, "float64", rank + j + 1, seed=j)) for j in range(world)]
    outputs = [fl.zeros(r + rank + 1, dtype=fl.float64) for r in range(world)]
    dist.all_to_all(outputs, inputs)
    for r in range(world):
        close(outputs[r], data(r, "float64", r + rank + 1, seed=rank))


@check("all_to_all_single")
def _():
    inputs = [data(r, "float32", 2 * world * 3).reshape(2 * world, 3) for r in range(world)]
    out = fl.zeros(2 * world, 3)
    dist.all_to_all_single(out, tensor(inputs[rank]))
    close(out, np.concatenate([inputs[r][2 * rank:2 * rank + 2] for r in range(world)]))


@check("all_to_all_single_splits")
def _():
    # rank i sends j + 1 rows to rank j
    rows = {r: world * (world + 1) // 2 for r in range(world)}
    inputs = {r: data(r, "int64", rows[r] * 2).reshape(rows[r], 2) for r in range(world)}
    offsets = np.concatenate([[0], np.cumsum([j + 1 for j in range(world)])])
    out = fl.zeros(world * (rank + 1), 2, dtype=fl.int64)
    dist.all_to_all_single(out, tensor(inputs[rank]), output_split_sizes=[rank + 1] * world,
                           input_split_sizes=[j + 1 for j in range(world)])
    close(out, np.concatenate([inputs[r][offsets[rank]:offsets[rank + 1]] for r in range(world)]))


@check("send_recv")
def _():
    if rank == 0:
        for r in range(1, world):
            dist.send(tensor(data(0, "float64", 5, seed=r)), dst=r, tag=3)
        t = fl.zeros(2, dtype=fl.int64)
        senders = sorted(dist.recv(t, tag=4) for _ in range(1, world))
        assert senders == list(range(1, world)), senders
    else:
        t = fl.zeros(5, dtype=fl.float64)
        assert dist.recv(t, src=0, tag=3) == 0
        close(t, data(0, "float64", 5, seed=rank))
        dist.send(fl.tensor([rank, rank]), dst=0, tag=4)


@check("isend_irecv")
def _():
    peer = (rank + 1) % world
    source = (rank - 1) % world
    got = fl.zeros(100)
    receive = dist.irecv(got, src=source)
    sending = dist.isend(tensor(data(rank, "float32", 100)), dst=peer)
    sending.wait()
    receive.wait()
    assert receive.source_rank() == source
    close(got, data(source, "float32", 100))


@check("barrier")
def _():
    dist.barrier()
    dist.barrier(async_op=True).wait()


@check("new_group")
def _():
    last = dist.new_group([world - 1])
    everyone = dist.new_group()
    if rank == world - 1:
        assert dist.get_rank(last) == 0 and dist.get_world_size(last) == 1
        t = fl.ones(3)
        dist.all_reduce(t, group=last)
        close(t, np.ones(3, np.float32))
    else:
        assert last is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(last) == -1
    t = tensor(data(rank, "float64"))
    dist.all_reduce(t, group=everyone)
    close(t, np.sum([data(r, "float64") for r in range(world)], 0))
    t = tensor(data(rank, "float64"))
    dist.broadcast(t, src=world - 1, group=everyone)
    close(t, data(world - 1, "float64"))
    dist.destroy_process_group(everyone)


@check("broadcast_object_list")
def _():
    objects = [{"rank": rank}, [1, 2, rank], None] if rank == 1 % world else [None, None, None]
    dist.broadcast_object_list(objects, src=1 % world)
    assert objects == [{"rank": 1 % world}, [1, 2, 1 % world], None], objects


@check("all_gather_object")
def _():
    gathered = [None] * world
    dist.all_gather_object(gathered, ("from", rank, "x" * (10 * rank)))
    assert gathered == [("from", r, "x" * (10 * r)) for r in range(world)]


@check("argument_errors")
def _():
    with raises(ValueError, "all_reduce", "tensor must be contiguous", "strides"):
        dist.all_reduce(fl.zeros(3, 4).t())
    with raises(TypeError, "all_reduce", "tensor must be a flambeau.Tensor", "list"):
        dist.all_reduce([1, 2])
    with raises(ValueError, "ReduceOp.AVG needs a floating-point tensor", "int64"):
        dist.all_reduce(fl.zeros(3, dtype=fl.int64), op=dist.ReduceOp.AVG)
    with raises(ValueError, "ReduceOp.BAND needs an integer or bool tensor", "float32"):
        dist.all_reduce(fl.zeros(3), op=dist.ReduceOp.BAND)
    with raises(ValueError, "all_gather", f"one tensor per rank of the group ({world})", "got 1"):
        dist.all_gather([fl.zeros(3)], fl.zeros(3))
    with raises(ValueError, "tensor_list[0] has shape (4,)", "expected 3 elements"):
        dist.all_gather([fl.zeros(4) for _ in range(world)], fl.zeros(3))
    with raises(TypeError, "tensor_list[1] has dtype flambeau.int64", "expected flambeau.float32"):
        dist.all_gather([fl.zeros(3), fl.zeros(3, dtype=fl.int64)][:world] + [fl.zeros(3)] * (world - 2),
                        fl.zeros(3))
    with raises(ValueError, "all_gather_into_tensor", f"world_size ({world}) times", "got shape (3,)"):
        dist.all_gather_into_tensor(fl.zeros(3), fl.zeros(3))
    with raises(ValueError, "broadcast", f"src={world} is not a rank of the default group"):
        dist.broadcast(fl.zeros(3), src=world)
    with raises(ValueError, "send", "Invalid destination rank"):
        dist.send(fl.zeros(3), dst=rank)
    with raises(ValueError, "all_to_all_single", "split sizes must be"):
        dist.all_to_all_single(fl.zeros(4, 2), fl.zeros(4, 2), input_split_sizes=[1] * (world + 1))
    with raises(ValueError, "gather_list", "must NOT be specified on non-destination ranks"):
        dist.gather(fl.zeros(3), [fl.zeros(3)] * world, dst=(rank + 1) % world)
    with raises(ValueError, "all_gather_object", "one slot per rank"):
        dist.all_gather_object([], 1)


@check("debug_detail_names_the_rank_that_differs")
def _():
    os.environ["FLAMBEAU_DISTRIBUTED_DEBUG"] = "DETAIL"
    try:
        with raises(dist.DistributedError, "all_reduce: ranks disagree on the arguments", "rank 0 passed 3 float32",
                    "rank 1 passed 4 float32"):
            dist.all_reduce(fl.ones(3 + min(rank, 1)))
        t = fl.ones(2)
        dist.all_reduce(t)  # agreeing arguments pass the check
        close(t, np.full(2, world, np.float32))
    finally:
        del os.environ["FLAMBEAU_DISTRIBUTED_DEBUG"]


dist.barrier()
write(out, rank)
dist.destroy_process_group()
