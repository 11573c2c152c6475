"""The NCCL side of every operation of ``_collectives.py``: CUDA tensors of an ``"nccl"`` (or composite) group.

``_collectives.py`` validates the arguments (the same checks as for MPI), runs the optional
``FLAMBEAU_DISTRIBUTED_DEBUG=DETAIL`` consistency check and calls the function of the same name
here with the group's :class:`~flambeau.distributed._nccl.NcclGroup` and the tensors' device.
Each function first does the NCCL-specific checks (dtype, reduce op, device), so that nothing is
enqueued for a call that fails, then makes the group's communicator if it is the first CUDA
collective (Note [NCCL bootstrap over MPI] in ``_nccl.py``) and enqueues on the current stream
(Note [NCCL on the current stream]). Ranks (``root``, ``peer``) are group ranks here.
"""

from __future__ import annotations

import flambeau as fl
from flambeau.distributed._nccl import NcclGroup, check, dtype_code, red_op

__all__ = ["all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "all_to_all_single", "isend", "irecv",
           "barrier"]


def _overlap(a, b) -> bool:
    """Whether two tensors' memory ranges overlap (NCCL leaves the result undefined unless exactly in place)."""
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def _flat_view(t):
    return t.detach().reshape(-1)


def all_reduce(ng: NcclGroup, device: int, tensor, op, async_op: bool):
    what = "all_reduce"
    code, rop = dtype_code(tensor, "tensor", what), red_op(op, tensor, what)
    comm = ng.comm(device, what)
    n = tensor.numel()

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclAllReduce(ptr(tensor), ptr(tensor), n, code, rop, c, s), "ncclAllReduce", what)
    return ng.launch(what, comm, enqueue, result=[tensor], async_op=async_op)


def reduce(ng: NcclGroup, device: int, tensor, root: int, op, async_op: bool):
    what = "reduce"
    code, rop = dtype_code(tensor, "tensor", what), red_op(op, tensor, what)
    comm = ng.comm(device, what)
    n = tensor.numel()

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclReduce(ptr(tensor), ptr(tensor), n, code, rop, root, c, s), "ncclReduce", what)
    return ng.launch(what, comm, enqueue, result=[tensor], async_op=async_op)


def broadcast(ng: NcclGroup, device: int, tensor, root: int, async_op: bool):
    what = "broadcast"
    code = dtype_code(tensor, "tensor", what)
    comm = ng.comm(device, what)
    n = tensor.numel()

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclBroadcast(ptr(tensor), ptr(tensor), n, code, root, c, s), "ncclBroadcast", what)
    return ng.launch(what, comm, enqueue, result=[tensor], async_op=async_op)


def all_gather(ng: NcclGroup, device: int, outputs: list, tensor, async_op: bool):
    what = "all_gather"
    code = dtype_code(tensor, "tensor", what)
    comm = ng.comm(device, what)
    n = tensor.numel()
    flat = fl.empty(len(outputs) * n, dtype=tensor.dtype, device=tensor.device)

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclAllGather(ptr(tensor), ptr(flat), n, code, c, s), "ncclAllGather", what)

    def after():
        with fl.no_grad():
            for i, out in enumerate(outputs):
                out.detach().copy_(flat[i * n:(i + 1) * n].view(tuple(out.shape)))
    return ng.launch(what, comm, enqueue, after=after, result=outputs, async_op=async_op, keep=flat)


def all_gather_into_tensor(ng: NcclGroup, device: int, output, input, async_op: bool):  # noqa: A002
    what = "all_gather_into_tensor"
    code = dtype_code(input, "input_tensor", what)
    comm = ng.comm(device, what)
    n = input.numel()
    in_place = input.data_ptr() == output.data_ptr() + comm.rank * n * input.element_size()
    send = input.detach().clone() if not in_place and _overlap(input, output) else input

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclAllGather(ptr(send), ptr(output), n, code, c, s), "ncclAllGather", what)
    return ng.launch(what, comm, enqueue, result=[output], async_op=async_op, keep=send)


def reduce_scatter(ng: NcclGroup, device: int, output, inputs: list, op, async_op: bool):
    what = "reduce_scatter"
    code, rop = dtype_code(output, "output", what), red_op(op, output, what)
    comm = ng.comm(device, what)
    n = output.numel()
    flat = fl.cat([_flat_view(t) for t in inputs])  # a copy kernel on the current stream, before NCCL's

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclReduceScatter(ptr(flat), ptr(output), n, code, rop, c, s), "ncclReduceScatter", what)
    return ng.launch(what, comm, enqueue, result=[output], async_op=async_op, keep=flat)


def reduce_scatter_tensor(ng: NcclGroup, device: int, output, input, op, async_op: bool):  # noqa: A002
    what = "reduce_scatter_tensor"
    code, rop = dtype_code(output, "output", what), red_op(op, output, what)
    comm = ng.comm(device, what)
    n = output.numel()
    in_place = output.data_ptr() == input.data_ptr() + comm.rank * n * output.element_size()
    send = input.detach().clone() if not in_place and _overlap(input, output) else input

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclReduceScatter(ptr(send), ptr(output), n, code, rop, c, s), "ncclReduceScatter", what)
    return ng.launch(what, comm, enqueue, result=[output], async_op=async_op, keep=send)


def _grouped(lib, calls: list, what: str) -> None:
    """``calls`` (thunks returning an ncclResult_t) between ncclGroupStart and ncclGroupEnd."""
    check_call(lib.ncclGroupStart(), "ncclGroupStart", what)
    try:
        for call, name in calls:
            check_call(call(), name, what)
    except BaseException:
        lib.ncclGroupEnd()  # close the group; the first error is the one to report (launch aborts the group)
        raise
    check_call(lib.ncclGroupEnd(), "ncclGroupEnd", what)


def gather(ng: NcclGroup, device: int, tensor, outputs: list | None, root: int, async_op: bool):
    """torch's NCCL gather: the root receives from every other rank (grouped), and copies its own part."""
    what = "gather"
    code = dtype_code(tensor, "tensor", what)
    comm = ng.comm(device, what)
    n = tensor.numel()

    def enqueue(lib, c, s, ptr):
        nothing = [_NOTHING] * comm.size
        if comm.rank != root:
            _exchange(lib, c, s, ptr, _only(comm.size, root, (tensor, 0, n)), nothing, code, what)
            return
        with fl.no_grad():
            outputs[root].detach().copy_(tensor.detach().view(tuple(outputs[root].shape)))
        recvs = [(t, 0, n if r != root else 0) for r, t in enumerate(outputs)]
        _exchange(lib, c, s, ptr, nothing, recvs, code, what)
    return ng.launch(what, comm, enqueue, result=outputs if comm.rank == root else [], async_op=async_op)


def scatter(ng: NcclGroup, device: int, tensor, inputs: list | None, root: int, async_op: bool):
    """torch's NCCL scatter: the root sends to every other rank (grouped), and copies its own part."""
    what = "scatter"
    code = dtype_code(tensor, "tensor", what)
    comm = ng.comm(device, what)
    n = tensor.numel()

    def enqueue(lib, c, s, ptr):
        nothing = [_NOTHING] * comm.size
        if comm.rank != root:
            _exchange(lib, c, s, ptr, nothing, _only(comm.size, root, (tensor, 0, n)), code, what)
            return
        with fl.no_grad():
            tensor.detach().copy_(inputs[root].detach().view(tuple(tensor.shape)))
        sends = [(t, 0, n if r != root else 0) for r, t in enumerate(inputs)]
        _exchange(lib, c, s, ptr, sends, nothing, code, what)
    return ng.launch(what, comm, enqueue, result=[tensor], async_op=async_op, keep=inputs)


_NOTHING = (None, 0, 0)  # a rank _exchange sends nothing to (or receives nothing from)


def _only(size: int, rank: int, piece: tuple) -> list:
    """``piece`` for ``rank`` and nothing for the other ranks (a list for :func:`_exchange`)."""
    return [piece if r == rank else _NOTHING for r in range(size)]


def _exchange(lib, c, s, ptr, sends: list, recvs: list, code: int, what: str) -> None:
    """One ncclSend of ``sends[r] = (tensor, offset, count)`` to, and one ncclRecv from, every rank r (grouped)."""
    calls = []
    for r, ((st, so, sn), (rt, ro, rn)) in enumerate(zip(sends, recvs)):
        if sn:
            calls.append((lambda st=st, so=so, sn=sn, r=r: lib.ncclSend(ptr(st, so), sn, code, r, c, s), "ncclSend"))
        if rn:
            calls.append((lambda rt=rt, ro=ro, rn=rn, r=r: lib.ncclRecv(ptr(rt, ro), rn, code, r, c, s), "ncclRecv"))
    _grouped(lib, calls, what)


def all_to_all(ng: NcclGroup, device: int, outputs: list, inputs: list, async_op: bool):
    what = "all_to_all"
    code = dtype_code(inputs[0], "input_tensor_list[0]", what)
    comm = ng.comm(device, what)
    sends = [(t, 0, t.numel()) for t in inputs]
    recvs = [(t, 0, t.numel()) for t in outputs]

    def enqueue(lib, c, s, ptr):
        _exchange(lib, c, s, ptr, sends, recvs, code, what)
    return ng.launch(what, comm, enqueue, result=outputs, async_op=async_op, keep=inputs)


def all_to_all_single(ng: NcclGroup, device: int, output, input, send_counts: list[int],  # noqa: A002
                      recv_counts: list[int], async_op: bool):
    what = "all_to_all_single"
    code = dtype_code(input, "input", what)
    comm = ng.comm(device, what)
    send = input.detach().clone() if _overlap(input, output) else input

    def pieces(t, counts):
        offsets = [sum(counts[:r]) for r in range(len(counts))]
        return [(t, o, n) for o, n in zip(offsets, counts)]

    def enqueue(lib, c, s, ptr):
        _exchange(lib, c, s, ptr, pieces(send, send_counts), pieces(output, recv_counts), code, what)
    return ng.launch(what, comm, enqueue, result=[output], async_op=async_op, keep=send)


def isend(ng: NcclGroup, device: int, tensor, peer: int, async_op: bool):
    """ncclSend to group rank ``peer`` (tags are ignored, as by torch's NCCL backend)."""
    what = "send"
    code = dtype_code(tensor, "tensor", what)
    comm, other = ng.point_to_point(device, peer, what)
    n = tensor.numel()

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclSend(ptr(tensor), n, code, other, c, s), "ncclSend", what)
    return ng.launch(what, comm, enqueue, result=[tensor], async_op=True, keep=tensor)


def irecv(ng: NcclGroup, device: int, tensor, peer: int, async_op: bool):
    what = "recv"
    code = dtype_code(tensor, "tensor", what)
    comm, other = ng.point_to_point(device, peer, what)
    n = tensor.numel()

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclRecv(ptr(tensor), n, code, other, c, s), "ncclRecv", what)
    return ng.launch(what, comm, enqueue, result=[tensor], async_op=True, source=ng.pg.ranks[peer])


def barrier(ng: NcclGroup, async_op: bool):
    """torch's NCCL barrier: an all-reduce of one element on the group's device, waited for on the host.

    The device is the one the group is bound to, else that of its first communicator, else the
    current device.
    """
    what = "barrier"
    device = ng.device if ng.device is not None else next(iter(ng.comms), fl.cuda.current_device())
    comm = ng.comm(device, what)
    one = fl.zeros(1, dtype=fl.float32, device=f"cuda:{device}")

    def enqueue(lib, c, s, ptr):
        check_call(lib.ncclAllReduce(ptr(one), ptr(one), 1, 7, 0, c, s), "ncclAllReduce", what)
    work = ng.launch(what, comm, enqueue, async_op=True, keep=one)
    ng.wait_on_host(work, work._deadline)
    return work if async_op else None


def check_call(status: int, call: str, what: str) -> None:
    check(status, f"{what}: {call}")
