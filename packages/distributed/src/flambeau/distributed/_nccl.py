"""NCCL through cffi (ABI mode): the library, the communicators and the work handles of the ``"nccl"`` backend.

Never required: libnccl is loaded on first use (:func:`available`, ``init_process_group("nccl")``) from
wherever cuda-pathfinder finds it (the ``nvidia-nccl-cu12``/``-cu13`` wheels, conda, the system), else
from the system's library path. Without cffi or libnccl, :func:`available` is False and
``init_process_group("nccl")`` raises with the reason.

Ranks are always started by MPI, so MPI does NCCL's bootstrap (Note [NCCL bootstrap over MPI]).
Every NCCL call is enqueued on the caller's *current* CUDA stream (Note [NCCL on the current
stream]); the operations themselves are in :mod:`flambeau.distributed._nccl_collectives`.

Note [NCCL bootstrap over MPI]
    One NCCL communicator per (process group, device), made on the group's first CUDA collective,
    as torch makes them: rank 0 of the group calls ``ncclGetUniqueId`` and broadcasts its 128 bytes
    (and whether it succeeded) over a duplicate of the group's MPI communicator; then every rank
    all-gathers (host, device). The all-gather completes only once every rank has arrived, so
    ``ncclCommInitRank``, which blocks until all ranks join and has no timeout, is called only
    when they are all there; the MPI steps have the group's timeout and name a rank that does not
    come (Note [Which rank did not arrive] in ``_runtime.py``). Two ranks of one host on one GPU
    (``fl.cuda.set_device(local_rank)`` forgotten) are refused on every rank, with the same error,
    before NCCL sees them. Point-to-point operations use the group's communicator once a collective
    has made it; before that, a communicator of their two ranks (made by an id sent from the lower
    rank and an acknowledgement from the higher one), since only those two ranks call them, as torch
    does. Made that way, a ring of sends and receives (each rank sending to the next, then receiving
    from the one before) cannot start: every lower rank waits for its peer's acknowledgement while
    that peer waits for another; issue one collective first (``barrier()``), and the ring runs on the
    group's communicator.

Note [NCCL on the current stream]
    torch runs NCCL on a stream of its own and makes it wait for the current stream; flambeau
    enqueues on the current stream itself, so the order with the kernels before and after is the
    stream's order, and no tensor needs ``record_stream``: the caching allocator reuses a freed
    block only for later work on the same stream. An operation costs no host synchronisation:
    ``async_op=False`` returns once the operation is enqueued; a :class:`NcclWork`'s ``wait()``
    makes the caller's current stream wait for an event recorded after the operation. Lists of
    tensors (``all_gather``, ``reduce_scatter``) go through one flat buffer with copy kernels on
    the same stream; ``gather``, ``scatter`` and the ``all_to_all`` forms are grouped
    ``ncclSend``/``ncclRecv`` on the tensors' own memory, as torch's NCCL backend does.

Note [NCCL timeouts]
    NCCL operations run on the GPU, so a rank that never joins a collective leaves the others'
    streams waiting, not their host. What is covered: (1) every NCCL operation records an event;
    each new operation on the group, and ``Work.is_completed()``, looks at the oldest unfinished one
    and at ``ncclCommGetAsyncError``: an asynchronous error, or an operation older than the group's
    ``timeout``, aborts the communicator (``ncclCommAbort``) and raises :class:`DistributedError`
    naming the operation; the group is unusable afterwards (as torch's). (2) ``Work.wait(timeout)``
    with an explicit timeout, ``barrier()`` and every ``wait()`` under
    ``FLAMBEAU_NCCL_BLOCKING_WAIT=1`` (torch's ``TORCH_NCCL_BLOCKING_WAIT``) wait on the host,
    polling the event and the communicator's error, and abort past the deadline. Not covered:
    torch's watchdog thread. A program that stops issuing operations and blocks in a host
    synchronisation of its own (``.item()``, ``.cpu()``, ``fl.cuda.synchronize()``) behind a
    collective that never completes waits in the CUDA driver, where no Python code runs; set
    ``FLAMBEAU_NCCL_BLOCKING_WAIT=1`` (or wait with a timeout) where that can happen.
"""

from __future__ import annotations

import ctypes.util
import hashlib
import os
import socket
import time

import numpy as np

import flambeau as fl
from flambeau.distributed._runtime import DistributedError, Work

__all__ = ["available", "find_library", "why_unavailable", "version", "NcclError", "NcclGroup", "NcclWork",
           "Communicator", "dtype_code", "red_op", "DATA_TYPES", "RED_OPS"]

# The subset of nccl.h (NCCL 2.x) that flambeau uses. ncclResult_t, ncclDataType_t and ncclRedOp_t are
# C enums, declared as int (their size in NCCL's ABI); ncclUniqueId is passed by value.
_CDEF = """
typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef void* cudaStream_t;
int ncclGetVersion(int *version);
int ncclGetUniqueId(ncclUniqueId *uniqueId);
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
int ncclCommDestroy(ncclComm_t comm);
int ncclCommAbort(ncclComm_t comm);
int ncclCommGetAsyncError(ncclComm_t comm, int *asyncError);
const char *ncclGetErrorString(int result);
int ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, ncclComm_t comm,
    cudaStream_t stream);
int ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, int datatype, int root, ncclComm_t comm,
    cudaStream_t stream);
int ncclReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, int root,
    ncclComm_t comm, cudaStream_t stream);
int ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, int datatype, ncclComm_t comm,
    cudaStream_t stream);
int ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, int datatype, int op,
    ncclComm_t comm, cudaStream_t stream);
int ncclSend(const void *sendbuff, size_t count, int datatype, int peer, ncclComm_t comm, cudaStream_t stream);
int ncclRecv(void *recvbuff, size_t count, int datatype, int peer, ncclComm_t comm, cudaStream_t stream);
int ncclGroupStart(void);
int ncclGroupEnd(void);
"""

UNIQUE_ID_BYTES = 128
NCCL_SUCCESS, NCCL_IN_PROGRESS = 0, 7  # ncclResult_t
# ncclDataType_t codes of flambeau's dtypes; bool travels as uint8 (0/1 bytes), as in torch.
DATA_TYPES = {"int8": 0, "uint8": 1, "bool": 1, "int32": 2, "int64": 4, "float16": 6, "float32": 7, "float64": 8,
              "bfloat16": 9}
# ncclRedOp_t codes by ReduceOp name (ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg).
RED_OPS = {"SUM": 0, "PRODUCT": 1, "MAX": 2, "MIN": 3, "AVG": 4}
_POLL_S = (20e-6, 1e-3)  # host polling of a blocking wait: first and longest pause


class NcclError(DistributedError):
    """libnccl could not be loaded, or an NCCL call failed (the message has NCCL's error string)."""


_state: dict = {}


def find_library() -> str | None:
    """Path of libnccl as cuda-pathfinder finds it (NVIDIA wheels, conda, the system), else the system's; None
    if absent."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        path = load_nvidia_dynamic_lib("nccl").abs_path
        if path:
            return path
    except Exception:  # cuda-pathfinder missing, or the library not found by it
        pass
    return ctypes.util.find_library("nccl")


def _lib():
    """``(ffi, lib)``, loading libnccl on first use; raises :class:`NcclError` saying why it cannot."""
    if "lib" in _state:
        if _state["lib"] is None:
            raise NcclError(_state["why"])
        return _state["ffi"], _state["lib"]
    try:
        import cffi

        path = find_library()
        if path is None:
            raise NcclError("libnccl.so.2 not found (pip install nvidia-nccl-cu12 or nvidia-nccl-cu13, with "
                            "cuda-pathfinder)")
        ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        lib = ffi.dlopen(path)
    except Exception as error:  # cffi missing, a library that does not load
        _state["lib"] = None
        _state["why"] = str(error) if isinstance(error, NcclError) else f"{type(error).__name__}: {error}"
        raise NcclError(_state["why"]) from None
    _state["ffi"], _state["lib"] = ffi, lib
    return ffi, lib


def available() -> bool:
    """Whether libnccl loads (cffi installed and the library found)."""
    try:
        _lib()
    except NcclError:
        return False
    return True


def why_unavailable() -> str | None:
    """Why :func:`available` is False (None when it is True)."""
    try:
        _lib()
    except NcclError as error:
        return str(error)
    return None


def version() -> tuple[int, int, int]:
    """NCCL's version as ``(major, minor, patch)`` (2.19.3 reads ``(2, 19, 3)``)."""
    ffi, lib = _lib()
    out = ffi.new("int *")
    check(lib.ncclGetVersion(out), "ncclGetVersion")
    code = out[0]
    if code >= 10000:  # NCCL_VERSION(X, Y, Z) for releases after 2.8
        return code // 10000, code // 100 % 100, code % 100
    return code // 1000, code // 100 % 10, code % 100


def check(status: int, call: str) -> None:
    """Raise :class:`NcclError` unless ``status`` is ncclSuccess."""
    if status != NCCL_SUCCESS:
        ffi, lib = _lib()
        raise NcclError(f"{call} failed: {ffi.string(lib.ncclGetErrorString(status)).decode(errors='replace')} "
                        f"(ncclResult_t {status}); NCCL_DEBUG=INFO in the environment makes NCCL say more")


def dtype_code(t, argname: str, what: str) -> int:
    """The ncclDataType_t of ``t``'s dtype; TypeError naming ``argname`` for dtypes NCCL lacks (int16, complex)."""
    code = DATA_TYPES.get(t.dtype.name)
    if code is None:
        raise TypeError(f"{what}: {argname} has dtype {t.dtype}, which the NCCL backend does not support (NCCL "
                        f"has {', '.join(sorted(DATA_TYPES))}); convert it, or pass a CPU tensor to a "
                        f"'cpu:mpi,cuda:nccl' group")
    return code


def red_op(op, t, what: str) -> int:
    """The ncclRedOp_t of ``op`` (a ReduceOp) on ``t``'s dtype, with torch's NCCL rules.

    bool: SUM is a logical or (MAX of bytes) and PRODUCT a logical and (MIN). BAND, BOR, BXOR and
    PREMUL_SUM raise, as with torch's NCCL backend; AVG needs a floating-point tensor, as with the
    MPI backend.
    """
    name = getattr(op, "name", None)
    if type(op).__name__ != "ReduceOp" or name is None:
        raise TypeError(f"{what}: op must be a flambeau.distributed.ReduceOp, got {op!r}")
    if name in ("BAND", "BOR", "BXOR", "PREMUL_SUM"):
        raise ValueError(f"{what}: ReduceOp.{name} is not supported by the NCCL backend (as in torch); use a CPU "
                         f"tensor with backend 'mpi' or 'cpu:mpi,cuda:nccl'")
    if name == "AVG" and not t.dtype.is_floating_point:
        raise ValueError(f"{what}: ReduceOp.AVG needs a floating-point tensor, got {t.dtype}")
    if t.dtype == fl.bool:
        name = {"SUM": "MAX", "PRODUCT": "MIN"}.get(name, name)
    return RED_OPS[name]


def cuda_index(device) -> int | None:
    """The CUDA device index of ``device`` (an int, a string or a ``flambeau.device``; an unindexed
    ``"cuda"`` is the current device), or None for a device that is not CUDA."""
    d = fl.device("cuda", device) if isinstance(device, int) and not isinstance(device, bool) else fl.device(device)
    if d.type != "cuda":
        return None
    return d.index if d.index is not None else fl.cuda.current_device()


def _gpu_identity(device: int) -> int:
    """The physical GPU behind this process's ``cuda:device``, as a number the ranks can compare: from its UUID,
    so that ranks which each see one GPU through CUDA_VISIBLE_DEVICES (all of them as cuda:0) are told apart,
    or from the host and index where the driver reports none (tests replace it to give each rank a GPU)."""
    uuid = fl.cuda.get_device_properties(device).uuid
    key = uuid if uuid else f"{socket.gethostname()}:{device}"
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little", signed=True)


def _now() -> float:
    return time.monotonic()


class Communicator:
    """One ``ncclComm_t``: its CUDA device, size and this process's rank in it."""

    def __init__(self, handle, device: int, size: int, rank: int, label: str):
        self.handle = handle
        self.device = device
        self.size = size
        self.rank = rank
        self.label = label
        self.error: str | None = None

    def async_error(self) -> str | None:
        """NCCL's asynchronous error of this communicator (a failed peer, a network error), or None."""
        if self.handle is None:
            return self.error
        ffi, lib = _lib()
        out = ffi.new("int *")
        check(lib.ncclCommGetAsyncError(self.handle, out), "ncclCommGetAsyncError")
        if out[0] in (NCCL_SUCCESS, NCCL_IN_PROGRESS):
            return None
        return ffi.string(lib.ncclGetErrorString(out[0])).decode(errors="replace")

    def abort(self) -> None:
        """``ncclCommAbort``: stop what runs on the device and free the communicator."""
        if self.handle is not None:
            handle, self.handle = self.handle, None
            _lib()[1].ncclCommAbort(handle)

    def destroy(self) -> None:
        """``ncclCommDestroy`` (after the caller made sure its operations completed)."""
        if self.handle is not None:
            handle, self.handle = self.handle, None
            check(_lib()[1].ncclCommDestroy(handle), "ncclCommDestroy")

    def __repr__(self) -> str:
        return f"<NCCL communicator {self.label} on cuda:{self.device}, rank {self.rank} of {self.size}>"


class NcclWork(Work):
    """The handle of an NCCL operation (torch's ``Work`` of its NCCL backend; Note [NCCL on the current stream]).

    :meth:`wait` makes the caller's current stream wait for the operation (the host does not wait);
    the output tensors are then safe to use on that stream. :meth:`is_completed` asks the event
    recorded after the operation.
    """

    __slots__ = ("_end", "_comm", "_nccl", "_device")

    def __init__(self, name: str, nccl: NcclGroup, comm: Communicator, end, result, source: int | None = None):
        # no MPI requests and never handed to the progress thread: the event below says when it is done
        super().__init__(nccl.pg.runtime, name, nccl.pg, [], timeout=nccl.pg.timeout, result=result)
        self._source = source
        self._end = end  # a flambeau.cuda.Event recorded after the operation
        self._comm = comm
        self._nccl = nccl
        self._device = comm.device

    def _done(self) -> bool:
        if self.completed_at is not None:
            return True
        if self._end.query():
            self.completed_at = _now()
            return True
        return False

    def is_completed(self) -> bool:
        """Whether the operation has finished on the device (or failed); never blocks."""
        if self._error is not None or self._done():
            return True
        try:
            self._nccl.poll()
        except DistributedError as error:
            self._error = error
            return True
        return False

    def is_success(self) -> bool:
        """Whether the operation finished without an error (False while it runs)."""
        return self.is_completed() and self._error is None

    def exception(self) -> BaseException | None:
        return self._error

    def wait(self, timeout=None) -> bool:
        """Make the current stream wait for the operation (no host synchronisation); raise its error if it failed.

        Args:
            timeout: a :class:`datetime.timedelta` (or seconds): wait on the host instead, at most
                this long; past it the communicator is aborted and :class:`DistributedError`
                raised (Note [NCCL timeouts]). Under ``FLAMBEAU_NCCL_BLOCKING_WAIT=1`` every wait
                does so, with the group's timeout.
        """
        if self._error is not None:
            raise self._error
        if timeout is not None:
            seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
            self._nccl.wait_on_host(self, min(self._deadline, _now() + seconds))
        elif os.environ.get("FLAMBEAU_NCCL_BLOCKING_WAIT", "0") not in ("", "0"):
            self._nccl.wait_on_host(self, self._deadline)
        else:
            fl.cuda.current_stream(self._device).wait_event(self._end)
            if self.completed_at is None:
                self.completed_at = _now()  # enqueued: what DDP's statistics read
        return True

    def synchronize(self) -> None:
        """Wait on the host until the operation has completed (torch's ``Work.synchronize``)."""
        self._nccl.wait_on_host(self, self._deadline)

    def __repr__(self) -> str:
        state = "failed" if self._error is not None else "completed" if self.completed_at is not None else "enqueued"
        return f"<Work {self.name} (nccl) {state}>"


class NcclGroup:
    """The NCCL side of one process group: its communicators, made lazily, and its operations in flight.

    Args:
        pg: the process group (its MPI communicator does the bootstrap).
        device: the CUDA device index the group is bound to (``init_process_group(device_id=...)``),
            or None: one communicator per device used.
    """

    def __init__(self, pg, boot, device: int | None = None):
        self.pg = pg
        self.boot = boot  # a duplicate of the group's MPI communicator: bootstrap messages only
        self.device = device
        self.comms: dict[int, Communicator] = {}
        self.pairs: dict[tuple[int, int], Communicator] = {}
        self.inflight: list[NcclWork] = []  # oldest first
        self.broken: str | None = None

    # --- communicators ------------------------------------------------------------------------
    def check(self, what: str) -> None:
        if self.broken is not None:
            raise DistributedError(f"{what}: {self.pg.describe()} is unusable after an NCCL failure: {self.broken}")

    def device_of(self, t, argname: str, what: str) -> int:
        """``t``'s CUDA device index, checked against the device the group is bound to."""
        index = cuda_index(t.device)
        if self.device is not None and index != self.device:
            raise ValueError(f"{what}: {argname} is on cuda:{index}, but {self.pg.describe()} uses cuda:{self.device} "
                             f"(init_process_group's device_id); move the tensor there")
        return index

    def comm(self, device: int, what: str) -> Communicator:
        """The group's communicator on ``device``, made on first use (collective: Note [NCCL bootstrap over MPI])."""
        self.check(what)
        comm = self.comms.get(device)
        if comm is None:
            comm = self.comms[device] = self._create(device, what)
        return comm

    def point_to_point(self, device: int, peer: int, what: str) -> tuple[Communicator, int]:
        """``(communicator, peer's rank in it)`` for a send to or receive from group rank ``peer``: the group's
        own communicator once a collective has made it (NCCL sends within any communicator, and every rank
        of the group has it then), else the two ranks' own (Note [NCCL bootstrap over MPI])."""
        self.check(what)
        comm = self.comms.get(device)
        if comm is not None:
            return comm, peer
        comm = self.pair(device, peer, what)
        return comm, 1 - comm.rank

    def pair(self, device: int, peer: int, what: str) -> Communicator:
        """The communicator of this rank and group rank ``peer`` on ``device`` (for send and recv)."""
        self.check(what)
        comm = self.pairs.get((device, peer))
        if comm is None:
            comm = self.pairs[(device, peer)] = self._create_pair(device, peer, what)
        return comm

    def _mpi(self, what: str, requests: list, peers: list[int]) -> None:
        """Complete MPI ``requests`` within the group's timeout (naming a rank that does not come)."""
        rt = self.pg.runtime
        work = Work(rt, what, self.pg, requests, peers=peers, timeout=self.pg.timeout)
        rt.complete_here(work)
        work.wait()

    def _unique_id(self, buf: np.ndarray) -> None:
        """Fill ``buf[:128]`` with a new ncclUniqueId and ``buf[128]`` with 1, or leave ``buf[128]`` 0 on failure."""
        ffi, lib = _lib()
        uid = ffi.new("ncclUniqueId *")
        try:
            check(lib.ncclGetUniqueId(uid), "ncclGetUniqueId")
        except NcclError as error:
            self._id_error = str(error)
            return
        buf[:UNIQUE_ID_BYTES] = np.frombuffer(ffi.buffer(uid), np.uint8)
        buf[UNIQUE_ID_BYTES] = 1

    def _init_rank(self, buf: np.ndarray, size: int, rank: int, device: int, label: str) -> Communicator:
        ffi, lib = _lib()
        uid = ffi.new("ncclUniqueId *")
        ffi.memmove(uid, buf[:UNIQUE_ID_BYTES].tobytes(), UNIQUE_ID_BYTES)
        out = ffi.new("ncclComm_t *")
        with fl.cuda.device(device):
            check(lib.ncclCommInitRank(out, size, uid[0], rank), f"ncclCommInitRank of {label} on cuda:{device}")
        return Communicator(out[0], device, size, rank, label)

    def _create(self, device: int, what: str) -> Communicator:
        pg, size, me = self.pg, self.pg.size(), self.pg.rank()
        buf = np.zeros(UNIQUE_ID_BYTES + 8, np.uint8)
        self._id_error = "ncclGetUniqueId failed on the group's rank 0"
        if me == 0:
            self._unique_id(buf)
        self._mpi(f"{what} (NCCL bootstrap)", [self.boot.Ibcast(buf, root=0)], pg.ranks)
        if not buf[UNIQUE_ID_BYTES]:
            raise NcclError(f"{what}: cannot make the NCCL communicator of {pg.describe()}: {self._id_error}")
        mine = np.array([_gpu_identity(device), device], np.int64)
        everyone = np.zeros((size, 2), np.int64)
        self._mpi(f"{what} (NCCL bootstrap)", [self.boot.Iallgather(mine, everyone)], pg.ranks)
        seen: dict[int, int] = {}
        for r in range(size):
            key = int(everyone[r, 0])
            if key in seen:
                raise DistributedError(
                    f"{what}: ranks {pg.ranks[seen[key]]} and {pg.ranks[r]} of {pg.describe()} both use one GPU "
                    f"(their cuda:{int(everyone[seen[key], 1])} and cuda:{int(everyone[r, 1])}); NCCL needs one GPU "
                    f"per rank: call fl.cuda.set_device(int(os.environ['LOCAL_RANK'])) before the first collective "
                    f"(and start at most as many ranks per host as it has GPUs)")
            seen[key] = r
        return self._init_rank(buf, size, me, device, pg.describe())

    def _create_pair(self, device: int, peer: int, what: str) -> Communicator:
        pg, me = self.pg, self.pg.rank()
        low = me < peer
        buf = np.zeros(UNIQUE_ID_BYTES + 8, np.uint8)
        ack = np.zeros(1, np.int64)
        peers = [pg.ranks[peer]]
        self._id_error = f"ncclGetUniqueId failed on global rank {pg.ranks[min(me, peer)]}"
        # Note [NCCL bootstrap over MPI]: the id goes up, an acknowledgement comes back, so neither
        # rank enters ncclCommInitRank (which has no timeout) before the other has arrived.
        if low:
            self._unique_id(buf)
            self._mpi(f"{what} (NCCL bootstrap)", [self.boot.Isend(buf, dest=peer, tag=1)], peers)
            self._mpi(f"{what} (NCCL bootstrap)", [self.boot.Irecv(ack, source=peer, tag=2)], peers)
        else:
            self._mpi(f"{what} (NCCL bootstrap)", [self.boot.Irecv(buf, source=peer, tag=1)], peers)
            self._mpi(f"{what} (NCCL bootstrap)", [self.boot.Isend(ack, dest=peer, tag=2)], peers)
        label = f"global ranks {pg.ranks[min(me, peer)]} and {pg.ranks[max(me, peer)]}"
        if not buf[UNIQUE_ID_BYTES]:
            raise NcclError(f"{what}: cannot make the NCCL communicator of {label}: {self._id_error}")
        return self._init_rank(buf, 2, 0 if low else 1, device, label)

    # --- operations ---------------------------------------------------------------------------
    def launch(self, what: str, comm: Communicator, enqueue, after=None, result=None, async_op: bool = False,
               source: int | None = None, keep=None) -> NcclWork | None:
        """Enqueue an operation on the current stream of ``comm``'s device and track it.

        ``enqueue(lib, comm_handle, stream_handle, ptr)`` makes the NCCL calls (``ptr(t)`` is a
        tensor's address as ``void *``); ``after()`` enqueues device work that must follow them
        (copies out of a flat buffer). ``keep`` holds buffers until the operation has completed.
        """
        self.poll()
        ffi, lib = _lib()
        stream = fl.cuda.current_stream(comm.device)
        handle = ffi.cast("cudaStream_t", stream.cuda_stream)

        def ptr(t, offset: int = 0):
            return ffi.cast("void *", t.data_ptr() + offset * t.element_size())

        with fl.cuda.device(comm.device):
            try:
                enqueue(lib, comm.handle, handle, ptr)
            except NcclError as error:
                # part of the operation may be queued on some ranks and not others: the group can no
                # longer pair its operations up, so it is aborted rather than left to time out later
                self._fail(f"{what} on {self.pg.describe()} failed on rank {self.pg.ranks[self.pg.rank()]}: {error}")
            if after is not None:
                after()
            end = fl.cuda.Event()
            end.record(stream)
        self.pg._issued += 1  # counted as the MPI collectives are (Note [Which rank did not arrive])
        work = NcclWork(what, self, comm, end, result, source)
        work._keep = keep
        self.inflight.append(work)
        return work if async_op else None

    def poll(self) -> None:
        """Drop finished operations; abort and raise on an asynchronous error or one past its deadline."""
        while self.inflight and self.inflight[0]._done():
            self.inflight.pop(0)
        for comm in list(self.comms.values()) + list(self.pairs.values()):
            error = comm.async_error() if comm.handle is not None else None
            if error is not None:
                self._fail(f"NCCL reported an asynchronous error on {comm.label}: {error}")
        if self.inflight and _now() >= self.inflight[0]._deadline:
            old = self.inflight[0]
            self._fail(f"{old.name} on {self.pg.describe()} did not complete within the group's timeout "
                       f"({old._timeout:.1f} s) on rank {self.pg.ranks[self.pg.rank()]}: a rank did not call it, or "
                       f"its data never arrived")

    def _fail(self, message: str) -> None:
        """Abort every communicator of the group, fail the operations in flight and raise (Note [NCCL timeouts])."""
        self.broken = message
        for comm in list(self.comms.values()) + list(self.pairs.values()):
            comm.error = message
            comm.abort()
        error = DistributedError(message)
        for work in self.inflight:
            work._error = error
        self.inflight.clear()
        raise error

    def wait_on_host(self, work: NcclWork, deadline: float) -> None:
        """Wait on the host for ``work``, polling its event and the communicators; abort past ``deadline``."""
        if work._error is not None:
            raise work._error
        pause = _POLL_S[0]
        while not work._done():
            if work._error is not None:
                raise work._error
            self.poll()
            if _now() >= deadline:
                try:
                    self._fail(f"{work.name} on {self.pg.describe()} did not complete within "
                               f"{deadline - work.issued_at:.1f} s on rank {self.pg.ranks[self.pg.rank()]}: a rank "
                               f"did not call it, or its data never arrived")
                except DistributedError as error:
                    work._error = error
                    raise
            time.sleep(pause)
            pause = min(_POLL_S[1], 2 * pause)

    def destroy(self) -> None:
        """Wait for the operations in flight (within their deadlines), then destroy every communicator."""
        try:
            for work in list(self.inflight):
                if self.broken is None:
                    self.wait_on_host(work, work._deadline)
        except DistributedError:
            pass  # _fail aborted the communicators
        self.inflight.clear()
        first_error = None
        for comm in list(self.comms.values()) + list(self.pairs.values()):
            try:
                if self.broken is None:
                    comm.destroy()
                else:
                    comm.abort()
            except NcclError as error:  # the others and the bootstrap communicator are still freed
                first_error = first_error or error
        self.comms.clear()
        self.pairs.clear()
        if self.boot is not None and self.pg.runtime.broken is None:
            self.boot.Free()
        self.boot = None
        if first_error is not None:
            raise first_error
