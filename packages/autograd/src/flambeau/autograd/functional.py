"""Higher-level differentiation of functions: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``, ``vhp``.

Each takes a function of tensors and the point(s) to differentiate at, as
``torch.autograd.functional`` does. ``jvp`` uses the double-vjp trick (differentiating a
vector-Jacobian product with respect to its vector), so it needs only reverse mode.
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(x, name):
    if isinstance(x, Tensor):
        return (x,), True
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x), False
    raise TypeError(f"{name} must be a Tensor or a tuple of Tensors, got {type(x).__name__}")


def _prepare(inputs, create_graph):
    # Differentiate w.r.t. fresh leaves that share the inputs' data.
    return tuple(t.detach().requires_grad_(True) if not create_graph else t.view_as(t) if t.requires_grad
                 else t.detach().requires_grad_(True) for t in inputs)


def _grads(outputs, inputs, grad_outputs, create_graph, strict):
    diff_out = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not diff_out:
        grads = (None,) * len(inputs)
    else:
        grads = fl.autograd.grad([o for o, _ in diff_out], inputs, [g for _, g in diff_out],
                                 create_graph=True, allow_unused=True)
    if strict and any(g is None for g in grads):
        raise RuntimeError("The output of the user-provided function is independent of one of its inputs: "
                           "this is not allowed in strict mode.")
    result = tuple(fl.zeros_like(t) if g is None else g for g, t in zip(grads, inputs))
    return result if create_graph else tuple(g.detach() for g in result)


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), vᵀ·J)``: the vector-Jacobian product of ``func`` at ``inputs``.

    ``v`` may be omitted when ``func`` returns a single-element tensor.
    """
    inputs, single_in = _as_tuple(inputs, "inputs")
    x = _prepare(inputs, create_graph)
    with fl.enable_grad():
        out = func(*x)
        outs, single_out = _as_tuple(out, "func's output")
        if v is None:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a "
                                   "single Tensor with a single element.")
            vs = (fl.ones_like(outs[0]),)
        else:
            vs, _ = _as_tuple(v, "v")
        grads = _grads(outs, x, vs, create_graph, strict)
    out = out if create_graph else (outs[0].detach() if single_out else tuple(o.detach() for o in outs))
    return out, grads[0] if single_in else grads


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), J·v)``: the Jacobian-vector product of ``func`` at ``inputs``."""
    inputs, single_in = _as_tuple(inputs, "inputs")
    vs = tuple(fl.ones_like(t) for t in inputs) if v is None else _as_tuple(v, "v")[0]
    x = _prepare(inputs, create_graph)
    with fl.enable_grad():
        out = func(*x)
        outs, single_out = _as_tuple(out, "func's output")
        # u ↦ uᵀJ is linear in u; differentiating it w.r.t. u along v gives J·v.
        us = tuple(fl.zeros_like(o).requires_grad_(True) for o in outs)
        g = _grads(outs, x, us, True, strict)
        jv = fl.autograd.grad(list(g), list(us), list(vs), create_graph=create_graph, allow_unused=True)
    jv = tuple(fl.zeros_like(o) if j is None else (j if create_graph else j.detach()) for j, o in zip(jv, outs))
    out_val = out if create_graph else (outs[0].detach() if single_out else tuple(o.detach() for o in outs))
    return out_val, jv[0] if single_out else jv


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False):
    """The Jacobian of ``func`` at ``inputs``: shape ``output.shape + input.shape`` for each pair."""
    inputs, single_in = _as_tuple(inputs, "inputs")
    x = _prepare(inputs, create_graph)
    with fl.enable_grad():
        out = func(*x)
        outs, single_out = _as_tuple(out, "func's output")
        table = []
        for o in outs:
            rows = [[] for _ in x]
            for k in range(o.numel()):
                e = fl.zeros(o.numel(), dtype=o.dtype, device=o.device)
                e[k] = 1
                grads = _grads((o,), x, (e.reshape(tuple(o.shape)),), create_graph, strict)
                for i, gi in enumerate(grads):
                    rows[i].append(gi)
            table.append(tuple(
                (fl.stack(r) if r else fl.zeros((0,) + tuple(t.shape), dtype=o.dtype, device=o.device))
                .reshape(tuple(o.shape) + tuple(t.shape))
                for r, t in zip(rows, x)))
    if single_out and single_in:
        return table[0][0]
    if single_out:
        return table[0]
    if single_in:
        return tuple(row[0] for row in table)
    return tuple(table)


def hessian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False):
    """The Hessian of scalar ``func`` at ``inputs`` (the Jacobian of its gradient)."""
    inputs_t, single_in = _as_tuple(inputs, "inputs")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor with a single element")
        grads = _grads((out,), xs, (fl.ones_like(out),), True, strict)
        return grads[0] if single_in else grads

    return jacobian(gradient, inputs_t[0] if single_in else inputs_t, create_graph=create_graph, strict=strict)


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), vᵀ·H)`` for scalar ``func``."""
    inputs_t, single_in = _as_tuple(inputs, "inputs")
    vs = _as_tuple(v, "v")[0] if v is not None else tuple(fl.ones_like(t) for t in inputs_t)
    x = _prepare(inputs_t, create_graph)
    with fl.enable_grad():
        out = func(*x)
        grads = _grads((out,), x, (fl.ones_like(out),), True, strict)
        hv = _grads(grads, x, vs, create_graph, strict)
    return (out if create_graph else out.detach()), (hv[0] if single_in else hv)


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), H·v)`` for scalar ``func`` (equal to vhp: the Hessian is symmetric)."""
    return vhp(func, inputs, v, create_graph, strict)
