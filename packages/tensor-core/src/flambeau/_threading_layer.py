"""Make numba's parallel kernels run on a fork-safe threading layer, wherever flambeau is installed.

Note [numba's threading layer]: numba runs ``parallel=True`` kernels on the first threading layer
it can load, in the order TBB, OpenMP, workqueue. Its GNU OpenMP layer is not fork-safe: once the
parent has run a parallel kernel, numba aborts any forked child ("Terminating: fork() called from a
process already using GNU OpenMP") -- and DataLoader workers, Hogwild trainers and
``multiprocessing`` with the default start method on Linux are forked children. GNU OpenMP's idle
threads also spin on the cores after every parallel kernel, taking them from the main thread and
from BLAS: every model trained about twice as slow on 2 cores as with TBB.

tensor-core therefore depends on the ``tbb`` wheel, but that wheel puts ``libtbb.so.12`` into the
environment's ``lib/`` folder (``<venv>/lib``, ``~/.local/lib``, ``/usr/local/lib``), which the
dynamic loader does not search, so numba's TBB layer (``tbbpool``, linked against
``libtbb.so.12``) fails to load in a plain virtual environment and numba silently falls back to
OpenMP. Loading the library by its full path first, with ``RTLD_GLOBAL``, lets the loader resolve
``tbbpool``'s dependency on that soname to the copy already in the process.

Where no TBB can be had (platforms without a ``tbb`` wheel), numba is asked for its ``forksafe``
layer: on Linux that is workqueue, which is fork-safe at the price of not being thread-safe (two
Python threads must not run parallel kernels at the same moment; docs/differences.rst). A layer the
user chose with ``NUMBA_THREADING_LAYER`` is left alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["FORK_SAFE_LAYERS", "prefer_fork_safe_threading_layer", "tbb_library"]

# numba's names for its layers that survive fork() in a process that already ran parallel kernels
# (OpenMP too on macOS and Windows, whose OpenMP runtimes are not GNU's).
FORK_SAFE_LAYERS = ("tbb", "workqueue") if sys.platform.startswith("linux") else ("tbb", "workqueue", "omp")

# The file numba's TBB layer links against, per platform (the names numba itself opens).
_TBB_FILE = {"linux": "libtbb.so.12", "darwin": "libtbb.12.dylib", "win32": "tbb12.dll"}

_state: dict = {"tbb": None}  # the path of the libtbb flambeau loaded, once it did


def _candidate_dirs() -> list[str]:
    """Folders where pip puts the ``tbb`` wheel's shared library: the environment's, then the user's."""
    import site
    import sysconfig

    lib = "Library/bin" if sys.platform == "win32" else "lib"
    dirs = [os.path.join(sys.prefix, lib)]
    user_base = getattr(site, "USER_BASE", None) or site.getuserbase()
    dirs.append(os.path.join(user_base, lib))
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        dirs.append(libdir)
    return dirs


def _find_tbb(name: str) -> str | None:
    """Full path of ``name`` from the ``tbb`` distribution, or None where it is not installed."""
    for folder in _candidate_dirs():
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    # Any other layout (a --target or --prefix install): ask the distribution's record of its files.
    try:
        from importlib import metadata

        files = metadata.distribution("tbb").files or []
    except Exception:  # not installed, or installed without a record
        return None
    for file in files:
        if file.name == name:
            path = str(file.locate())
            if os.path.isfile(path):
                return os.path.realpath(path)
    return None


def tbb_library() -> str | None:
    """The path of the TBB library flambeau loaded for numba, or None if it found none."""
    return _state["tbb"]


def _load_tbb() -> str | None:
    name = _TBB_FILE.get(sys.platform)
    path = _find_tbb(name) if name else None
    if path is None:
        return None
    try:
        if sys.platform == "win32":
            os.add_dll_directory(os.path.dirname(path))
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:  # a broken or foreign-architecture file: numba picks another layer below
        return None
    _state["tbb"] = path
    return path


def _warn_if_started_unsafe() -> None:
    """Warn when numba started its threads before flambeau was imported, on a layer that aborts forks.

    ``numba.set_num_threads`` or any parallel kernel run before ``import flambeau`` fixes the layer
    for the life of the process; flambeau can no longer choose it.
    """
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is None or not getattr(parallel, "_is_initialized", False):
        return
    import numba

    layer = numba.threading_layer()
    if layer not in FORK_SAFE_LAYERS:
        import warnings

        warnings.warn(f"numba's threads were started on its {layer!r} threading layer before flambeau was "
                      "imported: forked children (DataLoader workers, Hogwild) that run flambeau's CPU kernels "
                      "will abort. Import flambeau before starting numba's threads, or set "
                      "NUMBA_THREADING_LAYER=tbb.", RuntimeWarning, stacklevel=4)


def prefer_fork_safe_threading_layer() -> None:
    """Load TBB for numba and ask numba for a fork-safe layer (Note [numba's threading layer]).

    Cheap (one ``dlopen``, about 2 ms), called once by ``import flambeau`` before any parallel
    kernel has run, and it does not import numba. numba's own ``forksafe`` choice is TBB, then
    workqueue on Linux (GNU OpenMP is the unsafe one), then OpenMP elsewhere (Intel's and LLVM's
    OpenMP are fork-safe). It is set through the environment, as numba reads it, so that child
    processes choose the same way; a layer the user named is kept.
    """
    _load_tbb()  # harmless for every choice, and what makes "tbb" loadable at all
    _warn_if_started_unsafe()
    if os.environ.get("NUMBA_THREADING_LAYER", "default").lower() != "default":
        return  # the user's (or a parent flambeau's) choice
    os.environ["NUMBA_THREADING_LAYER"] = "forksafe"
    numba_config = sys.modules.get("numba.core.config")
    if numba_config is not None:  # numba came first: it re-reads its environment only when compiling
        numba_config.THREADING_LAYER = "forksafe"
