"""``spawn``: start ``nprocs`` processes running ``fn(i, *args)`` and surface their failures.

As ``torch.multiprocessing.spawn``: a child that raises writes its traceback to a file before
exiting; the parent, joining, terminates the other children and re-raises it as
:class:`ProcessRaisedException` carrying the child's traceback text. A child that dies by a
signal (SIGKILL, a segfault) raises :class:`ProcessExitedException` naming the signal.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import tempfile
import time
import traceback

__all__ = ["spawn", "start_processes", "ProcessContext", "SpawnContext", "ProcessException",
           "ProcessRaisedException", "ProcessExitedException"]


class ProcessException(Exception):
    """A child of :func:`spawn` failed. ``error_index`` is its index, ``pid`` its process id."""

    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A child exited with a non-zero code or was killed by a signal (``signal_name``)."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i: int, args: tuple, error_file: str) -> None:
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is being interrupted too
    except Exception:  # noqa: BLE001 - everything a child raises goes to the parent
        with open(error_file, "wb") as f:
            pickle.dump(traceback.format_exc(), f)
        raise SystemExit(1) from None


class ProcessContext:
    """The processes started by :func:`start_processes`; :meth:`join` waits for them.

    Attributes:
        processes: the :class:`multiprocessing.Process` objects, by index.
        error_files: where each child writes its traceback if it raises.
    """

    def __init__(self, processes: list, error_files: list[str]):
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list[int]:
        """The process ids of the children."""
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the children; True when all exited successfully, False on timeout.

        Raises:
            ProcessRaisedException: a child raised (its traceback is in the message).
            ProcessExitedException: a child exited with a non-zero code or by a signal.
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            p = self.processes[index]
            p.join()
            if p.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            if not self.sentinels:
                self._cleanup()
                return True
            return False
        # one child failed: stop the others and report it
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + 30
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        failed = self.processes[error_index]
        code, pid = failed.exitcode, failed.pid
        error_file = self.error_files[error_index]
        trace = None
        if os.path.exists(error_file) and os.path.getsize(error_file):
            with open(error_file, "rb") as f:
                trace = pickle.load(f)
        self._cleanup()
        if trace is None:
            if code < 0:
                name = signal.Signals(-code).name
                raise ProcessExitedException(f"process {error_index} terminated with signal {name}", error_index,
                                             pid, code, name)
            raise ProcessExitedException(f"process {error_index} terminated with exit code {code}", error_index,
                                         pid, code)
        msg = f"\n\n-- Process {error_index} terminated with the following error:\n{trace}"
        raise ProcessRaisedException(msg, error_index, pid)

    def _cleanup(self) -> None:
        for path in self.error_files:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.sentinels = {}
        for p in self.processes:
            if p.exitcode is not None:
                p.close()


class SpawnContext(ProcessContext):
    """The context :func:`spawn` returns when ``join=False`` (same as :class:`ProcessContext`)."""


def start_processes(fn, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn"):
    """Start ``nprocs`` processes running ``fn(i, *args)`` with the given start method.

    Args:
        fn: the function each child runs, as ``fn(i, *args)`` with ``i`` in ``range(nprocs)``; it
            must be picklable (a module-level function) for the ``spawn`` and ``forkserver`` methods.
        args: the further arguments (tensors among them travel through shared memory).
        nprocs: number of processes.
        join: wait for all of them (and re-raise a failure) before returning.
        daemon: the children's ``daemon`` flag.
        start_method: ``"spawn"``, ``"fork"`` or ``"forkserver"``.

    Returns:
        None when ``join`` is True, else the :class:`ProcessContext` to join later.
    """
    ctx = multiprocessing.get_context(start_method)
    error_files, processes = [], []
    for i in range(nprocs):
        fd, path = tempfile.mkstemp(prefix="flambeau-spawn-")
        os.close(fd)
        error_files.append(path)
        p = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
        p.start()
        processes.append(p)
    context = (SpawnContext if start_method == "spawn" else ProcessContext)(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """Spawn ``nprocs`` processes running ``fn(i, *args)`` (see :func:`start_processes`).

    Example::

        def train(rank, model):
            ...

        flambeau.multiprocessing.spawn(train, args=(model,), nprocs=4)

    Returns:
        None when ``join`` is True, else a :class:`SpawnContext`.

    Raises:
        ProcessRaisedException: a child raised (its traceback is in the message).
        ProcessExitedException: a child exited with a non-zero code or was killed by a signal.
    """
    return start_processes(fn, args, nprocs, join, daemon, start_method)
