"""The start of every rank process of ``python -m flambeau.distributed.run`` (``mpiexec`` runs this).

The process mpiexec starts forks at once: the child is the rank (it sets torchrun's environment
variables from MPI's, RANK from PMI_RANK ..., tells the launcher its process id and runs the
user's script or module as ``__main__``); the parent stays a small supervisor that waits for it,
writes its exact wait status (exit code or signal) for the launcher, forwards the signals it
receives, and then ends the same way, so mpiexec sees what happened. A process that is not the
parent of the rank could not learn its status (mpiexec's proxy reaps it first). A rank exits at
once when its supervisor or the launcher dies (no orphans). Nothing heavy is imported here.
"""

from __future__ import annotations

import os
import runpy
import select
import signal
import sys
import threading
import traceback


def _write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (the launcher may read at any moment)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _watch_launcher(pid: int) -> None:
    """Exit as soon as the launcher process is gone (it would otherwise never stop this rank)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # the launcher is gone already, or no pidfd on this system
        if not os.path.exists(f"/proc/{pid}"):
            os._exit(1)
        return

    def wait():
        select.select([fd], [], [])
        sys.stderr.write(f"flambeau.distributed.run: the launcher (pid {pid}) is gone; rank exiting\n")
        sys.stderr.flush()
        os._exit(1)

    threading.Thread(target=wait, name="flambeau-run-launcher-watch", daemon=True).start()


def _set_rank_environment() -> int:
    env = os.environ
    rank = int(env.get("PMI_RANK", env.get("OMPI_COMM_WORLD_RANK", "0")))
    size = int(env.get("PMI_SIZE", env.get("OMPI_COMM_WORLD_SIZE", "1")))
    local_rank = int(env.get("MPI_LOCALRANKID", env.get("OMPI_COMM_WORLD_LOCAL_RANK", str(rank))))
    local_size = int(env.get("MPI_LOCALNRANKS", env.get("OMPI_COMM_WORLD_LOCAL_SIZE", str(size))))
    env.update({"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(local_rank),
                "LOCAL_WORLD_SIZE": str(local_size), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
                "ROLE_WORLD_SIZE": str(size)})
    return rank


def _die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent (the supervisor) dies (Linux prctl)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the launcher watch still applies
        pass


def _supervise(child: int, rundir: str, rank: int) -> None:
    """Wait for the rank, record its wait status, and end the same way (the exit code or the signal)."""
    def forward(number, _frame):
        try:
            os.kill(child, number)
        except ProcessLookupError:  # the rank has ended; waitpid returns at once
            pass

    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(number, forward)
    _, status = os.waitpid(child, 0)
    _write(os.path.join(rundir, f"rank{rank}.status"), str(status))
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _run(rundir: str, rank: int) -> None:
    """The rank itself: run the target as ``__main__`` and exit with its code."""
    _write(os.path.join(rundir, f"rank{rank}.pid"), str(os.getpid()))
    launcher = os.environ.get("FLAMBEAU_RUN_LAUNCHER_PID")
    if launcher:
        _watch_launcher(int(launcher))
    as_module = sys.argv[1] == "-m"
    target = sys.argv[2] if as_module else sys.argv[1]
    sys.argv = sys.argv[2:] if as_module else sys.argv[1:]
    if not as_module:
        sys.path[0] = os.path.dirname(os.path.abspath(target))
    code = 0
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            sys.stderr.write(f"{stop.code}\n")
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:  # noqa: BLE001 - reported like Python reports an uncaught exception
        traceback.print_exc()
        code = 1
    if code != 0:
        runtime = sys.modules.get("flambeau.distributed._runtime")
        if runtime is not None:
            runtime.mark_failed()  # do not wait in MPI_Finalize for ranks that will never come
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


def main() -> None:
    rundir = os.environ["FLAMBEAU_RUN_DIR"]
    rank = _set_rank_environment()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        _die_with_parent()
        if os.getppid() == 1:  # the supervisor died before prctl took effect
            os._exit(1)
        _run(rundir, rank)
    else:
        _supervise(child, rundir, rank)


if __name__ == "__main__":
    main()
