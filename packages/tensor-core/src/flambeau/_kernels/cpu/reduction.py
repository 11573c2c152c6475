"""CPU kernels of the reductions of ``flambeau._ops.reduction`` (whose docstring gives the calling
conventions): sums and means, extremes and their indices, variance, norms, logical reductions,
cumulative operations, median and mode, on numpy's reductions and a parallel numba full sum.

numba is imported on first use of the parallel sum (Note [Parallel full sums]), never at import.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from flambeau import _dtype as dt
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel
from flambeau._parallel import get_num_threads

_ndarray = np.ndarray
_add_reduce = np.add.reduce


def _count(a, dims) -> int:
    """Number of elements each output element reduces."""
    return a.size if dims is None else math.prod(a.shape[d] for d in dims)




# Note [Sums across rows]: numpy sums pairwise only along a C-contiguous array's innermost axis; over an outer
# axis (a (20000, 3) array's columns) it adds row after row into the running sums, in the result's dtype, so a
# float32 sum of 20,000 values of 0.1 came out 1999.66 (torch: 2000.0002, by cascade summation). Such float32 sums
# and means go in blocks of _ROW_BLOCK rows instead: each block's rows add up in float32 (numpy's vectorised
# row adds, at its speed), the blocks' sums in float64, rounded once at the end (2000.0002 here). Reductions over
# other dims than leading or trailing ones accumulate in float64 (numpy's casting loop: slower, and rare), and so
# do float32 cumulative sums, as torch's CPU kernels accumulate them.
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_ROW_BLOCK = 64


def _wide_acc(a, dims, acc):
    """``acc``, or float64 where a float32 reduction of ``a`` over ``dims`` would add rows one after the other
    and :func:`_row_blocks` does not take it (Note [Sums across rows])."""
    if acc != _F32 or a.ndim < 2 or dims is None and a.flags.c_contiguous:
        return acc
    nd = a.ndim
    reduced = sorted(d % nd for d in dims) if dims is not None else list(range(nd))
    leading, trailing = reduced == list(range(len(reduced))), reduced == list(range(nd - len(reduced), nd))
    # (leading dims of few rows add few terms: float32 is fine; more go through _row_blocks)
    return acc if (trailing or leading) and a.flags.c_contiguous else _F64


def _row_blocks(a, dims, keepdim):
    """The float32 sum of C-contiguous float32 ``a`` over its leading ``dims`` (more than _ROW_BLOCK rows) by blocks
    of rows (Note [Sums across rows]), or None for other reductions."""
    if a.dtype != _F32 or dims is None or not a.flags.c_contiguous or len(dims) >= a.ndim:
        return None
    lead = len(dims)
    if sorted(d % a.ndim for d in dims) != list(range(lead)):
        return None
    rows, cols = math.prod(a.shape[:lead]), math.prod(a.shape[lead:])
    if rows <= _ROW_BLOCK:
        return None
    flat = a.reshape(rows, cols)
    whole = rows // _ROW_BLOCK * _ROW_BLOCK
    blocks = _add_reduce(flat[:whole].reshape(-1, _ROW_BLOCK, cols), 1, _F32)
    total = _add_reduce(blocks, 0, _F64) + _add_reduce(flat[whole:], 0, _F64)
    shape = (1,) * lead + a.shape[lead:] if keepdim else a.shape[lead:]
    return total.astype(_F32).reshape(shape)


def _acc(a):
    """The accumulation dtype of ``a``'s reductions: float32 for float16 and bfloat16, else None (a's own)."""
    return np.float32 if a.dtype in dt.LOW_PRECISION_NP else None


def _asarray(r, npdt=None) -> np.ndarray:
    if r.__class__ is _ndarray and (npdt is None or r.dtype == npdt):
        return r
    return np.asarray(r, dtype=npdt)


# Note [Parallel full sums]: numpy sums on one thread; for large contiguous float tensors a
# numba kernel sums 4096-element blocks (vectorised, in the input dtype) on every thread and adds
# the block sums in float64, which is both faster and at least as accurate as numpy's pairwise sum.
_PARALLEL_MIN = 1 << 18


@functools.cache
def _numba_blocked_sum():
    import numba

    @numba.njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
    def blocked_sum(a, zero):
        # ``zero`` has a's dtype, so blocks accumulate (and vectorise) in it.
        n = a.shape[0]
        parts = np.empty((n + 4095) // 4096, np.float64)
        for b in numba.prange(parts.shape[0]):
            j = b * 4096
            block = a[j:min(j + 4096, n)]
            s = zero
            # from 0 over a slice, not range(j, end): numba cannot prove a shifted index is not
            # negative, keeps its wrap-around branch and LLVM does not vectorise (12x slower, measured)
            for k in range(block.shape[0]):
                s += block[k]
            parts[b] = s
        return parts.sum()

    return blocked_sum


def _parallel_sum(a, dims, npdt):
    """The full sum of ``a`` as a float64 Python number, or None where numpy should do it."""
    if dims is None and a.size >= _PARALLEL_MIN and a.dtype == npdt and npdt.kind == "f" and a.flags.c_contiguous:
        return _numba_blocked_sum()(a.reshape(-1), npdt.type(0))
    return None


# Note [Parallel sums that keep a block of dims]: the gradient of a bias sums over every dim but the
# channels (a convolution's ``(N, C, H, W)`` over 0, 2 and 3) or the features (a Linear's ``(N, F)``
# over 0). numpy does either on one thread (LeNet's 64x64x24x24 bias gradient: 0.5 ms, torch 0.04 ms).
# When the kept dims are one run of axes, a C-contiguous ``a`` is viewed as ``(A, K, B)`` (A before the
# run, K in it, B after it) and chunks of A go to numba's threads: each (a, k) row of B elements sums
# in a's dtype (vectorised, as the full sum's blocks), into float64 partial sums per chunk and k.
_CHUNKS_PER_THREAD = 4


@functools.cache
def _numba_block_sum():
    import numba

    @numba.njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
    def block_sum(a, chunks, zero):
        # -> (chunks, K) float64 partial sums (the caller adds them)
        A, K, B = a.shape
        parts = np.zeros((chunks, K), np.float64)
        for t in numba.prange(chunks):
            part = parts[t]
            for i in range(t * A // chunks, (t + 1) * A // chunks):
                rows = a[i]
                if B == 1:
                    for k in range(K):
                        part[k] += rows[k, 0]
                else:
                    for k in range(K):
                        row = rows[k]
                        s = zero
                        for j in range(B):
                            s += row[j]
                        part[k] += s
        return parts

    return block_sum


def _kept_block(shape, dims):
    """``(A, K, B)`` when the dims not in ``dims`` are one run of axes (at least one reduced), else None."""
    kept = [d for d in range(len(shape)) if d not in dims]
    if not kept or len(kept) == len(shape) or kept[-1] - kept[0] != len(kept) - 1:
        return None
    return math.prod(shape[:kept[0]]), math.prod(shape[kept[0]:kept[-1] + 1]), math.prod(shape[kept[-1] + 1:])


def _parallel_block_sum(a, dims, keepdim, npdt):
    """The sum of ``a`` over ``dims`` by Note [Parallel sums that keep a block of dims], or None."""
    if dims is None or a.dtype != npdt or npdt.kind != "f" or not a.flags.c_contiguous:
        return None
    block = _kept_block(a.shape, dims)
    if block is None or block[0] < 2:  # (A == 1: the rows of K are numpy's fast case)
        return None
    chunks = max(1, min(block[0], _CHUNKS_PER_THREAD * get_num_threads()))
    total = _numba_block_sum()(a.reshape(block), chunks, npdt.type(0)).sum(0).astype(npdt)
    shape = tuple(1 if d in dims else n for d, n in enumerate(a.shape)) if keepdim else \
        tuple(n for d, n in enumerate(a.shape) if d not in dims)
    return total.reshape(shape)


@kernel("sum", "cpu")
@takes_bfloat16  # accumulates in dtype.compute
def _k_sum(a, dims, keepdim, dtype):
    if dtype.compute is not dtype:  # accumulate half and bfloat16 in float32 as torch does
        return _asarray(_add_reduce(a, dims, dtype.compute.np, None, keepdim), dtype.np)
    if a.size >= _PARALLEL_MIN:
        total = _parallel_sum(a, dims, dtype.np)
        if total is not None:
            return np.full((1,) * a.ndim if keepdim else (), total, dtype.np)
        r = _parallel_block_sum(a, dims, keepdim, dtype.np)
        if r is not None:
            return r
    r = _row_blocks(a, dims, keepdim) if dtype.np == _F32 else None
    if r is not None:
        return r
    acc = _wide_acc(a, dims, dtype.np)
    r = _add_reduce(a, dims, acc, None, keepdim)
    if acc is not dtype.np:
        return _asarray(r, dtype.np)
    return r if r.__class__ is _ndarray else np.asarray(r)


@kernel("nansum", "cpu")
def _k_nansum(a, dims, keepdim, dtype):
    if a.dtype.kind != "f":
        return _k_sum(a, dims, keepdim, dtype)
    acc = dtype.compute.np
    return _asarray(np.nansum(a, axis=dims, dtype=acc, keepdims=keepdim), dtype.np)


@kernel("mean", "cpu")
@takes_bfloat16  # accumulates in dtype.compute
def _k_mean(a, dims, keepdim, dtype):
    acc = np.dtype(dtype.compute.np)
    n = _count(a, dims)
    if n >= _PARALLEL_MIN:
        total = _parallel_sum(a, dims, dtype.np)
        if total is not None:
            return np.full((1,) * a.ndim if keepdim else (), total / n, dtype.np)
    total = _row_blocks(a, dims, keepdim) if dtype.np == _F32 else None
    if total is None:
        acc = _wide_acc(a, dims, acc)
        total = _add_reduce(a, dims, acc, None, keepdim)
    if n == 0:  # torch quietly gives NaN
        with np.errstate(all="ignore"):
            return _asarray(np.true_divide(total, 0, dtype=acc), dtype.np)
    r = np.true_divide(total, n, dtype=acc)
    return r if r.__class__ is _ndarray and r.dtype == dtype.np else _asarray(r, dtype.np)


@kernel("nanmean", "cpu")
def _k_nanmean(a, dims, keepdim, dtype):
    acc = dtype.compute.np
    with np.errstate(all="ignore"):
        mask = ~np.isnan(a)
        total = np.sum(a, axis=dims, dtype=acc, keepdims=keepdim, where=mask)
        count = np.count_nonzero(mask, axis=dims, keepdims=keepdim)
        return _asarray(total / count, dtype.np)


@kernel("prod", "cpu")
@takes_bfloat16  # accumulates in dtype.compute
def _k_prod(a, dims, keepdim, dtype):
    acc = dtype.compute.np
    return _asarray(np.prod(a, axis=dims, dtype=acc, keepdims=keepdim), dtype.np)


@kernel("amax", "cpu")
def _k_amax(a, dims, keepdim):
    return _asarray(np.amax(a, axis=dims, keepdims=keepdim))


@kernel("amin", "cpu")
def _k_amin(a, dims, keepdim):
    return _asarray(np.amin(a, axis=dims, keepdims=keepdim))


@kernel("all", "cpu")
def _k_all(a, dims, keepdim):
    r = _asarray(np.all(a, axis=dims, keepdims=keepdim))
    return r.astype(np.uint8) if a.dtype == np.uint8 else r


@kernel("any", "cpu")
def _k_any(a, dims, keepdim):
    r = _asarray(np.any(a, axis=dims, keepdims=keepdim))
    return r.astype(np.uint8) if a.dtype == np.uint8 else r


@kernel("count_nonzero", "cpu")
def _k_count_nonzero(a, dims, keepdim):
    return _asarray(np.count_nonzero(a, axis=dims, keepdims=keepdim), np.int64)


@kernel("logsumexp", "cpu")
def _k_logsumexp(a, dims, keepdim):
    with np.errstate(all="ignore"):
        m = np.amax(a, axis=dims, keepdims=True, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0).astype(a.dtype, copy=False)
        r = np.log(np.sum(np.exp(a - m), axis=dims, keepdims=True)) + m
    return r if keepdim else _asarray(np.squeeze(r, axis=dims))


@kernel("var", "cpu")
def _k_var(a, dims, correction, keepdim):
    acc, out_dt = _acc(a), dt.real_np(a.dtype)
    if _count(a, dims) > correction:
        return _asarray(np.var(a, axis=dims, ddof=correction, keepdims=keepdim, dtype=acc), out_dt)
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # numpy warns about dof <= 0; torch gives NaN/inf
        warnings.simplefilter("ignore", RuntimeWarning)
        return _asarray(np.var(a, axis=dims, ddof=correction, keepdims=keepdim, dtype=acc), out_dt)


@kernel("std", "cpu")
def _k_std(a, dims, correction, keepdim):
    r = _k_var(a, dims, correction, keepdim)
    return np.sqrt(r, out=r)


@kernel("norm", "cpu")
def _k_norm(a, p, dims, keepdim):
    with np.errstate(all="ignore"):
        acc = _acc(a)
        if a.dtype.kind == "c":  # the norms of complex numbers are those of their moduli
            a = np.abs(a)
        if p == 2:
            r = np.sqrt(np.sum(np.square(a, dtype=acc), axis=dims, keepdims=keepdim))
        elif p == 1:
            r = np.sum(np.abs(a), axis=dims, keepdims=keepdim, dtype=acc)
        elif p == math.inf:
            r = np.amax(np.abs(a), axis=dims, keepdims=keepdim, initial=0)
        elif p == -math.inf:
            r = np.amin(np.abs(a), axis=dims, keepdims=keepdim, initial=np.inf)
        elif p == 0:
            r = np.count_nonzero(a, axis=dims, keepdims=keepdim)
        else:
            r = np.sum(np.abs(a, dtype=acc) ** p, axis=dims, keepdims=keepdim) ** (1.0 / p)
    return _asarray(r, dt.real_np(a.dtype))


def _extreme_kernel(ufunc, arg):
    reduce = ufunc.reduce

    def extreme(a, dim, keepdim):
        if dim is None:
            return _asarray(reduce(a, None))
        # Two C-level passes beat one argmax plus take_along_axis (a Python-level gather); both
        # pick the first NaN, so values and indices agree.
        vals = _asarray(reduce(a, dim, None, None, keepdim))
        idx = _asarray(arg(a, axis=dim, keepdims=keepdim), np.int64)
        return vals, idx

    return extreme


def _arg(fn):
    def arg_kernel(a, dim, keepdim):
        if dim is None:
            r = fn(a)
            return np.full((1,) * a.ndim if keepdim else (), r, dtype=np.int64)
        return _asarray(fn(a, axis=dim, keepdims=keepdim), np.int64)

    return arg_kernel


kernel("max", "cpu")(_extreme_kernel(np.maximum, np.argmax))
kernel("min", "cpu")(_extreme_kernel(np.minimum, np.argmin))
kernel("argmax", "cpu")(_arg(np.argmax))
kernel("argmin", "cpu")(_arg(np.argmin))


@kernel("aminmax", "cpu")
def _k_aminmax(a, dims, keepdim):
    return (_asarray(np.amin(a, axis=dims, keepdims=keepdim)), _asarray(np.amax(a, axis=dims, keepdims=keepdim)))


@kernel("cumsum", "cpu")
def _k_cumsum(a, dim, dtype):
    acc = np.dtype(dtype.compute.np)
    if acc == _F32:  # Note [Sums across rows]
        acc = _F64
    return _asarray(np.cumsum(a, axis=dim, dtype=acc), dtype.np)


@kernel("cumprod", "cpu")
def _k_cumprod(a, dim, dtype):
    acc = dtype.compute.np
    return _asarray(np.cumprod(a, axis=dim, dtype=acc), dtype.np)


def _cum_extreme(ufunc):
    def cum_extreme(a, dim):
        vals = ufunc.accumulate(a, axis=dim)
        # The index of the latest element equal to the running extreme (torch's >= / <= rule);
        # a NaN becomes the extreme and keeps it, and every later NaN takes over its index.
        hit = a == vals
        if a.dtype.kind == "f":
            hit |= np.isnan(a)
        shape = [1] * a.ndim
        shape[dim] = a.shape[dim]
        pos = np.arange(a.shape[dim], dtype=np.int64).reshape(shape)
        idx = np.maximum.accumulate(np.where(hit, pos, 0), axis=dim)
        return vals, idx

    return cum_extreme


kernel("cummax", "cpu")(_cum_extreme(np.maximum))
kernel("cummin", "cpu")(_cum_extreme(np.minimum))


@kernel("median", "cpu")
def _k_median(a, dim, keepdim):
    if dim is not None:
        return _median_dim(a, dim, keepdim)
    flat = a.reshape(-1)
    if flat.size == 0:
        return np.asarray(np.nan, dtype=a.dtype)
    if a.dtype.kind == "f" and np.isnan(flat).any():
        return np.asarray(np.nan, dtype=a.dtype)
    k = (flat.size - 1) // 2
    return _asarray(np.partition(flat, k)[k], a.dtype)


def _median_dim(a, dim, keepdim):
    k = (a.shape[dim] - 1) // 2
    idx = np.take(np.argpartition(a, k, axis=dim), [k], axis=dim)
    if a.dtype.kind == "f":
        nans = np.isnan(a)
        has = nans.any(axis=dim, keepdims=True)
        if has.any():  # torch propagates NaN and points at the first one
            idx = np.where(has, np.argmax(nans, axis=dim, keepdims=True), idx)
    vals = np.take_along_axis(a, idx, axis=dim)
    if not keepdim:
        idx, vals = idx.squeeze(dim), vals.squeeze(dim)
    return vals, idx.astype(np.int64, copy=False)


@kernel("mode", "cpu")
def _k_mode(a, dim, keepdim):
    moved = np.moveaxis(a, dim, -1)
    n = moved.shape[-1]
    rows = moved.reshape(-1, n)
    vals = np.empty(rows.shape[0], a.dtype)
    idx = np.empty(rows.shape[0], np.int64)
    for i, row in enumerate(rows):
        uniq, counts = np.unique(row, return_counts=True)
        v = uniq[np.argmax(counts)]  # the smallest of the most frequent values
        vals[i] = v
        idx[i] = n - 1 - np.argmax(row[::-1] == v)  # torch returns its last index
    shape = moved.shape[:-1]
    vals, idx = vals.reshape(shape), idx.reshape(shape)
    if keepdim:
        vals, idx = np.expand_dims(vals, dim), np.expand_dims(idx, dim)
    return vals, idx
