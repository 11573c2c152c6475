"""One backward operator call for all the input gradients a node needs.

Note [Shared backward calls]
    Several operators' derivatives come from one backward operator call that returns every input's
    gradient at once: the norms' fused ``*_backward`` kernels, ``linear_backward``, attention's and the
    recurrent layers' backward operators. The engine calls each input's formula in turn, so the first
    formula to run makes the call for every input whose gradient is wanted (whose edge leads somewhere)
    and keeps the results on the node for that one incoming gradient; each formula takes its part, and
    the last one drops the cache.
"""

from __future__ import annotations

__all__ = ["needed", "shared_part", "masked_part"]

_CACHE = "_shared_grads"
_NAMES = ("input", "weight", "bias")  # the three gradients of the masked backward operators


def needed(node) -> set:
    """Names of the inputs of ``node`` whose gradient is wanted (their edge leads somewhere)."""
    metas, edges = node._metas, node.next_functions
    need, k = set(), 0
    for name, _ in node._deriv.formula_items:
        meta = metas.get(name)
        if meta is None:
            continue
        n = len(meta) if meta.__class__ is list else 1
        if any(e[0] is not None for e in edges[k:k + n]):
            need.add(name)
        k += n
    return need


def shared_part(g, s, name: str, compute):
    """``name``'s part of ``compute(needed) -> {input name: gradient}``, run once per node and incoming gradient
    ``g`` (Note [Shared backward calls]); ``s`` is the formula's view of the node's saved values."""
    node = s._node
    values = node._values
    cache = values.get(_CACHE)
    if cache is None or cache[0] is not g:
        cache = (g, compute(needed(node)))
        values[_CACHE] = cache
    grads = cache[1]
    r = grads.pop(name, None)
    if not grads:
        values.pop(_CACHE, None)
    return r


def masked_part(g, s, name: str, compute, with_bias: bool = True):
    """``name``'s part of ``compute(output_mask) -> (grad_input, grad_weight, grad_bias)``, the backward
    operators' convention (None where the mask is False), run once as :func:`shared_part` does;
    ``with_bias`` False: the bias's formula does not ask for its part, which ``compute`` then skips."""
    def run(need: set) -> dict:
        mask = tuple(n in need and (with_bias or n != "bias") for n in _NAMES)
        return {n: r for n, r, m in zip(_NAMES, compute(mask), mask) if m}

    return shared_part(g, s, name, run)
