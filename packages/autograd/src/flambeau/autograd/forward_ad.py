"""Forward-mode automatic differentiation with dual tensors (beyond the paper).

Inside ``with dual_level():``, ``make_dual(primal, tangent)`` makes a tensor that carries a
tangent; every operator applied to it propagates the tangent (its Jacobian-vector product), and
``unpack_dual(t)`` returns ``(primal, tangent)``::

    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)
        y = f(x)
        jvp = fwAD.unpack_dual(y).tangent

Tangent rules (:data:`TANGENTS`): pointwise operators reuse their backward formula (their
Jacobian is diagonal, so the vector-Jacobian and Jacobian-vector products coincide); operators
linear in their tensor input apply themselves to the tangent; the matmul family, softmax and
the non-linear reductions have their own rules. An operator without a rule raises when a dual
tensor reaches it, naming the operator.

Differences from torch: forward AD follows grad mode (it is off under ``no_grad``), and the
tensors it creates report ``requires_grad=False`` unless a primal required grad.
"""

from __future__ import annotations

import weakref
from collections import namedtuple

import flambeau as fl
from flambeau import Tensor
from flambeau.autograd._derivatives import DERIVATIVES
from flambeau.autograd._node import meta_of

__all__ = ["dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor", "enter_dual_level", "exit_dual_level"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_levels: list = []  # active levels, innermost last
_duals: dict = {}  # level -> WeakSet of tensors carrying a tangent at that level


def active() -> bool:
    return bool(_levels)


def enter_dual_level() -> int:
    """Open a new forward-AD level and return it."""
    level = len(_levels)
    _levels.append(level)
    _duals[level] = weakref.WeakSet()
    return level


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the innermost level; tangents attached at it are removed."""
    if not _levels or (level is not None and level != _levels[-1]):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created.")
    level = _levels.pop()
    for t in list(_duals.pop(level, ())):
        meta = t._autograd_meta
        if meta is not None and meta.tangents:
            meta.tangents.pop(level, None)
            if not meta.tangents and meta.forward_only:
                t._requires_grad = False
                meta.forward_only = False


class dual_level:
    """Context manager scoping dual tensors: tangents made inside are dropped on exit."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


def _current_level(level):
    if not _levels:
        raise RuntimeError("To create a dual Tensor, you need to be within a dual_level context "
                           "(`with forward_ad.dual_level():`)")
    return _levels[-1] if level is None else level


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A tensor with ``tensor``'s value (and history) carrying ``tangent`` as its forward gradient.

    Args:
        tensor: floating-point primal.
        tangent: same shape, dtype and device as ``tensor``.
    """
    level = _current_level(level)
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual expects Tensors for both the primal and the tangent")
    if not tensor.dtype.is_differentiable:
        raise ValueError(f"Expected primal to be floating point, but got: {tensor.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise ValueError(f"Trying to set a forward gradient that has a different size than that of the original "
                         f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                         f"forward gradient is of size {list(tangent.shape)}.")
    if tangent.dtype is not tensor.dtype or tangent.device != tensor.device:
        raise ValueError("the tangent must have the primal's dtype and device, got "
                         f"{tangent.dtype} on {tangent.device} for {tensor.dtype} on {tensor.device}")
    dual = tensor.view_as(tensor) if tensor.requires_grad else tensor.detach()
    _attach(dual, tangent, level)
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``; the tangent is None if it carries none at this level."""
    meta = tensor._autograd_meta
    tangent = None
    if meta is not None and meta.tangents and _levels:
        tangent = meta.tangents.get(_levels[-1] if level is None else level)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    if meta.forward_only:
        primal = tensor.detach()
    else:  # a view that keeps the primal's backward history but no tangent
        saved = _levels[:]
        _levels.clear()
        try:
            primal = tensor.view_as(tensor)
        finally:
            _levels.extend(saved)
    return UnpackedDualTensor(primal, tangent)


def _attach(t: Tensor, tangent: Tensor, level: int) -> None:
    meta = meta_of(t)
    if meta.tangents is None:
        meta.tangents = {}
    meta.tangents[level] = tangent
    if not t._requires_grad:
        # Ask the seam to show us operators on t, without making it require grad for users.
        t._requires_grad = True
        meta.forward_only = True
    _duals[level].add(t)


def tangent_of(t) -> Tensor | None:
    if not isinstance(t, Tensor):
        return None
    meta = t._autograd_meta
    if meta is None or not meta.tangents:
        return None
    return meta.tangents.get(_levels[-1]) if _levels else None


# --- propagation (called by the engine for every recorded operator while a level is active) ------
def propagate(op, inputs: tuple, attrs: dict, outputs) -> None:
    tangents = {}
    deriv = DERIVATIVES.get(op.name)
    names = deriv.pos_names if deriv is not None else ()
    any_tangent = False
    for i, x in enumerate(inputs):
        if isinstance(x, (list, tuple)):
            ts = [tangent_of(y) for y in x]
            if any(tt is not None for tt in ts):
                any_tangent = True
            tangents[i] = ts
        else:
            tt = tangent_of(x)
            if tt is not None:
                any_tangent = True
                tangents[i] = tt
    if not any_tangent:
        return
    rule = TANGENTS.get(op.name) or _default_rule(op)
    if rule is None:
        raise NotImplementedError(f"flambeau.autograd.forward_ad: no tangent rule for '{op.name}'")
    with fl.no_grad():
        out_t = rule(op, inputs, attrs, outputs, tangents, names)
    level = _levels[-1]
    if isinstance(outputs, Tensor):
        _attach(outputs, out_t.to(outputs.dtype), level)
    else:
        for o, ot in zip(outputs, out_t):
            if ot is not None and isinstance(o, Tensor) and o.dtype.is_differentiable:
                _attach(o, ot.to(o.dtype), level)


class _Live:
    """``s`` for backward formulas evaluated on live (not saved) forward values."""

    def __init__(self, names, inputs, attrs, outputs):
        self._d = dict(zip(names, inputs))
        if attrs:
            self._d.update({k: v for k, v in attrs.items() if k != "inplace"})
        self._d["result"] = outputs

    def get(self, name, default=None):
        return self._d.get(name, default)

    def __getattr__(self, name):
        try:
            return self._d[name]
        except KeyError:
            if name.endswith("_shape"):
                return tuple(self._d[name[:-6]].shape)
            raise AttributeError(name) from None


def _pointwise(op, inputs, attrs, outputs, tangents, names):
    deriv = DERIVATIVES[op.name]
    s = _Live(names, inputs, attrs, outputs)
    total = None
    for i, t in tangents.items():
        formula = deriv.formulas.get(names[i]) if i < len(names) else None
        if formula is None:
            continue
        contrib = formula(t.expand(tuple(outputs.shape)) if tuple(t.shape) != tuple(outputs.shape) else t, s)
        if contrib is None:
            continue
        total = contrib if total is None else total + contrib
    return total if total is not None else fl.zeros_like(outputs)


def _linear(op, inputs, attrs, outputs, tangents, names):
    """Operators linear in their first tensor argument: apply the operator to the tangent."""
    args = list(inputs)
    first = args[0]
    if isinstance(first, (list, tuple)):
        ts = tangents.get(0, [None] * len(first))
        args[0] = [t if t is not None else fl.zeros_like(x) for t, x in zip(ts, first)]
    else:
        args[0] = tangents.get(0)
        if args[0] is None:
            return None if isinstance(outputs, Tensor) else tuple(None for _ in outputs)
    kwargs = {k: v for k, v in (attrs or {}).items() if k != "inplace"}
    out = op.fn(*args, **kwargs)
    return tuple(out) if isinstance(out, (list, tuple)) else out


def _bilinear(fn):
    """Rule for an operator linear in each of its first two tensor arguments (matmul family)."""

    def rule(op, inputs, attrs, outputs, tangents, names):
        a, b = inputs[0], inputs[1]
        rest = inputs[2:]
        kwargs = {k: v for k, v in (attrs or {}).items() if k != "inplace"}
        total = None
        if 0 in tangents:
            total = fn(tangents[0], b, *rest, **kwargs)
        if 1 in tangents:
            part = fn(a, tangents[1], *rest, **kwargs)
            total = part if total is None else total + part
        return total

    return rule


def _linear_layer(op, inputs, attrs, outputs, tangents, names):
    """Tangent of ``linear(x, w, b)``: ``linear(dx, w) + linear(x, dw) + db``."""
    x, w = inputs[:2]
    total = fl.zeros_like(outputs)
    if 0 in tangents:
        total = total + op.fn(tangents[0], w)
    if 1 in tangents:
        total = total + op.fn(x, tangents[1])
    if 2 in tangents and tangents[2] is not None:
        total = total + tangents[2]
    return total


def _addmm_like(mul):
    def rule(op, inputs, attrs, outputs, tangents, names):
        c, a, b = inputs[:3]
        beta, alpha = (attrs or {}).get("beta", 1), (attrs or {}).get("alpha", 1)
        total = fl.zeros_like(outputs)
        if 0 in tangents:
            total = total + beta * tangents[0]
        if 1 in tangents:
            total = total + alpha * mul(tangents[1], b)
        if 2 in tangents:
            total = total + alpha * mul(a, tangents[2])
        return total

    return rule


def _einsum(op, inputs, attrs, outputs, tangents, names):
    equation, operands = inputs[0], list(inputs[1])
    ts = tangents.get(1, [None] * len(operands))
    total = None
    for i, t in enumerate(ts):
        if t is None:
            continue
        ops = operands[:i] + [t] + operands[i + 1:]
        part = fl.einsum(equation, *ops)
        total = part if total is None else total + part
    return total


def _softmax(op, inputs, attrs, outputs, tangents, names):
    dim = inputs[1] if len(inputs) > 1 else attrs.get("dim")
    t = tangents[0]
    return outputs * (t - (outputs * t).sum(dim, keepdim=True))


def _log_softmax(op, inputs, attrs, outputs, tangents, names):
    dim = inputs[1] if len(inputs) > 1 else attrs.get("dim")
    t = tangents[0]
    return t - (outputs.exp() * t).sum(dim, keepdim=True)


def _select_by_indices(op, inputs, attrs, outputs, tangents, names):
    """max/min with dim, sort, topk: the tangent at the selected positions."""
    t = tangents[0]
    if isinstance(outputs, Tensor):  # max/min over everything: the tangent at the first maximum
        mask = (inputs[0] == outputs)
        return (t * mask).sum() / mask.sum()
    indices = outputs[1]
    s = _Live(names, inputs, attrs, outputs)
    dim = s.get("dim", -1)
    keepdim = True if op.name in ("sort", "topk") else s.get("keepdim", False)
    idx = indices if keepdim else indices.unsqueeze(dim)
    picked = t.gather(dim, idx)
    return (picked if keepdim else picked.squeeze(dim)), None


def _logsumexp(op, inputs, attrs, outputs, tangents, names):
    x, t = inputs[0], tangents[0]
    s = _Live(names, inputs, attrs, outputs)
    dim, keepdim = s.get("dim"), s.get("keepdim", False)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    r = outputs
    if not keepdim:
        for d in sorted(d % x.dim() for d in dims):
            r = r.unsqueeze(d)
    return ((x - r).exp() * t).sum(dims, keepdim=keepdim)


def _reduce_dims(s, x):
    dim = s.get("dim")
    return tuple(range(x.dim())) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))


def _kept(r, x, dims, keepdim):
    if keepdim or r.dim() == x.dim():
        return r
    for d in sorted(d % x.dim() for d in dims):
        r = r.unsqueeze(d)
    return r


def _extreme(op, inputs, attrs, outputs, tangents, names):
    s = _Live(names, inputs, attrs, outputs)
    x, t = inputs[0], tangents[0]
    dims, keepdim = _reduce_dims(s, x), s.get("keepdim", False)
    mask = (x == _kept(outputs, x, dims, keepdim)).to(t.dtype)
    return (t * mask).sum(dims, keepdim=keepdim) / mask.sum(dims, keepdim=keepdim)


def _var_tangent(x, t, s, outputs_var, std):
    dims, keepdim = _reduce_dims(s, x), s.get("keepdim", False)
    correction = s.get("correction")
    if correction is None:
        correction = 1 if s.get("unbiased", True) else 0
    n = 1
    for d in dims:
        n *= x.shape[d]
    centered = x - x.mean(dims, keepdim=True)
    tv = (centered * (t - t.mean(dims, keepdim=True))).sum(dims, keepdim=keepdim) * (2.0 / (n - correction))
    return tv / (2 * outputs_var) if std else tv


def _var(op, inputs, attrs, outputs, tangents, names):
    s = _Live(names, inputs, attrs, outputs)
    return _var_tangent(inputs[0], tangents[0], s, outputs, op.name == "std")


def _var_mean(op, inputs, attrs, outputs, tangents, names):
    s = _Live(names, inputs, attrs, outputs)
    x, t = inputs[0], tangents[0]
    dims, keepdim = _reduce_dims(s, x), s.get("keepdim", False)
    return _var_tangent(x, t, s, outputs[0], op.name == "std_mean"), t.mean(dims, keepdim=keepdim)


def _aminmax(op, inputs, attrs, outputs, tangents, names):
    s = _Live(names, inputs, attrs, outputs)
    x, t = inputs[0], tangents[0]
    dims, keepdim = _reduce_dims(s, x), s.get("keepdim", False)
    parts = []
    for r in outputs:
        mask = (x == _kept(r, x, dims, keepdim)).to(t.dtype)
        parts.append((t * mask).sum(dims, keepdim=keepdim) / mask.sum(dims, keepdim=keepdim))
    return tuple(parts)


def _prod(op, inputs, attrs, outputs, tangents, names):
    s = _Live(names, inputs, attrs, outputs)
    x, t = inputs[0], tangents[0]
    dims, keepdim = _reduce_dims(s, x), s.get("keepdim", False)
    return outputs * (t / x).sum(dims, keepdim=keepdim)


def _norm(op, inputs, attrs, outputs, tangents, names):
    s = _Live(names, inputs, attrs, outputs)
    x, t = inputs[0], tangents[0]
    if s.get("p", 2) not in (2, "fro", None):
        raise NotImplementedError("forward_ad: norm's tangent rule covers p=2 only")
    dims, keepdim = _reduce_dims(s, x), s.get("keepdim", False)
    return (x * t).sum(dims, keepdim=keepdim) / outputs


def _nanmean(op, inputs, attrs, outputs, tangents, names):
    s = _Live(names, inputs, attrs, outputs)
    x, t = inputs[0], tangents[0]
    dims, keepdim = _reduce_dims(s, x), s.get("keepdim", False)
    ok = ~x.isnan()
    return (t * ok).sum(dims, keepdim=keepdim) / ok.sum(dims, keepdim=keepdim)


def _cumulative_select(op, inputs, attrs, outputs, tangents, names):
    s = _Live(names, inputs, attrs, outputs)
    return tangents[0].gather(s.dim, outputs[1]), None


def _sum_over_batch(mul):
    return lambda a, b: mul(a, b).sum(0)


TANGENTS: dict = {
    "vdot": _bilinear(fl.vdot), "inner": _bilinear(fl.inner), "kron": _bilinear(fl.kron),
    "tensordot": _bilinear(fl.tensordot), "addmv": _addmm_like(fl.mv), "addbmm": _addmm_like(_sum_over_batch(fl.bmm)),
    "amax": _extreme, "amin": _extreme, "var": _var, "std": _var, "var_mean": _var_mean, "std_mean": _var_mean,
    "aminmax": _aminmax, "prod": _prod, "norm": _norm, "nanmean": _nanmean,
    "cummax": _cumulative_select, "cummin": _cumulative_select, "kthvalue": _select_by_indices,
    "median": _select_by_indices, "mode": _select_by_indices,
    "matmul": _bilinear(fl.matmul), "mm": _bilinear(fl.mm), "bmm": _bilinear(fl.bmm), "mv": _bilinear(fl.mv),
    "dot": _bilinear(fl.dot), "outer": _bilinear(fl.outer),
    "addmm": _addmm_like(fl.mm), "baddbmm": _addmm_like(fl.bmm), "einsum": _einsum, "linear": _linear_layer,
    "softmax": _softmax, "log_softmax": _log_softmax, "logsumexp": _logsumexp,
    "max": _select_by_indices, "min": _select_by_indices, "sort": _select_by_indices, "topk": _select_by_indices,
}

_POINTWISE_CATEGORIES = {"arithmetic", "math", "rounding", "activation", "pointwise"}
_LINEAR_CATEGORIES = {"view", "joining", "reordering", "conversion"}
_LINEAR_OPS = {"sum", "mean", "cumsum", "gather", "index_select", "index", "masked_select", "take", "diagonal",
               "diag", "trace", "nansum", "diag_embed", "embedding_dense_backward"}


def _default_rule(op):
    if op.name == "where":
        return _pointwise
    if op.category in _POINTWISE_CATEGORIES:
        return _pointwise
    if op.category in _LINEAR_CATEGORIES or op.name in _LINEAR_OPS:
        return _linear
    return None
