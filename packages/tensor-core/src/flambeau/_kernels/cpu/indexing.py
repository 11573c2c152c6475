"""CPU kernels of the indexing operators of ``flambeau._ops.indexing`` (whose docstring gives the
calling conventions): advanced indexing and ``index_put``, gather/scatter and their reductions,
index_select/add/copy/fill, take/put, the masked operators and nonzero.

numpy does most of it; numba kernels, compiled on first use (never at import), do gather,
scatter and index_add on every thread for large inputs (Note [Parallel index kernels]). A kernel
that meets an out-of-range index raises :class:`OutOfBounds`; the front turns it into torch's
message.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel
from flambeau._parallel import get_num_threads


class OutOfBounds(Exception):
    """A kernel met an out-of-range index (the front turns it into torch's message)."""

    def __init__(self, index: int):
        self.index = index


def _check_host_bounds(index, size: int) -> None:
    if index.size:
        lo, hi = index.min(), index.max()
        if lo < 0 or hi >= size:
            raise OutOfBounds(int(lo) if lo < 0 else int(hi))


_NUMBA_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                                np.uint8))


@functools.cache
def _nb():
    import numba

    @numba.njit(cache=True)
    def scatter_nd(out, out_strides, dim, dimsize, index, src, src_step, shape, mode):
        # out: 1-D over the output's memory; index/src: C-order ravel of ``shape``; mode 0 set, 1 add, 2 mul.
        nd = shape.shape[0]
        coord = np.zeros(nd, np.int64)
        base = 0
        sd = out_strides[dim]
        for i in range(index.shape[0]):
            j = index[i]
            if j < 0 or j >= dimsize:
                return i
            p = base + j * sd
            v = src[i * src_step]
            if mode == 0:
                out[p] = v
            elif mode == 1:
                out[p] += v
            else:
                out[p] *= v
            k = nd - 1
            while k >= 0:
                coord[k] += 1
                if k != dim:
                    base += out_strides[k]
                if coord[k] < shape[k]:
                    break
                if k != dim:
                    base -= out_strides[k] * shape[k]
                coord[k] = 0
                k -= 1
        return -1

    @numba.njit(cache=True)
    def index_add_3d(out, index, src, alpha):
        # out (P, M, Q) += alpha * src (P, L, Q) scattered by index (L,) along axis 1.
        P, M, Q = out.shape
        for p in range(P):
            for i in range(index.shape[0]):
                j = index[i]
                if j < 0:
                    j += M
                for q in range(Q):
                    out[p, j, q] += alpha * src[p, i, q]

    @numba.njit(cache=True)
    def gather_nd(src, src_strides, dim, dimsize, index, shape, out):
        # out[i] = src[offset of index coordinate i with dim replaced by index[i]]; C-order ravel of ``shape``.
        nd = shape.shape[0]
        coord = np.zeros(nd, np.int64)
        base = 0
        sd = src_strides[dim]
        for i in range(index.shape[0]):
            j = index[i]
            if j < 0 or j >= dimsize:
                return i
            out[i] = src[base + j * sd]
            k = nd - 1
            while k >= 0:
                coord[k] += 1
                if k != dim:
                    base += src_strides[k]
                if coord[k] < shape[k]:
                    break
                if k != dim:
                    base -= src_strides[k] * shape[k]
                coord[k] = 0
                k -= 1
        return -1

    @numba.njit(cache=True)
    def scatter_3d(out, index, src, src_step, mode):
        # out (P, D, Q)[p, index[p, i, q], q] (op)= src[p, i, q]; the common case of scatter, collapsed to 3-d.
        P, L, Q = index.shape
        D = out.shape[1]
        for p in range(P):
            for i in range(L):
                for q in range(Q):
                    j = index[p, i, q]
                    if j < 0 or j >= D:
                        return (p * L + i) * Q + q
                    v = src[p * src_step, i * src_step, q * src_step]
                    if mode == 0:
                        out[p, j, q] = v
                    elif mode == 1:
                        out[p, j, q] += v
                    else:
                        out[p, j, q] *= v
        return -1

    @numba.njit(cache=True)
    def gather_3d(src, index, out):
        # out (P, L, Q)[p, i, q] = src (P, D, Q)[p, index[p, i, q], q]
        P, L, Q = index.shape
        D = src.shape[1]
        for p in range(P):
            for i in range(L):
                for q in range(Q):
                    j = index[p, i, q]
                    if j < 0 or j >= D:
                        return (p * L + i) * Q + q
                    out[p, i, q] = src[p, j, q]
        return -1

    return scatter_nd, index_add_3d, gather_nd, scatter_3d, gather_3d


# Note [Parallel index kernels]
# torch runs gather/scatter/index_select on all its threads; so do we for large inputs. The
# operands are collapsed to (P, D, Q) around the indexed dim and work is split into blocks of
# (one P row, a range of Q): no two blocks write the same output element, even for scatters,
# since the indexed dim never crosses blocks. A bad index stops its block and is reported by
# position (err[block]). 1-d problems (P = Q = 1) stay serial.
_PAR_MIN = 1 << 15
_QBLOCK = 256


@functools.cache
def _nb_scatter_add_private():
    """1-D scatter-add with one private accumulator per thread (Note [Scatter-add into few bins])."""
    import numba

    @numba.njit(parallel=True, cache=True)
    def scatter_add_private(out, index, src, step, nthreads, err):
        n, m = index.shape[0], out.shape[0]
        parts = np.zeros((nthreads, m), out.dtype)
        for t in numba.prange(nthreads):
            lo, hi = n * t // nthreads, n * (t + 1) // nthreads
            for i in range(lo, hi):
                j = index[i]
                if j < 0 or j >= m:  # torch's scatter does not wrap negative indices
                    err[t] = i
                    break
                parts[t, j] += src[i * step]
        for t in range(nthreads):
            for j in range(m):
                out[j] += parts[t, j]

    return scatter_add_private


# Note [Scatter-add into few bins]: when many indices hit a small output (a histogram), threads that
# split the indices would race on the same bins; each thread sums into its own copy of the output
# instead and the copies are added at the end, which costs threads * size extra memory: only worth
# it when the output is much smaller than the index.
def _scatter_add_few_bins(out, idx, srcf, step) -> bool:
    threads = get_num_threads()
    if threads < 2 or out.ndim != 1 or idx.ndim != 1 or out.shape[0] * threads * 8 > idx.shape[0] \
            or not out.flags.c_contiguous:
        return False
    err = np.full(threads, -1, np.int64)
    _nb_scatter_add_private()(out, idx, srcf.reshape(-1), step, threads, err)
    _raise_err(err, idx)
    return True


@functools.cache
def _nb_par():
    import numba

    @numba.njit(parallel=True, cache=True)
    def gather_3d_par(src, index, out, qblock, err):
        P, L, Q = index.shape
        D = src.shape[1]
        nqb = (Q + qblock - 1) // qblock
        for b in numba.prange(P * nqb):
            p = b // nqb
            q0 = (b - p * nqb) * qblock
            q1 = min(q0 + qblock, Q)
            for i in range(L):
                stop = False
                for q in range(q0, q1):
                    j = index[p, i, q]
                    if j < 0 or j >= D:
                        err[b] = (p * L + i) * Q + q
                        stop = True
                        break
                    out[p, i, q] = src[p, j, q]
                if stop:
                    break

    @numba.njit(parallel=True, cache=True)
    def scatter_3d_par(out, index, src, src_step, mode, qblock, err):
        P, L, Q = index.shape
        D = out.shape[1]
        nqb = (Q + qblock - 1) // qblock
        for b in numba.prange(P * nqb):
            p = b // nqb
            q0 = (b - p * nqb) * qblock
            q1 = min(q0 + qblock, Q)
            for i in range(L):
                stop = False
                for q in range(q0, q1):
                    j = index[p, i, q]
                    if j < 0 or j >= D:
                        err[b] = (p * L + i) * Q + q
                        stop = True
                        break
                    v = src[p * src_step, i * src_step, q * src_step]
                    if mode == 0:
                        out[p, j, q] = v
                    elif mode == 1:
                        out[p, j, q] += v
                    else:
                        out[p, j, q] *= v
                if stop:
                    break

    @numba.njit(parallel=True, cache=True)
    def index_add_3d_par(out, index, src, alpha, qblock):
        P, M, Q = out.shape
        L = index.shape[0]
        nqb = (Q + qblock - 1) // qblock
        for b in numba.prange(P * nqb):
            p = b // nqb
            q0 = (b - p * nqb) * qblock
            q1 = min(q0 + qblock, Q)
            for i in range(L):
                j = index[i]
                if j < 0:
                    j += M
                for q in range(q0, q1):
                    out[p, j, q] += alpha * src[p, i, q]

    # Q == 1 (the indexed dim is the last): 2-d kernels without the inner loop, split over rows.
    @numba.njit(parallel=True, cache=True)
    def gather_2d_par(src, index, out, err):
        P, L = index.shape
        D = src.shape[1]
        for p in numba.prange(P):
            for i in range(L):
                j = index[p, i]
                if j < 0 or j >= D:
                    err[p] = p * L + i
                    break
                out[p, i] = src[p, j]

    @numba.njit(parallel=True, cache=True)
    def scatter_2d_par(out, index, src, src_step, mode, err):
        P, L = index.shape
        D = out.shape[1]
        for p in numba.prange(P):
            for i in range(L):
                j = index[p, i]
                if j < 0 or j >= D:
                    err[p] = p * L + i
                    break
                v = src[p * src_step, i * src_step]
                if mode == 0:
                    out[p, j] = v
                elif mode == 1:
                    out[p, j] += v
                else:
                    out[p, j] *= v

    @numba.njit(parallel=True, cache=True)
    def index_add_2d_par(out, index, src, alpha):
        P, M = out.shape
        L = index.shape[0]
        for p in numba.prange(P):
            for i in range(L):
                j = index[i]
                if j < 0:
                    j += M
                out[p, j] += alpha * src[p, i]

    @numba.njit(parallel=True, cache=True)
    def take_par(src, index, out, err):
        # out (P, L, Q) = src (P, M, Q)[:, index, :]; split over index entries (one row) or over rows.
        # Q == 1 has its own loops: an inner loop of length 1 costs twice the copy.
        P, M, Q = src.shape
        L = index.shape[0]
        if P == 1:
            for i in numba.prange(L):
                j = index[i]
                if j < 0 or j >= M:
                    err[i] = i
                elif Q == 1:
                    out[0, i, 0] = src[0, j, 0]
                else:
                    for q in range(Q):
                        out[0, i, q] = src[0, j, q]
        else:
            for p in numba.prange(P):
                if Q == 1:
                    s2 = src[p, :, 0]
                    o2 = out[p, :, 0]
                    for i in range(L):
                        j = index[i]
                        if j < 0 or j >= M:
                            err[p] = i
                            break
                        o2[i] = s2[j]
                else:
                    for i in range(L):
                        j = index[i]
                        if j < 0 or j >= M:
                            err[p] = i
                            break
                        for q in range(Q):
                            out[p, i, q] = src[p, j, q]

    @numba.njit(parallel=True, cache=True)
    def take_1d_par(src, index, out, err):
        # racing writes to err[0] are benign: any bad position will do for the message
        M = src.shape[0]
        for i in numba.prange(index.shape[0]):
            j = index[i]
            if j < 0 or j >= M:
                err[0] = i
            else:
                out[i] = src[j]

    return (gather_3d_par, scatter_3d_par, index_add_3d_par, gather_2d_par, scatter_2d_par, index_add_2d_par,
            take_par, take_1d_par)


def _raise_err(err, flat_index=None):
    bad = err[err >= 0]
    if bad.size:
        pos = int(bad.min())
        raise OutOfBounds(int(flat_index[pos]) if flat_index is not None else pos)


# Copies move bits: numba sees every dtype as the unsigned int of its size (float16 and bool
# included), so a copy kernel compiles once per item size, not once per dtype.
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a):
    return a.view(_BITS[a.itemsize])


def _flat_out(arr):
    """A 1-D array over ``arr``'s memory span and ``arr``'s element strides (non-negative)."""
    item = arr.itemsize
    strides = np.array([s // item for s in arr.strides], np.int64)
    if arr.flags.c_contiguous:
        return arr.reshape(-1), strides
    span = 1 + sum((n - 1) * s for n, s in zip(arr.shape, strides)) if arr.size else 0
    return np.lib.stride_tricks.as_strided(arr, (span,), (item,)), strides


@kernel("index", "cpu")
@takes_bfloat16  # moves data (index_add: hot in embedding backward)
def _cpu_index(arr, key):
    r = arr[key]
    return r if r.flags.c_contiguous else np.ascontiguousarray(r)


@kernel("index_put", "cpu")
@takes_bfloat16  # moves data (index_add: hot in embedding backward)
def _cpu_index_put(out, key, values, accumulate):
    if not accumulate:
        out[key] = values
    else:
        _accumulate(out, key, values)


def _accumulate(out, key, values):
    """``out[key] += values`` with repeated indices adding up (numba for the common layouts)."""
    adv = [i for i, k in enumerate(key) if isinstance(k, np.ndarray)]
    if not adv:  # ints, slices, None, ...: no position repeats, a plain += is exact (np.add.at is slow)
        out[key] += values
        return
    ok = (out.dtype in _NUMBA_DTYPES and adv and adv == list(range(adv[0], adv[0] + len(adv)))
          and all(k.dtype.kind in "iu" for k in (key[i] for i in adv))
          and all((isinstance(k, slice) and k == slice(None)) for i, k in enumerate(key) if i not in adv)
          and not any(k is Ellipsis or k is None for k in key) and adv[-1] + 1 <= out.ndim)
    if not ok:
        np.add.at(out, key, values)
        return
    a0, a1 = adv[0], adv[-1] + 1
    idx_arrays = np.broadcast_arrays(*(key[i] for i in adv))
    dims = out.shape[a0:a1]
    lin = np.ravel_multi_index(tuple(i.reshape(-1) for i in idx_arrays), dims, mode="wrap") if len(adv) > 1 \
        else idx_arrays[0].reshape(-1)
    pre, post = out.shape[:a0], out.shape[a1:]
    P, M, Q = int(np.prod(pre)), int(np.prod(dims)), int(np.prod(post))
    target_shape = pre + idx_arrays[0].shape + post
    vals = np.broadcast_to(np.asarray(values, dtype=out.dtype), target_shape).reshape(P, lin.size, Q)
    work = out if out.flags.c_contiguous else np.ascontiguousarray(out)
    _nb()[1](work.reshape(P, M, Q), lin.astype(np.int64, copy=False), vals, out.dtype.type(1))
    if work is not out:
        out[...] = work


@kernel("nonzero", "cpu")
def _cpu_nonzero(arr):
    return np.argwhere(arr).astype(np.int64, copy=False)


@kernel("masked_fill", "cpu")
def _cpu_masked_fill(arr, mask, value, np_dtype):
    return np.where(mask, np.asarray(value).astype(np_dtype), arr).astype(np_dtype, copy=False)


def masked_fill_inplace(out, mask, value):
    """The kernel of ``masked_fill_``: ``out[mask] = value`` in place (``mask`` broadcasts to ``out``)."""
    np.copyto(out, value, casting="unsafe", where=mask)


@kernel("masked_select", "cpu")
def _cpu_masked_select(arr, mask):
    a, m = np.broadcast_arrays(arr, mask)
    return a[m]


@kernel("masked_scatter", "cpu")
def _cpu_masked_scatter(out, mask, src):
    m = np.broadcast_to(mask, out.shape)
    n = int(np.count_nonzero(m))
    out[m] = src.reshape(-1)[:n]


def _collapse(arr, dim, index):
    """(P, D, Q) and (P, L, Q) when ``arr`` is C-contiguous and matches ``index`` outside ``dim``, else None."""
    if not arr.flags.c_contiguous or arr.shape[:dim] != index.shape[:dim] or \
            arr.shape[dim + 1:] != index.shape[dim + 1:]:
        return None
    P = int(np.prod(arr.shape[:dim]))
    Q = int(np.prod(arr.shape[dim + 1:]))
    return (P, arr.shape[dim], Q), (P, index.shape[dim], Q)


@kernel("gather", "cpu")
@takes_bfloat16  # moves data (index_add: hot in embedding backward)
def _cpu_gather(arr, dim, index):
    out = np.empty(index.shape, arr.dtype)
    if index.size == 0:
        return out
    idx = np.ascontiguousarray(index, dtype=np.int64)
    shapes = _collapse(arr, dim, index)
    if shapes is not None and index.size >= _PAR_MIN and shapes[1][2] == 1 and shapes[1][0] > 1:
        P, L, _ = shapes[1]
        err = np.full(P, -1, np.int64)
        _nb_par()[3](_bits(arr).reshape(P, shapes[0][1]), idx.reshape(P, L), _bits(out).reshape(P, L), err)
        _raise_err(err, idx.reshape(-1))
        return out
    if shapes is not None and index.size >= _PAR_MIN and shapes[1][0] * shapes[1][2] > 1:
        P, L, Q = shapes[1]
        err = np.full(P * ((Q + _QBLOCK - 1) // _QBLOCK), -1, np.int64)
        _nb_par()[0](_bits(arr).reshape(shapes[0]), idx.reshape(shapes[1]), _bits(out).reshape(shapes[1]), _QBLOCK,
                     err)
        _raise_err(err, idx.reshape(-1))
        return out
    if shapes is not None:
        bad = _nb()[4](_bits(arr).reshape(shapes[0]), idx.reshape(shapes[1]), _bits(out).reshape(shapes[1]))
    else:
        flat, strides = _flat_out(arr)
        bad = _nb()[2](_bits(flat), strides, dim, arr.shape[dim], idx.reshape(-1), np.array(index.shape, np.int64),
                       _bits(out.reshape(-1)))
    if bad >= 0:
        raise OutOfBounds(int(idx.reshape(-1)[bad]))
    return out


@kernel("scatter", "cpu")
def _cpu_scatter(out, dim, index, src, reduce):
    if index.size == 0:
        return
    mode = {None: 0, "add": 1, "multiply": 2}[reduce]
    scalar = not isinstance(src, np.ndarray)
    if out.dtype in _NUMBA_DTYPES:
        idx = np.ascontiguousarray(index, dtype=np.int64)
        shapes = _collapse(out, dim, index)
        if scalar:
            srcf, step = np.array([src], dtype=out.dtype), 0
        else:
            sl = tuple(slice(0, n) for n in index.shape)
            srcf, step = np.ascontiguousarray(src[sl], dtype=out.dtype), 1
        if mode == 1 and index.size >= _PAR_MIN and _scatter_add_few_bins(out, idx, srcf, step):
            return
        if shapes is not None and index.size >= _PAR_MIN and shapes[1][2] == 1 and shapes[1][0] > 1:
            P, L, _ = shapes[1]
            err = np.full(P, -1, np.int64)
            _nb_par()[4](out.reshape(P, shapes[0][1]), idx.reshape(P, L), srcf.reshape((P, L) if step else (1, 1)),
                         step, mode, err)
            _raise_err(err, idx.reshape(-1))
            return
        if shapes is not None and index.size >= _PAR_MIN and shapes[1][0] * shapes[1][2] > 1:
            P, L, Q = shapes[1]
            err = np.full(P * ((Q + _QBLOCK - 1) // _QBLOCK), -1, np.int64)
            _nb_par()[1](out.reshape(shapes[0]), idx.reshape(shapes[1]), srcf.reshape(shapes[1] if step else (1, 1, 1)),
                         step, mode, _QBLOCK, err)
            _raise_err(err, idx.reshape(-1))
            return
        if shapes is not None:
            bad = _nb()[3](out.reshape(shapes[0]), idx.reshape(shapes[1]),
                           srcf.reshape(shapes[1] if step else (1, 1, 1)), step, mode)
        else:
            flat, strides = _flat_out(out)
            bad = _nb()[0](flat, strides, dim, out.shape[dim], idx.reshape(-1), srcf.reshape(-1), step,
                           np.array(index.shape, np.int64), mode)
        if bad >= 0:
            raise OutOfBounds(int(idx.reshape(-1)[bad]))
        return
    _check_host_bounds(index, out.shape[dim])
    coords = list(np.indices(index.shape, sparse=True))
    coords[dim] = index
    key = tuple(coords)
    vals = src if scalar else src[tuple(slice(0, n) for n in index.shape)]
    if mode == 0:
        out[key] = vals
    elif mode == 1:
        np.add.at(out, key, vals)
    else:
        np.multiply.at(out, key, vals)


@kernel("scatter_add", "cpu")
def _cpu_scatter_add(out, dim, index, src):
    _cpu_scatter(out, dim, index, src, "add")


_REDUCE_IDENTITY = {"sum": 0, "prod": 1, "mean": 0}


@kernel("scatter_reduce", "cpu")
def _cpu_scatter_reduce(out, dim, index, src, reduce, include_self):
    if index.size == 0:
        return
    _check_host_bounds(index, out.shape[dim])
    coords = list(np.indices(index.shape, sparse=True))
    coords[dim] = index
    key = tuple(coords)
    vals = src[tuple(slice(0, n) for n in index.shape)]
    if not include_self:
        if reduce in _REDUCE_IDENTITY:
            ident = _REDUCE_IDENTITY[reduce]
        elif out.dtype.kind == "f":
            ident = -np.inf if reduce == "amax" else np.inf
        else:
            info = np.iinfo(out.dtype) if out.dtype.kind in "iu" else None
            ident = (info.min if reduce == "amax" else info.max) if info else (reduce == "amin")
        out[key] = ident
    if reduce in ("sum", "mean"):
        np.add.at(out, key, vals)
        if reduce == "mean":
            counts = np.zeros(out.shape, np.int64)
            np.add.at(counts, key, 1)
            if include_self:
                counts += 1
            touched = counts > 0
            if out.dtype.kind == "f":
                np.divide(out, np.maximum(counts, 1), out=out, where=touched, casting="unsafe")
            else:
                np.floor_divide(out, np.maximum(counts, 1), out=out, where=touched, casting="unsafe")
    elif reduce == "prod":
        np.multiply.at(out, key, vals)
    elif reduce == "amax":
        np.maximum.at(out, key, vals)
    else:
        np.minimum.at(out, key, vals)


@kernel("index_select", "cpu")
@takes_bfloat16  # moves data (index_add: hot in embedding backward)
def _cpu_index_select(arr, dim, index):
    n = arr.shape[dim]
    out_shape = arr.shape[:dim] + index.shape + arr.shape[dim + 1:]
    if index.ndim == 1 and arr.flags.c_contiguous and index.size and arr.size and \
            arr.size // n * index.size >= _PAR_MIN:
        P = int(np.prod(arr.shape[:dim]))
        L = index.shape[0]
        out = np.empty(out_shape, arr.dtype)
        idx = np.ascontiguousarray(index, dtype=np.int64)
        if arr.ndim == 1:
            err = np.full(1, -1, np.int64)
            _nb_par()[7](_bits(arr), idx, _bits(out), err)
        else:
            err = np.full(L if P == 1 else P, -1, np.int64)
            _nb_par()[6](_bits(arr).reshape(P, n, -1), idx, _bits(out).reshape(P, L, -1), err)
        bad = err[err >= 0]
        if bad.size:
            raise OutOfBounds(int(idx[bad.min()]))
        return out
    if index.size:
        lo, hi = index.min(), index.max()
        if lo < 0 or hi >= arr.shape[dim]:
            raise OutOfBounds(int(lo) if lo < 0 else int(hi))
    return np.take(arr, index, axis=dim)


@kernel("index_add", "cpu")
@takes_bfloat16  # moves data (index_add: hot in embedding backward)
def _cpu_index_add(out, dim, index, src, alpha):
    if index.size == 0:
        return
    if out.dtype in _NUMBA_DTYPES:
        work = out if out.flags.c_contiguous else np.ascontiguousarray(out)
        P = int(np.prod(out.shape[:dim]))
        Q = int(np.prod(out.shape[dim + 1:]))
        src3 = np.ascontiguousarray(src, dtype=out.dtype).reshape(P, index.shape[0], Q)
        kargs = (work.reshape(P, out.shape[dim], Q), np.ascontiguousarray(index, dtype=np.int64), src3,
                 out.dtype.type(alpha))
        if src3.size >= _PAR_MIN and Q == 1 and P > 1:
            _nb_par()[5](kargs[0].reshape(P, out.shape[dim]), kargs[1], src3.reshape(P, -1), kargs[3])
        elif src3.size >= _PAR_MIN and P > 1:
            _nb_par()[2](*kargs, _QBLOCK)
        else:  # one row (P == 1): blocks over Q measured slower than the serial loop
            _nb()[1](*kargs)
        if work is not out:
            out[...] = work
        return
    key = (slice(None),) * dim + (index,)
    np.add.at(out, key, np.moveaxis(np.moveaxis(src, dim, 0) * alpha, 0, dim) if alpha != 1 else src)


@kernel("index_copy", "cpu")
def _cpu_index_copy(out, dim, index, src):
    out[(slice(None),) * dim + (index,)] = src


@kernel("index_fill", "cpu")
def _cpu_index_fill(out, dim, index, value):
    out[(slice(None),) * dim + (index,)] = value


@kernel("take", "cpu")
def _cpu_take(arr, index):
    return np.take(arr.reshape(-1), index)


@kernel("put", "cpu")
def _cpu_put(out, index, src, accumulate):
    flat = out.reshape(-1) if out.flags.c_contiguous else np.ascontiguousarray(out).reshape(-1)
    idx = index.reshape(-1)
    vals = src.reshape(-1)
    if accumulate:
        _accumulate(flat, (idx,), vals)
    else:
        flat[idx] = vals
    if not out.flags.c_contiguous:
        out[...] = flat.reshape(out.shape)
