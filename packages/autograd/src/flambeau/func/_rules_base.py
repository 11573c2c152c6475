"""The helpers every batching rule uses, and the elementwise family (Note [Logical and physical dims]).

A rule is ``rule(op, fn, level, args, kwargs)``: ``fn`` is the front that was called (the
operator's function, its in-place variant or a dunder such as ``__setitem__``), ``args`` and
``kwargs`` hold batched tensors of ``level`` (whose ``_value`` has the batch dimension first) and
anything else. It calls operators on the values, which may themselves be batched at outer levels
(so it calls them through :func:`~flambeau.func._vmap.dispatch`, or through Tensor methods), and
returns the result batched at ``level``, or ``NotImplemented`` to ask for the per-example fallback.
``@rule(name, ...)`` registers a rule under operator names (``name_`` for the in-place variant).

Note [Logical and physical dims]: a batched tensor of logical shape ``s`` (rank ``r``) has a value
of shape ``(B, *s)``, so logical dim ``d`` (wrapped against ``r``) is value dim ``d + 1``. Tensors
that are not batched at this level broadcast from the right, which never reaches the batch
dimension once batched values are padded with size-1 dims up to the common rank.
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau._ops import OPS
from flambeau.func._vmap import BatchedTensor, _make, _wrap_dim, bound, check_inplace, dispatch

__all__ = ["RULES", "rule", "elementwise", "ELEMENTWISE_CATEGORIES"]

RULES: dict = {}


def rule(*names):
    """Register the decorated function as the batching rule of the operators ``names``."""

    def register(fn):
        for name in names:
            RULES[name] = fn
        return fn

    return register


# --- helpers ----------------------------------------------------------------------------------------
def _val(x, level):
    """The value (batch first) of ``x`` if it is batched at ``level``, else None."""
    return x._value if x.__class__ is BatchedTensor and x._level is level else None


def _wrap(out, level):
    if isinstance(out, Tensor):
        return _make(out, level)
    if out is None:
        return None
    if isinstance(out, (tuple, list)):
        parts = [_wrap(o, level) for o in out]
        return type(out)(*parts) if hasattr(type(out), "_fields") else type(out)(parts)
    return out


def _call(name: str, *args, **kwargs):
    op = OPS[name]
    return dispatch(op, op.fn, args, kwargs)


def _run(op, fn, ba, inplace: bool = False):
    """Call ``fn`` with the (rewritten) bound arguments; values batched at outer levels dispatch again."""
    return dispatch(op, fn, ba.args, ba.kwargs, inplace)


_INDEX = OPS["index"]


def _index(x, key):
    """``x[key]`` for any ``x`` (a plain tensor indexed by a batched key does not dispatch by itself)."""
    return dispatch(_INDEX, _INDEX.fn, (x, key), {})


def _full(x, level):
    """``x`` as a value batched at ``level``: its value, or ``x`` expanded along a new batch dim."""
    v = _val(x, level)
    if v is not None:
        return v
    return x.unsqueeze(0).expand(level.size, *x.shape)


def _pad(v, rank: int, size: int):
    """Value ``v`` (batch first) with size-1 dims inserted after the batch dim up to logical ``rank``."""
    r = v.dim() - 1
    return v if r >= rank else v.reshape(size, *([1] * (rank - r)), *v.shape[1:])


def _dims(dim, r: int) -> tuple:
    """Logical ``dim`` (int or sequence) wrapped against rank ``r``, as value dims."""
    if isinstance(dim, (tuple, list)):
        return tuple(_wrap_dim(d, r) + 1 for d in dim)
    return (_wrap_dim(dim, r) + 1,)


def _first(ba) -> str:
    return next(iter(ba.arguments))


def _sizes(value) -> tuple:
    """A shape given as varargs (``view(2, 3)``) or as one sequence (``view((2, 3))``)."""
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], (tuple, list)):
        value = value[0]
    return tuple(int(s) for s in value)


def _only_input_batched(ba, level, name) -> bool:
    """Whether the first argument is the only tensor of ``ba`` batched at ``level``."""
    for k, v in ba.arguments.items():
        if k == name:
            continue
        if _val(v, level) is not None:
            return False
        if isinstance(v, (list, tuple)) and any(_val(x, level) is not None for x in v):
            return False
    return _val(ba.arguments[name], level) is not None


# --- elementwise ------------------------------------------------------------------------------------
ELEMENTWISE_CATEGORIES = {"arithmetic", "math", "rounding", "activation", "activation_ext", "comparison", "logical"}


def _tensors(ba):
    for v in ba.arguments.values():
        if isinstance(v, Tensor):
            yield v


def elementwise(op, fn, level, args, kwargs, inplace: bool = False):
    """Every tensor argument broadcast against the others, the batch dimension leading."""
    ba = bound(fn, args, kwargs)
    tensors = list(_tensors(ba))
    rank = max(t.dim() for t in tensors)
    size = level.size
    for k, v in ba.arguments.items():
        value = _val(v, level)
        if value is not None:
            ba.arguments[k] = _pad(value, rank, size)
    if inplace:
        check_inplace(args, level, op.name + "_")
        _run(op, fn, ba, True)
        return args[0]
    out = _run(op, fn, ba)
    expected = _logical_dtype(fn, tensors, args, kwargs, level)
    if expected is not None and isinstance(out, Tensor) and out.dtype is not expected:
        out = out.to(expected)
    return _wrap(out, level)


def _logical_dtype(fn, tensors, args, kwargs, level):
    # (the stand-ins are plain tensors, so ``fn`` is called directly)
    """The result dtype of the logical call where a batched 0-dim tensor would promote differently.

    torch's type promotion ranks dimensioned tensors above 0-dim ones; a batched 0-dim tensor is
    physically 1-dim, so the physical call may promote where the logical one would not. Only then
    (rare) is the operator run once on tiny stand-ins of the logical arguments to get its dtype.
    """
    if not any(t.dim() == 0 and _val(t, level) is not None for t in tensors):
        return None
    if not any(t.dim() > 0 for t in tensors) or len({t.dtype for t in tensors}) == 1:
        return None
    def stand_in(x):
        return fl.ones((1,) * x.dim(), dtype=x.dtype) if isinstance(x, Tensor) else x

    out = fn(*(stand_in(a) for a in args), **{k: stand_in(v) for k, v in kwargs.items()})
    return out.dtype if isinstance(out, Tensor) else None


@rule("where")
def _where(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    if ba.arguments.get("input") is None:  # where(condition): the indices of the nonzero elements
        return NotImplemented
    return elementwise(op, fn, level, args, kwargs)


@rule("masked_fill")
def _masked_fill(op, fn, level, args, kwargs):
    ba = bound(fn, args, kwargs)
    value = ba.arguments["value"]
    if _val(value, level) is not None:  # a batched fill value: where(mask, value, input)
        x = ba.arguments[_first(ba)]
        return _call("where", ba.arguments["mask"], value.to(x.dtype), x)
    return elementwise(op, fn, level, args, kwargs)


@rule("masked_fill_")
def _masked_fill_(op, fn, level, args, kwargs):
    if _val(bound(fn, args, kwargs).arguments["value"], level) is not None:
        return NotImplemented
    return elementwise(op, fn, level, args, kwargs, inplace=True)


@rule("allclose", "equal")
def _one_bool(op, fn, level, args, kwargs):
    return NotImplemented  # one Python bool per example: the fallback reports it cannot be batched


@rule("fill_")
def _fill_(op, fn, level, args, kwargs):
    self, value = args[0], (args[1] if len(args) > 1 else kwargs["value"])
    check_inplace(args, level, "fill_")
    if _val(value, level) is not None:
        self._value.copy_(_pad(value._value, self.dim(), level.size))
    else:
        self._value.fill_(value)
    return self


@rule("prelu")
def _prelu(op, fn, level, args, kwargs):
    x, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
    if w.numel() != 1 and x.dim() >= 2:
        w = w.reshape(w.shape[0], *([1] * (x.dim() - 2)))
    return x.clamp(min=0) + w * x.clamp(max=0)
