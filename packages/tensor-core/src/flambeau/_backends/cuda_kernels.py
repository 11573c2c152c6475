"""CUDA kernels of the operator table: launchers with the CPU kernels' calling conventions.

Importing this module imports no numba: :func:`register_all` puts launchers into the operator
table (``OpDef.kernels["cuda"]``), and a launcher imports numba.cuda and compiles its kernel on
first call (numba's cache keeps it across runs). ``flambeau.cuda`` calls :func:`register_all`
once the table is complete, and the CUDA backend again when it loads.

Conventions (the same as the CPU kernels of the same op; arrays are numba device arrays):
    elementwise binary: ``kernel(a, b, dtype, out=None) -> array`` (``a``/``b`` arrays or scalars,
        broadcast, strided); unary: ``kernel(a, dtype, out=None) -> array``; predicates give bool.
    to_copy: ``kernel(array, np_dtype, src_device, dst_device, non_blocking) -> array``.
    clone / contiguous: ``kernel(array) -> array``; copy_: ``kernel(dst, src)``; fill_:
        ``kernel(dst, value)``; zero_: ``kernel(dst)``.
    sum: ``kernel(a, dims, keepdim, dtype) -> array`` (``dims`` a sorted tuple, or None for every
        dim); mean likewise.
    matmul / mm / bmm: ``kernel(a, b) -> array`` (torch's matmul shape rules).

Every launch goes on the current stream (:func:`flambeau.cuda.current_stream`); nothing waits.
Ops without a launcher here raise the registry's NotImplementedError naming op and device.
"""

from __future__ import annotations

import math

import numpy as np

BLOCK = 256  # threads per block of elementwise launches (flambeau.cuda._kernels.BLOCK)
REDUCE_BLOCK = 256
TILE = 16


def _tables():
    # flambeau.cuda is imported lazily: importing it here would run its registration before
    # the operator table is filled (this module is imported first by flambeau._ops).
    from flambeau.cuda import _tables

    return _tables

__all__ = ["register_all", "registered_ops", "binary_launcher", "unary_launcher", "fill", "copy_into",
           "contiguous", "sum_kernel", "matmul"]

# Ops whose result is bool whatever the compute dtype.
BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
            "isnan", "isinf", "isfinite", "signbit", "isposinf", "isneginf"}


def _scalar_name(d) -> str:
    from flambeau._dtype import scalar_name

    return scalar_name(d)


_SIM: list = []


def _sim() -> bool:
    if not _SIM:
        from numba.core import config

        _SIM.append(bool(config.ENABLE_CUDASIM))
    return _SIM[0]


def _be():
    from flambeau._backends import backend

    return backend("cuda")


def _stream():
    from flambeau.cuda._streams import current_stream

    return current_stream().numba


def _launch_1d(n: int) -> tuple:
    if _sim():
        return min(2, (n + 15) // 16), 16
    return min((n + BLOCK - 1) // BLOCK, 65535 * 4), BLOCK


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.generic, np.ndarray))


def _bshape(*shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n != 1:
                if out[i] == 1:
                    out[i] = n
                elif out[i] != n:
                    raise ValueError(f"shapes {[list(x) for x in shapes]} cannot be broadcast together")
    return tuple(out)


def _strides_for(x, shape: tuple) -> tuple:
    """Element strides of array ``x`` broadcast to ``shape`` (0 on broadcast dims), at least 1-d."""
    nd = len(shape)
    item = x.dtype.itemsize
    st = [0] * nd
    off = nd - x.ndim
    for i, (n, s) in enumerate(zip(x.shape, x.strides)):
        st[off + i] = 0 if n == 1 else s // item
    return tuple(st) if nd else (0,)


_WIDE = np.dtype(np.int64)


def _kind_check(name: str, compute: np.dtype, kinds: str) -> np.dtype:
    """The dtype the kernel computes in: ``compute``, or int64 for 8/16-bit integers (wrap-around
    results are the same once stored); RuntimeError like torch's if the op does not support it."""
    k = _WIDE if compute.kind in "iu" and compute.itemsize < 4 else compute
    if k.name not in _tables().dtypes_for(kinds):
        raise RuntimeError(f'"{name}_cuda" not implemented for \'{_scalar_name(compute)}\'')
    return k


def binary_launcher(name: str):
    """The CUDA kernel of binary elementwise op ``name`` (convention of the module docstring)."""
    kinds = _tables().BINARY[name][1]
    bool_out = name in BOOL_OUT

    def kernel(a, b, dtype, out=None):
        compute = np.dtype(dtype.np)
        kdt = _kind_check(name, compute, kinds)
        aa, ba = _is_array(a), _is_array(b)
        shape = _bshape(a.shape if aa else (), b.shape if ba else ())
        be = _be()
        if out is None:
            out = be.empty(shape, np.bool_ if bool_out else compute)
        n = out.size
        if n == 0:
            return out
        cast = kdt.type
        ref = a if aa else b
        fa, sa_ = (be.flat_view(a), _strides_for(a, shape)) if aa else (be.flat_view(ref), (0,) * max(len(shape), 1))
        fb, sb_ = (be.flat_view(b), _strides_for(b, shape)) if ba else (be.flat_view(ref), (0,) * max(len(shape), 1))
        sva = cast(0) if aa else cast(a)
        svb = cast(0) if ba else cast(b)
        kshape = shape if shape else (1,)
        from flambeau.cuda import _kernels

        k = _kernels.binary_kernel(name, kdt.name)
        grid, block = _launch_1d(n)
        k[grid, block, _stream()](be.flat_view(out), _strides_for(out, shape), fa, sa_, sva, not aa,
                                  fb, sb_, svb, not ba, kshape, n)
        return out

    kernel._flambeau_cuda = True
    return kernel


def unary_launcher(name: str):
    """The CUDA kernel of unary elementwise op ``name``."""
    kinds = _tables().UNARY[name][1]
    bool_out = name in BOOL_OUT

    def kernel(a, dtype, out=None):
        compute = np.dtype(dtype.np)
        kdt = _kind_check(name, compute, kinds)
        be = _be()
        if out is None:
            out = be.empty(a.shape, np.bool_ if bool_out else compute)
        _unary_into(name, kdt, out, a)
        return out

    kernel._flambeau_cuda = True
    return kernel


def _unary_into(name: str, compute: np.dtype, out, a) -> None:
    from flambeau.cuda import _kernels

    n = out.size
    if n == 0:
        return
    shape = tuple(out.shape)
    be = _be()
    k = _kernels.unary_kernel(name, compute.name)
    grid, block = _launch_1d(n)
    k[grid, block, _stream()](be.flat_view(out), _strides_for(out, shape), be.flat_view(a),
                              _strides_for(a, shape), shape if shape else (1,), n)


# --- copies -------------------------------------------------------------------------------------
def fill(dst, value) -> None:
    """``dst[...] = value`` (cast to dst's dtype) on the current stream."""
    from flambeau.cuda import _kernels

    n = dst.size
    if n == 0:
        return
    shape = tuple(dst.shape)
    be = _be()
    v = dst.dtype.type(value)
    grid, block = _launch_1d(n)
    _kernels.fill_kernel()[grid, block, _stream()](be.flat_view(dst), _strides_for(dst, shape), v,
                                                   shape if shape else (1,), n)


def copy_into(dst, src) -> None:
    """Copy ``src`` (a device array broadcastable to ``dst``, or a scalar) into ``dst``, casting."""
    if not _is_array(src):
        fill(dst, src)
        return
    _bshape(dst.shape, src.shape)
    _unary_into("identity", np.dtype(dst.dtype), dst, src)  # no arithmetic: any dtype


def contiguous(arr):
    """A C-contiguous device copy of ``arr``."""
    out = _be().empty(arr.shape, arr.dtype)
    copy_into(out, arr)
    return out


def _to_copy(arr, np_dtype, src, dst, non_blocking):
    be = _be()
    np_dtype = np.dtype(np_dtype)
    if src.type == "cpu":  # host -> device
        host = arr if arr.dtype == np_dtype else arr.astype(np_dtype)
        return be.from_numpy(host, dst)
    if dst.type == "cpu":  # device -> host
        host = be.to_numpy(arr)
        return host if host.dtype == np_dtype else host.astype(np_dtype)
    if src.index != dst.index:  # device -> other device, through the host
        return be.from_numpy(be.to_numpy(arr).astype(np_dtype, copy=False), dst)
    out = be.empty(arr.shape, np_dtype, dst)
    copy_into(out, arr)
    return out


def _copy_(dst, src) -> None:
    _be().copy_(dst, src)


def _fill_(dst, value) -> None:
    fill(dst, value)


def _zero_(dst) -> None:
    fill(dst, 0)


# --- reductions ---------------------------------------------------------------------------------
def _acc_dtype(d: np.dtype) -> np.dtype:
    if d.kind == "f":
        return np.dtype(np.float64) if d == np.float64 else np.dtype(np.float32)
    if d.kind == "b" or d.kind in "iu":
        return np.dtype(np.int64)
    raise RuntimeError(f'"sum_cuda" not implemented for \'{_scalar_name(d)}\'')


def _reduce_sum(a, dims: tuple, keepdim: bool, out_dtype: np.dtype):
    from flambeau.cuda import _kernels

    be = _be()
    dims = tuple(sorted(d % a.ndim for d in dims)) if a.ndim else ()
    item = a.dtype.itemsize
    kept = [d for d in range(a.ndim) if d not in dims]
    out_shape = tuple((1 if d in dims else a.shape[d]) for d in range(a.ndim)) if keepdim \
        else tuple(a.shape[d] for d in kept)
    kshape = tuple(a.shape[d] for d in kept) or (1,)
    kst = tuple(a.strides[d] // item for d in kept) or (0,)
    rshape = tuple(a.shape[d] for d in dims) or (1,)
    rst = tuple(a.strides[d] // item for d in dims) or (0,)
    M = math.prod(kshape) if kept else 1
    K = math.prod(rshape) if dims else 1
    acc = _acc_dtype(out_dtype)
    if M == 0 or K == 0:
        return be.full(out_shape, 0, out_dtype)
    B = 8 if _sim() else REDUCE_BLOCK
    P = 1 if K <= B * 8 else min((K + B * 8 - 1) // (B * 8), 65535, 1024)
    k = _kernels.sum_kernel(acc.name, B)
    s = _stream()
    part = be.empty((M * P,), acc)
    k[(M, P), B, s](part, be.flat_view(a), kshape, kst, rshape, rst, K, P)
    if P > 1:
        res = be.empty((M,), acc)
        k[(M, 1), B, s](res, part, (M,), (P,), (P,), (1,), P, 1)
        part = res
    if acc != out_dtype:
        cast = be.empty((M,), out_dtype)
        copy_into(cast, part)
        part = cast
    return be.as_strided(part, out_shape, _c_elem_strides(out_shape), 0)


def _c_elem_strides(shape) -> tuple:
    st = []
    acc = 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


def sum_kernel(a, dims, keepdim, dtype):
    """CUDA ``sum``: ``kernel(a, dims, keepdim, dtype) -> array``."""
    out_dtype = np.dtype(dtype.np)
    if out_dtype == np.float16:
        raise RuntimeError("\"sum_cuda\" not implemented for 'Half'")
    return _reduce_sum(a, _dims(a, dims), keepdim, out_dtype)


def _dims(a, dims) -> tuple:
    # None (or an empty tuple, as older fronts passed for 0-dim inputs) means every dimension.
    return tuple(range(a.ndim)) if dims is None else tuple(dims)


def mean_kernel(a, dims, keepdim, dtype):
    """CUDA ``mean``: the sum divided by the number of reduced elements, in ``dtype``."""
    out_dtype = np.dtype(dtype.np)
    dims = _dims(a, dims)
    s = _reduce_sum(a, dims, keepdim, out_dtype)
    count = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    from flambeau import _dtype as dt

    out = _be().empty(s.shape, out_dtype)
    binary_launcher("div")(s, float(count) if count else float("nan"), dt._BY_NP[out_dtype], out=out)
    return out


# --- matmul -------------------------------------------------------------------------------------
def matmul(a, b):
    """CUDA ``matmul`` with torch's rules: 1-d operands are promoted, batch dims broadcast.

    cuBLAS serves float32/float64 on a real GPU when libcublas is found; a tiled numba kernel
    serves everything else.
    """
    from flambeau.cuda import _kernels

    be = _be()
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    item_a, item_b = a.dtype.itemsize, b.dtype.itemsize
    ash, ast = list(a.shape), [s // item_a for s in a.strides]
    bsh, bst = list(b.shape), [s // item_b for s in b.strides]
    if squeeze_a:
        ash, ast = [1] + ash, [0] + ast
    if squeeze_b:
        bsh, bst = bsh + [1], bst + [0]
    M, K = ash[-2], ash[-1]
    K2, N = bsh[-2], bsh[-1]
    if K != K2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({M}x{K} and {K2}x{N})")
    batch = _bshape(tuple(ash[:-2]), tuple(bsh[:-2]))
    nb = len(batch)

    def bstrides(sh, st):
        out = [0] * nb
        off = nb - (len(sh) - 2)
        for i in range(len(sh) - 2):
            out[off + i] = 0 if sh[i] == 1 else st[i]
        return tuple(out) or (0,)

    abst, bbst = bstrides(ash, ast), bstrides(bsh, bst)
    compute = np.result_type(a.dtype, b.dtype)
    if compute == np.bool_ or compute == np.float16:
        raise RuntimeError(f"\"addmm_cuda\" not implemented for '{_scalar_name(compute)}'")
    Z = math.prod(batch) if nb else 1
    full_shape = tuple(batch) + (M, N)
    out = be.empty(full_shape, compute)
    if out.size:
        if K == 0:
            fill(out, 0)
        elif not _sim() and compute in (np.float32, np.float64) and _try_cublas(out, a, b, ash, ast, bsh, bst,
                                                                               abst, bbst, batch, M, N, K):
            pass
        else:
            T = 4 if _sim() else TILE
            if a.dtype != compute:
                a = _cast(a, compute)
            if b.dtype != compute:
                b = _cast(b, compute)
            k = _kernels.matmul_kernel(compute.name, T)
            if Z > 65535:
                raise RuntimeError(f"matmul on CUDA supports at most 65535 batches, got {Z}")
            grid = ((N + T - 1) // T, (M + T - 1) // T, Z)
            k[grid, (T, T), _stream()](be.flat_view(out), be.flat_view(a), abst, ast[-2], ast[-1],
                                       be.flat_view(b), bbst, bst[-2], bst[-1], tuple(batch) or (1,), M, N, K)
    shape = list(full_shape)
    if squeeze_b:
        shape.pop(-1)
    if squeeze_a:
        shape.pop(-1 if squeeze_b else -2)
    if tuple(shape) != full_shape:
        out = be.as_strided(out, tuple(shape), _c_elem_strides(tuple(shape)), 0)
    return out


def _cast(arr, dtype):
    out = _be().empty(arr.shape, dtype)
    copy_into(out, arr)
    return out


def _try_cublas(out, a, b, ash, ast, bsh, bst, abst, bbst, batch, M, N, K) -> bool:
    from flambeau.cuda import _cublas

    if not _cublas.available():
        return False
    try:
        return _cublas.matmul_into(out, a, b, ash, ast, bsh, bst, abst, bbst, batch, M, N, K, _be(), _stream())
    except _cublas.CublasUnavailable:
        return False


# --- registration -------------------------------------------------------------------------------
_SPECIAL = {
    "to_copy": lambda: _to_copy,
    "clone": lambda: contiguous,
    "contiguous": lambda: contiguous,
    "copy_": lambda: _copy_,
    "fill_": lambda: _fill_,
    "zero_": lambda: _zero_,
    "sum": lambda: sum_kernel,
    "mean": lambda: mean_kernel,
    "matmul": lambda: matmul,
    "mm": lambda: matmul,
    "bmm": lambda: matmul,
}

_registered: set = set()


def _arity(op) -> int | None:
    """2 for ``name(Tensor a, Tensor b, *, ...)``, 1 for ``name(Tensor input)``: the signatures whose
    kernels follow the elementwise conventions; None otherwise."""
    params = op.signature.split("(", 1)[1].rsplit(")", 1)[0]
    positional, star, keyword = params.partition("*")
    pos = [p.strip() for p in positional.split(",") if p.strip()]
    if not pos or not all(p.split()[0] == "Tensor" for p in pos):
        return None
    if len(pos) == 2:
        return 2
    if len(pos) == 1 and not keyword.strip(" ,"):
        return 1
    return None


def _launcher_for(name: str, op):
    if name in _SPECIAL:
        k = _SPECIAL[name]()
        k_ = getattr(k, "__func__", k)
        try:
            k_._flambeau_cuda = True
        except AttributeError:
            pass
        return k
    arity = _arity(op)
    if arity == 2 and name in _tables().BINARY:
        return binary_launcher(name)
    if arity == 1 and name in _tables().UNARY:
        return unary_launcher(name)
    return None


def register_all() -> list:
    """Register CUDA launchers for every op of the table that has one here; return their names.

    A CUDA kernel registered by someone else (another kernel library) is kept.
    """
    from flambeau._ops._registry import OPS

    done = []
    for name, op in OPS.items():
        cur = op.kernels.get("cuda")
        if cur is not None and not getattr(cur, "_flambeau_cuda", False):
            continue
        if cur is not None and name in _registered:
            done.append(name)
            continue
        k = _launcher_for(name, op)
        if k is not None:
            op.kernels["cuda"] = k
            _registered.add(name)
            done.append(name)
    return done


def registered_ops() -> list:
    """Names of the ops that have a flambeau CUDA launcher in the table."""
    return sorted(_registered)

