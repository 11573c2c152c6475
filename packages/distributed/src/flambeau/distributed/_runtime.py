"""The MPI runtime of a process: loading MPI, the progress thread, work handles and the timeout watch.

Every operation of :mod:`flambeau.distributed` is issued as a *nonblocking* MPI call from the
caller's thread and handed to the progress thread as a :class:`Work`; ``async_op=False`` is
``async_op=True`` followed by :meth:`Work.wait`. One thread in each process tests the pending
requests (so operations progress while Python computes: DDP's gradient all-reduce runs behind
backward), finishes them (copies into output lists, the division of ``ReduceOp.AVG``), and
enforces the group's ``timeout``.

Note [Progress without spinning]
    MPI's own blocking calls spin on a core while they wait. On a machine with as many ranks as
    cores that is right while the other ranks are about to arrive, and wrong when one rank is
    far behind (its core is then shared with the spinner) or when a background thread spins
    beside the main thread's computation. So a waiter tests its requests in a loop that yields
    the core between tests (``sched_yield``) for a short window after anything changed
    (``SPIN_S``: a balanced collective completes within it, in about 10 µs for a small one), and
    then sleeps between tests with a backoff from 20 µs to ``MAX_DELAY_S``. The progress thread,
    which runs beside the computation of backward, spins only briefly (``THREAD_SPIN_S``) and
    sleeps at most ``THREAD_MAX_DELAY_S``; it parks on a condition variable when idle.

Note [Which rank did not arrive]
    A collective that outlives its deadline is diagnosed rather than just abandoned. Each process
    counts the collectives it has issued on each group. The timed-out process asks every other
    member of the group, on a private control communicator, how many collectives it has issued
    there; their progress threads answer (they run even while the main thread computes). A rank
    that has not issued the collective yet is named with the last one it did issue; a rank that
    does not answer within a grace period is named as dead, stopped or stuck. A rank that ends its
    program tells the others first (``EXIT``), so a collective waiting for it fails within
    seconds instead of at the deadline. After a timeout every group is unusable (a collective
    that some ranks never joined leaves MPI in an undefined state) and the process skips
    ``MPI_Finalize`` when it exits, so that the launcher can stop the job.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

__all__ = ["DistributedError", "DistBackendError", "Work", "load_mpi", "runtime", "Runtime"]

IDLE_POLL_S = 0.02
SPIN_S, MAX_DELAY_S = 1e-3, 200e-6  # a caller's wait (Note [Progress without spinning])
THREAD_SPIN_S, THREAD_MAX_DELAY_S = 100e-6, 500e-6  # the progress thread's
MIN_DELAY_S = 20e-6
EXIT_GRACE_S = 5.0  # a collective waiting for a rank that has ended its program fails after this
_QUERY, _REPLY, _EXIT = 1, 2, 3
_CTRL_TAG = 7

# Operation names travel as small integers in control messages (Note [Which rank did not arrive]).
OP_NAMES = ("none", "all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
            "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "all_to_all_single", "barrier",
            "broadcast_object_list", "all_gather_object", "send", "recv", "new_group", "consistency check")
_OP_CODE = {name: i for i, name in enumerate(OP_NAMES)}


class DistributedError(RuntimeError):
    """A collective failed, timed out, or a peer exited; the message names the rank(s) concerned."""


DistBackendError = DistributedError  # torch.distributed's name for backend errors


_MPI = None


def load_mpi():
    """mpi4py's ``MPI`` module, imported on first use with initialisation and finalisation left to us."""
    global _MPI
    if _MPI is None:
        try:
            import mpi4py
        except ImportError as error:  # pragma: no cover - a declared dependency
            raise RuntimeError("flambeau.distributed needs mpi4py and an MPI library "
                               "(pip install flambeau-distributed installs mpi4py and mpich)") from error
        if "mpi4py.MPI" not in sys.modules:
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = False
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


def _now() -> float:
    return time.monotonic()


class _Backoff:
    """Pauses between tests of pending requests: yield during a spin window, then sleep longer and longer."""

    __slots__ = ("spin", "cap", "start", "delay")

    def __init__(self, spin: float, cap: float):
        self.spin, self.cap = spin, cap
        self.reset()

    def reset(self) -> None:
        self.start = _now()
        self.delay = 0.0

    def pause(self) -> None:
        if _now() - self.start < self.spin:
            os.sched_yield()
        else:
            self.delay = min(self.cap, max(MIN_DELAY_S, 2 * self.delay))
            time.sleep(self.delay)


class Work:
    """The handle of an operation issued with ``async_op=True`` (torch's ``Work``).

    Call :meth:`wait` before reading the output tensors. For CPU tensors the outputs hold the
    result as soon as :meth:`is_completed` is True; for CUDA tensors (moved through host memory)
    only after :meth:`wait`.
    """

    __slots__ = ("name", "group", "seq", "peers", "_requests", "_statuses", "_finish", "_post", "_deadline",
                 "_timeout", "_event", "_error", "_posted", "_runtime", "issued_at", "completed_at", "_result",
                 "_source", "_keep")

    def __init__(self, runtime: Runtime, name: str, group, requests: list, finish: Callable | None = None,
                 post: Callable | None = None, seq: int | None = None, peers: list[int] | None = None,
                 timeout: float = 1800.0, result=None, statuses: list | None = None):
        self.name = name
        self.group = group
        self.seq = seq  # index of this collective on its group; None for point-to-point
        self.peers = peers  # world ranks whose participation is needed
        self._requests = requests
        self._statuses = statuses
        self._finish = finish  # run by the progress thread once the requests completed
        self._post = post  # run by the waiting thread (copies back into CUDA tensors)
        self._timeout = timeout
        self._deadline = _now() + timeout
        self._event = threading.Event()
        self._error: BaseException | None = None
        self._posted = False
        self._runtime = runtime
        self.issued_at = _now()
        self.completed_at: float | None = None
        self._result = result
        self._source: int | None = None
        self._keep = None  # buffers that must outlive the requests

    # --- torch's Work API ---------------------------------------------------------------------
    def is_completed(self) -> bool:
        """Whether the operation has finished (successfully or not); never blocks."""
        return self._event.is_set()

    def is_success(self) -> bool:
        """Whether the operation finished without an error (False while it runs)."""
        return self._event.is_set() and self._error is None

    def exception(self) -> BaseException | None:
        """The error the operation failed with, or None."""
        return self._error

    def wait(self, timeout=None) -> bool:
        """Block until the operation has finished; raise its error if it failed. Returns True.

        Args:
            timeout: a :class:`datetime.timedelta` (or seconds) that shortens the group's timeout
                for this operation; the error then names the ranks that did not take part.
        """
        if timeout is not None:
            seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
            self._runtime.shorten_deadline(self, _now() + seconds)
        runtime = self._runtime
        while not self._event.wait(0.5):
            if not runtime.thread_alive():
                raise DistributedError(f"{self.name}: the progress thread of flambeau.distributed stopped "
                                       f"({runtime.stop_reason()})")
        if self._error is not None:
            raise self._error
        if self._post is not None:
            post, self._post = self._post, None
            post()
        return True

    def result(self):
        """The output tensors of the operation (after :meth:`wait`), as torch's ``Work.result()``."""
        return self._result

    def source_rank(self) -> int:
        """For ``irecv`` from any source: the (global) rank the message came from, after :meth:`wait`."""
        if self._source is None:
            raise RuntimeError("source_rank() is only defined for a completed irecv")
        return self._source

    def __repr__(self) -> str:
        state = "failed" if self._error is not None else "completed" if self._event.is_set() else "pending"
        return f"<Work {self.name} {state}>"


class Runtime:
    """MPI initialised with THREAD_MULTIPLE, a control communicator and the progress thread.

    One per process, created by the first ``init_process_group``; it lives until the process exits
    (MPI cannot be initialised twice), across ``destroy_process_group`` and a new
    ``init_process_group``.
    """

    def __init__(self):
        MPI = load_mpi()
        self.MPI = MPI
        if not MPI.Is_initialized():
            MPI.Init_thread(MPI.THREAD_MULTIPLE)
            self._owns_mpi = True
        else:
            self._owns_mpi = False
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise RuntimeError("flambeau.distributed needs MPI initialised with MPI_THREAD_MULTIPLE; mpi4py was "
                               "initialised at a lower level (set mpi4py.rc.thread_level = 'multiple' before "
                               "importing mpi4py.MPI, or let flambeau.distributed initialise MPI)")
        world = MPI.COMM_WORLD
        self.rank = world.Get_rank()
        self.size = world.Get_size()
        self.ctrl = world.Dup()  # Note [Which rank did not arrive]: queries and exits, never user data
        self._ctrl_buf = np.zeros(4, np.int64)
        self._ctrl_req = self.ctrl.Irecv(self._ctrl_buf, source=MPI.ANY_SOURCE, tag=_CTRL_TAG)
        self._ctrl_status = MPI.Status()
        self._sends: list = []  # control messages in flight, with their buffers
        self._replies: dict[int, tuple[int, int, int]] = {}
        self.exited: set[int] = set()
        self.groups: dict[int, object] = {}  # group id -> ProcessGroup (for answering queries)
        self.broken: str | None = None
        self.failed = False  # an uncaught exception or a failed collective: skip MPI_Finalize at exit
        self._cond = threading.Condition()
        self._incoming: list[Work] = []
        self._active: list[Work] = []
        self._stopping = False
        self._stop_reason = "not started"
        self._finalized = False
        self._thread = threading.Thread(target=self._loop, name="flambeau-distributed-progress", daemon=True)
        self._thread.start()
        _install_exit_hooks(self)

    # --- issuing ------------------------------------------------------------------------------
    def check_usable(self, what: str) -> None:
        if self.broken is not None:
            raise DistributedError(f"{what}: the process groups are unusable after an earlier failure: {self.broken}")
        if self._stopping:
            raise DistributedError(f"{what}: flambeau.distributed is shutting down")

    def submit(self, work: Work) -> Work:
        """Hand an issued operation to the progress thread."""
        with self._cond:
            self._incoming.append(work)
            work._posted = True
            self._cond.notify()
        return work

    def _test(self, work: Work) -> bool:
        """``MPI.Request.Testall`` on ``work``'s requests (filling its statuses, if it has any)."""
        if work._statuses is not None:
            return self.MPI.Request.Testall(work._requests, work._statuses)
        return self.MPI.Request.Testall(work._requests)

    def complete_here(self, work: Work) -> None:
        """Wait for ``work`` by testing it in the calling thread (``async_op=False``).

        Saves the two thread hand-offs of the progress thread on small synchronous collectives;
        past the deadline the work goes to the progress thread, which diagnoses it.
        """
        MPI = self.MPI
        backoff = _Backoff(SPIN_S, MAX_DELAY_S)
        while True:
            try:
                complete = self._test(work)
            except MPI.Exception as error:
                self.failed = True
                self._fail(work, DistributedError(f"{work.name} failed on rank {self.rank}: {error}"))
                return
            if complete:
                self._complete(work)
                return
            if _now() >= work._deadline or self.exited:
                self.submit(work)  # the progress thread handles exits and deadlines
                return
            backoff.pause()

    def shorten_deadline(self, work: Work, deadline: float) -> None:
        with self._cond:
            work._deadline = min(work._deadline, deadline)
            self._cond.notify()

    def thread_alive(self) -> bool:
        return self._thread.is_alive()

    def stop_reason(self) -> str:
        return self._stop_reason

    # --- the progress thread ------------------------------------------------------------------
    def _loop(self) -> None:
        backoff = _Backoff(THREAD_SPIN_S, THREAD_MAX_DELAY_S)
        try:
            while True:
                with self._cond:
                    if self._stopping and not self._incoming and not self._active:
                        break
                    if not self._incoming and not self._active:
                        self._cond.wait(IDLE_POLL_S)
                    new, self._incoming = self._incoming, []
                for work in new:
                    if self.exited and work.peers is not None and self.exited.intersection(work.peers):
                        work._deadline = min(work._deadline, _now() + EXIT_GRACE_S)  # a peer has ended
                self._active.extend(new)
                progressed = self._test_active()
                progressed |= self._serve_control()
                self._check_deadlines()
                if progressed or new:
                    backoff.reset()
                elif self._active:
                    backoff.pause()
            self._stop_reason = "stopped at shutdown"
        except BaseException as error:  # pragma: no cover - a bug here must not hang the waiters
            self._stop_reason = f"crashed: {error!r}"
            self.broken = self.broken or f"the progress thread crashed: {error!r}"
            self.failed = True
            for work in self._active + self._incoming:
                self._fail(work, DistributedError(f"{work.name}: {self.broken}"))
            raise

    def _test_active(self) -> bool:
        MPI = self.MPI
        done = []
        for work in self._active:
            try:
                complete = self._test(work)
            except MPI.Exception as error:
                self._fail(work, DistributedError(f"{work.name} failed on rank {self.rank}: {error}"))
                done.append(work)
                continue
            if complete:
                done.append(work)
                self._complete(work)
        for work in done:
            self._active.remove(work)
        return bool(done)

    def _complete(self, work: Work) -> None:
        try:
            if work._finish is not None:
                work._finish(work)
        except BaseException as error:  # noqa: BLE001 - reported to the waiter
            work._error = error
        work.completed_at = _now()
        if work.group is not None and work.seq is not None:
            work.group._completed += 1
        work._event.set()

    def _fail(self, work: Work, error: BaseException) -> None:
        work._error = error
        work.completed_at = _now()
        work._event.set()

    def _send_ctrl(self, dest: int, kind: int, a: int = 0, b: int = 0, c: int = 0) -> None:
        buf = np.array([kind, a, b, c], np.int64)
        self._sends.append((self.ctrl.Isend(buf, dest=dest, tag=_CTRL_TAG), buf))

    def _serve_control(self) -> bool:
        """Answer queries, note exits and replies; returns whether a message arrived."""
        got = False
        while self._ctrl_req.Test(self._ctrl_status):
            got = True
            source = self._ctrl_status.Get_source()
            kind, a, b, c = (int(x) for x in self._ctrl_buf)
            if kind == _QUERY:
                group = self.groups.get(a)
                if group is None:
                    self._send_ctrl(source, _REPLY, -1, -1, 0)
                else:
                    self._send_ctrl(source, _REPLY, group._issued, group._completed, group._last_op)
            elif kind == _REPLY:
                self._replies[source] = (a, b, c)
            elif kind == _EXIT:
                self.exited.add(source)
                now = _now()
                for work in self._active:
                    if work.peers is not None and source in work.peers:
                        work._deadline = min(work._deadline, now + EXIT_GRACE_S)
            self._ctrl_req = self.ctrl.Irecv(self._ctrl_buf, source=self.MPI.ANY_SOURCE, tag=_CTRL_TAG)
        self._sends = [(req, buf) for req, buf in self._sends if not req.Test()]
        return got

    def _check_deadlines(self) -> None:
        now = _now()
        expired = [w for w in self._active if now >= w._deadline]
        if not expired:
            return
        work = expired[0]
        message = self._diagnose(work)
        self.broken = message
        self.failed = True
        for w in list(self._active):
            self._fail(w, DistributedError(message if w is work else
                                           f"{w.name}: abandoned after an earlier failure: {message}"))
        self._active.clear()

    def _diagnose(self, work: Work) -> str:
        """The error message of a timed-out ``work``, naming the ranks that did not take part."""
        waited = _now() - work.issued_at
        group = work.group
        where = f" (collective #{work.seq} on {group.describe()})" if work.seq is not None else ""
        head = f"{work.name}{where} timed out after {waited:.1f} s on rank {self.rank}"
        peers = [p for p in (work.peers or []) if p != self.rank]
        if not peers:
            return head
        grace = min(2.0, max(1.0, 0.1 * work._timeout))
        self._replies.clear()
        asked = [p for p in peers if p not in self.exited]
        for p in asked:
            self._send_ctrl(p, _QUERY, group.gid if group is not None else -1)
        end = _now() + grace
        while _now() < end and any(p not in self._replies for p in asked):
            self._serve_control()
            time.sleep(1e-3)
        causes = []
        for p in peers:
            if p in self.exited:
                causes.append(f"rank {p} has ended its program")
            elif p not in self._replies:
                causes.append(f"rank {p} did not answer within {grace:.1f} s (it is dead, stopped, or stuck "
                              f"in code that holds the GIL)")
            elif work.seq is not None:
                issued, _completed, last = self._replies[p]
                if issued <= work.seq:
                    last_name = OP_NAMES[last] if 0 <= last < len(OP_NAMES) else "?"
                    previous = (f"its last was #{issued - 1} ({last_name})" if issued > 0
                                else "it has issued none on this group")
                    causes.append(f"rank {p} has not called it ({previous})")
            elif work.name in ("send", "recv"):
                other = "send" if work.name == "recv" else "receive"
                causes.append(f"rank {p} is alive but has not posted the matching {other}")
            else:
                causes.append(f"rank {p} is alive but has not called {work.name}")
        if not causes:
            causes.append("every rank issued it; the exchange itself did not complete")
        return f"{head}: " + "; ".join(causes)

    # --- shutdown -----------------------------------------------------------------------------
    def drain(self, works: list[Work]) -> None:
        for work in works:
            if not work.is_completed():
                work._event.wait()

    def shutdown(self) -> None:
        """At exit: tell the others, stop the progress thread, and finalise MPI unless a failure forbids it."""
        if self._finalized:
            return
        self._finalized = True
        MPI = self.MPI
        if self.failed or self.broken is not None:
            # Note [Which rank did not arrive]: MPI_Finalize waits for every rank; after a failure
            # some never come, so leave without it and let the launcher (or mpiexec) stop the job.
            with self._cond:
                self._stopping = True
                self._active.clear()
                self._incoming.clear()
                self._cond.notify()
            return
        with self._cond:
            pending = list(self._incoming) + list(self._active)
        for work in pending:  # operations still in flight at exit complete first, within their deadline
            work._event.wait(max(0.0, work._deadline - _now()) + 10.0)
        for p in range(self.size):
            if p != self.rank:
                self._send_ctrl(p, _EXIT)
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()
        try:
            self._ctrl_req.Cancel()
            self._ctrl_req.Wait()
            end = _now() + 1.0
            while self._sends and _now() < end:
                self._sends = [(req, buf) for req, buf in self._sends if not req.Test()]
            self.ctrl.Free()
            if self._owns_mpi and not MPI.Is_finalized():
                MPI.Finalize()
        except MPI.Exception:  # pragma: no cover - nothing more to do at exit
            pass


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def runtime() -> Runtime:
    """The process's :class:`Runtime`, initialising MPI on first use."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = Runtime()
        return _runtime


def current_runtime() -> Runtime | None:
    return _runtime


def mark_failed() -> None:
    """Record that this process is failing (its exit must not wait in MPI_Finalize for the others)."""
    if _runtime is not None:
        _runtime.failed = True


def _install_exit_hooks(rt: Runtime) -> None:
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        rt.failed = True  # an uncaught exception: leave without MPI_Finalize (Note [Which rank did not arrive])
        previous(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(_at_exit, rt)


def _at_exit(rt: Runtime) -> None:
    rt.shutdown()
