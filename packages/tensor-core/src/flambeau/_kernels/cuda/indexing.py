"""CUDA kernels of the indexing operators (conventions: ``flambeau._ops.indexing``'s docstring; the CPU
kernels are ``flambeau._kernels.cpu.indexing``).

Three kernel templates do nearly everything:

- :func:`_index_py`, the *indexed copy*: over a domain shape, ``dst[a] = src[b]`` (or an atomic
  ``dst[a] += alpha * src[b]`` / max / min), where ``a`` and ``b`` are strided offsets of the domain
  coordinate and one side (``to_dst``) also gets ``sum_k idx_k * dstride_k`` from ``K`` index arrays.
  gather, index_select, take and advanced indexing read through the index (``to_dst`` False); scatter,
  scatter_add, index_add/copy/fill, put and index_put write through it. Copies move bits (every dtype
  as the unsigned integer of its size: one compilation per item size); accumulation uses
  ``cuda.atomic.add`` on float32/float64/int32/int64 and a widened copy (float32 / int64) for the other
  dtypes, so float results may differ in the last bits from run to run, as torch's.
- :func:`_reduce_py`, the deterministic scatter_reduce (sum/prod/mean/amax/amin, and scatter's
  ``reduce='multiply'``): one thread per output element *pulls* every source entry of its index line
  that targets it, so no atomics and a fixed order, at O(L) work per output element (L the length of
  the index along ``dim``). It serves ``prod`` always (there is no atomic multiply) and the other
  reductions while the output's extent along ``dim`` is at most :data:`PULL_MAX_SIZE`; beyond that they
  use atomics (add, max, min; mean divides by atomic counts afterwards).
- :func:`_where_py`: ``out = mask ? value : a`` (masked_fill, and ``t[mask] = v`` without a sync).

The data-dependent shapes (nonzero, masked_select, boolean-mask indexing) count the True entries per
chunk (:func:`_chunks_py`), scan the counts on the device (:func:`_scan_py`, one block) and walk the
chunks again to write; reading the total count is their ONE host synchronisation.
masked_scatter needs no count on the host: a mask with more True entries than ``source`` holds is
reported through the error flag.

Note [Device-side index checks]: every index read on the device is checked against its bound there
(negative indices wrap where torch wraps them: advanced indexing, take, put). A bad one is skipped
(nothing is read or written through it) and recorded in the error flag (Note [Device-side errors] in
``flambeau.cuda._sync``): the next ``.item()`` / ``.cpu()`` raises naming the index and the size. The
fronts do no host-side bound checks for CUDA tensors.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._determinism import alert_not_deterministic, deterministic
from flambeau._dtype import from_numpy_dtype, np_name
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import (
    ERR_INDEX,
    be,
    bind_numba_cuda,
    c_elem_strides,
    elem_strides,
    error_flag,
    is_array,
    jit,
    launch_1d,
    sim,
    stream,
    strides_for,
)
from flambeau._kernels.cuda.bfloat16 import via_float32
from flambeau._kernels.cuda.core import cast_to, contiguous, copy_into
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._ops._registry import kernel
from flambeau._size import broadcast_shapes

__all__ = ["masked_fill_inplace", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_ATOMIC = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))
_INT64 = np.dtype(np.int64)
SCAN_BLOCK = 256  # threads of the one-block scan (a power of two)


def _chunk() -> int:
    """Elements per thread of the counting and compaction kernels."""
    return 4 if sim() else 64


# --- templates ------------------------------------------------------------------------------------
@functools.cache
def _decode():
    """The offsets of a C-order position under three stride tuples, a device function (``_index_math``)."""
    return index_device("offsets3")


def _store_set(dst, o, v, alpha):
    dst[o] = v


def _store_add_py(ct):
    bind_numba_cuda(globals())

    def store_add(dst, o, v, alpha):
        cuda.atomic.add(dst, o, ct(alpha * v))

    return store_add


def _store_max(dst, o, v, alpha):
    # numba's atomic max keeps a NaN already stored but ignores a NaN ``v``: store that one plainly (a CAS
    # racing with it fails on the changed bits, rereads the NaN and stops), so NaN propagates as in torch
    if v != v:
        dst[o] = v
    else:
        cuda.atomic.max(dst, o, v)


def _store_min(dst, o, v, alpha):
    if v != v:
        dst[o] = v
    else:
        cuda.atomic.min(dst, o, v)


@functools.cache
def _store(mode: str, dtype: str):
    """The device function writing one element of the indexed copy: ``mode`` "set" (a plain store) or the
    atomic "add" (of ``alpha * v``), "max" or "min"."""
    bind_numba_cuda(globals())
    if mode == "add":
        return cuda.jit(device=True)(_store_add_py(np.dtype(dtype).type))
    return cuda.jit(device=True)({"set": _store_set, "max": _store_max, "min": _store_min}[mode])


def _index_py(store, decode):
    """The indexed copy (module docstring); ``store`` writes one element, ``decode`` unravels."""
    bind_numba_cuda(globals())

    def index_copy(dst, dst_st, src, src_st, use_scalar, scalar, alpha, idx, idx_st, kstride, dsizes, dstrides,
                   to_dst, wrap, shape, n, err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            od, os, oi = decode(i, shape, dst_st, src_st, idx_st)
            ok = True
            extra = 0
            for k in range(len(dsizes)):
                j = idx[oi + k * kstride]
                size = dsizes[k]
                jj = j + size if wrap and j < 0 else j
                if jj < 0 or jj >= size:
                    err[0] = ERR_INDEX
                    err[1] = j
                    err[2] = size
                    ok = False
                    break
                extra += jj * dstrides[k]
            if ok:
                if to_dst:
                    od += extra
                else:
                    os += extra
                v = scalar if use_scalar else src[os]
                store(dst, od, v, alpha)
            i += step

    return index_copy


@functools.cache
def _index_kernel(mode: str, dtype: str):
    bind_numba_cuda(globals())
    return jit(_index_py(_store(mode, dtype), _decode()))


_OPS = {"sum": 0, "prod": 1, "mean": 2, "amax": 3, "amin": 4}


def _reduce_py(acc_t, is_int, decode):
    """scatter_reduce pulled by output element: ``shape`` is ``index.shape`` with ``dim`` set to the output's
    extent ``size``; the thread of output element ``c`` reduces ``src[c with dim = l]`` over every ``l`` with
    ``index[c with dim = l] == c[dim]``. ``sst``/``ist`` have 0 at ``dim`` (its strides are ``sdim``/``idim``;
    ``inner`` is the product of the extents after it). Threads with ``c[dim] == 0`` check the index line."""
    bind_numba_cuda(globals())

    def scatter_reduce(out, ost, src, sst, sdim, idx, ist, idim, inner, size, L, op, include_self, ident, shape, n,
                       err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            oo, os, oi = decode(i, shape, ost, sst, ist)
            j = (i // inner) % size
            acc = acc_t(out[oo]) if include_self else ident
            cnt = 1 if include_self else 0
            for m in range(L):
                jj = idx[oi + m * idim]
                if jj < 0 or jj >= size:
                    if j == 0:
                        err[0] = ERR_INDEX
                        err[1] = jj
                        err[2] = size
                elif jj == j:
                    v = acc_t(src[os + m * sdim])
                    cnt += 1
                    if op == 1:
                        acc = acc * v
                    elif op == 3:
                        if v != v or v > acc:
                            acc = v
                    elif op == 4:
                        if v != v or v < acc:
                            acc = v
                    else:
                        acc = acc + v
            if cnt > (1 if include_self else 0):
                if op == 2:
                    if is_int:
                        out[oo] = acc // cnt
                    else:
                        out[oo] = acc / cnt
                else:
                    out[oo] = acc
            i += step

    return scatter_reduce


def _acc_type(dtype: np.dtype):
    if dtype.kind == "f":
        return np.float64 if dtype == np.float64 else np.float32
    return np.int64


@functools.cache
def _reduce_kernel(dtype: str):
    bind_numba_cuda(globals())
    dt = np.dtype(dtype)
    return jit(_reduce_py(_acc_type(dt), dt.kind != "f", _decode()))


def _where_py(decode):
    bind_numba_cuda(globals())

    def where(out, ost, a, ast, mask, mst, v, vst, use_scalar, scalar, shape, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            oo, oa, om = decode(i, shape, ost, ast, mst)
            if mask[om]:
                if use_scalar:
                    out[oo] = scalar
                else:
                    ov, _, _ = decode(i, shape, vst, vst, vst)
                    out[oo] = v[ov]
            else:
                out[oo] = a[oa]
            i += step

    return where


def _chunks_py(decode):
    """The walk of the data-dependent shapes: chunk ``c`` visits its ``chunk`` elements in C order of ``shape``
    and numbers the True entries of ``mask`` from ``pos``. ``mode`` 0 counts them (``offsets[c]`` = count, from
    0); the others start at ``offsets[c]`` (exclusive prefix counts): 1 masked_select ``out[pos] = a[...]``,
    2 masked_scatter ``a[...] = out[pos]`` (``pos < nsrc`` checked), 3 nonzero (``out[pos, d]`` = coordinates)."""
    bind_numba_cuda(globals())

    def chunks(mode, out, a, ast, mask, mst, offsets, shape, n, chunk, nchunks, nsrc, err):
        c = cuda.grid(1)
        step = cuda.gridsize(1)
        nd = len(shape)
        while c < nchunks:
            pos = 0 if mode == 0 else offsets[c]
            for e in range(c * chunk, min(n, c * chunk + chunk)):
                om, oa, _ = decode(e, shape, mst, ast, ast)
                if mask[om]:
                    if mode == 1:
                        out[pos] = a[oa]
                    elif mode == 2:
                        if pos < nsrc:
                            a[oa] = out[pos]
                        else:
                            err[0] = ERR_INDEX
                            err[1] = pos
                            err[2] = nsrc
                    elif mode == 3:
                        r = e
                        for d in range(nd - 1, -1, -1):
                            ext = shape[d]
                            out[pos * nd + d] = r % ext
                            r = r // ext
                    pos += 1
            if mode == 0:
                offsets[c] = pos
            c += step

    return chunks


def _scan_py(decode=None):
    """Exclusive prefix sums of ``counts`` (``m`` entries) into ``offsets`` (``m + 1``), by one block."""
    bind_numba_cuda(globals())

    def scan(counts, offsets, m):
        t = cuda.threadIdx.x
        nt = cuda.blockDim.x
        seg = (m + nt - 1) // nt
        lo = min(t * seg, m)
        hi = min(lo + seg, m)
        s = 0
        for k in range(lo, hi):
            s += counts[k]
        tot = cuda.shared.array(SCAN_BLOCK, np.int64)
        tot[t] = s
        cuda.syncthreads()
        if t == 0:
            acc = 0
            for u in range(nt):
                v = tot[u]
                tot[u] = acc
                acc += v
            offsets[m] = acc
        cuda.syncthreads()
        acc = tot[t]
        for k in range(lo, hi):
            offsets[k] = acc
            acc += counts[k]

    return scan


_TEMPLATES = {"where": _where_py, "chunks": _chunks_py, "scan": _scan_py}


@functools.cache
def _kernel_of(name: str):
    """The compiled kernel of template ``name`` of :data:`_TEMPLATES` (built on first launch, cached)."""
    bind_numba_cuda(globals())
    return jit(_TEMPLATES[name](_decode()))


# --- helpers --------------------------------------------------------------------------------------
def _bits(arr):
    """The flat view of ``arr`` as the unsigned integers of its item size (copies move bits)."""
    return be().flat_view(arr).view(_BITS[arr.dtype.itemsize])


def _scalar_bits(value, dtype):
    return np.array(value).astype(dtype).view(_BITS[np.dtype(dtype).itemsize])[()]


def _int64(index):
    """``index`` as an int64 device array (a copy only for other integer dtypes)."""
    if np.dtype(index.dtype) == _INT64:
        return index
    out = be().empty(index.shape, np.int64)
    copy_into(out, index)
    return out


def _shape1(shape) -> tuple:
    return tuple(shape) if len(shape) else (1,)


def _st1(st) -> tuple:
    return tuple(int(s) for s in st) if len(st) else (0,)


def _indexed_copy(dst, dst_st, src, src_st, idx, idx_st, dsizes, dstrides, *, to_dst, wrap, shape, kstride=0,
                  scalar=None, accumulate=False, alpha=1) -> None:
    """Launch the indexed copy (module docstring) over ``shape``. ``dst``/``src`` are device arrays (their
    flat views are indexed with the element strides given); ``src`` None with ``scalar`` a number.
    ``accumulate``: False (copy bits), True or "add" (atomic ``+= alpha * v``), "max" or "min" (atomic)."""
    n = 1
    for e in shape:
        n *= e
    if n == 0:
        return
    dtype = np.dtype(dst.dtype)
    if accumulate:
        kdt = dtype
        fd = be().flat_view(dst)
        fs = be().flat_view(src) if src is not None else fd
        sv = dtype.type(0 if scalar is None else scalar)
        al = dtype.type(alpha)
    else:
        kdt = np.dtype(_BITS[dtype.itemsize])
        fd = _bits(dst)
        fs = _bits(src) if src is not None else fd
        sv = _scalar_bits(0 if scalar is None else scalar, dtype)
        al = kdt.type(0)
    k = _index_kernel(("add" if accumulate is True else accumulate) if accumulate else "set", np_name(kdt))
    grid, block = launch_1d(n)
    k[grid, block, stream()](fd, _st1(dst_st), fs, _st1(src_st), src is None, sv, al, be().flat_view(idx),
                             _st1(idx_st), int(kstride), tuple(int(s) for s in dsizes),
                             tuple(int(s) for s in dstrides), bool(to_dst), bool(wrap), _shape1(shape), n,
                             error_flag())


def _accumulating(op, out, *args):
    """Run ``op(out, *args)`` accumulating with atomics: directly for float32/float64/int32/int64, else into
    a widened copy of ``out`` (float32 for float16, int64 for the other integers and bool) copied back."""
    if np.dtype(out.dtype) in _ATOMIC:
        op(out, *args)
        return
    wide = np.float32 if np.dtype(out.dtype).kind == "f" else np.int64
    work = cast_to(out, wide)
    op(work, *[cast_to(a, wide) if is_array(a) and np.dtype(a.dtype) == np.dtype(out.dtype) else a for a in args])
    copy_into(out, work)


def _without(st, dim) -> list:
    st = list(st)
    st[dim] = 0
    return st


def _only(n: int, dim: int, s) -> list:
    st = [0] * n
    st[dim] = s
    return st


def _device_args(fn):
    """Kernel ``fn`` with host (numpy) array arguments copied to the device first: a 0-dim CPU tensor may
    join a CUDA operation (index, source, mask), as in torch; the copy does not wait."""
    @functools.wraps(fn)
    def run(*args):
        return fn(*[be().from_numpy(a) if isinstance(a, np.ndarray) else a for a in args])

    return run


# --- gather / scatter -----------------------------------------------------------------------------
@kernel("gather", "cuda")
@_device_args
def gather(arr, dim, index):
    out = be().empty(index.shape, arr.dtype)
    idx = _int64(index)
    shape = tuple(index.shape)
    ast = elem_strides(arr)
    _indexed_copy(out, c_elem_strides(shape), arr, _without(ast, dim), idx, strides_for(idx, shape),
                  (arr.shape[dim],), (ast[dim],), to_dst=False, wrap=False, shape=shape)
    return out


def _scatter_push(out, dim, index, src, accumulate):
    idx = _int64(index)
    shape = tuple(index.shape)
    ost = elem_strides(out)
    arr_src = is_array(src)
    sst = elem_strides(src) if arr_src else (0,) * len(shape)
    _indexed_copy(out, _without(ost, dim), src if arr_src else None, sst, idx, strides_for(idx, shape),
                  (out.shape[dim],), (ost[dim],), to_dst=True, wrap=False, shape=shape,
                  scalar=None if arr_src else src, accumulate=accumulate)


@kernel("scatter", "cuda")
@_device_args
def scatter(out, dim, index, src, reduce):
    if reduce == "multiply":
        if not is_array(src):
            s = be().empty(index.shape, out.dtype)
            copy_into(s, src)
            src = s
        scatter_reduce(out, dim, index, src, "prod", True)
    elif reduce == "add":
        if not is_array(src):
            s = be().empty(index.shape, out.dtype)
            copy_into(s, src)
            src = s
        scatter_add(out, dim, index, src)
    else:
        _scatter_push(out, dim, index, src, False)


@kernel("scatter_add", "cuda")
@_device_args
def scatter_add(out, dim, index, src):
    if deterministic():  # use_deterministic_algorithms / cudnn.deterministic: pull, no atomics
        scatter_reduce(out, dim, index, src, "sum", True)
        return
    _accumulating(lambda o, s: _scatter_push(o, dim, index, s, True), out, src)


PULL_MAX_SIZE = 16  # scatter_reduce pulls (deterministic, O(size) per source) up to this output extent along dim


@kernel("scatter_reduce", "cuda")
@_device_args
def scatter_reduce(out, dim, index, src, reduce, include_self):
    """Deterministic pulls (:func:`_reduce_py`) for ``prod`` and where the output's extent along ``dim`` is at
    most :data:`PULL_MAX_SIZE`; atomics otherwise (float16 and 8/16-bit integers in a widened copy)."""
    dtype = np.dtype(out.dtype)
    if dtype.kind == "b":
        raise RuntimeError("\"scatter_reduce_cuda\" not implemented for 'Bool'")
    if index.size == 0 or out.size == 0:
        return
    if reduce == "prod" or out.shape[dim] <= PULL_MAX_SIZE or deterministic():
        _pull_reduce(out, dim, index, src, reduce, include_self)
    elif dtype not in _ATOMIC:
        work = cast_to(out, np.float32 if dtype.kind == "f" else np.int64)
        scatter_reduce(work, dim, index, cast_to(src, work.dtype), reduce, include_self)
        copy_into(out, work)
    else:
        _push_reduce(out, dim, index, src, reduce, include_self)


def _ident(reduce: str, dtype: np.dtype):
    """The identity of ``reduce`` in ``dtype`` (what a position scattered to starts from without ``self``)."""
    if reduce in ("amax", "amin"):
        if dtype.kind == "f":
            return dtype.type(-np.inf if reduce == "amax" else np.inf)
        info = np.iinfo(dtype)
        return dtype.type(info.min if reduce == "amax" else info.max)
    return dtype.type(1 if reduce == "prod" else 0)


def _pull_reduce(out, dim, index, src, reduce, include_self):
    shape = list(index.shape)
    L = shape[dim]
    shape[dim] = out.shape[dim]
    shape = tuple(shape)
    n = 1
    for e in shape:
        n *= e
    dtype = np.dtype(out.dtype)
    idx = _int64(index)
    sst, ist = elem_strides(src), elem_strides(idx)
    inner = 1
    for e in shape[dim + 1:]:
        inner *= e
    grid, block = launch_1d(n)
    _reduce_kernel(np_name(dtype))[grid, block, stream()](
        be().flat_view(out), _st1(elem_strides(out)), be().flat_view(src), _st1(_without(sst, dim)), sst[dim],
        be().flat_view(idx), _st1(_without(ist, dim)), ist[dim], inner, shape[dim], int(L), _OPS[reduce],
        bool(include_self), _ident(reduce, np.dtype(_acc_type(dtype))), shape, n, error_flag())


def _push_reduce(out, dim, index, src, reduce, include_self):
    """scatter_reduce by atomics (sum, mean, amax, amin on float32/float64/int32/int64)."""
    dtype = np.dtype(out.dtype)
    if not include_self:  # the positions scattered to start from the identity
        _scatter_push(out, dim, index, _ident(reduce, dtype), False)
    _scatter_push(out, dim, index, src, {"amax": "max", "amin": "min"}.get(reduce, "add"))
    if reduce == "mean":
        cnt = be().full(out.shape, 0, dtype)
        _scatter_push(cnt, dim, index, 1, "add")
        dt = from_numpy_dtype(dtype)
        touched = binary_launcher("gt")(cnt, 0, dt)
        den = binary_launcher("add" if include_self else "maximum")(cnt, 1, dt)
        _where(out, out, touched, binary_launcher("div" if dtype.kind == "f" else "floor_divide")(out, den, dt))


# --- index_select / index_add / index_copy / index_fill --------------------------------------------
def _along(out, dim, index, src, *, scalar=None, accumulate=False, alpha=1, wrap=False):
    """``out[..., index[i], ...] (+)= src[..., i, ...]`` along ``dim`` (``src`` None: ``scalar``)."""
    idx = _int64(index)
    shape = list(out.shape)
    shape[dim] = idx.shape[0]
    shape = tuple(shape)
    ost = elem_strides(out)
    _indexed_copy(out, _without(ost, dim), src, elem_strides(src) if src is not None else (0,) * len(shape), idx,
                  _only(len(shape), dim, elem_strides(idx)[0]), (out.shape[dim],), (ost[dim],), to_dst=True,
                  wrap=wrap, shape=shape, scalar=scalar, accumulate=accumulate, alpha=alpha)


@kernel("index_select", "cuda")
@_device_args
def index_select(arr, dim, index):
    idx = _int64(index)
    shape = tuple(arr.shape[:dim]) + (idx.shape[0],) + tuple(arr.shape[dim + 1:])
    out = be().empty(shape, arr.dtype)
    ast = elem_strides(arr)
    _indexed_copy(out, c_elem_strides(shape), arr, _without(ast, dim), idx,
                  _only(len(shape), dim, elem_strides(idx)[0]), (arr.shape[dim],), (ast[dim],), to_dst=False,
                  wrap=False, shape=shape)
    return out


@kernel("index_add", "cuda")
@_device_args
def index_add(out, dim, index, src, alpha):
    alert_not_deterministic("index_add_cuda_")
    _accumulating(lambda o, s: _along(o, dim, index, s, accumulate=True, alpha=alpha), out, src)


@kernel("index_copy", "cuda")
@_device_args
def index_copy(out, dim, index, src):
    _along(out, dim, index, src)


@kernel("index_fill", "cuda")
@_device_args
def index_fill(out, dim, index, value):
    _along(out, dim, index, None, scalar=value, wrap=True)  # index_fill wraps negative indices, as torch


# --- take / put -----------------------------------------------------------------------------------
def _flat_c(arr):
    """A C-contiguous 1-d device array of ``arr``'s elements (``arr`` itself when it is C-contiguous)."""
    c = arr if be().is_c_contiguous(arr) else contiguous(arr)
    return be().flat_view(c) if c.size else be().empty((0,), c.dtype)


@kernel("take", "cuda")
@_device_args
def take(arr, index):
    flat = _flat_c(arr)
    idx = _int64(index)
    shape = tuple(idx.shape)
    out = be().empty(shape, arr.dtype)
    _indexed_copy(out, c_elem_strides(shape), flat, (0,) * len(shape), idx, strides_for(idx, shape), (arr.size,),
                  (1,), to_dst=False, wrap=True, shape=shape)
    return out


@kernel("put", "cuda")
@_device_args
def put(out, index, src, accumulate):
    backend = be()
    work = out if backend.is_c_contiguous(out) else contiguous(out)
    flat = backend.flat_view(work)
    idx = _int64(index)
    shape = tuple(idx.shape)
    s = _flat_c(src)

    def run(o, s_):
        _indexed_copy(o, (0,) * len(shape), s_, c_elem_strides(shape), idx, strides_for(idx, shape), (out.size,),
                      (1,), to_dst=True, wrap=True, shape=shape, accumulate=accumulate)

    if out.size:
        if accumulate:
            alert_not_deterministic("put_ with accumulate=True")
            _accumulating(run, flat, s)
        else:
            run(flat, s)
    if work is not out:
        copy_into(out, work)


# --- masks: count, scan, compact -------------------------------------------------------------------
def _walk(mode, out, a, mask, shape, offsets, nchunks, chunk, nsrc=0) -> None:
    """Launch the chunk walk (:func:`_chunks_py`) in ``mode``; ``out``/``a`` device arrays of one item size."""
    if not nchunks:
        return
    n = 1
    for e in shape:
        n *= e
    ast = strides_for(a, shape) if mode in (1, 2) else (0,) * len(shape)  # ``a`` is read or written
    grid, block = launch_1d(nchunks)
    _kernel_of("chunks")[grid, block, stream()](mode, _bits(out), _bits(a), _st1(ast),
                                                be().flat_view(mask), _st1(strides_for(mask, shape)), offsets,
                                                _shape1(shape), n, chunk, nchunks, int(nsrc), error_flag())


def _offsets(mask, shape):
    """``(offsets, nchunks, chunk)``: exclusive prefix counts of the True entries of ``mask`` (broadcast to
    ``shape``) per chunk of ``chunk`` elements in C order; ``offsets[nchunks]`` is the total."""
    n = 1
    for e in shape:
        n *= e
    chunk = _chunk()
    nchunks = (n + chunk - 1) // chunk
    counts = be().empty((max(nchunks, 1),), np.int64)
    offsets = be().empty((nchunks + 1,), np.int64)
    _walk(0, counts, counts, mask, shape, counts, nchunks, chunk)
    _kernel_of("scan")[1, 16 if sim() else SCAN_BLOCK, stream()](counts, offsets, nchunks)
    return offsets, nchunks, chunk


def _total(offsets, nchunks) -> int:
    """The total count: the one host synchronisation of the data-dependent shapes."""
    return int(be().to_numpy(offsets[nchunks:nchunks + 1])[0])


def _as_mask(arr):
    """A bool device array of ``arr != 0``."""
    if np.dtype(arr.dtype) == np.bool_:
        return arr
    a = arr if np.dtype(arr.dtype) != np.float16 else cast_to(arr, np.float32)
    return binary_launcher("ne")(a, 0, from_numpy_dtype(np.dtype(a.dtype)))


@kernel("nonzero", "cuda")
@_device_args
def nonzero(arr):
    """Indices of the non-zero entries, ``(n, ndim)`` int64. One host synchronisation: ``n`` sizes the output."""
    mask = _as_mask(arr)
    shape = tuple(arr.shape)
    offsets, nchunks, chunk = _offsets(mask, shape)
    out = be().empty((_total(offsets, nchunks), len(shape)), np.int64)
    if out.size:
        _walk(3, out, out, mask, shape, offsets, nchunks, chunk)
    return out


@kernel("masked_select", "cuda")
@_device_args
def masked_select(arr, mask):
    """The entries of ``arr`` where ``mask`` (broadcast together); one host synchronisation (the count)."""
    shape = broadcast_shapes(tuple(arr.shape), tuple(mask.shape))
    offsets, nchunks, chunk = _offsets(mask, shape)
    out = be().empty((_total(offsets, nchunks),), arr.dtype)
    if out.size:
        _walk(1, out, arr, mask, shape, offsets, nchunks, chunk)
    return out


@kernel("masked_scatter", "cuda")
@_device_args
def masked_scatter(out, mask, src):
    """No host synchronisation: a mask with more True entries than ``src`` has is reported by the error flag."""
    shape = tuple(out.shape)
    offsets, nchunks, chunk = _offsets(mask, shape)
    s = _flat_c(src)
    if s.size == 0:
        s = be().empty((1,), out.dtype)  # a valid array to index; nsrc = 0 flags any True entry
    _walk(2, s, out, mask, shape, offsets, nchunks, chunk, src.size)


def _where(out, a, mask, value) -> None:
    """``out = mask ? value : a`` (``a``, ``mask`` and an array ``value`` broadcast to ``out``)."""
    shape = tuple(out.shape)
    n = out.size
    if n == 0:
        return
    dtype = np.dtype(out.dtype)
    arr_v = is_array(value)
    if arr_v:
        value = cast_to(value, dtype)
    grid, block = launch_1d(n)
    _kernel_of("where")[grid, block, stream()](
        _bits(out), _st1(strides_for(out, shape)), _bits(a), _st1(strides_for(a, shape)), be().flat_view(mask),
        _st1(strides_for(mask, shape)), _bits(value) if arr_v else _bits(out),
        _st1(strides_for(value, shape)) if arr_v else _st1((0,) * len(shape)), not arr_v,
        _scalar_bits(0 if arr_v else value, dtype), _shape1(shape), n)


@kernel("masked_fill", "cuda")
@_device_args
def masked_fill(arr, mask, value, np_dtype):
    shape = broadcast_shapes(tuple(arr.shape), tuple(mask.shape))
    out = be().empty(shape, np_dtype)
    _where(out, cast_to(arr, np_dtype), mask, value)
    return out


@_device_args
@via_float32  # called by the front directly, outside the kernel table (Note [bfloat16 on CUDA])
def masked_fill_inplace(out, mask, value):
    """The kernel of ``masked_fill_``: ``out[mask] = value`` in place (``mask`` broadcasts to ``out``)."""
    _where(out, out, mask, value)


# --- advanced indexing ----------------------------------------------------------------------------
def _reshape(arr, shape):
    """``arr`` reshaped (a C-contiguous copy first when it is strided: device arrays reshape only then)."""
    if tuple(arr.shape) == tuple(shape):
        return arr
    return (arr if be().is_c_contiguous(arr) else contiguous(arr)).reshape(shape)


def _shape_text(shape) -> str:
    return "(" + ",".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _plan(arr, key):
    """``(view, arrays, dims, bshape)`` for an advanced key on device array ``arr``: ``view`` is ``arr``
    with the key's slices applied, ``arrays`` the int64 index arrays (boolean masks turned into their
    nonzero columns: a host synchronisation) for dims ``dims`` of ``view``, broadcast to ``bshape``."""
    items = list(key) if isinstance(key, tuple) else [key]
    if any(_is_new_axis(k) for k in items):
        arr, items = _new_axes(arr, items)
    ndim = len(arr.shape)
    consumed = 0
    for k in items:
        if k is Ellipsis:
            continue
        consumed += k.ndim if is_array(k) and np.dtype(k.dtype) == np.bool_ else 1
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed")
    basic, arrays, dims = [], [], []
    d = 0
    for k in items:
        if k is Ellipsis:
            basic.extend([slice(None)] * (ndim - consumed))
            d += ndim - consumed
        elif isinstance(k, slice):
            basic.append(k)
            d += 1
        elif isinstance(k, (int, np.integer)):
            arrays.append(be().from_numpy(np.array(int(k), np.int64)))
            dims.append(d)
            basic.append(slice(None))
            d += 1
        elif isinstance(k, np.ndarray):
            items_dev = be().from_numpy(k)
            d = _add_index_array(arr, items_dev, d, basic, arrays, dims)
        else:
            d = _add_index_array(arr, k, d, basic, arrays, dims)
    basic.extend([slice(None)] * (ndim - d))
    view = arr[tuple(basic)] if ndim else arr
    try:
        bshape = broadcast_shapes(*[tuple(a.shape) for a in arrays])
    except (RuntimeError, ValueError):
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                         + " ".join(_shape_text(a.shape) for a in arrays)) from None
    return view, arrays, dims, tuple(bshape)


def _is_new_axis(k) -> bool:
    """Whether key item ``k`` adds a dim: None, or a boolean scalar (Python, numpy or a 0-dim array)."""
    return k is None or isinstance(k, (bool, np.bool_)) or (
        is_array(k) and k.ndim == 0 and np.dtype(k.dtype) == np.bool_)


def _new_axes(arr, items: list) -> tuple:
    """``(view, items)``: an advanced key's None and boolean scalars as index items over unit dims inserted into
    a view of ``arr`` where they stand. Note [New axes among index arrays]: numpy (and torch) treat ``None`` as a
    slice over a new dim of one element, and a boolean scalar as an index array over such a dim, ``[0]`` for True
    and ``[]`` for False (``x[True]`` is ``(1, ...)``, ``x[False]`` is ``(0, ...)``, ``x[:, True, [0, 2]]``
    broadcasts ``(1,)`` with ``(2,)``); so the plan needs no case of its own for them. A boolean scalar on the
    device is read on the host (a synchronisation: its value sizes the result)."""
    consumed = sum(0 if k is Ellipsis or _is_new_axis(k) else
                   (k.ndim if (is_array(k) or isinstance(k, np.ndarray)) and np.dtype(k.dtype) == np.bool_ else 1)
                   for k in items)
    shape, strides, out, d = [], [], [], 0
    src = tuple(arr.shape)
    src_strides = tuple(st // arr.dtype.itemsize for st in arr.strides)
    for k in items:
        if _is_new_axis(k):
            shape.append(1)
            strides.append(0)
            if k is None:
                out.append(slice(None))
            else:
                value = bool(k) if not is_array(k) else bool(be().to_numpy(k))
                out.append(np.zeros(1 if value else 0, np.int64))
            continue
        n = (len(src) - consumed if k is Ellipsis else
             k.ndim if (is_array(k) or isinstance(k, np.ndarray)) and np.dtype(k.dtype) == np.bool_ else 1)
        shape.extend(src[d:d + n])
        strides.extend(src_strides[d:d + n])
        d += n
        out.append(slice(None) if k is Ellipsis else k)
        if k is Ellipsis:
            out[-1:] = [slice(None)] * n
    shape.extend(src[d:])
    strides.extend(src_strides[d:])
    return be().as_strided(arr, tuple(shape), tuple(strides), 0), out  # (a view: writes through it reach ``arr``)


def _add_index_array(arr, k, d, basic, arrays, dims) -> int:
    if np.dtype(k.dtype) == np.bool_:
        for e in range(k.ndim):
            if k.shape[e] != arr.shape[d + e]:
                raise IndexError(f"boolean index did not match indexed array along axis {d + e}; size of axis is "
                                 f"{arr.shape[d + e]} but size of corresponding boolean axis is {k.shape[e]}")
        coords = nonzero(k)  # a host synchronisation: the number of True entries sizes the result
        for e in range(k.ndim):
            arrays.append(coords[:, e])
            dims.append(d + e)
            basic.append(slice(None))
        return d + k.ndim
    arrays.append(_int64(k))
    dims.append(d)
    basic.append(slice(None))
    return d + 1


def _advanced(arr, key):
    """Everything both directions of advanced indexing need: ``(view, result shape, strides of the view over
    the result (0 on the index dims), stacked index, its strides over the result, kstride, dsizes, dstrides)``."""
    view, arrays, dims, bshape = _plan(arr, key)
    vst = elem_strides(view)
    K = len(arrays)
    nb = len(bshape)
    rest = [e for e in range(view.ndim) if e not in dims]
    adjacent = dims == list(range(dims[0], dims[0] + K))
    at = dims[0] if adjacent else 0
    lead = [e for e in rest if e < at] if adjacent else []
    tail = [e for e in rest if e not in lead]
    shape = tuple(view.shape[e] for e in lead) + bshape + tuple(view.shape[e] for e in tail)
    vrest = [vst[e] for e in lead] + [0] * nb + [vst[e] for e in tail]
    if K == 1:
        idx, ist, kstride = arrays[0], list(strides_for(arrays[0], bshape)) if nb else [], 0
    else:
        kstride = int(np.prod(bshape))
        idx = be().empty((K * kstride,), np.int64)
        cst = c_elem_strides(bshape)
        for k, a in enumerate(arrays):  # row k of the (K, *bshape) stack
            copy_into(be().as_strided(idx, bshape, cst, k * kstride), a)
        ist = list(cst) if nb else []
    ist = [0] * len(lead) + ist + [0] * len(tail)
    return view, shape, vrest, idx, ist, kstride, [view.shape[e] for e in dims], [vst[e] for e in dims]


@kernel("index", "cuda")
@_device_args
def index(arr, key):
    view, shape, vst, idx, ist, kstride, dsizes, dstrides = _advanced(arr, key)
    out = be().empty(shape, arr.dtype)
    _indexed_copy(out, c_elem_strides(shape), view, vst, idx, ist, dsizes, dstrides, to_dst=False, wrap=True,
                  shape=shape, kstride=kstride)
    return out


def _mask_key(arr, key, values):
    """The mask of ``arr[mask] = values`` when that is a where (no host synchronisation): one boolean array
    over leading dims and ``values`` a scalar or broadcastable over the remaining dims."""
    items = key if isinstance(key, tuple) else (key,)
    if len(items) != 1 or not is_array(items[0]) or np.dtype(items[0].dtype) != np.bool_:
        return None
    m = items[0]
    if m.ndim == 0 or tuple(m.shape) != tuple(arr.shape[:m.ndim]):
        return None
    if is_array(values) or isinstance(values, np.ndarray):
        vshape = list(values.shape)
        while vshape and vshape[0] == 1:
            vshape.pop(0)
        if len(vshape) > arr.ndim - m.ndim:
            return None
    return m


@kernel("index_put", "cuda")
@_device_args
def index_put(out, key, values, accumulate):
    """``out[key] = values`` (``+=`` when ``accumulate``) in place."""
    if isinstance(values, np.ndarray):
        values = be().from_numpy(values)
    dtype = np.dtype(out.dtype)
    items = key if isinstance(key, tuple) else (key,)
    if all(k is None or k is Ellipsis or isinstance(k, slice) for k in items):
        # only slices, None and Ellipsis: the key is a view of out (slicing's backward); _plan turns ints
        # into index arrays, which take the general path
        view = _plan(out, key)[0]
        if is_array(values):
            values = _values_to(values, dtype, tuple(view.shape))
        if accumulate:
            values = binary_launcher("add")(view, values, from_numpy_dtype(dtype))
        copy_into(view, values)
        return
    if accumulate:
        alert_not_deterministic("index_put_ with accumulate=True")
    if accumulate and dtype not in _ATOMIC:  # atomics on a widened copy
        work = cast_to(out, np.float32 if dtype.kind == "f" else np.int64)
        index_put(work, key, cast_to(values, work.dtype) if is_array(values) else values, True)
        copy_into(out, work)
        return
    m = None if accumulate else _mask_key(out, key, values)
    if m is not None:
        mask = _reshape(m, tuple(m.shape) + (1,) * (out.ndim - m.ndim))
        if is_array(values):
            values = _values_to(values, dtype, tuple(out.shape))
        _where(out, out, mask, values)
        return
    view, shape, vst, idx, ist, kstride, dsizes, dstrides = _advanced(out, key)
    if is_array(values):
        values = _values_to(values, dtype, shape)
        vals, vals_st, scalar = values, strides_for(values, shape), None
    else:
        vals, vals_st, scalar = None, (0,) * len(shape), values
    _indexed_copy(view, vst, vals, vals_st, idx, ist, dsizes, dstrides, to_dst=True, wrap=True, shape=shape,
                  kstride=kstride, scalar=scalar, accumulate=accumulate)


def _values_to(values, dtype, target):
    """``values`` cast to ``dtype``, with leading size-1 dims dropped until it can broadcast to ``target``
    (ValueError naming both shapes, as numpy's, otherwise)."""
    vshape = list(values.shape)
    while len(vshape) > len(target) and vshape[0] == 1:
        vshape.pop(0)
    try:
        if len(vshape) > len(target) or broadcast_shapes(tuple(vshape), tuple(target)) != tuple(target):
            raise ValueError
    except (RuntimeError, ValueError):
        raise ValueError(f"shape mismatch: value array of shape {_shape_text(values.shape)} could not be broadcast "
                         f"to indexing result of shape {_shape_text(target)}") from None
    if len(vshape) != len(values.shape):
        values = _reshape(values, tuple(vshape))
    return cast_to(values, dtype)


# --- concrete signatures (PTX test) ---------------------------------------------------------------
_REDUCE_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of every template of this family for every dtype it is
    launched with: the indexed copy per item size (copies) and per atomic dtype (add, max, min), with one and
    two index arrays; scatter_reduce per dtype; where / compaction per item size; count, scan, nonzero."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64, b = types.int64, types.boolean
    idx = types.UniTuple(i64, ndim)
    a64 = types.Array(i64, 1, "C")
    bmask = types.Array(b, 1, "C")
    decode = _decode()
    cases = []
    atomic = sorted(d.name for d in _ATOMIC)
    for mode, names in (("set", [np.dtype(t).name for t in _BITS.values()]), ("add", atomic), ("max", atomic),
                        ("min", atomic)):
        for dn in sorted(names):
            t = from_dtype(np.dtype(dn))
            arr = types.Array(t, 1, "C")
            py = _index_py(_store(mode, dn), decode)
            for K in (1, 2) if mode in ("set", "add") else (1,):
                kt = types.UniTuple(i64, K)
                sig = (arr, idx, arr, idx, b, t, t, a64, idx, i64, kt, kt, b, b, idx, i64, a64)
                cases.append((f"index_{mode}:{dn}:K{K}", py, sig))
    for dn in _REDUCE_DTYPES:
        dt = np.dtype(dn)
        t = from_dtype(dt)
        arr = types.Array(t, 1, "C")
        acc_t = _acc_type(dt)
        sig = (arr, idx, arr, idx, i64, a64, idx, i64, i64, i64, i64, i64, b, from_dtype(np.dtype(acc_t)), idx, i64,
               a64)
        cases.append((f"scatter_reduce:{dn}", _reduce_py(acc_t, dt.kind != "f", decode), sig))
    for bits in _BITS.values():
        dn = np.dtype(bits).name
        t = from_dtype(np.dtype(bits))
        arr = types.Array(t, 1, "C")
        cases.append((f"where:{dn}", _where_py(decode), (arr, idx, arr, idx, bmask, idx, arr, idx, b, t, idx, i64)))
        cases.append((f"chunks:{dn}", _chunks_py(decode),
                      (i64, arr, arr, idx, bmask, idx, a64, idx, i64, i64, i64, i64, a64)))
    cases.append(("scan", _scan_py(), (a64, a64, i64)))
    return cases
