"""Custom differentiable functions: subclass :class:`Function` with ``forward`` and ``backward``.

Example::

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)

As in PyTorch, ``ctx`` *is* the node that ends up as the outputs' ``grad_fn``.
"""

from __future__ import annotations

import functools

import flambeau as fl
from flambeau import Tensor
from flambeau._grad_mode import state as grad_state
from flambeau.autograd import _anomaly
from flambeau.autograd._node import Node, edge_of, set_output_nr
from flambeau.autograd._opnode import reduce_grad
from flambeau.autograd._saved import FREED_MESSAGE, SavedTensor

__all__ = ["Function", "FunctionCtx", "once_differentiable", "BackwardCFunction"]


class FunctionCtx:
    """What ``forward`` and ``backward`` receive as ``ctx``: save tensors, mark outputs, pass state."""

    def save_for_backward(self, *tensors) -> None:
        """Save tensors (or None) for backward; read them back with :attr:`saved_tensors`."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type(t).__name__}")
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to :meth:`save_for_backward` (RuntimeError if modified in place since)."""
        saved = self.__dict__.get("_saved")
        if saved is None:
            if self.__dict__.get("_released"):
                raise RuntimeError(FREED_MESSAGE)
            return tuple(self.__dict__.get("_to_save", ()))
        return tuple(None if s is None else s.unpack(self) for s in saved)

    def mark_dirty(self, *tensors) -> None:
        """Declare inputs that ``forward`` modified in place (they must be returned as outputs)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Declare outputs that are not differentiable (e.g. indices); they won't require grad."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether undefined output gradients reach ``backward`` as zeros (default) or as None."""
        self._materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The node of a custom Function application (also its ``ctx``)."""

    _function_cls: type

    def __init__(self):
        Node.__init__(self)
        self._materialize_grads = True
        self._out_metas = ()
        self._nout = 1

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grads: list) -> tuple:
        if self._released and self.__dict__.get("_saved") is not None:
            raise RuntimeError(FREED_MESSAGE)
        grads = list(grads) + [None] * (len(self._out_metas) - len(grads))
        if self._materialize_grads:
            grads = [fl.zeros(m[0], dtype=m[1], device=m[2]) if g is None and m is not None else g
                     for g, m in zip(grads, self._out_metas)]
        result = self._function_cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_inputs = len(self._input_metas)
        if len(result) < n_inputs or any(r is not None for r in result[n_inputs:]):
            raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients "
                               f"(expected {n_inputs}, got {len(result)})")
        out = []
        for i, (g, meta) in enumerate(zip(result, self._input_metas)):
            if meta is None:
                continue  # not a tensor requiring grad: its gradient (if any) is dropped
            if g is None:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(f"function {self.name()} returned a gradient of type {type(g).__name__} "
                                f"at index {i}; expected a Tensor or None")
            if tuple(g.shape) != meta[0]:
                try:
                    g = reduce_grad(g, meta[0], meta[1], meta[2])
                except RuntimeError:
                    raise RuntimeError(f"Function {self.name()} returned an invalid gradient at index {i} - got "
                                       f"{list(g.shape)} but expected shape compatible with {list(meta[0])}") from None
            out.append(g)
        return tuple(out)

    def release(self) -> None:
        self._released = True
        saved = self.__dict__.get("_saved")
        if saved is not None:
            for s in saved:
                if s is not None:
                    s.release()
            self._saved = None


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_cls = type(f"{name}Backward", (BackwardCFunction,), {"_function_cls": cls})


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable operations; call them with ``MyFunction.apply(*args)``.

    Subclasses define ``forward(ctx, *args, **kwargs)`` (runs with grad mode off) and
    ``backward(ctx, *grad_outputs)`` returning one gradient (or None) per ``forward`` argument; or, in the newer
    style, ``forward(*args)`` without ``ctx`` and :meth:`setup_context`.
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs: tuple, output):
        """The newer style (torch's, ``torch.func``'s): ``forward(*args)`` takes no ``ctx``, and this saves what
        the backward needs from the ``inputs`` (``args``) and the ``output``. Define it to use that style."""
        raise NotImplementedError("setup_context is not implemented.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        recording = grad_state.enabled and any(ctx.needs_input_grad)
        prev = grad_state.enabled
        grad_state.enabled = False
        try:
            if cls.setup_context is Function.setup_context:
                outputs = cls.forward(ctx, *args, **kwargs)
            else:  # the forward takes no ctx; setup_context fills it from the inputs and the output
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, outputs)
        finally:
            grad_state.enabled = prev
        if not recording:
            return outputs
        return _wrap_outputs(ctx, args, outputs)


def _wrap_outputs(ctx: BackwardCFunction, args: tuple, outputs):
    single = not isinstance(outputs, tuple)
    outs = (outputs,) if single else outputs
    dirty = {id(t) for t in ctx.__dict__.get("_dirty", ())}
    non_diff = {id(t) for t in ctx.__dict__.get("_non_differentiable", ())}
    ctx._input_metas = [(tuple(a.shape), a.dtype, a._device) if isinstance(a, Tensor) and a._requires_grad else None
                        for a in args]
    ctx.next_functions = tuple(edge_of(a) for a in args if isinstance(a, Tensor) and a._requires_grad)
    input_ids = {id(a) for a in args if isinstance(a, Tensor)}
    result, metas = [], []
    for i, out in enumerate(outs):
        if not isinstance(out, Tensor):
            result.append(out)
            metas.append(None)
            continue
        if id(out) in dirty:
            if out.grad_fn is None and out._requires_grad:
                raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
        elif id(out) in input_ids:
            out = out.detach()  # an input returned as is becomes a new tensor with this node's history
        metas.append((tuple(out.shape), out.dtype, out._device))
        if id(outs[i]) in non_diff or not out.dtype.is_differentiable:
            out._requires_grad = False
            result.append(out)
            continue
        out.grad_fn = ctx
        out._requires_grad = True
        if i:
            set_output_nr(out, i)
        result.append(out)
    ctx._out_metas = metas
    ctx._nout = len(outs)
    if _anomaly.enabled():
        ctx._trace = _anomaly.capture_trace()
    to_save = ctx.__dict__.pop("_to_save", None)
    if to_save is not None:
        out_ids = {id(t) for t in result if isinstance(t, Tensor)}
        ctx._saved = [None if t is None else SavedTensor(t, ctx, id(t) in out_ids) for t in to_save]
    return result[0] if single else tuple(result)


def once_differentiable(backward):
    """Decorator for ``Function.backward`` that is not itself differentiable.

    The backward runs with grad mode off; differentiating its result again raises an error.
    """

    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with fl.no_grad():
            result = backward(ctx, *grads)
        if not (grad_state.enabled and any(isinstance(g, Tensor) and g._requires_grad for g in grads)):
            return result
        results = result if isinstance(result, tuple) else (result,)
        needing = [g for g in grads if isinstance(g, Tensor) and g._requires_grad]
        wrapped = tuple(_DelayedError.apply(r, *needing) if isinstance(r, Tensor) else r for r in results)
        return wrapped if isinstance(result, tuple) else wrapped[0]

    return wrapper


class _DelayedError(Function):
    """Identity on its first input whose backward fails: the result of a once_differentiable backward."""

    @staticmethod
    def forward(ctx, x, *grads):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")
