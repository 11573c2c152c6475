"""Batching rules of the tensor operators: reductions, scans, shape operators, joining, matrix products
and indexing (see :mod:`flambeau.func._rules_base` for the conventions)."""

from __future__ import annotations

import math
import string

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.func._rules_base import (
    RULES,
    BatchedTensor,
    _call,
    _dims,
    _first,
    _full,
    _index,
    _make,
    _only_input_batched,
    _pad,
    _run,
    _sizes,
    _val,
    _wrap,
    _wrap_dim,
    bound,
    check_inplace,
    dispatch,
    elementwise,
    rule,
)

__all__: list = []  # rules register themselves in RULES


# --- reductions, scans and other operators with dims ----------------------------------------------
def _reduce(all_dims: bool, dim_name: str = "dim"):
    """A reduction over ``dim``: None means every dim (``all_dims``) or the flattened tensor."""

    def reduce_rule(op, fn, level, args, kwargs):
        ba = bound(fn, args, kwargs)
        first = _first(ba)
        dim = ba.arguments.get(dim_name)
        if isinstance(dim, Tensor):  # max(input, other): the elementwise maximum
            return elementwise(op, fn, level, args, kwargs)
        if not _only_input_batched(ba, level, first):
            return NotImplemented
        v = ba.arguments[first]._value
        r = v.dim() - 1
        size = level.size
        keepdim = ba.arguments.get("keepdim", False)
        every = dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0)
        if r == 0:  # one element per example: reduce a dim of size 1, torch accepts dim 0 and -1
            if not every:
                _dims(dim, 0)
            ba.arguments[first] = v.unsqueeze(1)
            ba.arguments[dim_name] = 1
            out = _run(op, fn, ba)
            if every and op.name in ("max", "min", "median"):
                out = out[0]  # over everything: the value alone, as torch returns it
            return _wrap(_squeeze_extra(out, 1), level)
        if every and not all_dims:
            ba.arguments[first] = v.reshape(size, -1)
            ba.arguments[dim_name] = 1
            if "keepdim" in ba.arguments:
                ba.arguments["keepdim"] = False
            out = _run(op, fn, ba)
            if op.name in ("max", "min", "median"):
                out = out[0]  # over everything: the value alone, as torch returns it
            elif keepdim and op.name in ("argmax", "argmin"):
                out = out.reshape(size, *([1] * r))
            return _wrap(out, level)
        ba.arguments[first] = v
        ba.arguments[dim_name] = tuple(range(1, r + 1)) if every else (
            _dims(dim, r) if isinstance(dim, (tuple, list)) else _dims(dim, r)[0])
        return _wrap(_run(op, fn, ba), level)

    return reduce_rule


def _squeeze_extra(out, rank: int):
    """Outputs of a 0-dim example computed as rank-1: back to one value per example."""
    if isinstance(out, Tensor):
        return out.reshape(out.shape[0]) if out.dim() > rank else out
    if isinstance(out, (tuple, list)):
        parts = [_squeeze_extra(o, rank) for o in out]
        return type(out)(*parts) if hasattr(type(out), "_fields") else type(out)(parts)
    return out


for _name in ("sum", "nansum", "mean", "nanmean", "amax", "amin", "var", "std", "var_mean", "std_mean", "all", "any",
              "count_nonzero", "logsumexp"):
    RULES[_name] = _reduce(all_dims=True)
for _name in ("prod", "max", "min", "argmax", "argmin", "median", "aminmax"):
    RULES[_name] = _reduce(all_dims=False)


@rule("norm")
def _norm(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    if ba.arguments.get("dim") is None and ba.arguments.get("p") == "nuc":
        if ba.arguments[_first(ba)].dim() != 2:
            return NotImplemented
        ba.arguments["dim"] = (0, 1)
        return _reduce(True)(op, fn, level, ba.args, ba.kwargs)
    return _reduce(True)(op, fn, level, args, kwargs)


def _shift(*names: str, extra: int = 0, same_shape: bool = False):
    """An operator of the first argument alone whose ``names`` are logical dims (ints or sequences).

    ``extra``: the dims index a result with that many more dims (``unsqueeze``, ``diag_embed``);
    ``same_shape``: an operator that keeps the shape (scans, softmax), run on a 0-dim example as rank 1.
    """

    def shift_rule(op, fn, level, args, kwargs):
        ba = bound(fn, args, kwargs)
        first = _first(ba)
        if not _only_input_batched(ba, level, first):
            return NotImplemented
        v = ba.arguments[first]._value
        r = v.dim() - 1
        if r == 0 and same_shape:
            v = v.unsqueeze(1)
            r = 1
            squeeze = True
        else:
            squeeze = False
        ba.arguments[first] = v
        for name in names:
            dim = ba.arguments.get(name)
            if dim is None:
                continue
            ba.arguments[name] = _dims(dim, r + extra) if isinstance(dim, (tuple, list)) else _dims(dim, r + extra)[0]
        inplace = op.inplace_fn is fn
        out = _run(op, fn, ba, inplace)
        if inplace:
            return args[0]
        return _wrap(_squeeze_extra(out, 1) if squeeze else out, level)

    return shift_rule


RULES.update({
    "cumsum": _shift("dim", same_shape=True), "cumprod": _shift("dim", same_shape=True),
    "cummax": _shift("dim", same_shape=True), "cummin": _shift("dim", same_shape=True),
    "softmax": _shift("dim", same_shape=True), "log_softmax": _shift("dim", same_shape=True),
    "sort": _shift("dim", same_shape=True), "argsort": _shift("dim", same_shape=True),
    "topk": _shift("dim", same_shape=True), "kthvalue": _shift("dim", same_shape=True),
    "mode": _shift("dim", same_shape=True),
    "transpose": _shift("dim0", "dim1"), "transpose_": _shift("dim0", "dim1"),
    "movedim": _shift("source", "destination"), "narrow": _shift("dim"), "unfold": _shift("dimension"),
    "unbind": _shift("dim"), "split": _shift("dim"), "chunk": _shift("dim"), "tensor_split": _shift("dim"),
    "split_with_sizes": _shift("dim"), "unflatten": _shift("dim"),
    "rot90": _shift("dims"), "diagonal": _shift("dim1", "dim2"), "diag_embed": _shift("dim1", "dim2", extra=1),
    "unsqueeze": _shift("dim", extra=1), "unsqueeze_": _shift("dim", extra=1),
})


@rule("select")
def _select(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    if _val(ba.arguments["index"], level) is not None:
        x = ba.arguments[_first(ba)]
        return _index(x, (slice(None),) * _wrap_dim(ba.arguments["dim"], x.dim()) + (ba.arguments["index"],))
    return _shift("dim")(op, fn, level, args, kwargs)


@rule("permute")
def _permute(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments[_first(ba)]
    dims = _dims_argument(ba)
    if len(dims) != x.dim():
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {x.dim()} is not equal "
                           f"to len(dims) = {len(dims)}")
    return _make(x._value.permute(0, *_dims(dims, x.dim())), level)


def _dims_argument(ba) -> tuple:
    """The dims of a front ``f(input, *args, dims=None)``: ``x.flip(0, 1)``, ``x.flip((0, 1))`` or torch's keyword
    form ``x.flip(dims=[0, 1])``."""
    dims = ba.arguments.get("dims")
    return _sizes_or_dims(ba.arguments.get("args", ()) if dims is None else (dims,))


def _sizes_or_dims(value) -> tuple:
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], (tuple, list)):
        return tuple(value[0])
    return tuple(value)


@rule("flip")
def _flip(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments[_first(ba)]
    return _make(x._value.flip(_dims(_dims_argument(ba), x.dim())), level)


@rule("fliplr")
def _fliplr(op, fn, level, args, kwargs):
    x = args[0]
    if x.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return x.flip(1)


@rule("flipud")
def _flipud(op, fn, level, args, kwargs):
    x = args[0]
    if x.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return x.flip(0)


@rule("msort")
def _msort(op, fn, level, args, kwargs):
    return args[0].sort(0).values


@rule("roll")
def _roll(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments[_first(ba)]
    v, dims = x._value, ba.arguments.get("dims")
    if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):  # the flattened tensor rolls
        return _make(v.reshape(level.size, -1).roll(ba.arguments["shifts"], 1).reshape(v.shape), level)
    return _make(v.roll(ba.arguments["shifts"], _dims(dims, x.dim()) if isinstance(dims, (tuple, list))
                        else _dims(dims, x.dim())[0]), level)


@rule("squeeze", "squeeze_")
def _squeeze(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments[_first(ba)]
    r, dim = x.dim(), ba.arguments.get("dim")
    shape = x.shape
    if dim is None:
        dims = tuple(i + 1 for i, n in enumerate(shape) if n == 1)
    else:
        dims = tuple(d for d in _dims(dim, r) if shape[d - 1] == 1)
    inplace = op.inplace_fn is fn
    v = x._value
    if not dims:
        return x if inplace else _make(v.view_as(v), level)
    if inplace:
        v.squeeze_(dims)
        return x
    return _make(v.squeeze(dims), level)


@rule("flatten")
def _flatten(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments[_first(ba)]
    r, v = x.dim(), x._value
    if r == 0:
        return _make(v.reshape(level.size, 1), level)
    start, end = _wrap_dim(ba.arguments["start_dim"], r), _wrap_dim(ba.arguments["end_dim"], r)
    return _make(v.flatten(start + 1, end + 1), level)


@rule("t", "t_")
def _t(op, fn, level, args, kwargs):
    x = args[0]
    if x.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
    if x.dim() < 2:
        return x if op.inplace_fn is fn else _make(x._value.view_as(x._value), level)
    if op.inplace_fn is fn:
        x._value.transpose_(1, 2)
        return x
    return _make(x._value.transpose(1, 2), level)


@rule("adjoint")
def _adjoint(op, fn, level, args, kwargs):
    return args[0].transpose(-2, -1)


@rule("tril", "triu", "tril_", "triu_")
def _triangle(op, fn, level, args, kwargs):
    x = args[0]
    if x.dim() < 2:
        raise RuntimeError(f"{op.name}: input tensor must have at least 2 dimensions")
    out = dispatch(op, fn, (x._value, *args[1:]), kwargs, op.inplace_fn is fn)
    return x if op.inplace_fn is fn else _make(out, level)


@rule("trace")
def _trace(op, fn, level, args, kwargs):
    x = args[0]
    if x.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.dim()}")
    return x.diagonal(0, 0, 1).sum(-1)


@rule("diag")
def _diag(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x, k = ba.arguments[_first(ba)], ba.arguments.get("diagonal", 0)
    if x.dim() == 1:
        return x.diag_embed(k)
    if x.dim() == 2:
        return x.diagonal(k, 0, 1).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.dim()}D")


@rule("diff")
def _diff(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    first = _first(ba)
    x = ba.arguments[first]
    r = x.dim()
    ba.arguments[first] = _full(x, level)
    for name in ("prepend", "append"):
        t = ba.arguments.get(name)
        if isinstance(t, Tensor):
            ba.arguments[name] = _full(t, level)
    ba.arguments["dim"] = _dims(ba.arguments["dim"], r)[0]
    return _wrap(_run(op, fn, ba), level)


@rule("repeat_interleave")
def _repeat_interleave(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    first = _first(ba)
    if not _only_input_batched(ba, level, first):
        return NotImplemented
    x = ba.arguments[first]
    v, dim = x._value, ba.arguments.get("dim")
    if dim is None:
        ba.arguments[first], ba.arguments["dim"] = v.reshape(level.size, -1), 1
    else:
        ba.arguments[first], ba.arguments["dim"] = v, _dims(dim, x.dim())[0]
    return _wrap(_run(op, fn, ba), level)


@rule("cross")
def _cross(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    a, b = ba.arguments["input"], ba.arguments["other"]
    shape = _broadcast_shape(tuple(a.shape), tuple(b.shape))
    dim = ba.arguments.get("dim")
    if dim is None:
        if 3 not in shape:
            raise RuntimeError(f"no dimension of size 3 in input of shape {list(a.shape)}")
        dim = shape.index(3)
    full = (level.size, *shape)
    va = _pad(_full(a, level), len(shape), level.size).expand(*full)
    vb = _pad(_full(b, level), len(shape), level.size).expand(*full)
    return _make(dispatch(op, fn, (va, vb, _dims(dim, len(shape))[0]), {}), level)


def _broadcast_shape(*shapes) -> tuple:
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n != 1:
                if out[i] not in (1, n):
                    raise RuntimeError(f"shapes {[list(x) for x in shapes]} cannot be broadcast together")
                out[i] = n
    return tuple(out)


# --- shape operators taking sizes ---------------------------------------------------------------------
@rule("view", "reshape")
def _view(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments[_first(ba)]
    shape = _sizes(next(v for k, v in ba.arguments.items() if k != _first(ba)))
    v = x._value
    if op.name == "view":
        try:
            return _make(v.view(level.size, *shape), level)
        except RuntimeError:
            # The batch dimension may sit inside the memory order (a vmap over in_dims=1): the view of each
            # example exists only as a copy. Check the logical view is valid, then reshape.
            if math.prod(shape) != x.numel() and -1 not in shape:
                raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.numel()}") from None
    return _make(v.reshape(level.size, *shape), level)


@rule("view_as", "reshape_as")
def _view_as(op, fn, level, args, kwargs):
    x, other = args[0], args[1] if len(args) > 1 else kwargs["other"]
    return x.view(other.shape) if op.name == "view_as" else x.reshape(other.shape)


@rule("expand", "broadcast_to")
def _expand(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments[_first(ba)]
    sizes = _sizes(next(v for k, v in ba.arguments.items() if k != _first(ba)))
    if len(sizes) < x.dim():
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({x.dim()})")
    v = _pad(x._value, len(sizes), level.size)
    return _make(v.expand(level.size, *sizes), level)


@rule("expand_as")
def _expand_as(op, fn, level, args, kwargs):
    x, other = args[0], args[1] if len(args) > 1 else kwargs["other"]
    return x.expand(other.shape)


@rule("repeat", "tile")
def _repeat(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x = ba.arguments[_first(ba)]
    reps = _sizes(next(v for k, v in ba.arguments.items() if k != _first(ba)))
    if op.name == "tile" and len(reps) < x.dim():
        reps = (1,) * (x.dim() - len(reps)) + reps
    if len(reps) < x.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                           "tensor")
    return _make(_pad(x._value, len(reps), level.size).repeat(1, *reps), level)


@rule("broadcast_tensors")
def _broadcast_tensors(op, fn, level, args, kwargs):
    tensors = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    shape = _broadcast_shape(*(tuple(t.shape) for t in tensors))
    return tuple(t.expand(*shape) for t in tensors)


@rule("hsplit", "vsplit", "dsplit")
def _hvdsplit(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x, sections = ba.arguments[_first(ba)], ba.arguments["indices_or_sections"]
    need, dim = {"hsplit": (1, 1 if x.dim() >= 2 else 0), "vsplit": (2, 0), "dsplit": (3, 2)}[op.name]
    if x.dim() < need:
        raise RuntimeError(f"flambeau.{op.name} requires a tensor with at least {need} dimension, but got a "
                           f"tensor with {x.dim()} dimensions!")
    if isinstance(sections, int) and x.shape[dim] % sections:
        raise RuntimeError(f"flambeau.{op.name} attempted to split along dimension {dim}, but the size of the "
                           f"dimension {x.shape[dim]} is not divisible by the split_size {sections}!")
    return x.tensor_split(sections, dim)


@rule("as_strided")
def _as_strided(op, fn, level, args, kwargs):
    raise RuntimeError("vmap: as_strided is not supported inside vmap: its strides and offset address the storage, "
                       "which holds the whole batch. Use view, reshape, expand or unfold instead.")


# --- joining ------------------------------------------------------------------------------------------
def _tensor_list(args, kwargs, name="tensors"):
    if args and isinstance(args[0], (list, tuple)):
        return list(args[0]), args[1:], kwargs
    if name in kwargs:
        kw = dict(kwargs)
        return list(kw.pop(name)), args, kw
    return list(args), (), kwargs


@rule("cat")
def _cat(op, fn, level, args, kwargs):
    tensors, rest, kw = _tensor_list(args, kwargs)
    dim = rest[0] if rest else kw.get("dim", 0)
    # torch skips 1-D empty tensors in cat (a legacy rule)
    shown = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0 and _val(t, level) is None)]
    r = shown[0].dim()
    if r == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    return _make(dispatch(op, fn, ([_full(t, level) for t in shown], _dims(dim, r)[0]), {}), level)


@rule("stack")
def _stack_rule(op, fn, level, args, kwargs):
    tensors, rest, kw = _tensor_list(args, kwargs)
    dim = rest[0] if rest else kw.get("dim", 0)
    r = tensors[0].dim()
    return _make(dispatch(op, fn, ([_full(t, level) for t in tensors], _dims(dim, r + 1)[0]), {}), level)


@rule("hstack", "vstack", "dstack", "column_stack")
def _stacks(op, fn, level, args, kwargs):
    tensors, _, _ = _tensor_list(args, kwargs)
    if op.name == "hstack":
        return _call("cat", tensors, 0 if all(t.dim() == 1 for t in tensors) else 1)
    if op.name == "vstack":
        return _call("cat", [t.reshape(1, -1) if t.dim() < 2 else t for t in tensors], 0)
    if op.name == "dstack":
        def at3(t):
            return t.reshape(1, 1, -1) if t.dim() < 2 else (t.unsqueeze(-1) if t.dim() == 2 else t)
        return _call("cat", [at3(t) for t in tensors], 2)
    return _call("cat", [t.reshape(-1, 1) if t.dim() < 2 else t for t in tensors], 1)


# --- matrix products ----------------------------------------------------------------------------------
def _matmul(level, a, b):
    """``a @ b`` for logical tensors, one of them batched at ``level``."""
    ra, rb = a.dim(), b.dim()
    if ra == 0 or rb == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {ra}D and {rb}D")
    va, vb = _val(a, level), _val(b, level)
    x = a if va is None else va
    y = b if vb is None else vb
    if ra == 1:
        x = x.unsqueeze(-2)
    if rb == 1:
        y = y.unsqueeze(-1)
    rank = max(ra, rb, 2)
    if va is not None:
        x = _pad(x, rank, level.size)
    if vb is not None:
        y = _pad(y, rank, level.size)
    out = _call("matmul", x, y)
    if rb == 1:
        out = out.squeeze(-1)
    if ra == 1:
        out = out.squeeze(-1 if rb == 1 else -2)
    return _make(out, level)


@rule("matmul")
def _matmul_rule(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    a, b = ba.arguments.values()
    return _matmul(level, a, b)


@rule("mm", "bmm", "mv", "dot", "vdot")
def _products(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    a, b = list(ba.arguments.values())[:2]
    ranks = {"mm": (2, 2), "bmm": (3, 3), "mv": (2, 1), "dot": (1, 1), "vdot": (1, 1)}[op.name]
    if (a.dim(), b.dim()) != ranks:
        messages = {"mm": "self must be a matrix" if a.dim() != 2 else "mat2 must be a matrix",
                    "bmm": "batch1 must be a 3D tensor" if a.dim() != 3 else "batch2 must be a 3D tensor",
                    "mv": f"vector + matrix @ vector expected, got 1, {a.dim()}, {b.dim()}",
                    "dot": f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors",
                    "vdot": f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors"}
        raise RuntimeError(messages[op.name])
    if op.name == "bmm" and a.shape[0] != b.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {a.shape[0]} and {b.shape[0]}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")
    if op.name in ("dot", "vdot") and a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to have "
                           "the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively")
    return _matmul(level, a, b)


@rule("outer")
def _outer(op, fn, level, args, kwargs):
    a, b = args[0], args[1] if len(args) > 1 else kwargs["vec2"]
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"outer: expected 1D tensors, got {a.dim()}D and {b.dim()}D")
    return a.unsqueeze(-1) * b


def _scaled(x, factor):
    return x if factor == 1 else x * factor


@rule("addmm", "addmv", "baddbmm", "addbmm")
def _addmm(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    c, a, b = list(ba.arguments.values())[:3]
    beta, alpha = ba.arguments.get("beta", 1), ba.arguments.get("alpha", 1)
    product = {"addmm": "mm", "addmv": "mv", "baddbmm": "bmm", "addbmm": "bmm"}[op.name]
    prod = _call(product, a, b)
    if op.name == "addbmm":
        prod = prod.sum(0)
    prod = _scaled(prod, alpha)
    return prod if beta == 0 else _scaled(c, beta) + prod


@rule("linear")
def _linear(op, fn, level, args, kwargs):
    """``input @ weight.mT + bias`` of the logical tensors (Note [Linear as one operator] in tensor-core)."""
    ba = bound(fn, args, kwargs)
    x, w, b = ba.arguments["input"], ba.arguments["weight"], ba.arguments["bias"]
    out = _call("matmul", x, _call("t", w))
    return out if b is None else _call("add", out, b)


@rule("einsum")
def _einsum(op, fn, level, args, kwargs):
    equation, operands = args[0], list(args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(operands):
        return NotImplemented  # let the operator report the mismatch
    if not arrow:  # torch's implicit output: the letters seen once, in order, after any ellipsis dims
        counts: dict = {}
        for s in specs:
            for ch in s.replace(".", ""):
                counts[ch] = counts.get(ch, 0) + 1
        rhs = ("..." if any("..." in s for s in specs) else "") + "".join(sorted(c for c, n in counts.items()
                                                                              if n == 1))
    fresh = next(c for c in string.ascii_letters if c not in eq)
    new_specs, values = [], []
    for s, t in zip(specs, operands):
        v = _val(t, level)
        if v is None:
            new_specs.append(s)
            values.append(t)
        else:
            new_specs.append(fresh + s)
            values.append(v)
    return _make(dispatch(op, fn, (",".join(new_specs) + "->" + fresh + rhs, *values), {}), level)


# --- indexing -----------------------------------------------------------------------------------------
def _is_array(k) -> bool:
    """Whether a key entry is an index array; a batched index always is (it differs per example)."""
    if k.__class__ is BatchedTensor:
        return True
    if isinstance(k, Tensor):
        return not (k.dim() == 0 and k.dtype is not fl.bool)  # a 0-dim integer tensor indexes like an int
    return isinstance(k, (list, tuple)) or (type(k).__module__ == "numpy" and getattr(k, "ndim", 0) > 0)


def _index_layout(items, r: int):
    """``(array positions, adjacent, dims before the first array)`` of a logical key on a rank-``r`` tensor.

    As torch does, ints are applied first (they never separate index arrays); arrays separated by a
    slice, None or ``...`` put their result dims first.
    """
    arrays = [i for i, k in enumerate(items) if _is_array(k)]
    if not arrays:
        return arrays, True, 0
    between = items[arrays[0]:arrays[-1] + 1]
    adjacent = not any(k is None or k is Ellipsis or isinstance(k, slice) for k in between)
    consumed = sum(_consumed(k) for k in items if k is not None and k is not Ellipsis)
    before = 0
    for k in items[:arrays[0]]:
        if isinstance(k, slice) or k is None:
            before += 1
        elif k is Ellipsis:
            before += r - consumed
    return arrays, adjacent, before


def _consumed(k) -> int:
    if isinstance(k, Tensor) and k.dtype is fl.bool:
        return max(k.dim(), 1)
    return 1


def _array_rank(k) -> int:
    if isinstance(k, Tensor):
        return 1 if k.dtype is fl.bool else k.dim()
    a = np.asarray(k)
    return 1 if a.dtype == np.bool_ else a.ndim


@rule("index")
def _getitem(op, fn, level, args, kwargs):
    self, key = args
    items = key if type(key) is tuple else (key,)
    if any(isinstance(k, bool) or (isinstance(k, (list, tuple)) and any(isinstance(e, BatchedTensor) for e in k))
           for k in items):
        return NotImplemented
    batched_keys = [i for i, k in enumerate(items) if _val(k, level) is not None]
    size = level.size
    r = self.dim()
    arrays, adjacent, before = _index_layout(items, r)
    if not batched_keys:
        out = self._value[(slice(None),) + items]
        if arrays and not adjacent:  # the index dims went first, the batch dim after them
            out = out.movedim(max(_array_rank(items[i]) for i in arrays), 0)
        return _make(out, level)
    if any(items[i].dtype is fl.bool for i in batched_keys):
        return NotImplemented  # a batched mask selects a different number of elements per example
    rank = max(_array_rank(items[i]) for i in arrays)
    new = list(items)
    for i in arrays:
        v = _val(items[i], level)
        if v is not None:
            new[i] = _pad(v, rank, size)
    first = fl.arange(size, device=self.device).reshape(size, *([1] * rank))
    out = _full(self, level)[(first, *new)]
    if adjacent and before and not all(isinstance(k, int) for k in items[:arrays[0]]):
        # torch put the index dims first (after the batch), where the logical result has them after
        # the ``before`` dims of the slices in front: move them back.
        perm = [0, *range(rank + 1, rank + 1 + before), *range(1, rank + 1), *range(rank + 1 + before, out.dim())]
        out = out.permute(*perm)
    return _make(out, level)


@rule("__setitem__")
def _setitem(op, fn, level, args, kwargs):
    self, key, value = args
    items = key if type(key) is tuple else (key,)
    if _val(self, level) is None:
        check_inplace(args, level, "index_put_")
    if any(_val(k, level) is not None or isinstance(k, bool) for k in items):
        return NotImplemented
    arrays, adjacent, _ = _index_layout(items, self.dim())
    if arrays and not adjacent:
        return NotImplemented
    v = _val(value, level)
    if v is not None:
        region = self[key]
        value = _pad(v, region.dim(), level.size)
    self._value[(slice(None),) + items] = value
    return None


@rule("index_put", "index_put_")
def _index_put(op, fn, level, args, kwargs):
    return NotImplemented


@rule("gather")
def _gather(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x, index = ba.arguments["input"], ba.arguments["index"]
    ba.arguments["dim"] = _dims(ba.arguments["dim"], x.dim())[0]
    ba.arguments["input"], ba.arguments["index"] = _full(x, level), _full(index, level)
    return _make(_run(op, fn, ba), level)


@rule("scatter", "scatter_add", "scatter_reduce", "scatter_", "scatter_add_", "scatter_reduce_")
def _scatter(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    first = _first(ba)
    x = ba.arguments[first]
    inplace = op.inplace_fn is fn
    if inplace:
        check_inplace(args, level, op.name + "_")
    ba.arguments["dim"] = _dims(ba.arguments["dim"], x.dim())[0]
    for name in (first, "index", "src"):
        t = ba.arguments.get(name)
        if isinstance(t, Tensor):
            ba.arguments[name] = _full(t, level)
    if isinstance(ba.arguments.get("value"), Tensor):
        return NotImplemented
    out = _run(op, fn, ba, inplace)
    return x if inplace else _make(out, level)


@rule("index_select")
def _index_select(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    x, dim, index = ba.arguments["input"], ba.arguments["dim"], ba.arguments["index"]
    d = _wrap_dim(dim, x.dim())
    if _val(index, level) is not None:
        if index.dim() > 1:
            raise IndexError("index_select(): Index is supposed to be a vector")
        return _index(x, (slice(None),) * d + (index.reshape(-1),))
    ba.arguments["input"], ba.arguments["dim"] = x._value, d + 1
    return _make(_run(op, fn, ba), level)


@rule("index_add", "index_copy", "index_fill", "index_add_", "index_copy_", "index_fill_")
def _index_ops(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    first = _first(ba)
    x, index = ba.arguments[first], ba.arguments["index"]
    if _val(index, level) is not None or _val(ba.arguments.get("value"), level) is not None:
        return NotImplemented
    inplace = op.inplace_fn is fn
    if inplace:
        check_inplace(args, level, op.name + "_")
    ba.arguments["dim"] = _dims(ba.arguments["dim"], x.dim())[0]
    ba.arguments[first] = _full(x, level)
    if isinstance(ba.arguments.get("source"), Tensor):
        ba.arguments["source"] = _full(ba.arguments["source"], level)
    out = _run(op, fn, ba, inplace)
    return x if inplace else _make(out, level)


@rule("take")
def _take(op, fn, level, args, kwargs):
    x, index = args[0], args[1] if len(args) > 1 else kwargs["index"]
    return _index(x.reshape(-1), index)


@rule("embedding")
def _embedding(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    idx, weight = ba.arguments["input"], ba.arguments["weight"]
    if ba.arguments.get("max_norm") is not None:
        return NotImplemented  # renormalises rows of the weight in place
    if _val(weight, level) is None:
        ba.arguments["input"] = idx._value
        return _make(_run(op, fn, ba), level)
    if ba.arguments.get("padding_idx") is not None:
        return NotImplemented
    return _index(weight, idx)


@rule("one_hot")
def _one_hot(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    if ba.arguments.get("num_classes", -1) == -1:
        return NotImplemented  # the number of classes would come from each example's maximum
    first = _first(ba)
    ba.arguments[first] = ba.arguments[first]._value
    return _make(_run(op, fn, ba), level)
