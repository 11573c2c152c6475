"""torch's keyword forms of operator calls that the front functions' own signatures do not take.

Note [torch's keyword forms]
    torch's argument parser accepts more keywords than an operator's schema names:

    * numpy's names ``axis=`` for ``dim`` and ``keepdims=`` for ``keepdim`` (two of torch's
      ``numpy_compatibility_arg_names``; its ``x=``/``a=``/``x1=`` for ``input`` and ``x2=`` for ``other``, which
      no one writes, are left out, so that operators without ``dim`` stay unwrapped): ``torch.sum(x, axis=0)``;
    * the schema's own names where flambeau's front calls a parameter otherwise: ``x.pow(exponent=2)``,
      ``torch.mm(a, mat2=b)``, ``torch.addmm(c, mat1=a, mat2=b)`` (a binary front's second parameter is
      ``other`` for every operator), and ``other=`` of the binary overloads of ``max``/``min``;
    * ``out=`` on the function variants of the operators torch gives an ``out`` overload (arithmetic, math,
      comparisons, reductions, linear algebra, joining, indexing ...; not the neural-network operators of
      :data:`_NO_OUT`, which torch's ``out=`` does not reach either): ``torch.add(a, b, out=c)``. The result is
      written into ``out``, which is resized when its shape differs (with torch's deprecation warning unless it is
      empty), must be on the result's device and able to hold its dtype (:func:`flambeau.can_cast`), and is
      returned; a tuple of results goes into a tuple of tensors. As in torch, ``out=`` refuses arguments that
      require grad while grad mode is on (the written tensor would have no gradient function).

    :func:`bind_with_keywords` gives the table's binding of an operator variant (``flambeau.<name>``,
    ``Tensor.<name>``) a thin wrapper for these where its operator needs one; the call without keywords goes
    straight on (one Python frame, about 0.1 µs), and only a call with keywords looks at them. Operators
    without ``dim``/``keepdim``, without differing names and without ``out=`` (methods, views) are bound as
    they are. The fronts themselves, which flambeau's own code calls, keep their signatures.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable

from flambeau._dtype import can_cast
from flambeau._grad_mode import is_grad_enabled

__all__ = ["bind_with_keywords", "function_binding", "rewrap", "schema_params", "write_out"]

# numpy's keyword names that torch's argument parser takes for a parameter (its numpy_compatibility_arg_names)
_NUMPY_NAMES = {"dim": ("axis",), "keepdim": ("keepdims",)}
# categories of the operator table whose function variants take no ``out=`` (torch's neural-network operators)
_NO_OUT = frozenset({"activation", "activation_ext", "attention", "conversion", "convolution", "distance", "loss",
                     "nn", "normalization", "pooling", "recurrent", "resampling", "shape", "stft", "view"})
# keyword names of an overload that the front takes at another parameter: ``torch.max(input, other=...)``
_OVERLOAD_NAMES = {"max": {"other": "dim"}, "min": {"other": "dim"}}


def schema_params(signature: str) -> tuple:
    """The parameter names of a torch-style schema ``"name(Tensor input, int dim=0, *, ...) -> ..."``."""
    start = signature.index("(")
    depth = 0
    for end in range(start, len(signature)):
        depth += signature[end] == "("
        depth -= signature[end] == ")"
        if depth == 0:
            break
    parts, current, depth = [], "", 0
    for ch in signature[start + 1:end]:  # split at the top level's commas (``Tensor(a -> *)``, ``int[2]``)
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return tuple(p.split("=")[0].split()[-1] for p in map(str.strip, parts) if p and p != "*")


def _returns_tensors(signature: str) -> bool:
    """Whether the schema returns a tensor or a tuple of tensors (not a list, not a non-tensor)."""
    returns = signature.rsplit("->", 1)[-1].strip()
    return returns.startswith(("Tensor", "(Tensor")) and "[]" not in returns


def _renames(op, front: Callable) -> dict:
    """``{torch keyword: front keyword}`` of the names torch takes that ``front`` calls otherwise."""
    try:
        params = inspect.signature(front).parameters
    except (TypeError, ValueError):
        return {}
    named = [p.name for p in params.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    positional = [p.name for p in params.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    schema = schema_params(op.signature)
    renames = {}
    for i, name in enumerate(schema):  # the schema's name at the front's parameter of the same position
        if i and name not in named and i < len(positional) and positional[i] not in schema:  # (not ``self``)
            renames[name] = positional[i]
    for name, replacement in _OVERLOAD_NAMES.get(op.name, {}).items():
        renames[name] = replacement
    for target in [*named, *renames.values()]:
        for alias in _NUMPY_NAMES.get(target, ()):
            if alias not in named:
                renames.setdefault(alias, target)
    return renames


def _requires_grad(values) -> bool:
    from flambeau._tensor import Tensor

    for v in values:
        if isinstance(v, Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False


def write_out(name: str, out, result):
    """Write operator ``name``'s ``result`` (a tensor or a tuple of them) into ``out`` as torch's ``out=`` does
    (Note [torch's keyword forms]); returns ``out`` (a tuple of the results' kind for a tuple)."""
    from flambeau._tensor import Tensor

    if isinstance(result, Tensor):
        if not isinstance(out, Tensor):
            raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
        _write_one(out, result)
        return out
    if not isinstance(out, (tuple, list)) or len(out) != len(result):
        raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(result)} Tensors, "
                        f"not {type(out).__name__}" + (f" of {len(out)}" if isinstance(out, (tuple, list)) else ""))
    for o, r in zip(out, result):
        if not isinstance(o, Tensor):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of Tensors, not one of {type(o).__name__}")
        _write_one(o, r)
    return result.__class__(*out) if hasattr(result, "_fields") else tuple(out)


def _write_one(out, result) -> None:
    if out.device != result.device:
        raise RuntimeError(f"Expected out tensor to have device {result.device}, but got {out.device} instead")
    if not can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"result type {result.dtype.scalar_name} can't be cast to the desired output type "
                           f"{out.dtype.scalar_name}")
    if out.shape != result.shape:
        if out.numel():
            warnings.warn(
                f"An output with one or more elements was resized since it had shape {list(out.shape)}, which does "
                f"not match the required output shape {list(result.shape)}. This behavior is deprecated, and in a "
                "future PyTorch release outputs will not be resized unless they have zero elements. You can "
                "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
                UserWarning, stacklevel=4)
        out.resize_(result.shape)
    out.copy_(result)


def bind_with_keywords(op, front: Callable, out: bool) -> Callable:
    """What the table binds for ``front`` (``op``'s function variant when ``out``, else its method): ``front``
    itself, or a wrapper taking torch's keyword forms (Note [torch's keyword forms])."""
    if op.name.endswith("_"):  # (a method-only in-place operator: ``uniform_(from, to)`` are Python keywords)
        return front
    renames = _renames(op, front)
    out = (out and not op.view and op.category not in _NO_OUT and not op.name.endswith("_")
           and _returns_tensors(op.signature))
    if not renames and not out:
        return front
    return _with_keywords(front, op.name, renames, out)


def function_binding(op) -> Callable:
    """The binding of ``op``'s function variant (``flambeau.<name>``), made here for an operator that only a
    namespace binds as a function (``flambeau.special.i1``, declared ``special_i1``)."""
    function, method = op.bindings or (None, None)
    if function is None:
        function = bind_with_keywords(op, op.fn, out=True)
        op.bindings = (function, method)
    return function


def _with_keywords(front: Callable, name: str, renames: dict, out: bool) -> Callable:
    def slow(args: tuple, kwargs: dict):
        for given in [k for k in kwargs if k in renames]:
            target = renames[given]
            if target in kwargs:
                raise TypeError(f"{name}() got multiple values for argument '{target}' (given as '{given}')")
            kwargs[target] = kwargs.pop(given)
        if not out or "out" not in kwargs:
            return front(*args, **kwargs)
        dest = kwargs.pop("out")
        if dest is None:
            return front(*args, **kwargs)
        if is_grad_enabled() and _requires_grad((*args, *kwargs.values())):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
        return write_out(name, dest, front(*args, **kwargs))

    @functools.wraps(front)
    def with_keywords(*args, **kwargs):
        if kwargs:
            return slow(args, kwargs)
        return front(*args)

    with_keywords.__wrapped__ = front
    with_keywords._torch_keywords = (name, renames, out)
    return with_keywords


def rewrap(binding: Callable, fn: Callable) -> Callable:
    """``fn`` (another function in place of ``binding``'s front: dispatch modes' wrapper, vmap's batched method)
    taking ``binding``'s keyword forms, or ``fn`` itself when ``binding`` is a plain front: the keywords are
    resolved before ``fn`` sees them."""
    spec = getattr(binding, "_torch_keywords", None)
    if spec is None:
        return fn
    return _with_keywords(fn, *spec)
