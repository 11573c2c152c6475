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
memory once the last mapping goes) or unlinks the name. When the last client has gone (and handles
still in flight have waited ``LINGER_S`` for their receivers) it unlinks everything left and
exits. Names carry the daemon's pid, so a daemon that was itself killed leaves names that the next
daemon recognises and unlinks. Senders never wait for a reply; only a receiver fetching a
descriptor does. A process connected to another tree's daemon (one that a spawned child started
before any daemon existed) disconnects when it holds nothing there, so that daemon can go.

``Q`` returns counters as JSON (for tests). Run: ``python -S _shm_manager.py @abstract-name``; it
prints ``ready <pid>`` once it listens.
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
IDLE_EXIT_S = 60.0  # no client ever connected: the starter died before it could
LINGER_S = 30.0  # all clients gone but handles in flight: wait this long for their receivers


def _unlink(name: str) -> None:
    try:
        os.unlink(os.path.join("/dev/shm", name))
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        pass


def _alive(pid: int) -> bool:
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
    def __init__(self, address: str):
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
        self.ever_connected = False

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
        elif op == "Q":
            conn.send(json.dumps({"pid": os.getpid(), "clients": len(self.holds), "segments": sorted(self.count),
                                  "names": sorted(k[3:] for k in self.count if k.startswith("fs:")),
                                  "fds": len(self.fds), "inflight": len(self.inflight),
                                  "waiting": len(self.waiting)}).encode())
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

    def run(self) -> None:
        alone_since = None
        while True:
            if not self.ever_connected:
                timeout = IDLE_EXIT_S
            elif alone_since is not None:
                timeout = max(0.0, alone_since + LINGER_S - time.monotonic())
            else:
                timeout = None
            events = self.sel.select(timeout)
            if not events and (not self.ever_connected or alone_since is not None):
                break
            for key, _ in events:
                if key.fileobj is self.srv:
                    conn, _ = self.srv.accept()
                    self.holds[conn] = Counter()
                    self.sel.register(conn, selectors.EVENT_READ)
                    self.ever_connected = True
                    continue
                conn = key.fileobj
                try:
                    msg, fds, _, _ = socket.recv_fds(conn, 4096, 4)
                except OSError:
                    msg, fds = b"", []
                if not msg:
                    for fd in fds:
                        os.close(fd)
                    self._drop(conn)
                else:
                    self.handle(conn, msg, fds)
            if self.ever_connected and not self.holds:
                if not self.inflight:
                    break
                # a sender left before its receiver connected: keep its handles a while
                alone_since = alone_since or time.monotonic()
            else:
                alone_since = None
        self.shutdown()

    def shutdown(self) -> None:
        for key in list(self.count):
            if key.startswith("fs:"):
                _unlink(key[3:])
        for fd in self.fds.values():
            os.close(fd)
        self.srv.close()


def main(argv: list[str]) -> None:
    address = argv[1]
    if address.startswith("@"):
        address = "\0" + address[1:]
    # The clients decide when we go (all gone); SIGTTOU/SIGTTIN: a background process group of the
    # terminal's session may still write a traceback to the inherited stderr.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGTTOU, signal.SIGTTIN):
        signal.signal(sig, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:  # in-flight descriptors are held here
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    manager = Manager(address)  # listening before the starter hears "ready"
    # Fork so that the daemon is nobody's child: the starter reaps the parent at once and keeps no
    # process handle (and no zombie) around. Its own process group keeps the terminal's signals
    # (Ctrl-C, job control) away from it. It stays in its starter's session on purpose: Linux's
    # autogroup scheduler shares the CPU between sessions, and a daemon in a session of its own,
    # woken a few times per DataLoader batch, hands the CPU to other sessions at each wake-up
    # (measured on a busy 2-core machine: 2-worker epochs 13% slower than with the daemon in the
    # session of its clients).
    if os.fork():
        os._exit(0)
    try:
        os.setpgid(0, 0)
    except OSError:  # pragma: no cover - a session leader cannot: it has no terminal's signals anyway
        pass
    signal.signal(signal.SIGTERM, lambda *_: (manager.shutdown(), os._exit(0)))
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    sys.stdout.close()
    os.close(1)
    sweep_stale()
    manager.run()


if __name__ == "__main__":
    main(sys.argv)
