"""The C core of the caching allocator, built with cffi on first use.

``_ccore.c`` implements the interface of :class:`~flambeau.cuda_alloc._core.PyCore` (see
Note [Core interface] there) with the same policy. The package ships only the C source and
stays a pure-Python wheel: :func:`load_core` compiles it once per source version, Python
version and platform into a cache directory (``FLAMBEAU_CUDA_ALLOC_CACHE``, else
``$XDG_CACHE_HOME/flambeau/cuda_alloc`` or ``~/.cache/flambeau/cuda_alloc``; a directory of
the temporary one when that is not writable), with ``$CC`` or the C compiler Python was built
with, and loads it from there afterwards. Without cffi, a C
compiler or Python's headers it returns ``None`` and the allocator uses the Python core;
:data:`load_error` then says why.

A malloc/free pair crosses into C once each way, which is what makes the allocator's
overhead per pair a fraction of the Python core's.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import os
import pathlib
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import threading
from typing import Any

from ._stats import FastCounters

__all__ = ["CCore", "load_core", "load_error"]

SOURCE = pathlib.Path(__file__).with_name("_ccore.c")
CACHE_VAR = "FLAMBEAU_CUDA_ALLOC_CACHE"
CDEF = """
typedef struct ca_core ca_core;
typedef struct {
    uint64_t segment, address, size, requested;
    int64_t stamp;
    int32_t pool, state;
} ca_record;
ca_core *ca_new(void);
void ca_delete(ca_core *);
int ca_new_pool(ca_core *, int small);
void ca_set_max_split(ca_core *, uint64_t size);
void ca_set_gc_clock(ca_core *, int64_t tick);
uint64_t ca_malloc(ca_core *, int pool, uint64_t rounded, uint64_t requested);
uint64_t ca_malloc_segment(ca_core *, int pool, uint64_t address, uint64_t size, uint64_t rounded,
                           uint64_t requested);
int ca_free(ca_core *, uint64_t address);
int ca_mark_pending(ca_core *, uint64_t address);
int ca_release_pending(ca_core *, uint64_t address);
int ca_block_info(ca_core *, uint64_t address, int32_t *pool, uint64_t *size, int32_t *state);
int64_t ca_remove_segment(ca_core *, uint64_t address);
size_t ca_blocks(ca_core *, ca_record *out, size_t cap);
size_t ca_free_list(ca_core *, int pool, uint64_t *sizes, uint64_t *addresses, size_t cap);
void ca_counters(ca_core *, int64_t *out);
int64_t ca_current(ca_core *, int i);
int64_t ca_peak(ca_core *, int i);
void ca_reset_peak(ca_core *);
void ca_reset_accumulated(ca_core *);
"""

#: Why the C core could not be loaded (an exception), or None.
load_error: BaseException | None = None
_build_lock = threading.Lock()


def cache_dir() -> pathlib.Path:
    """Where the compiled core is kept."""
    if os.environ.get(CACHE_VAR):
        return pathlib.Path(os.environ[CACHE_VAR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "flambeau" / "cuda_alloc"


def _module_name(source: str) -> str:
    import cffi

    tag = "\0".join([source, CDEF, sys.version, cffi.__version__, sysconfig.get_platform()])
    return "_flambeau_cuda_alloc_core_" + hashlib.sha256(tag.encode()).hexdigest()[:16]


def _compile(name: str, source: str, target: pathlib.Path) -> None:
    """Generate the cffi wrapper of ``source`` and compile it into ``target``."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source(name, source)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        c_file = os.path.join(tmp, name + ".c")
        with contextlib.redirect_stdout(io.StringIO()):  # cffi says "generating ..."
            ffi.emit_c_code(c_file)
        out = os.path.join(tmp, target.name)
        cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
        command = [*cc, "-O2", "-fPIC", "-shared", "-pthread", "-I" + sysconfig.get_paths()["include"],
                   c_file, "-o", out]
        if sys.platform == "darwin":
            command[-2:-2] = ["-undefined", "dynamic_lookup"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"compiling the C core failed ({' '.join(command)}):\n{result.stderr[-2000:]}")
        os.replace(out, target)  # atomic: a process loading it sees all of it or nothing


def _library() -> tuple[Any, Any]:
    """The compiled module's ``(ffi, lib)``, built on first use."""
    if sys.platform == "win32":
        raise RuntimeError("the C core is built only on POSIX systems")
    source = SOURCE.read_text()
    name = _module_name(source)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = cache_dir() / (name + suffix)
    if not target.exists():
        try:
            _compile(name, source, target)
        except OSError:  # an unwritable cache (a read-only home, say): a private temporary one
            target = pathlib.Path(tempfile.gettempdir()) / f"flambeau-cuda-alloc-{os.getuid()}" / target.name
            if not target.exists():
                _compile(name, source, target)
    spec = importlib.util.spec_from_file_location(name, target)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {target}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ffi, module.lib


_loaded: tuple[Any, Any] | None = None


def load_core() -> CCore | None:
    """A new :class:`CCore`, or ``None`` (and :data:`load_error` set) when it cannot be built.

    The build is tried once per process.
    """
    global load_error, _loaded
    if _loaded is None and load_error is None:
        with _build_lock:
            if _loaded is None and load_error is None:
                try:
                    _loaded = _library()
                except Exception as exc:  # noqa: BLE001 - any failure means: use the Python core
                    load_error = exc
    if _loaded is None:
        return None
    return CCore(*_loaded)


class CCore:
    """The blocks of one device, in C; see Note [Core interface] in ``_core.py``."""

    name = "c"

    def __init__(self, ffi: Any, lib: Any) -> None:
        ptr = lib.ca_new()
        if ptr == ffi.NULL:
            raise MemoryError("cannot allocate the allocator's C core")
        self._ffi, self._lib = ffi, lib
        self._ptr = ffi.gc(ptr, lib.ca_delete)
        # The hot path: one C call each, with no Python frame of ours in between.
        self.malloc = functools.partial(lib.ca_malloc, self._ptr)
        self.free = functools.partial(lib.ca_free, self._ptr)

    def new_pool(self, small: bool) -> int:
        index = self._lib.ca_new_pool(self._ptr, int(small))
        if index < 0:
            raise MemoryError("cannot allocate a pool in the allocator's C core")
        return index

    def set_max_split(self, size: int) -> None:
        self._lib.ca_set_max_split(self._ptr, size)

    def set_gc_clock(self, tick: int) -> None:
        self._lib.ca_set_gc_clock(self._ptr, tick)

    def malloc_segment(self, pool: int, address: int, size: int, rounded: int, requested: int) -> int:
        out = self._lib.ca_malloc_segment(self._ptr, pool, address, size, rounded, requested)
        if not out:
            raise MemoryError(f"the allocator's C core cannot record the segment at {address:#x} "
                              "(out of host memory, or a null address from the backend)")
        return out

    def mark_pending(self, address: int) -> int:
        return self._lib.ca_mark_pending(self._ptr, address)

    def release_pending(self, address: int) -> int:
        rc = self._lib.ca_release_pending(self._ptr, address)
        if rc == -2:
            raise MemoryError("cannot allocate host memory for the allocator's C core")
        return rc

    def block_info(self, address: int) -> tuple[int, int, int] | None:
        new = self._ffi.new
        pool, size, state = new("int32_t *"), new("uint64_t *"), new("int32_t *")
        if self._lib.ca_block_info(self._ptr, address, pool, size, state):
            return None
        return pool[0], size[0], state[0]

    def remove_segment(self, address: int) -> int:
        return self._lib.ca_remove_segment(self._ptr, address)

    def blocks(self) -> list[tuple[int, int, int, int, int, int, int]]:
        cap = 0
        while True:
            out = self._ffi.new("ca_record[]", max(cap, 1))
            n = self._lib.ca_blocks(self._ptr, out, cap)
            if n <= cap:
                break
            cap = n + 16  # blocks may appear meanwhile
        records = [(r.segment, r.address, r.size, r.requested, r.pool, r.state, r.stamp) for r in out[0:n]]
        records.sort(key=lambda r: (r[0], r[1]))
        return records

    def free_list(self, pool: int) -> list[tuple[int, int]]:
        cap = 0
        while True:
            sizes = self._ffi.new("uint64_t[]", max(cap, 1))
            addresses = self._ffi.new("uint64_t[]", max(cap, 1))
            n = self._lib.ca_free_list(self._ptr, pool, sizes, addresses, cap)
            if n <= cap:
                return list(zip(sizes[0:n], addresses[0:n]))
            cap = n + 16

    def counters(self) -> FastCounters:
        """A copy of the core's counters."""
        values = self._ffi.new("int64_t[96]")
        self._lib.ca_counters(self._ptr, values)
        out = FastCounters()
        out.cur[:] = values[0:21]
        out.tot[:] = values[21:42]
        out.peak[:] = values[42:63]
        out.off[:] = values[63:84]
        out.active_peak[:] = values[84:90]
        out.active_off[:] = values[90:96]
        return out

    def current(self, i: int) -> int:
        return self._lib.ca_current(self._ptr, i)

    def peak(self, i: int) -> int:
        return self._lib.ca_peak(self._ptr, i)

    def reset_peak(self) -> None:
        self._lib.ca_reset_peak(self._ptr)

    def reset_accumulated(self) -> None:
        self._lib.ca_reset_accumulated(self._ptr)
