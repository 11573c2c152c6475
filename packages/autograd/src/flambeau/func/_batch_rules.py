"""Batching rules: how each operator of the table runs on a whole batch at once (Note [Batched tensors]).

Rules are looked up by operator name (``RULES``, filled by the family modules), then by the
operator's family (its category in the operator table): elementwise operators broadcast
(:mod:`~flambeau.func._rules_base`); reductions and scans shift their ``dim``, shape operators
prepend the batch size, matrix products, ``einsum`` and indexing gain a batch dimension
(:mod:`~flambeau.func._rules_tensor`); convolutions, pooling, normalisations and losses fold the
batch into what the kernel already supports (:mod:`~flambeau.func._rules_nn`). Operators with
neither run once per example (:func:`~flambeau.func._vmap.fallback`).
"""

from __future__ import annotations

from flambeau._ops import OPS
from flambeau.func import _rules_nn, _rules_tensor  # noqa: F401  - each registers its rules
from flambeau.func._rules_base import ELEMENTWISE_CATEGORIES, RULES, elementwise
from flambeau.func._vmap import install_rules

__all__ = ["RULES", "rule_for"]

_SETITEM = OPS["index_put"].dunders.get("__setitem__")


def _inplace_elementwise(op, fn, level, args, kwargs):
    return elementwise(op, fn, level, args, kwargs, inplace=True)


def rule_for(op, fn, inplace: bool):
    """The batching rule for this call of ``op`` through ``fn``, or None (the fallback runs)."""
    if fn is _SETITEM:
        return RULES["__setitem__"]
    found = RULES.get(op.name + "_" if inplace else op.name)
    if found is not None:
        return found
    if op.category in ELEMENTWISE_CATEGORIES or op.category == "conversion":
        return _inplace_elementwise if inplace else elementwise
    return None


install_rules(rule_for)
