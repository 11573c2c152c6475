"""Nested containers of tensors ("pytrees"), as the function transforms take and return them.

A pytree is a tuple, list, dict (kept in insertion order), ``OrderedDict`` or namedtuple of
pytrees, or a leaf (anything else). ``tree_flatten`` gives the leaves in order and a spec that
``tree_unflatten`` rebuilds the container from, as ``torch.utils._pytree`` does for the same types.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["TreeSpec", "tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "is_namedtuple"]


def is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class TreeSpec:
    """The shape of a pytree without its leaves: ``kind`` is None for a leaf."""

    __slots__ = ("kind", "context", "children")

    def __init__(self, kind, context, children):
        self.kind = kind  # None (leaf), tuple, list, dict, OrderedDict or a namedtuple class
        self.context = context  # dict keys, or None
        self.children = children

    @property
    def num_leaves(self) -> int:
        return 1 if self.kind is None else sum(c.num_leaves for c in self.children)

    def __eq__(self, other) -> bool:
        return (isinstance(other, TreeSpec) and self.kind is other.kind and self.context == other.context
                and self.children == other.children)

    def __repr__(self) -> str:
        if self.kind is None:
            return "*"
        inner = ", ".join(repr(c) for c in self.children)
        if self.context is not None:
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.context, self.children))
        return f"{self.kind.__name__}({inner})"


_LEAF = TreeSpec(None, None, ())


def tree_flatten(tree) -> tuple[list, TreeSpec]:
    """``(leaves, spec)`` of ``tree``."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves: list) -> TreeSpec:
    kind = type(tree)
    if kind is tuple or kind is list or is_namedtuple(tree):
        return TreeSpec(kind, None, [_flatten(x, leaves) for x in tree])
    if kind is dict or kind is OrderedDict:
        keys = list(tree)
        return TreeSpec(kind, keys, [_flatten(tree[k], leaves) for k in keys])
    leaves.append(tree)
    return _LEAF


def tree_unflatten(leaves, spec: TreeSpec):
    """The pytree of ``spec`` holding ``leaves`` (in the order ``tree_flatten`` gave them)."""
    it = iter(leaves)
    tree = _unflatten(it, spec)
    if next(it, _END) is not _END:
        raise ValueError(f"tree_unflatten: more leaves than the spec {spec} holds")
    return tree


_END = object()


def _unflatten(it, spec: TreeSpec):
    if spec.kind is None:
        leaf = next(it, _END)
        if leaf is _END:
            raise ValueError("tree_unflatten: fewer leaves than the spec holds")
        return leaf
    children = [_unflatten(it, c) for c in spec.children]
    if spec.kind is tuple or spec.kind is list:
        return spec.kind(children)
    if spec.context is not None:
        return spec.kind(zip(spec.context, children))
    return spec.kind(*children)  # a namedtuple


def tree_map(fn, tree):
    """``tree`` with every leaf replaced by ``fn(leaf)``."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def tree_leaves(tree) -> list:
    """The leaves of ``tree``, in :func:`tree_flatten`'s order."""
    return tree_flatten(tree)[0]
