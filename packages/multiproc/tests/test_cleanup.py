"""Nothing outlives a program that shares tensors: no process, no /dev/shm name, no held memory.

Tests the exit and cleanup paths of ``flambeau/multiprocessing/_shm_manager.py`` (the manager
daemon) and ``_client.py``. Each test runs a small program with a manager daemon of its own (the
pytest process's daemon address is removed from its environment), in a session of its own, with
its output captured as ``subprocess.run(capture_output=True)`` does, then interrupts or kills
it and checks, polling against generous deadlines, that:

- the capture returns promptly (a daemon that inherited the program's stderr kept it open for 30 s);
- the daemon and every child have exited;
- no /dev/shm name of the program is left (names carry the daemon's pid: ``flambeau_<daemon>_...``).

Whatever happens, the test then kills what is left of the program and unlinks its names.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from flambeau import _sharing
from flambeau.multiprocessing import _client

RETURN_S = 10.0  # the capture must end this soon after the program's end (it took 30 s)
GONE_S = 10.0  # the daemon, the children and the names must be gone this soon after that
STRATEGIES = ["file_descriptor", "file_system"]
LARGE = _sharing.SMALL_BYTES // 4 + 16  # float32 elements: a segment of its own

PRELUDE = f"""
import json, os, signal, sys, time
import multiprocessing.util  # first, as many programs do: its exit hook (joining children) runs after ours
import flambeau as fl
import flambeau.multiprocessing as mp

LARGE = {LARGE}


def report(**info):
    path = sys.argv[1]
    with open(path + ".tmp", "w") as f:
        json.dump(info, f)
    os.replace(path + ".tmp", path)


def wait_for(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.01)
"""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _names(daemon: int) -> list[str]:
    return [n for n in _sharing.shm_names() if n.startswith(f"flambeau_{daemon}_")]


def _wait(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class Program:
    """A program started as ``subprocess.run(capture_output=True)`` would, in a session of its own.

    It gets the path of a JSON file as ``argv[1]`` where it reports its daemon's and children's
    pids (:meth:`info`); :meth:`cleanup` kills whatever of it is left and unlinks its names.
    """

    def __init__(self, tmp_path, source: str, *args: str):
        script = tmp_path / "program.py"
        script.write_text(PRELUDE + textwrap.dedent(source))
        self.info_path = tmp_path / "info.json"
        env = {k: v for k, v in os.environ.items() if k != _client.ENV}  # a daemon of its own
        self.proc = subprocess.Popen([sys.executable, str(script), str(self.info_path), *args], cwd=tmp_path,
                                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self._info: dict | None = None

    def info(self, timeout: float = 60.0) -> dict:
        """What the program reported (waiting for it)."""
        if self._info is None:
            ok = _wait(lambda: self.info_path.exists() or self.proc.poll() is not None, timeout)
            if not self.info_path.exists():
                out, err = self.proc.communicate() if ok else (b"", b"")
                pytest.fail(f"the program reported nothing (exit code {self.proc.returncode}): {err.decode()}")
            self._info = json.loads(self.info_path.read_text())
        return self._info

    def capture(self, timeout: float = RETURN_S) -> tuple[float, str]:
        """Wait, as ``subprocess.run(capture_output=True)`` does, for the end of the program's output;
        returns the seconds waited and its stderr."""
        start = time.monotonic()
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"capturing the output of the program took over {timeout} s: something it started holds "
                        f"its stdout or stderr (exit code {self.proc.poll()})")
        return time.monotonic() - start, err.decode()

    def leftovers(self) -> dict:
        info = self.info()
        return {"processes": [p for p in [info["daemon"], *info.get("children", [])] if _alive(p)],
                "names": _names(info["daemon"])}

    def assert_nothing_left(self, timeout: float = GONE_S) -> None:
        _wait(lambda: not any(self.leftovers().values()), timeout)
        left = self.leftovers()
        assert not left["processes"], f"processes still alive {timeout} s after the program's end: {left}"
        assert not left["names"], f"/dev/shm names still there {timeout} s after the program's end: {left}"

    def cleanup(self) -> None:
        try:  # the program and its children (the daemon has a process group of its own)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        info = self._info or (json.loads(self.info_path.read_text()) if self.info_path.exists() else {})
        for pid in info.get("children", []):
            _kill_if(pid, "python")
        if "daemon" in info:
            _kill_if(info["daemon"], "_shm_manager.py")
        try:
            self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - something unknown holds the pipes
            pass
        if "daemon" in info:
            _wait(lambda: not _alive(info["daemon"]), 10)  # a dying daemon may still unlink names
            for name in _names(info["daemon"]):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except FileNotFoundError:
                    pass
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


def _kill_if(pid: int, marker: str) -> None:
    """SIGKILL ``pid`` if it is alive and runs ``marker`` (not some process that reused the pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if marker.encode() in f.read() and _alive(pid):
                os.kill(pid, signal.SIGKILL)
    except (FileNotFoundError, ProcessLookupError):
        pass


@pytest.fixture
def program(tmp_path):
    started = []

    def start(source: str, *args: str) -> Program:
        started.append(Program(tmp_path, source, *args))
        return started[-1]

    yield start
    for p in started:
        p.cleanup()


# --- Ctrl-C ------------------------------------------------------------------------------------------
INTERRUPTED = """
def consume(q):
    while True:
        q.get()
        time.sleep(10)  # slower than the producer: the rest stays queued


if __name__ == "__main__":
    mp.set_sharing_strategy(sys.argv[2])
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=consume, args=(q,), daemon=True)
    p.start()
    for i in range(6):
        q.put(fl.full((LARGE,), float(i)))
    wait_for(lambda: mp.shared_memory_manager_stats()["inflight"] >= 3)
    report(daemon=mp.shared_memory_manager_stats()["pid"], children=[p.pid])
    while True:
        time.sleep(0.1)
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_program_interrupted_with_tensors_in_flight_ends_at_once(program, strategy):
    """Ctrl-C (SIGINT to the program's process group) while tensors are queued: the captured run
    ends as soon as the program does, and the daemon, the child and the names go with it."""
    prog = program(INTERRUPTED, strategy)
    prog.info()
    os.killpg(prog.proc.pid, signal.SIGINT)
    _, err = prog.capture()
    assert "KeyboardInterrupt" in err
    prog.assert_nothing_left()


# --- SIGKILLed consumers -----------------------------------------------------------------------------
CONSUMER_KILLED = """
def consume_and_hang(q, back):
    t = q.get()
    back.put(float(t[0]))
    time.sleep(600)  # until SIGKILLed


def consume_late(q, path):
    time.sleep(1.0)  # the parent's script has ended by now
    t = q.get()
    with open(path, "w") as f:
        f.write(str(float(t[0])))


if __name__ == "__main__":
    mp.set_sharing_strategy(sys.argv[2])
    ctx = mp.get_context("fork")
    q, back = ctx.Queue(), ctx.SimpleQueue()
    first = ctx.Process(target=consume_and_hang, args=(q, back))
    first.start()
    for i in range(5):
        q.put(fl.full((LARGE,), float(i)))
    assert back.get() == 0.0
    held = lambda: len(mp.shared_memory_manager_stats()["segments"])
    wait_for(lambda: held() == 5)  # one held by the consumer, four in flight
    os.kill(first.pid, signal.SIGKILL)
    first.join()
    start = time.monotonic()
    wait_for(lambda: held() == 4)  # what the consumer held goes with it
    released_s = time.monotonic() - start
    late = ctx.Process(target=consume_late, args=(q, sys.argv[1] + ".late"))
    late.start()
    report(daemon=mp.shared_memory_manager_stats()["pid"], children=[first.pid, late.pid], released_s=released_s)
    # the script ends here: multiprocessing joins `late` at exit, which still receives a tensor
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_what_a_sigkilled_consumer_held_or_had_queued_goes_promptly(program, strategy):
    """A consumer is SIGKILLed with tensors queued for it: what it held goes at once; a receiver
    still gets a queued tensor after the producer's script ended; when the last process exits, the
    tensors nobody can receive any more go at once (names unlinked, memfds closed by the daemon's exit)."""
    prog = program(CONSUMER_KILLED, strategy)
    info = prog.info()
    assert info["released_s"] < 5.0, "the SIGKILLed consumer's segment stayed held"
    _, err = prog.capture(timeout=60.0 + RETURN_S)
    assert prog.proc.returncode == 0, err
    assert (prog.info_path.parent / "info.json.late").read_text() == "1.0", "the late receiver got nothing"
    ended = os.stat(prog.info_path.parent / "info.json.late").st_mtime
    assert time.time() - ended < RETURN_S, f"the captured run ended {time.time() - ended:.1f} s after the program"
    prog.assert_nothing_left()


PRODUCERS_OUTLIVE_CONSUMER = """
def produce(q):
    parent = os.getppid()
    for i in range(10):
        q.put(fl.full((LARGE,), float(i)))
    while os.getppid() == parent:  # as a DataLoader worker: stop when the main process is gone
        time.sleep(0.05)


if __name__ == "__main__":
    mp.set_sharing_strategy(sys.argv[2])
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    producers = [ctx.Process(target=produce, args=(q,)) for _ in range(2)]
    for p in producers:
        p.start()
    got = [q.get() for _ in range(3)]
    wait_for(lambda: mp.shared_memory_manager_stats()["inflight"] >= 5)
    report(daemon=mp.shared_memory_manager_stats()["pid"], children=[p.pid for p in producers])
    time.sleep(600)  # until SIGKILLed
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sigkilled_consumer_whose_producers_then_exit_leaves_nothing(program, strategy):
    """The main process consumes what its children produce and is SIGKILLed; the children exit when
    they see it gone. Tensors were in flight: they go at once with the last process, and the
    captured run ends with it."""
    prog = program(PRODUCERS_OUTLIVE_CONSUMER, strategy)
    prog.info()
    os.kill(prog.proc.pid, signal.SIGKILL)
    prog.capture()
    prog.assert_nothing_left()


LOADER_KILLED = """
from multiprocessing import active_children

from flambeau.data import DataLoader, Dataset


class Samples(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        return fl.full((4096,), float(i))


if __name__ == "__main__":
    mp.set_sharing_strategy(sys.argv[2])
    it = iter(DataLoader(Samples(), batch_size=8, num_workers=2))
    next(it)
    wait_for(lambda: mp.shared_memory_manager_stats()["inflight"] >= 1)
    report(daemon=mp.shared_memory_manager_stats()["pid"], children=[p.pid for p in active_children()])
    time.sleep(600)  # until SIGKILLed
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sigkilled_dataloader_main_process_leaves_nothing(program, strategy):
    pytest.importorskip("flambeau.data")
    prog = program(LOADER_KILLED, strategy)
    assert len(prog.info()["children"]) == 2
    os.kill(prog.proc.pid, signal.SIGKILL)
    prog.capture()
    prog.assert_nothing_left()


# --- receivers that connect late ---------------------------------------------------------------------
NOT_THE_STARTER = """
import subprocess
from flambeau.multiprocessing import _client


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"  # exited, not yet reaped by the test
    except FileNotFoundError:
        return True


def receive_late(q, launcher, path):
    wait_for(lambda: gone(launcher))
    time.sleep(1.0)  # the main script has ended: its process has disconnected and joins us
    t = q.get()
    with open(path, "w") as f:
        f.write(str(float(t.sum())))


if __name__ == "__main__" and sys.argv[2] == "launcher":
    address, pid = _client._start_daemon()
    client = _client.ManagerClient(address, pid)  # the tree's only client until the main process connects
    env = dict(os.environ, FLAMBEAU_SHM_MANAGER=f"{pid} {address}")
    main = subprocess.Popen([sys.executable, sys.argv[0], sys.argv[1], "main", str(os.getpid())], env=env)
    wait_for(lambda: client.query()["inflight"] >= 1)
    report(daemon=pid, children=[main.pid])
elif __name__ == "__main__":
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    launcher = int(sys.argv[3])
    p = ctx.Process(target=receive_late, args=(q, launcher, sys.argv[1] + ".late"))
    p.start()
    q.put(fl.ones(LARGE))
    wait_for(lambda: gone(launcher))
"""


def test_child_receives_after_the_script_of_a_parent_that_did_not_start_the_daemon_ended(program):
    """Guards the exit rule rather than reproducing a bug (the old daemon lingered 30 s): a process
    that closes its connection at exit keeps handles in flight alive until it is gone, for the
    children multiprocessing joins after that, even when neither it nor its parent started the daemon."""
    prog = program(NOT_THE_STARTER, "launcher")
    prog.info()
    _, err = prog.capture(timeout=60.0)
    assert prog.proc.returncode == 0, err
    late = prog.info_path.parent / "info.json.late"
    assert _wait(late.exists, GONE_S) and float(late.read_text()) == LARGE, err
    prog.assert_nothing_left()


# --- the daemon itself -------------------------------------------------------------------------------
STARTER_DIES = """
from flambeau.multiprocessing import _client

if __name__ == "__main__":
    address, pid = _client._start_daemon()
    report(daemon=pid)  # and exit without ever connecting
"""


def test_daemon_exits_when_its_starter_dies_before_connecting(program):
    prog = program(STARTER_DIES)
    prog.info()
    prog.capture()
    prog.assert_nothing_left()


def test_daemon_logs_a_bad_message_drops_its_sender_and_serves_on():
    """The daemon reports its errors in a log file (its stdio is /dev/null): a client that sends a
    malformed message is dropped, the others are served."""
    address, pid = _client._start_daemon()
    log = os.path.join(tempfile.gettempdir(), f"flambeau-shm-manager-{pid}.log")
    good = _client.ManagerClient(address, pid)
    bad = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        bad.connect(_client._sockaddr(address))
        bad.send(b"S no-key")
        bad.settimeout(30)
        assert bad.recv(16) == b"", "the daemon kept a client that sent a malformed message"
        assert good.query()["clients"] == 1
        with open(log) as f:
            assert "S no-key" in f.read()
    finally:
        bad.close()
        good.close()
        try:
            assert _wait(lambda: not _alive(pid), GONE_S), "the daemon outlived its last client"
        finally:
            _kill_if(pid, "_shm_manager.py")
            if os.path.exists(log):
                os.unlink(log)
