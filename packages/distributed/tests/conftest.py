"""Helpers of flambeau-distributed's tests: multi-rank programs run through the launcher, in subprocesses.

Every multi-rank test starts ``python -m flambeau.distributed.run --nproc-per-node N <script>``
(the scripts are the ``rank_*.py`` files beside this one) with a time limit, and afterwards checks
that no process of that run is left (each run carries a marker in its environment) and that no
MPI shared-memory segment appeared in /dev/shm. The rank scripts write their findings as JSON or
``.npz`` files into a folder the test reads.
"""

from __future__ import annotations

import json
import os
import pathlib
import select
import signal
import subprocess
import sys
import time
import uuid

import pytest

HERE = pathlib.Path(__file__).parent
LAUNCH_TIMEOUT_S = 120  # generous for a loaded 2-core machine; a passing run takes seconds


def mpich_segments() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith("mpich")}


def marked_processes(marker: str) -> list[int]:
    """Process ids whose environment holds ``marker`` (the ranks, mpiexec and its proxies of one run)."""
    needle = f"FLAMBEAU_TEST_MARK={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read():
                    with open(f"/proc/{entry}/stat") as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(entry))
        except OSError:
            continue
    return found


class Run:
    """A finished (or timed-out) launcher run: return code, output, wall time."""

    def __init__(self, returncode: int, stdout: str, stderr: str, seconds: float):
        self.returncode, self.stdout, self.stderr, self.seconds = returncode, stdout, stderr, seconds

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __repr__(self) -> str:
        return f"<Run rc={self.returncode} {self.seconds:.1f}s>\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def _environment(marker: str, extra: dict | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PMI_RANK")}
    env.update({"FLAMBEAU_TEST_MARK": marker, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
                "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def _assert_clean(marker: str, segments_before: set[str]) -> None:
    """No process of the run is left and no MPI segment appeared; kill and unlink what is, then fail."""
    deadline = time.monotonic() + 10
    left = marked_processes(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = marked_processes(marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    leaked = mpich_segments() - segments_before
    for name in leaked:
        try:
            os.unlink(f"/dev/shm/{name}")
        except FileNotFoundError:
            pass
    assert not left, f"processes of the run still alive: {left}"
    assert not leaked, f"shared-memory segments left in /dev/shm: {sorted(leaked)}"


def launch(script: str, *args: str, nproc: int = 2, env: dict | None = None, launcher_args: tuple = (),
           timeout: float = LAUNCH_TIMEOUT_S) -> Run:
    """Run ``tests/<script>`` on ``nproc`` ranks through the launcher; checks nothing is left afterwards."""
    marker = uuid.uuid4().hex
    before = mpich_segments()
    cmd = [sys.executable, "-m", "flambeau.distributed.run", "--nproc-per-node", str(nproc), "--grace", "2",
           *launcher_args, str(HERE / script), *args]
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_environment(marker, env),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as expired:
        _assert_clean(marker, before)
        raise AssertionError(f"{script} did not finish within {timeout} s:\n{expired.stdout}\n{expired.stderr}") \
            from None
    run = Run(done.returncode, done.stdout, done.stderr, time.monotonic() - start)
    _assert_clean(marker, before)
    return run


def start(script: str, *args: str, nproc: int = 2, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """Start the launcher without waiting (for signal tests); returns the process and its marker.

    Its stdout and stderr are binary pipes: read stdout with :func:`wait_for_output`.
    """
    marker = uuid.uuid4().hex
    cmd = [sys.executable, "-m", "flambeau.distributed.run", "--nproc-per-node", str(nproc), "--grace", "2",
           str(HERE / script), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_environment(marker, env),
                            stdin=subprocess.DEVNULL)
    return proc, marker


def wait_for_output(proc: subprocess.Popen, *texts: str, timeout: float = LAUNCH_TIMEOUT_S) -> str:
    """Read ``proc``'s stdout until every one of ``texts`` appeared, it closed, or ``timeout`` passed.

    Returns what was read. The ranks' output reaches the launcher's stdout through mpiexec in the
    pieces the ranks wrote, and an unbuffered ``print`` writes its text and its newline separately,
    so two ranks' lines can interleave as ``"ready 0ready 1\n\n"``: look for the texts, never count
    lines, and never block in ``readline`` (a line that does not come would hang the test run).
    """
    fd = proc.stdout.fileno()
    seen = b""
    deadline = time.monotonic() + timeout
    while not all(t.encode() in seen for t in texts):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        seen += chunk
    return seen.decode(errors="replace")


def python(script: str, *args: str, env: dict | None = None, timeout: float = LAUNCH_TIMEOUT_S) -> Run:
    """Run ``tests/<script>`` as one plain process (MPI starts it as a world of one)."""
    marker = uuid.uuid4().hex
    before = mpich_segments()
    start_time = time.monotonic()
    done = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True,
                          timeout=timeout, env=_environment(marker, env), stdin=subprocess.DEVNULL)
    run = Run(done.returncode, done.stdout, done.stderr, time.monotonic() - start_time)
    _assert_clean(marker, before)
    return run


def read_checks(folder: pathlib.Path, nproc: int) -> list[dict]:
    """The ``{check: "ok" | traceback}`` dicts the ranks of a rank script wrote."""
    return [json.loads((folder / f"checks{r}.json").read_text()) for r in range(nproc)]


@pytest.fixture(scope="session")
def mpi_available():
    pytest.importorskip("mpi4py", reason="flambeau-distributed's tests need mpi4py and an MPI (pip install mpich)")
