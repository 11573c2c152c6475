"""``stack_module_state`` and ``linearize``: the two torch.func helpers built on the other transforms.

``stack_module_state`` prepares a list of identical modules for ensembling with ``vmap`` and
``functional_call``; ``linearize`` fixes the point of a Jacobian-vector product so that the
product can be asked for many tangents.
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.func._eager import jvp
from flambeau.func._pytree import tree_flatten

__all__ = ["stack_module_state", "linearize"]


def _stacked_leaf(tensors: tuple, name: str) -> Tensor:
    """``tensors`` stacked along a new dim 0, a new leaf requiring grad as they all do (torch's rule)."""
    wants = [t.requires_grad for t in tensors]
    if any(wants) and not all(wants):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    with fl.no_grad():
        stacked = fl.stack(tensors)
    return stacked.requires_grad_() if all(wants) else stacked


def stack_module_state(models) -> tuple[dict, dict]:
    """``(params, buffers)``: each parameter and buffer of ``models`` stacked along a new dim 0.

    As ``torch.func.stack_module_state``: for ``M`` modules of one class in the same training mode,
    ``params[name]`` has shape ``(M, *param.shape)`` and is a new leaf (unrelated to the models'
    parameters, so an optimizer can take it), named as in ``named_parameters()``; buffers likewise.
    Use with ``vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)), (0, 0, None))``.
    """
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) != 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if len({type(m) for m in models}) != 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named_per_model: list[dict]) -> dict:
        return {k: _stacked_leaf(tuple(named[k] for named in named_per_model), k) for k in named_per_model[0]}

    return (stacked([dict(m.named_parameters()) for m in models]),
            stacked([dict(m.named_buffers()) for m in models]))


def linearize(func, *primals) -> tuple:
    """``(func(*primals), jvp_fn)`` where ``jvp_fn(*tangents)`` is the Jacobian of ``func`` at ``primals``
    applied to ``tangents``, as ``torch.func.linearize``.

    ``jvp_fn`` checks that each tangent has its primal's shape, device and dtype (torch's messages).
    Difference from torch: torch traces ``func`` once into a graph and replays it; flambeau has no
    tracer, so each ``jvp_fn`` call runs ``func`` again at the same primals (same values; side
    effects of ``func`` repeat).
    """
    output = func(*primals)
    flat_primals, primals_spec = tree_flatten(primals)
    described = [(tuple(p.shape), p.device, p.dtype) for p in flat_primals]

    def jvp_fn(*tangents):
        flat_tangents, tangents_spec = tree_flatten(tangents)
        if tangents_spec != primals_spec:
            raise RuntimeError(f"Expected the tangents {tangents_spec} to have the same argspec as the primals "
                               f"{primals_spec}")
        for i, (t, (shape, device, dtype)) in enumerate(zip(flat_tangents, described)):
            for what, got, want in (("shape", tuple(t.shape), shape), ("device", t.device, device),
                                    ("dtype", t.dtype, dtype)):
                if got != want:
                    raise RuntimeError(f"tangent:{i} with {what} {got} in flattened pytree doesn't match the "
                                       f"{what} {want} of the corresponding primal.")
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn
