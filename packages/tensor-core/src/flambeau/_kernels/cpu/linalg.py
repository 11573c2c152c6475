"""CPU kernels of the linear algebra of ``flambeau._ops.linalg`` (whose docstring gives the calling
conventions): matmul and its relatives on numpy's BLAS, einsum, tensordot, trace and the diagonals.

Products run on numpy's BLAS: ``np.matmul`` on operands whose matrices BLAS can read directly
(C- or F-ordered, so transposed views pass without a copy); other strided operands are made
contiguous first, because numpy's non-BLAS loop is an order of magnitude slower than a copy.
float16 and bfloat16 products accumulate in float32 and are rounded once, as torch's are
(:func:`_through_float32`, Note [Compute dtype] in ``flambeau._dtype``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau import _dtype as dt
from flambeau import _parallel
from flambeau._blas import blas_is_controllable, single_threaded_blas
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel

_ndarray = np.ndarray
# Below this many elements numpy's own loop is as fast as BLAS: operands are passed as they are.
_SMALL = 4096


def _blas_ready(a: np.ndarray) -> np.ndarray:
    """``a`` if BLAS can read its matrices (or vectors) in place, else a C-contiguous copy."""
    if a.ndim == 0:
        return a
    item = a.itemsize
    s = a.strides
    if a.ndim == 1:
        return a if s[0] == item or a.shape[0] <= 1 else np.ascontiguousarray(a)
    r, c = a.shape[-2:]
    if (s[-1] == item or c <= 1) and s[-2] % item == 0 and s[-2] >= c * item:
        return a
    if (s[-2] == item or r <= 1) and s[-1] % item == 0 and s[-1] >= r * item:
        return a
    return np.ascontiguousarray(a)


def _through_float32(fn):
    """Wrap a product kernel so that float16 and bfloat16 operands (the dtype of the first array
    argument decides) are computed in float32 and the result rounded back once."""

    @functools.wraps(fn)
    def product(*args):
        low = next((x.dtype for x in args if x.__class__ is _ndarray), None)
        if low not in dt.LOW_PRECISION_NP:
            return fn(*args)
        r = fn(*(x.astype(np.float32) if x.__class__ is _ndarray else x for x in args))
        return r.astype(low)

    return takes_bfloat16(product)  # its own float32 routing, for float16 too


def _blas_operands(fn):
    def product(a, b):
        if a.size + b.size > _SMALL:
            return fn(_blas_ready(a), _blas_ready(b))
        return fn(a, b)

    return product


# Batched products of at least this many multiply-adds are split over flambeau's threads.
_PAR_MIN_WORK = 1 << 21


def batched_matmul(a, b):
    """``a @ b`` over matching batch dims; large batches run one single-threaded GEMM per matrix in parallel.

    Note [Heads in parallel]: numpy calls BLAS once per matrix of a batch, and multi-threaded
    OpenBLAS pays a thread hand-off on each of these small products; on a loaded machine that
    made attention 10-100x slower (and a 64x128x128 bmm ran at under half torch's speed). Like
    torch's CPU attention (one parallel loop over heads with single-threaded GEMMs), the batch is
    split over flambeau's threads with OpenBLAS set to one thread meanwhile.
    """
    nthreads = _parallel.get_num_threads()
    if nthreads < 2 or a.ndim < 3 or a.shape[:-2] != b.shape[:-2]:
        return np.matmul(a, b)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    nb = a.size // max(m * k, 1)
    if not blas_is_controllable() or nb < 2 or nb * m * n * k < _PAR_MIN_WORK:
        return np.matmul(a, b)
    a3, b3 = a.reshape((nb, m, k)), b.reshape((nb, k, n))
    out = np.empty((nb, m, n), np.result_type(a, b))

    def work(lo, hi):
        if lo < hi:
            np.matmul(a3[lo:hi], b3[lo:hi], out=out[lo:hi])

    with single_threaded_blas():
        _parallel.run_chunks(work, nb)
    return out.reshape(a.shape[:-2] + (m, n))


def _np_matmul(a, b):
    if a.ndim > 2 and b.ndim > 2 and a.shape[:-2] == b.shape[:-2] and a.dtype.kind == "f":
        return batched_matmul(a, b)  # Note [Heads in parallel]
    if a.ndim > 2 and b.ndim <= 2:
        # Note [Folding batch dims]: numpy runs one small GEMM per batch element; folding the
        # batch into rows makes one large GEMM (10x faster for a Linear on (B, T, D) inputs).
        rows = math.prod(a.shape[:-1])
        r = np.matmul(_blas_ready(a.reshape(rows, a.shape[-1])), b)
        return r.reshape(a.shape[:-1] + b.shape[1:])
    r = np.matmul(a, b)
    return r if r.__class__ is _ndarray else np.asarray(r)


def _np_dot(a, b):
    return np.asarray(np.dot(a, b))


matmul = _through_float32(_blas_operands(_np_matmul))
for _name in ("matmul", "mm", "bmm", "mv"):
    kernel(_name, "cpu")(matmul)
dot = _through_float32(_blas_operands(_np_dot))
kernel("dot", "cpu")(dot)


@kernel("vdot", "cpu")
def vdot(a, b):
    return dot(np.conj(a) if a.dtype.kind == "c" else a, b)  # the first vector conjugated


@kernel("outer", "cpu")
def outer(a, b):
    return np.multiply.outer(a, b)


@kernel("kron", "cpu")
def kron(a, b):
    return np.asarray(np.kron(a, b))


@kernel("inner", "cpu")
@_through_float32
def inner(a, b):
    return np.asarray(np.inner(a, b))


# Note [Bias rows in parallel]: a Linear layer's addmm adds its bias to every row of the product. numpy's
# broadcast add runs on one thread at a quarter of what two threads reach on the product just written
# (GPT's (2048, 512) rows: 0.16 ms against 0.04 ms, an eighth of the product's own time); large float
# products with a bias row of their dtype take a numba loop over rows instead.
_BIAS_ROWS_MIN = 1 << 15


@functools.cache
def _numba_bias_rows():
    import numba

    @numba.njit(parallel=True, cache=True)
    def add_bias_rows(p, bias):
        rows, n = p.shape
        for i in numba.prange(rows):
            r = p[i]
            for j in range(n):
                r[j] += bias[j]

    return add_bias_rows


def _bias_rows_fit(p, bias) -> bool:
    return (p.size >= _BIAS_ROWS_MIN and bias.__class__ is _ndarray and bias.ndim == 1 and p.ndim >= 2
            and bias.shape[0] == p.shape[-1] and bias.dtype == p.dtype and p.dtype in dt.FLOAT_NP
            and p.flags.c_contiguous and bias.flags.c_contiguous)



def _axpby(input, p, beta, alpha):
    """``beta * input + alpha * p`` in p's dtype; ``beta == 0`` ignores input (NaN included)."""
    if alpha != 1:
        p = np.multiply(p, alpha, out=p, casting="unsafe")
    if beta == 0:
        return p
    if beta == 1:
        if _bias_rows_fit(p, input):  # Note [Bias rows in parallel]
            _numba_bias_rows()(p.reshape(-1, p.shape[-1]), input)
            return p
        return np.add(p, input, out=p, casting="unsafe")
    return np.add(p, np.multiply(input, beta, dtype=p.dtype, casting="unsafe"), out=p, casting="unsafe")


@kernel("addmm", "cpu")
@kernel("addmv", "cpu")
@kernel("baddbmm", "cpu")
@_through_float32
def addmm(input, a, b, beta, alpha):
    return _axpby(input, matmul(a, b), beta, alpha)


@kernel("linear", "cpu")
@_through_float32
def linear(x, w, b):
    """``x @ w.T + b``: the leading dims of ``x`` folded into the rows of one GEMM, the bias added to them as
    addmm adds its ``input`` (Note [Linear as one operator])."""
    shape = (*x.shape[:-1], w.shape[0])
    x2 = x.reshape(-1, x.shape[-1]) if x.shape[-1] else np.zeros((math.prod(x.shape[:-1]), 0), x.dtype)
    return (matmul(x2, w.T) if b is None else addmm(b, x2, w.T, 1, 1)).reshape(shape)


@kernel("linear_backward", "cpu")
def linear_backward(g, x, w, mask):
    """``(g2 @ w, g2.T @ x2, g2's column sums)`` over the folded rows ``g2`` of ``g`` and ``x2`` of ``x``; float16
    sums in float32 (the products do: :data:`matmul`)."""
    rows = math.prod(x.shape[:-1])
    g2, x2 = g.reshape(rows, g.shape[-1]), x.reshape(rows, x.shape[-1])
    gi = matmul(g2, w).reshape(x.shape) if mask[0] else None
    gw = matmul(g2.T, x2) if mask[1] else None
    gb = None
    if mask[2]:
        gb = g2.sum(0, dtype=np.float32 if g.dtype == np.float16 else None).astype(g.dtype, copy=False)
    return gi, gw, gb


@kernel("addbmm", "cpu")
@_through_float32
def addbmm(input, a, b, beta, alpha):
    p = matmul(a, b)
    return _axpby(input, p.sum(axis=0, dtype=p.dtype), beta, alpha)


@kernel("einsum", "cpu")
@_through_float32
def einsum(equation, *arrays):
    out = np.asarray(np.einsum(equation, *arrays, optimize=True))
    # numpy returns a view for a pure permutation ('ij->ji'); an operator's result owns its memory
    return out.copy() if any(np.may_share_memory(out, x) for x in arrays) else out


@kernel("tensordot", "cpu")
@_through_float32
def tensordot(a, b, axes_a, axes_b):
    return np.asarray(np.tensordot(a, b, (axes_a, axes_b)))


@kernel("trace", "cpu")
@_through_float32
def trace(a):
    d = a.dtype if a.dtype.kind in "fc" else np.int64
    return np.asarray(np.trace(a, dtype=d)).astype(d, copy=False)


@kernel("diag", "cpu")
def diag(a, diagonal):
    return np.diag(a, diagonal).copy() if a.ndim == 2 else np.diag(a, diagonal)


@kernel("diagonal", "cpu")
def diagonal(a, offset, dim1, dim2):
    v = np.diagonal(a, offset, dim1, dim2)
    v.flags.writeable = a.flags.writeable  # numpy marks diagonal views read-only by default
    return v


@kernel("diag_embed", "cpu")
def diag_embed(a, offset, dim1, dim2):
    n = a.shape[-1] + abs(offset)
    shape = list(a.shape[:-1])
    lo, hi = sorted((dim1, dim2))
    shape.insert(lo, n)
    shape.insert(hi, n)
    out = np.zeros(shape, a.dtype)
    diagonal(out, offset, dim1, dim2)[...] = a
    return out
