"""Shape and view operators: view, reshape, permute, transpose, expand, squeeze, cat, stack, split ...

Views (``view``, ``permute``, ``expand``, ``narrow`` ...) share their input's storage: the output
is wrapped with ``storage=input._storage`` and ``_base`` set to the root base, so writes through
a view are visible in the base and the version counter is shared (Note [Version counter]).

Note [Device-agnostic views]
    A view op computes the view's geometry with numpy view operations. On CPU they run on
    ``input._data`` itself (they never copy). On other devices they run on a *shadow*: a numpy
    array with the input's shape and strides over a one-element dummy buffer, which is never
    read; the shadow's shape, strides and pointer give the view's (shape, strides, byte offset from
    the input's first element: 0, and not read off the shadow, for the views that keep it), and
    ``backend(device.type).view_from(input data, storage buffer, shape, strides, offset)`` builds the
    device array. One code path serves every device, so views have no kernels. Shadows are kept per
    (dtype, shape, strides), read-only and shared: a model's views repeat their geometry every step,
    and numpy's ``as_strided`` that makes one costs microseconds.

Kernel convention for the copying operators (arrays in, array out; every device; CPU kernels in
``flambeau._kernels.cpu.shape``):
    reshape (the copy made when no view is possible): ``kernel(array, shape) -> C-contiguous array``;
    cat: ``kernel(arrays, dim, np_dtype) -> array``;  stack: same.
    repeat: ``kernel(array, repeats)``;  repeat_interleave: ``kernel(array, repeats, dim)`` with
    ``repeats`` an int or an int64 array (``dim`` None flattens; negative repeats are refused by the
    front on the CPU, by the kernel elsewhere);  flip: ``kernel(array, dims)``;
    roll: ``kernel(array, shifts, dims)``;  rot90: ``kernel(array, k, dims)``;
    tril/triu: ``kernel(array, diagonal)``;  pad: ``kernel(array, pad_pairs, mode, value)`` with
    ``pad_pairs`` one (before, after) pair per dimension;  one_hot: ``kernel(array, num_classes)``
    (off the CPU ``num_classes`` may be -1, inferred by the kernel, and the kernel checks the classes);
    sort: ``kernel(array, dim, descending, stable) -> (values, indices)``;
    unique: ``kernel(array, sorted, return_inverse, return_counts, dim) -> (values, inverse, counts)``
    and unique_consecutive the same without ``sorted``. The output size of unique, unique_consecutive
    and repeat_interleave with a tensor of repeats depends on the data: their CUDA kernels read it with
    one host synchronisation, as torch's do.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau import _dtype as dt
from flambeau._backends import backend
from flambeau._device import CPU
from flambeau._factories import arange
from flambeau._ops._common import (
    Tensor,
    _wrap,
    broadcast_shapes,
    check_tensor,
    common_device,
    grad_state,
    inplace_by_engine,
    inplace_needs_engine,
    record,
    record_if_needed,
    return_type,
    storage_view,
    wrap_dim,
)
from flambeau._ops._registry import declare
from flambeau._storage import allocation_error

__all__ = [
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "permute", "transpose", "t",
    "movedim", "expand", "expand_as", "broadcast_to", "broadcast_tensors", "squeeze", "unsqueeze",
    "narrow", "unfold", "select", "as_strided", "unbind", "split", "split_with_sizes", "chunk", "tensor_split",
    "hsplit", "vsplit", "dsplit", "adjoint",
    "cat", "stack", "hstack", "vstack", "dstack", "column_stack", "repeat", "tile", "repeat_interleave",
    "flip", "fliplr", "flipud", "roll", "rot90", "tril", "triu", "pad", "one_hot", "sort", "argsort",
    "topk", "kthvalue", "msort", "unique", "unique_consecutive",
]

_ndarray = np.ndarray
_as_strided_np = np.lib.stride_tricks.as_strided
_int64 = dt.int64


# --- view plumbing (Note [Device-agnostic views]) -------------------------------------------------
_DUMMIES: dict = {}  # dtype -> the one-element buffer shadows point into
_DUMMY_PTRS: dict = {}  # dtype -> its address
_SHADOWS: dict = {}  # (dtype, shape, strides) -> the shadow of that geometry (read-only)
_MAX_SHADOWS = 4096


def _src(input: Tensor):
    """The array a view op applies numpy view operations to: the data on CPU, else a shadow."""
    if input._device is CPU:
        return input._data
    d = input._data
    key = (d.dtype, d.shape, d.strides)
    shadow = _SHADOWS.get(key)
    if shadow is None:  # numpy's as_strided costs microseconds; a model's views repeat their geometry
        dummy = _DUMMIES.get(d.dtype)
        if dummy is None:
            dummy = _DUMMIES[d.dtype] = np.empty(1, d.dtype)
            _DUMMY_PTRS[d.dtype] = _ptr(dummy)
        if len(_SHADOWS) >= _MAX_SHADOWS:
            _SHADOWS.clear()
        shadow = _SHADOWS[key] = _as_strided_np(dummy, tuple(d.shape), tuple(d.strides))
        shadow.flags.writeable = False  # never read nor written; shared by every view of this geometry
    return shadow


def _ptr(arr) -> int:
    return arr.__array_interface__["data"][0]


def _strided(src, shape: tuple, strides: tuple):
    """A view of ``src``'s memory with ``shape`` and byte ``strides``, starting at ``src``'s first element.

    Builds the array on the memory's owner (a few µs faster than numpy's ``as_strided``, which
    goes through ``__array_interface__``); shadows and unusual owners take numpy's way.
    """
    try:  # a contiguous src exports its own buffer: no pointer arithmetic needed
        return _ndarray(shape, src.dtype, src, 0, strides)
    except (TypeError, ValueError):
        pass
    root = src
    while True:
        b = root.base
        if b.__class__ is not _ndarray:
            break
        root = b
    try:
        return _ndarray(shape, src.dtype, root, _ptr(src) - _ptr(root), strides)
    except (TypeError, ValueError):
        return _as_strided_np(src, shape, strides)


def _mkview(input: Tensor, arr, start: int | None = None) -> Tensor:
    """Wrap ``arr`` (from :func:`_src`) as a view of ``input``: shared storage, root ``_base``.

    ``start``: the byte offset of ``arr``'s first element from ``input``'s, where the caller knows it
    (0 for views that keep the first element: transposes, reshapes, expansions); else read off the shadow.
    """
    dev = input._device
    if dev is not CPU:
        if start is None:
            start = _ptr(arr) - _DUMMY_PTRS[arr.dtype]
        arr = backend(dev.type).view_from(input._data, input._storage._buffer, tuple(arr.shape), arr.strides, start,
                                          input.dtype.np)
    out = _wrap(arr, dev, input._storage, input.dtype)
    base = input._base
    out._base = input if base is None else base
    return out


def _keyword_form(args: tuple, keyword, argname: str, fname: str) -> tuple:
    """The sizes of ``f(*args)`` or of torch's keyword form ``f(argname=...)`` (``x.flip(dims=[0])``), as args."""
    if keyword is None:
        return args
    if args:
        raise TypeError(f"{fname}() got multiple values for argument '{argname}'")
    return (keyword,)


def _shape_args(size, argname: str = "size") -> tuple:
    # f(2, 3), f((2, 3)), f([2, 3]) or f(Size)
    for n in size:
        if n.__class__ is not int:
            break
    else:
        return size if size.__class__ is tuple else tuple(size)
    if len(size) == 1 and size[0].__class__ is not int:
        size = size[0]
        if isinstance(size, Tensor):
            size = size.tolist()
        if not isinstance(size, (tuple, list)):
            size = (size,)
    try:
        return tuple(s if s.__class__ is int else int(s.__index__()) for s in size)
    except (AttributeError, TypeError):
        raise TypeError(f"{argname} must be a tuple of ints, but got {tuple(size)!r}") from None


def _infer_size(shape: tuple, numel: int) -> tuple:
    """``shape`` with a ``-1`` resolved for ``numel`` elements; torch's errors otherwise."""
    if math.prod(shape) == numel and (numel or -1 not in shape) and (not shape or min(shape) >= 0):
        return shape
    infer = -1
    known = 1
    for i, n in enumerate(shape):
        if n == -1:
            if infer >= 0:
                raise RuntimeError("only one dimension can be inferred")
            infer = i
        elif n < 0:
            raise RuntimeError(f"invalid shape dimension {n} at index {i} of shape {list(shape)}")
        else:
            known *= n
    if infer >= 0:
        if known == 0:
            if numel == 0:
                raise RuntimeError(
                    f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
                    "unspecified dimension size -1 can be any value and is ambiguous"
                )
        elif numel % known == 0:
            return shape[:infer] + (numel // known,) + shape[infer + 1:]
    elif known == numel:
        return shape
    raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")


def _view_strides(oldshape: tuple, oldstride: tuple, newshape: tuple):
    """Strides (elements) viewing ``oldshape``/``oldstride`` as ``newshape``, or None (torch's rule)."""
    if not oldshape:
        return (1,) * len(newshape)
    numel = math.prod(oldshape)
    if numel == 0 and tuple(oldshape) == tuple(newshape):
        return tuple(oldstride)
    nd = len(newshape)
    newstride = [0] * nd
    if numel == 0:
        for d in range(nd - 1, -1, -1):
            newstride[d] = 1 if d == nd - 1 else max(newshape[d + 1], 1) * newstride[d + 1]
        return tuple(newstride)
    view_d = nd - 1
    chunk_base = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for td in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[td]
        if td == 0 or (oldshape[td - 1] != 1 and oldstride[td - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if td > 0:
                chunk_base = oldstride[td - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


@functools.lru_cache(maxsize=1024)
def _canonical_strides(shape: tuple, item: int) -> tuple:
    strides = []
    acc = item
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _view_array(arr, shape: tuple):
    """``arr`` viewed as ``shape`` (already inferred), or None when no view is possible."""
    if arr.strides == _canonical_strides(arr.shape, arr.itemsize):
        # numpy reshapes a canonical C array to canonical strides, which are torch's too
        return arr.reshape(shape)
    item = arr.itemsize
    strides = _view_strides(arr.shape, tuple(s // item for s in arr.strides), shape)
    if strides is None:
        return None
    return _strided(arr, shape, tuple(s * item for s in strides))


_VIEW_ERR = ("view size is not compatible with input tensor's size and stride (at least one dimension "
             "spans across two contiguous subspaces). Use .reshape(...) instead.")


# --- view, reshape, flatten -----------------------------------------------------------------------
VIEW = declare("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", function=False, view=True, category="view")


@VIEW.front
def view(self: Tensor, *shape, dtype=None, size=None) -> Tensor:
    """A view of ``self`` with ``shape`` (one entry may be ``-1``); shares storage.

    Raises RuntimeError when the strides of ``self`` don't allow it (use :func:`reshape`).
    ``view(dtype)`` reinterprets the bytes instead (:func:`_view_dtype`).
    """
    if dtype is not None or (len(shape) == 1 and isinstance(shape[0], dt.dtype)):
        return _view_dtype(self, shape[0] if dtype is None else dtype)
    shape = _shape_args(_keyword_form(shape, size, "size", "view"), "size")
    src = _src(self)
    shape = _infer_size(shape, src.size)
    arr = _view_array(src, shape)
    if arr is None:
        raise RuntimeError(_VIEW_ERR)
    out = _mkview(self, arr, 0)
    if self._requires_grad and grad_state.enabled:
        record(VIEW, (self, shape), {}, out)
    return out


def _view_dtype(self: Tensor, dtype) -> Tensor:
    """``self``'s bytes as ``dtype`` (torch's ``Tensor.view(dtype)``): a view sharing storage, never
    differentiable. Another element size rescales the last dimension, which must then be contiguous,
    with torch's checks and messages; the other strides and the offset must fit the new size."""
    d = dt.to_dtype(dtype)
    old_item, new_item = self.dtype.itemsize, d.itemsize
    shape, strides = list(self.shape), list(self.stride())
    offset = self.storage_offset()
    if old_item != new_item:
        what = f"to view {self.dtype.scalar_name} as {d.scalar_name} (different element sizes)"
        if not shape:
            raise RuntimeError(f"self.dim() cannot be 0 {what}")
        if strides[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
        if new_item > old_item:
            ratio = new_item // old_item
            if shape[-1] % ratio:
                raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, but got {shape[-1]}")
            if offset % ratio:
                raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {what}, but got {offset}")
            for i, st in enumerate(strides[:-1]):
                if st % ratio:
                    raise RuntimeError(f"self.stride({i}) must be divisible by {ratio} {what}, but got {st}")
        shape[-1] = shape[-1] * old_item // new_item
        strides = [st * old_item // new_item for st in strides[:-1]] + [1]
        offset = offset * old_item // new_item
    return storage_view(self, tuple(shape), tuple(strides), offset, d)


VIEW_AS = declare("view_as(Tensor(a) self, Tensor other) -> Tensor(a)", function=False, view=True,
                  category="view")


@VIEW_AS.front
def view_as(self: Tensor, other: Tensor) -> Tensor:
    """``self.view(other.shape)``."""
    return view(self, tuple(other._data.shape))


RESHAPE = declare("reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", category="view")


@RESHAPE.front
def reshape(input: Tensor, *args, shape=None) -> Tensor:
    """``input`` with ``shape`` (one entry may be ``-1``): a view when the strides allow, else a copy."""
    shape = _shape_args(_keyword_form(args, shape, "shape", "reshape"), "shape")
    src = _src(input)
    shape = _infer_size(shape, src.size)
    arr = _view_array(src, shape)
    if arr is not None:
        out = _mkview(input, arr, 0)
        if input._requires_grad and grad_state.enabled:
            record(VIEW, (input, shape), {}, out)
        return out
    out = _wrap(RESHAPE_KERNELS[input._device.type](input._data, shape), input._device)
    if input._requires_grad and grad_state.enabled:
        record(RESHAPE, (input, shape), {}, out)
    return out




RESHAPE_KERNELS = RESHAPE.kernels

RESHAPE_AS = declare("reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)", function=False, category="view")


@RESHAPE_AS.front
def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    """``self.reshape(other.shape)``."""
    return reshape(self, tuple(other._data.shape))


FLATTEN = declare("flatten(Tensor(a) input, int start_dim=0, int end_dim=-1) -> Tensor(a)", category="view")


@FLATTEN.front
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` into one (a view when possible); 0-d becomes 1-d."""
    shape = input._data.shape
    nd = len(shape)
    if nd == 0:
        return reshape(input, (1,))
    if start_dim == 0 and end_dim == -1:
        return input if nd == 1 else reshape(input, (input._data.size,))
    s, e = wrap_dim(start_dim, nd), wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    return reshape(input, shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])


UNFLATTEN = declare("unflatten(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)", view=True, category="view")


@UNFLATTEN.front
def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one may be ``-1``)."""
    shape = tuple(input._data.shape)
    d = wrap_dim(dim, len(shape))
    sizes = _shape_args((sizes,), "sizes")
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    try:
        sizes = _infer_size(sizes, shape[d])
    except RuntimeError:
        if -1 in sizes:
            raise
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
            f"({shape[d]}) in the input tensor"
        ) from None
    return view(input, shape[:d] + sizes + shape[d + 1:])  # splitting one dim is always a view


# --- permutations ---------------------------------------------------------------------------------
_RANGES = [list(range(n)) for n in range(8)]
PERMUTE = declare("permute(Tensor(a) self, int[] dims) -> Tensor(a)", view=True, category="view")


@PERMUTE.front
def permute(input: Tensor, *args, dims=None) -> Tensor:
    """A view of ``input`` with its dimensions reordered as ``dims``."""
    dims = _shape_args(_keyword_form(args, dims, "dims", "permute"), "dims")
    nd = input._data.ndim
    if sorted(dims) == _RANGES[nd] if nd < 8 else False:
        out = _mkview(input, _src(input).transpose(dims), 0)
        if input._requires_grad and grad_state.enabled:
            record(PERMUTE, (input, dims), {}, out)
        return out
    if len(dims) != nd:
        raise RuntimeError(
            "permute(): number of dimensions in the tensor input does not match the length of the desired "
            f"ordering of dimensions i.e. input.dim() = {nd} is not equal to len(dims) = {len(dims)}"
        )
    dims = tuple(wrap_dim(d, nd) for d in dims)
    if len(set(dims)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    out = _mkview(input, _src(input).transpose(dims), 0)
    if input._requires_grad and grad_state.enabled:
        record(PERMUTE, (input, dims), {}, out)
    return out


TRANSPOSE = declare("transpose(Tensor(a) input, int dim0, int dim1) -> Tensor(a)", view=True, category="view",
                    aliases=("swapaxes", "swapdims"))


@TRANSPOSE.front
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """A view of ``input`` with dims ``dim0`` and ``dim1`` swapped."""
    nd = input._data.ndim
    if nd == 0:
        wrap_dim(dim0, 0), wrap_dim(dim1, 0)
        return _mkview(input, _src(input), 0)
    d0, d1 = wrap_dim(dim0, nd), wrap_dim(dim1, nd)
    out = _mkview(input, _src(input).swapaxes(d0, d1), 0)
    if input._requires_grad and grad_state.enabled:
        record(TRANSPOSE, (input, d0, d1), {}, out)
    return out


def _inplace_view(self: Tensor, new: Tensor, op, inputs, attrs) -> Tensor:
    # Metadata-only in-place ops (squeeze_, t_ ...): self takes the new geometry; data is untouched. Under
    # autograd the engine runs the op again with grad mode off and records it (the node's edges come from
    # self's old history).
    if inplace_needs_engine(self):
        return inplace_by_engine(op, inputs, {"inplace": True, **attrs})
    self._data = new._data
    return self


@TRANSPOSE.inplace
def transpose_(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap dims ``dim0`` and ``dim1`` of ``self`` in place (metadata only)."""
    with _no_record():
        new = transpose(self, dim0, dim1)
    return _inplace_view(self, new, TRANSPOSE, (self, dim0, dim1), {})


class _no_record:
    def __enter__(self):
        self.prev = grad_state.enabled
        grad_state.enabled = False

    def __exit__(self, *exc):
        grad_state.enabled = self.prev


T_OP = declare("t(Tensor(a) input) -> Tensor(a)", view=True, category="view")


@T_OP.front
def t(input: Tensor) -> Tensor:
    """Transpose a tensor of at most 2 dims (0-d and 1-d tensors are returned as views of themselves)."""
    nd = input._data.ndim
    if nd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {nd}D")
    out = _mkview(input, _src(input).T, 0)
    if input._requires_grad and grad_state.enabled:
        record(T_OP, (input,), {}, out)
    return out


@T_OP.inplace
def t_(self: Tensor) -> Tensor:
    """Transpose ``self`` (at most 2-d) in place (metadata only)."""
    with _no_record():
        new = t(self)
    return _inplace_view(self, new, T_OP, (self,), {})


def _prop_T(self: Tensor) -> Tensor:
    nd = self._data.ndim
    if nd == 2:
        return transpose(self, 0, 1)
    return permute(self, tuple(range(nd - 1, -1, -1)))


def _prop_mT(self: Tensor) -> Tensor:
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {nd}-D tensor.")
    return transpose(self, -2, -1)


def _prop_mH(self: Tensor) -> Tensor:
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {nd}-D tensor.")
    t = transpose(self, -2, -1)
    return t.conj() if self.dtype.is_complex else t  # conj is a copy (flambeau has no conjugate bit)


def _prop_H(self: Tensor) -> Tensor:
    nd = self._data.ndim
    if nd > 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {nd}-D tensor.")
    t = _prop_T(self)
    return t.conj() if self.dtype.is_complex else t


_prop_T.__doc__ = "All dimensions reversed (for a matrix, its transpose)."
_prop_mT.__doc__ = "The last two dimensions transposed (a batch of matrices transposed)."
_prop_mH.__doc__ = ("The conjugate transpose of the last two dims (a view for real tensors; a copy for complex ones, "
                    "as flambeau has no conjugate bit).")
_prop_H.__doc__ = "The conjugate transpose of a matrix (a view for real tensors, a copy for complex ones)."
TRANSPOSE.dunders.update(T=property(_prop_T), mT=property(_prop_mT), mH=property(_prop_mH), H=property(_prop_H))


MOVEDIM = declare("movedim(Tensor(a) input, int[] source, int[] destination) -> Tensor(a)", view=True,
                  category="view", aliases=("moveaxis",))


@MOVEDIM.front
def movedim(input: Tensor, source, destination) -> Tensor:
    """Move dims ``source`` to positions ``destination`` (ints or sequences); other dims keep order."""
    nd = input._data.ndim
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain the same "
            f"number of dims as destination ({list(dst)} dims)"
        )
    src = tuple(wrap_dim(d, nd) for d in src)
    dst = tuple(wrap_dim(d, nd) for d in dst)
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(src)})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(dst)})")
    order = [d for d in range(nd) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, tuple(order))


# --- expand and broadcasting ----------------------------------------------------------------------
EXPAND = declare("expand(Tensor(a) self, SymInt[] size) -> Tensor(a)", function=False, view=True, category="view")


def _expand_shape(shape: tuple, size: tuple, name_of) -> tuple:
    nd = len(shape)
    if len(size) < nd:
        raise RuntimeError(
            f"expand({name_of()}, size={list(size)}): the number of sizes provided ({len(size)}) must be "
            f"greater or equal to the number of dimensions in the tensor ({nd})"
        )
    lead = len(size) - nd
    out = []
    for i, n in enumerate(size):
        if i < lead:
            if n < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor ({n}) isn't allowed in a leading, non-existing dimension {i}"
                )
            out.append(n)
            continue
        have = shape[i - lead]
        if n == -1:
            out.append(have)
        elif have == 1 or have == n:
            if n < 0:
                raise RuntimeError(f"invalid shape dimension {n}")
            out.append(n)
        else:
            raise RuntimeError(
                f"The expanded size of the tensor ({n}) must match the existing size ({have}) at non-singleton "
                f"dimension {i}.  Target sizes: {list(size)}.  Tensor sizes: {list(shape)}"
            )
    return tuple(out)


def _expand_array(src, shape: tuple):
    # torch's strides: broadcast dims get 0, new leading size-1 dims get size * stride of the next dim.
    nd, lead = len(shape), len(shape) - src.ndim
    strides = [0] * nd
    if src.ndim == 0:
        return _strided(src, shape, tuple(strides))
    for i in range(nd - 1, -1, -1):
        if i >= lead:
            n, st = src.shape[i - lead], src.strides[i - lead]
        else:
            n, st = 1, (shape[i + 1] * strides[i + 1] if i + 1 < nd else src.itemsize)
        strides[i] = st if n == shape[i] else 0
    return _strided(src, shape, tuple(strides))


@EXPAND.front
def expand(self: Tensor, *args, size=None) -> Tensor:
    """A view of ``self`` broadcast to ``size`` (``-1`` keeps a dim; size-1 dims get stride 0)."""
    size = _shape_args(_keyword_form(args, size, "size", "expand"), "size")
    src = _src(self)
    shape = _expand_shape(src.shape, size, lambda: f"{self.type()}{{{list(src.shape)}}}")
    out = _mkview(self, _expand_array(src, shape) if shape != src.shape else src, 0)
    if self._requires_grad and grad_state.enabled:
        record(EXPAND, (self, shape), {}, out)
    return out


EXPAND_AS = declare("expand_as(Tensor(a) self, Tensor other) -> Tensor(a)", function=False, view=True,
                    category="view")


@EXPAND_AS.front
def expand_as(self: Tensor, other: Tensor) -> Tensor:
    """``self.expand(other.shape)``."""
    return expand(self, tuple(other._data.shape))


BROADCAST_TO = declare("broadcast_to(Tensor(a) input, SymInt[] size) -> Tensor(a)", view=True, category="view")


@BROADCAST_TO.front
def broadcast_to(input: Tensor, size) -> Tensor:
    """``input.expand(size)``."""
    return expand(input, _shape_args((size,), "size"))


BROADCAST_TENSORS = declare("broadcast_tensors(Tensor[] tensors) -> Tensor[]", method=False, view=True,
                            category="view")


@BROADCAST_TENSORS.front
def broadcast_tensors(*tensors) -> tuple:
    """Views of ``tensors`` expanded to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, x in enumerate(tensors):
        check_tensor(x, f"tensors[{i}]", "broadcast_tensors")
    shape = broadcast_shapes(*(x._data.shape for x in tensors))
    return tuple(expand(x, shape) for x in tensors)


# --- squeeze, unsqueeze ---------------------------------------------------------------------------
SQUEEZE = declare("squeeze(Tensor(a) input, int[]? dim=None) -> Tensor(a)", view=True, category="view")


@SQUEEZE.front
def squeeze(input: Tensor, dim=None) -> Tensor:
    """A view of ``input`` without its size-1 dims (all, or those among ``dim``: an int or a tuple)."""
    src = _src(input)
    shape = src.shape
    nd = len(shape)
    if dim is None:
        axes = tuple(i for i, n in enumerate(shape) if n == 1)
    else:
        dims = (dim,) if not isinstance(dim, (tuple, list)) else tuple(dim)
        axes = tuple(sorted({wrap_dim(d, nd) for d in dims}))
        axes = tuple(a for a in axes if nd and shape[a] == 1)
    out = _mkview(input, src.squeeze(axes) if axes else src, 0)
    if input._requires_grad and grad_state.enabled:
        record(SQUEEZE, (input, axes), {}, out)
    return out


@SQUEEZE.inplace
def squeeze_(self: Tensor, dim=None) -> Tensor:
    """:func:`squeeze` in place (metadata only)."""
    with _no_record():
        new = squeeze(self, dim)
    return _inplace_view(self, new, SQUEEZE, (self, dim), {})


UNSQUEEZE = declare("unsqueeze(Tensor(a) input, int dim) -> Tensor(a)", view=True, category="view")


@UNSQUEEZE.front
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """A view of ``input`` with a size-1 dim inserted at ``dim`` (in ``[-ndim-1, ndim]``)."""
    src = _src(input)
    nd = src.ndim
    d = wrap_dim(dim, nd + 1)
    shape = src.shape[:d] + (1,) + src.shape[d:]
    arr = src.reshape(shape)
    st = src.shape[d] * src.strides[d] if d < nd else src.itemsize  # torch's stride for the new dim
    strides = src.strides[:d] + (st,) + src.strides[d:]
    if arr.strides != strides:
        arr = _strided(src, shape, strides)
    out = _mkview(input, arr, 0)
    if input._requires_grad and grad_state.enabled:
        record(UNSQUEEZE, (input, d), {}, out)
    return out


@UNSQUEEZE.inplace
def unsqueeze_(self: Tensor, dim: int) -> Tensor:
    """:func:`unsqueeze` in place (metadata only)."""
    with _no_record():
        new = unsqueeze(self, dim)
    return _inplace_view(self, new, UNSQUEEZE, (self, dim), {})


# --- narrowing views ------------------------------------------------------------------------------
NARROW = declare("narrow(Tensor(a) input, int dim, SymInt start, SymInt length) -> Tensor(a)", view=True,
                 category="view")


@NARROW.front
def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A view of ``length`` entries of dim ``dim`` starting at ``start`` (may be negative)."""
    src = _src(input)
    if src.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, src.ndim)
    size = src.shape[d]
    start = int(start)
    length = int(length)
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start < -size or start > size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    key = (slice(None),) * d + (slice(start, start + length),)
    out = _mkview(input, src[key])
    if input._requires_grad and grad_state.enabled:
        record(NARROW, (input, d, start, length), {}, out)
    return out


SELECT = declare("select(Tensor(a) input, int dim, SymInt index) -> Tensor(a)", view=True, category="view")


@SELECT.front
def select(input: Tensor, dim: int, index: int) -> Tensor:
    """A view of ``input`` at position ``index`` of dim ``dim`` (that dim removed)."""
    src = _src(input)
    if src.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, src.ndim)
    size = src.shape[d]
    index = int(index)
    if index < -size or index >= size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(src.shape)} "
                         f"at dimension {dim}")
    if index < 0:
        index += size
    out = _mkview(input, src[(slice(None),) * d + (index, Ellipsis)])
    if input._requires_grad and grad_state.enabled:
        record(SELECT, (input, d, index), {}, out)
    return out


UNFOLD = declare("unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)", function=False,
                 view=True, category="view")


@UNFOLD.front
def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """A view of all windows of ``size`` entries of dim ``dimension``, ``step`` apart, in a new last dim.

    Shape: dim ``dimension`` becomes ``(n - size) // step + 1``; a last dim of ``size`` is appended.
    """
    src = _src(self)
    nd = src.ndim
    d = wrap_dim(dimension, nd) if nd else wrap_dim(dimension, 0)
    n = src.shape[d] if nd else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if nd == 0:
        arr = src.reshape(1)
    else:
        shape = list(src.shape)
        strides = list(src.strides)
        shape[d] = (n - size) // step + 1
        strides[d] = src.strides[d] * step
        arr = _strided(src, tuple(shape) + (size,), tuple(strides) + (src.strides[d],))
    out = _mkview(self, arr)
    if self._requires_grad and grad_state.enabled:
        record(UNFOLD, (self, d, size, step), {}, out)
    return out


AS_STRIDED = declare("as_strided(Tensor(a) input, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) "
                     "-> Tensor(a)", view=True, category="view")


@AS_STRIDED.front
def as_strided(input: Tensor, size, stride, storage_offset=None) -> Tensor:
    """A view of ``input``'s storage with ``size``, element ``stride`` and ``storage_offset``
    (default: ``input``'s own offset). Bounds are checked against the storage."""
    size = _shape_args((size,), "size")
    stride = _shape_args((stride,), "stride")
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} vs {len(stride)}")
    for n in size:
        if n < 0:
            raise RuntimeError(f"as_strided: Negative sizes are not allowed, got {n}")
    for s in stride:
        if s < 0:
            raise RuntimeError("as_strided: Negative strides are not supported at the moment, got strides: "
                               f"{list(stride)}")
    off = input.storage_offset() if storage_offset is None else int(storage_offset)
    if off < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {off}")
    item = input.dtype.itemsize
    buf = input._storage._buffer
    nbytes = buf.nbytes if hasattr(buf, "nbytes") else buf.size * buf.dtype.itemsize
    need = 0 if 0 in size else (off + 1 + sum((n - 1) * s for n, s in zip(size, stride))) * item
    if need > nbytes:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {off}, and itemsize {item} "
            f"requiring a storage size of {need} are out of bounds for storage of size {nbytes}"
        )
    arr = backend(input._device.type).as_strided(buf, size, stride, off, input.dtype.np)
    out = _wrap(arr, input._device, input._storage, input.dtype)
    out._base = input if input._base is None else input._base
    if input._requires_grad and grad_state.enabled:
        record(AS_STRIDED, (input, size, stride, off), {}, out)
    return out


# --- splitting (tuples of views) ------------------------------------------------------------------
UNBIND = declare("unbind(Tensor(a -> *) input, int dim=0) -> Tensor(a)[]", view=True, category="view")


@UNBIND.front
def unbind(input: Tensor, dim: int = 0) -> tuple:
    """The slices of ``input`` along ``dim``, as a tuple of views (that dim removed)."""
    nd = input._data.ndim
    if nd == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, nd)
    return tuple(select(input, d, i) for i in range(input._data.shape[d]))


SPLIT = declare("split(Tensor(a -> *) tensor, SymInt[] split_size_or_sections, int dim=0) -> Tensor(a)[]",
                view=True, category="view")


@SPLIT.front
def split(tensor: Tensor, split_size_or_sections=None, dim: int = 0, *, split_size=None) -> tuple:
    """Views of ``tensor`` split along ``dim`` into chunks of ``split_size_or_sections`` entries
    (the last may be smaller) or into pieces of the given list of sizes (``split_size=``: the Tensor method's name
    of the argument in torch)."""
    if split_size is not None:
        if split_size_or_sections is not None:
            raise TypeError("split() got multiple values for argument 'split_size'")
        split_size_or_sections = split_size
    if split_size_or_sections is None:
        raise TypeError("split() missing required argument 'split_size_or_sections'")
    nd = tensor._data.ndim
    if nd == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, nd)
    n = tensor._data.shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={s}")
        if s == 0 and n != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sizes = [s] * (n // s) + ([n % s] if n % s else []) if s else [0]
        if not sizes:
            sizes = [0]
    else:
        sizes = [int(x) for x in split_size_or_sections]
        if sum(sizes) != n or any(x < 0 for x in sizes):
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension {d}), "
                f"but got split_sizes={sizes}"
            )
    # One autograd node for all the pieces (torch's SplitBackward0): its backward concatenates the
    # pieces' gradients once, where a narrow per piece would pad each to the full size and sum them.
    src = _src(tensor)
    lead = (slice(None),) * d
    out = []
    start = 0
    for sz in sizes:
        out.append(_mkview(tensor, src[lead + (slice(start, start + sz),)]))
        start += sz
    out = tuple(out)
    if tensor._requires_grad and grad_state.enabled:
        record(SPLIT, (tensor, split_size_or_sections, d), {}, out)
    return out


CHUNK = declare("chunk(Tensor(a -> *) input, int chunks, int dim=0) -> Tensor(a)[]", view=True, category="view")


@CHUNK.front
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split ``input`` into at most ``chunks`` views of ``ceil(n / chunks)`` entries along ``dim``."""
    if input._data.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, input._data.ndim)
    n = input._data.shape[d]
    return split(input, -(-n // chunks), d) if n else tuple(narrow(input, d, 0, 0) for _ in range(chunks))


TENSOR_SPLIT = declare("tensor_split(Tensor(a -> *) input, SymInt[] indices_or_sections, int dim=0) -> Tensor(a)[]",
                       view=True, category="view")


@TENSOR_SPLIT.front
def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    """Views of ``input`` split along ``dim`` into ``n`` near-equal sections (an int) or at ``indices``."""
    if input._data.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = wrap_dim(dim, input._data.ndim)
    n = input._data.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        ios = ios.item() if ios._data.ndim == 0 else ios.tolist()
    if isinstance(ios, int):
        if ios <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {ios}")
        q, r = divmod(n, ios)
        bounds = []
        start = 0
        for i in range(ios):
            end = start + q + (1 if i < r else 0)
            bounds.append((start, end))
            start = end
    else:
        idx = [int(i) for i in ios]
        bounds = []
        start = 0
        for i in idx + [n]:
            i = min(max(i + n if i < 0 else i, 0), n)
            bounds.append((start, max(i, start)))
            start = i
    return tuple(narrow(input, d, a, b - a) for a, b in bounds)


SPLIT_WITH_SIZES = declare("split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]",
                           view=True, category="view")


@SPLIT_WITH_SIZES.front
def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Views of ``input`` split along ``dim`` into pieces of ``split_sizes`` entries (they must sum to its size)."""
    return split(input, [int(n) for n in split_sizes], dim)


def _dir_split(name: str, dim: int, min_dims: int, doc: str):
    OP = declare(f"{name}(Tensor(a -> *) input, SymInt[] indices_or_sections) -> Tensor(a)[]", view=True,
                 category="view")

    def fn(input: Tensor, indices_or_sections) -> tuple:
        nd = input._data.ndim
        if nd < min_dims:
            raise RuntimeError(f"flambeau.{name} requires a tensor with at least {min_dims} dimension, but got a "
                               f"tensor with {nd} dimensions!")
        d = 0 if name == "hsplit" and nd == 1 else dim
        if isinstance(indices_or_sections, int) and input._data.shape[d] % indices_or_sections:
            raise RuntimeError(f"flambeau.{name} attempted to split along dimension {d}, but the size of the dimension "
                               f"{input._data.shape[d]} is not divisible by the split_size {indices_or_sections}!")
        return tensor_split(input, indices_or_sections, d)

    fn.__doc__ = doc
    OP.front(fn)
    return fn


hsplit = _dir_split("hsplit", 1, 1, "``tensor_split`` along dim 1 (0 for 1-d inputs); sections divide evenly.")
vsplit = _dir_split("vsplit", 0, 2, "``tensor_split`` along dim 0 of an at least 2-d input; sections divide evenly.")
dsplit = _dir_split("dsplit", 2, 3, "``tensor_split`` along dim 2 of an at least 3-d input; sections divide evenly.")

ADJOINT = declare("adjoint(Tensor(a) self) -> Tensor(a)", view=True, category="view")


@ADJOINT.front
def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (``input.mH``: a view for real tensors, a copy for complex)."""
    return _prop_mH(input)


# --- concatenation -------------------------------------------------------------------------------


CAT = declare("cat(Tensor[] tensors, int dim=0) -> Tensor", method=False, category="joining",
              aliases=("concat", "concatenate"))


def _tensor_list(tensors, opname: str) -> list:
    if isinstance(tensors, Tensor):
        raise TypeError(f"{opname}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"flambeau.{opname}(): expected a non-empty list of Tensors")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"{opname}(): argument 'tensors' must be tuple of Tensors, but element {i} is "
                            f"{type(x).__name__}")
    return tensors


@CAT.front
def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate ``tensors`` along ``dim``; all other dims must match.

    Dtype: the promotion of the inputs' dtypes. 1-d empty tensors are skipped, as in torch.
    """
    if tensors.__class__ is not list and tensors.__class__ is not tuple:
        tensors = _tensor_list(tensors, "cat")
    arrays = []
    dev = dtype = None
    for x in tensors:
        if x.__class__ is not Tensor:
            _tensor_list(tensors, "cat")
        if x._device is not dev:
            dev = x._device if dev is None else common_device(*tensors)
        if x.dtype is not dtype:
            dtype = x.dtype if dtype is None else dt.promote_types(dtype, x.dtype)
        arrays.append(x._data)
    if not arrays:
        _tensor_list(tensors, "cat")
    nd = arrays[0].ndim
    if nd and all(a.ndim == nd for a in arrays):
        d = dim if 0 <= dim < nd else wrap_dim(dim, nd)
        try:
            out = _wrap(CAT.kernel(dev.type)(arrays, d, dtype.np), dev, dtype=dtype)
        except ValueError:
            _cat_check(tensors, d)
            raise
    else:
        out = _cat_slow(tensors, dim, dev, dtype)
    record_if_needed(CAT, (tensors, dim), {}, out)
    return out


def _cat_check(tensors, d):
    ref = None
    for i, x in enumerate(tensors):
        s = x._data.shape
        if x._data.ndim == 1 and s[0] == 0:
            continue
        if ref is None:
            ref = s
            continue
        if len(s) != len(ref):
            if len(s) == 0:
                raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} and {len(s)}")
        for k in range(len(ref)):
            if k != d and s[k] != ref[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {ref[k]} but got size "
                    f"{s[k]} for tensor number {i} in the list."
                )


def _cat_slow(tensors, dim, dev, dtype):
    # mixed ranks: torch skips legacy 1-d empty tensors; 0-d tensors can't be concatenated
    used = [x for x in tensors if not (x._data.ndim == 1 and x._data.shape[0] == 0)]
    if not used:
        return _wrap(CAT.kernel(dev.type)([tensors[0]._data], 0, dtype.np), dev, dtype=dtype)
    for i, x in enumerate(tensors):
        if x._data.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    d = wrap_dim(dim, used[0]._data.ndim)
    _cat_check(tensors, d)
    return _wrap(CAT.kernel(dev.type)([x._data for x in used], d, dtype.np), dev, dtype=dtype)




STACK = declare("stack(Tensor[] tensors, int dim=0) -> Tensor", method=False, category="joining")


@STACK.front
def stack(tensors, dim: int = 0) -> Tensor:
    """Stack equal-shaped ``tensors`` along a new dim ``dim`` (in ``[-ndim-1, ndim]``)."""
    if tensors.__class__ is not list and tensors.__class__ is not tuple or not tensors:
        tensors = _tensor_list(tensors, "stack")
    t0 = tensors[0]
    if t0.__class__ is not Tensor:
        _tensor_list(tensors, "stack")
    dev = t0._device
    ref = t0._data.shape
    dtype = t0.dtype
    for i, x in enumerate(tensors):
        if x.__class__ is not Tensor:
            _tensor_list(tensors, "stack")
        if x._data.shape != ref:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(ref)} at entry 0 and "
                f"{list(x._data.shape)} at entry {i}"
            )
        if x.dtype is not dtype:
            dtype = dt.promote_types(dtype, x.dtype)
        if x._device is not dev:
            dev = common_device(*tensors)
    d = wrap_dim(dim, len(ref) + 1)
    out = _wrap(STACK.kernel(dev.type)([x._data for x in tensors], d, dtype.np), dev, dtype=dtype)
    record_if_needed(STACK, (tensors, d), {}, out)
    return out


def _atleast(x: Tensor, n: int) -> Tensor:
    nd = x._data.ndim
    if nd >= n:
        return x
    if n == 1 or nd == 0:
        return reshape(x, (1,) * n)
    if n == 2:
        return unsqueeze(x, 0)
    return reshape(x, (1,) + tuple(x._data.shape) + (1,)) if nd == 1 else unsqueeze(x, -1)


HSTACK = declare("hstack(Tensor[] tensors) -> Tensor", method=False, category="joining")


@HSTACK.front
def hstack(tensors) -> Tensor:
    """Concatenate column-wise: along dim 0 for 1-d inputs, dim 1 otherwise (0-d become 1-d)."""
    ts = [_atleast(x, 1) for x in _tensor_list(tensors, "hstack")]
    return cat(ts, 0 if ts[0]._data.ndim == 1 else 1)


VSTACK = declare("vstack(Tensor[] tensors) -> Tensor", method=False, category="joining", aliases=("row_stack",))


@VSTACK.front
def vstack(tensors) -> Tensor:
    """Concatenate row-wise (along dim 0) after making every input at least 2-d."""
    return cat([_atleast(x, 2) for x in _tensor_list(tensors, "vstack")], 0)


DSTACK = declare("dstack(Tensor[] tensors) -> Tensor", method=False, category="joining")


@DSTACK.front
def dstack(tensors) -> Tensor:
    """Concatenate depth-wise (along dim 2) after making every input at least 3-d."""
    return cat([_atleast(x, 3) for x in _tensor_list(tensors, "dstack")], 2)


COLUMN_STACK = declare("column_stack(Tensor[] tensors) -> Tensor", method=False, category="joining")


@COLUMN_STACK.front
def column_stack(tensors) -> Tensor:
    """Stack 0-d/1-d inputs as columns (``(n, 1)``) and concatenate everything along dim 1."""
    ts = [reshape(x, (x._data.size, 1)) if x._data.ndim <= 1 else x for x in _tensor_list(tensors, "column_stack")]
    return cat(ts, 1)


# --- repetition -----------------------------------------------------------------------------------


REPEAT = declare("repeat(Tensor self, SymInt[] repeats) -> Tensor", function=False, category="joining")


@REPEAT.front
def repeat(self: Tensor, *args, repeats=None) -> Tensor:
    """``self`` repeated ``repeats[i]`` times along each dim (extra leading repeats add dims)."""
    repeats = _shape_args(_keyword_form(args, repeats, "repeats", "repeat"), "repeats")
    if len(repeats) < self._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    for r in repeats:
        if r < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {r}: {list(repeats)}")
    try:
        out = _wrap(REPEAT.kernel(self._device.type)(self._data, repeats), self._device, dtype=self.dtype)
    except (MemoryError, ValueError, OverflowError) as e:
        shape = (1,) * (len(repeats) - self._data.ndim) + tuple(self._data.shape)
        raise allocation_error(e, "repeat", [n * r for n, r in zip(shape, repeats)], self.dtype,
                               f"repeats={list(repeats)} of a tensor of size {list(self.shape)}") from None
    if self._requires_grad and grad_state.enabled:
        record(REPEAT, (self, repeats), {}, out)
    return out


TILE = declare("tile(Tensor self, SymInt[] dims) -> Tensor", category="joining")


@TILE.front
def tile(input: Tensor, *args, dims=None) -> Tensor:
    """``input`` repeated along each dim; ``dims`` shorter than ``ndim`` is padded with leading ones."""
    dims = _shape_args(_keyword_form(args, dims, "dims", "tile"), "dims")
    dims = (1,) * (input._data.ndim - len(dims)) + dims
    return repeat(input, dims)




REPEAT_INTERLEAVE = declare("repeat_interleave(Tensor input, Tensor repeats, int? dim=None, *, "
                            "SymInt? output_size=None) -> Tensor", category="joining")


@REPEAT_INTERLEAVE.front
def repeat_interleave(input: Tensor, repeats=None, dim=None, *, output_size=None) -> Tensor:
    """Repeat each element ``repeats`` times (an int, or one count per entry of dim ``dim``).

    ``dim=None`` flattens first. ``repeat_interleave(counts)`` (an int64 tensor alone) gives
    ``arange(len(counts))`` repeated by ``counts``.
    """
    if repeats is None:
        counts = check_tensor(input, "input", "repeat_interleave")
        return repeat_interleave(arange(counts._data.shape[0] if counts._data.ndim else 1, device=counts._device),
                                 counts, 0)
    dev = input._device
    if isinstance(repeats, Tensor):
        if repeats.dtype.is_floating_point or repeats.dtype is dt.bool:
            raise RuntimeError(f"repeat_interleave: repeats must have an integral dtype, got {repeats.dtype}")
        if repeats._data.ndim > 1:
            raise RuntimeError("repeat_interleave: repeats must be 0-dim or 1-dim tensor")
        reps = repeats.to(device=dev, dtype=_int64)._data
        if repeats._data.ndim == 0:
            reps = int(repeats.item())
    else:
        reps = int(repeats)
    if dim is None:
        d = None
        n = input._data.size
    else:
        d = wrap_dim(dim, max(input._data.ndim, 1))
        n = input._data.shape[d] if input._data.ndim else 1
    if not isinstance(reps, int):
        if reps.shape[0] != n and reps.shape[0] != 1:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{reps.shape[0]} and input.size({0 if d is None else d}) = {n}")
        if dev is CPU and reps.size and int(reps.min()) < 0:  # off the CPU: the kernel's one synchronisation
            raise RuntimeError("repeats can not be negative")
    elif reps < 0:
        raise RuntimeError("repeats can not be negative")
    data = input._data if input._data.ndim or d is None else input._data.reshape(1)
    out = _wrap(REPEAT_INTERLEAVE.kernel(dev.type)(data, reps, d), dev, dtype=input.dtype)
    record_if_needed(REPEAT_INTERLEAVE, (input, repeats), {"dim": d}, out)
    return out


# --- flips, rolls, rotations ----------------------------------------------------------------------


FLIP = declare("flip(Tensor input, int[] dims) -> Tensor", category="reordering")


@FLIP.front
def flip(input: Tensor, *args, dims=None) -> Tensor:
    """A copy of ``input`` with the order of entries reversed along ``dims``."""
    dims = _shape_args(_keyword_form(args, dims, "dims", "flip"), "dims")
    nd = input._data.ndim
    dims = tuple(wrap_dim(d, nd) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"dims has duplicates, original flip dims size={len(dims)}, but unique flip dims size="
                           f"{len(set(dims))}")
    out = _wrap(FLIP.kernel(input._device.type)(input._data, dims if nd else ()), input._device, dtype=input.dtype)
    if input._requires_grad and grad_state.enabled:
        record(FLIP, (input, dims), {}, out)
    return out


FLIPLR = declare("fliplr(Tensor input) -> Tensor", category="reordering")


@FLIPLR.front
def fliplr(input: Tensor) -> Tensor:
    """Flip dim 1 (left/right); needs at least 2 dims."""
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


FLIPUD = declare("flipud(Tensor input) -> Tensor", category="reordering")


@FLIPUD.front
def flipud(input: Tensor) -> Tensor:
    """Flip dim 0 (up/down); needs at least 1 dim."""
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))




ROLL = declare("roll(Tensor input, SymInt[1] shifts, int[1] dims=[]) -> Tensor", category="reordering")


@ROLL.front
def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Roll entries by ``shifts`` along ``dims`` (flattened when ``dims`` is None), wrapping around."""
    shifts = (int(shifts),) if not isinstance(shifts, (tuple, list)) else tuple(int(s) for s in shifts)
    nd = input._data.ndim
    if dims is None or (isinstance(dims, (tuple, list)) and not dims):
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        dims = ()
    else:
        dims = (dims,) if not isinstance(dims, (tuple, list)) else tuple(dims)
        if len(shifts) != len(dims):
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
        dims = tuple(wrap_dim(d, nd) for d in dims)
    out = _wrap(ROLL.kernel(input._device.type)(input._data, shifts, dims), input._device, dtype=input.dtype)
    if input._requires_grad and grad_state.enabled:
        record(ROLL, (input, shifts, dims), {}, out)
    return out




ROT90 = declare("rot90(Tensor input, int k=1, int[] dims=[0,1]) -> Tensor", category="reordering")


@ROT90.front
def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first towards the second."""
    dims = tuple(dims)
    nd = input._data.ndim
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = wrap_dim(dims[0], nd), wrap_dim(dims[1], nd)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    out = _wrap(ROT90.kernel(input._device.type)(input._data, int(k) % 4, (d0, d1)), input._device,
                dtype=input.dtype)
    if input._requires_grad and grad_state.enabled:
        record(ROT90, (input, int(k) % 4, (d0, d1)), {}, out)
    return out


# --- triangles ------------------------------------------------------------------------------------




def _tri_op(name: str):
    OP = declare(f"{name}(Tensor input, int diagonal=0) -> Tensor", category="reordering")
    lower = name == "tril"

    def fn(input: Tensor, diagonal: int = 0) -> Tensor:
        if input._data.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        out = _wrap(OP.kernel(input._device.type)(input._data, int(diagonal)), input._device, dtype=input.dtype)
        if input._requires_grad and grad_state.enabled:
            record(OP, (input, int(diagonal)), {}, out)
        return out

    def fn_(self: Tensor, diagonal: int = 0) -> Tensor:
        if inplace_needs_engine(self):
            return inplace_by_engine(OP, (self, int(diagonal)), {})
        if self._data.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        res = OP.kernel(self._device.type)(self._data, int(diagonal))
        backend(self._device.type).copy_(self._data, res)
        self._storage._version += 1
        record_if_needed(OP, (self, int(diagonal)), {"inplace": True}, self)
        return self

    part = "lower" if lower else "upper"
    fn.__doc__ = (f"The {part} triangle of the last two dims of ``input`` (other entries zeroed); "
                  f"``diagonal`` > 0 moves the boundary above the main diagonal.")
    fn_.__doc__ = f":func:`{name}` in place."
    OP.front(fn)
    OP.inplace(fn_)
    return OP, fn


TRIL, tril = _tri_op("tril")
TRIU, triu = _tri_op("triu")


# --- padding, one-hot -----------------------------------------------------------------------------




PAD = declare("pad(Tensor input, SymInt[] pad, str mode='constant', float? value=None) -> Tensor", function=False,
              method=False, category="padding")


@PAD.front
def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """Pad ``input``: ``pad = (left_last, right_last, left_2nd_last, right_2nd_last, ...)``.

    ``mode`` is ``'constant'`` (filled with ``value``, default 0; negative pads crop),
    ``'reflect'``, ``'replicate'`` or ``'circular'``. Exposed for ``flambeau.nn.functional.pad``.
    """
    pad = tuple(int(p) for p in pad)
    nd = input._data.ndim
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > nd:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {nd}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pairs = [(0, 0)] * nd
    for i in range(len(pad) // 2):
        pairs[nd - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    shape = input._data.shape
    for d, (a, b) in enumerate(pairs):
        if shape[d] + a + b < 0:
            raise RuntimeError(f"The input size {shape[d]}, plus negative padding {a} and {b} resulted in a negative "
                               f"output size, which is invalid. Check dimension {d} of your input.")
        if mode == "reflect" and (a or b) and (a >= shape[d] or b >= shape[d]):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({a}, {b}) at dimension {d} of input {list(shape)}")
        if mode == "circular" and (a > shape[d] or b > shape[d]):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if mode in ("replicate", "reflect", "circular") and (a or b) and shape[d] == 0:
            raise RuntimeError(f"{mode}: input dimension {d} is empty and cannot be padded")
        if mode != "constant" and (a < 0 or b < 0):
            raise RuntimeError(f"negative padding is only supported with mode='constant', got {pad} with mode={mode!r}")
    v = 0 if value is None else value
    out = _wrap(PAD.kernel(input._device.type)(input._data, tuple(pairs), mode, v), input._device, dtype=input.dtype)
    record_if_needed(PAD, (input, pad), {"mode": mode, "value": value}, out)
    return out




ONE_HOT = declare("one_hot(Tensor self, int num_classes=-1) -> Tensor", function=False, method=False,
                  differentiable=False, category="padding")


@ONE_HOT.front
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding: shape ``tensor.shape + (num_classes,)``; ``-1`` infers ``max + 1``.

    Exposed for ``flambeau.nn.functional.one_hot``.
    """
    if tensor.dtype is not _int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    num_classes = int(num_classes)
    if tensor._data.size == 0 and num_classes == -1:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    if tensor._device is not CPU:
        # No host copy: the kernel infers -1 (one synchronisation, as torch) and reports classes out
        # of range through the device error flag.
        if num_classes < -1:
            raise RuntimeError(f"num_classes should be positive or -1, got {num_classes}")
        return _wrap(ONE_HOT.kernel(tensor._device.type)(tensor._data, num_classes), tensor._device, dtype=_int64)
    host = tensor._data
    if host.size:
        lo, hi = int(host.min()), int(host.max())
        if lo < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    if num_classes < 0:
        raise RuntimeError(f"num_classes should be positive or -1, got {num_classes}")
    return _wrap(ONE_HOT.kernel(tensor._device.type)(tensor._data, int(num_classes)), tensor._device, dtype=_int64)


# --- sorting --------------------------------------------------------------------------------------
def _return_type(name: str, fields=("values", "indices")):
    return return_type(name, fields)


sort_result = _return_type("sort")
topk_result = _return_type("topk")
kthvalue_result = _return_type("kthvalue")




SORT = declare("sort(Tensor self, *, bool? stable=None, int dim=-1, bool descending=False) -> (Tensor values, "
               "Tensor indices)", category="sorting")


def _sort_dim(input: Tensor, dim: int) -> int:
    return wrap_dim(dim, input._data.ndim) if input._data.ndim else wrap_dim(dim, 0)


@SORT.front
def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """Sort along ``dim``: a ``(values, indices)`` namedtuple (indices int64). The sort is always
    stable (equal elements keep their order); NaN sorts as the largest value."""
    d = _sort_dim(input, dim)
    if input._data.ndim == 0:  # (made on the input's device: a host array wrapped as a CUDA tensor breaks there)
        values = input.detach().clone()
        indices = input.new_zeros((), dtype=_int64)
    else:
        v, i = SORT.kernel(input._device.type)(input._data, d, bool(descending), bool(stable))
        values, indices = _wrap(v, input._device, dtype=input.dtype), _wrap(i, input._device, dtype=_int64)
    out = sort_result(values, indices)
    record_if_needed(SORT, (input,), {"dim": d, "descending": bool(descending), "stable": bool(stable)}, out)
    return out


ARGSORT = declare("argsort(Tensor self, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor",
                  differentiable=False, category="sorting")


@ARGSORT.front
def argsort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Tensor:
    """The int64 indices that sort ``input`` along ``dim`` (see :func:`sort`)."""
    with _no_record():
        return sort(input, dim, descending, stable).indices


MSORT = declare("msort(Tensor input) -> Tensor", category="sorting")


@MSORT.front
def msort(input: Tensor) -> Tensor:
    """``sort(input, dim=0).values``."""
    return sort(input, 0).values


TOPK = declare("topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, "
               "Tensor indices)", category="sorting")


@TOPK.front
def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The ``k`` largest (or smallest) entries along ``dim``, sorted: ``(values, indices)``."""
    d = _sort_dim(input, dim)
    n = input._data.shape[d] if input._data.ndim else 1
    if k < 0 or k > n:
        raise RuntimeError("selected index k out of range")
    with _no_record():
        s = sort(input, d, bool(largest), True)
        values, indices = narrow(s.values, d, 0, k) if input._data.ndim else s.values, \
            narrow(s.indices, d, 0, k) if input._data.ndim else s.indices
        values, indices = values.contiguous(), indices.contiguous()
    out = topk_result(values, indices)
    record_if_needed(TOPK, (input, k), {"dim": d, "largest": bool(largest), "sorted": bool(sorted)}, out)
    return out


KTHVALUE = declare("kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, "
                   "Tensor indices)", category="sorting")


@KTHVALUE.front
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """The ``k``-th smallest entry (1-based) along ``dim`` and its index: ``(values, indices)``."""
    d = _sort_dim(input, dim)
    n = input._data.shape[d] if input._data.ndim else 1
    if k < 1 or k > n:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d}")
    with _no_record():
        s = sort(input, d, False, True)
        if input._data.ndim == 0:
            values, indices = s.values, s.indices
        else:
            values, indices = narrow(s.values, d, k - 1, 1), narrow(s.indices, d, k - 1, 1)
            if not keepdim:
                values, indices = squeeze(values, d), squeeze(indices, d)
            values, indices = values.contiguous(), indices.contiguous()
    out = kthvalue_result(values, indices)
    record_if_needed(KTHVALUE, (input, k), {"dim": d, "keepdim": bool(keepdim)}, out)
    return out


# --- unique ---------------------------------------------------------------------------------------




UNIQUE = declare("unique(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False, "
                 "int? dim=None) -> (Tensor, Tensor, Tensor)", differentiable=False, category="sorting")


def _unique_result(input, values, inverse, counts, return_inverse, return_counts):
    dev = input._device
    v = _wrap(values, dev, dtype=input.dtype)
    if not return_inverse and not return_counts:
        return v
    out = (v,)
    if return_inverse:
        out += (_wrap(inverse, dev, dtype=_int64),)
    if return_counts:
        out += (_wrap(counts, dev, dtype=_int64),)
    return out


@UNIQUE.front
def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim=None):
    """The unique entries of ``input`` (flattened, or unique slices along ``dim``), sorted.

    Returns the values, or a tuple adding the int64 ``inverse`` (input shape; length of ``dim``) and
    ``counts`` when asked.
    """
    d = None if dim is None else wrap_dim(dim, input._data.ndim)
    if d is not None and input._data.shape[d] == 0 and input._data.size == 0 and input._data.ndim > 1:
        raise RuntimeError("Number of zero sized dimensions is more than one, so unique cannot be applied")
    vals, inv, cnt = UNIQUE.kernel(input._device.type)(input._data, bool(sorted), bool(return_inverse),
                                                       bool(return_counts), d)
    return _unique_result(input, vals, inv, cnt, return_inverse, return_counts)


UNIQUE_CONSECUTIVE = declare("unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, "
                             "int? dim=None) -> (Tensor, Tensor, Tensor)", differentiable=False, category="sorting")


@UNIQUE_CONSECUTIVE.front
def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """Collapse runs of equal consecutive entries (or slices along ``dim``); see :func:`unique`."""
    d = None if dim is None else wrap_dim(dim, input._data.ndim)
    vals, inv, cnt = UNIQUE_CONSECUTIVE.kernel(input._device.type)(input._data, bool(return_inverse),
                                                                   bool(return_counts), d)
    return _unique_result(input, vals, inv, cnt, return_inverse, return_counts)


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _declare_samples():
    from flambeau._ops._registry import OPS
    from flambeau._ops._samples import ALL, FLOAT, cases
    from flambeau._ops._samples import SampleInput as S

    def add(name, *builders, dtypes=ALL, **meta):
        OPS[name].samples(cases(*builders), dtypes=dtypes, **meta)

    add("view", lambda mk, mki: S(mk((3, 4)), 2, 6), lambda mk, mki: S(mk((3, 4)), -1))
    add("reshape", lambda mk, mki: S(mk((3, 4)), (2, 6)), lambda mk, mki: S(mk((4, 3), noncontiguous=True), (-1,)))
    add("flatten", lambda mk, mki: S(mk((2, 3, 4))), lambda mk, mki: S(mk((2, 3, 4)), 1))
    add("unflatten", lambda mk, mki: S(mk((2, 12)), 1, (3, 4)))
    add("permute", lambda mk, mki: S(mk((2, 3, 4)), (2, 0, 1)))
    add("transpose", lambda mk, mki: S(mk((2, 3, 4)), 0, 2))
    add("t", lambda mk, mki: S(mk((3, 4))))
    add("adjoint", lambda mk, mki: S(mk((2, 3, 4))))
    add("movedim", lambda mk, mki: S(mk((2, 3, 4)), 0, -1))
    add("expand", lambda mk, mki: S(mk((3, 1)), 3, 4), lambda mk, mki: S(mk((3, 1)), 2, -1, 4))
    add("broadcast_to", lambda mk, mki: S(mk((3, 1)), (2, 3, 4)))
    add("squeeze", lambda mk, mki: S(mk((3, 1, 4))), lambda mk, mki: S(mk((3, 1, 4)), 1))
    add("unsqueeze", lambda mk, mki: S(mk((3, 4)), 1), lambda mk, mki: S(mk((3, 4)), -1))
    add("narrow", lambda mk, mki: S(mk((5, 4)), 0, 1, 3))
    add("select", lambda mk, mki: S(mk((5, 4)), 1, 2))
    add("unfold", lambda mk, mki: S(mk((3, 7)), 1, 3, 2), ref=lambda x, *args: x.unfold(*args))
    add("unbind", lambda mk, mki: S(mk((3, 4)), 1))
    add("split", lambda mk, mki: S(mk((5, 4)), 2), lambda mk, mki: S(mk((5, 4)), (1, 3), 1))
    add("chunk", lambda mk, mki: S(mk((5, 4)), 2))
    add("tensor_split", lambda mk, mki: S(mk((5, 4)), 3), lambda mk, mki: S(mk((5, 4)), (1, 3), 1))
    add("cat", lambda mk, mki: S([mk((2, 3)), mk((1, 3))]), lambda mk, mki: S([mk((2, 3)), mk((2, 2))], 1))
    add("stack", lambda mk, mki: S([mk((2, 3)), mk((2, 3))]), lambda mk, mki: S([mk((2, 3)), mk((2, 3))], 2))
    for name in ("hstack", "vstack", "dstack", "column_stack"):
        add(name, lambda mk, mki: S([mk((2, 3)), mk((2, 3))]))
    add("repeat", lambda mk, mki: S(mk((2, 3)), 2, 1, 3))
    add("tile", lambda mk, mki: S(mk((2, 3)), (2, 2)))
    add("repeat_interleave", lambda mk, mki: S(mk((2, 3)), 2, 1),
        lambda mk, mki: S(mk((3,)), mki((3,), 3, 1)).named("tensor repeats"),
        xfail={"grad:tensor repeats": "repeat_interleave's derivative uses 'repeats', which it does not save"})
    add("flip", lambda mk, mki: S(mk((2, 3, 4)), (0, 2)))
    add("fliplr", lambda mk, mki: S(mk((2, 3))))
    add("flipud", lambda mk, mki: S(mk((2, 3))))
    add("roll", lambda mk, mki: S(mk((3, 4)), 1, 1), lambda mk, mki: S(mk((3, 4)), (1, -2), (0, 1)),
        lambda mk, mki: S(mk((3, 4)), 5))
    add("rot90", lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((3, 4)), 3, (1, 0)))
    add("tril", lambda mk, mki: S(mk((4, 5))), lambda mk, mki: S(mk((2, 4, 3)), -1))
    add("triu", lambda mk, mki: S(mk((4, 5))), lambda mk, mki: S(mk((2, 4, 3)), 1))
    add("pad", lambda mk, mki: S(mk((2, 3)), (1, 2)), lambda mk, mki: S(mk((2, 3, 4)), (1, 0, 2, 1), value=1.0),
        lambda mk, mki: S(mk((1, 2, 5)), (2, 2), "reflect"), lambda mk, mki: S(mk((1, 2, 5)), (1, 2), "replicate"),
        lambda mk, mki: S(mk((1, 2, 5)), (1, 2), "circular"), dtypes=FLOAT, ref="nn.functional.pad")
    add("one_hot", lambda mk, mki: S(mki((5,), 4)), lambda mk, mki: S(mki((2, 3), 3), 5), dtypes=("int64",),
        ref="nn.functional.one_hot")
    add("sort", lambda mk, mki: S(mk((3, 5))), lambda mk, mki: S(mk((3, 5)), 0, True), dtypes=FLOAT)
    add("argsort", lambda mk, mki: S(mk((3, 5))), lambda mk, mki: S(mk((3, 5)), 0, True), dtypes=FLOAT)
    add("msort", lambda mk, mki: S(mk((3, 5))), dtypes=FLOAT)
    add("topk", lambda mk, mki: S(mk((3, 5)), 2), lambda mk, mki: S(mk((3, 5)), 2, 0, False), dtypes=FLOAT)
    add("kthvalue", lambda mk, mki: S(mk((3, 5)), 2), lambda mk, mki: S(mk((3, 5)), 1, 0, True), dtypes=FLOAT)
    add("unique", lambda mk, mki: S(mki((10,), 4)), lambda mk, mki: S(mki((10,), 4), return_counts=True,
                                                                        return_inverse=True), dtypes=("int64",))
    add("unique_consecutive", lambda mk, mki: S(mki((10,), 3)),
        lambda mk, mki: S(mki((10,), 3), return_counts=True, return_inverse=True), dtypes=("int64",))


_declare_samples()
