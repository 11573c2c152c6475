"""Saved tensors: what a node keeps for its backward, checked against in-place changes.

A node saves the tensors its formulas need together with their version (Note [Version
counter] in tensor-core). Unpacking compares versions, so an in-place change between forward
and backward raises instead of silently computing a wrong gradient (paper, section 4.3).

A node must not hold its own output strongly with its ``grad_fn`` set (output -> grad_fn ->
saved output would be a reference cycle, freed only by the garbage collector). An output is
therefore saved as a detached alias sharing its storage, and unpacking re-attaches the node.
"""

from __future__ import annotations

from flambeau import Tensor
from flambeau._grad_mode import state as grad_state
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
                 "_unpack_hook")

    def __init__(self, tensor: Tensor, node, is_output: bool):
        self._version = tensor._storage._version
        meta = tensor._autograd_meta
        self._output_nr = 0 if meta is None else meta.output_nr
        self._requires_grad = tensor._requires_grad
        stack = _hook_state.stack
        hooks = stack[-1] if stack else None
        if is_output:
            # Saved before the node marks its outputs: a floating output is about to require grad.
            self._requires_grad = tensor.dtype.is_floating_point
            self._output_of = True
            self._grad_fn = None
            self._data = tensor.detach()
        else:
            self._output_of = False
            self._grad_fn = tensor.grad_fn
            self._data = tensor
        if hooks is not None:
            pack, unpack = hooks
            self._packed = pack(self._data if not is_output else tensor)
            self._unpack_hook = unpack
            self._data = None
        else:
            self._packed = None
            self._unpack_hook = None

    def unpack(self, node) -> Tensor:
        """The saved tensor; RuntimeError if it was freed or modified in place since it was saved."""
        if self._unpack_hook is not None:
            t = self._unpack_hook(self._packed)
            if not isinstance(t, Tensor):
                raise TypeError(f"saved_tensors_hooks: unpack hook must return a Tensor, got {type(t).__name__}")
            return t
        t = self._data
        if t is None:
            raise RuntimeError(FREED_MESSAGE)
        if t._storage._version != self._version:
            raise RuntimeError(_modified_message(t, self, node))
        if self._output_of and grad_state.enabled:
            # Re-attach the producing node so that create_graph can differentiate through it.
            out = t.detach()
            out.grad_fn = node
            out._requires_grad = self._requires_grad
            if self._output_nr:
                from flambeau.autograd._node import set_output_nr

                set_output_nr(out, self._output_nr)
            return out
        return t

    def release(self) -> None:
        self._data = None
        self._packed = None


def _output_nr(t: Tensor) -> int:
    meta = t._autograd_meta
    return 0 if meta is None else meta.output_nr


def _type_name(t: Tensor) -> str:
    from flambeau._tensor import _TYPE_NAMES

    return f"flambeau.{'cuda.' if t.is_cuda else ''}{_TYPE_NAMES[t.dtype]}"


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
