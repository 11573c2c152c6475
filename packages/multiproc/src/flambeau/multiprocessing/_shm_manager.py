"""The shared-memory manager daemon: one per process tree, like torch's ``torch_shm_manager``.

It runs as its own small process (standard library only: started as a script, it imports no
flambeau and no numpy) and serves the processes of one tree over a ``SOCK_SEQPACKET`` Unix
socket in the abstract namespace. It keeps, for every shared segment (a memfd, whose
descriptor it holds, or a /dev/shm name), a count of holders:

- each client connection holds the segments its process made (``R key`` with the memfd's
  descriptor, or ``H key`` for a name, sent before the name exists) or mapped, and lets go with
  ``D key``; a client that dies, even by SIGKILL, closes its connection and its holds go with it;
- a segment sent to another process is held *in flight* (``S token key``) until the receiver
  takes it over: ``G token key`` (a memfd: the receiver now holds it and gets a descriptor back,
  ``F`` with the fd in SCM_RIGHTS), ``C token key`` (a name it opened, now held by it) or
  ``X token`` (it maps the segment already). Messages of two clients may reach the daemon in
  either order, so a fetch or a release that arrives before its send waits for it.

When the count of a segment drops to zero the daemon closes its descriptor (the kernel frees the
memory once the last mapping goes) or unlinks the name.

Note [When the daemon exits]
    A handle in flight can still be received while some process that could receive it lives:
    a connected client; the process that started the daemon; the parents of a client (``P
    pid...``, sent by a child of the program when it connects: they may not have connected yet,
    like the parent of a spawned child that started a daemon of its own); a process that closed
    its connection at exit (``P`` with its own pid: multiprocessing joins its children after
    that). The daemon watches those processes with pidfds (polling where pidfds are missing), so
    it notices a death at once, by SIGKILL too. It exits, unlinking the names left and closing
    the descriptors left, as soon as no client is connected and either nothing is in flight or
    none of them lives: the handles queued for a SIGKILLed consumer go when the last process of
    the tree has gone, not later. Before its first client it waits for its starter (at most
    ``IDLE_EXIT_S``), and exits when the starter dies without connecting.

Names carry the daemon's pid, so a daemon that was itself killed leaves names that the next
daemon recognises and unlinks. Senders never wait for a reply; only a receiver fetching a
descriptor does. A process connected to another tree's daemon (one that a spawned child started
before any daemon existed) disconnects when it holds nothing there, so that daemon can go.

The daemon keeps none of its starter's standard streams: it runs in its own process group with
stdin, stdout and stderr on /dev/null (a program whose output is captured through pipes ends when
it does, not when the daemon does). It writes what goes wrong (a malformed message, whose sender
is dropped; a crash) to ``<tempdir>/flambeau-shm-manager-<pid>.log`` (:func:`log_path`).

``Q`` returns counters as JSON (for tests). Run: ``python -S _shm_manager.py @abstract-name
[starter-pid]``; it prints ``ready <pid>`` once it listens.
"""

from __future__ import annotations

import json
import os
import re
import resource
import selectors
import signal
import socket
import sys
import time
from collections import Counter

PREFIX = "flambeau_"
_NAME = re.compile(r"^flambeau_(\d+)_\d+_\d+$")
IDLE_EXIT_S = 60.0  # no client ever connected and the starter lives (or is unknown): give up then
POLL_S = 1.0  # how often watched processes are polled where pidfds are missing


def log_path(pid: int) -> str:
    """Where daemon ``pid`` writes what went wrong (clients name it in their errors)."""
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"flambeau-shm-manager-{pid}.log")


def _log(text: str) -> None:
    try:
        with open(log_path(os.getpid()), "a") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} flambeau shared-memory manager {os.getpid()}: {text}\n")
    except OSError:
        pass


def _unlink(name: str) -> None:
    try:
        os.unlink(os.path.join("/dev/shm", name))
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> None:
    """Unlink the names left by dead owners (a killed daemon, or a process without one)."""
    try:
        names = os.listdir("/dev/shm")
    except FileNotFoundError:
        return
    for name in names:
        m = _NAME.match(name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            _unlink(name)


class Manager:
    def __init__(self, address: str, starter: int | None = None):
        self.sel = selectors.DefaultSelector()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(address)
        self.srv.listen(256)
        self.sel.register(self.srv, selectors.EVENT_READ)
        self.holds: dict[socket.socket, Counter] = {}  # client -> segment key -> holds
        self.count: Counter = Counter()  # key -> holds of all clients + in-flight sends
        self.fds: dict[str, int] = {}  # key of a memfd -> our descriptor of it
        self.inflight: dict[str, str] = {}  # token -> key
        self.early: set[str] = set()  # tokens released before their send arrived
        self.waiting: dict[str, socket.socket] = {}  # token -> client waiting to fetch its descriptor
        self.watched: dict[int, int | None] = {}  # live pid that may receive -> its pidfd (None: polled)
        self.ever_connected = False
        self.starter = starter
        if starter is not None:
            self._watch(starter)

    # --- segments ------------------------------------------------------------------------------------
    def _add(self, key: str, n: int) -> None:
        self.count[key] += n
        if self.count[key] <= 0:
            del self.count[key]
            if key.startswith("fs:"):
                _unlink(key[3:])
            fd = self.fds.pop(key, None)
            if fd is not None:
                os.close(fd)

    def _hold(self, conn: socket.socket, key: str) -> None:
        self.holds[conn][key] += 1
        self._add(key, 1)

    def _release_inflight(self, token: str) -> None:
        key = self.inflight.pop(token, None)
        if key is None:
            self.early.add(token)
        else:
            self._add(key, -1)

    def _give(self, conn: socket.socket, key: str) -> None:
        self._hold(conn, key)
        fd = self.fds.get(key)
        try:
            if fd is None:
                conn.send(b"E no descriptor for " + key.encode())
            else:
                socket.send_fds(conn, [b"F"], [fd])
        except OSError:
            pass  # the client went away; its connection is dropped on the next select

    # --- processes that may receive (Note [When the daemon exits]) -----------------------------------
    def _watch(self, pid: int) -> None:
        if pid in self.watched or pid <= 1 or not _alive(pid):
            return
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        except (AttributeError, OSError):  # no pidfds (Linux < 5.3): polled every POLL_S
            self.watched[pid] = None
            return
        self.watched[pid] = fd
        self.sel.register(fd, selectors.EVENT_READ, pid)

    def _unwatch(self, pid: int) -> None:
        fd = self.watched.pop(pid)
        if fd is not None:
            self.sel.unregister(fd)
            os.close(fd)

    def _poll_watched(self) -> None:
        for pid, fd in list(self.watched.items()):
            if fd is None and not _alive(pid):
                self._unwatch(pid)

    def done(self) -> bool:
        """Whether nothing is left to serve (Note [When the daemon exits])."""
        if self.holds:
            return False
        if not self.ever_connected:
            return self.starter is not None and self.starter not in self.watched
        return not self.inflight or not self.watched

    # --- messages ------------------------------------------------------------------------------------
    def handle(self, conn: socket.socket, msg: bytes, fds: list) -> None:
        op, _, rest = msg.decode().partition(" ")
        if op == "R":  # a new memfd: we keep a descriptor; the sender holds it
            if rest in self.fds:
                os.close(fds[0])
            else:
                self.fds[rest] = fds[0]
            fds = fds[1:]
            self._hold(conn, rest)
        elif op == "H":
            self._hold(conn, rest)
        elif op == "D":
            if self.holds[conn][rest] > 0:
                self.holds[conn][rest] -= 1
                self._add(rest, -1)
        elif op == "S":
            token, key = rest.split(" ", 1)
            if token in self.early:
                self.early.discard(token)
            elif token in self.waiting:
                self._give(self.waiting.pop(token), key)
            else:
                self.inflight[token] = key
                self._add(key, 1)
        elif op == "C":
            token, key = rest.split(" ", 1)
            self._hold(conn, key)
            self._release_inflight(token)
        elif op == "X":
            self._release_inflight(rest)
        elif op == "G":
            token, key = rest.split(" ", 1)
            if token in self.inflight:
                self._give(conn, key)
                self._release_inflight(token)
            else:
                self.waiting[token] = conn
        elif op == "P":
            for pid in rest.split():
                self._watch(int(pid))
        elif op == "Q":
            stats = {"pid": os.getpid(), "clients": len(self.holds), "segments": sorted(self.count),
                     "names": sorted(k[3:] for k in self.count if k.startswith("fs:")), "fds": len(self.fds),
                     "inflight": len(self.inflight), "waiting": len(self.waiting), "watched": sorted(self.watched)}
            try:
                conn.send(json.dumps(stats).encode())
            except OSError:
                pass  # the client went away; its connection is dropped on the next select
        else:
            raise ValueError(f"unknown message {msg!r}")
        for fd in fds:
            os.close(fd)

    def _drop(self, conn: socket.socket) -> None:
        self.sel.unregister(conn)
        for key, n in self.holds.pop(conn).items():
            if n:
                self._add(key, -n)
        for token in [t for t, c in self.waiting.items() if c is conn]:
            del self.waiting[token]
        conn.close()

    def _serve(self, conn: socket.socket) -> None:
        try:
            msg, fds, _, _ = socket.recv_fds(conn, 4096, 4)
        except OSError:
            msg, fds = b"", []
        if not msg:  # the client closed its connection or died
            for fd in fds:
                os.close(fd)
            self._drop(conn)
            return
        try:
            self.handle(conn, msg, fds)
        except Exception:  # noqa: BLE001 - a client that breaks the protocol is dropped, the others served
            import traceback

            _log(f"dropped a client (pid {_peer_pid(conn)}) after message {msg[:200]!r}:\n{traceback.format_exc()}")
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._drop(conn)

    def run(self) -> None:
        started = time.monotonic()
        while not self.done():
            if self.ever_connected:
                timeout = None
            else:
                timeout = started + IDLE_EXIT_S - time.monotonic()
                if timeout <= 0:
                    break
            if None in self.watched.values():
                timeout = POLL_S if timeout is None else min(timeout, POLL_S)
            for key, _ in self.sel.select(timeout):
                if key.fileobj is self.srv:
                    conn, _ = self.srv.accept()
                    self.holds[conn] = Counter()
                    self.sel.register(conn, selectors.EVENT_READ)
                    self.ever_connected = True
                elif key.data is not None:  # a watched process exited
                    self._unwatch(key.data)
                elif key.fileobj in self.holds:
                    self._serve(key.fileobj)
            self._poll_watched()
        self.shutdown()

    def shutdown(self) -> None:
        for key in list(self.count):
            if key.startswith("fs:"):
                _unlink(key[3:])
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
        self.count.clear()
        self.srv.close()


def _peer_pid(conn: socket.socket) -> int | None:
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        return int.from_bytes(creds[:4], sys.byteorder)
    except OSError:
        return None


def _detach_stdio() -> None:
    """Put stdin, stdout and stderr on /dev/null: the starter's pipes must not wait for us."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if devnull > 2:
        os.close(devnull)


def main(argv: list[str]) -> None:
    address = argv[1]
    if address.startswith("@"):
        address = "\0" + address[1:]
    starter = int(argv[2]) if len(argv) > 2 else None
    # The clients decide when we go (all gone); SIGTTOU/SIGTTIN: a background process group of the
    # terminal's session may still write a traceback to the inherited stderr.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGTTOU, signal.SIGTTIN):
        signal.signal(sig, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:  # in-flight descriptors are held here
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    manager = Manager(address, starter)  # listening before the starter hears "ready"
    # Fork so that the daemon is nobody's child: the starter reaps the parent at once and keeps no
    # process handle (and no zombie) around. Its own process group keeps the terminal's signals
    # (Ctrl-C, job control) away from it. It stays in its starter's session on purpose: Linux's
    # autogroup scheduler shares the CPU between sessions, and a daemon in a session of its own,
    # woken a few times per DataLoader batch, hands the CPU to other sessions at each wake-up
    # (measured on a busy 2-core machine: 2-worker epochs 13% slower than with the daemon in the
    # session of its clients). Errors until "ready" still reach the starter's stderr.
    if os.fork():
        os._exit(0)
    try:
        os.setpgid(0, 0)
    except OSError:  # pragma: no cover - a session leader cannot: it has no terminal's signals anyway
        pass
    signal.signal(signal.SIGTERM, lambda *_: (manager.shutdown(), os._exit(0)))
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    _detach_stdio()
    try:
        sweep_stale()
        manager.run()
    except BaseException:
        import traceback

        _log(f"crashed:\n{traceback.format_exc()}")
        manager.shutdown()
        os._exit(1)


if __name__ == "__main__":
    main(sys.argv)
