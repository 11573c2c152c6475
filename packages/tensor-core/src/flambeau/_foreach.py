"""torch's ``_foreach_*`` functions: an operator over lists of tensors (``torch._foreach_mul_(params, 0.999)``).

They are private in torch but exponential-moving-average code (timm's ``ModelEmaV3``, ...) and hand-written
optimizers call them. Here each applies the tensor operator to every tensor of the list in turn (one launch per
tensor on a GPU; flambeau's own optimizers fuse their updates instead). The second operand may be a number, a
list of numbers, a tensor (for every element) or a list of tensors, as torch's; the in-place forms return
the list they changed, as torch's.
"""

from __future__ import annotations

from flambeau._tensor import Tensor

__all__: list[str] = []  # (private names, as torch's: reached as attributes of flambeau)

_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "clamp_min", "clamp_max")
_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
          "sinh", "sqrt", "tan", "tanh", "trunc")


def _list(tensors, name: str) -> list:
    if isinstance(tensors, Tensor) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"_foreach_{name}(): expected a list of tensors, got {type(tensors).__name__}")
    return list(tensors)


def _each(other, n: int, name: str) -> list:
    """``other`` for each of ``n`` tensors: its elements where it is a list (of ``n``), else itself ``n`` times."""
    if isinstance(other, (list, tuple)):
        if len(other) != n:
            raise RuntimeError(f"_foreach_{name}(): Tensor lists must have the same number of tensors, got {n} "
                               f"and {len(other)}")
        return list(other)
    if isinstance(other, Tensor) and other.ndim == 1 and name in ("addcmul", "addcdiv"):  # scalars as a tensor
        return other.tolist()
    return [other] * n


def _binary(name: str):
    def out_of_place(self, other, **kwargs):
        tensors = _list(self, name)
        return [getattr(t, name)(o, **kwargs) for t, o in zip(tensors, _each(other, len(tensors), name))]

    def in_place(self, other, **kwargs) -> list:
        tensors = _list(self, name)
        for t, o in zip(tensors, _each(other, len(tensors), name)):
            getattr(t, name + "_")(o, **kwargs)
        return tensors

    return out_of_place, in_place


def _unary(name: str):
    def out_of_place(self):
        return [getattr(t, name)() for t in _list(self, name)]

    def in_place(self) -> list:
        tensors = _list(self, name)
        for t in tensors:
            getattr(t, name + "_")()
        return tensors

    return out_of_place, in_place


def _pointwise(name: str):
    """addcmul / addcdiv: ``self[i] + value[i] * t1[i] (*|/) t2[i]``."""
    def out_of_place(self, tensor1, tensor2, value=1):
        tensors = _list(self, name)
        n = len(tensors)
        return [getattr(t, name)(a, b, value=v)
                for t, a, b, v in zip(tensors, _each(tensor1, n, name), _each(tensor2, n, name), _each(value, n, name))]

    def in_place(self, tensor1, tensor2, value=1) -> list:
        tensors = _list(self, name)
        n = len(tensors)
        for t, a, b, v in zip(tensors, _each(tensor1, n, name), _each(tensor2, n, name), _each(value, n, name)):
            getattr(t, name + "_")(a, b, value=v)
        return tensors

    return out_of_place, in_place


def _lerp(self, tensors1, weight):
    tensors = _list(self, "lerp")
    n = len(tensors)
    return [t.lerp(e, w) for t, e, w in zip(tensors, _each(tensors1, n, "lerp"), _each(weight, n, "lerp"))]


def _lerp_(self, tensors1, weight) -> list:
    tensors = _list(self, "lerp")
    n = len(tensors)
    for t, e, w in zip(tensors, _each(tensors1, n, "lerp"), _each(weight, n, "lerp")):
        t.lerp_(e, w)
    return tensors


def _zero_(self) -> list:
    tensors = _list(self, "zero")
    for t in tensors:
        t.zero_()
    return tensors


def _copy_(self, src, non_blocking: bool = False) -> list:
    tensors = _list(self, "copy")
    for t, s in zip(tensors, _each(src, len(tensors), "copy")):
        t.copy_(s, non_blocking=non_blocking)
    return tensors


def _norm(self, ord=2, dtype=None) -> list:  # noqa: A002 - torch's argument name
    from flambeau import linalg

    return [linalg.vector_norm(t, ord, dtype=dtype) for t in _list(self, "norm")]


FUNCTIONS: dict = {"_foreach_lerp": _lerp, "_foreach_lerp_": _lerp_, "_foreach_zero_": _zero_,
                   "_foreach_copy_": _copy_, "_foreach_norm": _norm}
for _name in _BINARY:
    FUNCTIONS[f"_foreach_{_name}"], FUNCTIONS[f"_foreach_{_name}_"] = _binary(_name)
for _name in _UNARY:
    FUNCTIONS[f"_foreach_{_name}"], FUNCTIONS[f"_foreach_{_name}_"] = _unary(_name)
for _name in ("addcmul", "addcdiv"):
    FUNCTIONS[f"_foreach_{_name}"], FUNCTIONS[f"_foreach_{_name}_"] = _pointwise(_name)
for _name, _fn in FUNCTIONS.items():
    _fn.__name__ = _fn.__qualname__ = _name
    _fn.__doc__ = _fn.__doc__ or f"torch's ``{_name}``: the operator applied to each tensor of a list."
