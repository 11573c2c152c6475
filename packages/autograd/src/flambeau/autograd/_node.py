"""Graph nodes: what a tensor's ``grad_fn`` is.

A :class:`Node` is created when an operator runs with an input that requires grad. It holds the
edges to the nodes that produced its inputs (``next_functions``), the tensors its derivative
needs (:class:`~flambeau.autograd._saved.SavedTensor`), and the metadata of its inputs and
outputs needed to shape gradients. Leaves get an :class:`AccumulateGrad` node that adds
incoming gradients into ``tensor.grad``.

References only point backwards in time: output -> grad_fn -> saved inputs / next nodes, and
a leaf refers to its accumulator only weakly, so a graph nobody references is freed by
reference counting alone.
"""

from __future__ import annotations

import itertools
import weakref

from flambeau import Tensor

__all__ = ["Node", "AccumulateGrad", "AutogradMeta", "meta_of", "set_output_nr", "grad_accumulator",
           "edge_of"]

_sequence = itertools.count()
next_sequence = _sequence.__next__  # creation order of nodes: backward runs the newest ready node first


class AutogradMeta:
    """Per-tensor autograd state kept in ``Tensor._autograd_meta`` (created only when needed)."""

    __slots__ = ("output_nr", "grad_accumulator", "hooks", "post_accumulate_hooks", "retains_grad", "tangents",
                 "forward_only", "views", "__weakref__")

    def __init__(self):
        self.output_nr = 0
        self.grad_accumulator = None  # weakref to the leaf's AccumulateGrad
        self.hooks = None  # leaf tensors: list of gradient hooks
        self.post_accumulate_hooks = None  # leaf tensors: hooks called with the tensor after .grad was accumulated
        self.retains_grad = False
        self.tangents = None  # forward AD: {level: tangent}
        self.forward_only = False  # forward AD: _requires_grad is set only so that operators reach us
        self.views = None  # a non-leaf base: WeakSet of its views with history (Note [Views of a changed base])


def meta_of(t: Tensor) -> AutogradMeta:
    meta = t._autograd_meta
    if meta is None:
        meta = t._autograd_meta = AutogradMeta()
    return meta


def set_output_nr(t: Tensor, nr: int) -> None:
    meta_of(t).output_nr = nr


class Node:
    """A node of the backward graph (a tensor's ``grad_fn``).

    Attributes:
        next_functions: one ``(node, input_nr)`` pair per differentiable input slot; ``(None, 0)`` for
            inputs that don't require grad.
    """

    __slots__ = ("next_functions", "_sequence_nr", "_pre_hooks", "_post_hooks", "_tensor_hooks", "_trace",
                 "_released", "_metadata", "_nout", "__weakref__")

    def __init__(self):
        self.next_functions = ()
        self._sequence_nr = next_sequence()
        self._pre_hooks = None
        self._post_hooks = None
        self._tensor_hooks = None  # {output_nr: [hook, ...]} from Tensor.register_hook on outputs
        self._trace = None  # forward traceback under detect_anomaly
        self._released = False
        self._metadata = None
        self._nout = 1

    @property
    def metadata(self) -> dict:
        """A dict for users to attach information to the node."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def name(self) -> str:
        """The node's name, e.g. ``'MulBackward0'``."""
        return type(self).__name__

    def apply(self, grads: list) -> tuple:
        """Gradients w.r.t. the inputs (one per ``next_functions`` entry) from ``grads`` w.r.t. the outputs."""
        raise NotImplementedError

    def release(self) -> None:
        """Free saved tensors (after backward without ``retain_graph``)."""
        self._released = True

    def register_hook(self, fn):
        """Register ``fn(grad_inputs, grad_outputs)`` called after the node ran; it may return new grad_inputs."""
        if self._post_hooks is None:
            self._post_hooks = []
        self._post_hooks.append(fn)
        return _RemovableHandle(self._post_hooks, fn)

    def register_prehook(self, fn):
        """Register ``fn(grad_outputs)`` called before the node runs; it may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = []
        self._pre_hooks.append(fn)
        return _RemovableHandle(self._pre_hooks, fn)

    def _add_tensor_hook(self, output_nr: int, fn):
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        hooks = self._tensor_hooks.setdefault(output_nr, [])
        hooks.append(fn)
        return _RemovableHandle(hooks, fn)

    def __call__(self, *grads):
        return self.apply(list(grads))

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"


class _RemovableHandle:
    """Returned by hook registration; ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks: list, fn):
        self._hooks = hooks
        self._fn = fn

    def remove(self) -> None:
        try:
            self._hooks.remove(self._fn)
        except ValueError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class AccumulateGrad(Node):
    """The node of a leaf tensor: adds incoming gradients into ``variable.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable: Tensor):
        super().__init__()
        self.variable = variable

    def apply(self, grads: list) -> tuple:
        raise AssertionError("AccumulateGrad is run by the engine")  # pragma: no cover


def grad_accumulator(t: Tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad node (one per leaf while anything references it)."""
    meta = meta_of(t)
    ref = meta.grad_accumulator
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        meta.grad_accumulator = weakref.ref(acc)
    return acc


def edge_of(t: Tensor) -> tuple:
    """The ``(node, input_nr)`` edge through which gradient flows to ``t`` (``t`` requires grad)."""
    fn = t.grad_fn
    if fn is not None:
        meta = t._autograd_meta
        return (fn, 0 if meta is None else meta.output_nr)
    return (grad_accumulator(t), 0)
