"""Sparse COO tensors: ``flambeau.sparse_coo_tensor``, ``Tensor.to_sparse`` and ``flambeau.sparse``.

Note [A sparse tensor is a Tensor without dense data]
    As in torch, a sparse COO tensor *is* a :class:`~flambeau.Tensor` (``isinstance`` holds, so it
    can be a ``.grad``, pass the autograd engine's checks and reach an optimizer), but it has no
    strided storage: it holds an int64 ``indices`` tensor ``(sparse_dim, nnz)`` and a ``values``
    tensor ``(nnz, *dense_shape)``. Its ``_data`` slot, which every dense operator reads, holds
    :data:`_NO_DENSE_DATA`, an object on which any use (an attribute, numpy conversion) raises
    NotImplementedError naming the sparse layout and ``.to_dense()``: a dense-only operator fails
    with that message instead of reading garbage. The metadata a dense tensor derives from
    ``_data`` (``shape``, ``ndim``, ``numel`` ...) is overridden here.

Note [Sparse autograd through the values]
    Every differentiable sparse operation (``to_dense``, ``coalesce``, ``sparse.mm``, ``sum``,
    ``mul``, ``add``) is a composite of dense operators applied to ``values`` (``index_add``,
    ``index_select``, elementwise ops), so autograd differentiates it with respect to ``values``
    without formulas of its own. A leaf sparse tensor that requires grad (``requires_grad=True``)
    keeps a leaf ``values`` tensor that requires grad; its ``.grad`` is the sparse tensor of
    ``values.grad`` on its own indices (the pattern torch's ``sparse.mm`` gradient has). A sparse
    tensor built from ``values`` that require grad passes gradients on to those values.

Kernels: coalescing is a sort of the linearized indices and a segment sum (``unique`` with
``return_inverse`` then ``index_add``: existing operators, so it runs on every device); ``sparse.mm``
on the CPU without autograd is a numba kernel over the rows of the CSR form (parallel over output
rows, no races); on CUDA, or when a gradient is needed, it is the composite
``zeros.index_add(0, row, values[:, None] * dense[col])``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

import flambeau as fl
from flambeau._layout import sparse_coo
from flambeau._size import Size
from flambeau._tensor import Tensor, _wrap_dim

__all__ = ["SparseTensor", "sparse_coo_tensor", "to_sparse", "mm", "spmm", "sum", "softmax", "sparse_add_"]


class _NoDenseData:
    """The ``_data`` of a sparse tensor (Note [A sparse tensor is a Tensor without dense data])."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError(
            "this operation does not support sparse COO tensors (layout=flambeau.sparse_coo): it needs dense "
            "(strided) data; convert with .to_dense() first")

    def __getattr__(self, name):
        self._refuse()

    __array__ = __len__ = __iter__ = __getitem__ = __bool__ = __index__ = __float__ = __int__ = _refuse

    def __repr__(self) -> str:
        return "<no dense data: sparse COO tensor>"


_NO_DENSE_DATA = _NoDenseData()
_new = object.__new__


class SparseTensor(Tensor):
    """A sparse COO tensor (``layout == flambeau.sparse_coo``); build with :func:`sparse_coo_tensor`.

    ``indices`` ``(sparse_dim, nnz)`` int64 and ``values`` ``(nnz, *dense_shape)`` describe the
    nonzero entries: ``dense[tuple(indices[:, k])] = values[k]``, duplicates adding up. See Note
    [A sparse tensor is a Tensor without dense data] for what it supports.
    """

    __slots__ = ("_sp_indices", "_sp_values", "_sp_shape", "_sp_coalesced")

    # --- metadata -------------------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._sp_shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._sp_shape)
        return self._sp_shape[_wrap_dim(dim, len(self._sp_shape))]

    @property
    def ndim(self) -> int:
        return len(self._sp_shape)

    def dim(self) -> int:
        return len(self._sp_shape)

    ndimension = dim

    def numel(self) -> int:
        return math.prod(self._sp_shape)

    nelement = numel

    @property
    def layout(self):
        return sparse_coo

    is_sparse = property(lambda self: True)

    def is_contiguous(self, memory_format=None) -> bool:
        return False

    def _refuse(self, *args, **kwargs):
        _NO_DENSE_DATA._refuse()

    stride = data_ptr = storage_offset = untyped_storage = numpy = tolist = item = _refuse

    @property
    def _version(self) -> int:
        return self._sp_values._version

    def sparse_dim(self) -> int:
        """Number of sparse dimensions (rows of ``indices``)."""
        return self._sp_indices.shape[0]

    def dense_dim(self) -> int:
        """Number of dense dimensions (of each value)."""
        return self._sp_values.ndim - 1

    def _nnz(self) -> int:
        """Number of stored entries (duplicates counted)."""
        return self._sp_indices.shape[1]

    def is_coalesced(self) -> bool:
        """Whether the indices are sorted and unique (after :meth:`coalesce`)."""
        return self._sp_coalesced

    def _indices(self) -> Tensor:
        return self._sp_indices

    def _values(self) -> Tensor:
        return self._sp_values

    def indices(self) -> Tensor:
        """The ``(sparse_dim, nnz)`` int64 indices of a coalesced tensor."""
        if not self._sp_coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._sp_indices

    def values(self) -> Tensor:
        """The ``(nnz, *dense_shape)`` values of a coalesced tensor (differentiable)."""
        if not self._sp_coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._sp_values

    # --- autograd (Note [Sparse autograd through the values]) ---------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._sp_values.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> SparseTensor:
        self._sp_values.requires_grad_(requires_grad)
        self._requires_grad = self._sp_values._requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self._sp_values.is_leaf

    @property
    def grad(self):
        g = self._sp_values.grad
        if g is None:
            return self._grad
        if self._grad is None or self._grad._sp_values is not g:
            self._grad = _make(self._sp_indices, g, self._sp_shape, self._sp_coalesced)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is None:
            self._sp_values.grad = None
        self._grad = value

    def detach(self) -> SparseTensor:
        return _make(self._sp_indices, self._sp_values.detach(), self._sp_shape, self._sp_coalesced)

    def detach_(self) -> SparseTensor:
        self._sp_values = self._sp_values.detach()
        self._requires_grad = False
        return self

    def zero_(self) -> SparseTensor:
        """Remove every entry in place (nnz becomes 0), as torch's sparse ``zero_``."""
        v = self._sp_values
        self._sp_indices = fl.zeros(self.sparse_dim(), 0, dtype=fl.int64, device=v.device)
        self._sp_values = fl.zeros((0,) + tuple(v.shape[1:]), dtype=v.dtype, device=v.device)
        self._sp_coalesced = True
        return self

    def clone(self, *, memory_format=None) -> SparseTensor:
        return _make(self._sp_indices.clone(), self._sp_values.clone(), self._sp_shape, self._sp_coalesced)

    # --- conversions --------------------------------------------------------------------------------
    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        """The strided tensor (duplicates summed); differentiable with respect to the values."""
        v = self._sp_values if dtype is None else self._sp_values.to(dtype)
        sd = self.sparse_dim()
        sparse_shape, dense_shape = self._sp_shape[:sd], self._sp_shape[sd:]
        out = fl.zeros((math.prod(sparse_shape),) + dense_shape, dtype=v.dtype, device=v.device)
        if self._nnz():
            out = out.index_add(0, _linear_index(self._sp_indices, sparse_shape), v)
        return out.reshape(self._sp_shape)

    def to_sparse(self, sparse_dim=None, *, layout=None) -> SparseTensor:
        if layout not in (None, sparse_coo):
            raise NotImplementedError(f"to_sparse(): layout {layout} is not supported (only flambeau.sparse_coo)")
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError("to_sparse(): conversion from Sparse to Sparse with sparse_dim argument != "
                               "self.sparse_dim() is not supported")
        return self

    def coalesce(self) -> SparseTensor:
        """Sorted, unique indices (row-major order) with duplicate entries summed."""
        if self._sp_coalesced:
            return self
        sd = self.sparse_dim()
        sparse_shape = self._sp_shape[:sd]
        v = self._sp_values
        if self._nnz() == 0:
            return _make(self._sp_indices, v, self._sp_shape, True)
        lin = _linear_index(self._sp_indices, sparse_shape)
        uniq, inverse = fl.unique(lin, sorted=True, return_inverse=True)
        values = fl.zeros((uniq.shape[0],) + tuple(v.shape[1:]), dtype=v.dtype, device=v.device).index_add(
            0, inverse, v)
        return _make(_unravel(uniq, sparse_shape), values, self._sp_shape, True)

    def to(self, *args, **kwargs) -> SparseTensor:
        """Move or cast the values (and the indices' device), as ``Tensor.to``."""
        values = self._sp_values.to(*args, **kwargs)
        if values is self._sp_values:
            return self
        return _make(self._sp_indices.to(values.device), values, self._sp_shape, self._sp_coalesced)

    def cpu(self) -> SparseTensor:
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> SparseTensor:
        return self.to("cuda" if device is None else device)

    def double(self) -> SparseTensor:
        return self.to(fl.float64)

    def float(self) -> SparseTensor:
        return self.to(fl.float32)

    def half(self) -> SparseTensor:
        return self.to(fl.float16)

    # --- arithmetic ---------------------------------------------------------------------------------
    def t(self) -> SparseTensor:
        """The transpose of a 2-D sparse tensor (uncoalesced, as torch's)."""
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but self is "
                               f"{self.sparse_dim()} sparse and {self.dense_dim()} dense")
        if self.sparse_dim() < 2:
            return self
        idx = self._sp_indices.flip(0)
        return _make(idx, self._sp_values, self._sp_shape[::-1], self._nnz() < 2)

    def _scale(self, other, op) -> SparseTensor:
        if isinstance(other, Tensor) and (other.is_sparse or other.ndim > 0):
            raise NotImplementedError("mul of a sparse tensor by a non-scalar tensor is not supported; multiply by a "
                                      "number or a 0-dim tensor")
        return _make(self._sp_indices, op(self._sp_values, other), self._sp_shape, self._sp_coalesced)

    def mul(self, other) -> SparseTensor:
        """Multiply every value by a number (or a 0-dim tensor)."""
        return self._scale(other, lambda v, s: v * s)

    __mul__ = __rmul__ = mul

    def div(self, other) -> SparseTensor:
        return self._scale(other, lambda v, s: v / s)

    __truediv__ = div

    def neg(self) -> SparseTensor:
        return _make(self._sp_indices, -self._sp_values, self._sp_shape, self._sp_coalesced)

    __neg__ = neg

    def add(self, other, *, alpha=1) -> SparseTensor:
        """Sum with another sparse tensor of the same shape (coalesced if both are)."""
        if not isinstance(other, SparseTensor):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        _same_layout(self, other, "add")
        v = other._sp_values if alpha == 1 else other._sp_values * alpha
        out = _make(fl.cat([self._sp_indices, other._sp_indices], 1), fl.cat([self._sp_values, v], 0),
                    self._sp_shape, False)
        return out.coalesce() if self._sp_coalesced and other._sp_coalesced else out

    __add__ = add

    def __sub__(self, other) -> SparseTensor:
        return self.add(other, alpha=-1)

    def add_(self, other, *, alpha=1) -> SparseTensor:
        """In-place sum with a sparse tensor: the entries are appended (the result is uncoalesced)."""
        res = self.add(other, alpha=alpha)
        self._sp_indices, self._sp_values, self._sp_coalesced = res._sp_indices, res._sp_values, res._sp_coalesced
        return self

    def sum(self, dim=None, keepdim: bool = False, dtype=None):
        if keepdim:
            raise NotImplementedError("sum() of a sparse tensor does not support keepdim=True")
        return sum(self, dim, dtype=dtype)

    def mm(self, mat2: Tensor) -> Tensor:
        return mm(self, mat2)

    matmul = mm

    def __matmul__(self, other) -> Tensor:
        return mm(self, other)

    def __repr__(self) -> str:
        return (f"tensor(indices={self._sp_indices!r},\n       values={self._sp_values!r},\n       "
                f"size={tuple(self._sp_shape)}, nnz={self._nnz()}, layout=flambeau.sparse_coo)")

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (_make, (self._sp_indices, self._sp_values, self._sp_shape, self._sp_coalesced))


def _make(indices: Tensor, values: Tensor, shape: tuple, coalesced: bool) -> SparseTensor:
    """A SparseTensor of checked parts (no copies)."""
    t = _new(SparseTensor)
    t._data = _NO_DENSE_DATA
    t._storage = None
    t._device = values._device
    t.dtype = values.dtype
    t._requires_grad = values._requires_grad
    t._grad = None
    t.grad_fn = None
    t._base = None
    t._autograd_meta = None
    t._sp_indices = indices
    t._sp_values = values
    t._sp_shape = tuple(int(s) for s in shape)
    t._sp_coalesced = bool(coalesced)
    return t


def _strides(sparse_shape) -> list:
    strides, acc = [], 1
    for s in reversed(sparse_shape):
        strides.append(acc)
        acc *= s
    return strides[::-1]


def _linear_index(indices: Tensor, sparse_shape) -> Tensor:
    """Row-major linear index ``(nnz,)`` of each column of ``indices``."""
    lin = None
    for d, stride in enumerate(_strides(sparse_shape)):
        term = indices[d] * stride
        lin = term if lin is None else lin + term
    return lin


def _unravel(lin: Tensor, sparse_shape) -> Tensor:
    rows = []
    for stride, size in zip(_strides(sparse_shape), sparse_shape):
        rows.append(fl.div(lin, stride, rounding_mode="floor") % size)
    return fl.stack(rows, 0)


def _same_layout(a: SparseTensor, b: SparseTensor, op: str) -> None:
    if a._sp_shape != b._sp_shape:
        raise RuntimeError(f"{op}: expected sizes of 'self' and 'other' to match, but {list(a._sp_shape)} != "
                           f"{list(b._sp_shape)}")
    if a.sparse_dim() != b.sparse_dim():
        raise RuntimeError(f"{op}: expected 'self' and 'other' to have the same sparse_dim, but got "
                           f"{a.sparse_dim()} and {b.sparse_dim()}")


# --- construction -----------------------------------------------------------------------------------
def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory: bool = False,
                      requires_grad: bool = False, check_invariants=None, is_coalesced=None) -> SparseTensor:
    """A sparse COO tensor with ``values`` at ``indices``, as ``torch.sparse_coo_tensor``.

    Args:
        indices: ``(sparse_dim, nnz)`` integer tensor or nested list; column ``k`` is the sparse
            index of ``values[k]``.
        values: ``(nnz, *dense_shape)`` tensor, list or number array.
        size: the tensor's shape ``sparse_shape + dense_shape``; None infers the sparse sizes from
            ``indices.max(1) + 1``.
        dtype, device: of the values (default: those of ``values``).
        requires_grad: make a leaf whose ``.grad`` will be sparse (Note [Sparse autograd through the values]).
        check_invariants: accepted; indices are always checked against ``size`` (flambeau reads
            memory with them, so an out-of-range index is an error, not undefined behaviour).
        is_coalesced: declare the indices sorted and unique (trusted, as torch does).

    Returns:
        a :class:`SparseTensor`; ``values`` is not copied when it already is a tensor of the
        requested dtype and device.
    """
    if not isinstance(values, Tensor):
        values = fl.tensor(values, dtype=dtype, device=device)
    elif dtype is not None or device is not None:
        values = values.to(device=device if device is not None else values.device,
                           dtype=dtype if dtype is not None else values.dtype)
    if not isinstance(indices, Tensor):
        indices = fl.tensor(indices, dtype=fl.int64, device=values.device)
    if indices.dtype.is_floating_point or indices.dtype is fl.bool:
        raise RuntimeError(f"indices must be an int64 tensor, but got {indices.dtype}")
    indices = indices.to(device=values.device, dtype=fl.int64)
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if values.ndim == 0:
        raise RuntimeError("values must have at least one dimension (nnz), but got a 0-dim tensor")
    sd, nnz = indices.shape
    if values.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from "
                           f"values: {values.shape[0]}")
    host = indices.cpu().numpy()
    if nnz and host.min() < 0:
        d = int(np.nonzero((host < 0).any(1))[0][0])
        raise RuntimeError(f"found negative index {int(host[d].min())} for dim {d}")
    if size is None:
        sparse_shape = tuple(int(m) + 1 for m in host.max(1)) if nnz else (0,) * sd
        size = sparse_shape + tuple(values.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sd + values.ndim - 1:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, "
                           f"sparse_dim = {sd}, dense_dim = {values.ndim - 1}")
    if tuple(values.shape[1:]) != size[sd:]:
        raise RuntimeError(f"values has incorrect size, expected {[nnz, *size[sd:]]}, got {list(values.shape)}")
    if nnz:
        too_big = host.max(1) >= np.asarray(size[:sd], dtype=np.int64)
        if too_big.any():
            d = int(np.nonzero(too_big)[0][0])
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found index "
                               f"{int(host[d].max())}")
    if requires_grad:
        values = values.detach().requires_grad_(True)
    coalesced = bool(is_coalesced) if is_coalesced is not None else nnz < 2
    return _make(indices, values, size, coalesced)


def to_sparse(self: Tensor, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None) -> SparseTensor:
    """``Tensor.to_sparse``: the COO tensor of the nonzero entries (coalesced).

    Args:
        sparse_dim: how many leading dimensions become sparse (default all); the remaining ones
            are dense, and a slice is stored when any of its elements is nonzero.
        layout: None or ``flambeau.sparse_coo`` (the other layouts are not supported).

    Returns:
        a coalesced :class:`SparseTensor`; differentiable with respect to ``self``.
    """
    if layout not in (None, sparse_coo):
        raise NotImplementedError(f"to_sparse(): layout {layout} is not supported (only flambeau.sparse_coo)")
    sd = self.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 <= sd <= self.ndim:
        raise RuntimeError(f"sparse_dim must be in [0, {self.ndim}], got {sd}")
    shape = tuple(self.shape)
    flat = self.reshape((math.prod(shape[:sd]),) + shape[sd:])
    mask = flat != 0
    if flat.ndim > 1:
        mask = mask.reshape(flat.shape[0], -1).any(1)
    lin = mask.nonzero().reshape(-1)
    values = flat.index_select(0, lin)
    return _make(_unravel(lin, shape[:sd]) if sd else fl.zeros(0, lin.shape[0], dtype=fl.int64, device=self.device),
                 values, shape, True)


# --- sparse @ dense -----------------------------------------------------------------------------------
@functools.cache
def _csr_mm_kernel():
    """``kernel(indptr, cols, vals, dense, out)``: ``out[r] += vals[p] * dense[cols[p]]`` over row r's p."""
    import numba
    from numba import prange

    @numba.njit(parallel=True, cache=True)
    def csr_mm(indptr, cols, vals, dense, out):
        M, K = out.shape
        for r in prange(M):
            for p in range(indptr[r], indptr[r + 1]):
                c = cols[p]
                v = vals[p]
                for k in range(K):
                    out[r, k] += v * dense[c, k]

    return csr_mm


def _spmm_cpu(indices: np.ndarray, values: np.ndarray, dense: np.ndarray, m: int) -> np.ndarray:
    """CPU kernel: CSR form of the COO entries (a stable counting sort by row), then the row loop."""
    rows, cols = indices[0], indices[1]
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    dense = np.ascontiguousarray(dense)
    out = np.zeros((m, dense.shape[1]), dense.dtype)
    if rows.size and dense.shape[1]:
        _csr_mm_kernel()(indptr, np.ascontiguousarray(cols[order]), np.ascontiguousarray(values[order]), dense, out)
    return out


def mm(sparse: Tensor, dense: Tensor) -> Tensor:
    """``sparse @ dense`` for a 2-D sparse COO ``(n, m)`` and a strided ``(m, p)`` (or ``(m,)``) tensor.

    Returns:
        the strided ``(n, p)`` (or ``(n,)``) product, ``dense``'s dtype. Differentiable with respect
        to ``dense`` and to the sparse values (the gradient of a leaf sparse tensor is sparse, on
        its indices: Note [Sparse autograd through the values]).
    """
    if not isinstance(sparse, SparseTensor):
        raise TypeError(f"sparse.mm(): argument 'mat1' must be a sparse COO tensor, not "
                        f"{type(sparse).__name__ if not isinstance(sparse, Tensor) else 'a strided tensor'}")
    if not isinstance(dense, Tensor) or isinstance(dense, SparseTensor):
        raise TypeError("sparse.mm(): argument 'mat2' must be a strided (dense) Tensor")
    if sparse.sparse_dim() != 2 or sparse.dense_dim() != 0:
        raise RuntimeError(f"sparse.mm(): expected a 2-D sparse tensor with no dense dimensions as mat1, got "
                           f"sparse_dim={sparse.sparse_dim()}, dense_dim={sparse.dense_dim()}")
    vector = dense.ndim == 1
    if vector:
        dense = dense.unsqueeze(1)
    if dense.ndim != 2:
        raise RuntimeError(f"sparse.mm(): mat2 must be a matrix, got a {dense.ndim}-D tensor")
    n, m = sparse.shape
    if dense.shape[0] != m:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({n}x{m} and {dense.shape[0]}x{dense.shape[1]})")
    if sparse.dtype is not dense.dtype:
        raise RuntimeError(f"expected mat1 and mat2 to have the same dtype, but got: {sparse.dtype} != {dense.dtype}")
    if sparse.device != dense.device:
        raise RuntimeError(f"expected mat1 and mat2 on the same device, got {sparse.device} and {dense.device}")
    idx, vals = sparse._sp_indices, sparse._sp_values
    needs_grad = fl.is_grad_enabled() and (vals.requires_grad or dense.requires_grad)
    if dense.device.type == "cpu" and not needs_grad and dense.dtype.is_floating_point:
        out = fl.tensor(_spmm_cpu(idx.numpy(), vals.numpy(), dense.numpy(), n))
    else:
        # the composite (Note [Sparse autograd through the values]); runs on any device
        out = fl.zeros(n, dense.shape[1], dtype=dense.dtype, device=dense.device)
        if sparse._nnz():
            out = out.index_add(0, idx[0], vals.unsqueeze(1) * dense.index_select(0, idx[1]))
    return out.squeeze(1) if vector else out


spmm = mm


def sum(input: SparseTensor, dim=None, dtype=None):
    """Sum of a sparse tensor's entries, as ``torch.sparse.sum``.

    Args:
        input: a sparse COO tensor.
        dim: None (all: a 0-dim strided tensor) or dims to reduce; summing every sparse dim gives a
            strided tensor, summing some gives a (coalesced) sparse one.
        dtype: cast the values first.

    Returns:
        a strided or sparse tensor, differentiable with respect to the values.
    """
    if not isinstance(input, SparseTensor):
        raise TypeError("sparse.sum(): argument 'input' must be a sparse COO tensor")
    v = input._sp_values if dtype is None else input._sp_values.to(dtype)
    if dim is None:
        return v.sum()
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    nd, sd = input.ndim, input.sparse_dim()
    dims = sorted({_wrap_dim(d, nd) for d in dims})
    sparse_red = [d for d in dims if d < sd]
    dense_red = [d - sd + 1 for d in dims if d >= sd]
    if dense_red:
        v = v.sum(dense_red)
    kept_dense = tuple(s for i, s in enumerate(input._sp_shape[sd:]) if i + sd not in dims)
    if len(sparse_red) == sd:
        return v.sum(0)
    keep = [d for d in range(sd) if d not in sparse_red]
    idx = input._sp_indices.index_select(0, fl.tensor(keep, dtype=fl.int64, device=input.device))
    shape = tuple(input._sp_shape[d] for d in keep) + kept_dense
    return _make(idx, v, shape, False).coalesce()


def softmax(input: SparseTensor, dim: int, dtype=None) -> SparseTensor:
    """Softmax over the specified entries along sparse dimension ``dim`` (unspecified ones are -inf).

    As ``torch.sparse.softmax``: the result has ``input``'s (coalesced) indices; differentiable.
    """
    if not isinstance(input, SparseTensor):
        raise TypeError("sparse.softmax(): argument 'input' must be a sparse COO tensor")
    x = input.coalesce()
    if dtype is not None:
        x = x.to(dtype)
    sd = x.sparse_dim()
    dim = _wrap_dim(dim, x.ndim)
    if dim >= sd:
        v = fl.softmax(x._sp_values, dim - sd + 1)
        return _make(x._sp_indices, v, x._sp_shape, True)
    v = x._sp_values
    if x._nnz() == 0:
        return x
    # entries sharing every sparse index but ``dim`` form one softmax group
    others = [d for d in range(sd) if d != dim]
    shape = x._sp_shape[:sd]
    group = _linear_index(x._sp_indices[others], [shape[d] for d in others]) if others else \
        fl.zeros(x._nnz(), dtype=fl.int64, device=x.device)
    _, inverse = fl.unique(group, sorted=True, return_inverse=True)
    n_groups = int(inverse.max().item()) + 1
    rest = tuple(v.shape[1:])
    gmax = fl.full((n_groups,) + rest, -math.inf, dtype=v.dtype, device=v.device)
    gmax = gmax.scatter_reduce(0, inverse.reshape((-1,) + (1,) * len(rest)).expand(v.shape), v.detach(), "amax")
    e = (v - gmax.index_select(0, inverse)).exp()
    denom = fl.zeros((n_groups,) + rest, dtype=v.dtype, device=v.device).index_add(0, inverse, e)
    return _make(x._sp_indices, e / denom.index_select(0, inverse), x._sp_shape, True)


def sparse_add_(dense: Tensor, sparse: SparseTensor, alpha=1) -> Tensor:
    """``dense += alpha * sparse`` in place (what an optimizer step with a sparse gradient needs).

    Args:
        dense: strided tensor of ``sparse``'s shape.
        sparse: sparse COO tensor (duplicates add up).
        alpha: a number.

    Returns:
        ``dense``.
    """
    if tuple(dense.shape) != sparse._sp_shape:
        raise RuntimeError(f"sparse_add_: shapes differ, {list(dense.shape)} and {list(sparse._sp_shape)}")
    sd = sparse.sparse_dim()
    v = sparse._sp_values if alpha == 1 else sparse._sp_values * alpha
    flat = dense.view((math.prod(sparse._sp_shape[:sd]),) + sparse._sp_shape[sd:])
    if sparse._nnz():
        flat.index_add_(0, _linear_index(sparse._sp_indices, sparse._sp_shape[:sd]), v.to(dense.dtype))
    return dense

