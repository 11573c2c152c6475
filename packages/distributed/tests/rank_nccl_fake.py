"""Rank program of test_nccl.py's fake-library tests: the NCCL backend's calls, on 2 ranks, without a GPU.

CUDA tensors live on numba's simulator (NUMBA_ENABLE_CUDASIM=1; one simulated device, which the
program reports as two so that both ranks pass the one-GPU-per-rank checks) and libnccl is
fake_nccl.FakeNccl: nothing moves, every call is recorded. Each check compares the recorded calls
(function, pointers, counts, dtype and op codes, roots, peers, stream) with what the operation must
enqueue. MPI itself is real: objects, CPU tensors of the composite backend and the bootstrap go
through it. Usage: ``rank_nccl_fake.py OUT_DIR``.
"""

from __future__ import annotations

import datetime
import sys

import fake_nccl
import numpy as np
from rank_checks import check, raises, write

import flambeau as fl
import flambeau.distributed as dist
from flambeau.distributed import _nccl

lib = fake_nccl.install()
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
_nccl._gpu_identity = lambda device: 1000 + rank  # and each rank a GPU of its own (the duplicate-GPU check)
OPS = {dist.ReduceOp.SUM: 0, dist.ReduceOp.PRODUCT: 1, dist.ReduceOp.MAX: 2, dist.ReduceOp.MIN: 3,
       dist.ReduceOp.AVG: 4}
CODES = {fl.int8: 0, fl.uint8: 1, fl.int32: 2, fl.int64: 4, fl.float16: 6, fl.float32: 7, fl.float64: 8,
         fl.bfloat16: 9}


def stream() -> int:
    return fl.cuda.current_stream().cuda_stream


def comm() -> int:
    """The handle of the default group's communicator (made by the first CUDA collective)."""
    return int(_nccl._state["ffi"].cast("uintptr_t", dist.group.WORLD.nccl.comms[0].handle))


def new_calls(fn) -> list[tuple]:
    """The NCCL calls ``fn()`` makes (bookkeeping calls left out)."""
    start = len(lib.calls)
    fn()
    return [c for c in lib.calls[start:] if c[0] != "ncclCommGetAsyncError"]


@check("backend_and_bootstrap")
def _():
    assert dist.get_backend() == "nccl" and dist.is_nccl_available()
    assert not lib.named("ncclCommInitRank"), "the communicator is made lazily"
    t = fl.ones(4, device="cuda")
    dist.all_reduce(t)
    made = lib.named("ncclGetUniqueId")
    assert len(made) == (1 if rank == 0 else 0), made  # rank 0 makes the id, MPI broadcasts it
    (init,) = lib.named("ncclCommInitRank")
    assert init[2:] == (world, fake_nccl.UNIQUE_ID, rank), init
    dist.all_reduce(t)
    assert len(lib.named("ncclCommInitRank")) == 1, "one communicator per group and device"


@check("all_reduce_calls")
def _():
    for dtype, code in CODES.items():
        for op, op_code in OPS.items():
            if op is dist.ReduceOp.AVG and not dtype.is_floating_point:
                continue
            t = fl.zeros(3, 2, dtype=dtype, device="cuda")
            calls = new_calls(lambda t=t, op=op: dist.all_reduce(t, op=op))
            want = ("ncclAllReduce", t.data_ptr(), t.data_ptr(), 6, code, op_code, comm(), stream())
            assert calls == [want], (dtype, op, calls, want)
    b = fl.zeros(5, dtype=fl.bool, device="cuda")
    assert new_calls(lambda: dist.all_reduce(b))[0][4:6] == (1, 2)  # bool SUM: uint8 MAX (logical or)
    assert new_calls(lambda: dist.all_reduce(b, op=dist.ReduceOp.PRODUCT))[0][4:6] == (1, 3)  # and: MIN


@check("side_stream_async_work_and_no_host_sync")
def _():
    t = fl.ones(8, device="cuda")
    side = fl.cuda.Stream()
    syncs = fl.cuda.host_sync_count()
    waited = []
    original = fl.cuda.Stream.wait_event
    fl.cuda.Stream.wait_event = lambda self, event: waited.append((self.cuda_stream, event)) or original(self, event)
    try:
        with fl.cuda.stream(side):
            calls = new_calls(lambda: dist.all_reduce(t, async_op=False))
            assert calls[0][-1] == side.cuda_stream != 0, (calls, side.cuda_stream)
            work = dist.all_reduce(t, async_op=True)
        assert isinstance(work, dist.Work) and work.result() == [t]
        work.wait()  # the current (default) stream waits for the side stream's op: no host wait
        assert waited == [(stream(), work._end)], waited
        assert work.is_completed() and work.is_success()
    finally:
        fl.cuda.Stream.wait_event = original
    assert dist.all_reduce(t) is None
    assert fl.cuda.host_sync_count() == syncs, "an NCCL collective synchronised the host"


@check("unsupported_ops_and_dtypes_raise_before_enqueueing")
def _():
    t = fl.ones(2, dtype=fl.int32, device="cuda")
    before = len(lib.calls)
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR, dist.ReduceOp.PREMUL_SUM):
        with raises(ValueError, f"ReduceOp.{op.name} is not supported by the NCCL backend"):
            dist.all_reduce(t, op=op)
    with raises(ValueError, "ReduceOp.AVG needs a floating-point tensor", "int32"):
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
    with raises(TypeError, "all_reduce: tensor has dtype flambeau.int16", "NCCL backend does not support"):
        dist.all_reduce(fl.ones(2, dtype=fl.int16, device="cuda"))
    with raises(TypeError, "op must be a flambeau.distributed.ReduceOp"):
        dist.all_reduce(fl.ones(2, device="cuda"), op="sum")
    assert len(lib.calls) == before, lib.calls[before:]


@check("validation_errors_name_the_argument")
def _():
    before = len(lib.calls)
    with raises(RuntimeError, "all_reduce: tensor is a CPU tensor", "backend 'nccl' takes CUDA tensors only",
                "cpu:mpi,cuda:nccl"):
        dist.all_reduce(fl.ones(2))
    with raises(ValueError, "all_gather_into_tensor: output_tensor is on cuda:0 but input_tensor is on the cpu"):
        dist.all_gather_into_tensor(fl.zeros(2 * world, device="cuda"), fl.ones(2))
    with raises(ValueError, "tensor must be contiguous"):
        dist.broadcast(fl.ones(4, 4, device="cuda").t(), src=0)
    with raises(TypeError, "tensor_list[1] has dtype flambeau.float64, expected flambeau.float32"):
        dist.all_gather([fl.zeros(2, device="cuda"), fl.zeros(2, dtype=fl.float64, device="cuda")][:world],
                        fl.ones(2, device="cuda"))
    with raises(ValueError, "output_tensor must have world_size (2) times the elements of input_tensor"):
        dist.all_gather_into_tensor(fl.zeros(3, device="cuda"), fl.ones(2, device="cuda"))
    with raises(ValueError, "recv: src=None (any source) is not supported"):
        dist.recv(fl.zeros(2, device="cuda"))

    class OnCuda1:  # a tensor's device, as on a second GPU (the simulator has one)
        device = fl.device("cuda:1")

    bound = dist.group.WORLD.nccl
    bound.device, saved = 0, bound.device
    try:
        with raises(ValueError, "all_reduce: tensor is on cuda:1, but the default group uses cuda:0"):
            bound.device_of(OnCuda1(), "tensor", "all_reduce")
    finally:
        bound.device = saved
    assert len(lib.calls) == before, lib.calls[before:]


@check("reduce_broadcast_calls")
def _():
    t = fl.zeros(5, dtype=fl.float64, device="cuda")
    got = new_calls(lambda: dist.reduce(t, dst=1, op=dist.ReduceOp.MAX))
    assert got == [("ncclReduce", t.data_ptr(), t.data_ptr(), 5, 8, 2, 1, comm(), stream())], got
    got = new_calls(lambda: dist.broadcast(t, src=1))
    assert got == [("ncclBroadcast", t.data_ptr(), t.data_ptr(), 5, 8, 1, comm(), stream())], got


@check("all_gather_calls")
def _():
    out = fl.zeros(world, 3, dtype=fl.int64, device="cuda")
    inp = fl.ones(3, dtype=fl.int64, device="cuda")
    got = new_calls(lambda: dist.all_gather_into_tensor(out, inp))
    assert got == [("ncclAllGather", inp.data_ptr(), out.data_ptr(), 3, 4, comm(), stream())], got
    mine = out[rank]  # in place: NCCL's own in-place form, nothing copied
    got = new_calls(lambda: dist.all_gather_into_tensor(out, mine))
    assert got == [("ncclAllGather", out.data_ptr() + rank * 3 * 8, out.data_ptr(), 3, 4, comm(), stream())], got
    outs = [fl.zeros(3, dtype=fl.int64, device="cuda") for _ in range(world)]
    got = new_calls(lambda: dist.all_gather(outs, inp))
    assert [c[0] for c in got] == ["ncclAllGather"] and got[0][1] == inp.data_ptr() and got[0][3:5] == (3, 4), got


@check("reduce_scatter_calls")
def _():
    out = fl.zeros(2, device="cuda")
    inp = fl.ones(2 * world, device="cuda")
    got = new_calls(lambda: dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.AVG))
    assert got == [("ncclReduceScatter", inp.data_ptr(), out.data_ptr(), 2, 7, 4, comm(), stream())], got
    got = new_calls(lambda: dist.reduce_scatter(out, [fl.ones(2, device="cuda") for _ in range(world)]))
    assert len(got) == 1 and got[0][0] == "ncclReduceScatter" and got[0][2:6] == (out.data_ptr(), 2, 7, 0), got


@check("gather_scatter_are_grouped_send_recv")
def _():
    t = fl.full((4,), float(rank), device="cuda")
    root = world - 1  # gather to the last rank, scatter from the first: roots other than 0 and the same
    if rank == root:
        outs = [fl.zeros(4, device="cuda") for _ in range(world)]
        got = new_calls(lambda: dist.gather(t, outs, dst=root))
        want = [("ncclGroupStart",)] + [("ncclRecv", outs[r].data_ptr(), 4, 7, r, comm(), stream())
                                       for r in range(world) if r != root] + [("ncclGroupEnd",)]
    else:
        got = new_calls(lambda: dist.gather(t, dst=root))
        want = [("ncclGroupStart",), ("ncclSend", t.data_ptr(), 4, 7, root, comm(), stream()), ("ncclGroupEnd",)]
    assert got == want, got
    if rank == 0:
        ins = [fl.ones(4, device="cuda") for _ in range(world)]
        got = new_calls(lambda: dist.scatter(t, ins, src=0))
        want = [("ncclGroupStart",)] + [("ncclSend", ins[r].data_ptr(), 4, 7, r, comm(), stream())
                                       for r in range(1, world)] + [("ncclGroupEnd",)]
    else:
        got = new_calls(lambda: dist.scatter(t, src=0))
        want = [("ncclGroupStart",), ("ncclRecv", t.data_ptr(), 4, 7, 0, comm(), stream()), ("ncclGroupEnd",)]
    assert got == want, got


@check("all_to_all_calls")
def _():
    ins = [fl.ones(r + 1, device="cuda") for r in range(world)]  # rank j receives j + 1 elements from each
    outs = [fl.zeros(rank + 1, device="cuda") for _ in range(world)]
    got = new_calls(lambda: dist.all_to_all(outs, ins))
    want = [("ncclGroupStart",)]
    for r in range(world):
        want += [("ncclSend", ins[r].data_ptr(), r + 1, 7, r, comm(), stream()),
                 ("ncclRecv", outs[r].data_ptr(), rank + 1, 7, r, comm(), stream())]
    assert got == want + [("ncclGroupEnd",)], got
    inp = fl.ones(6, 2, dtype=fl.float64, device="cuda")
    out = fl.zeros(6, 2, dtype=fl.float64, device="cuda")
    splits = [2, 4] if world == 2 else None
    got = new_calls(lambda: dist.all_to_all_single(out, inp, splits, splits))
    offsets, counts = [0, 4], [4, 8]  # rows 2 and 4 of 2 elements; 8-byte elements
    want = [("ncclGroupStart",)]
    for r in range(world):
        want += [("ncclSend", inp.data_ptr() + offsets[r] * 8, counts[r], 8, r, comm(), stream()),
                 ("ncclRecv", out.data_ptr() + offsets[r] * 8, counts[r], 8, r, comm(), stream())]
    assert got == want + [("ncclGroupEnd",)], got


@check("send_recv_use_the_group_communicator_once_it_exists")
def _():
    # the checks above made the default group's communicator: point-to-point runs on it, no new one
    t = fl.full((3,), 1.0, device="cuda")
    inits = len(lib.named("ncclCommInitRank"))
    sources = []
    got = new_calls(lambda: dist.send(t, dst=1) if rank == 0 else sources.append(dist.recv(t, src=0)))
    assert sources == ([] if rank == 0 else [0])
    want = ("ncclSend" if rank == 0 else "ncclRecv", t.data_ptr(), 3, 7, 1 - rank, comm(), stream())
    assert got == [want], got
    assert len(lib.named("ncclCommInitRank")) == inits


@check("send_recv_before_any_collective_use_a_pair_communicator")
def _():
    group = dist.new_group([0, 1])  # a group no collective has run on yet: no communicator of its own
    t = fl.full((3,), 1.0, device="cuda")
    inits = len(lib.named("ncclCommInitRank"))
    sources = []
    got = new_calls(lambda: dist.send(t, dst=1, group=group) if rank == 0
                    else sources.append(dist.recv(t, src=0, group=group)))
    assert sources == ([] if rank == 0 else [0])
    init = got[-2]
    assert init[0] == "ncclCommInitRank" and init[2:] == (2, fake_nccl.UNIQUE_ID, rank), got
    assert (got[0][0] == "ncclGetUniqueId") == (rank == 0), got  # the lower rank makes the pair's id
    pair = init[1]
    want = ("ncclSend" if rank == 0 else "ncclRecv", t.data_ptr(), 3, 7, 1 - rank, pair, stream())
    assert got[-1] == want, got
    assert len(lib.named("ncclCommInitRank")) == inits + 1
    work = dist.isend(t, 1, group=group) if rank == 0 else dist.irecv(t, 0, group=group)
    work.wait()
    assert len(lib.named("ncclCommInitRank")) == inits + 1, "the pair's communicator is reused"


@check("barrier_is_a_one_element_all_reduce")
def _():
    got = new_calls(lambda: dist.barrier())
    assert len(got) == 1 and got[0][0] == "ncclAllReduce" and got[0][3:6] == (1, 7, 0), got


@check("objects_go_through_mpi")
def _():
    before = len(lib.calls)
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in range(world)]
    box = [rank * 10]
    dist.broadcast_object_list(box, src=1)
    assert box == [10]
    assert len(lib.calls) == before


@check("new_group_has_its_own_communicator")
def _():
    g = dist.new_group(list(range(world)))
    assert dist.get_backend(g) == "nccl"
    inits = len(lib.named("ncclCommInitRank"))
    t = fl.ones(2, device="cuda")
    dist.all_reduce(t, group=g)
    assert len(lib.named("ncclCommInitRank")) == inits + 1
    h = dist.new_group(list(range(world)), backend="mpi")
    assert dist.get_backend(h) == "mpi"
    before = len(lib.calls)
    dist.all_reduce(t, group=h)  # CUDA through host memory, over MPI
    assert len(lib.calls) == before
    dist.destroy_process_group(g)
    assert len(lib.named("ncclCommDestroy")) == 1


@check("two_ranks_on_one_gpu_are_refused")
def _():
    own = _nccl._gpu_identity
    _nccl._gpu_identity = lambda device: 7  # both ranks' cuda:0 is one physical GPU
    try:
        g = dist.new_group(list(range(world)))
        with raises(dist.DistributedError, "ranks 0 and 1", "both use one GPU", "set_device"):
            dist.all_reduce(fl.ones(2, device="cuda"), group=g)
    finally:
        _nccl._gpu_identity = own


@check("async_error_and_timeout_abort_the_communicator")
def _():
    g = dist.new_group(list(range(world)))
    t = fl.ones(2, device="cuda")
    dist.all_reduce(t, group=g)
    lib.async_error = 6
    try:
        with raises(dist.DistributedError, "asynchronous error", "fake NCCL error 6"):
            dist.all_reduce(t, group=g)
    finally:
        lib.async_error = 0
    assert len(lib.named("ncclCommAbort")) == 1
    with raises(dist.DistributedError, "unusable after an NCCL failure"):
        dist.all_reduce(t, group=g)
    g2 = dist.new_group(list(range(world)))
    work = dist.all_reduce(t, group=g2, async_op=True)
    original = fl.cuda.Event.query
    fl.cuda.Event.query = lambda self: False  # the operation never completes
    try:
        with raises(dist.DistributedError, "all_reduce on group", "did not complete within"):
            work.wait(timeout=datetime.timedelta(seconds=0.05))
    finally:
        fl.cuda.Event.query = original
    assert len(lib.named("ncclCommAbort")) == 2 and not work.is_success()
    dist.destroy_process_group(g)
    dist.destroy_process_group(g2)


@check("a_failed_call_aborts_the_group")
def _():
    g = dist.new_group(list(range(world)))
    t = fl.ones(2, device="cuda")
    dist.all_reduce(t, group=g)
    aborts = len(lib.named("ncclCommAbort"))
    lib.ncclAllReduce = lambda *args: 5  # ncclInvalidUsage, say
    try:
        with raises(dist.DistributedError, "all_reduce on group", f"failed on rank {rank}", "fake NCCL error 5"):
            dist.all_reduce(t, group=g)
    finally:
        del lib.ncclAllReduce
    assert len(lib.named("ncclCommAbort")) == aborts + 1
    with raises(dist.DistributedError, "unusable after an NCCL failure"):
        dist.all_reduce(t, group=g)


@check("ddp_averages_buckets_with_nccl")
def _():
    import flambeau.nn as nn

    fl.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).to(device="cuda", dtype=fl.float64)
    start = len(lib.calls)
    ddp = dist.DistributedDataParallel(model, device_ids=[0])
    wrap = [c for c in lib.calls[start:] if c[0] == "ncclBroadcast"]
    assert len(wrap) == 1 and wrap[0][3:6] == (sum(p.numel() for p in model.parameters()), 8, 0), wrap
    start = len(lib.calls)
    ddp(fl.ones(2, 3, dtype=fl.float64, device="cuda")).sum().backward()
    reduced = [c for c in lib.calls[start:] if c[0] == "ncclAllReduce"]
    buffers = {b.buffer.data_ptr(): b.buffer.numel() for b in ddp._reducer.buckets}
    assert [(c[1], c[3], c[4], c[5]) for c in reduced] == [(p, n, 8, 4) for p, n in buffers.items()], reduced
    assert all(p.grad is not None and p.grad.device.type == "cuda" for p in model.parameters())


@check("a_failing_destroy_still_frees_the_group")
def _():
    g = dist.new_group(list(range(world)))
    t = fl.ones(2, device="cuda")
    if rank == 0:  # a pair communicator first (no collective on g yet), then the group's own
        dist.send(t, dst=1, group=g)
    else:
        dist.recv(t, src=0, group=g)
    dist.all_reduce(t, group=g)
    tried = []
    lib.ncclCommDestroy = lambda handle: tried.append(handle) or lib._record("ncclCommDestroy", handle) or 5
    try:
        with raises(dist.DistributedError, "ncclCommDestroy failed", "fake NCCL error 5"):
            dist.destroy_process_group(g)
    finally:
        del lib.ncclCommDestroy
    assert len(tried) == 2, "both communicators were asked to go"
    from flambeau.distributed._process_group import _state
    assert g.comm is None and g.nccl is None and g not in _state.groups


@check("destroy_and_composite_backend")
def _():
    dist.destroy_process_group()
    ended = len(lib.named("ncclCommDestroy")) + len(lib.named("ncclCommAbort"))
    assert ended == len(lib.named("ncclCommInitRank")), "every communicator is destroyed (or aborted)"
    dist.init_process_group("cuda:nccl,cpu:mpi")
    assert dist.get_backend() == "cpu:mpi,cuda:nccl"
    before = len(lib.calls)
    c = fl.full((3,), float(rank + 1))
    dist.all_reduce(c)  # CPU: MPI, for real
    assert c.tolist() == [float(sum(range(1, world + 1)))] * 3 and len(lib.calls) == before
    d = fl.ones(3, device="cuda")
    got = new_calls(lambda: dist.all_reduce(d))
    assert got[-1][0] == "ncclAllReduce" and got[-1][1] == d.data_ptr(), got
    dist.barrier()  # MPI's with the composite backend
    assert not [c for c in lib.calls[before:] if c[0] == "ncclAllReduce"][1:]
    dist.destroy_process_group()
    dist.init_process_group("mpi")
    before = len(lib.calls)
    dist.all_reduce(d)
    assert len(lib.calls) == before and np.allclose(d.cpu().numpy(), world)


write(sys.argv[1], rank)
dist.destroy_process_group()
