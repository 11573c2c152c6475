"""Work-arounds for released numba-cuda versions that break in environments users really have.

Note [numba-cuda and numpy 2.5]
    numba-cuda 0.30 registers ``np.row_stack`` when it first builds its CUDA target (the module
    ``numba.cuda.np.arrayobj``, imported by the first kernel compilation). numpy 2.5 removed that alias
    of ``np.vstack`` (deprecated since 2.0), and numba 0.68 accepts numpy up to 2.5, so a plain install
    can pair them: then every kernel launch fails with ``AttributeError: module 'numpy' has no attribute
    'row_stack'`` (seen on the H100 image of 2026-11, numpy 2.5.2 with numba-cuda 0.30.4). flambeau
    imports that module once, before the first compilation, with the alias put back for the duration of
    the import and removed afterwards, so numpy looks as it did to everyone else.

Note [Kernels numba-cuda cannot cache]
    flambeau compiles its kernels with numba's on-disk cache (``cache=True``), so a process compiles a
    kernel only the first time any process on the machine needs it. numba-cuda 0.30 says every kernel
    can be cached, but a kernel whose code links extra files (its float16 intrinsics do) cannot be
    pickled, and saving it raises ``RuntimeError: Cannot pickle CUDACodeLibrary with linking files``
    after a successful compilation, so the launch fails (seen on the H100: ``nansum`` of float16).
    flambeau tells the cache such kernels are not cachable; they are compiled once per process.

Note [Cache entries named by their key]
    numba's on-disk cache keeps one index file per Python function (its signatures -> data files) and
    names a new entry's data file by the first number the index it just read leaves free. Two processes
    compiling the same function at once (pytest workers, data-parallel ranks on one machine) can both
    read the index before either writes it, both take number 1, and the last index written need not
    belong to the last data file written: the index then maps one signature to the other's compiled
    kernel, and every later process loads and runs the wrong kernel (seen on the H100 with 14 test
    workers: ``complex`` of float32 returned NaN, because flambeau's kernel templates are closures, one
    index file for every operator of a template). flambeau's kernels name each data file by a hash of its
    key instead, and write the data before the index, so an index entry can only point at its own
    kernel; a race now loses an entry at worst, which costs one compilation. Their index has a name of its
    own (``.keyed.nbi``), so indexes that numba's numbering may have crossed before are not read. (flambeau's
    CPU kernels keep numba's scheme: one function per index and rarely compiled by two processes at once.)
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

__all__ = ["prepare_numba_cuda", "keyed_cache_entries"]


def prepare_numba_cuda() -> None:
    """Load numba-cuda's CUDA target under this numpy and keep uncachable kernels out of its cache
    (Notes [numba-cuda and numpy 2.5] and [Kernels numba-cuda cannot cache])."""
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
        try:
            import numba.cuda.np.arrayobj  # noqa: F401 - the import is the point
        finally:
            del np.row_stack
    _skip_uncachable_kernels()


def _skip_uncachable_kernels() -> None:
    try:
        from numba.cuda.dispatcher import CUDACacheImpl
    except ImportError:  # another numba-cuda layout: nothing to correct
        return
    check = CUDACacheImpl.check_cachable
    if getattr(check, "_flambeau", False):
        return

    def check_cachable(self, kernel):
        library = getattr(kernel, "_codelibrary", None)
        linked = set(getattr(library, "_linking_files", ()) or ())
        if linked and not _only_the_runtime(linked):
            return False
        return check(self, kernel)

    check_cachable._flambeau = True
    CUDACacheImpl.check_cachable = check_cachable


def _only_the_runtime(linked: set) -> bool:
    """Whether the only linked file is numba's runtime library, which numba-cuda does pickle."""
    try:
        from numba.cuda.codegen import NRT_LIBRARY
    except ImportError:
        return False
    return linked == {NRT_LIBRARY}


def keyed_cache_entries(dispatcher):
    """``dispatcher`` (a ``numba.cuda.jit(cache=True)`` kernel) with its cache entries named by their keys
    (Note [Cache entries named by their key]); returned unchanged where numba-cuda's layout differs."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    needed = ("_data_name_pattern", "_save_data", "_load_index", "_save_index", "_index_path")
    if cache_file is not None and all(hasattr(cache_file, name) for name in needed) \
            and not getattr(cache_file, "_flambeau_keyed", False):
        cache_file.__class__ = _keyed(type(cache_file))
        # an index of its own: one written by numba's numbering (maybe crossed) is never read again
        cache_file._index_path = cache_file._index_path[:-len(".nbi")] + ".keyed.nbi"
    return dispatcher


@functools.cache
def _keyed(base: type) -> type:
    class KeyedIndexDataCacheFile(base):
        """numba's index and data files, each data file named by a hash of its entry's key."""

        _flambeau_keyed = True

        def save(self, key, data):
            digest = hashlib.sha256(repr(key).encode()).hexdigest()[:24]
            name = self._data_name_pattern.replace("{number:d}", digest)
            self._save_data(name, data)  # first: an index entry never names a file not yet written
            overloads = self._load_index()
            if overloads.get(key) != name:
                overloads[key] = name
                self._save_index(overloads)

    return KeyedIndexDataCacheFile
