"""The engine: records operators as they run and executes backward passes.

tensor-core calls :meth:`Engine.record` for every operator that runs with grad mode on and an
input requiring grad (DESIGN.md seam 2), and :meth:`Engine.apply_inplace` for in-place operators
in that situation. Backward runs the recorded graph in dependency order: a node runs once every
node that feeds it a gradient has run; among ready nodes the most recently created runs first,
as in PyTorch.

A leaf's AccumulateGrad node runs, in torch's order: the leaf's tensor hooks, the node's pre hooks,
the accumulation into ``.grad``, the leaf's post-accumulate-grad hooks, the node's post hooks.
Callbacks queued during a backward pass (:func:`flambeau.autograd.graph.queue_callback`) run once
it ends, in the thread that ran it.
"""

from __future__ import annotations

import heapq
import sys
import weakref

import flambeau as fl
from flambeau import Tensor
from flambeau._backends import backend
from flambeau._grad_mode import state as grad_state
from flambeau.autograd import _anomaly
from flambeau.autograd import forward_ad as _forward_ad
from flambeau.autograd._anomaly import _state as _anomaly_state
from flambeau.autograd._derivatives import DERIVATIVES
from flambeau.autograd._gc import freeze_after_first_backward
from flambeau.autograd._inplace import apply_inplace as _apply_inplace
from flambeau.autograd._inplace import note_views as _note_views
from flambeau.autograd._node import AccumulateGrad, Node, _RemovableHandle, grad_accumulator, meta_of
from flambeau.autograd._opnode import OpNode
from flambeau.autograd._saved import FREED_MESSAGE
from flambeau.autograd.graph import _callbacks, queue_callback

__all__ = ["Engine", "ENGINE"]

class Engine:
    """The autograd engine installed into tensor-core."""

    # --- recording (called by tensor-core) ---------------------------------------------------------
    def record(self, op, inputs: tuple, attrs: dict, outputs) -> None:
        deriv = DERIVATIVES.get(op.name)
        if deriv is None:
            if op.differentiable:
                raise RuntimeError(f"the derivative for '{op.name}' is not implemented in flambeau-autograd")
            return
        if outputs.__class__ is Tensor and not outputs.dtype.is_differentiable:
            return  # integer and bool results never require grad (``x.long()``), as in torch
        if attrs and attrs.get("inplace"):
            raise RuntimeError(f"{op.name}_: in-place operators must go through Engine.apply_inplace")
        if _forward_ad._levels:
            self._record_forward(op, deriv, inputs, attrs, outputs)
            return
        node = OpNode.create(deriv, inputs, attrs, outputs)
        if op.view or (outputs.__class__ is Tensor and outputs._base is not None):  # (basic indexing is a view too)
            _note_views(outputs)  # Note [Views of a changed base]
        if _anomaly_state.enabled:
            node._trace = _anomaly.capture_trace()

    def _record_forward(self, op, deriv, inputs, attrs, outputs) -> None:
        """Recording while forward AD is active: propagate tangents; build a node only if grad is needed."""
        needs_backward = any(_really_requires_grad(x) for x in inputs)
        if needs_backward:
            OpNode.create(deriv, inputs, attrs, outputs)
        _forward_ad.propagate(op, inputs, attrs, outputs)

    def apply_inplace(self, op, inputs: tuple, attrs: dict):
        """Run in-place operator ``op`` on ``inputs[0]`` and record it (grad mode on, an input requires grad).

        The operator runs out of place on an alias of ``self``'s old value, the result is copied into
        ``self`` and ``self`` takes over the result's history; if ``self`` is a view, its base's history is
        rebased onto a :class:`CopySlices` node, as torch does. Operators that keep no old value and take
        no other tensor run on ``self`` itself (Note [In-place operators that keep no old value]).
        """
        out = _apply_inplace(op, inputs, attrs, direct=not _forward_ad._levels)
        if _anomaly_state.enabled and out.grad_fn is not None and getattr(out.grad_fn, "_trace", 1) is None:
            out.grad_fn._trace = _anomaly.capture_trace()  # a node recorded without record()
        return out

    # --- backward ---------------------------------------------------------------------------------
    def backward(self, tensors, grad_tensors, retain_graph, create_graph, inputs) -> None:
        tensors = _as_tuple(tensors, "tensors")
        grads = _make_grads(tensors, grad_tensors, "backward")
        if retain_graph is None:
            retain_graph = create_graph
        roots = [(_root_edge(t, i), g) for i, (t, g) in enumerate(zip(tensors, grads))]
        only = None
        if inputs is not None:
            inputs = _as_tuple(inputs, "inputs")
            if not inputs:
                raise RuntimeError("backward(): 'inputs' argument to backward() cannot be empty.")
            only = {}
            for t in inputs:
                if not t._requires_grad:
                    raise RuntimeError("One of the differentiated Tensors does not require grad")
                only[_input_edge(t)] = t
        _run(roots, lambda: _execute(roots, retain_graph, create_graph, capture=None, accumulate_only=only))

    def grad(self, outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
             allow_unused=False, materialize_grads=False):
        outputs = _as_tuple(outputs, "outputs")
        inputs = _as_tuple(inputs, "inputs")
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError(f"grad(): inputs[{i}] must be a Tensor, got {type(t).__name__}")
            if not t._requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
        grads = _make_grads(outputs, grad_outputs, "grad")
        if retain_graph is None:
            retain_graph = create_graph
        roots = [(_root_edge(t, i), g) for i, (t, g) in enumerate(zip(outputs, grads))]
        capture = {}
        for i, t in enumerate(inputs):
            capture.setdefault(_input_edge(t), []).append(i)
        captured = _run(roots, lambda: _execute(roots, retain_graph, create_graph, capture=capture,
                                                accumulate_only=None))
        result = []
        for i, t in enumerate(inputs):
            g = captured.get(i)
            if g is None:
                if materialize_grads:
                    g = fl.zeros_like(t)
                elif not allow_unused:
                    raise RuntimeError(
                        "One of the differentiated Tensors appears to not have been used in the graph. "
                        "Set allow_unused=True if this is the desired behavior."
                    )
            result.append(g)
        return tuple(result)

    # --- hooks ------------------------------------------------------------------------------------
    def register_hook(self, t: Tensor, hook):
        if not t._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if t.grad_fn is None:
            meta = meta_of(t)
            if meta.hooks is None:
                meta.hooks = []
            meta.hooks.append(hook)
            return _RemovableHandle(meta.hooks, hook)
        return t.grad_fn._add_tensor_hook(meta_of(t).output_nr, hook)

    def register_post_accumulate_grad_hook(self, t: Tensor, hook):
        """Register ``hook(t)``, called after a backward pass accumulated a gradient into leaf ``t``'s ``.grad``."""
        if not t._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if t.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        meta = meta_of(t)
        if meta.post_accumulate_hooks is None:
            meta.post_accumulate_hooks = []
        meta.post_accumulate_hooks.append(hook)
        return _RemovableHandle(meta.post_accumulate_hooks, hook)

    def queue_callback(self, callback) -> None:
        """Run ``callback()`` once the current backward pass ends (torch's ``_execution_engine.queue_callback``).

        Only during a backward pass (from a hook or a node); the callback runs in the thread running that
        pass, after its last node, with the pass's grad mode (``create_graph``), and is then forgotten.
        A callback may queue further callbacks: they run in the same pass.
        """
        queue_callback(callback)

    def retain_grad(self, t: Tensor) -> None:
        if not t._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if t.grad_fn is None:
            return  # leaves keep their gradient anyway
        meta = meta_of(t)
        if meta.retains_grad:
            return
        meta.retains_grad = True
        ref = weakref.ref(t)  # the node must not keep its output alive (no cycles)

        def store(grad):
            target = ref()
            if target is not None and grad is not None:
                target._grad = grad.detach().clone() if target._grad is None else target._grad + grad.detach()
            return None

        t.grad_fn._add_tensor_hook(meta.output_nr, store)


ENGINE = Engine()


# --- helpers ----------------------------------------------------------------------------------------


def _run(roots, execute):
    """Execute in the calling thread; one CUDA graph's backward at a time per device (Note [Backward in the
    calling thread])."""
    try:
        for _edge, g in roots:
            if g._device.type == "cuda":
                from flambeau.autograd._device_locks import run_serialised

                with fl.cuda.device(g._device.index):  # the graph's device is current in its backward (its handles)
                    return run_serialised(g._device, execute)
        return execute()
    finally:
        freeze_after_first_backward()  # once per process (Note [Freezing the import-time heap])


def _really_requires_grad(x) -> bool:
    if isinstance(x, Tensor):
        if not x._requires_grad:
            return False
        meta = x._autograd_meta
        return meta is None or not meta.forward_only
    if isinstance(x, (list, tuple)):
        return any(_really_requires_grad(y) for y in x)
    return False


def _as_tuple(x, name):
    if isinstance(x, Tensor):
        return (x,)
    if isinstance(x, (list, tuple)):
        return tuple(x)
    raise TypeError(f"{name} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _make_grads(outputs, grad_outputs, fname):
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs, "grad_tensors") if not isinstance(grad_outputs, (list, tuple)) \
            else tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"got {len(grad_outputs)} tensors in grad_tensors but {len(outputs)} in tensors")
    grads = []
    for i, (t, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fname}(): element {i} of tensors must be a Tensor, got {type(t).__name__}")
        if g is None:
            if not t._requires_grad:
                raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = fl.ones_like(t)
        elif not isinstance(g, Tensor):
            g = fl.full(tuple(t.shape), g, dtype=t.dtype, device=t.device)
        else:
            if tuple(g.shape) != tuple(t.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a shape "
                    f"of {t.shape}."
                )
            if g.device != t.device:
                raise RuntimeError(f"grad_output[{i}] is on {g.device} but output[{i}] is on {t.device}")
        if not t._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        grads.append(g)
    return grads


def _root_edge(t: Tensor, i: int):
    if t.grad_fn is not None:
        meta = t._autograd_meta
        return (t.grad_fn, 0 if meta is None else meta.output_nr)
    return (grad_accumulator(t), 0)


def _input_edge(t: Tensor):
    return _root_edge(t, 0)


def _needed_nodes(roots, capture_nodes):
    """Nodes from which some captured node is reachable (only those run in ``grad``)."""
    needed = {}
    for (root, _), _g in roots:
        stack = [(root, iter(root.next_functions))]
        if root in needed:
            continue
        needed[root] = root in capture_nodes
        while stack:
            node, it = stack[-1]
            for nxt, _nr in it:
                if nxt is None:
                    continue
                if nxt not in needed:
                    needed[nxt] = nxt in capture_nodes
                    stack.append((nxt, iter(nxt.next_functions)))
                    break
                if needed[nxt]:
                    needed[node] = True
            else:
                stack.pop()
                if stack and needed[node]:
                    needed[stack[-1][0]] = True
    return needed


def _execute(roots, keep_graph: bool, create_graph: bool, capture, accumulate_only):
    """Run backward from ``roots`` = [((node, input_nr), grad), ...].

    With ``capture`` = {(node, nr): [input indices]} gradients arriving there are returned instead of
    accumulated; with ``accumulate_only`` = {(node, nr): tensor} only those leaves/tensors get ``.grad``.
    """
    # Dependencies: how many edges point at each node from nodes reachable from the roots.
    deps: dict = {}
    seen = set()
    stack = []
    for (node, _nr), _g in roots:
        if node not in seen:
            seen.add(node)
            stack.append(node)
    while stack:
        node = stack.pop()
        for nxt, _nr in node.next_functions:
            if nxt is None:
                continue
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)

    needed = None
    if capture is not None:
        needed = _needed_nodes(roots, {n for n, _ in capture})
    elif accumulate_only is not None:
        needed = _needed_nodes(roots, {n for n, _ in accumulate_only})

    buffers: dict = {}
    for (node, nr), g in roots:
        _add_to_buffer(buffers, node, nr, g)
    heap = []
    for node in {n for (n, _), _g in roots}:
        if deps.get(node, 0) == 0:
            heapq.heappush(heap, (-node._sequence_nr, id(node), node))

    captured = {}
    prev_mode = grad_state.enabled
    grad_state.enabled = create_graph
    heappush, heappop = heapq.heappush, heapq.heappop
    callbacks_stack = _callbacks.stack
    callbacks: list = []
    callbacks_stack.append(callbacks)
    try:
        while heap:
            node = heappop(heap)[2]
            buf = buffers.pop(node, None) or {}
            nout = node._nout
            grads = [buf.get(0)] if nout == 1 and len(buf) <= 1 else \
                [buf.get(i) for i in range(max(nout, 1 + max(buf, default=0)))]
            buf = None  # drop the buffer's references so that AccumulateGrad may steal a gradient
            is_accumulator = node.__class__ is AccumulateGrad
            if node._tensor_hooks is not None or (is_accumulator and node.variable._autograd_meta is not None
                                                  and node.variable._autograd_meta.hooks):
                _run_tensor_hooks(node, grads)
            if capture is not None:
                for i, g in enumerate(grads):
                    for idx in capture.get((node, i), ()):
                        captured[idx] = g
            if accumulate_only is not None and not is_accumulator:
                for i, g in enumerate(grads):
                    t = accumulate_only.get((node, i))
                    if t is not None and g is not None:
                        _accumulate(t, g, create_graph)
            if is_accumulator:
                if capture is None and (accumulate_only is None or (node, 0) in accumulate_only):
                    if node._pre_hooks is not None or node._post_hooks is not None:
                        _run_accumulator_with_hooks(node, grads, create_graph)
                        continue
                    if grads[0] is not None:
                        _accumulate(node.variable, grads[0], create_graph)
                        meta = node.variable._autograd_meta
                        if meta.post_accumulate_hooks:
                            _run_post_accumulate_hooks(node.variable, meta.post_accumulate_hooks)
                continue
            if needed is not None and not needed.get(node, False):
                continue
            outs = _call_node(node, grads, keep_graph)
            for (nxt, nr), g in zip(node.next_functions, outs):
                if nxt is None:
                    continue
                if g is not None:
                    nbuf = buffers.get(nxt)
                    if nbuf is None:
                        buffers[nxt] = {nr: g}
                    else:
                        prev = nbuf.get(nr)
                        if prev is None:
                            nbuf[nr] = g
                        elif not create_graph and _summable_into(prev, g) and _stealable(prev):
                            prev.add_(g)  # Note [Gradients summed in place]
                        else:
                            nbuf[nr] = prev + g
                        prev = None
                d = deps[nxt] - 1
                deps[nxt] = d
                if d == 0:
                    heappush(heap, (-nxt._sequence_nr, id(nxt), nxt))
            outs = g = None  # the buffers hold the gradients now: let AccumulateGrad steal them
        i = 0
        while i < len(callbacks):  # end of the pass: queued callbacks (they may queue more)
            callbacks[i]()
            i += 1
    finally:
        callbacks_stack.pop()  # after an error the queued callbacks are dropped, as in torch
        grad_state.enabled = prev_mode
    return captured


def _add_to_buffer(buffers, node, nr, g):
    buf = buffers.get(node)
    if buf is None:
        buffers[node] = {nr: g}
    else:
        prev = buf.get(nr)
        buf[nr] = g if prev is None else prev + g


def _run_tensor_hooks(node, grads):
    if type(node) is AccumulateGrad:
        meta = node.variable._autograd_meta
        hooks = {0: meta.hooks} if meta is not None and meta.hooks else None
    else:
        hooks = node._tensor_hooks
    if hooks:
        for nr, fns in hooks.items():
            for fn in list(fns):
                if grads[nr] is None:
                    break
                r = fn(grads[nr])
                if r is not None:
                    grads[nr] = r


def _run_accumulator_with_hooks(node: AccumulateGrad, grads: list, create_graph: bool) -> None:
    """An AccumulateGrad node with pre or post hooks (``node.register_prehook`` / ``register_hook``)."""
    if node._pre_hooks:
        for fn in list(node._pre_hooks):
            r = fn(tuple(grads))
            if r is not None:
                grads[:] = r
    g = grads[0]
    if g is not None:
        grads[0] = None  # only ``g`` refers to the gradient now, so that _accumulate may steal it
        _accumulate(node.variable, g, create_graph)
        grads[0] = g
        meta = node.variable._autograd_meta
        if meta.post_accumulate_hooks:
            _run_post_accumulate_hooks(node.variable, meta.post_accumulate_hooks)
    if node._post_hooks:
        for fn in list(node._post_hooks):
            fn((), tuple(grads))  # an AccumulateGrad has no grad_inputs: what it returns is ignored


def _run_post_accumulate_hooks(var: Tensor, hooks: list) -> None:
    for fn in list(hooks):
        if fn(var) is not None:
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def _call_node(node: Node, grads: list, keep_graph: bool):
    if node._released:
        raise RuntimeError(FREED_MESSAGE)
    if node._pre_hooks is None and node._post_hooks is None and node._trace is None:
        outs = node.apply(grads)  # the common case, without hooks or anomaly mode
        if not keep_graph:
            node.release()
        return outs
    if node._pre_hooks:
        for fn in node._pre_hooks:
            r = fn(tuple(grads))
            if r is not None:
                grads = list(r)
    try:
        outs = node.apply(grads)
    except Exception as e:
        if node._trace is not None:
            _anomaly.report(node, e)
        raise
    if node._post_hooks:
        for fn in node._post_hooks:
            r = fn(tuple(outs), tuple(grads))
            if r is not None:
                outs = tuple(r)
    if node._trace is not None:
        _anomaly.check_nan(node, outs)
    if not keep_graph:
        node.release()
    return outs


def _accumulate(var: Tensor, g: Tensor, create_graph: bool) -> None:
    """Add ``g`` into ``var.grad`` (PyTorch's AccumulateGrad)."""
    if g.shape != var.shape:  # ``var.data`` was replaced after the graph recorded its old shape (sparse: its own)
        raise RuntimeError(f"Function AccumulateGrad returned an invalid gradient - got {list(g.shape)} but "
                           f"expected shape compatible with {list(var.shape)} (the leaf's .data was replaced "
                           "after the graph was recorded)")
    if create_graph:
        var._grad = g if var._grad is None else var._grad + g
        return
    if var._grad is None:
        # Steal the incoming gradient when nothing else can see it; else copy it so that later in-place
        # accumulation cannot write into another tensor's memory.
        if _stealable(g):
            var._grad = g.detach() if g._requires_grad else g
        else:
            var._grad = g.detach().clone()
    else:
        var._grad.add_(g.detach())


# Note [Gradients summed in place]: a tensor used twice in the forward (a residual block's input: the convolution
# and the shortcut) gets two gradients, which the engine sums before its node runs. ``prev + g`` allocated a third
# tensor of the activation's size (on a GPU, the second training step of a ResNet-18 at batch 128 made a raw
# device allocation for it); torch's InputBuffer adds into the first gradient where nothing else can see it, and
# so does the engine: outside create_graph, when ``prev`` is a dense tensor of ``g``'s shape, dtype and device
# that only the buffer refers to (a gradient handed to two inputs, as ``add``'s is, or a view of another, never;
# sparse gradients and tensor subclasses are summed out of place).
def _summable_into(prev: Tensor, g: Tensor) -> bool:
    """Whether ``prev + g`` is ``prev``'s kind of tensor (Note [Gradients summed in place]): two dense tensors (a
    sparse sum stays out of place) of one shape, dtype and device, ``prev`` neither ``g`` nor a view nor requiring
    grad. Whether anything else can reach ``prev`` is :func:`_stealable`'s question."""
    return (prev.__class__ is Tensor and g.__class__ is Tensor and prev is not g and prev._base is None
            and not prev._requires_grad and prev.dtype is g.dtype and prev._device is g._device
            and prev._data.shape == g._data.shape)


def _stealable(g: Tensor) -> bool:
    """Whether nothing but the engine can reach ``g``'s memory, so that ``.grad`` may take it as is, or another
    gradient be summed into it (Note [Gradients summed in place]).

    References to ``g``: the engine's (the grads list, or the buffer), the caller's (``_accumulate``'s argument, or
    ``_execute``'s local), this argument and getrefcount's. A view is stealable when its base tensor is a dead
    temporary that only the view refers to.
    """
    if not g.is_contiguous() or sys.getrefcount(g) > 4:
        return False
    base = g._base
    if base is None:
        return sys.getrefcount(g._storage) == 2 and backend(g._device.type).owns_memory_alone(g._data)
    # base: g._base, the local, getrefcount's argument; storage: g's, the base's, the argument.
    return sys.getrefcount(base) <= 3 and sys.getrefcount(g._storage) == 3
