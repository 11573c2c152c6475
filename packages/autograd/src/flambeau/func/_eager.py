"""The differentiation transforms of ``flambeau.func``: grad, vjp, jvp, jacrev, jacfwd, hessian.

Note [Transforms on the autograd graph]
Each transform differentiates with flambeau's reverse-mode engine: it gives the differentiated
inputs fresh aliases that require grad (a view of the input when it already requires grad, so an
enclosing transform or the user's own autograd still sees through), runs the function, and asks
:func:`flambeau.autograd.grad` for the derivatives with ``create_graph=True``, so that every result
can be differentiated again: ``jacrev(jacrev(f))`` and ``hessian = jacfwd(jacrev(f))`` compose.
A result whose graph reaches no tensor that required grad outside the transform is detached
before it is returned (torch.func returns such results without history too); one that does keep
its history, so ``grad`` works with ordinary autograd on closed-over parameters.

Forward-mode quantities (``jvp``, ``jacfwd``) use the double-vjp identity: ``u -> J^T u`` is linear
in ``u``, and differentiating it w.r.t. ``u`` along ``v`` gives ``J v``. This needs only reverse
mode, so forward and reverse transforms nest in any order (torch computes them with dual tensors;
the values agree). ``jacrev`` and ``jacfwd`` run one backward pass per row or column (torch
vectorizes those with vmap).

Inside ``vmap`` the transforms work on the physical batch (Note [Batched tensors]): every
differentiated input is made batched at all open vmap levels (expanded where it was not), so
that each example gets its own gradient from one backward pass over the whole batch.
"""

from __future__ import annotations

import functools

import flambeau as fl
from flambeau import Tensor
from flambeau.autograd._node import AccumulateGrad, grad_accumulator
from flambeau.func import _vmap
from flambeau.func._pytree import tree_flatten, tree_unflatten

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian"]


# --- argnums ---------------------------------------------------------------------------------------
def _check_argnums(argnums, nargs: int, api: str):
    if isinstance(argnums, bool) or not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"{api}: argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    items = (argnums,) if isinstance(argnums, int) else argnums
    if not items:
        raise RuntimeError(f"{api}: argnums must be non-empty")
    wrapped = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, int):
            raise RuntimeError(f"{api}: argnums must be int or Tuple[int, ...], got: {argnums!r}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnums={a}, but only {nargs} positional inputs")
        wrapped.append(a % nargs)
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"{api}: argnums must be unique, got {argnums}")
    return wrapped


# --- tracking the differentiated inputs -----------------------------------------------------------
class _Level:
    """The differentiated inputs of one transform call: physical leaves and what the function sees."""

    def __init__(self, api: str):
        self.api = api
        self.vlevels = _vmap.active_levels()
        self.own = set()  # AccumulateGrad nodes of the leaves made here

    def track(self, t):
        if not isinstance(t, Tensor):
            raise RuntimeError(f"{self.api}: expected the differentiated inputs to be Tensors, got {type(t).__name__}")
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"{self.api}: only Tensors of floating point dtype can require gradients, got "
                               f"{t.dtype}")
        p = _vmap.materialize(t, self.vlevels)
        if p.requires_grad:
            leaf = p.view_as(p)  # keeps the history an outer transform or the user differentiates through
        else:
            leaf = p.detach().requires_grad_(True)
            self.own.add(grad_accumulator(leaf))
        return leaf, _vmap.wrap_levels(leaf, self.vlevels)

    def physical(self, t):
        """``t`` (an output) as a physical tensor with every vmap level of this call."""
        return _vmap.materialize(t, self.vlevels)

    def finish(self, t):
        """``t`` without history unless that history reaches a tensor requiring grad outside this call."""
        if not isinstance(t, Tensor):
            return t
        levels = _vmap.levels_of(t)
        p = _vmap.physical(t)
        if p.grad_fn is not None and not _reaches_outside(p, self.own):
            p = p.detach()
        elif p.grad_fn is None and p.requires_grad and _is_own_leaf(p, self.own):
            p = p.detach()
        return _vmap.wrap_levels(p, levels)


def _is_own_leaf(p, own) -> bool:
    meta = p._autograd_meta
    ref = getattr(meta, "grad_accumulator", None)
    acc = ref() if ref is not None else None
    return acc is not None and acc in own


def _reaches_outside(t: Tensor, own: set) -> bool:
    """Whether ``t``'s graph reaches a leaf (requiring grad) that this transform did not create."""
    seen = set()
    stack = [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node.__class__ is AccumulateGrad:
            if node not in own:
                return True
            continue
        stack.extend(n for n, _ in node.next_functions)
    return False


def _grads(outputs, inputs, grad_outputs, retain_graph=True):
    """d(outputs . grad_outputs)/d(inputs) with create_graph; zeros for unused inputs."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return [fl.zeros_like(x) for x in inputs]
    with fl.enable_grad():
        got = fl.autograd.grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs],
                               retain_graph=retain_graph, create_graph=True, allow_unused=True)
    return [fl.zeros_like(x) if g is None else g for g, x in zip(got, inputs)]


def _diff_args(args, argnums, level):
    """``(new args, leaves, wrapped leaves, spec)``: the args at ``argnums`` replaced by tracked aliases."""
    new = list(args)
    leaves, specs = [], []
    for a in argnums:
        flat, spec = tree_flatten(args[a])
        pairs = [level.track(t) for t in flat]
        leaves.append([p for p, _ in pairs])
        specs.append(spec)
        new[a] = tree_unflatten([w for _, w in pairs], spec)
    return new, leaves, specs


def _split_aux(out, has_aux: bool, api: str):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return out


def _finish_aux(level, aux):
    """``aux`` (a pytree of tensors) without this transform's history."""
    flat, spec = tree_flatten(aux)
    for a in flat:
        if not isinstance(a, Tensor):
            raise RuntimeError(f"{level.api}: expected the aux output to hold only tensors, got unsupported type "
                               f"{type(a)}")
    return tree_unflatten([level.finish(a) for a in flat], spec)


def _unflatten_grads(flat_grads, leaves, specs, argnums_is_int: bool):
    parts, k = [], 0
    for group, spec in zip(leaves, specs):
        parts.append(tree_unflatten(flat_grads[k:k + len(group)], spec))
        k += len(group)
    return parts[0] if argnums_is_int else tuple(parts)


# --- grad -------------------------------------------------------------------------------------------
def grad_and_value(func, argnums=0, has_aux: bool = False):
    """``func``'s gradient w.r.t. the arguments at ``argnums``, and its value, as ``torch.func.grad_and_value``.

    Args:
        func: a function returning a 0-dim tensor (or ``(tensor, aux)`` with ``has_aux``).
        argnums: the position (int) or positions (tuple) of the arguments to differentiate; each
            may be a pytree (tuple, list, dict) of floating-point tensors.
        has_aux: ``func`` returns ``(output, aux)``; ``aux`` is returned as is.

    Returns:
        A function returning ``(gradient, value)`` (``(gradient, (value, aux))`` with ``has_aux``);
        the gradient has the structure of the argument (a tuple of them for a tuple ``argnums``).
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        api = "grad_and_value(f)(*args)"
        nums = _check_argnums(argnums, len(args), api)
        level = _Level(api)
        with fl.enable_grad():
            new_args, leaves, specs = _diff_args(args, nums, level)
            output, aux = _split_aux(func(*new_args, **kwargs), has_aux, api)
            if not isinstance(output, Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(output)}")
            if output.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
                                   f"{output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            flat_leaves = [x for group in leaves for x in group]
            p = level.physical(output)
            g = _grads([p], flat_leaves, [fl.ones_like(p)])
        grads = [level.finish(_vmap.wrap_levels(x, level.vlevels)) for x in g]
        result = _unflatten_grads(grads, leaves, specs, isinstance(argnums, int))
        value = level.finish(output)
        if has_aux:
            return result, (value, _finish_aux(level, aux))
        return result, value

    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """The gradient of scalar ``func`` w.r.t. the arguments at ``argnums``, as ``torch.func.grad``.

    ``grad(f)(x)`` has ``x``'s shape and dtype. Transforms compose: ``grad(grad(f))`` is the second
    derivative, ``vmap(grad(f))`` gives one gradient per example. See :func:`grad_and_value` for the
    arguments.

    Returns:
        A function returning the gradient (``(gradient, aux)`` with ``has_aux``).
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


# --- vjp ----------------------------------------------------------------------------------------------
def vjp(func, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``: the value and a function of cotangents giving vector-Jacobian products.

    ``vjp_fn(cotangents)`` (cotangents with the structure of the output) returns a tuple with one
    gradient per primal (each with that primal's structure). It can be called many times.

    Args:
        func: a function of tensors (pytrees of tensors) returning a tensor or a pytree of tensors.
        primals: the point to differentiate at.
        has_aux: ``func`` returns ``(output, aux)``; then ``(output, vjp_fn, aux)`` is returned.
    """
    api = "vjp(f, *primals)"
    level = _Level(api)
    with fl.enable_grad():
        new_args, leaves, specs = _diff_args(primals, range(len(primals)), level)
        output, aux = _split_aux(func(*new_args), has_aux, api)
        flat_out, out_spec = tree_flatten(output)
        for o in flat_out:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"{api}: Expected f(*primals) to return only tensors, got unsupported type "
                                   f"{type(o)}")
        phys_out = [level.physical(o) for o in flat_out]
    flat_leaves = [x for group in leaves for x in group]

    def vjp_fn(cotangents, *, retain_graph: bool = True, create_graph: bool | None = None):
        flat_ct, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {ct_spec}, primal output: {out_spec}")
        extra = [lv for ct in flat_ct if isinstance(ct, Tensor) for lv in _vmap.levels_of(ct)
                 if lv not in level.vlevels]
        if extra:
            return _vjp_batched_cotangents(vjp_fn, cotangents, max(extra, key=lambda lv: lv.id))
        cts = []
        for o, ct in zip(phys_out, flat_ct):
            if not isinstance(ct, Tensor):
                raise RuntimeError(f"{api}: expected the cotangents to be Tensors, got {type(ct).__name__}")
            if tuple(ct.shape) != tuple(o.shape[len(level.vlevels):]):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {ct.shape} and output[0] has a "
                                   f"shape of {fl.Size(o.shape[len(level.vlevels):])}.")
            cts.append(_vmap.materialize(ct, level.vlevels))
        g = _grads(phys_out, flat_leaves, cts, retain_graph=retain_graph)
        grads = [level.finish(_vmap.wrap_levels(x, level.vlevels)) for x in g]
        return tuple(_unflatten_grads(grads, leaves, specs, False))

    out = tree_unflatten([level.finish(o) for o in flat_out], out_spec)
    if has_aux:
        return out, vjp_fn, _finish_aux(level, aux)
    return out, vjp_fn


def _vjp_batched_cotangents(vjp_fn, cotangents, vlevel):
    """``vjp_fn`` under a vmap opened after ``vjp``: one backward pass per example of that vmap."""
    _vmap._note_fallback("vjp_fn (cotangents batched by a vmap inside vjp)", vlevel.size)
    flat, spec = tree_flatten(cotangents)
    results = []
    for i in range(vlevel.size):
        picked = [c._value.select(0, i) if c.__class__ is _vmap.BatchedTensor and c._level is vlevel else c
                  for c in flat]
        results.append(vjp_fn(tree_unflatten(picked, spec)))
    return _vmap._stack(results, vlevel, "vjp_fn")


# --- jvp ----------------------------------------------------------------------------------------------
def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J·tangents)``: the value and the Jacobian-vector product, as ``torch.func.jvp``.

    Args:
        func: a function of tensors returning a tensor or a pytree of tensors.
        primals: a tuple of the arguments (pytrees of floating-point tensors).
        tangents: a tuple with the structure of ``primals``.
        strict: accepted for torch compatibility (torch raises NotImplementedError for True).
        has_aux: ``func`` returns ``(output, aux)``; then ``(output, jvp_out, aux)`` is returned.
    """
    api = "jvp(f, primals, tangents)"
    if strict:
        raise RuntimeError("jvp(f, primals, tangents, strict=True): strict is not supported (as in torch)")
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals).")
    if not isinstance(tangents, tuple):
        raise RuntimeError(f"{api}: Expected tangents to be a tuple. E.g. it should be valid to call f(*tangents).")
    flat_p, p_spec = tree_flatten(primals)
    flat_t, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python structure. For example, if "
                           f"primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
                           f"{p_spec} and tangents with structure {t_spec}")
    for p, t in zip(flat_p, flat_t):
        if not isinstance(t, Tensor) or tuple(t.shape) != tuple(p.shape):
            raise RuntimeError(f"{api}: Expected primals and tangents to have the same shape, got {tuple(p.shape)} "
                               f"and {tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}")
    level = _Level(api)
    with fl.enable_grad():
        new_args, leaves, specs = _diff_args(primals, range(len(primals)), level)
        output, aux = _split_aux(func(*new_args), has_aux, api)
        flat_out, out_spec = tree_flatten(output)
        flat_leaves = [x for group in leaves for x in group]
        phys_out = [level.physical(o) for o in flat_out]
        tangent_out = _forward(phys_out, flat_leaves, [level.physical(t) for t in flat_t], level)
    out = tree_unflatten([level.finish(o) for o in flat_out], out_spec)
    jv = tree_unflatten([level.finish(_vmap.wrap_levels(j, level.vlevels)) for j in tangent_out], out_spec)
    if has_aux:
        return out, jv, _finish_aux(level, aux)
    return out, jv


def _forward(outputs, inputs, tangents, level):
    """``J·tangents`` for every output: the double-vjp identity (see the module docstring)."""
    floating = [o.dtype.is_floating_point for o in outputs]
    us = [fl.zeros_like(o).requires_grad_(True) if f else None for o, f in zip(outputs, floating)]
    level.own.update(grad_accumulator(u) for u in us if u is not None)
    pairs = [(o, u) for o, u in zip(outputs, us) if u is not None]
    gs = _grads([o for o, _ in pairs], inputs, [u for _, u in pairs])
    live = [(g, t) for g, t in zip(gs, tangents) if g.requires_grad]
    used = [u for u in us if u is not None]
    jv = _grads([g for g, _ in live], used, [t for _, t in live]) if live else [fl.zeros_like(u) for u in used]
    it = iter(jv)
    return [next(it) if f else fl.zeros_like(o) for o, f in zip(outputs, floating)]


# --- Jacobians ------------------------------------------------------------------------------------------
def _jacobian_tree(per_output, out_spec, leaves, specs, argnums_is_int):
    """Nest ``per_output[i][j]`` (output leaf i, input leaf j) as torch: output structure outside."""
    return tree_unflatten([_unflatten_grads(row, leaves, specs, argnums_is_int) for row in per_output], out_spec)


def _basis(n: int, like: Tensor, k: int, shape, nlevels: int):
    """The k-th unit vector of ``shape`` (dtype and device of ``like``), expanded over the vmap dims."""
    e = fl.zeros(n, dtype=like.dtype, device=like.device)
    e[k] = 1
    return e.reshape(shape).expand(*like.shape[:nlevels], *shape)


def _stack_rows(rows, batch_nd: int, out_shape, in_shape, like):
    """Rows (gradients w.r.t. one input) stacked into a Jacobian block of shape ``out_shape + in_shape``."""
    if not rows:  # an output with no element
        return fl.zeros(*like.shape[:batch_nd], *out_shape, *in_shape, dtype=like.dtype, device=like.device)
    return fl.stack(rows, batch_nd)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _jacobian_transform(func, argnums, has_aux: bool, api: str, blocks):
    """The wrapper shared by :func:`jacrev` and :func:`jacfwd`.

    ``blocks(level, nb, flat_out, flat_leaves)`` computes, under ``enable_grad``, one list of
    finished Jacobian blocks per flat output (one block per flat differentiated input).
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), api)
        level = _Level(api)
        nb = len(level.vlevels)
        with fl.enable_grad():
            new_args, leaves, specs = _diff_args(args, nums, level)
            output, aux = _split_aux(func(*new_args, **kwargs), has_aux, api)
            flat_out, out_spec = tree_flatten(output)
            flat_leaves = [x for group in leaves for x in group]
            per_output = blocks(level, nb, flat_out, flat_leaves)
        jac = _jacobian_tree(per_output, out_spec, leaves, specs, isinstance(argnums, int))
        if has_aux:
            return jac, _finish_aux(level, aux)
        return jac

    return wrapper


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False):
    """The Jacobian of ``func`` w.r.t. the arguments at ``argnums`` by reverse mode, as ``torch.func.jacrev``.

    For an output of shape ``O`` and an input of shape ``I`` the Jacobian has shape ``O + I``;
    pytrees of outputs and inputs give nested results (output structure outside). It is computed
    one output element at a time (one backward pass each).

    Args:
        func: a function of tensors returning a tensor or a pytree of tensors.
        argnums: the argument(s) to differentiate (int or tuple).
        has_aux: ``func`` returns ``(output, aux)``; then ``(jacobian, aux)`` is returned.
        chunk_size: accepted for torch compatibility (a positive int or None); rows are computed one at
            a time regardless, so it changes nothing but is validated.
    """
    if not (chunk_size is None or (isinstance(chunk_size, int) and chunk_size > 0)):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    def blocks(level, nb, flat_out, flat_leaves):
        api = level.api
        per_output = []
        for o in flat_out:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return only tensors, got {type(o)}")
            p = level.physical(o)
            shape = tuple(p.shape[nb:])
            n = _numel(shape)
            rows = [_grads([p], flat_leaves, [_basis(n, p, k, shape, nb)]) for k in range(n)]
            block = []
            for j, x in enumerate(flat_leaves):
                in_shape = tuple(x.shape[nb:])
                jac = _stack_rows([r[j] for r in rows], nb, shape, in_shape, x)
                block.append(level.finish(_vmap.wrap_levels(jac.reshape(*x.shape[:nb], *shape, *in_shape),
                                                            level.vlevels)))
            per_output.append(block)
        return per_output

    return _jacobian_transform(func, argnums, has_aux, "jacrev(f)(*args)", blocks)


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian of ``func`` w.r.t. the arguments at ``argnums`` by forward products, as ``torch.func.jacfwd``.

    Same result and structure as :func:`jacrev`, computed one input element at a time (one
    Jacobian-vector product each, see the module docstring): cheaper when inputs are fewer than outputs.

    Args:
        func, argnums, has_aux: as :func:`jacrev`.
        randomness: ``'error'``, ``'different'`` or ``'same'`` (validated; ``func`` runs once, so
            every column sees the same random numbers).
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")

    def blocks(level, nb, flat_out, flat_leaves):
        phys = [level.physical(o) for o in flat_out]
        us = [fl.zeros_like(p).requires_grad_(True) for p in phys]
        level.own.update(grad_accumulator(u) for u in us)
        gs = _grads(phys, flat_leaves, us)  # J^T u for every input, linear in u
        columns = []  # columns[j][k]: d outputs / d (input j, element k), one tensor per output
        for g, x in zip(gs, flat_leaves):
            in_shape = tuple(x.shape[nb:])
            n = _numel(in_shape)
            if g.requires_grad:
                flat_g = g.reshape(*x.shape[:nb], n)
                cols = [_grads([flat_g[(slice(None),) * nb + (k,)]], us,
                               [fl.ones(*x.shape[:nb], dtype=x.dtype, device=x.device)]) for k in range(n)]
            else:
                cols = [[fl.zeros_like(p) for p in phys] for _ in range(n)]
            columns.append((cols, in_shape))
        per_output = []
        for i, p in enumerate(phys):
            shape = tuple(p.shape[nb:])
            block = []
            for cols, in_shape in columns:
                parts = [c[i] for c in cols]
                jac = (fl.stack(parts, p.dim()) if parts else
                       fl.zeros(*p.shape, 0, dtype=p.dtype, device=p.device))
                jac = jac.reshape(*p.shape[:nb], *shape, *in_shape)
                block.append(level.finish(_vmap.wrap_levels(jac, level.vlevels)))
            per_output.append(block)
        return per_output

    return _jacobian_transform(func, argnums, has_aux, "jacfwd(f)(*args)", blocks)


def hessian(func, argnums=0):
    """The Hessian of scalar ``func`` w.r.t. the arguments at ``argnums``: ``jacfwd(jacrev(func))``.

    For an input of shape ``I`` the Hessian has shape ``I + I``.
    """
    return jacfwd(jacrev(func, argnums), argnums)
