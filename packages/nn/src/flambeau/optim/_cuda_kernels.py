"""Fused CUDA updates of the optimizers: one launch per parameter group, not per parameter.

Note [Multi-tensor CUDA updates]
    The CPU kernels of ``_kernels`` update one parameter per call. On a GPU a launch costs about
    as much as updating a small parameter, so the updates of a group are gathered while the
    optimizer walks its parameters (:func:`add`, called by ``_kernels.launch`` for CUDA tensors)
    and run together when it is done (:func:`flush`): one launch per optimizer family, dtype and
    set of scalars (a step of Adam is one launch for the whole group).

    The launch passes a *table* of device addresses (parameter, gradient, up to three state
    buffers per row) and a list of chunks (row, first element): block ``c`` updates up to
    :data:`CHUNK` elements of row ``chunk_row[c]``, reaching its arrays through ``carray`` over
    the addresses. The arithmetic of each family is one element function (:data:`ELEMENTS`),
    written operation for operation as the CPU kernel of the same family (keep them in step: the
    CUDA tests compare the two), in the parameter's dtype (``sc`` holds the scalars in it).

    numba's simulator has no device addresses, so there (and only there) each parameter gets its
    own launch of the same element function (:func:`_launch_each`).

The table, the sizes and the chunks travel as one int64 array, uploaded with the scalars on the current
stream (asynchronous copies of small host arrays) and reused while a step's are the last step's
(:func:`_upload`, which keeps each slot's last copy only); nothing waits for the device. The kernel
launches through the driver directly, as tensor-core's kernels do (Note [Direct kernel launches] in
``flambeau._kernels.cuda._direct``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau import _backends
from flambeau.optim._state_memory import upload_memory

__all__ = ["CHUNK", "ELEMENTS", "add", "chunk_table", "flush", "is_cuda_param", "ptx_cases"]

CHUNK = 16384  # elements per block of the multi-tensor kernel
_BLOCK = 256
_NBUF = 3  # state buffers per row of the table
_NFLAG = 4  # boolean options per family (unused ones False)

cuda = None  # numba.cuda, bound on first use (Note [numba.cuda bound on first use] in tensor-core's _launch)


# --- the element functions: one per family, (i, p, g, b0, b1, b2, sc, f0, f1, f2, f3) ----------------
def _sgd(i, p, g, buf, _b1, _b2, sc, maximize, use_buf, first, nesterov):
    wd, momentum, one_minus_damp, neg_lr = sc[0], sc[1], sc[2], sc[3]
    gi = -g[i] if maximize else g[i]
    if wd != 0:
        gi = gi + wd * p[i]
    if use_buf:
        if first:
            b = gi
        else:
            b = buf[i] * momentum + one_minus_damp * gi
        buf[i] = b
        gi = gi + momentum * b if nesterov else b
    p[i] = p[i] + neg_lr * gi


def _adam(i, p, g, m, v, vmax, sc, maximize, decoupled, small_w1, amsgrad):
    wd, decay, w1, omw1, b2, omb2 = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
    bc2_sqrt, eps, neg_step = sc[6], sc[7], sc[8]
    gi = -g[i] if maximize else g[i]
    pi = p[i]
    if wd != 0:
        if decoupled:
            pi = pi * decay
        else:
            gi = gi + wd * pi
    mi = m[i]
    mi = mi + w1 * (gi - mi) if small_w1 else gi - (gi - mi) * omw1
    m[i] = mi
    vi = v[i] * b2 + omb2 * gi * gi
    v[i] = vi
    if amsgrad:
        vm = vmax[i]
        if vi > vm or vi != vi:
            vm = vi
        vmax[i] = vm
        vi = vm
    denom = math.sqrt(vi) / bc2_sqrt + eps
    p[i] = pi + neg_step * mi / denom


def _rmsprop(i, p, g, sq, gavg, buf, sc, small_oma, maximize, centered, use_buf):
    wd, alpha, oma, alpha_w, eps, momentum = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
    neg_lr = sc[6]
    gi = -g[i] if maximize else g[i]
    if wd != 0:
        gi = gi + wd * p[i]
    s = sq[i] * alpha + oma * gi * gi
    sq[i] = s
    if centered:
        ga = gavg[i]
        ga = ga + oma * (gi - ga) if small_oma else gi - (gi - ga) * alpha_w
        gavg[i] = ga
        avg = math.sqrt(s - ga * ga)
    else:
        avg = math.sqrt(s)
    avg = avg + eps
    if use_buf:
        b = buf[i] * momentum + gi / avg
        buf[i] = b
        p[i] = p[i] + neg_lr * b
    else:
        p[i] = p[i] + neg_lr * gi / avg


def _adagrad(i, p, g, ssum, _b1, _b2, sc, maximize, _f1, _f2, _f3):
    wd, eps, neg_clr = sc[0], sc[1], sc[2]
    gi = -g[i] if maximize else g[i]
    if wd != 0:
        gi = gi + wd * p[i]
    s = ssum[i] + gi * gi
    ssum[i] = s
    p[i] = p[i] + neg_clr * gi / (math.sqrt(s) + eps)


def _adadelta(i, p, g, sq, acc, _b2, sc, maximize, _f1, _f2, _f3):
    wd, rho, omr, eps, neg_lr = sc[0], sc[1], sc[2], sc[3], sc[4]
    gi = -g[i] if maximize else g[i]
    if wd != 0:
        gi = gi + wd * p[i]
    s = sq[i] * rho + omr * gi * gi
    sq[i] = s
    std = math.sqrt(s + eps)
    a = acc[i]
    delta = math.sqrt(a + eps) / std * gi
    acc[i] = a * rho + omr * delta * delta
    p[i] = p[i] + neg_lr * delta


def _adamax(i, p, g, m, u, _b2, sc, maximize, small_w1, _f2, _f3):
    wd, w1, omw1, b2, eps, neg_clr = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
    gi = -g[i] if maximize else g[i]
    if wd != 0:
        gi = gi + wd * p[i]
    mi = m[i]
    mi = mi + w1 * (gi - mi) if small_w1 else gi - (gi - mi) * omw1
    m[i] = mi
    ui = u[i] * b2
    ag = abs(gi) + eps
    if ag > ui or ag != ag:
        ui = ag
    u[i] = ui
    p[i] = p[i] + neg_clr * mi / ui


def _nadam(i, p, g, m, v, _b2, sc, maximize, decoupled, small_w1, _f3):
    wd, decay, w1, omw1, b2, omb2 = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
    bc2, eps, c_grad, c_avg = sc[6], sc[7], sc[8], sc[9]
    gi = -g[i] if maximize else g[i]
    pi = p[i]
    if wd != 0:
        if decoupled:
            pi = pi * decay
        else:
            gi = gi + wd * pi
    mi = m[i]
    mi = mi + w1 * (gi - mi) if small_w1 else gi - (gi - mi) * omw1
    m[i] = mi
    vi = v[i] * b2 + omb2 * gi * gi
    v[i] = vi
    denom = math.sqrt(vi / bc2) + eps
    pi = pi + c_grad * gi / denom
    p[i] = pi + c_avg * mi / denom


def _radam(i, p, g, m, v, _b2, sc, maximize, decoupled, small_w1, rectify):
    wd, decay, w1, omw1, b2, omb2 = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
    bc1, lr, bc2_sqrt, eps, rect, one = sc[6], sc[7], sc[8], sc[9], sc[10], sc[11]
    gi = -g[i] if maximize else g[i]
    pi = p[i]
    if wd != 0:
        if decoupled:
            pi = pi * decay
        else:
            gi = gi + wd * pi
    mi = m[i]
    mi = mi + w1 * (gi - mi) if small_w1 else gi - (gi - mi) * omw1
    m[i] = mi
    vi = v[i] * b2 + omb2 * gi * gi
    v[i] = vi
    upd = mi / bc1 * lr
    if rectify:
        adaptive = (one / (math.sqrt(vi) + eps)) * bc2_sqrt
        upd = upd * adaptive * rect
    p[i] = pi - upd


# family name (the CPU kernel's __name__) -> element function
ELEMENTS = {"sgd": _sgd, "adam": _adam, "rmsprop": _rmsprop, "adagrad": _adagrad, "adadelta": _adadelta,
            "adamax": _adamax, "nadam": _nadam, "radam": _radam}


# --- kernels -----------------------------------------------------------------------------------------
def _bind():
    global cuda
    if cuda is None:
        from numba import cuda as numba_cuda

        cuda = numba_cuda
    return cuda


@functools.cache
def _pointer_intrinsic():
    """``_ptr(address, like)``: the int64 device ``address`` as a pointer to ``like``'s dtype."""
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def _ptr(typingctx, address, like):
        rt = types.CPointer(like.dtype)
        sig = rt(types.int64, like)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(rt))

        return sig, codegen

    return _ptr


def _multi_py(elem):
    """The multi-tensor kernel over element function ``elem`` (Note [Multi-tensor CUDA updates]).

    ``table[r] = (param, grad, buf0, buf1, buf2)`` addresses (0 for an unused buffer), ``sizes[r]``
    elements; block ``c`` updates ``[chunk_start[c], chunk_start[c] + CHUNK)`` of row ``chunk_row[c]``.
    """
    _bind()
    from numba.cuda.np.numpy_support import carray

    ptr = _pointer_intrinsic()
    chunk = CHUNK

    def multi(table, sizes, chunk_row, chunk_start, sc, f0, f1, f2, f3):
        c = cuda.blockIdx.x
        r = chunk_row[c]
        n = sizes[r]
        p = carray(ptr(table[r, 0], sc), n)
        g = carray(ptr(table[r, 1], sc), n)
        b0 = carray(ptr(table[r, 2], sc), n)
        b1 = carray(ptr(table[r, 3], sc), n)
        b2 = carray(ptr(table[r, 4], sc), n)
        start = chunk_start[c]
        end = min(start + chunk, n)
        i = start + cuda.threadIdx.x
        while i < end:
            elem(i, p, g, b0, b1, b2, sc, f0, f1, f2, f3)
            i += cuda.blockDim.x

    return multi


def _each_py(elem):
    """One parameter's update over element function ``elem`` (the simulator's path)."""
    _bind()

    def each(p, g, b0, b1, b2, sc, f0, f1, f2, f3):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < p.shape[0]:
            elem(i, p, g, b0, b1, b2, sc, f0, f1, f2, f3)
            i += step

    return each


@functools.cache
def _element(family: str):
    return _bind().jit(device=True)(ELEMENTS[family])


@functools.cache
def _kernel(family: str, multi: bool):
    builder = _multi_py if multi else _each_py
    from flambeau._kernels.cuda._launch import direct  # launched as tensor-core's own kernels are

    return direct(_bind().jit(builder(_element(family))))


# --- gathering and launching ---------------------------------------------------------------------------
_pending: dict = {}  # (family, dtype, sc bytes, flags) -> [sc, flags, rows]; rows: (p, g, bufs) arrays
_NO_FLAGS = [(False,) * (_NFLAG - n) for n in range(_NFLAG + 1)]  # the unused options after n given ones
_NO_BUFS = [(None,) * (_NBUF - n) for n in range(_NBUF + 1)]  # likewise the unused buffers


_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_CHECKS: list = []  # the CUDA backend's is_device_array and is_c_contiguous, looked up once (every parameter
#                     and every state tensor of a step is checked)


def is_cuda_param(arr) -> bool:
    """Whether backend array ``arr`` is a C-contiguous float32/float64 CUDA array a fused update can write."""
    if not _CHECKS:
        be = _backends.backend("cuda")
        _CHECKS.extend((be.is_device_array, be.is_c_contiguous))
    is_device_array, is_c_contiguous = _CHECKS
    return is_device_array(arr) and arr.dtype in _FLOATS and is_c_contiguous(arr)


_last_add: list = [None, None, None, None]  # (sc, flags, family, its entry of _pending) of the last add


def add(family: str, p, g, bufs: tuple, sc: np.ndarray, flags: tuple) -> None:
    """Queue the update of one CUDA parameter (device arrays ``p``, ``g``, ``bufs``; None for unused
    buffers) until :func:`flush`; ``sc`` the host array of scalars, ``flags`` the family's options.

    The parameters of a group come one after the other with the same ``sc`` array (the optimizers pack
    the scalars once per dtype and step) and flags: their entry is the last one's, without working out
    the key again; :func:`flush` forgets it."""
    last = _last_add
    if sc is last[0] and flags == last[1] and family == last[2]:
        entry = last[3]
    else:
        full = tuple([bool(f) for f in flags]) + _NO_FLAGS[len(flags)]
        key = (family, p.dtype, sc.tobytes(), full)
        entry = _pending.get(key)
        if entry is None:
            entry = _pending[key] = [sc, full, []]
        last[:] = sc, flags, family, entry
    entry[2].append((p, g, bufs + _NO_BUFS[len(bufs)]))


def flush() -> None:
    """Launch every queued update: one kernel per (family, dtype, scalars, options)."""
    if not _pending:
        return
    be = _backends.backend("cuda")
    stream = _stream()
    items = list(_pending.items())
    _pending.clear()
    _last_add[:] = None, None, None, None
    for (family, _, _, _), (sc, flags, rows) in items:
        dsc = _device_scalars(sc)
        if be.is_simulator():
            _launch_each(family, rows, dsc, flags, stream)
        else:
            _launch_multi(family, rows, dsc, flags, stream, be)


def _stream():
    from flambeau.cuda import current_stream

    return current_stream().numba


_UPLOADS: dict = {}  # (device, stream, dtype, shape) -> (bytes, device copy): each slot's last upload
_MAX_UPLOADS = 32


def _upload(host: np.ndarray):
    """A device copy of small host array ``host``, reused while a slot's bytes come again: a step's scalars
    and parameter tables (addresses, sizes, chunks) are usually the last step's, and each copy costs a
    driver call. The copies are never written.

    A slot (device, stream, dtype and shape) keeps its last copy only. A table holds the gradients'
    addresses, which change whenever the gradients are allocated anew; kept by content, the old tables
    stayed allocated, one more each step, and the cache's blocks never settled: the caching allocator then
    made a raw device allocation now and then in the middle of training. Replacing a slot's copy frees the
    old one at once, safely: it goes back to its stream's pool, and a kernel queued before reads it before
    any later allocation on that stream can write it (Note [One pool per stream] in flambeau-cuda-alloc). The
    copies come from a memory pool of their own (Note [Uploaded tables in a pool of their own])."""
    from flambeau.cuda import current_stream

    # by stream too: a copy queued on one stream must not be read by a kernel on another (nothing orders them)
    stream = current_stream()
    key = (stream.device_index, stream.cuda_stream, host.dtype.str, host.shape)
    data = host.tobytes()
    entry = _UPLOADS.get(key)
    if entry is not None and entry[0] == data:
        return entry[1]
    if entry is None and len(_UPLOADS) >= _MAX_UPLOADS:
        _UPLOADS.clear()
    with upload_memory(stream.device_index):  # (Note [Uploaded tables in a pool of their own])
        dev = _backends.backend("cuda").from_numpy(host)
    _UPLOADS[key] = (data, dev)
    return dev


def _device_scalars(sc: np.ndarray):
    return _upload(sc)


def _launch_each(family, rows, sc, flags, stream) -> None:
    be = _backends.backend("cuda")
    k = _kernel(family, False)
    dummy = be.empty((1,), sc.dtype)
    for p, g, bufs in rows:
        n = p.size
        grid = min(2, (n + 15) // 16) if be.is_simulator() else min((n + _BLOCK - 1) // _BLOCK, 4096)
        arrays = [be.flat_view(a) if a is not None else dummy for a in (p, g, *bufs)]
        k[grid, 16 if be.is_simulator() else _BLOCK, stream](*arrays, sc, *flags)


def _launch_multi(family, rows, sc, flags, stream, be) -> None:
    # Python lists, made one array at the end: numpy's per-element stores cost more than the lists' appends
    ptr = be.data_ptr
    table, sizes = [], []
    for p, g, bufs in rows:
        sizes.append(p.size)
        table += [ptr(p), ptr(g), *[0 if a is None else ptr(a) for a in bufs]]
    arrays, chunks = chunk_table(table, sizes, 2 + _NBUF, be)
    if chunks:
        _kernel(family, True)[chunks, _BLOCK, stream](*arrays, sc, *flags)


def chunk_table(table: list, sizes: list, width: int, be) -> tuple:
    """The address table of a multi-tensor launch (Note [Multi-tensor CUDA updates]) on the device, in one upload:
    ``((table, sizes, chunk_row, chunk_start), chunks)`` for rows of ``width`` addresses (``table``, row after row)
    and ``sizes`` elements, a chunk of up to :data:`CHUNK` elements per block (none for an empty row).

    The sizes and chunks of a group are the same every step (:func:`_chunk_layout` works them out once), and so,
    mostly, are the addresses: the upload is then the last one, and so are its four views (:data:`_VIEWS`)."""
    rows = len(sizes)
    layout, chunks = _chunk_layout(tuple(sizes))
    if not chunks:
        return (), 0
    packed = _upload(np.concatenate((np.array(table, np.int64), layout)))
    key = (rows, width, chunks)
    views = _VIEWS.get(key)
    if views is not None and views[0] is packed:
        return views[1], chunks
    after = rows * (width + 1)
    arrays = (be.as_strided(packed, (rows, width), (width, 1), 0), be.as_strided(packed, (rows,), (1,), rows * width),
              be.as_strided(packed, (chunks,), (1,), after), be.as_strided(packed, (chunks,), (1,), after + chunks))
    if len(_VIEWS) >= _MAX_UPLOADS:
        _VIEWS.clear()
    _VIEWS[key] = (packed, arrays)
    return arrays, chunks


# (rows, width, chunks) -> (the last table uploaded with that geometry, its four views): one per geometry, so
# that a table replaced by new bytes is let go at the next upload of its kind, as _upload lets go of its copy
_VIEWS: dict = {}


@functools.lru_cache(maxsize=64)
def _chunk_layout(sizes: tuple) -> tuple[np.ndarray, int]:
    """``(layout, chunks)``: the int64 array of ``sizes``, then each chunk's row, then each chunk's first element
    (read-only), and the number of chunks, of rows of ``sizes`` elements (:func:`chunk_table`)."""
    chunk_row, chunk_start = [], []
    for r, n in enumerate(sizes):
        if n <= CHUNK:  # (most rows: one chunk)
            if n:
                chunk_row.append(r)
                chunk_start.append(0)
            continue
        starts = range(0, n, CHUNK)  # (a large row: its chunks in two list operations, not a loop)
        chunk_start += starts
        chunk_row += [r] * len(starts)
    layout = np.array([*sizes, *chunk_row, *chunk_start], np.int64)
    layout.flags.writeable = False
    return layout, len(chunk_row)


def ptx_cases() -> list:
    """``(label, python_function, signature)`` of every family's two kernels, float32 and float64."""
    from numba import types

    _bind()
    i64 = types.int64
    b = types.boolean
    cases = []
    for family in ELEMENTS:
        for t in (types.float32, types.float64):
            arr = types.Array(t, 1, "C")
            vec = types.Array(i64, 1, "C")
            cases.append((f"optim:{family}:multi:{t}", _multi_py(_element(family)),
                          (types.Array(i64, 2, "C"), vec, vec, vec, arr, b, b, b, b)))
            cases.append((f"optim:{family}:each:{t}", _each_py(_element(family)),
                          (arr, arr, arr, arr, arr, arr, b, b, b, b)))
    return cases
