"""One backward operator call for all the input gradients a node needs.

Note [Shared backward calls]
    Several operators' derivatives come from one backward operator call that returns every input's
    gradient at once: the norms' fused ``*_backward`` kernels, ``linear_backward``, ``convolution_backward``,
    attention's and the recurrent layers' backward operators. Their :class:`Derivative` has a ``joint``
    ``f(g, s, need)``, which the node calls once with the names of the inputs whose gradient is wanted (whose
    edge leads somewhere) and which returns each one's gradient by name. Where it returns None (grad mode on:
    ``create_graph``, whose gradients must be differentiable again) the per-input formulas run instead.

    The node calls the joint itself: the first formula used to make the call and keep its results on the node
    for the others to take (a cache looked up by every formula, a closure made per formula and call), about a
    fifth of such a node's host time on the fake device of tools/host_overhead.py (layer norm's: 71 µs, of
    which its operator call takes 52).
"""

from __future__ import annotations

import flambeau as fl

__all__ = ["masked"]

_NAMES = ("input", "weight", "bias")  # the three gradients of the masked backward operators


def masked(compute):
    """The ``joint`` of a derivative from ``compute(g, s, output_mask) -> (grad_input, grad_weight, grad_bias)``
    (None where the mask is False: the backward operators' convention, for the inputs named ``input``, ``weight``
    and ``bias``), or None from ``compute`` where the per-input formulas are to run. Those backward operators are
    not differentiable, so under ``create_graph`` (grad mode on) the joint declines without calling ``compute``."""
    def joint(g, s, need: set):
        if fl.is_grad_enabled():
            return None
        grads = compute(g, s, ("input" in need, "weight" in need, "bias" in need))  # (the order of _NAMES)
        return None if grads is None else dict(zip(_NAMES, grads))

    return joint
