"""torch's ``torch.nn.modules.utils``: the argument helpers custom layers import (``_pair`` ...) and
:func:`consume_prefix_in_state_dict_if_present`."""

from __future__ import annotations

import collections.abc
from typing import Any

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse"):
    """A function making an ``n``-tuple of an argument: an iterable as a tuple, anything else repeated ``n``
    times (``_pair(3)`` is ``(3, 3)``, ``_pair((1, 2))`` is ``(1, 2)``)."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return (x,) * n

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """``t`` reversed with each element repeated ``n`` times: a conv layer's per-dim padding as ``F.pad`` takes
    it (``(1, 2)`` with ``n=2`` is ``(2, 2, 1, 1)``)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults: list) -> list:
    """An adaptive pooling's output size with its None entries taken from ``defaults`` (the input's trailing
    sizes); an int is returned as it is."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [d if v is None else v for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict[str, Any], prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` in place (and from its ``_metadata``, where it has
    one): a data-parallel model's ``"module."`` before ``load_state_dict`` of a plain one."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in [k for k in metadata if k and (k == prefix.replace(".", "") or k.startswith(prefix))]:
            metadata[key[len(prefix):]] = metadata.pop(key)
