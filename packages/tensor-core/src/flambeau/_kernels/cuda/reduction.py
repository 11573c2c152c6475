"""CUDA kernels of the reductions: one tree-reduction template over a table of reduction ops, one
scan template, and per-row selection kernels for ``median`` and ``mode``.

Conventions: the CPU kernels' (``flambeau._ops.reduction``'s docstring). Arrays are numba device
arrays, possibly strided views (every template addresses flat arrays with element strides).

Note [Reduction ops]
    A reduction op is four device functions over a *state* ``(v, w, n)`` (two values in the
    accumulator dtype, one int64):
    ``init(q)`` the identity, ``load(x, k, q)`` the state of element ``x`` at position ``k`` of its
    row, ``combine(v, w, n, v2, w2, n2)`` (associative; for scans the second state is the later
    one) and ``fin(v, w, n, q)`` the output value; ``q`` is the op's runtime parameter (``p`` of a
    norm, the variance's correction). Most ops are monoids on ``v`` with ``n`` counting elements
    (an empty state has ``n == 0``: the combine skips it, so max/min need no identity and NaN
    elements of ``nansum`` load as empty); ``max``/``min``/``argmax`` carry ``(value, flag,
    index)`` with torch's first-occurrence rule (the scans' ``cummax``/``cummin`` take the later
    one), ``var``/``std`` carry Welford's ``(mean, m2, count)`` merged with Chan's formula and
    ``logsumexp`` carries ``(max, sum of exp(x - max))``. Floats accumulate in float32 (float64
    for float64), integers and bool in int64; NaN propagates as torch.

Note [Tree reduction]
    Rows of at most ``_SHORT_ROW`` elements, and at least ``_MANY_COLUMNS`` outputs adjacent in
    memory (a reduction over leading dims: one thread per output reads coalesced), reduce one per
    thread (:func:`_rows_py`; both thresholds are 4 under the simulator, so that samples exercise
    both paths); otherwise one block of ``B`` threads reduces one output element (``blockIdx.x``);
    a long row is split over ``P`` blocks (``blockIdx.y``) whose partial states a second launch of the same template
    combines (no host sync: the number of blocks depends on shapes only). Each thread combines a
    strided slice of the row, then the block combines its ``B`` states in shared memory down to
    one warp, and on a GPU the last 32 lanes combine with ``cuda.shfl_down_sync`` (under the
    simulator, which has no shuffles, the shared-memory tree goes down to one thread). Outputs side by
    side in memory that are too few for one thread each reduce in column tiles (Note [Column tiles]).

Scans (``cumsum``, ``cumprod``, ``cummax``, ``cummin``): one block per row walks the row in chunks
of ``B`` elements, each chunk scanned in shared memory (Hillis-Steele) and offset by the carry of
the chunks before it. ``median``: one block per row, a radix selection over order-preserving
integer keys (a pass over the row per 8 bits of the row's key range). ``mode``: one block per
row sorts the row's keys (a bitonic network in global scratch memory) and measures the runs.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import np_name, real_np, scalar_name
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import (
    COLUMN_TILE,
    REDUCE_BLOCK,
    be,
    bind_numba_cuda,
    c_elem_strides,
    coalesce,
    column_parts,
    column_tile,
    jit,
    launch_1d,
    launch_keyed,
    row_parts,
    sim,
    stream,
)
from flambeau._kernels.cuda.core import contiguous, real_pairs
from flambeau._kernels.cuda.elementwise import _add, _bitwise_and, _bitwise_or, _maximum, _minimum, _mul
from flambeau._ops._registry import kernel

__all__ = ["OPS", "reduce", "reduce_kernel", "rows_kernel", "columns_kernel", "scan_kernel", "sum_kernel",
           "mean_kernel", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

_i64 = np.int64
_FULL_MASK = 0xFFFFFFFF
_SHORT_ROW = 32  # rows of at most this many elements reduce one per thread, not one per block
_MANY_COLUMNS = 1 << 18  # as do this many outputs adjacent in memory (enough threads to fill a GPU)


# --- reduction ops (Note [Reduction ops]) --------------------------------------------------------
def _skip_empty(merge):
    """The combine of states where one with ``n == 0`` is empty: ``merge`` sees two non-empty ones."""
    def combine(v, w, n, v2, w2, n2):
        if n2 == 0:
            return v, w, n
        if n == 0:
            return v2, w2, n2
        return merge(v, w, n, v2, w2, n2)

    return combine


def _monoid(acc, zero, lo, op, fn):
    """The four functions of a monoid on ``v``: ``lo(x, q) -> (v, count)``, ``op(v, v2)``,
    ``fn(v, n, q)`` the output; ``zero`` is the value of an empty state."""
    def init(q):
        return acc(zero), acc(0), _i64(0)

    def load(x, k, q):
        v, c = lo(x, q)
        return v, acc(0), c

    def merge(v, w, n, v2, w2, n2):
        return op(v, v2), w, n + n2

    def fin(v, w, n, q):
        return fn(v, n, q)

    return init, load, _skip_empty(_dev(merge)), fin


def _val(v, n, q):
    return v


def _monoid_op(acc, zero, op, lo_kind="id", fn_kind="val"):
    """A monoid op from the names of its pieces (so the device functions close over ``acc``)."""
    dev = _dev

    def lo_id(x, q):
        return acc(x), _i64(1)

    def lo_nan(x, q):  # NaN loads as an empty state
        if x != x:
            return acc(0), _i64(0)
        return acc(x), _i64(1)

    def lo_nz(x, q):
        return acc(x != 0), _i64(1)

    def lo_abs(x, q):
        return acc(abs(acc(x))), _i64(1)

    def lo_sq(x, q):
        y = acc(x)
        return y * y, _i64(1)

    def lo_pow(x, q):
        return acc(abs(acc(x)) ** q), _i64(1)

    def fn_mean(v, n, q):
        if n == 0:
            return acc(math.nan)
        return acc(v / acc(n))

    def fn_sqrt(v, n, q):
        return acc(math.sqrt(v))

    def fn_root(v, n, q):
        return acc(v ** (1.0 / q))

    los = {"id": lo_id, "nan": lo_nan, "nz": lo_nz, "abs": lo_abs, "sq": lo_sq, "pow": lo_pow}
    fns = {"val": _val, "mean": fn_mean, "sqrt": fn_sqrt, "root": fn_root}
    return _monoid(acc, zero, dev(los[lo_kind]), dev(op), dev(fns[fn_kind]))


def _arg_op(acc, greater: bool, later: bool):
    """``(value, flag, index)``: the extreme with NaN first; ties to the first index (reductions,
    ``later=False``) or to the later state (scans, ``later=True``). ``flag`` 0 marks the empty state."""
    def init(q):
        return acc(0), acc(0), _i64(0)

    def load(x, k, q):
        return acc(x), acc(1), _i64(k)

    def combine(v, w, n, v2, w2, n2):
        if w2 == 0:
            return v, w, n
        if w == 0:
            return v2, w2, n2
        if later:
            if v2 != v2:
                return v2, w2, n2
            if v != v:
                return v, w, n
            if (v2 >= v) if greater else (v2 <= v):
                return v2, w2, n2
            return v, w, n
        if v != v:
            if v2 != v2 and n2 < n:
                return v2, w2, n2
            return v, w, n
        if v2 != v2:
            return v2, w2, n2
        if v == v2:
            return (v, w, n) if n <= n2 else (v2, w2, n2)
        if (v > v2) if greater else (v < v2):
            return v, w, n
        return v2, w2, n2

    def fin(v, w, n, q):
        return v

    return init, load, combine, fin


def _index_fin(ops):
    init, load, combine, _ = ops

    def fin(v, w, n, q):
        return n

    return init, load, combine, fin


def _var_op(acc, root: bool):
    """Welford's ``(mean, m2, count)``, merged with Chan's formula; ``q`` is the correction."""
    def init(q):
        return acc(0), acc(0), _i64(0)

    def load(x, k, q):
        return acc(x), acc(0), _i64(1)

    def merge(v, w, n, v2, w2, n2):
        tot = n + n2
        d = v2 - v
        f = acc(n2) / acc(tot)
        return acc(v + d * f), acc(w + w2 + d * d * acc(n) * f), tot

    combine = _skip_empty(_dev(merge))

    def fin(v, w, n, q):
        if v - v != 0:  # an infinite or NaN element: inf - inf, as the two-pass CPU result
            return acc(math.nan)
        den = n - q
        if den <= 0:  # torch divides by max(0, N - correction)
            r = acc(math.inf) if w > 0 else acc(math.nan)
        else:
            r = acc(w / den)
        if root:
            return acc(math.sqrt(r))
        return r

    return init, load, combine, fin


def _logsumexp_op(acc):
    """``(max, sum of exp(x - max), count)``: one pass; inf/NaN as the CPU (shift by 0)."""
    def init(q):
        return acc(-math.inf), acc(0), _i64(0)

    def load(x, k, q):
        return acc(x), acc(1), _i64(1)

    def merge(v, w, n, v2, w2, n2):
        m = v
        if v2 != v2 or (v == v and v2 > v):
            m = v2
        if m != m or m == math.inf or m == -math.inf:
            return m, acc(1), n + n2
        return m, acc(w * math.exp(v - m) + w2 * math.exp(v2 - m)), n + n2

    combine = _skip_empty(_dev(merge))

    def fin(v, w, n, q):
        if v != v or v == math.inf or v == -math.inf:
            return v
        return acc(math.log(w) + v)

    return init, load, combine, fin


# op name -> (factory of its python functions given the accumulator type, accumulator kind):
# "out" accumulates in the output dtype's accumulator, "in" in the input's, "f" a float.
@functools.cache
def _table():
    inf = math.inf
    return {
        "sum": (lambda acc: _monoid_op(acc, 0, _add), "out"),
        "nansum": (lambda acc: _monoid_op(acc, 0, _add, "nan"), "out"),
        "mean": (lambda acc: _monoid_op(acc, 0, _add, "id", "mean"), "out"),
        "nanmean": (lambda acc: _monoid_op(acc, 0, _add, "nan", "mean"), "out"),
        "prod": (lambda acc: _monoid_op(acc, 1, _mul), "out"),
        "amax": (lambda acc: _monoid_op(acc, 0, _maximum), "in"),
        "amin": (lambda acc: _monoid_op(acc, 0, _minimum), "in"),
        "all": (lambda acc: _monoid_op(acc, 1, _bitwise_and, "nz"), "int"),
        "any": (lambda acc: _monoid_op(acc, 0, _bitwise_or, "nz"), "int"),
        "count_nonzero": (lambda acc: _monoid_op(acc, 0, _add, "nz"), "int"),
        "norm2": (lambda acc: _monoid_op(acc, 0, _add, "sq", "sqrt"), "f"),
        "norm1": (lambda acc: _monoid_op(acc, 0, _add, "abs"), "f"),
        "norminf": (lambda acc: _monoid_op(acc, 0, _maximum, "abs"), "f"),
        "norm-inf": (lambda acc: _monoid_op(acc, inf, _minimum, "abs"), "f"),
        "norm0": (lambda acc: _monoid_op(acc, 0, _add, "nz"), "f"),
        "normp": (lambda acc: _monoid_op(acc, 0, _add, "pow", "root"), "f"),
        "max": (lambda acc: _arg_op(acc, True, False), "in"),
        "min": (lambda acc: _arg_op(acc, False, False), "in"),
        "argmax": (lambda acc: _index_fin(_arg_op(acc, True, False)), "in"),
        "argmin": (lambda acc: _index_fin(_arg_op(acc, False, False)), "in"),
        "cummax": (lambda acc: _arg_op(acc, True, True), "in"),
        "cummin": (lambda acc: _arg_op(acc, False, True), "in"),
        "var": (lambda acc: _var_op(acc, False), "f"),
        "std": (lambda acc: _var_op(acc, True), "f"),
        "logsumexp": (lambda acc: _logsumexp_op(acc), "f"),
    }


OPS = tuple(_table())


def _dev(fn):
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(fn)


@functools.cache
def _device_ops(name: str, acc: str):
    """The four device functions of reduction op ``name`` accumulating in numpy dtype ``acc`` (cached)."""
    return tuple(_dev(f) for f in _table()[name][0](np.dtype(acc).type))


# --- templates -----------------------------------------------------------------------------------
def _offset():
    return index_device("offset")


def _fold4_py(ops):
    """``fold(a, base, k, step, K, rshape, rst, q, v, w, n) -> (v, w, n)``: the state ``(v, w, n)`` with the
    elements ``k, k + step, k + 2 * step, k + 3 * step`` of a row (those below ``K``) combined into it in that
    order, all four loaded before any is combined (Note [Grouped loads] in elementwise): the loop step of
    the tree reduction's blocks and of the column tiles."""
    _, load, combine, _ = ops
    offset = _offset()

    def fold(a, base, k, step, K, rshape, rst, q, v, w, n):
        last = K - 1  # (lanes past the row load its last element, unused)
        xs = (a[offset(base, k, rshape, rst)], a[offset(base, min(k + step, last), rshape, rst)],
              a[offset(base, min(k + 2 * step, last), rshape, rst)],
              a[offset(base, min(k + 3 * step, last), rshape, rst)])
        for u in range(4):
            kk = k + u * step
            if kk < K:
                x, y, c = load(xs[u], kk, q)
                v, w, n = combine(v, w, n, x, y, c)
        return v, w, n

    return fold


@functools.cache
def _fold4(ops):
    """:func:`_fold4_py` of reduction op ``ops`` as a device function (cached)."""
    return _dev(_fold4_py(ops))


def _body_py(ops, acc, B, final: bool, from_parts: bool, two: bool, warp: bool):
    """Block body of the tree reduction (Note [Tree reduction]) over device functions ``ops``.

    Block ``(m, p)`` combines elements ``p*B + t, p*B + t + P*B, ...`` of row ``m`` (or, with
    ``from_parts``, partial states ``sv/sw/sn``), then writes ``out[m*P + p] = fin(state)`` (and
    the state's index into ``out2`` with ``two``) when ``final``, else the state into ``sv/sw/sn``.
    """
    init, _, combine, fin = ops
    offset = _offset()
    fold = _fold4(ops)
    stop = 32 if warp else 0

    def body(out, out2, sv, sw, sn, a, kshape, kst, rshape, rst, K, P, q, bv, bw, bn):
        m = cuda.blockIdx.x
        p = cuda.blockIdx.y
        t = cuda.threadIdx.x
        base = offset(0, m, kshape, kst)
        v, w, n = init(q)
        k = p * B + t
        step = P * B
        if from_parts:
            while k < K:
                off = offset(base, k, rshape, rst)
                v, w, n = combine(v, w, n, sv[off], sw[off], sn[off])
                k += step
        while k < K:
            v, w, n = fold(a, base, k, step, K, rshape, rst, q, v, w, n)
            k += 4 * step
        bv[t] = v
        bw[t] = w
        bn[t] = n
        cuda.syncthreads()
        width = B // 2
        while width > stop:
            if t < width:
                v, w, n = combine(bv[t], bw[t], bn[t], bv[t + width], bw[t + width], bn[t + width])
                bv[t] = v
                bw[t] = w
                bn[t] = n
            cuda.syncthreads()
            width //= 2
        if warp:
            if t < 32:
                v, w, n = combine(bv[t], bw[t], bn[t], bv[t + 32], bw[t + 32], bn[t + 32])
                lane = 16
                while lane > 0:
                    v2 = cuda.shfl_down_sync(_FULL_MASK, v, lane)
                    w2 = cuda.shfl_down_sync(_FULL_MASK, w, lane)
                    n2 = cuda.shfl_down_sync(_FULL_MASK, n, lane)
                    v, w, n = combine(v, w, n, v2, w2, n2)
                    lane //= 2
        else:
            v, w, n = bv[0], bw[0], bn[0]
        if t == 0:
            j = m * P + p
            if final:
                out[j] = fin(v, w, n, q)
                if two:
                    out2[j] = n
            else:
                sv[j] = v
                sw[j] = w
                sn[j] = n

    return body


def _reduce_py(name: str, acc: str, B: int, mode: str, two: bool = False):
    """The tree-reduction kernel of op ``name`` (Note [Tree reduction]). ``mode``: ``"final"`` (input
    to output), ``"partial"`` (input to partial states) or ``"parts"`` (partial states to output).

    ``kernel(out, out2, sv, sw, sn, a, kshape, kst, rshape, rst, K, P, q)``: output element ``m``
    (unravelled over ``kshape``, strides ``kst``) reduces the ``K`` elements unravelled over
    ``rshape`` with strides ``rst``; unused array arguments may be any array of the right dtype.
    """
    bind_numba_cuda(globals())
    at = np.dtype(acc).type
    body = _dev(_body_py(_device_ops(name, acc), at, B, mode != "partial", mode == "parts", two,
                         B >= 64 and not sim()))

    def reduce(out, out2, sv, sw, sn, a, kshape, kst, rshape, rst, K, P, q):
        bv = cuda.shared.array(B, at)
        bw = cuda.shared.array(B, at)
        bn = cuda.shared.array(B, _i64)
        body(out, out2, sv, sw, sn, a, kshape, kst, rshape, rst, K, P, q, bv, bw, bn)

    return reduce


def _sum_py(acc, B=REDUCE_BLOCK):
    """The sum as ``kernel(part, a, kshape, kst, rshape, rst, K, P)`` writing ``part[m*P + p]``: the
    template's ``final`` mode over ``sum`` (two launches of it add partial sums)."""
    bind_numba_cuda(globals())
    at = np.dtype(acc).type
    body = _dev(_body_py(_device_ops("sum", np.dtype(acc).name), at, B, True, False, False, B >= 64 and not sim()))

    def reduce_sum(part, a, kshape, kst, rshape, rst, K, P):
        bv = cuda.shared.array(B, at)
        bw = cuda.shared.array(B, at)
        bn = cuda.shared.array(B, _i64)
        body(part, part, part, part, part, a, kshape, kst, rshape, rst, K, P, 0.0, bv, bw, bn)

    return reduce_sum


def _rows_py(name: str, acc: str, two: bool):
    """Short rows, one thread per output: ``kernel(out, out2, a, kshape, kst, rshape, rst, K, M, q)``
    (the geometry of :func:`_reduce_py`; a grid-stride loop over the ``M`` outputs)."""
    bind_numba_cuda(globals())
    init, load, combine, fin = _device_ops(name, acc)
    offset = _offset()

    def rows(out, out2, a, kshape, kst, rshape, rst, K, M, q):
        m = cuda.grid(1)
        while m < M:
            base = offset(0, m, kshape, kst)
            v, w, n = init(q)
            for k in range(K):
                x, y, c = load(a[offset(base, k, rshape, rst)], k, q)
                v, w, n = combine(v, w, n, x, y, c)
            out[m] = fin(v, w, n, q)
            if two:
                out2[m] = n
            m += cuda.gridsize(1)

    return rows


# Note [Column tiles]
#     A reduction over leading dims whose outputs lie side by side in memory (the bias gradient of a linear
#     layer: a sum over the batch of a (batch, features) gradient) had two paths: one thread per output,
#     walking its column alone (coalesced, but with few outputs a GPU holds a few hundred threads, each
#     making thousands of dependent loads), or one block per output (its threads read a column, each load
#     from another row: 32 memory sectors per warp for 128 useful bytes). A tile is a block of ``TX``
#     adjacent outputs by ``TY`` threads each: a warp reads ``TX`` neighbouring elements of one row, a
#     thread combines the rows ``p * TY + ty, p * TY + ty + P * TY, ...`` of its column, the ``TY`` states
#     of a column combine in shared memory. A long column splits over ``P`` tiles (``blockIdx.y``, the
#     rows' rule of ``row_parts``) whose partial states, laid out ``(P, M)`` so that the second launch
#     (mode "parts") reads them coalesced too, combine as the other templates' do. Tiles take the columns
#     the tree reduction would split (two launches either way); shorter ones stay one block per output,
#     one launch, as many blocks as outputs.
def _columns_py(name: str, acc: str, TX: int, TY: int, mode: str, two: bool = False):
    """The column-tile reduction kernel of op ``name`` (Note [Column tiles]), ``mode`` as
    :func:`_reduce_py`'s: ``kernel(out, out2, sv, sw, sn, a, kshape, kst, rshape, rst, K, M, P, q)``."""
    bind_numba_cuda(globals())
    at = np.dtype(acc).type
    ops = _device_ops(name, acc)
    init, _, combine, fin = ops
    offset = _offset()
    fold = _fold4(ops)
    partial, parts = mode == "partial", mode == "parts"

    def columns(out, out2, sv, sw, sn, a, kshape, kst, rshape, rst, K, M, P, q):
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        m = cuda.blockIdx.x * TX + tx
        p = cuda.blockIdx.y
        bv = cuda.shared.array((TY, TX), at)
        bw = cuda.shared.array((TY, TX), at)
        bn = cuda.shared.array((TY, TX), _i64)
        v, w, n = init(q)
        if m < M:
            if parts:
                k = ty
                while k < P:
                    j = k * M + m
                    v, w, n = combine(v, w, n, sv[j], sw[j], sn[j])
                    k += TY
            else:
                base = offset(0, m, kshape, kst)
                step = P * TY
                k = p * TY + ty
                while k < K:
                    v, w, n = fold(a, base, k, step, K, rshape, rst, q, v, w, n)
                    k += 4 * step
        bv[ty, tx] = v
        bw[ty, tx] = w
        bn[ty, tx] = n
        cuda.syncthreads()
        if ty == 0 and m < M:
            for r in range(1, TY):
                v, w, n = combine(v, w, n, bv[r, tx], bw[r, tx], bn[r, tx])
            if partial:
                j = p * M + m
                sv[j] = v
                sw[j] = w
                sn[j] = n
            else:
                out[m] = fin(v, w, n, q)
                if two:
                    out2[m] = n

    return columns


@functools.cache
def columns_kernel(name: str, acc: str, mode: str, two: bool = False, tile: tuple = COLUMN_TILE):
    """The compiled column-tile reduction kernel (cached); see :func:`_columns_py`."""
    bind_numba_cuda(globals())
    return jit(_columns_py(name, acc, *tile, mode, two))


@functools.cache
def rows_kernel(name: str, acc: str, two: bool = False):
    """The compiled one-thread-per-output reduction kernel (cached); see :func:`_rows_py`."""
    bind_numba_cuda(globals())
    return jit(_rows_py(name, acc, two))


@functools.cache
def reduce_kernel(name: str, acc: str, mode: str, two: bool = False, block: int = REDUCE_BLOCK):
    """The compiled tree-reduction kernel (cached); see :func:`_reduce_py`."""
    bind_numba_cuda(globals())
    return jit(_reduce_py(name, acc, block, mode, two))


def _scan_py(name: str, acc: str, B: int, two: bool):
    """Per-row inclusive scan of op ``name``: ``kernel(out, out2, a, kshape, kst, kost, L, ast, ost, M)``.

    Row ``m`` (unravelled over ``kshape``; input strides ``kst``, output ``kost``) has ``L`` elements
    at input stride ``ast`` and output stride ``ost``; blocks stride over the ``M`` rows.
    """
    bind_numba_cuda(globals())
    at = np.dtype(acc).type
    init, load, combine, _ = _device_ops(name, acc)
    offset = _offset()

    def scan(out, out2, a, kshape, kst, kost, L, ast, ost, M):
        bv = cuda.shared.array(B, at)
        bw = cuda.shared.array(B, at)
        bn = cuda.shared.array(B, _i64)
        t = cuda.threadIdx.x
        m = cuda.blockIdx.x
        while m < M:
            base = offset(0, m, kshape, kst)
            obase = offset(0, m, kshape, kost)
            cv, cw, cn = init(0.0)
            c0 = 0
            while c0 < L:
                j = c0 + t
                v, w, n = init(0.0)
                if j < L:
                    v, w, n = load(a[base + j * ast], j, 0.0)
                bv[t] = v
                bw[t] = w
                bn[t] = n
                cuda.syncthreads()
                step = 1
                while step < B:
                    pv, pw, pn = v, w, n
                    if t >= step:
                        pv, pw, pn = bv[t - step], bw[t - step], bn[t - step]
                    cuda.syncthreads()
                    if t >= step:
                        v, w, n = combine(pv, pw, pn, v, w, n)
                        bv[t] = v
                        bw[t] = w
                        bn[t] = n
                    cuda.syncthreads()
                    step *= 2
                v, w, n = combine(cv, cw, cn, v, w, n)
                if j < L:
                    out[obase + j * ost] = v
                    if two:
                        out2[obase + j * ost] = n
                cv, cw, cn = combine(cv, cw, cn, bv[B - 1], bw[B - 1], bn[B - 1])
                cuda.syncthreads()
                c0 += B
            m += cuda.gridDim.x

    return scan


@functools.cache
def scan_kernel(name: str, acc: str, two: bool, block: int = REDUCE_BLOCK):
    """The compiled scan kernel (cached); see :func:`_scan_py`."""
    bind_numba_cuda(globals())
    return jit(_scan_py(name, acc, block, two))


def _block_reduce_py(B: int):
    bind_numba_cuda(globals())

    def block_reduce(sh, t, x, op):
        # every thread of the block calls it: the sum (op 0), min (1) or max (2) of the threads' x
        sh[t] = x
        cuda.syncthreads()
        width = B // 2
        while width > 0:
            if t < width:
                y = sh[t + width]
                if op == 0:
                    sh[t] += y
                elif (y < sh[t]) if op == 1 else (y > sh[t]):
                    sh[t] = y
            cuda.syncthreads()
            width //= 2
        r = sh[0]
        cuda.syncthreads()
        return r

    return block_reduce


@functools.cache
def _block_reduce(B: int):
    return _dev(_block_reduce_py(B))


def _key_py(is_float: bool, width: int):
    flip = (1 << (width - 1)) - 1
    nan_key = (1 << 63) - 2

    def key(a, bits, off):
        # an int64 ordered as the values: an integer itself; a float's bits (``bits``: a's memory as
        # signed ints of ``width`` bits), negative ones flipped, -0.0 as 0.0 and every NaN last
        if not is_float:
            return _i64(a[off])
        x = a[off]
        if x != x:
            return _i64(nan_key)
        if x == 0:
            return _i64(0)
        k = _i64(bits[off])
        if k < 0:
            k = k ^ flip
        return k

    return key


@functools.cache
def _key(is_float: bool, width: int):
    return _dev(_key_py(is_float, width))


def _median_py(is_float: bool, width: int, B: int):
    """Lower median per row: ``kernel(out, out2, a, bits, kshape, kst, rshape, rst, L, M)``.

    The first NaN if the row has one; else the element of rank ``(L - 1) // 2`` in (value, index)
    order, by a radix selection: int64 keys that order as the values (an integer's value, a
    float's bits, ``bits`` being ``a``'s memory as signed ints of ``width`` bits), taken relative
    to the row's smallest key (wrapping, then unsigned), are narrowed 8 bits per pass with a
    256-bin shared histogram (a pass per 8 bits of the key range); a block scan then finds the
    index among the equal keys.
    """
    bind_numba_cuda(globals())
    offset = _offset()
    block_reduce = _block_reduce(B)
    big = (1 << 63) - 1
    key = _key(is_float, width)

    def median(out, out2, a, bits, kshape, kst, rshape, rst, L, M):
        sh = cuda.shared.array(B, _i64)
        hist = cuda.shared.array(256, _i64)
        ctl = cuda.shared.array(2, _i64)
        t = cuda.threadIdx.x
        m = cuda.blockIdx.x
        while m < M:
            base = offset(0, m, kshape, kst)
            first = L
            lo = _i64(big)
            hi = -lo
            j = t
            while j < L:
                off = offset(base, j, rshape, rst)
                x = a[off]
                if x != x and j < first:
                    first = j
                kj = key(a, bits, off)
                lo = min(lo, kj)
                hi = max(hi, kj)
                j += B
            first = block_reduce(sh, t, _i64(first), 1)
            lo = block_reduce(sh, t, lo, 1)
            hi = block_reduce(sh, t, hi, 2)
            if first < L:
                if t == 0:
                    out[m] = a[offset(base, first, rshape, rst)]
                    out2[m] = first
            else:
                r = _i64((L - 1) // 2)
                span = hi - lo  # keys relative to lo, unsigned
                top = 0
                while top < 64 and (span >> top) != 0:
                    top += 1
                prefix = _i64(0)
                s = (top + 7) // 8 * 8 - 8
                while s >= 0:
                    for b in range(t, 256, B):
                        hist[b] = 0
                    cuda.syncthreads()
                    j = t
                    while j < L:
                        fk = key(a, bits, offset(base, j, rshape, rst)) - lo
                        if s + 8 >= 64 or (fk >> (s + 8)) == (prefix >> (s + 8)):
                            cuda.atomic.add(hist, (fk >> s) & 255, 1)
                        j += B
                    cuda.syncthreads()
                    if t == 0:
                        below = _i64(0)
                        b = 0
                        while b < 255 and below + hist[b] <= r:
                            below += hist[b]
                            b += 1
                        ctl[0] = prefix | (_i64(b) << s)
                        ctl[1] = r - below
                    cuda.syncthreads()
                    prefix = ctl[0]
                    r = ctl[1]
                    cuda.syncthreads()
                    s -= 8
                carry = _i64(0)  # the answer: the r-th element (by index) whose key is lo + prefix
                c0 = 0
                while c0 < L and carry <= r:
                    j = c0 + t
                    f = _i64(0)
                    off = base
                    if j < L:
                        off = offset(base, j, rshape, rst)
                        if key(a, bits, off) - lo == prefix:
                            f = _i64(1)
                    sh[t] = f
                    cuda.syncthreads()
                    step = 1
                    while step < B:  # inclusive scan of the flags
                        y = sh[t - step] if t >= step else _i64(0)
                        cuda.syncthreads()
                        sh[t] += y
                        cuda.syncthreads()
                        step *= 2
                    if f == 1 and carry + sh[t] - 1 == r:
                        out[m] = a[off]
                        out2[m] = j
                    carry += sh[B - 1]
                    cuda.syncthreads()
                    c0 += B
            m += cuda.gridDim.x

    return median


def _mode_py(is_float: bool, width: int, B: int):
    """Mode per row: ``kernel(out, out2, a, bits, kb, kshape, kst, L, Lp, ast, M)``: the most
    frequent value (the smallest of equally frequent ones; NaNs count as one value, the largest)
    and its last index. The row's keys (:func:`_key_py`) go to row ``m`` of ``kb`` (``Lp``, a power
    of two >= ``L``, per row), padded with the largest key, and are sorted there by a bitonic
    network; each thread then measures the runs starting at its positions.
    """
    bind_numba_cuda(globals())
    offset = _offset()
    block_reduce = _block_reduce(B)
    key = _key(is_float, width)
    big = (1 << 63) - 1

    def mode(out, out2, a, bits, kb, kshape, kst, L, Lp, ast, M):
        sc = cuda.shared.array(B, _i64)
        sk = cuda.shared.array(B, _i64)
        t = cuda.threadIdx.x
        m = cuda.blockIdx.x
        while m < M:
            base = offset(0, m, kshape, kst)
            row = cuda.blockIdx.x * Lp  # this block's sort space
            i = t
            while i < Lp:
                kb[row + i] = key(a, bits, base + i * ast) if i < L else _i64(big)
                i += B
            cuda.syncthreads()
            size = 2
            while size <= Lp:  # bitonic sort, ascending
                half = size // 2
                while half > 0:
                    i = t
                    while i < Lp:
                        o = i ^ half
                        if o > i:
                            x, y = kb[row + i], kb[row + o]
                            if (x > y) == ((i & size) == 0):
                                kb[row + i] = y
                                kb[row + o] = x
                        i += B
                    cuda.syncthreads()
                    half //= 2
                size *= 2
            bc = _i64(0)
            bk = _i64(big)
            i = t
            while i < L:
                ki = kb[row + i]
                if i == 0 or kb[row + i - 1] != ki:
                    e = i + 1
                    while e < L and kb[row + e] == ki:
                        e += 1
                    if e - i > bc or (e - i == bc and ki < bk):
                        bc = _i64(e - i)
                        bk = ki
                i += B
            sc[t] = bc
            sk[t] = bk
            cuda.syncthreads()
            half = B // 2
            while half > 0:
                if t < half:
                    c2, k2 = sc[t + half], sk[t + half]
                    if c2 > sc[t] or (c2 == sc[t] and k2 < sk[t]):
                        sc[t] = c2
                        sk[t] = k2
                cuda.syncthreads()
                half //= 2
            bk = sk[0]
            last = _i64(-1)
            i = t
            while i < L:
                if key(a, bits, base + i * ast) == bk:
                    last = _i64(i)
                i += B
            last = block_reduce(sc, t, last, 2)
            if t == 0:
                out[m] = a[base + last * ast]
                out2[m] = last
            cuda.syncthreads()
            m += cuda.gridDim.x

    return mode


@functools.cache
def _row_kernel(which: str, dtype: str, block: int):
    bind_numba_cuda(globals())
    d = np.dtype(dtype)
    py = _median_py if which == "median" else _mode_py
    return jit(py(d.kind == "f", d.itemsize * 8, block))


# --- launchers -----------------------------------------------------------------------------------
def _acc(d: np.dtype, kind: str, op: str) -> np.dtype:
    """The accumulator dtype of ``d`` (the output's or the input's dtype, by the op's kind)."""
    if kind == "int":
        return np.dtype(np.int64)
    if d.kind == "f":
        return np.dtype(np.float64) if d == np.float64 else np.dtype(np.float32)
    if kind == "f":
        raise RuntimeError(f'"{op}_cuda" not implemented for \'{scalar_name(d)}\'')
    if d.kind in "biu":
        return np.dtype(np.int64)
    raise RuntimeError(f'"{op}_cuda" not implemented for \'{scalar_name(d)}\'')


def _block() -> int:
    return 8 if sim() else REDUCE_BLOCK


def _geometry(shape: tuple, strides: tuple, item: int, dims, keepdim: bool):
    """``(out_shape, kshape, kst, rshape, rst, M, K)`` of reducing an array of ``shape``, byte ``strides`` and
    ``item`` bytes per element over ``dims`` (None: all)."""
    nd = len(shape)
    dims = tuple(range(nd)) if dims is None else tuple(sorted(d % nd for d in dims)) if nd else ()
    kept = [d for d in range(nd) if d not in dims]
    out_shape = tuple((1 if d in dims else shape[d]) for d in range(nd)) if keepdim \
        else tuple(shape[d] for d in kept)
    # adjacent dims that step through memory as one merge (a conv bias gradient's sum over (N, H, W) of an
    # NCHW gradient reduces over (N, H * W)): the kernels unravel positions with one division per dim
    kshape, kst = coalesce(tuple(shape[d] for d in kept), tuple(strides[d] // item for d in kept))
    rshape, rst = coalesce(tuple(shape[d] for d in dims), tuple(strides[d] // item for d in dims))
    return out_shape, kshape, kst, rshape, rst, math.prod(kshape), math.prod(rshape)


# Note [Reduction plans]: which launches a reduction makes (one row or column pass, or partial states then
# their combination), its geometry and its kernels depend only on the operation, the dtypes, the input's shape
# and strides and the reduced dims; a training step repeats the same few dozen reductions every step (a loss's
# mean, broadcast gradients summed back, a bias's gradient). They are worked out once per such key (about half
# of a reduction's host time).
@functools.lru_cache(maxsize=4096)
def _plan(name: str, shape: tuple, strides: tuple, dtype: np.dtype, dims, keepdim: bool, out_dtype: np.dtype,
          acc_dtype, two: bool) -> tuple:
    """``(out_shape, M, K, launches)`` of reducing an array of ``shape``, byte ``strides`` and ``dtype`` (Note
    [Reduction plans]); ``launches`` is ``(mode, kernels, config(s), key, geometry, P, acc)`` with ``mode`` one of
    "rows", "final", "split", "columns", "columns split"."""
    kind = _table()[name][1]
    acc = np.dtype(acc_dtype) if acc_dtype is not None else _acc(out_dtype if kind == "out" else dtype, kind, name)
    out_shape, kshape, kst, rshape, rst, M, K = _geometry(shape, strides, dtype.itemsize, dims, keepdim)
    geometry = (kshape, kst, rshape, rst)
    acc_name = np_name(acc)
    key = (out_dtype, np.dtype(np.int64) if two else out_dtype, dtype, len(kshape), len(rshape))
    B = _block()
    P = row_parts(K, B)
    short = K <= (4 if sim() else _SHORT_ROW)
    # many outputs adjacent in memory: one per thread reads coalesced (each block strides otherwise)
    columns = kst[-1] == 1 and M >= (4 if sim() else _MANY_COLUMNS)
    if not M:
        launch = None
    elif short or columns:
        launch = ("rows", rows_kernel(name, acc_name, two), launch_1d(M), key, geometry, 1, acc)
    elif kst[-1] == 1 and M > 1 and P > 1:  # outputs side by side, long columns: Note [Column tiles]
        tile = column_tile()
        P = column_parts(K, M)
        gx = (M + tile[0] - 1) // tile[0]
        if P == 1:
            launch = ("columns", columns_kernel(name, acc_name, "final", two, tile), ((gx, 1), tile), key, geometry,
                      1, acc)
        else:
            launch = ("columns split", (columns_kernel(name, acc_name, "partial", False, tile),
                                        columns_kernel(name, acc_name, "parts", two, tile)),
                      ((gx, P), tile, (gx, 1)), key, geometry, P, acc)
    elif P == 1:
        launch = ("final", reduce_kernel(name, acc_name, "final", two, B), ((M, 1), B), key, geometry, 1, acc)
    else:
        launch = ("split", (reduce_kernel(name, acc_name, "partial", False, B),
                            reduce_kernel(name, acc_name, "parts", two, B)), ((M, P), B, (M, 1)), key, geometry, P,
                  acc)
    return out_shape, M, K, launch


def reduce(name: str, a, dims, keepdim: bool, out_dtype, q: float = 0.0, acc_dtype=None, two: bool = False):
    """Reduce device array ``a`` over ``dims`` (None: every dim) with reduction op ``name``.

    Returns the output (``out_dtype``, shape per ``keepdim``), and with ``two`` also the int64
    indices the op's state carries. No host synchronisation.
    """
    backend = be()
    out_dtype = np.dtype(out_dtype)
    if dims is not None and dims.__class__ is not tuple:
        dims = tuple(dims)
    out_shape, M, K, launch = _plan(name, a.shape, a.strides, a.dtype, dims, keepdim, out_dtype, acc_dtype, two)
    shaped = backend.empty(out_shape, out_dtype)
    shaped_idx = backend.empty(out_shape, np.int64) if two else shaped
    if launch is not None:
        out, idx = backend.flat_arg(shaped), backend.flat_arg(shaped_idx) if two else None
        idx = out if idx is None else idx
        mode, kernels, config, key, (kshape, kst, rshape, rst), P, acc = launch
        s = stream()
        flat = backend.flat_arg(a)
        q = float(q)
        if mode == "rows":
            launch_keyed(kernels, (*config, s), key, out, idx, flat, kshape, kst, rshape, rst, K, M, q)
        elif mode == "columns":
            launch_keyed(kernels, (*config, s), key, out, idx, out, out, idx, flat, kshape, kst, rshape, rst, K, M, 1,
                         q)
        elif mode == "columns split":
            sv, sw, sn = _partial_states(P * M, acc)
            launch_keyed(kernels[0], (config[0], config[1], s), key,
                         out, idx, sv, sw, sn, flat, kshape, kst, rshape, rst, K, M, P, q)
            launch_keyed(kernels[1], (config[2], config[1], s), key,
                         out, idx, sv, sw, sn, flat, kshape, kst, rshape, rst, K, M, P, q)
        elif mode == "final":
            launch_keyed(kernels, (*config, s), key, out, idx, out, out, idx, flat, kshape, kst, rshape, rst, K, 1, q)
        else:
            sv, sw, sn = _partial_states(M * P, acc)
            launch_keyed(kernels[0], (config[0], config[1], s), key,
                         out, idx, sv, sw, sn, flat, kshape, kst, rshape, rst, K, P, q)
            launch_keyed(kernels[1], (config[2], config[1], s), key[:2],
                         out, idx, sv, sw, sn, sv, (M,), (P,), (P,), (1,), P, 1, q)
    if two:
        return shaped, shaped_idx
    return shaped


def _partial_states(count: int, acc):
    """``(sv, sw, sn)``: room for ``count`` partial states of a split reduction accumulating in ``acc`` (the
    values and weights in one allocation)."""
    backend = be()
    sv, sw = backend.flat_parts(backend.empty((2 * count,), acc), 2)
    return sv, sw, backend.empty((count,), np.int64)


def _reduce_sum(a, dims: tuple, keepdim: bool, out_dtype):
    """The sum of ``a`` over ``dims`` in ``out_dtype`` (for other CUDA families)."""
    return reduce("sum", a, dims, keepdim, out_dtype)


def _dims(a, dims) -> tuple | None:
    # None (or an empty tuple, as older fronts passed for 0-dim inputs) means every dimension.
    return None if dims is None or not a.ndim else tuple(dims)


def _complex_sum(name: str, a, dims, keepdim: bool, out_dtype):
    """``sum``/``mean`` of complex ``a``: the real and imaginary parts reduced side by side, as a real
    view with a last dim of 2 (the parts are independent sums), read back as complex."""
    backend = be()
    out_dtype = np.dtype(out_dtype)
    if name not in ("sum", "mean") or out_dtype.kind != "c":
        raise RuntimeError(f'"{name}_cuda" not implemented for \'{scalar_name(np.dtype(a.dtype))}\'')
    pairs = real_pairs(a)
    dims = tuple(range(a.ndim)) if dims is None else dims
    r = contiguous(reduce(name, pairs, dims, keepdim, real_np(out_dtype)))
    shape = tuple(r.shape[:-1])
    return backend.as_strided(backend.flat_view(r), shape, c_elem_strides(shape), 0, out_dtype)


def _sum_like(name):
    def launch(a, dims, keepdim, dtype):
        if a.dtype.kind == "c":
            return _complex_sum(name, a, _dims(a, dims), keepdim, dtype.np)
        op = name if a.dtype.kind == "f" or not name.startswith("nan") else name[3:]
        return reduce(op, a, _dims(a, dims), keepdim, dtype.np)

    launch.__name__ = f"{name}_kernel"
    launch.__doc__ = f"CUDA ``{name}``: ``kernel(a, dims, keepdim, dtype) -> array`` (Note [Reduction ops])."
    return kernel(name, "cuda")(launch)


sum_kernel = _sum_like("sum")
mean_kernel = _sum_like("mean")
_sum_like("nansum")
_sum_like("nanmean")
_sum_like("prod")


def _bool_out(a) -> np.dtype:
    return np.dtype(np.uint8) if a.dtype == np.uint8 else np.dtype(np.bool_)


def _plain(name, out_dtype):
    def launch(a, dims, keepdim):
        return reduce(name, a, _dims(a, dims), keepdim, out_dtype(a))

    launch.__name__ = f"{name}_kernel"
    return kernel(name, "cuda")(launch)


_plain("amax", lambda a: a.dtype)
_plain("amin", lambda a: a.dtype)
_plain("all", _bool_out)
_plain("any", _bool_out)
_plain("count_nonzero", lambda a: np.dtype(np.int64))
_plain("logsumexp", lambda a: a.dtype)


@kernel("aminmax", "cuda")
def aminmax_kernel(a, dims, keepdim):
    dims = _dims(a, dims)
    return reduce("amin", a, dims, keepdim, a.dtype), reduce("amax", a, dims, keepdim, a.dtype)


def _var_like(name):
    def launch(a, dims, correction, keepdim):
        return reduce(name, a, _dims(a, dims), keepdim, a.dtype, q=correction)

    launch.__name__ = f"{name}_kernel"
    return kernel(name, "cuda")(launch)


_var_like("var")
_var_like("std")


@kernel("norm", "cuda")
def norm_kernel(a, p, dims, keepdim):
    """CUDA vector norm: ``p`` 2, 1, inf, -inf, 0 or any other number (``sum(|x|**p)**(1/p)``)."""
    name = {2.0: "norm2", 1.0: "norm1", math.inf: "norminf", -math.inf: "norm-inf", 0.0: "norm0"}.get(float(p), "normp")
    return reduce(name, a, _dims(a, dims), keepdim, a.dtype, q=p)


def _extreme(name):
    def launch(a, dim, keepdim):
        if dim is None:
            return reduce(name, a, None, False, a.dtype)
        return reduce(name, a, (dim,), keepdim, a.dtype, two=True)

    launch.__name__ = f"{name}_kernel"
    return kernel(name, "cuda")(launch)


def _arg(name):
    def launch(a, dim, keepdim):
        dims = None if dim is None else (dim,)
        if dim is None and keepdim:
            out = reduce(name, a, None, False, np.int64)
            return be().as_strided(out, (1,) * a.ndim, (0,) * a.ndim, 0)
        return reduce(name, a, dims, keepdim, np.int64)

    launch.__name__ = f"{name}_kernel"
    return kernel(name, "cuda")(launch)


_extreme("max")
_extreme("min")
_arg("argmax")
_arg("argmin")


def _scan(name, a, dim: int, out_dtype, two: bool):
    backend = be()
    out_dtype = np.dtype(out_dtype)
    acc = _acc(out_dtype if name in ("sum", "prod") else a.dtype, "out", name)
    out = backend.empty(a.shape, out_dtype)
    idx = backend.empty(a.shape, np.int64) if two else out
    L = a.shape[dim]
    M = a.size // L if L else 0
    if M:
        item = a.dtype.itemsize
        kept = [d for d in range(a.ndim) if d != dim]
        kshape = tuple(a.shape[d] for d in kept) or (1,)
        kst = tuple(a.strides[d] // item for d in kept) or (0,)
        ost_all = c_elem_strides(a.shape)
        kost = tuple(ost_all[d] for d in kept) or (0,)
        B = _block()
        k = scan_kernel(name, np_name(acc), two, B)
        k[min(M, 65535), B, stream()](backend.flat_view(out), backend.flat_view(idx), backend.flat_view(a),
                                       kshape, kst, kost, L,
                                       a.strides[dim] // item, ost_all[dim], M)
    return (out, idx) if two else out


@kernel("cumsum", "cuda")
def cumsum_kernel(a, dim, dtype):
    return _scan("sum", a, dim, dtype.np, False)


@kernel("cumprod", "cuda")
def cumprod_kernel(a, dim, dtype):
    return _scan("prod", a, dim, dtype.np, False)


@kernel("cummax", "cuda")
def cummax_kernel(a, dim):
    return _scan("cummax", a, dim, a.dtype, True)


@kernel("cummin", "cuda")
def cummin_kernel(a, dim):
    return _scan("cummin", a, dim, a.dtype, True)


def _row_launch(which, a, dims, keepdim):
    """``(values, indices)`` of ``median``/``mode`` over ``dims`` (one block per output)."""
    backend = be()
    out_shape, kshape, kst, rshape, rst, M, L = _geometry(a.shape, a.strides, a.dtype.itemsize, dims, keepdim)
    out = backend.empty((M,), a.dtype)
    idx = backend.empty((M,), np.int64)
    _acc(a.dtype, "in", which)  # the dtype check
    if M:
        B = _block()
        k = _row_kernel(which, np_name(a.dtype), B)
        flat = backend.flat_view(a)
        bits = flat.view(f"int{a.dtype.itemsize * 8}") if a.dtype.kind == "f" else flat
        if which == "median":
            k[min(M, 65535), B, stream()](out, idx, flat, bits, kshape, kst, rshape, rst, L, M)
        else:
            Lp = 1 << max(L - 1, 0).bit_length()
            G = min(M, 65535, max(1, (1 << 23) // Lp))  # at most 64 MiB of sort space beyond one row
            kb = backend.empty((G * Lp,), np.int64)  # each block's sort space
            k[G, B, stream()](out, idx, flat, bits, kb, kshape, kst, L, Lp, rst[0], M)
    st = c_elem_strides(out_shape)
    return backend.as_strided(out, out_shape, st, 0), backend.as_strided(idx, out_shape, st, 0)


@kernel("median", "cuda")
def median_kernel(a, dim, keepdim):
    """CUDA lower median (NaN if the row has one, pointing at the first); quadratic in the row length."""
    if dim is not None:
        return _row_launch("median", a, (dim,), keepdim)
    if a.size == 0:
        return be().full((), math.nan, a.dtype)
    return _row_launch("median", a, None, False)[0]


@kernel("mode", "cuda")
def mode_kernel(a, dim, keepdim):
    """CUDA mode: the smallest most frequent value and its last index (a sort per row)."""
    return _row_launch("mode", a, (dim,), keepdim)


# --- concrete signatures (PTX test) ---------------------------------------------------------------
_IN_DTYPES = {"out": {"float32": ("float16", "float32"), "float64": ("float64", "float32"),
                      "int64": ("int32", "int64", "bool")},
              "in": {"float32": ("float16", "float32"), "float64": ("float64",), "int64": ("int32", "int64", "bool")},
              "int": {"int64": ("float16", "float32", "float64", "int64", "bool")},
              "f": {"float32": ("float16", "float32"), "float64": ("float64",)}}


def _out_dtype(name: str, acc: str, dn: str) -> str:
    if name in ("all", "any"):
        return "bool"
    if name in ("count_nonzero", "argmax", "argmin"):
        return "int64"
    if _table()[name][1] != "out":
        return dn
    # the output is the input's float dtype when it accumulates in acc (float16 sums), else acc
    return dn if np.dtype(dn).kind == "f" and _acc(np.dtype(dn), "out", name).name == acc else acc


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of every template for every op, accumulator and input
    dtype it is launched with (reductions in their three modes, scans, median, mode, the sum shim)."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    def arr(dn):
        return types.Array(from_dtype(np.dtype(dn)), 1, "C")

    idx = types.UniTuple(types.int64, ndim)
    i64, f64 = types.int64, types.float64
    cases = []
    for name, (_, kind) in _table().items():
        scan = name in ("cummax", "cummin")
        for acc, ins in _IN_DTYPES[kind].items():
            two = name in ("max", "min")
            for dn in ins:
                o = arr(_out_dtype(name, acc, dn))
                if scan:
                    sig = (o, arr("int64"), arr(dn), idx, idx, idx, i64, i64, i64, i64)
                    cases.append((f"scan:{name}:{acc}:{dn}", _scan_py(name, acc, REDUCE_BLOCK, True), sig))
                    continue
                sig = (o, arr("int64") if two else o, o, o, arr("int64"), arr(dn), idx, idx, idx, idx, i64, i64, f64)
                cases.append((f"reduce:{name}:{acc}:{dn}", _reduce_py(name, acc, REDUCE_BLOCK, "final", two), sig))
                sig = (o, arr("int64") if two else o, arr(dn), idx, idx, idx, idx, i64, i64, f64)
                cases.append((f"rows:{name}:{acc}:{dn}", _rows_py(name, acc, two), sig))
            if scan:
                continue
            a, n = arr(acc), arr("int64")
            o = arr(_out_dtype(name, acc, ins[0]))
            sig = (o, n, a, a, n, arr(ins[0]), idx, idx, idx, idx, i64, i64, f64)
            cases.append((f"reduce-partial:{name}:{acc}", _reduce_py(name, acc, REDUCE_BLOCK, "partial"), sig))
            b1 = types.UniTuple(types.int64, 1)
            sig = (o, n if two else o, a, a, n, a, b1, b1, b1, b1, i64, i64, f64)
            cases.append((f"reduce-parts:{name}:{acc}", _reduce_py(name, acc, REDUCE_BLOCK, "parts", two), sig))
            for mode in ("final", "partial", "parts"):
                sig = (o, n if two else o, a, a, n, arr(ins[0]), idx, idx, idx, idx, i64, i64, i64, f64)
                cases.append((f"columns-{mode}:{name}:{acc}", _columns_py(name, acc, *COLUMN_TILE, mode, two), sig))
    for name, acc, ins in (("sum", "float32", ("float16", "float32", "bool", "int64")),
                           ("sum", "float64", ("float64",)), ("sum", "int64", ("int32", "int64", "bool")),
                           ("prod", "float32", ("float16", "float32")), ("prod", "float64", ("float64",)),
                           ("prod", "int64", ("int32", "int64", "bool"))):
        for dn in ins:
            o = arr(dn if dn != "bool" and np.dtype(dn).kind == np.dtype(acc).kind else acc)
            sig = (o, arr("int64"), arr(dn), idx, idx, idx, i64, i64, i64, i64)
            cases.append((f"scan:{name}:{acc}:{dn}", _scan_py(name, acc, REDUCE_BLOCK, False), sig))
    for dn in ("float16", "float32", "float64", "int32", "int64"):
        a, d = arr(dn), np.dtype(dn)
        bits = arr(f"int{d.itemsize * 8}") if d.kind == "f" else a
        sig = (a, arr("int64"), a, bits, idx, idx, idx, idx, i64, i64)
        cases.append((f"median:{dn}", _median_py(d.kind == "f", d.itemsize * 8, REDUCE_BLOCK), sig))
        sig = (a, arr("int64"), a, bits, arr("int64"), idx, idx, i64, i64, i64, i64)
        cases.append((f"mode:{dn}", _mode_py(d.kind == "f", d.itemsize * 8, REDUCE_BLOCK), sig))
    for acc, ins in (("float32", ("float32",)), ("float64", ("float64", "float32")),
                     ("int64", ("int32", "int64", "bool"))):
        for dn in ins:
            sig = (arr(acc), arr(dn), idx, idx, idx, idx, i64, i64)
            cases.append((f"sum:{acc}:{dn}", _sum_py(np.dtype(acc).type), sig))
    return cases
