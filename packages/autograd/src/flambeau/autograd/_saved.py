"""Saved tensors: what a node keeps for its backward, checked against in-place changes.

A node saves the tensors its formulas need together with their version (Note [Version
counter] in tensor-core). Unpacking compares versions, so an in-place change between forward
and backward raises instead of silently computing a wrong gradient (paper, section 4.3).

A node must not hold its own output strongly with its ``grad_fn`` set (output -> grad_fn ->
saved output would be a reference cycle, freed only by the garbage collector). An output is
therefore saved as a detached alias sharing its storage, and unpacking re-attaches the node.

Under forward AD an output gets its tangent only after its node is built, and the detached alias
would not carry it: the saved tensor keeps the output's autograd meta (which holds the tangent
and no reference back to the output, so no cycle) and unpacking attaches that tangent again, as
torch's SavedVariable keeps the forward grad. Without it, forward-over-reverse (``jacfwd(jacrev(f))``)
would miss every term that flows through a saved result (``exp``, ``tanh``, ``softmax`` ...).

With saved-tensor hooks (:mod:`flambeau.autograd.graph`), the hook's unpacked tensor is
re-attached to the graph the same way (to this node for an output, to the saved tensor's own
``grad_fn`` or leaf accumulator for an input), so that double backward works through hooks, e.g.
through :func:`flambeau.utils.checkpoint.checkpoint`.
"""

from __future__ import annotations

import weakref

from flambeau import Tensor
from flambeau._grad_mode import state as grad_state
from flambeau.autograd import forward_ad as _forward_ad
from flambeau.autograd._node import grad_accumulator, meta_of
from flambeau.autograd.graph import _state as _hook_state

__all__ = ["SavedTensor", "FREED_MESSAGE"]

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    Args:
        tensor: the tensor to save.
        is_output: whether ``tensor`` is an output of the node saving it (see module docstring).
    """

    __slots__ = ("_data", "_version", "_output_of", "_requires_grad", "_grad_fn", "_output_nr", "_packed",
                 "_unpack_hook", "_fw", "_accumulator")

    def __init__(self, tensor: Tensor, node, is_output: bool):
        self._version = tensor._storage._version
        meta = tensor._autograd_meta
        self._output_nr = 0 if meta is None else meta.output_nr
        self._requires_grad = tensor._requires_grad
        stack = _hook_state.stack
        hooks = stack[-1] if stack else None
        self._fw = None
        self._accumulator = None
        if is_output:
            # Saved before the node marks its outputs: a floating output is about to require grad.
            self._requires_grad = tensor.dtype.is_differentiable
            self._output_of = True
            self._grad_fn = None
            self._data = tensor.detach()
            levels = _forward_ad._levels
            if levels:  # the output's tangent arrives after this: keep its meta (see module docstring)
                self._fw = (meta_of(tensor), levels[-1], _forward_ad._duals[levels[-1]])
        else:
            self._output_of = False
            self._grad_fn = tensor.grad_fn
            self._data = tensor
        if hooks is not None:
            pack, unpack = hooks
            self._packed = pack(self._data if not is_output else tensor)
            self._unpack_hook = unpack
            self._data = None
            if not is_output and self._requires_grad and self._grad_fn is None:
                self._accumulator = grad_accumulator(tensor)  # the node's edge holds it already
        else:
            self._packed = None
            self._unpack_hook = None

    def unpack(self, node) -> Tensor:
        """The saved tensor; RuntimeError if it was freed or modified in place since it was saved."""
        if self._unpack_hook is not None:
            if self._packed is None:
                raise RuntimeError(FREED_MESSAGE)
            t = self._unpack_hook(self._packed)
            if not isinstance(t, Tensor):
                raise TypeError(f"saved_tensors_hooks: unpack hook must return a Tensor, got {type(t).__name__}")
            if grad_state.enabled and self._requires_grad:
                t = self._reattach(t.detach(), node)
            return t
        t = self._data
        if t is None:
            raise RuntimeError(FREED_MESSAGE)
        if t._storage._version != self._version:
            raise RuntimeError(_modified_message(t, self, node))
        if self._output_of and grad_state.enabled:
            # Re-attach the producing node so that create_graph can differentiate through it.
            t = self._reattach(t.detach(), node)
        if self._fw is not None:
            t = self._with_tangent(t)
        return t

    def _reattach(self, out: Tensor, node) -> Tensor:
        """``out`` (a detached value) given the history of the tensor that was saved."""
        if self._output_of:
            out.grad_fn = node
        elif self._grad_fn is not None:
            out.grad_fn = self._grad_fn
        elif self._accumulator is not None:
            meta_of(out).grad_accumulator = weakref.ref(self._accumulator)
        out._requires_grad = self._requires_grad  # False for an integer output (indices)
        if self._output_nr and out.grad_fn is not None:
            meta_of(out).output_nr = self._output_nr
        return out

    def _with_tangent(self, t: Tensor) -> Tensor:
        """``t`` carrying the tangent the saved output got at its forward-AD level, if that level is open."""
        meta, level, duals = self._fw
        tangent = meta.tangents.get(level) if meta.tangents else None
        if tangent is None or _forward_ad._duals.get(level) is not duals:
            return t
        if t is self._data:
            t = t.detach()  # never attach to the stored alias: it outlives the level
        _forward_ad._attach(t, tangent, level)
        return t

    def release(self) -> None:
        self._data = None
        self._packed = None
        self._fw = None


def _output_nr(t: Tensor) -> int:
    meta = t._autograd_meta
    return 0 if meta is None else meta.output_nr


def _type_name(t: Tensor) -> str:
    return t.type()  # 'torch.FloatTensor', 'torch.cuda.DoubleTensor' ... (as torch's message)


def _modified_message(t: Tensor, saved: SavedTensor, node) -> str:
    if saved._output_of:
        where = f", which is output {saved._output_nr} of {node.name()},"
    elif saved._grad_fn is not None:
        where = f", which is output {saved._output_nr} of {saved._grad_fn.name()},"
    else:
        where = ""
    return (
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{_type_name(t)} {list(t.shape)}]{where} is at version {t._storage._version}; expected version "
        f"{saved._version} instead. Hint: enable anomaly detection to find the operation that failed to "
        "compute its gradient, with flambeau.autograd.set_detect_anomaly(True)."
    )
