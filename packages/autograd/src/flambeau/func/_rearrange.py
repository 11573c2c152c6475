"""``rearrange``: einops-style element reordering (as ``torch.func.rearrange``), over reshape and permute."""

from __future__ import annotations

import keyword
import math

import flambeau as fl
from flambeau import Tensor

__all__ = ["rearrange"]

_ELLIPSIS = "\u2026"  # "..." once parsed


def _parse(expression: str) -> tuple[list[list[str] | str], set[str]]:
    """One side of a pattern: its composition (groups of axis names; the ellipsis as a bare string) and names.

    A ``1`` outside brackets is an empty group (a dimension of size 1); inside, it is dropped.
    """
    if "." in expression:
        if expression.count("...") != 1 or expression.count(".") != 3:
            raise ValueError("Expression may contain dots only inside ellipsis (...); only one ellipsis for tensor ")
        expression = expression.replace("...", _ELLIPSIS)
    composition: list[list[str] | str] = []
    names: set[str] = set()
    group: list[str] | None = None
    for token in expression.replace("(", " ( ").replace(")", " ) ").split():
        if token == "(":
            if group is not None:
                raise ValueError("Axis composition is one-level (brackets inside brackets not allowed)")
            group = []
        elif token == ")":
            if group is None:
                raise ValueError("Brackets are not balanced")
            composition.append(group)
            group = None
        elif token.isdecimal():
            if int(token) != 1:
                raise ValueError("rearrange only supports unnamed axes of size 1")
            if group is None:
                composition.append([])
        else:
            if token != _ELLIPSIS and (not token.isidentifier() or keyword.iskeyword(token) or token[0] == "_"
                                       or token[-1] == "_"):
                raise ValueError(f"Invalid axis identifier: {token}")
            if token in names:
                raise ValueError(f"Indexing expression contains duplicate dimension '{token}'")
            names.add(token)
            if group is not None:
                group.append(token)
            else:
                composition.append(token if token == _ELLIPSIS else [token])
    if group is not None:
        raise ValueError(f"Imbalanced parentheses in expression: '{expression}'")
    return composition, names


def rearrange(tensor, pattern: str, **axes_lengths: int) -> Tensor:
    """Reorder, split, merge, squeeze and unsqueeze dimensions with an einops pattern (``torch.func.rearrange``).

    ``"b (h w) c -> b c h w"`` splits the second dimension into ``h`` and ``w`` (give one of their
    sizes as ``h=...``) and moves ``c`` forward; ``(...)`` merges, ``1`` or ``()`` is a dimension of
    size 1, ``...`` stands for the dimensions not named. Every name must appear on both sides. The
    result is computed with ``reshape`` and ``permute``, so it is a view where those give one, and
    differentiable.

    Args:
        tensor: a tensor, or a sequence of tensors of one shape (stacked along a new first dimension).
        pattern: ``"left -> right"``.
        axes_lengths: sizes of axes that a split cannot infer.

    Returns:
        the rearranged tensor, of ``tensor``'s dtype.

    Raises:
        ValueError: a malformed pattern, names on one side only, sizes that do not fit.
        TypeError: an axis length that is not an int.
    """
    if not isinstance(tensor, Tensor):
        tensor = fl.stack(list(tensor))
    try:
        left_str, right_str = pattern.split("->")
    except ValueError:
        raise ValueError("Pattern must contain a single '->' separator") from None
    if _ELLIPSIS in axes_lengths:
        raise ValueError(f"'{_ELLIPSIS}' is not an allowed axis identifier")
    left, left_names = _parse(left_str)
    right, right_names = _parse(right_str)
    if _ELLIPSIS in right_names and _ELLIPSIS not in left_names:
        raise ValueError(f"Ellipsis found in right side, but not left side of a pattern {pattern}")
    if any(isinstance(g, list) and _ELLIPSIS in g for g in left):
        raise ValueError(f"Ellipsis is parenthesis in the left side is not allowed: {pattern}")
    for length in axes_lengths.values():
        if type(length) is not int:
            raise TypeError(f"rearrange axis lengths must be integers, got: {type(length)}")
    difference = left_names ^ right_names
    if difference:
        raise ValueError(f"Identifiers only on one side of rearrange expression (should be on both): {difference}")
    unmatched = axes_lengths.keys() - left_names
    if unmatched:
        raise ValueError(f"Identifiers not found in rearrange expression: {set(unmatched)}")

    shape = tuple(tensor.shape)
    if _ELLIPSIS in left_names:
        n_ellipsis = tensor.ndim - (len(left) - 1)
        if n_ellipsis < 0:
            raise ValueError(f"Number of dimensions in pattern ({len(left) - 1}) must be less than or equal to the "
                             f"number of dimensions in the tensor ({tensor.ndim})")
    else:
        n_ellipsis = 0
        if len(left) != tensor.ndim:
            raise ValueError(f"Number of dimensions in pattern ({len(left)}) must be equal to the number of "
                             f"dimensions in the tensor ({tensor.ndim})")
    # the elementary axes of the input, in order, and their sizes
    sizes: dict[str, int] = {}
    order: list[str] = []
    dim = 0
    for group in left:
        if group == _ELLIPSIS:
            for i in range(n_ellipsis):
                sizes[f"{_ELLIPSIS}{i}"] = shape[dim + i]
                order.append(f"{_ELLIPSIS}{i}")
            dim += n_ellipsis
            continue
        size = shape[dim]
        unknown = [name for name in group if name not in axes_lengths]
        known = math.prod(axes_lengths[name] for name in group if name in axes_lengths)
        if len(unknown) > 1:
            raise ValueError(f"Could not infer sizes for {set(unknown)}")
        if (size % known if unknown else size != known) or known == 0:
            raise ValueError(f"Shape mismatch, can't divide axis of length {size} in chunks of {known}")
        for name in group:
            sizes[name] = axes_lengths.get(name, size // known if known else 0)
            order.append(name)
        dim += 1
    elementary = tensor.reshape([sizes[name] for name in order])
    # the right side's elementary axes, in order, then its groups
    target: list[str] = []
    out_shape: list[int] = []
    for group in right:
        members = [group] if group == _ELLIPSIS else group
        names = []
        for name in members:
            names += [f"{_ELLIPSIS}{i}" for i in range(n_ellipsis)] if name == _ELLIPSIS else [name]
        target += names
        if group == _ELLIPSIS:
            out_shape += [sizes[name] for name in names]
        else:
            out_shape.append(math.prod(sizes[name] for name in names))
    permuted = elementary.permute([order.index(name) for name in target]) if target else elementary
    return permuted.reshape(out_shape)
