"""Process groups: ``init_process_group``, ``new_group`` and the rank and size queries (torch's names).

The default group is a duplicate of ``MPI_COMM_WORLD``: MPI's launcher (``mpiexec``, or
``python -m flambeau.distributed.run``, which starts the ranks through it) decides ranks and world
size, so ``init_method``, ``rank`` and ``world_size`` are only checked against MPI's view. Every
group counts the collectives issued on it: the count is what a timed-out rank compares across the
group (Note [Which rank did not arrive] in ``_runtime.py``).

A group's backend is ``"mpi"``, ``"nccl"`` or torch's composite spelling ``"cpu:mpi,cuda:nccl"``
(Note [Backends]); a group with NCCL holds an :class:`~flambeau.distributed._nccl.NcclGroup` whose
communicators are made on its first CUDA collective.

Note [Backends]
    As torch's: with ``"nccl"``, CUDA tensors go to NCCL and a CPU tensor in a collective raises
    (torch's NCCL backend takes CUDA tensors only); with ``"cpu:mpi,cuda:nccl"`` CPU tensors go
    to MPI and CUDA tensors to NCCL; with ``"mpi"`` everything goes to MPI (CUDA tensors through
    host memory). Objects (``broadcast_object_list``, ``all_gather_object``) always travel over
    MPI, as torch's NCCL backend sends them through its CPU side; so do ``new_group``'s
    synchronisation and NCCL's bootstrap. ``barrier`` is an NCCL all-reduce of one element with
    ``"nccl"`` (as torch's) and an MPI barrier otherwise.
"""

from __future__ import annotations

import datetime
import os
import warnings

import numpy as np

from flambeau.distributed import _nccl
from flambeau.distributed._runtime import OP_NAMES, DistributedError, Runtime, Work, runtime

__all__ = ["Backend", "ProcessGroup", "GroupMember", "group", "init_process_group", "destroy_process_group",
           "is_initialized", "is_available", "is_mpi_available", "is_nccl_available", "is_gloo_available",
           "get_rank", "get_world_size", "get_backend", "new_group", "get_process_group_ranks",
           "get_group_rank", "get_global_rank", "default_pg_timeout"]

default_pg_timeout = datetime.timedelta(minutes=30)  # torch's default for CPU backends
_OP_CODE = {name: i for i, name in enumerate(OP_NAMES)}


class Backend(str):
    """Backend names, as ``torch.distributed.Backend``: flambeau has ``"mpi"``, ``"nccl"``, ``"cpu:mpi,cuda:nccl"``."""

    MPI = "mpi"
    NCCL = "nccl"
    GLOO = "gloo"
    UNDEFINED = "undefined"

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, got {name!r}")
        return super().__new__(cls, name.lower())


class ProcessGroup:
    """A set of ranks that run collectives together (an MPI communicator).

    Attributes:
        ranks: the global ranks of the members, in group-rank order.
    """

    def __init__(self, comm, ranks: list[int], gid: int, timeout: float, rt: Runtime, backend: str = "mpi"):
        self.comm = comm
        self.backend = backend
        self.nccl: _nccl.NcclGroup | None = None  # made by _attach_nccl for a backend with NCCL
        self.ranks = ranks
        self.gid = gid
        self.timeout = timeout
        self.runtime = rt
        self._rank = comm.Get_rank()
        self._issued = 0  # collectives issued on this group by this process
        self._completed = 0
        self._last_op = 0
        self._works: list[Work] = []  # in flight, so that destroy_process_group can drain them

    def rank(self) -> int:
        """This process's rank within the group."""
        return self._rank

    def size(self) -> int:
        """The number of ranks in the group."""
        return len(self.ranks)

    def name(self) -> str:
        """The group's backend: ``"mpi"``, ``"nccl"`` or ``"cpu:mpi,cuda:nccl"``."""
        return self.backend

    def describe(self) -> str:
        return "the default group" if self.gid == 0 else f"group {self.gid} (global ranks {self.ranks})"

    def __repr__(self) -> str:
        return f"<ProcessGroup {self.backend} {self.describe()}, rank {self._rank} of {len(self.ranks)}>"

    # --- issuing operations -------------------------------------------------------------------
    def check(self, what: str) -> None:
        """Raise if the group cannot run ``what`` (destroyed, broken, or a member has exited)."""
        if self.comm is None:
            raise RuntimeError(f"{what}: the process group has been destroyed")
        self.runtime.check_usable(what)
        gone = sorted(set(self.ranks) & self.runtime.exited)
        if gone:
            raise DistributedError(f"{what} on {self.describe()}: rank {gone[0]} has already ended its program, "
                                   f"so the collective cannot complete")

    def collective(self, name: str, requests: list, finish=None, post=None, result=None,
                   async_op: bool = True) -> Work:
        """Register a collective just issued on this group's communicator.

        With ``async_op`` the progress thread completes it; otherwise the caller's thread does,
        and the returned work is complete (or failed; :meth:`Work.wait` raises then).
        """
        work = Work(self.runtime, name, self, requests, finish=finish, post=post, seq=self._issued,
                    peers=self.ranks, timeout=self.timeout, result=result)
        self._issued += 1
        self._last_op = _OP_CODE.get(name, 0)
        return self._start(work, async_op)

    def point_to_point(self, name: str, peer_global: int, requests: list, statuses=None, finish=None,
                       post=None, result=None, async_op: bool = True) -> Work:
        peers = None if peer_global is None else [peer_global]
        work = Work(self.runtime, name, self, requests, finish=finish, post=post, peers=peers,
                    timeout=self.timeout, result=result, statuses=statuses)
        return self._start(work, async_op)

    def _start(self, work: Work, async_op: bool) -> Work:
        if async_op:
            self._works = [w for w in self._works if not w.is_completed()]
            self._works.append(work)
            return self.runtime.submit(work)
        self.runtime.complete_here(work)
        return work

    def check_consistency(self, name: str, fingerprint: list[int], describe) -> None:
        """With FLAMBEAU_DISTRIBUTED_DEBUG=DETAIL: every rank must pass the same ``fingerprint``.

        ``describe(fingerprint)`` renders one rank's arguments for the error message.
        """
        if os.environ.get("FLAMBEAU_DISTRIBUTED_DEBUG", "").upper() != "DETAIL":
            return
        mine = np.zeros(8, np.int64)
        mine[0] = _OP_CODE.get(name, 0)
        mine[1:1 + len(fingerprint)] = fingerprint
        everyone = np.zeros((self.size(), 8), np.int64)
        self.collective("consistency check", [self.comm.Iallgather(mine, everyone)], async_op=False).wait()
        for r in range(self.size()):
            if not np.array_equal(everyone[r], everyone[0]):
                theirs = everyone[r]
                if theirs[0] != everyone[0][0]:
                    raise DistributedError(
                        f"{name}: rank {self.ranks[r]} called {OP_NAMES[theirs[0]]} while rank {self.ranks[0]} "
                        f"called {OP_NAMES[everyone[0][0]]} (collective #{self._issued - 1} on {self.describe()})")
                raise DistributedError(
                    f"{name}: ranks disagree on the arguments: rank {self.ranks[0]} passed "
                    f"{describe(list(everyone[0][1:]))}, rank {self.ranks[r]} passed {describe(list(theirs[1:]))}")


class _NonGroupMember:
    """What ``new_group`` returns to processes outside the group; collectives on it do nothing."""

    def __repr__(self) -> str:
        return "<non-group-member>"


class GroupMember:
    """torch's ``GroupMember``: ``WORLD`` (the default group) and ``NON_GROUP_MEMBER``."""

    NON_GROUP_MEMBER = _NonGroupMember()

    @property
    def WORLD(self) -> ProcessGroup | None:  # noqa: N802 - torch's name
        return _state.default


group = GroupMember()  # ``dist.group.WORLD`` as in torch


class _State:
    def __init__(self):
        self.default: ProcessGroup | None = None
        self.groups: list[ProcessGroup] = []
        self.next_gid = 0


_state = _State()


def _timeout_seconds(timeout, argname: str = "timeout") -> float:
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected {argname} argument to be of type datetime.timedelta, got {type(timeout).__name__}")
    seconds = timeout.total_seconds()
    if seconds <= 0:
        raise ValueError(f"{argname} must be positive, got {timeout}")
    return seconds


def is_available() -> bool:
    """Whether flambeau.distributed can run (mpi4py is importable); MPI is not initialised by this."""
    return is_mpi_available()


def is_mpi_available() -> bool:
    """Whether the MPI backend is available (mpi4py and an MPI library are installed)."""
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


def is_nccl_available() -> bool:
    """Whether the NCCL backend can be used: cffi is installed and libnccl loads (it is loaded by this call)."""
    return _nccl.available()


def is_gloo_available() -> bool:
    """False: flambeau has no gloo backend (use ``"mpi"``)."""
    return False


def is_initialized() -> bool:
    """Whether the default process group has been initialised."""
    return _state.default is not None


COMPOSITE = "cpu:mpi,cuda:nccl"


def _parse_backend(backend, default: str = "mpi") -> str:
    """``backend`` as ``"mpi"``, ``"nccl"`` or ``"cpu:mpi,cuda:nccl"`` (Note [Backends]); None gives ``default``."""
    if backend is None:
        return default
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string such as 'mpi' or 'nccl', got {type(backend).__name__}")
    name = backend.strip().lower()
    if name in ("mpi", "nccl"):
        return name
    if ":" in name:
        try:
            pairs = dict(part.strip().split(":") for part in name.split(","))
        except ValueError:
            pairs = {}
        if pairs == {"cpu": "mpi", "cuda": "nccl"}:
            return COMPOSITE
        if pairs == {"cpu": "mpi", "cuda": "mpi"} or pairs == {"cpu": "mpi"}:
            return "mpi"
        if pairs == {"cuda": "nccl"}:
            return "nccl"
    raise ValueError(f"backend must be 'mpi', 'nccl' or 'cpu:mpi,cuda:nccl' (flambeau.distributed has no gloo), "
                     f"got {backend!r}")


def _check_nccl(backend: str, what: str) -> None:
    """Raise, saying why, unless NCCL and CUDA can be used (for a backend with NCCL)."""
    if "nccl" not in backend:
        return
    why = _nccl.why_unavailable()
    if why is not None:
        raise RuntimeError(f"{what}: backend {backend!r} needs NCCL, which is not available: {why}. Use "
                           f"backend='mpi' (CUDA tensors then move through host memory)")
    import flambeau as fl

    if not fl.cuda.is_available():
        raise RuntimeError(f"{what}: backend {backend!r} needs CUDA, but flambeau.cuda is not available on this "
                           f"rank; use backend='mpi'")


def _attach_nccl(pg: ProcessGroup, device: int | None = None) -> None:
    """Give ``pg`` its NCCL side: a duplicate MPI communicator for the bootstrap; communicators come later."""
    comm, request = pg.comm.Idup()
    work = Work(pg.runtime, "init_process_group", pg, [request], peers=list(pg.ranks), timeout=pg.timeout)
    pg.runtime.complete_here(work)
    work.wait()
    pg.nccl = _nccl.NcclGroup(pg, comm, device)


def _device_index(device_id) -> int | None:
    if device_id is None:
        return None
    index = _nccl.cuda_index(device_id)
    if index is None:
        raise ValueError(f"init_process_group: device_id must be a CUDA device (or None), got {device_id!r}")
    return index


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {value!r}") from None


def init_process_group(backend=None, init_method: str | None = None, timeout: datetime.timedelta | None = None,
                       world_size: int = -1, rank: int = -1, store=None, group_name: str = "", pg_options=None,
                       device_id=None) -> None:
    """Initialise the default process group (all ranks that MPI started) and MPI itself.

    Start the ranks with ``python -m flambeau.distributed.run --nproc-per-node N script.py`` (or
    with ``mpiexec -n N python script.py``); MPI assigns ranks, so ``rank`` and ``world_size``, when
    given (or set in the environment as RANK and WORLD_SIZE), must agree with it.

    Args:
        backend: ``"mpi"`` (the default), ``"nccl"`` (CUDA tensors through NCCL; CPU tensors in
            collectives raise, as in torch) or ``"cpu:mpi,cuda:nccl"`` (CPU tensors through MPI, CUDA
            tensors through NCCL); Note [Backends]. The NCCL backends need libnccl
            (:func:`is_nccl_available`) and one GPU per rank: call
            ``fl.cuda.set_device(int(os.environ["LOCAL_RANK"]))`` first, as with torch.
        init_method: ``None`` or ``"env://"``; MPI's launcher does the rendezvous.
        timeout: how long any collective may wait for the other ranks (default 30 minutes); past it
            the collective raises an error naming the ranks that did not take part.
        world_size: the expected number of ranks, or -1.
        rank: the expected rank of this process, or -1.
        device_id: with NCCL, the CUDA device (index or ``fl.device``) this process's tensors are
            on; a tensor on another device then raises. None: the tensors' own device.
        store, group_name, pg_options: accepted for compatibility; must be left unset.
    """
    name = _parse_backend(backend)
    _check_nccl(name, "init_process_group")
    device = _device_index(device_id) if "nccl" in name else None
    if _state.default is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    if init_method not in (None, "env://"):
        raise ValueError(f"init_method must be None or 'env://' with the MPI backend (MPI's launcher does the "
                         f"rendezvous), got {init_method!r}")
    if store is not None:
        raise ValueError("store is not supported by the MPI backend: MPI's launcher does the rendezvous")
    seconds = _timeout_seconds(timeout)
    rt = runtime()
    for argname, given, env, actual in (("rank", rank, "RANK", rt.rank), ("world_size", world_size, "WORLD_SIZE",
                                                                           rt.size)):
        if given not in (-1, None) and given != actual:
            raise ValueError(f"init_process_group: {argname}={given} but MPI started this process as {argname} "
                             f"{actual}; start the ranks with python -m flambeau.distributed.run "
                             f"--nproc-per-node N (or mpiexec -n N)")
        from_env = _env_int(env)
        if from_env is not None and from_env != actual:
            raise ValueError(f"init_process_group: the environment says {env}={from_env} but MPI started this "
                             f"process as {argname} {actual} (a world of {rt.size}); start the ranks with "
                             f"python -m flambeau.distributed.run --nproc-per-node N (or mpiexec -n N) rather "
                             f"than as separate python processes")
    comm, request = rt.MPI.COMM_WORLD.Idup()
    init = Work(rt, "init_process_group", None, [request], peers=list(range(rt.size)), timeout=seconds)
    rt.complete_here(init)
    init.wait()
    gid = _state.next_gid
    _state.next_gid += 1
    pg = ProcessGroup(comm, list(range(rt.size)), gid, seconds, rt, name)
    if "nccl" in name:
        try:
            _attach_nccl(pg, device)
        except BaseException:
            comm.Free()
            raise
    rt.groups[gid] = pg
    _state.default = pg
    _state.groups = [pg]


def _default(what: str) -> ProcessGroup:
    if _state.default is None:
        raise ValueError(f"{what}: Default process group has not been initialized, please make sure to call "
                         f"init_process_group.")
    return _state.default


def resolve_group(group, what: str) -> ProcessGroup | None:
    """The group a collective runs on; None (with torch's warning) for a process outside ``group``."""
    if group is None:
        return _default(what)
    if group is GroupMember.NON_GROUP_MEMBER:
        warnings.warn(f"Running {what} on global rank {get_rank()} which does not belong to the given group.",
                      stacklevel=3)
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup from new_group() or None, got {type(group).__name__}")
    return group


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Destroy ``group``, or every group (and the default one) when ``group`` is None.

    Operations still in flight on it complete first. MPI itself stays initialised (it cannot be
    initialised twice in one process) and is finalised at exit; ``init_process_group`` may be
    called again.
    """
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    targets = list(_state.groups) if group is None else [group]
    if group is None and _state.default is None:
        raise ValueError("destroy_process_group: Default process group has not been initialized")
    first_error = None
    for pg in targets:
        if pg.comm is None:
            continue
        pg.runtime.drain(pg._works)
        if pg.nccl is not None:
            try:
                pg.nccl.destroy()
            except DistributedError as error:  # a failing ncclCommDestroy: the group is still taken apart
                first_error = first_error or error
            pg.nccl = None
        if pg.runtime.broken is None:
            pg.comm.Free()
        pg.comm = None
        pg.runtime.groups.pop(pg.gid, None)
        if pg in _state.groups:
            _state.groups.remove(pg)
    if group is None or group is _state.default:
        _state.default = None
        _state.groups = []
    if first_error is not None:
        raise first_error


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (default: the global rank); -1 outside ``group``."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    pg = _default("get_rank") if group is None else group
    return pg.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks in ``group`` (default: all); -1 outside ``group``."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    pg = _default("get_world_size") if group is None else group
    return pg.size()


def get_backend(group: ProcessGroup | None = None) -> str:
    """The backend of ``group`` (default: the default group's): ``"mpi"``, ``"nccl"`` or ``"cpu:mpi,cuda:nccl"``."""
    pg = _default("get_backend") if group is None else group
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("Invalid process group specified: get_backend on a process outside the group")
    return Backend(pg.backend)


def get_process_group_ranks(group: ProcessGroup) -> list[int]:
    """The global ranks of ``group``'s members, in group-rank order."""
    pg = _default("get_process_group_ranks") if group is None else group
    return list(pg.ranks)


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """The rank within ``group`` of global rank ``global_rank`` (ValueError if it is not a member)."""
    ranks = get_process_group_ranks(group)
    if global_rank not in ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return ranks.index(global_rank)


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The global rank of the member with rank ``group_rank`` in ``group``."""
    ranks = get_process_group_ranks(group)
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {group} (of size {len(ranks)})")
    return ranks[group_rank]


def new_group(ranks: list[int] | None = None, timeout: datetime.timedelta | None = None, backend=None,
              pg_options=None, use_local_synchronization: bool = False, group_desc: str | None = None):
    """A process group of the global ``ranks`` (default: all); every process must call it, in the same order.

    Returns the group on its members and ``GroupMember.NON_GROUP_MEMBER`` on the other
    processes (collectives on it do nothing there, with a warning, as in torch).

    Args:
        ranks: the global ranks of the members (their order is irrelevant: group ranks follow
            global ranks).
        timeout: the group's timeout (default: the default group's).
        backend: ``None`` (the default group's backend), ``"mpi"``, ``"nccl"`` or ``"cpu:mpi,cuda:nccl"``.
    """
    world = _default("new_group")
    name = _parse_backend(backend, default=world.backend)
    _check_nccl(name, "new_group")
    if use_local_synchronization:
        raise ValueError("new_group: use_local_synchronization=True is not supported by the MPI backend")
    size = world.size()
    if ranks is None:
        members = list(range(size))
    else:
        members = sorted(set(int(r) for r in ranks))
        if len(members) != len(list(ranks)):
            raise ValueError(f"new_group: ranks must be distinct, got {list(ranks)}")
        bad = [r for r in members if not 0 <= r < size]
        if bad:
            raise ValueError(f"new_group: ranks must be in [0, {size - 1}] (the world size is {size}), got {bad}")
        if not members:
            raise ValueError("new_group: ranks must not be empty")
    seconds = world.timeout if timeout is None else _timeout_seconds(timeout)
    world.check("new_group")
    # MPI_Comm_create blocks until every process calls it and has no nonblocking form: a
    # nonblocking barrier with the group's deadline first, so a rank that never comes is named.
    world.collective("new_group", [world.comm.Ibarrier()], async_op=False).wait()
    mpi_group = world.comm.Get_group().Incl(members)
    comm = world.comm.Create(mpi_group)
    mpi_group.Free()
    gid = _state.next_gid
    _state.next_gid += 1
    if comm == world.runtime.MPI.COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, members, gid, seconds, world.runtime, name)
    if "nccl" in name:
        _attach_nccl(pg, world.nccl.device if world.nccl is not None else None)
    world.runtime.groups[gid] = pg
    _state.groups.append(pg)
    return pg
