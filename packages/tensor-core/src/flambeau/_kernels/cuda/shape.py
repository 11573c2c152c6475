"""CUDA kernels of the copying shape operators (conventions: the docstring of ``flambeau._ops.shape``;
CPU kernels in ``flambeau._kernels.cpu.shape``). Arrays are numba device arrays, possibly strided views.

Kernels:

- :func:`_remap_py`, one strided template for every operator whose output element reads one input
  element found dim by dim (or a fill value): ``reshape`` (a copy), ``repeat``, ``repeat_interleave``
  with an int, ``flip``, ``roll``, ``rot90``, ``tril``/``triu``, ``pad`` in every mode. Per output dim
  ``d`` a mode says how the output coordinate ``c`` gives the input one ``j`` (identity, shift with
  fill, reversal, modulo, division, reflection, clamp, an index array: the gathers of unique and
  repeat_interleave); the input strides are listed per output dim, so transpositions (``rot90``) are free.
- :func:`_cat_py`: ``cat`` and ``stack`` copy up to :data:`GROUP` inputs per launch (a tuple of
  flat device arrays indexed at run time); an input of another dtype is cast first.
- sort: rows of up to :func:`_tiles` ``[-1]`` elements are sorted by one block each, a bitonic
  network in shared memory over (key, index) pairs; longer rows are cut into such tiles, sorted the
  same way, then merged pairwise by :func:`_sort_merge_py` passes (each thread places one element
  by a binary search in the other run). The order is total (ties broken by the original index), so
  the sort is stable; NaN sorts as the largest value, as in torch. Values are gathered from the
  input at the sorted indices, so their bits are the input's. Keys compare in float32 for float16,
  int64 for integers and bool.
- unique / unique_consecutive: sort (elements; or slices along ``dim`` by merge passes of
  :func:`_slice_merge_py`), mark group starts, an inclusive scan (:func:`_scan_py`), then
  scatter. The number of unique values sizes the output: **one host synchronisation** reads it.
- ``repeat_interleave`` with a tensor of repeats: a scan of the repeats, **one host synchronisation**
  for the output size, a binary search per output position, a gather.
- ``one_hot``: one launch over the output; class values outside ``[0, num_classes)`` set the device
  error flag (Note [Device-side errors] in ``flambeau.cuda._sync``). ``num_classes=-1`` is inferred
  from the maximum, read with **one host synchronisation**, as torch does.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import (
    ERR_INDEX,
    be,
    bind_numba_cuda,
    c_elem_strides,
    elem_strides,
    error_flag,
    jit,
    launch_1d,
    launch_keyed,
    sim,
    stream,
)
from flambeau._kernels.cuda.core import contiguous, copy_into
from flambeau._ops._registry import kernel

__all__ = ["GROUP", "sort_rows", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

GROUP = 8  # inputs a cat launch copies

# remap modes: how output coordinate c gives input coordinate j along one dim (p: the dim's parameter)
IDENT, SHIFT, FLIP, MOD, DIV, REFLECT, CLAMP, TAKE = range(8)
STORAGE = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
_I64 = np.dtype(np.int64)


def _key_dtype(d: np.dtype) -> np.dtype:
    """The dtype sort keys compare in."""
    if d.kind == "f":
        return np.dtype(np.float64) if d == np.float64 else np.dtype(np.float32)
    return _I64


def _value_dtype(d: np.dtype) -> np.dtype:
    """The dtype a fill value is passed in (float16 scalars go as float32)."""
    return np.dtype(np.float32) if d == np.float16 else d


def _grid(n: int):
    grid, block = launch_1d(n)
    return grid, block, stream()


@functools.cache
def _jit(builder, *args):
    """The kernel ``cuda.jit`` makes of ``builder(*args)`` (cached; numba specialises it per argument types)."""
    bind_numba_cuda(globals())
    return jit(builder(*args))


@functools.cache
def _dev(fn):
    """``fn`` as a numba.cuda device function (cached)."""
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(fn)


def _merge_span(p, w, n):
    """For element ``p`` of a pass merging runs of ``w``: the other run ``[lo, hi)`` to search and
    the shift ``q`` (its destination is ``q`` plus the count of the other run's elements before it)."""
    s = (p // (2 * w)) * (2 * w)
    mid = min(s + w, n)
    if p < mid:
        return mid, min(s + 2 * w, n), p - mid
    return s, mid, p - mid


# --- remap: one input element (or a fill value) per output element ---------------------------------
def _remap_py(ot):
    bind_numba_cuda(globals())
    def remap(out, ost, a, ast, shape, mode, par, ext, idx, value, tri, diag, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        nd = len(shape)
        while i < n:
            r = i
            oo = 0
            oa = 0
            ok = True
            row = 0
            col = 0
            for d in range(nd - 1, -1, -1):
                sz = shape[d]
                c = r % sz
                r = r // sz
                oo += c * ost[d]
                if d == nd - 1:
                    col = c
                elif d == nd - 2:
                    row = c
                m = mode[d]
                e = ext[d]
                j = c
                if m == 1:
                    j = c - par[d]
                elif m == 2:
                    j = e - 1 - c
                elif m == 3:
                    j = (c - par[d]) % e
                elif m == 4:
                    j = c // par[d]
                elif m == 5:
                    j = c - par[d]
                    if j < 0:
                        j = -j
                    if j >= e:
                        j = 2 * (e - 1) - j
                elif m == 6:
                    j = min(max(c - par[d], 0), e - 1)
                elif m == 7:
                    j = idx[c]
                if j < 0 or j >= e:
                    ok = False
                oa += j * ast[d]
            if tri == 1 and col - row > diag:
                ok = False
            elif tri == 2 and col - row < diag:
                ok = False
            out[oo] = ot(a[oa]) if ok else ot(value)
            i += step

    return remap


def _remap(a, out_shape, in_ext, in_st, mode, par, value=0, tri=0, diag=0, idx=None):
    """A new C-contiguous array of ``out_shape``: output dim ``d`` reads input extent ``in_ext[d]``
    with element stride ``in_st[d]`` through ``mode[d]``/``par[d]`` (``TAKE``: the int64 device array
    ``idx`` maps the coordinate); ``value`` where out of range."""
    backend = be()
    out = backend.empty(out_shape, a.dtype)
    n = out.size
    if n == 0:
        return out
    nd = len(out_shape)
    if nd == 0:
        out_shape, in_ext, in_st, mode, par = (1,), (1,), (0,), (IDENT,), (0,)
    ost = c_elem_strides(out_shape)
    dt = np.dtype(a.dtype)
    if idx is None:
        idx = backend.empty((1,), _I64)
    _jit(_remap_py, dt.type)[_grid(n)](backend.flat_view(out), ost, backend.flat_view(a), tuple(in_st),
                                       tuple(out_shape), tuple(mode), tuple(par), tuple(in_ext), idx,
                                       _value_dtype(dt).type(value), tri, diag, n)
    return out


def _identity_remap(a, **kw):
    nd = a.ndim
    return _remap(a, tuple(a.shape), tuple(a.shape), elem_strides(a), (IDENT,) * nd, (0,) * nd, **kw)


def _flat(a):
    """A 1-d view of ``a``'s elements in C order (a contiguous copy first if needed)."""
    backend = be()
    if not backend.is_c_contiguous(a):
        a = contiguous(a)
    return backend.as_strided(backend.flat_view(a), (a.size,), (1,), 0)


def _shaped(flat, shape):
    """C-contiguous 1-d ``flat`` viewed as ``shape``."""
    return be().as_strided(flat, tuple(shape), c_elem_strides(tuple(shape)), 0)


@kernel("reshape", "cuda")
def reshape(arr, shape):
    """The copy a reshape falls back to: a C-contiguous array of ``shape``, ``arr``'s elements copied in C order
    through one view of it as ``arr``'s shape (a view's gradient of a transposed gradient, once per step and
    layer: no flat views in between)."""
    backend = be()
    out = backend.empty(tuple(shape), arr.dtype)
    if out.size:
        src_shape = tuple(arr.shape)
        copy_into(out if src_shape == out.shape else backend.as_strided(out, src_shape, c_elem_strides(src_shape), 0),
                  arr)
    return out


@kernel("repeat", "cuda")
def repeat(arr, repeats):
    repeats = tuple(int(r) for r in repeats)
    lead = len(repeats) - arr.ndim
    ext = (1,) * lead + tuple(arr.shape)
    st = (0,) * lead + elem_strides(arr)
    out_shape = tuple(n * r for n, r in zip(ext, repeats))
    return _remap(arr, out_shape, ext, st, (MOD,) * len(ext), (0,) * len(ext))


@kernel("flip", "cuda")
def flip(arr, dims):
    nd = arr.ndim
    mode = tuple(FLIP if d in dims else IDENT for d in range(nd))
    return _remap(arr, tuple(arr.shape), tuple(arr.shape), elem_strides(arr), mode, (0,) * nd)


@kernel("roll", "cuda")
def roll(arr, shifts, dims):
    if not dims:
        flat = _flat(arr)
        n = flat.size
        out = _remap(flat, (n,), (n,), (1,), (MOD,), (int(shifts[0]) % max(n, 1),))
        return _shaped(out, arr.shape)
    nd = arr.ndim
    par = [0] * nd
    for s, d in zip(shifts, dims):
        par[d] += int(s)
    par = [p % max(arr.shape[d], 1) for d, p in enumerate(par)]
    return _remap(arr, tuple(arr.shape), tuple(arr.shape), elem_strides(arr), (MOD,) * nd, tuple(par))


@kernel("rot90", "cuda")
def rot90(arr, k, dims):
    # numpy's rot90 as a flip and a transposition of a (extent, stride, flipped) list per dim
    d0, d1 = dims
    geo = [[n, s, False] for n, s in zip(arr.shape, elem_strides(arr))]
    k = int(k) % 4
    if k == 2:
        geo[d0][2] = not geo[d0][2]
        geo[d1][2] = not geo[d1][2]
    elif k == 1:
        geo[d1][2] = not geo[d1][2]
        geo[d0], geo[d1] = geo[d1], geo[d0]
    elif k == 3:
        geo[d0], geo[d1] = geo[d1], geo[d0]
        geo[d1][2] = not geo[d1][2]
    ext = tuple(g[0] for g in geo)
    mode = tuple(FLIP if g[2] else IDENT for g in geo)
    return _remap(arr, ext, ext, tuple(g[1] for g in geo), mode, (0,) * len(ext))


@kernel("tril", "cuda")
def tril(arr, diagonal):
    return _identity_remap(arr, tri=1, diag=int(diagonal))


@kernel("triu", "cuda")
def triu(arr, diagonal):
    return _identity_remap(arr, tri=2, diag=int(diagonal))


_PAD_MODES = {"constant": SHIFT, "reflect": REFLECT, "replicate": CLAMP, "circular": MOD}


@kernel("pad", "cuda")
def pad(arr, pairs, mode, value):
    m = _PAD_MODES[mode]
    shape = tuple(arr.shape)
    out_shape = tuple(n + a + b for n, (a, b) in zip(shape, pairs))
    modes = tuple(m if (a or b) else IDENT for a, b in pairs)
    return _remap(arr, out_shape, shape, elem_strides(arr), modes, tuple(a for a, _ in pairs), value=value)


# --- cat and stack -------------------------------------------------------------------------------
def _cat_py():
    bind_numba_cuda(globals())
    offsets3 = index_device("offsets3")
    offset = index_device("row_offset")

    def cat(out, ost, ins, ists, starts, k, cdim, base, gshape, cunit, n):
        # element i of the group's shape gshape: its position cd along cdim (cunit: 1 there, 0 elsewhere)
        # picks the input, whose own strides give the source offset
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            oo, cd, _ = offsets3(i, gshape, ost, cunit, cunit)
            j = 0
            while j + 1 < k and starts[j + 1] <= cd:
                j += 1
            st = ists[j]
            out[oo + base * ost[cdim]] = ins[j][offset(i, gshape, st) - starts[j] * st[cdim]]
            i += step

    return cat


def _cat_into(out, parts, dim: int) -> None:
    """Copy ``parts`` (``(array, shape, element strides)`` in out's dtype, non-empty along ``dim``)
    one after another along ``dim`` of the C-contiguous ``out``, :data:`GROUP` per launch."""
    backend = be()
    shape = tuple(out.shape)
    ost = c_elem_strides(shape)
    flat = backend.flat_arg  # (launch arguments only: no device-array object on a GPU)
    flat_out = flat(out)
    k = _jit(_cat_py)
    key = (np.dtype(out.dtype), len(shape))  # fixes every argument's type (the parts are of out's dtype)
    base = 0
    for g in range(0, len(parts), GROUP):
        group = parts[g:g + GROUP]
        starts = [0]
        for _, s, _ in group:
            starts.append(starts[-1] + s[dim])
        pad_n = GROUP - len(group)
        ins = tuple(flat(a) for a, _, _ in group) + (flat(group[-1][0]),) * pad_n
        ists = tuple(st for _, _, st in group) + (group[-1][2],) * pad_n
        starts = tuple(starts) + (starts[-1],) * pad_n
        gshape = shape[:dim] + (starts[-1],) + shape[dim + 1:]
        n = math.prod(gshape)
        cunit = tuple(int(d == dim) for d in range(len(shape)))
        launch_keyed(k, _grid(n), key, flat_out, ost, ins, ists, starts, len(group), dim, base, gshape, cunit, n)
        base += starts[-1]


def _as_dtype(a, dt: np.dtype):
    if np.dtype(a.dtype) == dt:
        return a
    out = be().empty(a.shape, dt)
    copy_into(out, a)
    return out


@kernel("cat", "cuda")
def cat(arrays, dim, np_dtype):
    dt = np.dtype(np_dtype)
    ref = tuple(arrays[0].shape)
    for a in arrays:
        s = tuple(a.shape)
        if len(s) != len(ref) or any(x != y for d, (x, y) in enumerate(zip(s, ref)) if d != dim):
            raise ValueError("all the input array dimensions except for the concatenation axis must match exactly")
    out_shape = ref[:dim] + (sum(a.shape[dim] for a in arrays),) + ref[dim + 1:]
    out = be().empty(out_shape, dt)
    if out.size:
        parts = []
        for a in arrays:
            if a.shape[dim]:
                a = _as_dtype(a, dt)
                parts.append((a, tuple(a.shape), elem_strides(a)))
        _cat_into(out, parts, dim)
    return out


@kernel("stack", "cuda")
def stack(arrays, dim, np_dtype):
    dt = np.dtype(np_dtype)
    ref = tuple(arrays[0].shape)
    out_shape = ref[:dim] + (len(arrays),) + ref[dim:]
    out = be().empty(out_shape, dt)
    if out.size:
        parts = []
        for a in arrays:
            a = _as_dtype(a, dt)
            st = elem_strides(a)
            parts.append((a, out_shape[:dim] + (1,) + out_shape[dim + 1:], st[:dim] + (0,) + st[dim:]))
        _cat_into(out, parts, dim)
    return out


# --- sort ------------------------------------------------------------------------------------------
def _tiles() -> tuple:
    """Row lengths the block sort handles (powers of two; a block has half as many threads)."""
    return (8, 16) if sim() else (128, 1024)


def _before(ka, ia, kb, ib, desc):
    """Whether (key ka, index ia) comes strictly before (kb, ib): NaN largest, ties by index."""
    an = ka != ka
    bn = kb != kb
    if an or bn:
        if an and bn:
            return ia < ib
        return an if desc else bn
    if ka == kb:
        return ia < ib
    return (ka < kb) != desc


def _sort_tile_py(kt, P):
    bind_numba_cuda(globals())
    before = _dev(_before)
    offset = index_device("row_offset")
    B = P // 2

    def sort_tile(a, kshape, ast, aes, n, T, desc, final, vout, ost, oes, iout, kbuf, ibuf):
        b = cuda.blockIdx.x
        t = cuda.threadIdx.x
        row = b // T
        lo = (b % T) * P
        keys = cuda.shared.array(P, kt)
        idx = cuda.shared.array(P, np.int64)
        ab = offset(row, kshape, ast)
        ob = offset(row, kshape, ost)
        for h in range(2):
            p = t + h * B
            g = lo + p
            if g < n:
                keys[p] = kt(a[ab + g * aes])
                idx[p] = g
            else:
                keys[p] = kt(0)
                idx[p] = n + p
        cuda.syncthreads()
        k = 2
        while k <= P:
            j = k // 2
            while j > 0:
                i = 2 * j * (t // j) + t % j
                m = i + j
                ka = keys[i]
                ia = idx[i]
                kb = keys[m]
                ib = idx[m]
                if (i & k) == 0:  # ascending half: m first when it comes before i (padding last)
                    swap = ia >= n and (ib < n or ib < ia) or ib < n and ia < n and before(kb, ib, ka, ia, desc)
                else:
                    swap = ib >= n and (ia < n or ia < ib) or ia < n and ib < n and before(ka, ia, kb, ib, desc)
                if swap:
                    keys[i] = kb
                    idx[i] = ib
                    keys[m] = ka
                    idx[m] = ia
                cuda.syncthreads()
                j //= 2
            k *= 2
        cnt = min(P, n - lo)
        for h in range(2):
            p = t + h * B
            if p < cnt:
                g = idx[p]
                if final:
                    vout[ob + p * oes] = a[ab + g * aes]
                    iout[ob + p * oes] = g
                else:
                    kbuf[row * n + lo + p] = keys[p]
                    ibuf[row * n + lo + p] = g

    return sort_tile


def _sort_merge_py():
    bind_numba_cuda(globals())
    before = _dev(_before)
    offset = index_device("row_offset")
    span = _dev(_merge_span)

    def sort_merge(kin, iin, kout, iout, n, w, desc, final, a, kshape, ast, aes, vout, ost, oes, total):
        g = cuda.grid(1)
        step = cuda.gridsize(1)
        while g < total:
            row = g // n
            p = g % n
            base = row * n
            ky = kin[base + p]
            iy = iin[base + p]
            lo, hi, q = span(p, w, n)
            while lo < hi:
                h = (lo + hi) // 2
                if before(kin[base + h], iin[base + h], ky, iy, desc):
                    lo = h + 1
                else:
                    hi = h
            dest = q + lo
            if final:
                ob = offset(row, kshape, ost)
                vout[ob + dest * oes] = a[offset(row, kshape, ast) + iy * aes]
                iout[ob + dest * oes] = iy
            else:
                kout[base + dest] = ky
                iout[base + dest] = iy
            g += step

    return sort_merge


def sort_rows(a, dim: int, descending: bool):
    """``(values, indices)``: ``a`` sorted along ``dim`` (C-contiguous, int64 indices)."""
    backend = be()
    shape = tuple(a.shape)
    dt = np.dtype(a.dtype)
    vout = backend.empty(shape, dt)
    iout = backend.empty(shape, _I64)
    n = shape[dim]
    if vout.size == 0:
        return vout, iout
    rows = vout.size // n
    kept = [d for d in range(len(shape)) if d != dim]
    ast_all = elem_strides(a)
    ost_all = c_elem_strides(shape)
    kshape = tuple(shape[d] for d in kept) or (1,)
    ast = tuple(ast_all[d] for d in kept) or (0,)
    ost = tuple(ost_all[d] for d in kept) or (0,)
    aes, oes = ast_all[dim], ost_all[dim]
    fa, fv, fi = backend.flat_view(a), backend.flat_view(vout), backend.flat_view(iout)
    s = stream()
    desc = bool(descending)
    tiles = _tiles()
    P = next((t for t in tiles if n <= t), tiles[-1])
    T = (n + P - 1) // P
    kdt = _key_dtype(dt)
    final = T == 1
    if final:
        kbuf, ibuf = backend.empty((1,), kdt), backend.empty((1,), _I64)
    else:
        kbuf, ibuf = backend.empty((rows * n,), kdt), backend.empty((rows * n,), _I64)
    _jit(_sort_tile_py, kdt.type, P)[rows * T, P // 2, s](fa, kshape, ast, aes, n, T, desc, final, fv, ost, oes, fi,
                                                       kbuf, ibuf)
    if final:
        return vout, iout
    merge = _jit(_sort_merge_py)
    k2, i2 = backend.empty((rows * n,), kdt), backend.empty((rows * n,), _I64)
    total = rows * n
    w = P
    while w < n:
        last = 2 * w >= n
        if last:
            merge[_grid(total)](kbuf, ibuf, k2, fi, n, w, desc, True, fa, kshape, ast, aes, fv, ost, oes, total)
        else:
            merge[_grid(total)](kbuf, ibuf, k2, i2, n, w, desc, False, fa, kshape, ast, aes, fv, ost, oes, total)
            kbuf, ibuf, k2, i2 = k2, i2, kbuf, ibuf
        w *= 2
    return vout, iout


@kernel("sort", "cuda")
def sort(arr, dim, descending, stable):
    return sort_rows(arr, dim, descending)


# --- scans, marks, gathers (unique, repeat_interleave) ---------------------------------------------
def _scan_py(B):
    bind_numba_cuda(globals())
    def scan(x, xs, n, out, sums):
        t = cuda.threadIdx.x
        b = cuda.blockIdx.x
        i = b * B + t
        buf = cuda.shared.array(B, np.int64)
        buf[t] = x[i * xs] if i < n else 0
        cuda.syncthreads()
        off = 1
        while off < B:
            v = buf[t - off] if t >= off else 0
            cuda.syncthreads()
            buf[t] += v
            cuda.syncthreads()
            off *= 2
        if i < n:
            out[i] = buf[t]
        if t == B - 1:
            sums[b] = buf[t]

    return scan


def _scan_add_py():
    bind_numba_cuda(globals())
    def scan_add(out, sums, B, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            b = i // B
            if b > 0:
                out[i] += sums[b - 1]
            i += step

    return scan_add


def _scan_block() -> int:
    return 8 if sim() else 256


def _scan(x, n: int, xs: int = 1):
    """The inclusive prefix sum (int64, length ``n``) of the flat device array ``x`` read with stride ``xs``."""
    backend = be()
    B = _scan_block()
    out = backend.empty((n,), _I64)
    if n == 0:
        return out
    nb = (n + B - 1) // B
    sums = backend.empty((nb,), _I64)
    _jit(_scan_py, B)[nb, B, stream()](x, xs, n, out, sums)
    if nb > 1:
        offs = _scan(sums, nb)
        _jit(_scan_add_py)[_grid(n)](out, offs, B, n)
    return out


def _last(x) -> int:
    """The last element of 1-d device array ``x``, read on the host (a synchronisation)."""
    n = x.shape[0]
    return int(be().to_numpy(be().as_strided(x, (1,), (1,), n - 1))[0])


def _take(a, idx, dim: int, m: int):
    """``a`` with its dim ``dim`` replaced by ``m`` entries picked by int64 ``idx`` (C-contiguous)."""
    shape = tuple(a.shape)
    nd = len(shape)
    mode = tuple(TAKE if d == dim else IDENT for d in range(nd))
    return _remap(a, shape[:dim] + (m,) + shape[dim + 1:], shape, elem_strides(a), mode, (0,) * nd, idx=idx)


def _repeat_index_py():
    bind_numba_cuda(globals())
    def repeat_index(cum, n, out, total):
        p = cuda.grid(1)
        step = cuda.gridsize(1)
        while p < total:
            lo = 0
            hi = n
            while lo < hi:
                h = (lo + hi) // 2
                if cum[h] <= p:
                    lo = h + 1
                else:
                    hi = h
            out[p] = lo
            p += step

    return repeat_index


@kernel("repeat_interleave", "cuda")
def repeat_interleave(arr, repeats, dim):
    """Int ``repeats``: a remap. A device array: a scan, **one host synchronisation** (the output size, and
    negative repeats are refused there), a gather."""
    if dim is None:
        arr = _flat(arr)
        dim = 0
    shape = tuple(arr.shape)
    n = shape[dim]
    nd = len(shape)
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        out_shape = shape[:dim] + (n * r,) + shape[dim + 1:]
        if r == 0:
            return be().empty(out_shape, arr.dtype)
        mode = tuple(DIV if d == dim else IDENT for d in range(nd))
        return _remap(arr, out_shape, shape, elem_strides(arr), mode, tuple(r if d == dim else 0 for d in range(nd)))
    backend = be()
    rs = elem_strides(repeats)[0] if repeats.shape[0] > 1 else 0
    flat = backend.flat_view(repeats)
    cum = _scan(flat, n, rs)
    total, neg = _host_max((backend.as_strided(cum, (1,), (1,), n - 1), (1,), (1,), 1), (flat, (rs,), (n,), -1)) \
        if n else (0, 0)
    if -neg < 0:
        raise RuntimeError("repeats can not be negative")
    idx = backend.empty((total,), _I64)
    if total:
        _jit(_repeat_index_py)[_grid(total)](cum, n, idx, total)
    return _take(arr, idx, dim, total)


def _mark_py():
    bind_numba_cuda(globals())
    offset = index_device("row_offset")

    def mark(flags, a, perm, use_perm, n, sd, rshape, rst, m, nan_eq):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            f = 1
            if i > 0:
                x = perm[i] if use_perm else i
                y = perm[i - 1] if use_perm else i - 1
                f = 0
                for e in range(m):
                    off = offset(e, rshape, rst)
                    u = a[x * sd + off]
                    v = a[y * sd + off]
                    if u != v and not (nan_eq and u != u and v != v):
                        f = 1
                        break
            flags[i] = f
            i += step

    return mark


def _slice_merge_py():
    bind_numba_cuda(globals())
    offset = index_device("row_offset")
    span = _dev(_merge_span)

    def slice_merge(pin, pout, n, w, a, sd, rshape, rst, m):
        g = cuda.grid(1)
        step = cuda.gridsize(1)
        while g < n:
            y = pin[g]
            lo, hi, q = span(g, w, n)
            while lo < hi:
                h = (lo + hi) // 2
                x = pin[h]
                res = x < y  # ties between equal slices: by index (stable)
                for k in range(m):
                    off = offset(k, rshape, rst)
                    u = a[x * sd + off]
                    v = a[y * sd + off]
                    if u < v:
                        res = True
                        break
                    if v < u:
                        res = False
                        break
                if res:
                    lo = h + 1
                else:
                    hi = h
            pout[q + lo] = y
            g += step

    return slice_merge


def _unique_scatter_py():
    bind_numba_cuda(globals())
    def unique_scatter(gid, perm, use_perm, n, sel, inv, counts):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            g = gid[i]
            src = perm[i] if use_perm else i
            inv[src] = g - 1
            if i == 0 or gid[i - 1] != g:
                sel[g - 1] = src
            if i == n - 1 or gid[i + 1] != g:  # a group's last element: its start by a binary search
                lo = 0
                hi = i
                while lo < hi:
                    h = (lo + hi) // 2
                    if gid[h] < g:
                        lo = h + 1
                    else:
                        hi = h
                counts[g - 1] = i + 1 - lo
            i += step

    return unique_scatter


def _slices(arr, dim):
    """``(flat array, n, slice stride, rest shape, rest strides, m)``: ``arr`` as ``n`` slices along
    ``dim`` (``dim`` None: the C-ordered elements, slices of one element)."""
    if dim is None:
        flat = _flat(arr)
        return flat, flat.size, 1, (1,), (0,), 1
    st = elem_strides(arr)
    shape = tuple(arr.shape)
    rest = [d for d in range(len(shape)) if d != dim]
    rshape = tuple(shape[d] for d in rest) or (1,)
    rst = tuple(st[d] for d in rest) or (0,)
    return be().flat_view(arr), shape[dim], st[dim], rshape, rst, math.prod(shape[d] for d in rest)


def _unique(arr, dim, sort: bool):
    """unique (``sort``) or unique_consecutive: ``(values, inverse, counts)``; one host synchronisation."""
    backend = be()
    flat, n, sd, rshape, rst, m = _slices(arr, dim)
    dt = np.dtype(arr.dtype)
    inv_shape = tuple(arr.shape) if dim is None else (n,)
    inverse = backend.empty(inv_shape, _I64)
    if n == 0:
        empty_shape = (0,) if dim is None else tuple(arr.shape)
        return backend.empty(empty_shape, dt), inverse, backend.empty((0,), _I64)
    perm = backend.empty((1,), _I64)
    if sort and dim is None:
        perm = sort_rows(flat, 0, False)[1]
    elif sort:
        perm = _arange(n)
        nxt = backend.empty((n,), _I64)
        w = 1
        merge = _jit(_slice_merge_py)
        while w < n:
            merge[_grid(n)](perm, nxt, n, w, flat, sd, rshape, rst, m)
            perm, nxt = nxt, perm
            w *= 2
    flags = backend.empty((n,), _I64)
    # nan_eq False: every NaN starts a group of its own (torch's unique and unique_consecutive)
    _jit(_mark_py)[_grid(n)](flags, flat, perm, sort, n, sd, rshape, rst, m, False)
    gid = _scan(flags, n)
    u_count = _last(gid)
    sel = backend.empty((u_count,), _I64)
    counts = backend.empty((u_count,), _I64)
    _jit(_unique_scatter_py)[_grid(n)](gid, perm, sort, n, sel, backend.flat_view(inverse), counts)
    values = _take(flat, sel, 0, u_count) if dim is None else _take(arr, sel, dim, u_count)
    return values, inverse, counts


def _iota_py():
    bind_numba_cuda(globals())
    def iota(out, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[i] = i
            i += step

    return iota


def _arange(n: int):
    """int64 ``0 .. n-1`` on the device."""
    out = be().empty((n,), _I64)
    if n:
        _jit(_iota_py)[_grid(n)](out, n)
    return out


@kernel("unique", "cuda")
def unique(arr, sorted, return_inverse, return_counts, dim):
    """Sorted unique values (``sorted`` is ignored: always sorted, as the CPU kernel); one host sync.
    Every NaN is a value of its own, as in torch."""
    return _unique(arr, dim, True)


@kernel("unique_consecutive", "cuda")
def unique_consecutive(arr, return_inverse, return_counts, dim):
    """Runs of equal consecutive values (or slices); one host synchronisation (the output size)."""
    return _unique(arr, dim, False)


# --- one_hot ---------------------------------------------------------------------------------------
def _one_hot_py():
    bind_numba_cuda(globals())
    offset = index_device("row_offset")

    def one_hot(out, a, ast, shape, C, n, err):
        g = cuda.grid(1)
        step = cuda.gridsize(1)
        while g < n:
            c = g % C
            v = a[offset(g // C, shape, ast)]
            if v < 0 or v >= C:
                if c == 0:
                    err[0] = ERR_INDEX
                    err[1] = v
                    err[2] = C
                out[g] = 0
            else:
                out[g] = 1 if v == c else 0
            g += step

    return one_hot


def _max_py():
    bind_numba_cuda(globals())
    offset = index_device("row_offset")

    def amax(res, slot, a, ast, shape, n, sign):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        best = res[slot]
        while i < n:
            best = max(best, sign * a[offset(i, shape, ast)])
            i += step
        cuda.atomic.max(res, slot, best)

    return amax


def _host_max(*items) -> list:
    """``max(sign * x)`` of each ``(flat int64 array, strides, shape, sign)`` of ``items`` (not empty),
    read on the host with one synchronisation."""
    backend = be()
    res = backend.full((len(items),), np.iinfo(np.int64).min, _I64)
    for slot, (a, ast, shape, sign) in enumerate(items):
        n = math.prod(shape)
        _jit(_max_py)[_grid(n)](res, slot, a, ast, shape, n, sign)
    return [int(v) for v in backend.to_numpy(res)]


@kernel("one_hot", "cuda")
def one_hot(arr, num_classes):
    """int64 one-hot of ``arr``; ``num_classes`` -1 is the maximum plus one (one host synchronisation).

    A class outside ``[0, num_classes)`` sets the device error flag (raised at the next synchronisation).
    """
    backend = be()
    shape = tuple(arr.shape)
    kshape = shape or (1,)
    ast = elem_strides(arr) or (0,)
    C = int(num_classes)
    if C == -1 and arr.size:
        C = _host_max((backend.flat_view(arr), ast, kshape, 1))[0] + 1
        if C < 0:
            raise RuntimeError("Class values must be non-negative.")
    out = backend.empty(shape + (C,), _I64)
    n = out.size
    if n:
        _jit(_one_hot_py)[_grid(n)](backend.flat_view(out), backend.flat_view(arr), ast, kshape, C, n, error_flag())
    return out


# --- concrete signatures (PTX test) ---------------------------------------------------------------
def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of every kernel template for every dtype it is launched with."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64 = types.int64
    idx = types.UniTuple(i64, ndim)
    arr_i = types.Array(i64, 1, "C")
    b = types.boolean
    cases = []
    for dn in STORAGE:
        dt = np.dtype(dn)
        t = from_dtype(dt)
        arr = types.Array(t, 1, "C")
        vt = from_dtype(_value_dtype(dt))
        sig = (arr, idx, arr, idx, idx, idx, idx, idx, arr_i, vt, i64, i64, i64)
        cases.append((f"remap:{dn}", _remap_py(dt.type), sig))
        sig = (arr, idx, types.UniTuple(arr, GROUP), types.UniTuple(idx, GROUP), types.UniTuple(i64, GROUP + 1), i64,
               i64, i64, idx, idx, i64)
        cases.append((f"cat:{dn}", _cat_py(), sig))
        kt = from_dtype(_key_dtype(dt))
        karr = types.Array(kt, 1, "C")
        for tile in _tiles():
            sig = (arr, idx, idx, i64, i64, i64, b, b, arr, idx, i64, arr_i, karr, arr_i)
            cases.append((f"sort_tile{tile}:{dn}", _sort_tile_py(_key_dtype(dt).type, tile), sig))
        sig = (karr, arr_i, karr, arr_i, i64, i64, b, b, arr, idx, idx, i64, arr, idx, i64, i64)
        cases.append((f"sort_merge:{dn}", _sort_merge_py(), sig))
        cases.append((f"mark:{dn}", _mark_py(), (arr_i, arr, arr_i, b, i64, i64, idx, idx, i64, b)))
        cases.append((f"slice_merge:{dn}", _slice_merge_py(), (arr_i, arr_i, i64, i64, arr, i64, idx, idx, i64)))
    cases.append((f"scan{_scan_block()}:int64", _scan_py(_scan_block()), (arr_i, i64, i64, arr_i, arr_i)))
    cases.append(("iota:int64", _iota_py(), (arr_i, i64)))
    cases.append(("scan_add:int64", _scan_add_py(), (arr_i, arr_i, i64, i64)))
    cases.append(("repeat_index:int64", _repeat_index_py(), (arr_i, i64, arr_i, i64)))
    cases.append(("unique_scatter:int64", _unique_scatter_py(), (arr_i, arr_i, b, i64, arr_i, arr_i, arr_i)))
    cases.append(("one_hot:int64", _one_hot_py(), (arr_i, arr_i, idx, idx, i64, i64, arr_i)))
    cases.append(("amax:int64", _max_py(), (arr_i, i64, arr_i, idx, idx, i64, i64)))
    return cases
