"""Clients of the shared-memory manager daemon (:mod:`._shm_manager`).

The first process of a tree that shares a tensor, or forks, starts the daemon and puts its
address in the environment (``FLAMBEAU_SHM_MANAGER``), so that the processes it starts, forked or
spawned, use the same one. A handle names the daemon of its sender, so a receiver always talks to the right
one, whichever process started it. Each process keeps one connection per daemon (reopened after
a fork: a child never talks on its parent's socket).

:class:`ManagerClient` is also the tracker of ``flambeau._sharing``: the segments this process
makes or maps are held on its connection, and released when the process lets go of them or dies.
A connection made by a child of the program first tells the daemon the child's parents (``P
pid...``), and one closed at exit the process itself: the daemon keeps handles in flight while
they live (Note [When the daemon exits]).
"""

from __future__ import annotations

import atexit
import itertools
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import threading

from . import _shm_manager

ENV = "FLAMBEAU_SHM_MANAGER"
_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shm_manager.py")
_lock = threading.Lock()
_clients: dict[str, ManagerClient] = {}
_tokens = itertools.count()


def _sockaddr(address: str) -> str:
    return "\0" + address[1:] if address.startswith("@") else address


class ManagerClient:
    """A connection of this process to the daemon at ``address`` (pid ``pid``)."""

    def __init__(self, address: str, pid: int):
        self.address = address
        self.pid = pid
        self.holds = 0  # segments this process holds through this daemon
        # reentrant: a segment collected by the garbage collector inside a send releases itself
        self._lock = threading.RLock()
        self._sock = None
        self._connect()

    def _connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.set_inheritable(False)
        try:
            sock.connect(_sockaddr(self.address))
            parents = _parents()
            if parents:  # they may receive our handles before they connect (Note [When the daemon exits])
                sock.send(("P " + " ".join(map(str, sorted(parents)))).encode())
        except OSError as e:
            sock.close()
            log = _shm_manager.log_path(self.pid)
            why = (f"; see its log {log}" if os.path.exists(log)
                   else " (a daemon exits when no process of its tree is left to receive what was sent)")
            raise RuntimeError(f"flambeau.multiprocessing: cannot reach the shared-memory manager at "
                               f"{self.address!r} (pid {self.pid}): {e}{why}") from e
        self._sock = sock

    def is_default(self) -> bool:
        """Whether this is the daemon of this process's tree (its connection stays open)."""
        return os.environ.get(ENV, "").endswith(" " + self.address)

    def _send(self, msg: str, fds=(), holds: int = 0) -> None:
        with self._lock:
            if self._sock is None:
                if _exiting:
                    return  # at exit: closing the connection released our holds already
                self._connect()
            if fds:
                socket.send_fds(self._sock, [msg.encode()], list(fds))
            else:
                self._sock.send(msg.encode())
            self._count(holds)

    def _count(self, holds: int) -> None:
        # A connection to another tree's daemon (one a spawned child started) is closed when this
        # process holds nothing there, so that daemon can exit once its own tree is done.
        self.holds += holds
        if holds < 0 and self.holds <= 0 and not self.is_default():
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    # --- holds (the tracker API of flambeau._sharing) and transfers -------------------------------
    def hold(self, key: str, fd: int = -1) -> bool:
        """This process made segment ``key`` (a memfd ``fd``, of which the daemon keeps a reference)."""
        if fd >= 0:
            self._send(f"R {key}", (fd,), holds=1)
            return True
        self._send(f"H {key}", holds=1)
        return False

    def release(self, key: str) -> None:
        """This process let go of segment ``key``."""
        self._send(f"D {key}", holds=-1)

    def send(self, key: str) -> str:
        """Hold segment ``key`` in flight for a receiver; returns the token the handle carries."""
        token = new_token()
        self._send(f"S {token} {key}")
        return token

    def claim(self, token: str, key: str) -> None:
        """The receiver mapped named segment ``key``: it holds it now, and the in-flight hold goes."""
        self._send(f"C {token} {key}", holds=1)

    def release_inflight(self, token: str) -> None:
        """The receiver maps that segment already: the in-flight hold goes."""
        self._send(f"X {token}")

    def get_fd(self, token: str, key: str) -> int:
        """A descriptor of memfd segment ``key`` sent under ``token``; this process holds it from now on."""
        with self._lock:
            if self._sock is None:
                self._connect()
            self._sock.send(f"G {token} {key}".encode())
            msg, fds, _, _ = socket.recv_fds(self._sock, 256, 1)
            self._count(1)
        if msg != b"F" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise RuntimeError(f"flambeau.multiprocessing: the shared-memory manager did not return the "
                               f"descriptor of {key} (got {msg!r})")
        return fds[0]

    def query(self) -> dict:
        """The daemon's counters: clients, names held, in-flight sends, deposited fds."""
        with self._lock:
            if self._sock is None:
                self._connect()
            self._sock.send(b"Q")
            return json.loads(self._sock.recv(1 << 20))


def new_token() -> str:
    return f"{os.getpid()}.{next(_tokens)}"


def _parents() -> set[int]:
    """The parents of this process that belong to the program (its multiprocessing parent, the
    process it was forked from): the daemon keeps handles in flight while they live."""
    parents = {os.getppid()} if _forked else set()
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid is not None:
        parents.add(parent.pid)  # with forkserver, the process that asked for this one
    return parents


def _start_daemon() -> tuple[str, int]:
    address = f"@flambeau-shm-{os.getpid()}-{os.urandom(6).hex()}"
    # The daemon's stderr is ours until it is ready (a failure to start is reported here), then /dev/null.
    proc = subprocess.Popen([sys.executable, "-S", _SCRIPT, address, str(os.getpid())], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, close_fds=True)
    try:
        line = proc.stdout.readline().decode()
    finally:
        proc.stdout.close()
        proc.wait()  # the launcher forks the daemon and exits at once
    if not line.startswith("ready "):
        raise RuntimeError("flambeau.multiprocessing: the shared-memory manager failed to start")
    return address, int(line.split()[1])


def default_client() -> ManagerClient:
    """This process's connection to its tree's daemon, starting the daemon if there is none."""
    env = os.environ.get(ENV)
    if env:
        pid, address = env.split(" ", 1)
        client = _clients.get(address)
        if client is not None:
            return client
        try:
            return client_for(address, int(pid))
        except RuntimeError:
            pass  # that daemon is gone (its tree ended): start our own
    with _lock:
        env = os.environ.get(ENV)
        if env and env.split(" ", 1)[1] in _clients:
            return _clients[env.split(" ", 1)[1]]
        address, pid = _start_daemon()
        client = _clients[address] = ManagerClient(address, pid)
        os.environ[ENV] = f"{pid} {address}"
        return client


def client_for(address: str, pid: int) -> ManagerClient:
    """This process's connection to the daemon at ``address``."""
    client = _clients.get(address)
    if client is None:
        with _lock:
            client = _clients.get(address)
            if client is None:
                client = _clients[address] = ManagerClient(address, pid)
    return client


class DefaultTracker:
    """The tracker installed into ``flambeau._sharing``: segments this process makes are held on its
    default daemon connection."""

    def __init__(self):
        self._held: dict[str, ManagerClient] = {}

    def owner(self) -> int:
        return default_client().pid

    def hold(self, key: str, fd: int = -1) -> bool:
        client = default_client()
        self._held[key] = client
        return client.hold(key, fd)

    def release(self, key: str) -> None:
        client = self._held.pop(key, None)
        if client is not None:
            client.release(key)

    def client_of(self, key: str) -> ManagerClient | None:
        """The connection holding segment ``key`` made by this process, if any."""
        return self._held.get(key)


_forked = False  # this process was forked (by multiprocessing or os.fork) from one of the program


def _after_fork_in_child() -> None:
    global _lock, _forked
    _lock = threading.Lock()
    _forked = True
    for client in _clients.values():
        try:
            if client._sock is not None:
                client._sock.close()  # the child's copy only; the parent's connection stays open
        except OSError:
            pass
    _clients.clear()
    from flambeau import _sharing

    tracker = _sharing.get_tracker()
    if isinstance(tracker, DefaultTracker):
        tracker._held.clear()  # the parent's holds; a forked child holds nothing of its own yet


_exiting = False


@atexit.register
def _close_all() -> None:
    global _exiting
    _exiting = True
    for client in list(_clients.values()):
        # The children that multiprocessing joins after this hook may still receive handles in flight:
        # the daemon keeps them while this process lives (Note [When the daemon exits]).
        with client._lock:
            if client._sock is not None:
                try:
                    client._sock.send(f"P {os.getpid()}".encode())
                except OSError:
                    pass
        client.close()  # the daemon drops this process's holds


def _before_fork() -> None:
    # A tree shares one daemon only if it exists before the first fork: children started before it
    # existed would each start their own (a data loader's workers). Starting it costs one process.
    if ENV not in os.environ:
        try:
            default_client()
        except Exception:  # noqa: BLE001 - never break a fork; the child starts its own if it must
            pass


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
