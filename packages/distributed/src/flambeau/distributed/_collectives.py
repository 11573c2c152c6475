"""Collectives and point-to-point operations on tensors (torch.distributed's names and arguments).

Each function validates its arguments on this rank, issues one nonblocking MPI call on the tensors'
own memory and returns a :class:`~flambeau.distributed.Work` (``async_op=True``) or waits for it.

Note [Zero copy]
    A contiguous CPU tensor's elements are a numpy array on the tensor's storage
    (``t.detach().numpy()``), and MPI reads and writes that memory directly: ``all_reduce``,
    ``broadcast``, ``reduce``, the ``*_tensor``/``*_single`` forms and ``send``/``recv`` copy
    nothing. Operations on *lists* of tensors (``all_gather``, ``gather``, ``scatter``,
    ``reduce_scatter``, ``all_to_all``) exchange one contiguous buffer and copy into or out of
    the list, as torch's CPU backend does. Non-contiguous tensors are refused, as in torch. CUDA
    tensors go through a host copy (the MPI backend is a host library), copied back to the device
    in :meth:`Work.wait`. bool tensors travel as bytes, and their SUM is a logical or and their
    PRODUCT a logical and, as torch's NCCL backend does.

With a group whose backend has NCCL (``"nccl"``, ``"cpu:mpi,cuda:nccl"``), CUDA tensors go to NCCL
instead, on their own memory and the current CUDA stream (``_nccl_collectives.py``; Note [NCCL on
the current stream] in ``_nccl.py``), and ``async_op=False`` returns once the operation is enqueued,
as in torch. Which tensors go where is Note [Backends] in ``_process_group.py``.

Ranks in arguments (``src``, ``dst``) are global ranks, as in torch; they must belong to ``group``.
With the environment variable ``FLAMBEAU_DISTRIBUTED_DEBUG=DETAIL`` every collective first checks
that all ranks called the same collective with the same dtypes, element counts and roots (an extra
small all-gather each time), and raises an error that names the rank that differs.
"""

from __future__ import annotations

import enum

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.distributed import _nccl_collectives as nccl_ops
from flambeau.distributed._process_group import ProcessGroup, resolve_group
from flambeau.distributed._runtime import Work, load_mpi

__all__ = ["ReduceOp", "all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "all_to_all_single",
           "send", "recv", "isend", "irecv", "barrier"]


class ReduceOp(enum.Enum):
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter`` combine the ranks' values (torch's ``ReduceOp``)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.name}>"


_OPS = list(ReduceOp)
_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bfloat16", "other")


def _dtype_code(t: Tensor) -> int:
    name = t.dtype.name
    return _DTYPES.index(name) if name in _DTYPES else len(_DTYPES) - 1


def _op_code(op) -> int:
    """``op``'s index in the consistency check's fingerprint (0 for a non-ReduceOp, which is refused later)."""
    return _OPS.index(op) if isinstance(op, ReduceOp) else 0


def _route(pg: ProcessGroup, what: str, tensors: list[tuple[str, Tensor]]):
    """Where the tensors of a call go (Note [Backends] in ``_process_group.py``): None for MPI, or the
    group's NCCL side and the tensors' CUDA device index. Raises for a mix of devices, and for CPU
    tensors with backend ``"nccl"`` (torch's NCCL backend takes CUDA tensors only)."""
    if pg.nccl is None:
        return None
    cuda = [(n, t) for n, t in tensors if t.device.type == "cuda"]
    cpu = [(n, t) for n, t in tensors if t.device.type != "cuda"]
    if cuda and cpu:
        raise ValueError(f"{what}: {cuda[0][0]} is on {cuda[0][1].device} but {cpu[0][0]} is on the cpu; with backend "
                         f"{pg.backend!r} the tensors of one call must be on one device")
    if cpu:
        if pg.backend == "nccl":
            raise RuntimeError(f"{what}: {cpu[0][0]} is a CPU tensor, but backend 'nccl' takes CUDA tensors only (as "
                               f"torch's NCCL backend: 'No backend type associated with device type cpu'); move it "
                               f"to CUDA, or use backend 'cpu:mpi,cuda:nccl' to send CPU tensors through MPI")
        return None
    first = pg.nccl.device_of(cuda[0][1], cuda[0][0], what)
    for name, t in cuda[1:]:
        index = pg.nccl.device_of(t, name, what)
        if index != first:
            raise ValueError(f"{what}: {name} is on cuda:{index} but {cuda[0][0]} is on cuda:{first}; the tensors "
                             f"of one call must be on one device")
    return pg.nccl, first


def _named(argname: str, tensors: list) -> list[tuple[str, Tensor]]:
    return [(f"{argname}[{i}]", t) for i, t in enumerate(tensors)]


def _describe(fp: list[int], fields: tuple[str, ...]) -> str:
    """Renders a fingerprint ``[dtype code, numel, ...]`` for consistency-check messages."""
    text = f"{fp[1]} {_DTYPES[fp[0]]} elements"
    for name, value in zip(fields, fp[2:]):
        text += f", {name} {_OPS[value].name if name == 'op' else value}"
    return text


# --- buffers ------------------------------------------------------------------------------------
def check_tensor(t, argname: str, what: str) -> None:
    """Raise unless ``t`` is a contiguous CPU or CUDA tensor (the message names ``argname``)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {argname} must be a flambeau.Tensor, got {type(t).__name__}")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{what}: {argname} must be on the cpu (or cuda) device, got {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{what}: {argname} must be contiguous (Tensors must be contiguous), got a tensor of "
                         f"shape {tuple(t.shape)} with strides {t.stride()}; pass t.contiguous() and copy the "
                         f"result back")


def _check_list(tensors, argname: str, what: str, size: int, like: Tensor | None = None,
                same_numel: bool = True) -> list:
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{what}: {argname} must be a list of tensors, got {type(tensors).__name__}")
    if len(tensors) != size:
        raise ValueError(f"{what}: {argname} must hold one tensor per rank of the group ({size}), "
                         f"got {len(tensors)}")
    for i, t in enumerate(tensors):
        check_tensor(t, f"{argname}[{i}]", what)
        if like is not None:
            if t.dtype != like.dtype:
                raise TypeError(f"{what}: {argname}[{i}] has dtype {t.dtype}, expected {like.dtype} (that of the "
                                f"other tensor argument)")
            if same_numel and t.numel() != like.numel():
                raise ValueError(f"{what}: {argname}[{i}] has shape {tuple(t.shape)} ({t.numel()} elements), "
                                 f"expected {like.numel()} elements (shape {tuple(like.shape)})")
    return list(tensors)


def _array(t: Tensor):
    """``t``'s elements as a flat numpy array MPI can use (bool as uint8), and the tensor it lives in.

    For a CPU tensor the array is the tensor's own memory (Note [Zero copy]); for a CUDA tensor it
    is a host copy, returned as the second item so that the caller can copy it back.
    """
    if t.device.type == "cpu":
        arr = t.detach().numpy().reshape(-1)
        host = None
    else:
        host = t.detach().cpu()
        arr = host.numpy().reshape(-1)
    if arr.dtype == np.bool_:
        arr = arr.view(np.uint8)
    return arr, host


def _copy_back(pairs: list) -> object:
    """A ``post`` callback that copies host copies back into their CUDA tensors (None if nothing to do)."""
    pairs = [(t, host) for t, host in pairs if host is not None]
    if not pairs:
        return None

    def post():
        for t, host in pairs:
            t.detach().copy_(host)
    return post


def _reduction(op, t: Tensor, what: str):
    """The MPI operation for ``op`` on ``t``'s dtype, and whether to divide by the group size (AVG)."""
    MPI = load_mpi()
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{what}: op must be a flambeau.distributed.ReduceOp, got {op!r}")
    kind = "bool" if t.dtype == fl.bool else "float" if t.dtype.is_floating_point else "int"
    if op is ReduceOp.PREMUL_SUM:
        raise ValueError(f"{what}: ReduceOp.PREMUL_SUM is not supported by the MPI backend")
    if op is ReduceOp.AVG:
        if kind != "float":
            raise ValueError(f"{what}: ReduceOp.AVG needs a floating-point tensor, got {t.dtype}")
        return MPI.SUM, True
    if kind == "float" and op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        raise ValueError(f"{what}: ReduceOp.{op.name} needs an integer or bool tensor, got {t.dtype}")
    if kind == "bool":  # bytes 0/1: or, and (torch's NCCL mapping)
        op = {ReduceOp.SUM: ReduceOp.MAX, ReduceOp.PRODUCT: ReduceOp.MIN}.get(op, op)
    table = {ReduceOp.SUM: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD, ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX,
             ReduceOp.BAND: MPI.BAND, ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}
    return table[op], False


def _divide(arr: np.ndarray, n: int):
    def finish(_work):
        np.divide(arr, n, out=arr)
    return finish


def _root(pg: ProcessGroup, rank: int, argname: str, what: str) -> int:
    """The group rank of global rank ``rank`` (ValueError naming ``argname`` if it is not a member)."""
    if not isinstance(rank, (int, np.integer)) or isinstance(rank, bool):
        raise TypeError(f"{what}: {argname} must be an int (a global rank), got {type(rank).__name__}")
    if rank not in pg.ranks:
        raise ValueError(f"{what}: {argname}={rank} is not a rank of {pg.describe()} (its global ranks: {pg.ranks})")
    return pg.ranks.index(rank)


def _finish_work(work: Work, async_op: bool):
    if async_op:
        return work
    work.wait()  # already complete (the caller's thread completed it): raises its error, copies CUDA results
    return None


def _chain(*callbacks):
    callbacks = [c for c in callbacks if c is not None]
    if not callbacks:
        return None

    def run(work):
        for c in callbacks:
            c(work)
    return run


def _agree(pg: ProcessGroup, what: str, fingerprint: list[int], fields: tuple[str, ...] = ()) -> None:
    """``pg.check(what)``, then the debug check that every rank called ``what`` with the same ``fingerprint``."""
    pg.check(what)
    pg.check_consistency(what, fingerprint, lambda fp: _describe(fp, fields))


def _issue(pg: ProcessGroup, what: str, request, async_op: bool, keep=None, **callbacks):
    """Register ``request`` as collective ``what`` (``callbacks``: finish, post, result) and wait unless ``async_op``.

    ``keep`` is a send buffer that must outlive the request.
    """
    work = pg.collective(what, [request], **callbacks, async_op=async_op)
    work._keep = keep  # noqa: SLF001
    return _finish_work(work, async_op)


def _check_pair(output: Tensor, input: Tensor, oname: str, iname: str, what: str) -> None:  # noqa: A002
    """Both tensors usable (:func:`check_tensor`) and of the same dtype."""
    check_tensor(output, oname, what)
    check_tensor(input, iname, what)
    _same_dtype(output, input, oname, iname, what)


def _check_world_multiple(big: Tensor, small: Tensor, bname: str, sname: str, size: int, what: str) -> None:
    """Raise unless ``big`` has ``size`` (the world size) times the elements of ``small``."""
    if big.numel() != size * small.numel():
        raise ValueError(f"{what}: {bname} must have world_size ({size}) times the elements of {sname} "
                         f"({small.numel()}), got shape {tuple(big.shape)} ({big.numel()} elements)")


# --- collectives -------------------------------------------------------------------------------
def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
               async_op: bool = False):
    """Reduce ``tensor`` across the group in place: every rank ends with the combined value.

    Args:
        tensor: a contiguous tensor of the same shape and dtype on every rank; input and output.
        op: how values combine (``ReduceOp.SUM``, ``AVG``, ``PRODUCT``, ``MIN``, ``MAX``, and
            ``BAND``/``BOR``/``BXOR`` for integers and bool).
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.

    Returns:
        A :class:`Work` with ``async_op=True``, else None.
    """
    pg = resolve_group(group, "all_reduce")
    if pg is None:
        return None
    check_tensor(tensor, "tensor", "all_reduce")
    route = _route(pg, "all_reduce", [("tensor", tensor)])
    if route is not None:
        _agree(pg, "all_reduce", [_dtype_code(tensor), tensor.numel(), _op_code(op)], ("op",))
        return nccl_ops.all_reduce(*route, tensor, op, async_op)
    mpi_op, avg = _reduction(op, tensor, "all_reduce")
    _agree(pg, "all_reduce", [_dtype_code(tensor), tensor.numel(), _OPS.index(op)], ("op",))
    arr, host = _array(tensor)
    request = pg.comm.Iallreduce(load_mpi().IN_PLACE, arr, op=mpi_op)
    return _issue(pg, "all_reduce", request, async_op, finish=_divide(arr, pg.size()) if avg else None,
                  post=_copy_back([(tensor, host)]), result=[tensor])


def reduce(tensor: Tensor, dst: int, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
           async_op: bool = False):
    """Reduce ``tensor`` across the group into rank ``dst``'s ``tensor``; other ranks' tensors are unchanged.

    Args:
        tensor: a contiguous tensor of the same shape and dtype on every rank.
        dst: the global rank that receives the result.
        op: see :func:`all_reduce`.
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    pg = resolve_group(group, "reduce")
    if pg is None:
        return None
    check_tensor(tensor, "tensor", "reduce")
    root = _root(pg, dst, "dst", "reduce")
    route = _route(pg, "reduce", [("tensor", tensor)])
    if route is not None:
        _agree(pg, "reduce", [_dtype_code(tensor), tensor.numel(), _op_code(op), root], ("op", "dst"))
        return nccl_ops.reduce(*route, tensor, root, op, async_op)
    mpi_op, avg = _reduction(op, tensor, "reduce")
    _agree(pg, "reduce", [_dtype_code(tensor), tensor.numel(), _OPS.index(op), root], ("op", "dst"))
    arr, host = _array(tensor)
    MPI = load_mpi()
    mine = pg.rank() == root
    request = pg.comm.Ireduce(MPI.IN_PLACE if mine else arr, arr if mine else None, op=mpi_op, root=root)
    return _issue(pg, "reduce", request, async_op, finish=_divide(arr, pg.size()) if avg and mine else None,
                  post=_copy_back([(tensor, host)]) if mine else None, result=[tensor])


def broadcast(tensor: Tensor, src: int, group: ProcessGroup | None = None, async_op: bool = False):
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank of the group.

    Args:
        tensor: a contiguous tensor of the same shape and dtype on every rank: the data on
            ``src``, the destination elsewhere.
        src: the global rank that sends.
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    pg = resolve_group(group, "broadcast")
    if pg is None:
        return None
    check_tensor(tensor, "tensor", "broadcast")
    root = _root(pg, src, "src", "broadcast")
    _agree(pg, "broadcast", [_dtype_code(tensor), tensor.numel(), root], ("src",))
    route = _route(pg, "broadcast", [("tensor", tensor)])
    if route is not None:
        return nccl_ops.broadcast(*route, tensor, root, async_op)
    arr, host = _array(tensor)
    request = pg.comm.Ibcast(arr, root=root)
    return _issue(pg, "broadcast", request, async_op, post=_copy_back([(tensor, host)]) if pg.rank() != root else None,
                  result=[tensor])


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: ProcessGroup | None = None,
               async_op: bool = False):
    """Gather every rank's ``tensor`` into ``tensor_list`` on every rank (``tensor_list[i]`` from rank i).

    Args:
        tensor_list: one tensor per rank of the group, each with ``tensor``'s dtype and element count.
        tensor: this rank's contribution (same dtype and element count on every rank).
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    pg = resolve_group(group, "all_gather")
    if pg is None:
        return None
    check_tensor(tensor, "tensor", "all_gather")
    outputs = _check_list(tensor_list, "tensor_list", "all_gather", pg.size(), like=tensor)
    route = _route(pg, "all_gather", [("tensor", tensor)] + _named("tensor_list", outputs))
    _agree(pg, "all_gather", [_dtype_code(tensor), tensor.numel()])
    if route is not None:
        return nccl_ops.all_gather(*route, outputs, tensor, async_op)
    arr, _ = _array(tensor)
    received = np.empty((pg.size(), arr.size), arr.dtype)
    request = pg.comm.Iallgather(arr, received)
    return _issue(pg, "all_gather", request, async_op, **_scatter_rows(received, outputs), result=outputs)


def _scatter_rows(received: np.ndarray, outputs: list[Tensor], counts=None) -> dict:
    """finish/post callbacks that copy row (or segment) i of ``received`` into ``outputs[i]``."""
    targets = [_array(t) for t in outputs]
    if counts is None:
        pieces = list(received)
    else:
        offsets = np.concatenate([[0], np.cumsum(counts)])
        pieces = [received[offsets[i]:offsets[i + 1]] for i in range(len(outputs))]

    def finish(_work):
        for (arr, _host), piece in zip(targets, pieces):
            arr[...] = piece

    return {"finish": finish, "post": _copy_back([(t, host) for t, (_a, host) in zip(outputs, targets)])}


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: ProcessGroup | None = None,
                           async_op: bool = False):
    """Gather every rank's ``input_tensor`` into ``output_tensor`` (rank order along the first dimension).

    Args:
        output_tensor: ``world_size`` times as many elements as ``input_tensor``, same dtype (shape
            ``(world_size * n, ...)`` or ``(world_size, n, ...)``).
        input_tensor: this rank's contribution. It may be this rank's slice of ``output_tensor``.
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    what = "all_gather_into_tensor"
    pg = resolve_group(group, what)
    if pg is None:
        return None
    _check_pair(output_tensor, input_tensor, "output_tensor", "input_tensor", what)
    _check_world_multiple(output_tensor, input_tensor, "output_tensor", "input_tensor", pg.size(), what)
    route = _route(pg, what, [("output_tensor", output_tensor), ("input_tensor", input_tensor)])
    _agree(pg, what, [_dtype_code(input_tensor), input_tensor.numel()])
    if route is not None:
        return nccl_ops.all_gather_into_tensor(*route, output_tensor, input_tensor, async_op)
    out, host = _array(output_tensor)
    inp, _ = _array(input_tensor)
    send = _unaliased(inp, out, slot=pg.rank())
    request = pg.comm.Iallgather(send, out)
    return _issue(pg, what, request, async_op, post=_copy_back([(output_tensor, host)]), result=[output_tensor])


def _same_dtype(a: Tensor, b: Tensor, aname: str, bname: str, what: str) -> None:
    if a.dtype != b.dtype:
        raise TypeError(f"{what}: {aname} and {bname} must have the same dtype, got {a.dtype} and {b.dtype}")


def _unaliased(send: np.ndarray, recv: np.ndarray, slot: int | None = None):
    """``send``, or MPI_IN_PLACE when it is exactly row ``slot`` of ``recv``, or a copy if the two overlap.

    MPI forbids a send buffer that overlaps the receive buffer.
    """
    if not np.shares_memory(send, recv):
        return send
    if slot is not None and recv.size == send.size * (recv.size // max(send.size, 1)):
        row = recv[slot * send.size:(slot + 1) * send.size]
        if row.__array_interface__["data"][0] == send.__array_interface__["data"][0]:
            return load_mpi().IN_PLACE
    return send.copy()


def reduce_scatter(output: Tensor, input_list: list[Tensor], op: ReduceOp = ReduceOp.SUM,
                   group: ProcessGroup | None = None, async_op: bool = False):
    """Reduce ``input_list[i]`` across ranks into rank i's ``output``.

    Args:
        output: this rank's share of the result.
        input_list: one tensor per rank, each with ``output``'s dtype and element count.
        op: see :func:`all_reduce`.
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    pg = resolve_group(group, "reduce_scatter")
    if pg is None:
        return None
    check_tensor(output, "output", "reduce_scatter")
    inputs = _check_list(input_list, "input_list", "reduce_scatter", pg.size(), like=output)
    route = _route(pg, "reduce_scatter", [("output", output)] + _named("input_list", inputs))
    if route is not None:
        _agree(pg, "reduce_scatter", [_dtype_code(output), output.numel(), _op_code(op)], ("op",))
        return nccl_ops.reduce_scatter(*route, output, inputs, op, async_op)
    mpi_op, avg = _reduction(op, output, "reduce_scatter")
    _agree(pg, "reduce_scatter", [_dtype_code(output), output.numel(), _OPS.index(op)], ("op",))
    out, host = _array(output)
    send = np.concatenate([_array(t)[0] for t in inputs]) if inputs else out[:0]
    request = pg.comm.Ireduce_scatter_block(send, out, op=mpi_op)
    return _issue(pg, "reduce_scatter", request, async_op, keep=send, finish=_divide(out, pg.size()) if avg else None,
                  post=_copy_back([(output, host)]), result=[output])


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM,  # noqa: A002 - torch's name
                          group: ProcessGroup | None = None, async_op: bool = False):
    """Reduce ``input`` across ranks and give rank i the i-th of its ``world_size`` equal parts, in ``output``.

    Args:
        output: this rank's part (``input.numel() / world_size`` elements).
        input: ``world_size`` times as many elements as ``output``, same dtype.
        op: see :func:`all_reduce`.
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    what = "reduce_scatter_tensor"
    pg = resolve_group(group, what)
    if pg is None:
        return None
    _check_pair(output, input, "output", "input", what)
    _check_world_multiple(input, output, "input", "output", pg.size(), what)
    route = _route(pg, what, [("output", output), ("input", input)])
    if route is not None:
        _agree(pg, what, [_dtype_code(output), output.numel(), _op_code(op)], ("op",))
        return nccl_ops.reduce_scatter_tensor(*route, output, input, op, async_op)
    mpi_op, avg = _reduction(op, output, what)
    _agree(pg, what, [_dtype_code(output), output.numel(), _OPS.index(op)], ("op",))
    out, host = _array(output)
    inp, _ = _array(input)
    send = _unaliased(inp, out)
    request = pg.comm.Ireduce_scatter_block(send, out, op=mpi_op)
    return _issue(pg, what, request, async_op, finish=_divide(out, pg.size()) if avg else None,
                  post=_copy_back([(output, host)]), result=[output])


def gather(tensor: Tensor, gather_list: list[Tensor] | None = None, dst: int = 0,
           group: ProcessGroup | None = None, async_op: bool = False):
    """Gather every rank's ``tensor`` into ``gather_list`` on rank ``dst``.

    Args:
        tensor: this rank's contribution (same dtype and element count on every rank).
        gather_list: on ``dst``, one tensor per rank with ``tensor``'s dtype and element count;
            None (or empty) on the other ranks.
        dst: the global rank that receives.
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    pg = resolve_group(group, "gather")
    if pg is None:
        return None
    check_tensor(tensor, "tensor", "gather")
    root = _root(pg, dst, "dst", "gather")
    mine = pg.rank() == root
    if mine:
        if gather_list is None:
            raise ValueError("gather: Argument ``gather_list`` must be specified on destination rank.")
        outputs = _check_list(gather_list, "gather_list", "gather", pg.size(), like=tensor)
    elif gather_list:
        raise ValueError("gather: Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    route = _route(pg, "gather", [("tensor", tensor)] + (_named("gather_list", outputs) if mine else []))
    _agree(pg, "gather", [_dtype_code(tensor), tensor.numel(), root], ("dst",))
    if route is not None:
        return nccl_ops.gather(*route, tensor, outputs if mine else None, root, async_op)
    arr, _ = _array(tensor)
    received = np.empty((pg.size(), arr.size), arr.dtype) if mine else None
    request = pg.comm.Igather(arr, received, root=root)
    callbacks = _scatter_rows(received, outputs) if mine else {}
    return _issue(pg, "gather", request, async_op, **callbacks, result=outputs if mine else [])


def scatter(tensor: Tensor, scatter_list: list[Tensor] | None = None, src: int = 0,
            group: ProcessGroup | None = None, async_op: bool = False):
    """Send ``scatter_list[i]`` of rank ``src`` to rank i's ``tensor``.

    Args:
        tensor: the output on every rank (same dtype and element count everywhere).
        scatter_list: on ``src``, one tensor per rank with ``tensor``'s dtype and element count;
            None (or empty) on the other ranks.
        src: the global rank that sends.
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    pg = resolve_group(group, "scatter")
    if pg is None:
        return None
    check_tensor(tensor, "tensor", "scatter")
    root = _root(pg, src, "src", "scatter")
    mine = pg.rank() == root
    send = None
    if mine:
        if scatter_list is None:
            raise ValueError("scatter: Argument ``scatter_list`` must be specified on source rank.")
        inputs = _check_list(scatter_list, "scatter_list", "scatter", pg.size(), like=tensor)
    elif scatter_list:
        raise ValueError("scatter: Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    route = _route(pg, "scatter", [("tensor", tensor)] + (_named("scatter_list", inputs) if mine else []))
    _agree(pg, "scatter", [_dtype_code(tensor), tensor.numel(), root], ("src",))
    if route is not None:
        return nccl_ops.scatter(*route, tensor, inputs if mine else None, root, async_op)
    if mine:
        send = np.concatenate([_array(t)[0] for t in inputs])
    arr, host = _array(tensor)
    request = pg.comm.Iscatter(send, arr, root=root)
    return _issue(pg, "scatter", request, async_op, keep=send, post=_copy_back([(tensor, host)]), result=[tensor])


def all_to_all(output_tensor_list: list[Tensor], input_tensor_list: list[Tensor],
               group: ProcessGroup | None = None, async_op: bool = False):
    """Send ``input_tensor_list[j]`` to rank j, receiving rank i's piece into ``output_tensor_list[i]``.

    The pieces may differ in size (``output_tensor_list[i]`` on rank j must have as many
    elements as ``input_tensor_list[j]`` on rank i); all tensors share one dtype.

    Args:
        output_tensor_list: one tensor per rank, the receive buffers.
        input_tensor_list: one tensor per rank, the pieces to send.
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    pg = resolve_group(group, "all_to_all")
    if pg is None:
        return None
    inputs = _check_list(input_tensor_list, "input_tensor_list", "all_to_all", pg.size())
    outputs = _check_list(output_tensor_list, "output_tensor_list", "all_to_all", pg.size(), like=inputs[0],
                          same_numel=False)
    _check_list(inputs, "input_tensor_list", "all_to_all", pg.size(), like=inputs[0], same_numel=False)
    route = _route(pg, "all_to_all", _named("input_tensor_list", inputs) + _named("output_tensor_list", outputs))
    _agree(pg, "all_to_all", [_dtype_code(inputs[0]), 0])
    if route is not None:
        return nccl_ops.all_to_all(*route, outputs, inputs, async_op)
    send_counts = [t.numel() for t in inputs]
    recv_counts = [t.numel() for t in outputs]
    send = np.concatenate([_array(t)[0] for t in inputs])
    received = np.empty(sum(recv_counts), send.dtype)
    request = pg.comm.Ialltoallv([send, (send_counts, _offsets(send_counts))],
                                 [received, (recv_counts, _offsets(recv_counts))])
    return _issue(pg, "all_to_all", request, async_op, keep=send, **_scatter_rows(received, outputs, recv_counts),
                  result=outputs)


def _offsets(counts: list[int]) -> list[int]:
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if counts else []


def _splits(t: Tensor, splits, argname: str, size: int, what: str) -> list[int]:
    """Element counts of the ``size`` pieces of ``t`` along dimension 0."""
    if t.dim() == 0:
        raise ValueError(f"{what}: {argname} must have at least one dimension, got a 0-dim tensor")
    rows = t.shape[0]
    row_numel = t.numel() // rows if rows else 0
    if splits is None or len(splits) == 0:
        if rows % size:
            raise ValueError(f"{what}: {argname}'s first dimension ({rows}) must be divisible by the world size "
                             f"({size}) when no split sizes are given")
        return [rows // size * row_numel] * size
    splits = [int(s) for s in splits]
    if len(splits) != size or sum(splits) != rows or min(splits) < 0:
        raise ValueError(f"{what}: {argname}'s split sizes must be {size} non-negative numbers adding up to its "
                         f"first dimension ({rows}), got {splits}")
    return [s * row_numel for s in splits]


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes: list[int] | None = None,  # noqa: A002
                      input_split_sizes: list[int] | None = None, group: ProcessGroup | None = None,
                      async_op: bool = False):
    """Split ``input`` along dimension 0 and send piece j to rank j; pieces received fill ``output`` in rank order.

    Args:
        output: the receive buffer (same dtype as ``input``).
        input: the data to send.
        output_split_sizes: rows received from each rank (default: equal parts).
        input_split_sizes: rows sent to each rank (default: equal parts).
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
    """
    what = "all_to_all_single"
    pg = resolve_group(group, what)
    if pg is None:
        return None
    _check_pair(output, input, "output", "input", what)
    send_counts = _splits(input, input_split_sizes, "input", pg.size(), what)
    recv_counts = _splits(output, output_split_sizes, "output", pg.size(), what)
    route = _route(pg, what, [("output", output), ("input", input)])
    _agree(pg, what, [_dtype_code(input), 0])
    if route is not None:
        return nccl_ops.all_to_all_single(*route, output, input, send_counts, recv_counts, async_op)
    out, host = _array(output)
    inp, _ = _array(input)
    send = _unaliased(inp, out)
    request = pg.comm.Ialltoallv([send, (send_counts, _offsets(send_counts))],
                                 [out, (recv_counts, _offsets(recv_counts))])
    return _issue(pg, what, request, async_op, post=_copy_back([(output, host)]), result=[output])


def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids=None):
    """Wait until every rank of the group has reached the barrier.

    With backend ``"nccl"`` it is torch's NCCL barrier: an all-reduce of one element on the group's
    CUDA device, waited for on the host (so it also waits for the device work queued before it on
    the current stream); with ``"mpi"`` and ``"cpu:mpi,cuda:nccl"``, an MPI barrier.

    Args:
        group: the process group (default: all ranks).
        async_op: return a :class:`Work` instead of waiting.
        device_ids: accepted for compatibility (ignored).
    """
    pg = resolve_group(group, "barrier")
    if pg is None:
        return None
    pg.check("barrier")
    if pg.backend == "nccl":
        return nccl_ops.barrier(pg.nccl, async_op)
    return _issue(pg, "barrier", pg.comm.Ibarrier(), async_op)


# --- point to point ----------------------------------------------------------------------------
def _tag(tag, what: str) -> int:
    if not isinstance(tag, (int, np.integer)) or isinstance(tag, bool) or tag < 0:
        raise ValueError(f"{what}: tag must be a non-negative int, got {tag!r}")
    upper = load_mpi().COMM_WORLD.Get_attr(load_mpi().TAG_UB)
    if upper is not None and tag > upper:
        raise ValueError(f"{what}: tag must be at most {upper} (MPI_TAG_UB), got {tag}")
    return int(tag)


def isend(tensor: Tensor, dst: int, group: ProcessGroup | None = None, tag: int = 0, *,
          async_op: bool = True) -> Work | None:
    """Send ``tensor`` to global rank ``dst`` without waiting; returns a :class:`Work`.

    Args:
        tensor: the data (do not modify it before the work completes).
        dst: the receiving global rank (not this one).
        group: the process group ``dst`` belongs to (default: all ranks).
        tag: matches the receiver's ``tag``.
    """
    pg = resolve_group(group, "isend")
    if pg is None:
        return None
    check_tensor(tensor, "tensor", "send")
    peer = _root(pg, dst, "dst", "send")
    if peer == pg.rank():
        raise ValueError("send: Invalid destination rank: should not be the same as rank of the current process.")
    tag = _tag(tag, "send")
    pg.check("send")
    route = _route(pg, "send", [("tensor", tensor)])
    if route is not None:
        return nccl_ops.isend(*route, tensor, peer, async_op)
    arr, _ = _array(tensor)
    return pg.point_to_point("send", dst, [pg.comm.Isend(arr, dest=peer, tag=tag)], result=[tensor],
                             async_op=async_op)


def irecv(tensor: Tensor, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0, *,
          async_op: bool = True) -> Work | None:
    """Receive into ``tensor`` from global rank ``src`` (any rank if None) without waiting; returns a :class:`Work`.

    :meth:`Work.source_rank` gives the sender once the work completed.

    Args:
        tensor: the receive buffer (the sender's tensor must have as many elements or fewer).
        src: the sending global rank, or None for any.
        group: the process group (default: all ranks).
        tag: matches the sender's ``tag``.
    """
    pg = resolve_group(group, "irecv")
    if pg is None:
        return None
    check_tensor(tensor, "tensor", "recv")
    MPI = load_mpi()
    if src is None and pg.nccl is not None and tensor.device.type == "cuda":
        raise ValueError("recv: src=None (any source) is not supported for CUDA tensors by the NCCL backend (as in "
                         "torch); pass the sending rank")
    if src is None:
        peer = MPI.ANY_SOURCE
    else:
        peer = _root(pg, src, "src", "recv")
        if peer == pg.rank():
            raise ValueError("recv: Invalid source rank: should not be the same as rank of the current process.")
    tag = _tag(tag, "recv")
    pg.check("recv")
    route = _route(pg, "recv", [("tensor", tensor)])
    if route is not None:
        return nccl_ops.irecv(*route, tensor, peer, async_op)
    arr, host = _array(tensor)
    status = MPI.Status()

    def finish(work):
        work._source = pg.ranks[status.Get_source()]

    return pg.point_to_point("recv", src, [pg.comm.Irecv(arr, source=peer, tag=tag)], statuses=[status],
                             finish=finish, post=_copy_back([(tensor, host)]), result=[tensor], async_op=async_op)


def send(tensor: Tensor, dst: int, group: ProcessGroup | None = None, tag: int = 0) -> None:
    """Send ``tensor`` to global rank ``dst`` and wait until the send buffer may be reused.

    Args:
        tensor: the data.
        dst: the receiving global rank (not this one).
        group: the process group ``dst`` belongs to (default: all ranks).
        tag: matches the receiver's ``tag``.
    """
    work = isend(tensor, dst, group, tag, async_op=False)
    if work is not None:
        work.wait()


def recv(tensor: Tensor, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0) -> int:
    """Receive into ``tensor`` from global rank ``src`` (any rank if None); returns the sender's global rank.

    Args:
        tensor: the receive buffer.
        src: the sending global rank, or None for any.
        group: the process group (default: all ranks).
        tag: matches the sender's ``tag``.
    """
    work = irecv(tensor, src, group, tag, async_op=False)
    if work is None:
        return -1
    work.wait()
    return work.source_rank()
