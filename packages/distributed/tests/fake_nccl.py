"""A fake libnccl for the NCCL backend's tests without a GPU: every call is recorded and succeeds at once.

:func:`install` puts a :class:`FakeNccl` behind the real cffi declarations of
``flambeau/distributed/_nccl.py`` (as ``tools/host_overhead.py`` does for cuBLAS and cuDNN), so the
backend's code runs unchanged up to the library call. Nothing is computed: the tests check the
calls (function, pointers, counts, dtype and op codes, roots and peers, stream handles).
"""

from __future__ import annotations

import cffi

from flambeau.distributed import _nccl

UNIQUE_ID = bytes(range(7, 7 + 128))  # what ncclGetUniqueId writes on the rank that makes the id


class FakeNccl:
    """Stands in for ``ffi.dlopen(libnccl)``. ``calls`` holds ``(name, *args)`` with pointers as ints."""

    def __init__(self, ffi):
        self.ffi = ffi
        self.calls: list[tuple] = []
        self.async_error = 0  # what ncclCommGetAsyncError reports
        self.next_comm = 0x1000
        self._strings: dict[int, object] = {}

    def _plain(self, arg):
        if isinstance(arg, self.ffi.CData):
            kind = self.ffi.typeof(arg).kind
            if kind == "pointer":
                return int(self.ffi.cast("uintptr_t", arg))
            if kind == "struct":
                return bytes(self.ffi.buffer(self.ffi.addressof(arg)))
        return arg

    def _record(self, name, *args):
        self.calls.append((name, *(self._plain(a) for a in args)))
        return 0

    def named(self, name: str) -> list[tuple]:
        return [c for c in self.calls if c[0] == name]

    # --- setup and errors ------------------------------------------------------------------
    def ncclGetVersion(self, out):  # noqa: N802 - NCCL's names
        out[0] = 22304
        return 0

    def ncclGetErrorString(self, status):  # noqa: N802
        text = self._strings.get(status)
        if text is None:
            text = self._strings[status] = self.ffi.new("char[]", f"fake NCCL error {status}".encode())
        return text

    def ncclGetUniqueId(self, uid):  # noqa: N802
        self.ffi.memmove(uid, UNIQUE_ID, 128)
        return self._record("ncclGetUniqueId")

    def ncclCommInitRank(self, out, nranks, uid, rank):  # noqa: N802
        self.next_comm += 0x100
        out[0] = self.ffi.cast("ncclComm_t", self.next_comm)
        return self._record("ncclCommInitRank", self.next_comm, nranks, uid, rank)

    def ncclCommGetAsyncError(self, comm, out):  # noqa: N802
        out[0] = self.async_error
        return 0

    def __getattr__(self, name):
        if not name.startswith("nccl"):
            raise AttributeError(name)

        def call(*args):
            return self._record(name, *args)
        return call


def install() -> FakeNccl:
    """Make :mod:`flambeau.distributed._nccl` use a new :class:`FakeNccl`; returns it."""
    ffi = cffi.FFI()
    ffi.cdef(_nccl._CDEF)
    lib = FakeNccl(ffi)
    _nccl._state.clear()
    _nccl._state["ffi"], _nccl._state["lib"] = ffi, lib
    return lib
