"""The launcher: ``python -m flambeau.distributed.run --nproc-per-node N train.py [args]`` (like torchrun).

It starts N rank processes on this machine through the ``mpiexec`` of the MPI that mpi4py uses
(MPICH's hydra, from the ``mpich`` wheel), with torchrun's environment variables in each (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; OMP_NUM_THREADS and
NUMBA_NUM_THREADS default to the machine's cores divided by N), and watches them:

- when a rank fails (an uncaught exception, a non-zero exit, a signal), the launcher names it
  (rank, process id, exit code or signal), stops every other rank (SIGTERM, then SIGKILL after
  ``--grace`` seconds), removes the shared-memory segments MPI left in /dev/shm, and exits with
  the failed rank's code; nothing is left running and nothing waits forever;
- SIGINT and SIGTERM sent to the launcher go to every rank, with the same clean-up;
- a rank that finishes normally waits for the others (``MPI_Finalize``), and the launcher exits 0
  once all have.

Why mpiexec: MPI ranks must be started by a process manager that knows all of them (PMI); MPICH's
hydra is that manager, and it is installed with the wheel. Starting plain processes and joining
them with MPI's dynamic-process calls (``MPI_Comm_connect``/``accept``) would need a name server
and port exchange of our own and gives no process manager to clean up after a crash. The launcher
passes ``-disable-auto-cleanup`` to hydra and does the clean-up itself, so that it knows which
rank failed first. On a cluster, start the same script with the cluster's ``mpiexec``/``srun``
directly: ``init_process_group`` reads ranks from MPI (see the scaling page of the docs).
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

__all__ = ["main", "parse_args"]

_WORKER = "flambeau.distributed._worker"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The launcher's command line (torchrun's option names, with dashes or underscores)."""
    parser = argparse.ArgumentParser(
        prog="python -m flambeau.distributed.run",
        description="Start N ranks of a flambeau.distributed program on this machine (through MPICH's mpiexec) "
                    "and stop them all when one fails.")
    parser.add_argument("--nproc-per-node", "--nproc_per_node", default="1",
                        help="number of ranks: an integer, or 'cpu'/'auto' for one per core (default 1)")
    parser.add_argument("--nnodes", default="1", help="must be 1: multi-node jobs start through the cluster's MPI")
    parser.add_argument("--standalone", action="store_true", help="accepted for torchrun compatibility")
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1",
                        help="exported as MASTER_ADDR (MPI does the rendezvous; scripts may read it)")
    parser.add_argument("--master-port", "--master_port", type=int, default=None,
                        help="exported as MASTER_PORT (default: a free port)")
    parser.add_argument("--grace", type=float, default=5.0,
                        help="seconds between SIGTERM and SIGKILL when stopping the ranks (default 5)")
    parser.add_argument("--start-timeout", type=float, default=120.0,
                        help="seconds for every rank to start before the job is stopped (default 120)")
    parser.add_argument("--mpiexec", default=None, help="the mpiexec to use (default: MPICH's, beside Python)")
    parser.add_argument("-m", "--module", action="store_true", help="run the target as a module (python -m)")
    parser.add_argument("script", help="the training script (or module, with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments of the script")
    args = parser.parse_args(argv)
    if args.nproc_per_node in ("cpu", "auto"):
        args.nproc_per_node = os.cpu_count() or 1
    else:
        try:
            args.nproc_per_node = int(args.nproc_per_node)
        except ValueError:
            parser.error(f"--nproc-per-node must be an integer, 'cpu' or 'auto', got {args.nproc_per_node!r}")
    if args.nproc_per_node < 1:
        parser.error(f"--nproc-per-node must be at least 1, got {args.nproc_per_node}")
    if args.nnodes not in ("1", "1:1"):
        parser.error(f"--nnodes {args.nnodes}: this launcher starts ranks on one machine; start multi-node jobs "
                     f"with the cluster's mpiexec or srun (init_process_group reads the ranks from MPI)")
    return args


def find_mpiexec(explicit: str | None = None) -> str:
    """MPICH's ``mpiexec`` installed beside this Python (the mpich wheel), else the one on PATH."""
    if explicit:
        return explicit
    for folder in (os.path.dirname(sys.executable), sysconfig.get_path("scripts")):
        candidate = os.path.join(folder, "mpiexec")
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("mpiexec")
    if found is None:
        raise SystemExit("flambeau.distributed.run: no mpiexec found; pip install mpich (a dependency of "
                         "flambeau-distributed) or pass --mpiexec")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _descendants(pid: int) -> list[int]:
    """Process ids below ``pid`` (a rank's DataLoader workers ...), from /proc."""
    found, stack = [], [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue
            found += children
            stack += children
    return found


def _shm_segments(pid: int) -> set[str]:
    """Files of /dev/shm mapped by ``pid`` (MPICH's shared-memory segments)."""
    names = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                at = line.find(" /dev/shm/")
                if at >= 0:
                    names.add(line[at + 1:].strip().removesuffix(" (deleted)"))
    except OSError:
        pass
    return names


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class _Rank:
    __slots__ = ("rank", "pid", "fd", "done", "status")

    def __init__(self, rank: int, pid: int):
        self.rank, self.pid = rank, pid
        try:
            self.fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None  # no pidfds (or it already exited): watched through /proc
        self.done = False
        self.status: int | None = None  # the wait status, as os.waitpid gives it


class Launcher:
    """Starts ``nproc`` ranks through mpiexec and supervises them (see the module docstring)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.nproc = args.nproc_per_node
        self.rundir = tempfile.mkdtemp(prefix="flambeau-run-")
        self.ranks: dict[int, _Rank] = {}
        self.segments: set[str] = set()
        self.signal_received: int | None = None
        self.proc: subprocess.Popen | None = None

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"MASTER_ADDR": self.args.master_addr,
                    "MASTER_PORT": str(self.args.master_port or _free_port()),
                    "WORLD_SIZE": str(self.nproc), "LOCAL_WORLD_SIZE": str(self.nproc),
                    "FLAMBEAU_RUN_DIR": self.rundir, "FLAMBEAU_RUN_LAUNCHER_PID": str(os.getpid()),
                    "TORCHELASTIC_RUN_ID": "flambeau"})
        env.setdefault("PYTHONUNBUFFERED", "1")
        threads = str(max(1, (os.cpu_count() or 1) // self.nproc))
        set_now = [v for v in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS") if v not in env]
        for variable in set_now:
            env[variable] = threads
        if set_now and self.nproc > 1:
            sys.stderr.write(f"flambeau.distributed.run: setting {' and '.join(set_now)} to {threads} for each of "
                             f"the {self.nproc} ranks (set them yourself to choose)\n")
        return env

    def command(self) -> list[str]:
        target = ["-m", self.args.script] if self.args.module else [self.args.script]
        return [find_mpiexec(self.args.mpiexec), "-n", str(self.nproc), "-disable-auto-cleanup",
                sys.executable, "-m", _WORKER, *target, *self.args.script_args]

    # --- running -------------------------------------------------------------------------------
    def run(self) -> int:
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.proc = subprocess.Popen(self.command(), env=self.environment(), stdin=subprocess.DEVNULL,
                                         start_new_session=True)
            failure = self._watch()
            if failure is not None or self.signal_received is not None:
                self._stop_all()
            self._wait_mpiexec()
            self._remove_segments()
            return self._report(failure)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for r in self.ranks.values():
                if r.fd is not None:
                    os.close(r.fd)
            shutil.rmtree(self.rundir, ignore_errors=True)

    def _on_signal(self, number, _frame) -> None:
        if self.signal_received is None:
            self.signal_received = number
            sys.stderr.write(f"flambeau.distributed.run: got {_signal_name(number)}; forwarding it to the ranks\n")
            for r in self.ranks.values():
                if not r.done:
                    try:
                        os.kill(r.pid, number)
                    except ProcessLookupError:
                        pass

    def _discover(self) -> None:
        for name in os.listdir(self.rundir):
            if name.startswith("rank") and name.endswith(".pid"):
                rank = int(name[4:-4])
                if rank not in self.ranks:
                    with open(os.path.join(self.rundir, name)) as f:
                        self.ranks[rank] = _Rank(rank, int(f.read()))
                    self.segments |= _shm_segments(self.ranks[rank].pid)

    def _wait_status(self, r: _Rank, wait: float = 2.0) -> int | None:
        """The rank's wait status, written by its supervisor right after the rank ended (see _worker.py)."""
        path = os.path.join(self.rundir, f"rank{r.rank}.status")
        end = time.monotonic() + wait
        while True:
            try:
                with open(path) as f:
                    return int(f.read())
            except (OSError, ValueError):
                if time.monotonic() > end:
                    return None
                time.sleep(0.01)

    def _watch(self) -> str | None:
        """Until every rank finished, one failed, or a signal came; returns the failure's description."""
        started = time.monotonic()
        last_scan = started
        while True:
            self._discover()
            if self.signal_received is not None:
                return None
            pending = [r for r in self.ranks.values() if not r.done]
            fds = [r.fd for r in pending if r.fd is not None]
            ready = set(select.select(fds, [], [], 0.1)[0]) if fds else (time.sleep(0.1) or set())
            for r in pending:
                if (r.fd is not None and r.fd in ready) or (r.fd is None and not _alive(r.pid)):
                    self._finished(r)
                    if r.status != 0:
                        return self._describe(r)
            if len(self.ranks) == self.nproc and all(r.done for r in self.ranks.values()):
                return None
            now = time.monotonic()
            if now - last_scan > 1.0:  # MPICH maps more segments as collectives warm up
                last_scan = now
                for r in self.ranks.values():
                    if not r.done:
                        self.segments |= _shm_segments(r.pid)
            if self.proc.poll() is not None:
                self._discover()
                if len(self.ranks) == self.nproc and all(r.done or not _alive(r.pid) for r in self.ranks.values()):
                    for r in self.ranks.values():
                        if not r.done:
                            self._finished(r)
                            if r.status != 0:
                                return self._describe(r)
                    return None
                missing = sorted(set(range(self.nproc)) - set(self.ranks))
                return f"mpiexec exited with code {self.proc.returncode} before ranks {missing} started"
            if len(self.ranks) < self.nproc and now - started > self.args.start_timeout:
                missing = sorted(set(range(self.nproc)) - set(self.ranks))
                return f"ranks {missing} did not start within {self.args.start_timeout:.0f} s"

    def _finished(self, r: _Rank) -> None:
        r.done = True
        r.status = self._wait_status(r)

    def _describe(self, r: _Rank) -> str:
        where = f"rank {r.rank} (pid {r.pid})"
        if r.status is not None and os.WIFSIGNALED(r.status):
            return f"{where} was killed by {_signal_name(os.WTERMSIG(r.status))}"
        if r.status is not None and os.WIFEXITED(r.status):
            return f"{where} exited with code {os.WEXITSTATUS(r.status)}"
        return f"{where} ended without a status (its supervisor process was killed)"

    def _stop_all(self) -> None:
        """SIGTERM to every live rank (and what it started), SIGKILL after the grace period.

        After a forwarded SIGINT/SIGTERM the ranks have their signal already: they get the grace
        period to end by themselves (and print their tracebacks) before SIGKILL.
        """
        live = [r for r in self.ranks.values() if _alive(r.pid)]
        for r in live:
            self.segments |= _shm_segments(r.pid)
        victims = {pid for r in live for pid in (r.pid, *_descendants(r.pid))}
        for pid in victims if self.signal_received is None else ():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + self.args.grace
        while time.monotonic() < end and any(_alive(p) for p in victims):
            time.sleep(0.05)
        for pid in victims:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _wait_mpiexec(self) -> None:
        try:
            self.proc.wait(timeout=self.args.grace + 5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # mpiexec and its proxies (their own session)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def _remove_segments(self) -> None:
        """Unlink the /dev/shm segments of this job's ranks that MPI could not remove (a rank was killed)."""
        for path in self.segments:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as error:  # pragma: no cover - permissions
                sys.stderr.write(f"flambeau.distributed.run: could not remove {path}: {error}\n")

    def _report(self, failure: str | None) -> int:
        if self.signal_received is not None:
            name = _signal_name(self.signal_received)
            sys.stderr.write(f"flambeau.distributed.run: stopped all ranks after {name}\n")
            return 128 + self.signal_received
        if failure is None:
            return 0
        others = [r.rank for r in self.ranks.values() if not r.done]
        stopped = f"; stopped the other ranks {others}" if others else ""
        sys.stderr.write(f"flambeau.distributed.run: {failure}{stopped}\n")
        failed = next((r for r in self.ranks.values() if r.done and r.status != 0), None)
        if failed is not None and failed.status is not None:
            if os.WIFSIGNALED(failed.status):
                return 128 + os.WTERMSIG(failed.status)
            return os.WEXITSTATUS(failed.status) or 1
        return 1


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m flambeau.distributed.run`` and of the ``flambeau-run`` command."""
    args = parse_args(argv)
    sys.exit(Launcher(args).run())


if __name__ == "__main__":
    main()
