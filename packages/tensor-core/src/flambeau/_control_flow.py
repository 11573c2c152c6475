"""torch's control-flow and asynchronous-call names, run eagerly: ``cond``, ``while_loop``, ``fork``, ``wait``.

flambeau has no graph to capture, so ``cond`` calls the branch ``pred`` picks, ``while_loop`` loops in
Python, and ``fork`` calls its function at once and returns a finished :class:`Future` whose ``wait()``
gives the result (torch.jit's futures run the call on another thread; the results are the same).
The argument checks are torch's.
"""

from __future__ import annotations

from collections.abc import Callable

from flambeau._tensor import Tensor

__all__ = ["Future", "fork", "wait", "cond", "while_loop"]


class Future:
    """The result of :func:`fork`: already computed (flambeau runs the call eagerly)."""

    __slots__ = ("_value",)

    def __init__(self, value=None) -> None:
        self._value = value

    def done(self) -> bool:
        """True: the call has run."""
        return True

    def wait(self):
        """The value the forked call returned."""
        return self._value

    value = wait

    def then(self, callback: Callable) -> Future:
        """A Future of ``callback(self)``, run now."""
        return Future(callback(self))

    def add_done_callback(self, callback: Callable) -> None:
        """Call ``callback(self)`` now (the future is done)."""
        callback(self)


def fork(func: Callable, *args, **kwargs) -> Future:
    """Call ``func(*args, **kwargs)`` now; return a :class:`Future` holding its result (``torch.jit.fork``)."""
    return Future(func(*args, **kwargs))


def wait(future: Future):
    """The result of a :func:`fork` (``torch.jit.wait``)."""
    if not isinstance(future, Future):
        raise TypeError(f"wait(): expected a Future, got {type(future).__name__}")
    return future.wait()


def _check_pred(pred) -> bool:
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
        return bool(pred.item())
    if not isinstance(pred, (bool, int)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    return bool(pred)


def cond(pred, true_fn: Callable, false_fn: Callable, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (``torch.cond``, run eagerly).

    Args:
        pred: a bool or a one-element tensor.
        true_fn, false_fn: callables taking the operands; torch requires both to return the same
            structure of tensors (not checked here, since only one runs).
        operands: a tuple or list of the arguments (a single tensor is taken as a one-tuple).

    Raises:
        RuntimeError: ``pred`` is not a bool or a one-element tensor.
    """
    if isinstance(operands, Tensor):
        operands = (operands,)
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple or a list, but got {type(operands).__name__}.")
    branch = true_fn if _check_pred(pred) else false_fn
    if not callable(branch):
        raise TypeError(f"'{type(branch).__name__}' object is not callable")
    return branch(*operands)


def while_loop(cond_fn: Callable, body_fn: Callable, carried_inputs):
    """Run ``carried = body_fn(*carried)`` while ``cond_fn(*carried)`` (``torch._higher_order_ops.while_loop``,
    eagerly); returns the final ``carried`` as a tuple.

    Raises:
        RuntimeError: ``cond_fn``/``body_fn`` not callable, ``carried_inputs`` not a tuple or list, or
            ``cond_fn`` returning neither a bool nor a one-element tensor.
    """
    if not callable(cond_fn) or not callable(body_fn):
        raise RuntimeError("Expect cond_fn and body_fn to be callable.")
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(f"Expect carried_inputs to be a tuple or a list, but got {type(carried_inputs).__name__}.")
    carried = tuple(carried_inputs)
    while _check_pred(cond_fn(*carried)):
        out = body_fn(*carried)
        carried = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return carried
